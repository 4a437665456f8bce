"""The wide lane of FP32 -> FP16/E4M3FN/E5M2: normal AND subnormal results, one variable shift per element.

``fastpaths._Narrow`` rounds a chunk whose results are normal with one fixed shift ``s = 23 - m``.
Uniformly random FP32 bit patterns are mostly far outside that range (for E4M3FN about half of
them lie below its smallest normal 2^-6, and most of the rest overflow), so a chunk of them is
rounded here instead, on whole-chunk uint32 operations, with no element-wise branch:

1. With e the FP32 exponent field (0..254 here: infinities and NaNs are listed apart by the caller,
   and FP32 subnormals too under daz) and e0 = emin + 127 the field of the destination's smallest
   normal, c = min(max(e, 1), e0). The word to round is x = |code| - (c - 1) * 2^23 and the shift is
   sh = s + e0 - c: for a normal result (c = e0) x is the re-biased magnitude of the normal lane and
   sh = s; for a result below 2^emin, x = the significand (mantissa | 2^23, or the bare mantissa of
   an FP32 subnormal or zero, whose exponent is that of e = 1) and sh = s + e0 - c puts its quantum
   at the destination's 2^(emin - m) (value = x * 2^(c - 150)). A carry out of the kept bits lands on
   the next binade (or on the smallest normal), as in the normal lane. A zero gives x = 0: +-0.
2. The rounding decision of docs/semantics.md steps 5-6 on (x, sh), exact for every sh: numpy
   defines a shift by 32 or more as giving 0, which is the kept part and every truncated fraction of
   a word below 2^24 shifted that far. RNE/RNA add half - 1 + lsb / half (0x7FFFFFFF or 0x80000000
   shifted by 32 - sh; any value once sh >= 32, where the sum's shift gives 0); RU/RD/RTO test the
   discarded bits as x != (x >> sh) << sh; stochastic rounding adds the random bits at the right
   weight (two shifts, see ``_stochastic``).

The caller clamps overflows, flushes (ftz) and sets the sign, as for the normal lane.
"""

from __future__ import annotations

import numpy as np

from .policy import Rounding

__all__ = ["round_wide"]

_U = np.uint32


def round_wide(mode: Rounding, sr_bits: int | None, s: int, e0: int, a, u, t, w, v, m, r, fl=None,
               max_mag: int = 0xFFFFFFFF) -> None:
    """t = the rounded magnitude code (before the overflow clamp) of the chunk's FP32 magnitudes ``a``.

    ``a``, ``w``, ``v`` and ``m`` are overwritten (temporaries of the chunk's length), ``u`` is the
    signed code, ``r`` the random bits; ``fl`` (uint8, or None) gets INEXACT and UNDERFLOW (tininess
    before rounding; the caller lists the elements whose tininess after rounding differs).
    ``max_mag``: the destination's largest finite magnitude code (a shorter stochastic rounding).
    """
    K = s + e0 - 1  # sh = K - (c - 1)
    # 1. t = c - 1 = min(max(e, 1), e0) - 1
    np.maximum(a, _U(0x00800000), out=w)
    np.subtract(w, _U(0x00800000), out=w)
    np.right_shift(w, _U(23), out=t)
    np.minimum(t, _U(e0 - 1), out=t)
    if fl is not None:
        _flags(K, e0, a, t, w, v, m, fl)
    if mode is Rounding.STOCHASTIC:
        _stochastic(sr_bits, s, K, a, t, w, v, r, max_mag)
        return
    np.subtract(_U(K), t, out=w)  # sh
    if mode in (Rounding.NEAREST_EVEN, Rounding.NEAREST_AWAY):
        np.add(t, _U((32 - K) % (1 << 32)), out=v)  # 32 - sh (wrapped, hence a shift of >= 32, when sh > 32)
        np.right_shift(_U(0x7FFFFFFF if mode is Rounding.NEAREST_EVEN else 0x80000000), v, out=v)
    _word(a, t)
    # 2. the decision
    if mode is Rounding.NEAREST_EVEN:  # (x + half - 1 + lsb) >> sh
        np.right_shift(a, w, out=t)
        np.bitwise_and(t, _U(1), out=t)
        np.add(t, v, out=t)
        np.add(t, a, out=t)
    elif mode is Rounding.NEAREST_AWAY:  # (x + half) >> sh
        np.add(a, v, out=t)
    elif mode is Rounding.TOWARD_ZERO:
        np.right_shift(a, w, out=t)
        return
    else:  # RU, RD, RTO: kept, plus one where a discarded bit is set (by sign for RU/RD), or OR-ed in
        np.right_shift(a, w, out=t)
        np.left_shift(t, w, out=v)
        np.not_equal(a, v, out=m)  # sticky: a discarded bit is set
        if mode is Rounding.TO_ODD:
            np.bitwise_or(t, m, out=t)
            return
        np.right_shift(u, _U(31), out=v)  # 1 for negative values
        if mode is Rounding.UP:
            np.bitwise_xor(v, _U(1), out=v)
        np.bitwise_and(v, m, out=v)
        np.add(t, v, out=t)
        return
    np.right_shift(t, w, out=t)


