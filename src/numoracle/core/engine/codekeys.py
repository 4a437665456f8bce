"""Ordered integer keys for codes (numpy's ordered-integer trick, for every format).

``to_key`` maps the codes of a format to int64 keys that are monotone in value:
floats ``mag`` for positive codes, ``-mag`` (``-mag - 1`` where -0 exists, so -0 < +0)
for negative ones; integers their value (UINT64 shifted by -2^63 to fit int64). NaN codes
have no key; ``result_key`` gives NaNs a key just beyond +-inf on the side of their source,
which makes every non-wrapping conversion monotone on each half of the source line.
Keys also give ULP distances: the difference of two keys of one sign is the number of
representable values between them.
"""

from __future__ import annotations

import numpy as np

from ..formats.format import AnyFormat, Format, IntFormat

__all__ = ["to_key", "from_key", "key_bounds", "is_nan", "result_key", "binades", "positive_side", "key_place",
           "NEG_INF", "NEG_FINITE", "NEG_ZERO", "POS_ZERO", "POS_FINITE", "POS_INF"]

# where a (non-NaN) key lies on the value line, in key order (key_place)
NEG_INF, NEG_FINITE, NEG_ZERO, POS_ZERO, POS_FINITE, POS_INF = range(6)

_U64_OFFSET = np.uint64(1 << 63)


