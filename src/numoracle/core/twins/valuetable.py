"""The fast independent twin of the rounding engine: sorted value tables and ``searchsorted``.

For a destination of 16 bits or fewer every finite value is exact in float64. List them,
sort them, and round a float64 value ``v`` by finding its two neighbours ``lo <= v < hi`` in
the table (plus one virtual value past +-max: the next value with an unbounded exponent, so
that overflow is decided after rounding) and applying the mode's rule between the two:

* the midpoint ``(lo + hi) / 2`` is exact in float64; the spacing ``d = hi - lo`` is a power
  of two, and of the two neighbours exactly one is an even multiple of ``d`` (the "even"
  one for ties) and one an odd multiple (the one round-to-odd picks when inexact);
* stochastic rounding reads the discarded fraction ``(|v| - |toward-zero neighbour|) / d``,
  exact by Sterbenz's lemma.

Integer destinations use ``lo = floor(v)``, ``hi = lo + 1`` with the same rule. Nothing here
shifts bits or shares code with ``softfloat.py``; source values come from this module's own
float64 decoder (:func:`source_values`), which reads any float format exactly and integers
up to 2^53 in magnitude.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from ..formats.format import AnyFormat, Format, IntFormat, format_of
from ..formats.policy import NanTo, Overflow, Policy, Rounding, resolve_policy

__all__ = [
    "source_values", "decode_fields", "ValueTable", "value_table", "table_cast", "table_convert", "MAX_TABLE_BITS",
]

MAX_TABLE_BITS = 16


# ---- source values --------------------------------------------------------------------
def source_values(codes: Any, src: Any, *, daz: bool = False) -> np.ndarray:
    """Exact float64 values of codes of ``src`` (NaN, +-inf and -0.0 as themselves).

    ``daz`` reads subnormals as zeros of the same sign. Integers must be exact in float64.
    """
    src = format_of(src)
    c = np.asarray(codes)
    if src.is_integer:
        return _int_values(c.astype(np.uint64), src)
    native = _NATIVE.get((src.exp_bits, src.man_bits, src.bias, src.nan, src.signed, src.has_subnormals))
    with np.errstate(invalid="ignore"):  # signalling NaNs widen with a warning
        if native is not None and not daz:  # IEEE binary16/32/64: a view, widened exactly
            return c.astype(native[1]).view(native[0]).astype(np.float64)
        return decode_fields(c.astype(np.uint64), src, daz=daz)


_NATIVE = {
    (5, 10, 15, "ieee", True, True): (np.float16, np.uint16),
    (8, 23, 127, "ieee", True, True): (np.float32, np.uint32),
    (11, 52, 1023, "ieee", True, True): (np.float64, np.uint64),
}


def decode_fields(c: np.ndarray, src: Format, *, daz: bool = False) -> np.ndarray:
    """float64 values of float codes (uint64) from their sign, exponent and mantissa fields."""
    m, bias = src.man_bits, src.bias
    sign = (c >> np.uint64(src.bits - 1)).astype(bool) if src.signed else np.zeros(c.shape, bool)
    mag = c & np.uint64(src.mag_mask)
    ef = (mag >> np.uint64(m)).astype(np.int64)
    man = (mag & np.uint64((1 << m) - 1)).astype(np.float64)
    with np.errstate(over="ignore"):  # the inf/NaN exponent of FP64; replaced below
        if src.has_subnormals:
            low = ef == 0
            sig = np.where(low, 0.0 if daz else man, man + 2.0**m)
            val = np.ldexp(sig, np.where(low, 1, ef) - bias - m)
        else:
            val = np.ldexp(man + 2.0**m, ef - bias - m)
    val = np.where(sign, -val, val)
    if src.nan == "ieee":
        top = ef == (1 << src.exp_bits) - 1
        val = np.where(top, np.where(man == 0, np.where(sign, -np.inf, np.inf), np.nan), val)
    elif src.nan == "fn":
        val = np.where(mag == np.uint64(src.mag_mask), np.nan, val)
    elif src.nan == "fnuz":
        if src.has_inf:
            val = np.where(mag == np.uint64(src.mag_mask), np.where(sign, -np.inf, np.inf), val)
        val = np.where(sign & (mag == 0), np.nan, val)
    return val


def _int_values(c: np.ndarray, src: IntFormat) -> np.ndarray:
    if src.signed:
        v = c.view(np.int64) if src.bits == 64 else c.astype(np.int64)
        if src.bits < 64:
            v = np.where(v >= (1 << (src.bits - 1)), v - (1 << src.bits), v)
    else:
        v = c
    out = v.astype(np.float64)
    big = np.abs(out) >= 2.0**53
    if big.any() and any(int(f) != int(i) for f, i in zip(out[big].tolist(), v[big].tolist(), strict=True)):
        raise ValueError(f"some {src.name} values are not exact in float64 (beyond 2^53)")
    return out


# ---- destination tables ---------------------------------------------------------------
@dataclass(frozen=True)
class ValueTable:
    """Every finite value of a float format (sorted, float64), its code, and the extensions."""

    fmt: Format
    values: np.ndarray  # sorted unique finite values (0 once)
    codes: np.ndarray  # the code of each (+0 for zero)
    ext: np.ndarray  # values with the virtual neighbours past -max (signed formats) and +max
    beyond: float  # the virtual value past max finite (unbounded exponent)
    neg_zero: int | None  # code of -0, if the format has one


@cache
def value_table(dst: Any) -> ValueTable:
    dst = format_of(dst)
    if dst.is_integer or dst.bits > MAX_TABLE_BITS:
        raise ValueError(f"value tables are for float formats of <= {MAX_TABLE_BITS} bits, not {dst.name}")
    all_codes = np.arange(1 << dst.bits, dtype=np.uint64)
    vals = source_values(all_codes, dst)
    fin = np.isfinite(vals) & ~((vals == 0) & np.signbit(vals))  # -0 is the same value as +0
    order = np.argsort(vals[fin], kind="stable")
    values, codes = vals[fin][order], all_codes[fin][order]
    assert (np.diff(values) > 0).all(), dst
    # with an unbounded exponent the value after max is max + the spacing of max's binade,
    # 2^(floor(log2 max) - man_bits)
    top = float(values[-1])
    beyond = top + float(np.ldexp(1.0, int(np.frexp(top)[1]) - 1 - dst.man_bits))
    lead = [-beyond] if dst.signed else []
    ext = np.array(lead + list(values) + [beyond], np.float64)
    nz = None
    if dst.has_negative_zero:
        nz = int(dst.sign_bit)
    return ValueTable(dst, values, codes, ext, float(beyond), nz)


# ---- the rounding rule between two neighbours -----------------------------------------
def _choose(v: np.ndarray, lo: np.ndarray, hi: np.ndarray, mode: Rounding, rand, sr_bits) -> np.ndarray:
    """Round v (lo <= v <= hi, adjacent representable values, v != 0) to lo or hi."""
    d = hi - lo
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        lo_even = np.fmod(lo / d, 2) == 0
        toward0 = np.where(v > 0, lo, hi)
        away = np.where(v > 0, hi, lo)
        if mode is Rounding.NEAREST_EVEN or mode is Rounding.NEAREST_AWAY:
            mid = lo / 2 + hi / 2
            tie = np.where(lo_even, lo, hi) if mode is Rounding.NEAREST_EVEN else away
            res = np.where(v < mid, lo, np.where(v > mid, hi, tie))
        elif mode is Rounding.TOWARD_ZERO:
            res = toward0
        elif mode is Rounding.UP:
            res = hi
        elif mode is Rounding.DOWN:
            res = lo
        elif mode is Rounding.TO_ODD:
            res = np.where(lo_even, hi, lo)
        else:
            frac = (np.abs(v) - np.abs(toward0)) / d
            top = np.floor(np.ldexp(frac, sr_bits))
            res = np.where(top + rand.astype(np.float64) >= 2.0**sr_bits, away, toward0)
    return np.where(v == lo, lo, np.where(v == hi, hi, res))


# ---- casts ----------------------------------------------------------------------------
def _nan_code(dst: AnyFormat, pol: Policy) -> int:
    if not dst.is_integer and dst.has_nan:
        if dst.nan == "ieee":
            return (((1 << dst.exp_bits) - 1) << dst.man_bits) + (1 << (dst.man_bits - 1))
        return dst.mag_mask if dst.nan == "fn" else dst.sign_bit
    if pol.nan_to is NanTo.RAISE:
        raise ValueError(f"NaN has no representation in {dst.name} and nan_to='raise'")
    if dst.is_integer:
        v = {NanTo.ZERO: 0, NanTo.MAX: dst.max_value, NanTo.MIN: dst.min_value}[pol.nan_to]
        return v % (1 << dst.bits)
    top = value_table(dst)
    if pol.nan_to is NanTo.ZERO:
        return 0
    want = top.values[-1] if pol.nan_to is NanTo.MAX else top.values[0]
    return int(top.codes[top.values == want][0])


def _code_of(t: ValueTable, vals: np.ndarray) -> np.ndarray:
    """Codes of representable values (exact matches in the table)."""
    idx = np.clip(np.searchsorted(t.values, vals), 0, t.values.size - 1)
    assert (t.values[idx] == vals).all()
    return t.codes[idx]


def _float_cast(v: np.ndarray, dst: Format, pol: Policy, rand) -> np.ndarray:
    t = value_table(dst)
    out = np.zeros(v.shape, np.int64)
    nan = np.isnan(v)
    neg = np.signbit(v)
    invalid = nan.copy()
    fin = np.isfinite(v) & (v != 0)
    if not dst.signed:
        invalid |= neg & ~nan & (v != 0)  # negatives (and -inf) into an unsigned format; -0 is +0 (or NaN: no zero)
        fin &= ~neg
    if not dst.has_zero:
        invalid |= v == 0
    x = v[fin]
    ext = t.ext
    i = np.clip(np.searchsorted(ext, x, side="right") - 1, 0, ext.size - 2)
    lo, hi = ext[i], ext[i + 1]
    r = np.abs(x) > t.beyond  # beyond the virtual neighbour: rounds past max in every mode
    inside = (x >= ext[0]) & ~r
    res = np.full(x.shape, np.nan)
    res[inside] = _choose(x[inside], lo[inside], hi[inside], pol.rounding,
                          None if rand is None else rand[fin][inside], pol.sr_bits)
    if not dst.has_zero:  # below E8M0's smallest value: the smallest value, every mode
        res[x < t.values[0]] = t.values[0]
    over = r | (np.abs(res) >= t.beyond)
    xs = x < 0
    to_max = np.full(x.shape, pol.overflow is Overflow.SATURATE)
    mode = pol.rounding
    if mode in (Rounding.TOWARD_ZERO, Rounding.TO_ODD):
        to_max[:] = True
    elif mode is Rounding.UP:
        to_max |= xs
    elif mode is Rounding.DOWN:
        to_max |= ~xs
    top = t.values[-1]
    res = np.where(over & to_max, np.where(xs, -top, top), res)
    over_special = over & ~to_max
    if pol.ftz:
        res = np.where((np.abs(res) < 2.0**dst.emin) & ~over_special, 0.0, res)
    ok = ~over_special
    codes = np.zeros(x.shape, np.int64)
    codes[ok] = _code_of(t, np.where(res[ok] == 0, 0.0, res[ok]))
    zero_neg = ok & (res == 0) & xs
    if t.neg_zero is not None:
        codes[zero_neg] = t.neg_zero
    if pol.overflow is Overflow.IEEE:
        inf = ((1 << dst.exp_bits) - 1) << dst.man_bits if dst.nan == "ieee" else dst.mag_mask
        codes[over_special] = np.where(xs[over_special], inf | dst.sign_bit, inf)
    else:
        bad = np.zeros(v.shape, bool)
        bad[fin] = over_special
        invalid |= bad
    out[fin] = codes
    # specials: zeros and infinities
    zero = (v == 0) & dst.has_zero
    if t.neg_zero is not None:
        out[zero & neg] = t.neg_zero
    infm = np.isinf(v) & ~invalid
    if infm.any():
        if pol.overflow is Overflow.IEEE:
            inf = ((1 << dst.exp_bits) - 1) << dst.man_bits if dst.nan == "ieee" else dst.mag_mask
            out[infm] = np.where(neg[infm], inf | dst.sign_bit, inf)
        elif pol.overflow is Overflow.SATURATE:
            out[infm & ~neg] = _code_of(t, np.array([top]))[0]
            out[infm & neg] = _code_of(t, np.array([-top]))[0] if dst.signed else 0
        else:
            invalid |= infm
    if invalid.any():
        out[invalid] = _nan_code(dst, pol)
    return out


def _int_cast(v: np.ndarray, dst: IntFormat, pol: Policy, rand) -> np.ndarray:
    out = np.zeros(v.shape, np.int64)
    fin = np.isfinite(v) & (v != 0)
    x = v[fin]
    with np.errstate(invalid="ignore", over="ignore"):
        lo = np.floor(x)
        res = _choose(x, lo, lo + 1, pol.rounding, None if rand is None else rand[fin], pol.sr_bits)
    mod = 2.0**dst.bits
    if pol.overflow is Overflow.SATURATE:
        res = np.clip(res, dst.min_value, dst.max_value)
    res = np.mod(res, mod)  # two's complement code; exact for every float64 integer
    out[fin] = res.astype(np.int64)
    nan = np.isnan(v)
    infm = np.isinf(v)
    if pol.overflow is Overflow.WRAP:
        nan |= infm
    else:
        out[infm & (v > 0)] = dst.max_value
        out[infm & (v < 0)] = dst.min_value % (1 << dst.bits)
    if nan.any():
        out[nan] = _nan_code(dst, pol)
    return out


def table_cast(values: Any, dst: Any, *, rounding: Any = "rne", overflow: Any = None, nan_to: Any = None,
               ftz: bool = False, random_bits: Any = None, sr_bits: int | None = None) -> np.ndarray:
    """Round float64 values (exact sources) to codes of ``dst`` (<= 16 bits) by the table rule."""
    dst = format_of(dst)
    if dst.bits > MAX_TABLE_BITS:
        raise ValueError(f"value tables need a destination of <= {MAX_TABLE_BITS} bits, not {dst.name}")
    pol = resolve_policy(dst, rounding, overflow, nan_to, ftz, False, sr_bits)
    v = np.asarray(values, np.float64)
    shape = v.shape
    v = v.ravel()
    rand = None
    if pol.rounding is Rounding.STOCHASTIC:
        if random_bits is None:
            raise ValueError("rounding='sr' needs random_bits")
        rand = np.asarray(random_bits).ravel()
    if dst.is_integer:
        out = _int_cast(v, dst, pol, rand)
    else:
        out = _float_cast(v, dst, pol, rand)
    return out.astype(dst.code_dtype).reshape(shape)


def table_convert(codes: Any, src: Any, dst: Any, *, daz: bool = False, **policy: Any) -> np.ndarray:
    """Codes of ``src`` -> codes of ``dst`` by the value table (``src`` exact in float64)."""
    return table_cast(source_values(codes, src, daz=daz), dst, **policy)