def _flags(K: int, e0: int, a, t, w, v, m, fl) -> None:
    """INEXACT where a discarded bit of x is set (x & (2^sh - 1) != 0, the mask all ones once sh >= 32);
    UNDERFLOW where also c < e0 (the value is below 2^emin), as the engine's E < emin."""
    np.subtract(_U(K), t, out=v)  # sh
    np.left_shift(_U(0xFFFFFFFF), v, out=v)
    np.invert(v, out=v)  # the discarded bits' mask
    np.left_shift(t, _U(23), out=w)
    np.subtract(a, w, out=w)  # x
    np.bitwise_and(v, w, out=v)
    np.not_equal(v, _U(0), out=m)  # inexact
    np.less(t, _U(e0 - 1), out=fl.view(bool))
    np.bitwise_and(fl, m, out=fl)
    np.left_shift(fl, np.uint8(1), out=fl)  # UNDERFLOW = 2
    np.bitwise_or(fl, m, out=fl)  # INEXACT = 1


def _word(a, t) -> None:
    """Step 1's word: a = |code| - (c - 1) * 2^23, from t = c - 1 (t is overwritten)."""
    np.left_shift(t, _U(23), out=t)
    np.subtract(a, t, out=a)


def _stochastic(R: int, s: int, K: int, a, t, w, v, r, max_mag: int) -> None:
    """t = kept + ((floor(frac * 2^R) + rand) >> R), frac = (x mod 2^sh) / 2^sh, exactly.

    With k1 = max(R - sh, 0), k2 = max(sh - R, 0) and q = min(sh, R) = sh - k2 = R - k1:
    t = ((x >> k2) + (rand >> k1)) >> q. sh >= R: x >> k2 = kept * 2^R + floor(frac * 2^R), and
    adding rand < 2^R carries into kept exactly when the sum reaches 2^R. sh < R: floor(frac * 2^R)
    = (x mod 2^sh) * 2^k1, and with rand = hi * 2^k1 + lo (lo < 2^k1) the carry is that of
    (x mod 2^sh) + hi at bit sh (lo cannot add one: both terms below are multiples of 2^k1).
    The sum stays below 2^32 except for R = 32 with sh >= 32 (the caller keeps that case out:
    ``wide_sr_ok``); a shift by 32 or more gives 0, the exact floor for x < 2^24.
    K > R always here (K = s + e0 - 1 >= 125), so the sh = K - t comparisons below stay unsigned.

    R > s, shorter, where (max_mag + 2) 2^R <= 2^32: x / 2^sh = x' / 2^sh' with x' = x 2^(R - s) and
    sh' = sh + R - s >= R (sh >= s), so the first formula applies to (x', sh'): t = ((x' >> (sh - s))
    + rand) >> R. First x = min(x, (max_mag + 1) 2^s): only words of results that overflow whatever
    the rounding change (x >= 2^24 is a normal result's word, sh = s, and its code x >> s > max_mag),
    and they still give t = max_mag + 1, an overflow for the caller's clamp and flags; then
    x' + rand <= (max_mag + 1) 2^R + 2^R - 1 < 2^32.
    """
    if R <= s:  # sh >= s >= R: k1 = 0, q = R
        np.subtract(_U(K - R), t, out=w)  # k2 = sh - R
        _word(a, t)
        np.right_shift(a, w, out=t)
        np.add(t, r, out=t)
        np.right_shift(t, _U(R), out=t)
        return
    if (max_mag + 2) << R <= 1 << 32:
        np.subtract(_U(K - s), t, out=w)  # sh - s = sh' - R
        _word(a, t)
        np.minimum(a, _U((max_mag + 1) << s), out=a)
        np.left_shift(a, _U(R - s), out=a)  # x'
        np.right_shift(a, w, out=t)
        np.add(t, r, out=t)
        np.right_shift(t, _U(R), out=t)
        return
    np.maximum(t, _U(K - R), out=w)  # K - q
    np.minimum(t, _U(K - R), out=v)
    _word(a, t)
    np.subtract(_U(K - R), v, out=v)  # k2 = (K - R) - min(t, K - R)
    np.right_shift(a, v, out=a)
    np.subtract(w, _U(K - R), out=v)  # k1 = max(t, K - R) - (K - R)
    np.right_shift(r, v, out=t)
    np.add(t, a, out=t)
    np.subtract(_U(K), w, out=w)  # q
    np.right_shift(t, w, out=t)


def wide_sr_ok(sr_bits: int | None) -> bool:
    """Stochastic rounding with 32 random bits can overflow the uint32 sum for deep tiny values."""
    return sr_bits is None or sr_bits < 32
