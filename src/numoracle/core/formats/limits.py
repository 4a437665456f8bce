"""What a format may be: typed fields, and the range the engine carries (docs/formats.md, "Supported range").

The engine carries formats whose every value is an FP64 value: precision <= 53, largest exponent
<= 1023, smallest positive value >= 2^-1074. Numpy dtype codes ('i8', '<f4') mean what numpy means.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..args import check_bool, check_int

__all__ = ["MAX_PRECISION", "MAX_EMAX", "MIN_EXPONENT", "check_widths", "check_fields", "check_carried",
           "is_numpy_code", "from_numpy_code"]

MAX_PRECISION, MAX_EMAX, MIN_EXPONENT = 53, 1023, -1074
_NAN_KINDS = ("ieee", "fn", "fnuz", "none")
_NUMPY_CODE = re.compile(r"[<>=|]?[biufc]\d+")


def check_widths(exp_bits: Any, man_bits: Any) -> None:
    check_int(exp_bits, "exp_bits", 1, 64)
    check_int(man_bits, "man_bits", 0, 64)


def check_fields(f: Any) -> None:
    """Field types and sizes, before any is used: ints are ints, bools are bools."""
    check_widths(f.exp_bits, f.man_bits)
    check_int(f.bias, "bias", -(1 << 16), 1 << 16)
    for k in ("signed", "has_inf", "has_subnormals"):
        check_bool(getattr(f, k), k)
    if not isinstance(f.nan, str):
        raise TypeError(f"nan must be one of {_NAN_KINDS}, got {type(f.nan).__name__} {f.nan!r}")


def check_carried(f: Any) -> None:
    """Refuse formats wider than the engine carries."""
    lowest = f.emin - (f.man_bits if f.has_subnormals else 0)
    if f.precision > MAX_PRECISION or f.emax > MAX_EMAX or lowest < MIN_EXPONENT:
        raise ValueError(f"{f.name}: numoracle carries formats whose values are all FP64 values (precision <= "
                         f"{MAX_PRECISION}, largest exponent <= {MAX_EMAX}, smallest value >= 2^{MIN_EXPONENT}); "
                         f"this one has precision {f.precision}, largest exponent {f.emax} and smallest value "
                         f"2^{lowest} (see docs/formats.md, Supported range)")


def is_numpy_code(key: str) -> bool:
    return _NUMPY_CODE.fullmatch(key) is not None


def from_numpy_code(x: str, by_dtype_name: Callable[[str], Any]) -> Any:
    """A numpy dtype code ('i8', '<f4', 'u2') means what numpy means (its digits count bytes)."""
    import numpy as np

    try:
        dt = np.dtype(x.strip())
    except TypeError:
        raise ValueError(f"format {x!r} looks like a numpy dtype code but numpy has no such dtype (its digits "
                         "count bytes: i1, i2, i4, i8, f2, f4, f8); say the format's name, e.g. 'int16'") from None
    fmt = by_dtype_name(dt.name)
    if fmt is None:
        raise ValueError(f"format {x!r} is numpy's {dt}, which has no numoracle format")
    return fmt
