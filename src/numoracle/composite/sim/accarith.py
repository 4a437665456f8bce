"""Exact arithmetic of a compute format of at most 24 bits (the composite models' one place for it): a + b and
a b + c rounded to odd at 53 bits (TwoSum's error as the sticky bit) then once to the format; a b and a / b
rounded in float64 then to the format, innocuous for p <= 24 (53 >= 2p + 2, Figueroa 1995). Values in and out are
float64 holding values of the format; rounding is to nearest even (``core.convert.cast``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.eft import two_sum_error
from ...core.engine.convert import cast, decode
from ...core.formats.format import Format, format_of

__all__ = ["acc_format", "round_to", "add", "fma", "mul", "div"]

def acc_format(acc: Any) -> Format:
    f = format_of(acc)
    if not isinstance(f, Format) or f.precision > 24:
        raise ValueError(f"acc must be a float format of at most 24 bits (fp32, tf32, bf16, fp16), got "
                         f"{getattr(f, 'name', acc)}: the model's roundings are exact only there")
    return f


def round_to(v: Any, fmt: Format) -> np.ndarray:
    """float64 values rounded (RNE) to fmt, as float64."""
    v = np.asarray(v, np.float64)
    return np.asarray(decode(cast(v, fmt), fmt), np.float64).reshape(v.shape)


def _odd(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """s = fl64(exact) with exact - s = err, rounded to odd at 53 bits instead (one rounding to <= 51 bits after
    it is then correct)."""
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    fix = (err != 0) & even & np.isfinite(s)
    return np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)


def add(a: Any, b: Any, fmt: Format) -> np.ndarray:
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    with np.errstate(all="ignore"):
        s = a + b
        return round_to(_odd(s, two_sum_error(a, b, s)), fmt)


def fma(a: Any, b: Any, c: Any, fmt: Format) -> np.ndarray:
    """fl(a b + c), one rounding (a, b of at most 26 bits: their product is exact in float64)."""
    with np.errstate(all="ignore"):
        return add(np.asarray(a, np.float64) * np.asarray(b, np.float64), c, fmt)


def mul(a: Any, b: Any, fmt: Format) -> np.ndarray:
    with np.errstate(all="ignore"):
        return round_to(np.asarray(a, np.float64) * np.asarray(b, np.float64), fmt)


def div(a: Any, b: Any, fmt: Format) -> np.ndarray:
    with np.errstate(all="ignore"):
        return round_to(np.asarray(a, np.float64) / np.asarray(b, np.float64), fmt)
