"""The numpy fast paths' one rounding step: unsigned words rounded at a bit position by a rounding mode.

A word x holds a magnitude whose low ``s`` bits are the discarded fraction and whose higher bits are the
kept part: the FP32 code of a value re-biased to a narrower format (core/fast/lanes.py, s = 23 - m), the
significand of a result below the smallest normal at its own shift (core/fast/widelane.py, fastpaths._tiny),
or the float64 / float32 bits of an exact value rounded to a narrower grid in place (models/engine/accumulate.py,
where the kept part stays at its place: ``place=True``). ``round_word`` computes the increment of
docs/semantics.md steps 5-6 from (mode, sign, the kept part's last bit, the fraction) as the engine does
(core/engine/softfloat.py, a deliberately separate implementation: tests/core/test_wordround.py holds the two
to each other on every mode and overflow policy). A carry out of the kept part runs into the bits above
it, which is the next binade for float codes. Overflow, the sign and specials are the caller's.

Each mode is at most one addition below the kept bits and a shift (or a mask):

* RNE adds half - 1 + lsb (a tie carries only from an odd kept part), RNA adds half;
* RTZ drops the fraction;
* RU / RD add 2^s - 1 where the sign says so (any fraction bit carries); with per-element shifts, which may
  reach the word's width (there 2^s - 1 is no longer a word), they add 1 where a dropped bit is set;
* RTO sets the kept part's last bit where a dropped bit is set;
* SR adds the random bits under the top ``sr_bits`` of the fraction (its carry is the increment).

``s`` is an int (every element) or an array of the words' type (one shift per element; numpy gives 0 for a
shift by the width or more, which is the kept part of every word below 2^(width - 1) and every floor of
its fraction). Everything is whole-array numpy operations written into ``out`` and the temporaries.
"""

from __future__ import annotations

import numpy as np

from ..formats.policy import Rounding

__all__ = ["round_word"]


def round_word(mode: Rounding, x: np.ndarray, s, out: np.ndarray | None = None, *, sign: np.ndarray | None = None,
               rand: np.ndarray | None = None, sr_bits: int | None = None, place: bool = False,
               tmp: np.ndarray | None = None, flag: np.ndarray | None = None, smin: int | None = None,
               cap: int | None = None) -> np.ndarray:
    """``out`` = x rounded at bit ``s`` by ``mode``: the kept part (x >> s, rounded), or with ``place`` (an int
    ``s`` only) the kept bits at their place, the low s bits cleared.

    x: uint32 or uint64 words (below 2^(width - 1) with per-element shifts); sign: words whose top bit is
    each element's sign (RU, RD; it may be x itself); rand, sr_bits: stochastic rounding's random bits
    (< 2^sr_bits) and their count; tmp, flag: a word and a bool temporary of x's shape (made when None).
    With per-element shifts, stochastic rounding overwrites x and s; ``smin`` (every shift is at least
    smin) and ``cap`` (results of cap and above all overflow for the caller) allow its shorter forms. The
    sums stay in the word where (x >> max(s - sr_bits, 0)) + rand does (core/fastwide.wide_sr_ok).
    """
    out = np.empty_like(x) if out is None else out
    word, bits = x.dtype.type, x.dtype.itemsize * 8
    per = np.ndim(s) > 0
    if mode is Rounding.STOCHASTIC:
        return _stochastic(x, s, out, _temp(tmp, x) if per else None, rand, int(sr_bits), smin, cap)
    if mode in (Rounding.NEAREST_EVEN, Rounding.NEAREST_AWAY):
        even = mode is Rounding.NEAREST_EVEN
        if per:                              # half (- 1) = 2^31 (- 1) >> (32 - s): 0 once s > 32 (wraps)
            half = _temp(tmp, x)
            np.subtract(word(bits), s, out=half)
            np.right_shift(word((1 << (bits - 1)) - even), half, out=half)
        else:
            half = word((1 << (s - 1)) - even)
        if even:
            np.right_shift(x, s, out=out)
            np.bitwise_and(out, word(1), out=out)
            np.add(out, half, out=out)
            np.add(out, x, out=out)
        else:
            np.add(x, half, out=out)
        return _finish(out, s, place, word)
    if mode is Rounding.TOWARD_ZERO:
        return _finish(x, s, place, word, out)
    if not per:
        return _masked(mode, x, s, out, sign, _temp(tmp, x), place, word, bits)
    return _sticky(mode, x, s, out, sign, _temp(tmp, x), _temp(flag, x, bool), word, bits)


def _temp(t: np.ndarray | None, like: np.ndarray, dtype=None) -> np.ndarray:
    return np.empty(like.shape, dtype or like.dtype) if t is None else t


def _finish(v: np.ndarray, s, place: bool, word, out: np.ndarray | None = None) -> np.ndarray:
    """The kept part of v (v >> s), or with ``place`` v's bits above s (the low s bits cleared)."""
    out = v if out is None else out
    if place:
        return np.bitwise_and(v, word(~((1 << s) - 1) & ((1 << (8 * v.itemsize)) - 1)), out=out)
    return np.right_shift(v, s, out=out)


