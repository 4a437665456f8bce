"""Exact grids of a format's finite values as ordered integer keys (the codekeys order), computed without the engine."""

from __future__ import annotations

from fractions import Fraction

from ..core.formats.format import AnyFormat, Format, IntFormat
from ..core.scalar import floor_log2, pow2


# ---- exact grids: ordered keys of finite values (the codekeys order), without the engine ------------
def _neg_zero(fmt: AnyFormat) -> int:
    return 1 if fmt.has_negative_zero else 0


def _mag_value(mc: int, f: Format) -> Fraction:
    m = f.man_bits
    ef, man = mc >> m, mc & ((1 << m) - 1)
    if ef == 0 and f.has_subnormals:
        return man * pow2(f.emin - m)
    return ((1 << m) + man) * pow2(ef - f.bias - m)


def _floor_mag(a: Fraction, f: Format) -> int | None:
    """Largest finite magnitude code with value <= a (a >= 0); None when a is below every value."""
    if a >= f.max_finite:
        return f.max_mag_code
    if a < f.min_normal:
        if not f.has_subnormals:
            return None
        return int(a / f.min_subnormal)
    e = floor_log2(a)
    k = int(a / pow2(e - f.man_bits))
    return ((e + f.bias) << f.man_bits) + k - (1 << f.man_bits)


def _ceil_mag(a: Fraction, f: Format) -> int | None:
    fl = _floor_mag(a, f)
    if fl is None:
        return 0
    if _mag_value(fl, f) == a:
        return fl
    return fl + 1 if fl + 1 <= f.max_mag_code else None


def finite_key_range(fmt: AnyFormat) -> tuple[int, int]:
    """(smallest, largest) key of a finite value (keys order values; ints: the value itself)."""
    if isinstance(fmt, IntFormat):
        return fmt.min_value, fmt.max_value
    top = fmt.max_mag_code
    return (-top - _neg_zero(fmt), top) if fmt.signed else (0, top)


def key_value(k: int, fmt: AnyFormat) -> Fraction:
    """Exact value of a finite key (-0 reads as 0)."""
    if isinstance(fmt, IntFormat):
        return Fraction(k)
    return _mag_value(k, fmt) if k >= 0 else -_mag_value(-k - _neg_zero(fmt), fmt)


def key_code(k: int, fmt: AnyFormat) -> int:
    """Code (unsigned bit pattern) of a finite key."""
    if isinstance(fmt, IntFormat):
        return k % (1 << fmt.bits)
    return k if k >= 0 else (-k - _neg_zero(fmt)) | fmt.sign_bit


def _neg_key(mag: int, fmt: Format) -> int:
    return -mag - _neg_zero(fmt) if (mag or fmt.has_negative_zero) else 0


def floor_key(v: Fraction, fmt: AnyFormat) -> int | None:
    """Key of the largest finite value <= v (None when there is none)."""
    if isinstance(fmt, IntFormat):
        k = min(v.numerator // v.denominator, fmt.max_value)
        return k if k >= fmt.min_value else None
    if v >= 0:
        return _floor_mag(v, fmt)
    if not fmt.signed:
        return None
    mc = _ceil_mag(-v, fmt)
    return None if mc is None else _neg_key(mc, fmt)


def ceil_key(v: Fraction, fmt: AnyFormat) -> int | None:
    """Key of the smallest finite value >= v (None when there is none)."""
    if isinstance(fmt, IntFormat):
        k = max(-((-v.numerator) // v.denominator), fmt.min_value)
        return k if k <= fmt.max_value else None
    if v >= 0:
        return _ceil_mag(v, fmt)
    if not fmt.signed:
        return 0
    mc = _floor_mag(-v, fmt)
    return _neg_key(0 if mc is None else mc, fmt)


def _representable(v: Fraction, fmt: AnyFormat) -> bool:
    k = floor_key(v, fmt)
    return k is not None and key_value(k, fmt) == v


# ---- thresholds ---------------------------------------------------------------------------------------
