"""Exact sums of binary terms: integer limbs, carries, and one correct rounding at the end.

The machinery under ``reference.py`` (exact_sum / exact_dot / exact_matmul). Nothing here
rounds until :func:`round_limbs`; every other step is integer arithmetic whose range is
argued next to it.

Terms. A *term* is ``(-1)^neg * mag * 2^exp`` with ``mag`` a uint64 (any value below 2^64)
and ``exp`` an int64. Every finite value of every numoracle format is one term: a float64
``x = f * 2^e`` (``np.frexp``, 0.5 <= |f| < 1) has ``mag = |f| * 2^53 < 2^53`` and ``exp =
e - 53``; an integer is ``mag = |v| < 2^64``, ``exp = 0``. The product of two terms whose
magnitudes have at most 64 bits together is one term (:func:`product_terms` cuts wider ones
into 32-bit digits first, so every digit product is below 2^64).

Accumulator. A row's terms are added into *limbs*: int64 integers ``l_j`` with
``value = sum_j l_j * 2^(32 j) * 2^base``, where ``base`` is the row's lowest term exponent.
A term at bit offset ``off = exp - base`` is ``mag << r`` placed at limb ``off // 32`` with
``r = off % 32``; ``mag << r < 2^96`` is cut into three 32-bit pieces, one per limb, so every
piece is below 2^32 in magnitude. The pieces are added with ``np.bincount`` (float64
weights): each call sees at most 2^20 terms and each bin receives at most one piece per
term, so every partial sum inside bincount is an integer below 2^52 and exact in float64.
The bin totals are converted to int64 (exact) and carries are propagated in integers.

Rounding. After carry propagation the limbs of |value| are digits in [0, 2^32); the top 54
bits below the leading one (or fewer, at float64's subnormal quantum 2^-1074) plus a sticky
bit (any lower bit set) give round-to-nearest-even *and* round-to-odd at float64 precision.
Round-to-odd is the intermediate that makes a second rounding correct (Boldo & Melquiond):
RNE_T(RO_53(x)) == RNE_T(x) for every format T with precision <= 51 whose grid refined by
two bits lies inside float64's (every narrower numoracle format).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["split_values", "product_terms", "sum_terms", "round_limbs", "limbs_to_fractions", "Terms"]

L = 32  # limb width in bits
_MASK = np.int64((1 << L) - 1)
_U32 = np.uint64((1 << 32) - 1)
CHUNK = 1 << 20  # terms per bincount call: keeps every float64 bin sum below 2^52 (exact)
_ROW_LIMBS = 1 << 22  # limbs held at once (rows x limbs), bounds memory

Terms = tuple[np.ndarray, np.ndarray, np.ndarray]  # (neg: bool, mag: uint64, exp: int64)


# ---- values -> terms -------------------------------------------------------------------------
def split_values(v: np.ndarray, *, strip: bool = False) -> Terms:
    """Exact terms of finite values (float64, int64 or uint64 arrays); zeros get mag 0.

    Non-finite entries must have been replaced (by 0) before. ``strip`` removes trailing zero
    bits of ``mag`` (``exp`` grows to match), so ``mag`` has as many bits as the value has
    significant bits: an FP32 value then has at most 24 and two of them multiply in uint64.
    """
    v = np.asarray(v)
    if v.dtype == np.float64:
        f, e = np.frexp(v)
        # |f| in [0.5, 1) with at most 53 significant bits, so |f| * 2^53 is an integer below
        # 2^53: exact in float64 (ldexp only changes the exponent) and in the uint64 cast.
        mag = np.ldexp(np.abs(f), 53).astype(np.uint64)
        neg = f < 0
        exp = e.astype(np.int64) - 53
    elif v.dtype == np.int64:
        neg = v < 0
        u = v.view(np.uint64)
        # two's complement: |v| = 2^64 - u for negative v, computed modulo 2^64 (also for -2^63)
        mag = np.where(neg, np.uint64(0) - u, u)
        exp = np.zeros(v.shape, np.int64)
    elif v.dtype == np.uint64:
        neg = np.zeros(v.shape, bool)
        mag = v.copy()
        exp = np.zeros(v.shape, np.int64)
    else:
        raise TypeError(f"internal: split_values takes float64/int64/uint64, got {v.dtype}")
    if strip:
        mag, exp = _strip(mag, exp)
    return neg, mag, exp


def _strip(mag: np.ndarray, exp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shift out trailing zero bits: mag * 2^exp is unchanged."""
    low = mag & (np.uint64(0) - mag)  # the lowest set bit (0 for mag == 0), a power of two
    # a power of two below 2^64 is exact in float64; frexp gives its exponent + 1
    tz = np.frexp(low.astype(np.float64))[1].astype(np.int64) - 1
    tz = np.maximum(tz, 0)  # mag == 0 gives -1
    return mag >> tz.astype(np.uint64), exp + tz


def _bits(mag: np.ndarray) -> int:
    return int(mag.max()).bit_length() if mag.size else 0


