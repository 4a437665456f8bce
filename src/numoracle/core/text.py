"""Text of exact things, in one place: codes in hex at their format's width, and exact values as short text.

Reports, tables and the CLI all print codes through :func:`hex_code` (``0x3c00`` for FP16, ``0x7f`` for FP8), so
one format always prints at one width; exact values print through :func:`format_value`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

__all__ = ["hex_width", "hex_code", "format_value"]


def hex_width(fmt: Any) -> int:
    """Hex digits that hold every code of ``fmt`` (4 bits a digit, rounded up: FP16 4, FP8 2, FP6 2, FP4 1)."""
    return (fmt.bits + 3) // 4


def hex_code(code: int, fmt: Any) -> str:
    """``code`` as ``0x`` and exactly :func:`hex_width` digits."""
    return f"0x{int(code):0{hex_width(fmt)}x}"


def format_value(v: Fraction) -> str:
    """A short exact rendering: ``65520``, ``0.75``, ``2^-24``, ``1+2^-11``, ``255*2^120``."""
    if v < 0:
        s = format_value(-v)
        return f"-({s})" if "+" in s else f"-{s}"
    if v == 0:
        return "0"
    n, d = v.numerator, v.denominator
    if d == 1 and n < 10**12:
        return str(n)
    if d == 1 and len(str(n).rstrip("0")) <= 3:
        digits = str(n).rstrip("0")
        k = len(str(n)) - len(digits)
        return f"{digits[0]}{'.' + digits[1:] if len(digits) > 1 else ''}e{k + len(digits) - 1}"
    if d & (d - 1) == 0:  # dyadic: n / 2^k
        if n & (n - 1) == 0:
            return f"2^{n.bit_length() - d.bit_length()}"
        k = d.bit_length() - 1
        digits = str(n * 5**k).rstrip("0")
        if len(digits.lstrip("0")) <= 8 and d > 1:
            whole, frac = divmod(n * 5**k, 10**k)
            return f"{whole}.{str(frac).zfill(k).rstrip('0')}"
        bits = [i for i in range(n.bit_length()) if n >> i & 1]
        if len(bits) <= 3:
            return "+".join(_pow_text(i - k) for i in reversed(bits))
        t = (n & -n).bit_length() - 1
        return f"{n >> t}*2^{t - k}"
    return str(v)


def _pow_text(e: int) -> str:
    return {0: "1", 1: "2"}.get(e, f"2^{e}")
