"""Text of exact things, in one place: codes in hex at their format's width, and exact values as short text.

Reports, tables and the CLI all print codes through :func:`hex_code` (``0x3c00`` for FP16, ``0x7f`` for FP8), so
one format always prints at one width.
"""

from __future__ import annotations

from typing import Any

__all__ = ["hex_width", "hex_code"]


def hex_width(fmt: Any) -> int:
    """Hex digits that hold every code of ``fmt`` (4 bits a digit, rounded up: FP16 4, FP8 2, FP6 2, FP4 1)."""
    return (fmt.bits + 3) // 4


def hex_code(code: int, fmt: Any) -> str:
    """``code`` as ``0x`` and exactly :func:`hex_width` digits."""
    return f"0x{int(code):0{hex_width(fmt)}x}"