def product_terms(a: Terms, b: Terms) -> Terms:
    """Exact products of two term arrays of one shape (..., K): terms of shape (..., K * t).

    When the magnitudes have at most 64 bits together the product of the magnitudes is
    exact in uint64 and t = 1. Otherwise each operand wider than 32 bits is cut into two
    32-bit digits (``mag = hi * 2^32 + lo``, the hi digit carrying exp + 32); every digit
    product is then below 2^32 * 2^32 = 2^64, and t <= 4.
    """
    na, ma, ea = a
    nb, mb, eb = b
    neg = na ^ nb
    if _bits(ma) + _bits(mb) <= 64:
        return neg, ma * mb, ea + eb
    da = _digits(ma, ea) if _bits(ma) > 32 else [(ma, ea)]
    db = _digits(mb, eb) if _bits(mb) > 32 else [(mb, eb)]
    mags, exps = [], []
    for mx, ex in da:
        for my, ey in db:
            mags.append(mx * my)  # both digits < 2^32 (or the operand is narrow): < 2^64
            exps.append(ex + ey)
    t = len(mags)
    return (np.concatenate([neg] * t, axis=-1), np.concatenate(mags, axis=-1), np.concatenate(exps, axis=-1))


def _digits(mag: np.ndarray, exp: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(mag & _U32, exp), (mag >> np.uint64(32), exp + 32)]


