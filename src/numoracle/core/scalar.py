"""The exact scalar layer: one value at a time, on ``fractions.Fraction`` (decode, round, encode, neighbours).

It is what every layer uses for a single exact value (explanations, chain witnesses, scale rules, grids), and it is
written apart from the vectorised engine, which the tests hold to it bit for bit. This module restates
docs/semantics.md in the plainest Python it can: a code is decoded to
its exact rational value, the value is rounded to a multiple of the destination's quantum
with Fractions, and the result is encoded again. It shares no code with ``softfloat.py``
(no bit fields are shifted to round, nothing is vectorised); it uses only the format
descriptors (``core/formats/format.py``) and the policy enums and validation (``core/formats/policy.py``). It is
the reference for tests (~20-50 us a conversion), for explanations and for single values elsewhere.

Flags (``flags=True``), this module's reading of the contract: INEXACT when the result's
value differs from x for a finite x (overflows of floats included; an integer out of range
is INVALID alone); UNDERFLOW when x is tiny (|x| < 2^emin with ``tininess="before"``; x rounded
to the destination's precision with an unbounded exponent below 2^emin with ``"after"``) and the
result is inexact, or when ftz flushes; OVERFLOW (with INEXACT) when the rounded magnitude exceeds
max finite; INVALID for NaN into a format without NaN, for a rounded integer outside [min, max],
for an infinity that the destination cannot hold (saturated, NaN or an integer), for negatives
and zeros into E8M0, and for a signalling NaN source code (:func:`convert_code`); an infinity
saturated in a format that has infinities sets OVERFLOW and INEXACT instead.

Values. :func:`value_of` returns

* an ``int`` for integer formats;
* a ``Fraction`` for every finite nonzero value and for +0;
* a :class:`Special` for the rest: :data:`NEG_ZERO`, :data:`POS_INF`, :data:`NEG_INF` and
  :data:`NAN` (NaN sign and payload are not kept: the contract never propagates them).

:func:`round_value` accepts those, plain ``int``s and Python ``float``s (read exactly; ``-0.0``,
``inf`` and ``nan`` map to the specials).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

from .formats.format import AnyFormat, Format, IntFormat, format_of
from .formats.policy import Flags, NanTo, Overflow, Policy, Rounding, Tininess, resolve_policy

__all__ = [
    "Special", "NAN", "POS_INF", "NEG_INF", "NEG_ZERO", "Value",
    "value_of", "round_value", "convert_code", "neighbours", "Neighbour", "Neighbours",
    "is_subnormal_code", "canonical_nan_code", "inf_code",
]


@dataclass(frozen=True)
class Special:
    """A value that is not a nonzero finite number or +0: ``-0``, ``+-inf`` or NaN."""

    kind: str  # "zero" | "inf" | "nan"
    negative: bool = False

    def __repr__(self) -> str:
        if self.kind == "nan":
            return "NAN"
        return ("-" if self.negative else "+") + ("0" if self.kind == "zero" else "inf")


NAN = Special("nan")
POS_INF = Special("inf")
NEG_INF = Special("inf", True)
NEG_ZERO = Special("zero", True)

Value = Fraction | int | Special


def pow2(e: int) -> Fraction:
    return Fraction(1 << e) if e >= 0 else Fraction(1, 1 << -e)


def floor_log2(a: Fraction) -> int:
    """floor(log2(a)) of a positive rational, exactly."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e - 1 if a < pow2(e) else e


def _as_value(x: Any) -> Value:
    """Read a Fraction / int / float / Special exactly."""
    if isinstance(x, Special):
        return x
    if isinstance(x, bool):
        raise TypeError("bool is not a value")
    if isinstance(x, int):
        return Fraction(x)
    if isinstance(x, float):
        if math.isnan(x):
            return NAN
        if math.isinf(x):
            return NEG_INF if x < 0 else POS_INF
        if x == 0 and math.copysign(1.0, x) < 0:
            return NEG_ZERO
        return Fraction(x)
    if isinstance(x, Fraction):
        return x
    raise TypeError(f"cannot read {x!r} ({type(x).__name__}) as an exact value")


