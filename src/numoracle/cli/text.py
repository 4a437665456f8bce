"""Exact text for the command line: numbers, codes and values, fixed-width tables and JSON-ready values."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.engine.convert import cast, decode
from ..core.formats.format import AnyFormat
from ..core.text import hex_code

__all__ = ["exact_decimal", "show_exact", "short", "hex_code", "value_of", "show_value", "code_of", "table",
           "jsonable"]


# ---- exact number formatting ----------------------------------------------------------------
def _decimal_parts(x: Fraction) -> tuple[int, int] | None:
    """(D, k) with x == D * 10^k exactly and D not a multiple of 10; None if x has no finite decimal."""
    d, k = x.denominator, 0
    while d % 10 == 0:
        d, k = d // 10, k + 1
    while d % 2 == 0:
        d, k = d // 2, k + 1
    while d % 5 == 0:
        d, k = d // 5, k + 1
    if d != 1:
        return None
    D, k = x.numerator * 10**k // x.denominator, -k
    while D and D % 10 == 0:
        D, k = D // 10, k + 1
    return D, k


def exact_decimal(x: Fraction) -> str | None:
    """The exact decimal expansion of ``x`` (``0.125``), or None when it has none (``1/3``)."""
    parts = _decimal_parts(x)
    if parts is None:
        return None
    D, k = parts
    sign, digits = ("-" if D < 0 else ""), str(abs(D))
    if k >= 0:
        return sign + digits + "0" * k
    digits = digits.rjust(1 - k, "0")
    return f"{sign}{digits[:k]}.{digits[k:]}"


def _approx(x: Fraction) -> str:
    with localcontext() as ctx:
        ctx.prec = 20
        return format(Decimal(x.numerator) / Decimal(x.denominator), ".8g")


def show_exact(x: Fraction | int, limit: int = 24) -> str:
    """``x`` exactly and readably: ``448``, ``0.125``, ``2^-24 ≈ 5.9604645e-8``, ``1e400``, ``1/3 ≈ 0.33333333``.

    In order of preference: a plain decimal of at most ``limit`` characters; a power of two;
    an exact scientific decimal of at most ``limit`` digits; ``m*2^e`` (dyadic); ``p/q``. The
    power of two, ``m*2^e`` and ``p/q`` forms carry an approximation after ``≈``.
    """
    x = Fraction(x)
    dec = exact_decimal(x)
    if dec is not None and len(dec) <= limit:
        return dec
    n, d = x.numerator, x.denominator
    if d & (d - 1) == 0:  # dyadic: x = m * 2^e with m odd
        tz = (n & -n).bit_length() - 1
        m, e = n >> tz, tz - (d.bit_length() - 1)
        exact = (f"{'-' if m < 0 else ''}2^{e}" if abs(m) == 1 else f"{m}*2^{e}")
        if abs(m) == 1 or dec is None or len(str(abs(_decimal_parts(x)[0]))) > limit:
            return f"{exact} ≈ {_approx(x)}"
    elif dec is None:
        return f"{n}/{d} ≈ {_approx(x)}"
    D, k = _decimal_parts(x)
    digits = str(abs(D))
    mant = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "")
    return f"{'-' if D < 0 else ''}{mant}e{k + len(digits) - 1}"


def short(x: Fraction | int) -> str:
    """Compact exact form for table cells: ``65504``, ``0.25``, ``2^-24``, ``16777215*2^104``."""
    return show_exact(x, limit=10).split(" ≈ ")[0]


# ---- values and codes --------------------------------------------------------------------
def value_of(code: int, fmt: AnyFormat) -> Fraction | float:
    """Exact value of one code: a Fraction, or float inf/nan."""
    v = decode(np.array([code], dtype=np.uint64), fmt)[0]
    if fmt.is_integer:
        return Fraction(int(v))
    f = float(v)
    return f if not math.isfinite(f) else Fraction(f)


def show_value(v: Fraction | float, fmt: AnyFormat | None = None, code: int | None = None) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return "+inf" if v > 0 else "-inf"
    if v == 0 and fmt is not None and code and fmt.signed:
        return "-0"  # a zero code with the sign bit set
    return show_exact(v, limit=64)


def code_of(fmt: AnyFormat, x: Fraction | float) -> int:
    """The code of a value ``fmt`` represents exactly (inf and nan included); ValueError otherwise."""
    if isinstance(x, Fraction) and (x.denominator != 1 or not -(2**63) <= x < 2**64):
        f = float(x)  # OverflowError past FP64's range
        if Fraction(f) != x:
            raise ValueError(f"{x} is not exact in FP64")
        arr = np.array([f], np.float64)
    elif isinstance(x, Fraction):
        arr = np.array([int(x)], np.uint64 if x >= 2**63 else np.int64)
    else:
        arr = np.array([x], np.float64)
    code = int(cast(arr, fmt)[0])
    v = value_of(code, fmt)
    same = v == x or (isinstance(v, float) and math.isnan(v) and isinstance(x, float) and math.isnan(x))
    if not same:
        raise ValueError(f"{x} is not a value of {fmt.name}")
    return code


def table(rows: list[list[str]], header: list[str] | None = None) -> str:
    """Rows of cells as fixed-width text (columns padded, a rule under the header)."""
    allrows = ([header] if header else []) + rows
    widths = [max(len(r[i]) for r in allrows) for i in range(len(allrows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in allrows]
    if header:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def jsonable(v: Any) -> Any:
    """A value for ``json.dumps``, exact: Fractions as ``str(Fraction)`` ("65504", "1/16777216"), enums by value."""
    if isinstance(v, bool) or v is None or isinstance(v, (str, int)):
        return v
    if isinstance(v, Fraction):
        return str(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if hasattr(v, "value"):  # an enum
        return jsonable(v.value)
    return str(v)