def _masked(mode, x, s: int, out, sign, tmp, place: bool, word, bits: int) -> np.ndarray:
    """RU, RD, RTO at one shift s for every element: the fraction's mask 2^s - 1 is a word, and adding it
    to the fraction carries exactly when a dropped bit is set."""
    mask = word((1 << s) - 1)
    if mode is Rounding.TO_ODD:                          # the carry of (x & mask) + mask, OR-ed into the lsb
        np.bitwise_and(x, mask, out=tmp)
        np.add(tmp, mask, out=tmp)
        _finish(tmp, s, place, word)
        _finish(x, s, place, word, out)
        return np.bitwise_or(out, tmp, out=out)
    np.right_shift(sign, word(bits - 1), out=out)        # 1 for negative values
    if mode is Rounding.UP:
        np.subtract(out, word(1), out=out)               # all ones for positive values, 0 for negative
    else:
        np.negative(out, out=out)                        # all ones for negative values
    np.bitwise_and(out, mask, out=out)
    np.add(out, x, out=out)
    return _finish(out, s, place, word)


def _sticky(mode, x, s, out, sign, tmp, flag, word, bits: int) -> np.ndarray:
    """RU, RD, RTO with one shift per element (which may reach the word's width: no mask 2^s - 1 there):
    the kept part, plus one where a dropped bit is set (by the sign for RU / RD), or with it OR-ed into
    the last kept bit (RTO)."""
    np.right_shift(x, s, out=out)
    np.left_shift(out, s, out=tmp)
    np.not_equal(x, tmp, out=flag)                       # a dropped bit is set
    if mode is Rounding.TO_ODD:
        return np.bitwise_or(out, flag, out=out)
    np.right_shift(sign, word(bits - 1), out=tmp)        # 1 where the sign points away from zero
    if mode is Rounding.UP:
        np.bitwise_xor(tmp, word(1), out=tmp)
    np.bitwise_and(tmp, flag, out=tmp)
    return np.add(out, tmp, out=out)


def _stochastic(x, s, out, tmp, r, R: int, smin: int | None, cap: int | None) -> np.ndarray:
    """out = kept + ((floor(frac * 2^R) + rand) >> R), frac = (x mod 2^s) / 2^s, exactly.

    With k1 = max(R - s, 0), k2 = max(s - R, 0) and q = min(s, R) = s - k2 = R - k1:
    out = ((x >> k2) + (rand >> k1)) >> q. s >= R: x >> k2 = kept * 2^R + floor(frac * 2^R), and
    adding rand < 2^R carries into kept exactly when the sum reaches 2^R. s < R: floor(frac * 2^R)
    = (x mod 2^s) * 2^k1, and with rand = hi * 2^k1 + lo (lo < 2^k1) the carry is that of
    (x mod 2^s) + hi at bit s (lo cannot add one: both terms below are multiples of 2^k1).

    The short form for R > smin, where (cap + 1) 2^R fits the word: x / 2^s = x' / 2^s' with
    x' = x 2^(R - smin) and s' = s + R - smin >= R, so the first case applies to (x', s'):
    out = ((x' >> (s - smin)) + rand) >> R. First x = min(x, cap 2^smin): only words of results that
    overflow whatever the rounding change (their kept part x >> s > cap - 1 at s = smin), and they
    still give out = cap, an overflow for the caller.
    """
    word = x.dtype.type
    if tmp is None:                                      # one shift for every element (k1 or k2 is 0)
        if R > s:
            np.right_shift(r, word(R - s), out=out)
            np.add(out, x, out=out)
        elif R < s:
            np.right_shift(x, word(s - R), out=out)
            np.add(out, r, out=out)
        else:
            np.add(x, r, out=out)
        return np.right_shift(out, word(min(s, R)), out=out)
    if smin is not None and R <= smin:                   # s >= smin >= R: k1 = 0, q = R
        np.subtract(s, word(R), out=tmp)
        np.right_shift(x, tmp, out=out)
    elif smin is not None and cap is not None and (cap + 1) << R <= 1 << (8 * x.itemsize):
        np.subtract(s, word(smin), out=tmp)
        np.minimum(x, word(cap << smin), out=x)
        np.left_shift(x, word(R - smin), out=x)
        np.right_shift(x, tmp, out=out)
    else:
        np.maximum(s, word(R), out=tmp)                  # max(s, R)
        np.subtract(tmp, s, out=s)                       # k1
        np.subtract(tmp, word(R), out=tmp)               # k2
        np.right_shift(x, tmp, out=x)
        np.right_shift(r, s, out=out)
        np.add(out, x, out=out)
        np.subtract(word(R), s, out=s)                   # q = R - k1
        return np.right_shift(out, s, out=out)
    np.add(out, r, out=out)
    return np.right_shift(out, word(R), out=out)