# ---- values of codes ------------------------------------------------------------------
def _fields(code: int, fmt: Format) -> tuple[bool, int, int]:
    """(sign, exponent field, mantissa field) of a float code."""
    m = fmt.man_bits
    sign = fmt.signed and bool(code >> (fmt.bits - 1))
    mag = code & fmt.mag_mask
    return sign, mag >> m, mag & ((1 << m) - 1)


def is_subnormal_code(code: int, fmt: AnyFormat) -> bool:
    """True for the nonzero codes with exponent field 0 in a format that has subnormals."""
    fmt = format_of(fmt)
    if fmt.is_integer or not fmt.has_subnormals:
        return False
    _, ef, man = _fields(int(code), fmt)
    return ef == 0 and man != 0


def value_of(code: int, fmt: Any, *, daz: bool = False) -> Value:
    """The exact value of one code (``daz``: subnormals read as zero of the same sign)."""
    fmt = format_of(fmt)
    code = int(code)
    if not 0 <= code < (1 << fmt.bits):
        raise ValueError(f"code {code:#x} out of range for {fmt.name}")
    if fmt.is_integer:
        if fmt.signed and code >> (fmt.bits - 1):
            return code - (1 << fmt.bits)
        return code
    sign, ef, man = _fields(code, fmt)
    m, all_ones = fmt.man_bits, (1 << fmt.exp_bits) - 1
    mag = code & fmt.mag_mask
    # specials, by the NaN encoding
    if fmt.nan == "ieee" and ef == all_ones:
        return NAN if man else (NEG_INF if sign else POS_INF)
    if fmt.nan == "fn" and mag == fmt.mag_mask:
        return NAN
    if fmt.nan == "fnuz":
        if sign and mag == 0:
            return NAN
        if fmt.has_inf and mag == fmt.mag_mask:
            return NEG_INF if sign else POS_INF
    # finite values
    if ef == 0 and fmt.has_subnormals:
        if daz:
            man = 0
        v = man * pow2(1 - fmt.bias - m)
    else:
        v = ((1 << m) + man) * pow2(ef - fmt.bias - m)
    if v == 0:
        return NEG_ZERO if sign else Fraction(0)
    return -v if sign else v


# ---- codes of results -----------------------------------------------------------------
def canonical_nan_code(fmt: Format) -> int:
    """The positive quiet NaN of docs/semantics.md (FP16 0x7E00, E4M3FN 0x7F, FNUZ 0x80)."""
    if fmt.nan == "ieee":
        return (((1 << fmt.exp_bits) - 1) << fmt.man_bits) | (1 << (fmt.man_bits - 1))
    if fmt.nan == "fn":
        return fmt.mag_mask
    if fmt.nan == "fnuz":
        return fmt.sign_bit
    raise ValueError(f"{fmt.name} has no NaN")


def inf_code(fmt: Format, negative: bool) -> int:
    if fmt.nan == "ieee":
        mag = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
    elif fmt.nan == "fnuz" and fmt.has_inf:
        mag = fmt.mag_mask
    else:
        raise ValueError(f"{fmt.name} has no infinity")
    return mag | (fmt.sign_bit if negative else 0)


def _magnitude_code(r: Fraction, fmt: Format) -> int:
    """Code bits (without sign) of a representable magnitude r >= 0."""
    m = fmt.man_bits
    if r == 0:
        return 0
    if fmt.has_subnormals and r < fmt.min_normal:
        man = r / pow2(fmt.emin - m)
        assert man.denominator == 1, (r, fmt)
        return int(man)
    e = floor_log2(r)
    man = r / pow2(e - m) - (1 << m)
    assert man.denominator == 1 and 0 <= man < (1 << m), (r, fmt)
    return ((e + fmt.bias) << m) | int(man)


