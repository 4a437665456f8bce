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
2. The rounding decision of docs/semantics.md steps 5-6 on (x, sh): the fast paths' one rounding step
   (core/fast/wordround.py) with one shift per element, exact for every sh: numpy defines a shift by 32 or
   more as giving 0, which is the kept part and every truncated fraction of a word below 2^24 shifted
   that far. Stochastic rounding takes its shorter forms there (every sh >= s; codes from max_mag + 1
   on overflow whatever the rounding).

The caller clamps overflows, flushes (ftz) and sets the sign, as for the normal lane.
"""

from __future__ import annotations

import numpy as np

from ..formats.policy import Rounding
from .wordround import round_word

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
    np.subtract(_U(K), t, out=w)  # sh
    _word(a, t)
    # 2. the decision: the one rounding step (core/fast/wordround.py) at each element's shift
    round_word(mode, a, w, t, sign=u, rand=r, sr_bits=sr_bits, tmp=v, flag=m, smin=s, cap=max_mag + 1)


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


def wide_sr_ok(sr_bits: int | None) -> bool:
    """Stochastic rounding with 32 random bits can overflow the uint32 sum for deep tiny values."""
    return sr_bits is None or sr_bits < 32