# ---- terms -> limbs ----------------------------------------------------------------------------
def _row_span(mag: np.ndarray, exp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: base (lowest exponent of a nonzero term; 0 for empty rows) and top - base."""
    nz = mag != 0
    big = np.int64(1) << 62
    lo = np.where(nz, exp, big).min(axis=1, initial=big)
    hi = np.where(nz, exp, -big).max(axis=1, initial=-big)
    empty = lo == big
    lo[empty] = 0
    hi[empty] = 0
    return lo, hi - lo


def _normalise(limbs: np.ndarray) -> None:
    """Carry propagation in place: limbs 0..n-2 into [0, 2^32), the top limb keeps the sign.

    ``l >> 32`` is an arithmetic shift (floor division by 2^32) and ``l & mask`` the matching
    non-negative remainder, so ``l == (l >> 32) * 2^32 + (l & mask)`` for negative l as well.
    """
    for j in range(limbs.shape[0] - 1):
        c = limbs[j] >> L
        limbs[j] &= _MASK
        limbs[j + 1] += c


def _accumulate(neg: np.ndarray, mag: np.ndarray, exp: np.ndarray, base: np.ndarray, nl: int) -> np.ndarray:
    """Limbs (nl, R) int64 of the row sums of terms (R, n) relative to ``base`` (R,)."""
    R, n = mag.shape
    limbs = np.zeros((nl, R), np.int64)
    step = max(1, CHUNK // max(R, 1))
    for c0 in range(0, n, step):
        m = mag[:, c0:c0 + step]
        nz = m != 0
        off = np.where(nz, exp[:, c0:c0 + step] - base[:, None], 0)  # >= 0: base is the row minimum
        j = off >> 5
        r = (off & 31).astype(np.uint64)
        # mag << r == p0 + p1 * 2^32 + p2 * 2^64 with every piece in [0, 2^32):
        # p0 = the low (32 - r) bits of mag shifted up by r; rest = mag >> (32 - r) < 2^(32 + r).
        p0 = (m & ((np.uint64(1) << (np.uint64(32) - r)) - np.uint64(1))) << r
        rest = m >> (np.uint64(32) - r)
        pieces = (p0, rest & _U32, rest >> np.uint64(32))
        sgn = neg[:, c0:c0 + step]
        idx = j * R + np.arange(R, dtype=np.int64)[:, None]  # limb-major bins: (j, row)
        for k, p in enumerate(pieces):
            w = p.astype(np.float64)  # < 2^32: exact
            w = np.where(sgn, -w, w).ravel()
            # at most CHUNK terms per call, one piece per bin each, |piece| < 2^32: every
            # partial sum is an integer below 2^52, exact in float64; the int64 cast is exact.
            acc = np.bincount((idx + k * R).ravel(), weights=w, minlength=nl * R)
            limbs += acc.reshape(nl, R).astype(np.int64)
        _normalise(limbs)  # each pass adds < 2^52 per limb; normalising keeps int64 far from overflow
    return limbs


def sum_terms(terms: Terms, *, exact: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Row sums of terms (R, n): (RNE float64, RO float64, Fractions or None), each of shape (R,).

    Rows are processed in blocks so that rows x limbs stays bounded. An empty or all-zero
    row sums to +0.
    """
    neg, mag, exp = terms
    R, n = mag.shape
    base, span = _row_span(mag, exp)
    rne = np.zeros(R)
    ro = np.zeros(R)
    fr = np.empty(R, object) if exact else None
    # the row value is below n * 2^64 * 2^span: limbs for span + 64 + log2(n) bits, plus a spare
    nls = (span + 64 + int(n).bit_length() + 1) // L + 2
    order = np.argsort(nls, kind="stable")  # rows with similar limb counts share a block
    i = 0
    while i < R:
        nl = int(nls[order[min(R - 1, i + max(1, CHUNK // max(n, 1)) - 1)]])
        rows_fit = max(1, min(CHUNK // max(n, 1), _ROW_LIMBS // nl))
        sel = order[i:i + rows_fit]
        nl = int(nls[sel].max())
        limbs = _accumulate(neg[sel], mag[sel], exp[sel], base[sel], nl)
        if exact:
            fr[sel] = limbs_to_fractions(limbs, base[sel])
        rne[sel], ro[sel] = round_limbs(limbs, base[sel])
        i += sel.size
    return rne, ro, fr


# ---- limbs -> float64 ----------------------------------------------------------------------------
def round_limbs(limbs: np.ndarray, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Round ``sum_j limbs[j] * 2^(32 j + base)`` (per column) to float64: (RNE, RO).

    ``limbs`` (nl, R) int64 with |limb| < 2^62 (modified in place); ``base`` (R,) int64.
    RNE overflows to +-inf; RO overflows to +-max finite (SoftFloat's rule for round-to-odd).
    """
    nl0, R = limbs.shape
    _normalise(limbs)
    neg = limbs[-1] < 0
    if neg.any():  # |value|: negate the digits and propagate again (top limb ends >= 0)
        np.negative(limbs, out=limbs, where=neg)
        _normalise(limbs)
    # two zero limbs below: the window below the leading bit (54 bits) always starts at bit >= 0
    limbs = np.concatenate([np.zeros((2, R), np.int64), limbs])
    base = base.astype(np.int64) - 2 * L
    nl = nl0 + 2
    cols = np.arange(R)
    nz = limbs != 0
    some = nz.any(axis=0)
    h = nl - 1 - np.argmax(nz[::-1], axis=0)  # highest nonzero limb
    top = limbs[h, cols]
    if int(top.max(initial=0)) >= 1 << L:
        raise AssertionError("internal: limb accumulator too short")
    b = np.frexp(top.astype(np.float64))[1].astype(np.int64)  # bit length of top (< 2^32: exact)
    pos = h * L + b  # |value| / 2^base lies in [2^(pos-1), 2^pos)
    # bits below `cut` are rounded off: 53 significant bits, or fewer at the quantum 2^-1074
    cut = np.maximum(pos - 53, -1074 - base)
    c1 = cut - 1  # window = bits [c1, c1 + 54): the kept bits and the guard bit; c1 >= 2L - 54 > 0
    j0 = c1 // L
    sh = c1 - j0 * L

    def limb(j: np.ndarray) -> np.ndarray:
        ok = j < nl
        return np.where(ok, limbs[np.minimum(j, nl - 1), cols], 0)

    l0 = limb(j0)
    win = l0 >> sh
    for k in (1, 2):  # sh + 54 <= 85 < 96: the window lies in limbs j0..j0+2
        # a nonzero limb here lies inside the window, so its shifted value is below 2^54 and the
        # clipped shift never drops a set bit
        win = win | (limb(j0 + k) << np.minimum(k * L - sh, 63))
    lowest = np.argmax(nz, axis=0)  # lowest nonzero limb: any set bit in limbs below j0?
    sticky = ((l0 & ((np.int64(1) << sh) - 1)) != 0) | (some & (lowest < j0))
    guard = (win & 1).astype(bool)
    kept = win >> 1  # < 2^53
    inexact = guard | sticky
    up = guard & (sticky | ((kept & 1) == 1))
    e = np.clip(base + cut, -1100, 1100).astype(np.int32)  # base + cut >= -1074 by the choice of cut
    # integers <= 2^53 are exact in float64; ldexp is exact unless the result overflows, and an
    # overflow of the 53-bit-rounded significand is exactly the RNE overflow to inf
    with np.errstate(over="ignore"):
        rne = np.ldexp((kept + up).astype(np.float64), e)
        ro = np.ldexp((kept | inexact).astype(np.float64), e)
    ro = np.where(np.isinf(ro), np.finfo(np.float64).max, ro)
    rne = np.where(some, rne, 0.0)
    ro = np.where(some, ro, 0.0)
    return np.where(neg, -rne, rne), np.where(neg, -ro, ro)


def limbs_to_fractions(limbs: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The exact values (Fractions) of limb columns; limbs (nl, R) are not modified."""
    nl, R = limbs.shape
    acc = np.zeros(R, object)
    for j in range(nl - 1, -1, -1):  # Horner in Python integers: exact
        acc = acc * (1 << L) + limbs[j].astype(object)
    out = np.empty(R, object)
    for i in range(R):
        v, e = int(acc[i]), int(base[i])
        out[i] = Fraction(v << e) if e >= 0 else Fraction(v, 1 << -e)
    return out