def _signed(mag_code: int, fmt: Format, negative: bool) -> int:
    """Attach the sign: -0 only where the format has one."""
    if negative and fmt.signed and (mag_code != 0 or fmt.has_negative_zero):
        return mag_code | fmt.sign_bit
    return mag_code


def _nan_result(dst: AnyFormat, pol: Policy) -> int:
    """Code of a NaN result: the canonical NaN, or the nan_to value where there is none."""
    if not dst.is_integer and dst.has_nan:
        return canonical_nan_code(dst)
    if pol.nan_to is NanTo.RAISE:
        raise ValueError(f"NaN has no representation in {dst.name} and nan_to='raise'")
    if dst.is_integer:
        v = {NanTo.ZERO: 0, NanTo.MAX: dst.max_value, NanTo.MIN: dst.min_value}[pol.nan_to]
        return v % (1 << dst.bits)
    if pol.nan_to is NanTo.ZERO:
        return 0
    return _signed(dst.max_mag_code, dst, pol.nan_to is NanTo.MIN)


# ---- rounding -------------------------------------------------------------------------
def _round_multiple(a: Fraction, q: Fraction, mode: Rounding, negative: bool,
                    R: int | None, r: int | None) -> tuple[int, bool]:
    """Step 2: round a > 0 to k * q; returns (k, inexact). ``negative``: the sign of x."""
    t = a / q
    k = t.numerator // t.denominator
    f = t - k  # the discarded fraction of a quantum, 0 <= f < 1
    if f == 0:
        return k, False
    half = Fraction(1, 2)
    if mode is Rounding.NEAREST_EVEN:
        away = f > half or (f == half and k % 2 == 1)
    elif mode is Rounding.NEAREST_AWAY:
        away = f >= half
    elif mode is Rounding.TOWARD_ZERO:
        away = False
    elif mode is Rounding.UP:
        away = not negative
    elif mode is Rounding.DOWN:
        away = negative
    elif mode is Rounding.TO_ODD:
        return k | 1, True
    else:  # STOCHASTIC
        scaled = f * (1 << r)
        away = scaled.numerator // scaled.denominator + R >= (1 << r)
    return k + int(away), True


def _overflow_to_max(pol: Policy, negative: bool) -> bool:
    """Step 3: does an overflowing value become +-max finite (else +-inf or NaN)?"""
    mode = pol.rounding
    if pol.overflow is Overflow.SATURATE or mode in (Rounding.TOWARD_ZERO, Rounding.TO_ODD):
        return True
    if mode is Rounding.UP:
        return negative
    if mode is Rounding.DOWN:
        return not negative
    return False  # rne, rna, sr


def _round_to_float(x: Fraction, dst: Format, pol: Policy, R, fl: list) -> int:
    negative = x < 0
    if negative and not dst.signed:  # negative nonzero into an unsigned float
        fl.append(Flags.INVALID)
        return _nan_result(dst, pol)
    a = abs(x)
    # 1. exponent and quantum
    E = floor_log2(a)
    tiny = E < dst.emin
    if tiny and pol.tininess is Tininess.AFTER and dst.has_subnormals:
        # rounded to p digits with an unbounded exponent, is it still below 2^emin?
        k, _ = _round_multiple(a, pow2(E - dst.man_bits), pol.rounding, negative, R, pol.sr_bits)
        tiny = k * pow2(E - dst.man_bits) < dst.min_normal
    if not dst.has_subnormals and tiny:  # no zero (E8M0): the smallest value, in every mode
        fl.append(Flags.UNDERFLOW | Flags.INEXACT)
        return 0
    qexp = (max(E, dst.emin) if dst.has_subnormals else E) - dst.man_bits
    # 2. magnitude rounding, exponent unbounded above
    k, inexact = _round_multiple(a, pow2(qexp), pol.rounding, negative, R, pol.sr_bits)
    r = k * pow2(qexp)
    if inexact:
        fl.append(Flags.INEXACT | (Flags.UNDERFLOW if tiny else Flags.NONE))
    # 3. overflow, decided after rounding
    if r > dst.max_finite:
        fl.append(Flags.OVERFLOW | Flags.INEXACT)
        if _overflow_to_max(pol, negative):
            return _signed(dst.max_mag_code, dst, negative)
        if pol.overflow is Overflow.IEEE:
            return inf_code(dst, negative)
        return _nan_result(dst, pol)
    # 4. underflow: ftz flushes results that are subnormal after rounding
    if pol.ftz and 0 < r < dst.min_normal:
        fl.append(Flags.UNDERFLOW | Flags.INEXACT)
        r = Fraction(0)
    # 5. encode (sign kept on zero only where the format has -0)
    return _signed(_magnitude_code(r, dst), dst, negative)