def is_nan(codes: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Where codes are NaNs of ``fmt`` (in the codes' own unsigned dtype when it holds them: no widening pass)."""
    c = np.asarray(codes)
    if c.dtype.kind != "u" or c.dtype.itemsize * 8 < fmt.bits:
        c = c.astype(np.uint64)
    if fmt.is_integer or not fmt.has_nan:
        return np.zeros(c.shape, bool)
    assert isinstance(fmt, Format)
    t = c.dtype.type
    if fmt.nan == "fnuz":
        return c == t(fmt.sign_bit)
    mag = c & t(fmt.mag_mask)
    if fmt.nan == "fn":
        return mag == t(fmt.mag_mask)
    return mag > t(((1 << fmt.exp_bits) - 1) << fmt.man_bits)


def to_key(codes: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Monotone int64 keys of (non-NaN) codes."""
    c = np.asarray(codes).astype(np.uint64)
    if isinstance(fmt, IntFormat):
        if fmt.signed:
            if fmt.bits == 64:
                return c.view(np.int64)
            v = c.astype(np.int64)
            return np.where(v >= (1 << (fmt.bits - 1)), v - (1 << fmt.bits), v)
        if fmt.bits == 64:
            return (c - _U64_OFFSET).view(np.int64)
        return c.astype(np.int64)
    assert isinstance(fmt, Format)
    if not fmt.signed:
        return c.astype(np.int64)
    mag = (c & np.uint64(fmt.mag_mask)).astype(np.int64)
    neg = (c & np.uint64(fmt.sign_bit)) != 0
    return np.where(neg, -mag - (1 if fmt.has_negative_zero else 0), mag)


def from_key(keys: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Codes of keys (inverse of ``to_key``), as uint64."""
    k = np.asarray(keys, np.int64)
    if isinstance(fmt, IntFormat):
        if not fmt.signed and fmt.bits == 64:
            return k.view(np.uint64) + _U64_OFFSET
        return k.view(np.uint64) & np.uint64((1 << fmt.bits) - 1) if fmt.bits < 64 else k.view(np.uint64)
    assert isinstance(fmt, Format)
    if not fmt.signed:
        return k.astype(np.uint64)
    mag = np.where(k >= 0, k, -k - (1 if fmt.has_negative_zero else 0)).astype(np.uint64)
    return np.where(k >= 0, mag, mag | np.uint64(fmt.sign_bit))


def key_bounds(fmt: AnyFormat) -> tuple[int, int]:
    """(smallest, largest) key of a non-NaN value (infinities included)."""
    if isinstance(fmt, IntFormat):
        lo, hi = fmt.min_value, fmt.max_value
        if not fmt.signed and fmt.bits == 64:
            return -(1 << 63), (1 << 63) - 1
        return lo, hi
    assert isinstance(fmt, Format)
    top = fmt.max_mag_code + (1 if fmt.has_inf else 0)
    if not fmt.signed:
        return 0, top
    return (-top - (1 if fmt.has_negative_zero else 0)), top


def positive_side(keys: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Where keys are of values on the positive half (+0 included, -0 not): key >= 0, except UINT64,
    whose keys are offset by -2^63 and whose every value is on the positive half."""
    k = np.asarray(keys, np.int64)
    if isinstance(fmt, IntFormat) and not fmt.signed:
        return np.ones(k.shape, bool)
    return k >= 0


def key_place(keys: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """NEG_INF .. POS_INF: where each non-NaN key lies on the value line (non-decreasing in the key)."""
    k = np.asarray(keys, np.int64)
    lo, hi = key_bounds(fmt)
    zero = 0 if not (isinstance(fmt, IntFormat) and not fmt.signed and fmt.bits == 64) else lo
    out = np.where(k > zero, POS_FINITE, np.where(k == zero, POS_ZERO, NEG_FINITE))
    if fmt.has_negative_zero:
        out = np.where(k == -1, NEG_ZERO, out)
    if fmt.has_inf:
        out = np.where(k == hi, POS_INF, np.where(k == lo, NEG_INF, out))
    if not fmt.has_zero:  # zero-less (E8M0): code 0 is the smallest value
        out = np.where(out == POS_ZERO, POS_FINITE, out)
    return out.astype(np.int8)


def result_key(codes: np.ndarray, fmt: AnyFormat, positive_side: np.ndarray) -> np.ndarray:
    """Keys of conversion results; a NaN result sits just beyond the end of its source's side."""
    codes = np.asarray(codes)
    nan = is_nan(codes, fmt)
    if not nan.any():
        return to_key(codes, fmt)
    lo, hi = key_bounds(fmt)
    k = to_key(np.where(nan, np.uint64(0), codes.astype(np.uint64)), fmt)  # 0 is never a NaN code
    return np.where(nan, np.where(positive_side, hi + 1, lo - 1), k)


def binades(fmt: AnyFormat, negative: bool) -> list[tuple[int, int, int]]:
    """Finite nonzero source values of one sign by binade: [(e, key_lo, key_hi)], by magnitude.

    Binade e holds the values with 2^e <= |x| < 2^(e+1).
    """
    out: list[tuple[int, int, int]] = []
    if isinstance(fmt, IntFormat):
        if negative and not fmt.signed:
            return out
        top = fmt.max_value if not negative else -fmt.min_value
        for e in range(0, top.bit_length()):
            lo, hi = 1 << e, min((1 << (e + 1)) - 1, top)
            if negative:
                lo, hi = -hi, -lo
            out.append((e, *_int_keys(lo, hi, fmt)))
        return out
    assert isinstance(fmt, Format)
    if negative and not fmt.signed:
        return out
    m = fmt.man_bits
    spans = []
    if fmt.has_subnormals:
        for j in range(m):  # subnormal binades: mantissa bit j is the leading one
            spans.append((fmt.emin - m + j, 1 << j, (1 << (j + 1)) - 1))
    first_ef = 1 if fmt.has_subnormals else 0
    for ef in range(first_ef, (fmt.max_mag_code >> m) + 1):
        lo = ef << m
        hi = min(((ef + 1) << m) - 1, fmt.max_mag_code)
        spans.append((ef - fmt.bias, lo, hi))
    for e, lo, hi in spans:
        if negative:
            z = 1 if fmt.has_negative_zero else 0
            out.append((e, -hi - z, -lo - z))
        else:
            out.append((e, lo, hi))
    return out


def _int_keys(lo: int, hi: int, fmt: IntFormat) -> tuple[int, int]:
    if not fmt.signed and fmt.bits == 64:
        return lo - (1 << 63), hi - (1 << 63)
    return lo, hi
