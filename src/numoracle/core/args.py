"""Strict argument checks shared by the public functions: a bool is a bool, an int is an int.

Python would take ``ftz="no"`` as true and ``sr_bits=True`` as 1; numoracle refuses both,
naming the argument and what it takes. numpy's ``bool_`` and integer scalars are accepted as
what they are.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .errors import ArgumentTypeError, NumoracleError

__all__ = ["check_bool", "check_int"]


def check_bool(x: Any, name: str) -> bool:
    """``x`` as a bool; refuses anything that is not a Python or numpy bool (strings, ints, None)."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    raise ArgumentTypeError(f"{name} must be True or False, got {type(x).__name__} {x!r:.40}")


def check_int(x: Any, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """``x`` as an int in [lo, hi]; refuses bools, floats (even 2.0), strings and None."""
    count = lo == 0 and (hi is None or hi >= 2**62)
    what = "a count >= 0 (an int)" if count else "an int"
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise ArgumentTypeError(f"{name} must be {what}, got {type(x).__name__} {x!r:.40}")
    v = int(x)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        if count and v < 0:
            raise NumoracleError(f"{name} must be {what}, got {v}")
        lo_s = "" if lo is None else f"{lo:#x}" if lo > 2**16 else str(lo)
        hi_s = "" if hi is None else f"{hi:#x}" if hi > 2**16 else str(hi)
        raise NumoracleError(f"{name} must lie in [{lo_s}, {hi_s}], got {v:.6g}" if abs(v) > 2**64 else
                             f"{name} must lie in [{lo_s}, {hi_s}], got {v}")
    return v