def _round_to_int(x: Fraction, dst: IntFormat, pol: Policy, R, fl: list) -> int:
    negative = x < 0
    k, inexact = _round_multiple(abs(x), Fraction(1), pol.rounding, negative, R, pol.sr_bits)
    v = -k if negative else k
    if inexact and dst.min_value <= v <= dst.max_value:
        fl.append(Flags.INEXACT)
    if not dst.min_value <= v <= dst.max_value:  # IEEE 754-2019 §5.8: invalid, whatever is returned
        fl.append(Flags.INVALID)
        if pol.overflow is Overflow.SATURATE:
            v = min(max(v, dst.min_value), dst.max_value)
        # WRAP: keep v, reduced modulo 2^bits below
    return v % (1 << dst.bits)


def round_value(x: Any, dst: Any, *, rounding: Any = "rne", overflow: Any = None, nan_to: Any = None,
                ftz: bool = False, random_bits: int | None = None, sr_bits: int | None = None,
                tininess: Any = "before", flags: bool = False) -> int | tuple[int, Flags]:
    """Round one exact value to a code of ``dst`` by docs/semantics.md (``flags``: also Flags).

    ``random_bits`` is the single value R in [0, 2**sr_bits) used by ``rounding='sr'``.
    """
    dst = format_of(dst)
    pol = resolve_policy(dst, rounding, overflow, nan_to, ftz, False, sr_bits, tininess)
    if pol.rounding is Rounding.STOCHASTIC:
        if random_bits is None or not 0 <= int(random_bits) < (1 << pol.sr_bits):
            raise ValueError(f"rounding='sr' needs random_bits in [0, 2**{pol.sr_bits}), got {random_bits!r}")
        random_bits = int(random_bits)
    elif random_bits is not None:
        raise ValueError("random_bits are only used with rounding='sr'")
    v = _as_value(x)
    fl: list = []
    code = _round_special(v, dst, pol, fl) if isinstance(v, Special) or v == 0 else None
    if code is None:
        if dst.is_integer:
            code = _round_to_int(v, dst, pol, random_bits, fl)
        else:
            code = _round_to_float(v, dst, pol, random_bits, fl)
    if not flags:
        return code
    out = Flags.NONE
    for f in fl:
        out |= f
    return code, out


def _round_special(v: Value, dst: AnyFormat, pol: Policy, fl: list) -> int:
    """Zeros, infinities and NaN (the Specials section of docs/semantics.md)."""
    kind = "zero" if not isinstance(v, Special) else v.kind
    negative = isinstance(v, Special) and v.negative
    if kind == "nan":
        if dst.is_integer or not dst.has_nan:
            fl.append(Flags.INVALID)
        return _nan_result(dst, pol)
    if dst.is_integer:
        if kind == "zero":
            return 0
        if pol.overflow is Overflow.WRAP:  # inf is invalid under wrap: the nan_to value
            fl.append(Flags.INVALID)
            return _nan_result(dst, pol)
        fl.append(Flags.INVALID)
        return (dst.min_value if negative else dst.max_value) % (1 << dst.bits)
    if kind == "zero":
        if not dst.has_zero:  # E8M0: +-0 -> NaN
            fl.append(Flags.INVALID)
            return _nan_result(dst, pol)
        return _signed(0, dst, negative)
    # infinities
    if negative and not dst.signed:
        fl.append(Flags.INVALID)
        return _nan_result(dst, pol)
    if pol.overflow is Overflow.IEEE:
        return inf_code(dst, negative)
    if pol.overflow is Overflow.SATURATE:
        # an infinity the format could hold saturates like an overflow; one it cannot is invalid
        fl.append(Flags.OVERFLOW | Flags.INEXACT if dst.has_inf else Flags.INVALID)
        return _signed(dst.max_mag_code, dst, negative)
    fl.append(Flags.INVALID)
    return _nan_result(dst, pol)


