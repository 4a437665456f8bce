"""Argument types shared by the subcommands: each refuses with one line that says what it expected."""

from __future__ import annotations

import argparse

__all__ = ["count", "positive"]


def count(text: str) -> int | None:
    """A positive integer written as digits or as an exact float like 1e6; None otherwise."""
    try:
        return v if (v := int(text)) >= 1 else None
    except ValueError:
        pass
    try:
        f = float(text)
    except ValueError:
        return None
    return int(f) if f.is_integer() and 1 <= f < 2**63 else None


def positive(text: str) -> int:
    """argparse type: an integer >= 1 (digits, or an exact float such as 1e6)."""
    v = count(text.strip())
    if v is None:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v