def convert_code(code: int, src: Any, dst: Any, *, daz: bool = False, **policy: Any) -> int | tuple[int, Flags]:
    """Decode one code of ``src`` (``daz``: subnormals as signed zeros) and round it into ``dst``.

    A signalling NaN code (``Format.quiet_bit`` clear) adds INVALID to the flags (IEEE 754-2019 §7.2).
    """
    src = format_of(src)
    out = round_value(value_of(code, src, daz=daz), dst, **policy)
    if policy.get("flags") and not src.is_integer and src.is_signalling_nan(int(code)):
        return out[0], out[1] | Flags.INVALID
    return out


# ---- neighbours (for explanations) ----------------------------------------------------
class Neighbour(NamedTuple):
    value: Fraction
    code: int


class Neighbours(NamedTuple):
    """The finite values of a format around x: ``lower`` is the largest <= x, ``upper`` the
    smallest >= x (equal when x is representable). A side is None where no finite value lies
    there: beyond -max (or below an unsigned format's smallest value) for ``lower``, beyond
    +max for ``upper``.
    """

    lower: Neighbour | None
    upper: Neighbour | None


def _float_neighbour(mag: Fraction, dst: Format, negative: bool) -> Neighbour | None:
    if mag > dst.max_finite:
        return None
    return Neighbour(-mag if negative else mag, _signed(_magnitude_code(mag, dst), dst, negative))


def neighbours(x: Any, dst: Any) -> Neighbours:
    """The two adjacent finite values (and codes) of ``dst`` around a finite value ``x``.

    Zeros carry the sign of x where the format has -0 (the code a rounding toward zero gives).
    """
    dst = format_of(dst)
    v = _as_value(x)
    if isinstance(v, Special):
        if v.kind != "zero":
            raise ValueError(f"neighbours needs a finite value, got {v!r}")
        v = Fraction(0)
    if dst.is_integer:
        lo, hi = min(math.floor(v), dst.max_value), max(math.ceil(v), dst.min_value)
        return Neighbours(Neighbour(Fraction(lo), lo % (1 << dst.bits)) if lo >= dst.min_value else None,
                          Neighbour(Fraction(hi), hi % (1 << dst.bits)) if hi <= dst.max_value else None)
    smallest = Fraction(0) if dst.has_zero else dst.min_normal
    if v < smallest and not dst.signed:  # below every value of an unsigned format
        return Neighbours(None, _float_neighbour(smallest, dst, False))
    negative = v < 0
    a = abs(v)
    if a == 0:
        z = _float_neighbour(a, dst, False)
        return Neighbours(z, z)
    E = floor_log2(a)
    if a > dst.max_finite:  # beyond the range: only max finite lies on the inner side
        inner, outer = _float_neighbour(dst.max_finite, dst, negative), None
    else:
        q = pow2((max(E, dst.emin) if dst.has_subnormals else E) - dst.man_bits)
        t = a / q
        k = t.numerator // t.denominator
        inner = _float_neighbour(k * q, dst, negative)
        outer = inner if k * q == a else _float_neighbour((k + 1) * q, dst, negative)
    return Neighbours(outer, inner) if negative else Neighbours(inner, outer)
