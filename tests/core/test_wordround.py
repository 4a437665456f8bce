"""The numpy fast paths' one rounding step (core/fast/wordround.py) against the engine (round_pack), bit for bit.

The step rounds words at a bit position; overflow, the sign and specials are its callers'. So each case
builds the words a caller builds (FP32 codes re-biased to the destination, significands of results below
its smallest normal at their own shift, float64 / float32 bits rounded in place as models/engine/accumulate.py
does), applies the destination's overflow code where the rounded magnitude passes its largest finite
one, and compares with ``engine_cast_codes``, in every mode (stochastic at several widths) and every
overflow policy of the destination.
"""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.core.engine.convert import decode, engine_cast_codes
from numoracle.core.fast.wordround import round_word
from numoracle.core.formats.format import BF16, FP8_E4M3FN, FP8_E5M2, FP16, FP32, FP64, Format
from numoracle.core.formats.policy import resolve_policy
from policies import MODES, overflows

DSTS = [BF16, FP16, FP8_E4M3FN, FP8_E5M2, Format.ieee_like(6, 9, name="e6m9")]
CASES = [(m, None) for m in MODES] + [("sr", r) for r in (1, 5, 13, 21, 31)]


def fp32_codes(dst: Format, rng: np.random.Generator, n: int = 6000) -> np.ndarray:
    """FP32 codes from below dst's smallest subnormal to past its overflow threshold: random low bits,
    ties and near-ties at dst's last kept bit, and the largest finite magnitude's neighbours; both signs."""
    e = rng.integers(max(dst.emin - dst.man_bits - 3, -149) + 127, min(dst.emax + 2, 127) + 128, n)
    e = np.maximum(e, 0)
    man = rng.integers(0, 1 << 23, n)
    s = 23 - dst.man_bits
    tie = rng.random(n) < 0.4
    man[tie] = (man[tie] >> s << s) | (1 << (s - 1)) | rng.integers(0, 2, tie.sum()) * (rng.random(tie.sum()) < 0.3)
    codes = (e.astype(np.uint32) << np.uint32(23)) | man.astype(np.uint32)
    top = np.float32(float(dst.max_finite)).view(np.uint32)
    edge = top + np.arange(-3, 4, dtype=np.int64).astype(np.uint32)
    codes = np.concatenate([codes, edge, [0, 1, 0x00800000]]).astype(np.uint32)
    return codes | (rng.integers(0, 2, codes.size).astype(np.uint32) << np.uint32(31))


def overflow_codes(dst: Format, pol) -> np.ndarray:
    """The engine's result for an overflow of each sign under pol (+FLT_MAX and -FLT_MAX overflow every dst)."""
    huge = np.array([0x7F7FFFFF, 0xFF7FFFFF], np.uint32)
    rand = np.zeros(2, np.uint32) if pol.sr_bits is not None else None
    return engine_cast_codes(huge, FP32, dst, pol, rand)[0].astype(np.uint64)


def finish(t: np.ndarray, u: np.ndarray, dst: Format, pol) -> np.ndarray:
    """The caller's part: the overflow code of pol where the magnitude passes max, else the sign."""
    neg = (u >> np.uint32(31)).astype(np.uint64)
    t = t.astype(np.uint64)
    over = overflow_codes(dst, pol)[neg]
    return np.where(t > dst.max_mag_code, over, t | (neg << np.uint64(dst.bits - 1)))


@pytest.mark.parametrize("dst", DSTS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode,sr_bits", CASES, ids=lambda v: str(v))
def test_fp32_words_every_mode_and_overflow_policy(dst, mode, sr_bits):
    """FP32 -> dst as fastpaths / fastwide build the words: one shift for the normal results, a shift per
    element for all of them (subnormal results included)."""
    rng = np.random.default_rng([DSTS.index(dst), CASES.index((mode, sr_bits))])
    u = fp32_codes(dst, rng)
    mag = u & np.uint32(0x7FFFFFFF)
    s, e0 = 23 - dst.man_bits, dst.emin + 127
    c = np.minimum(np.maximum(mag >> np.uint32(23), np.uint32(1)), np.uint32(e0))
    x = mag - ((c - np.uint32(1)) << np.uint32(23))
    sh = np.uint32(s + e0) - c
    rand = None if sr_bits is None else rng.integers(0, 1 << sr_bits, u.size).astype(np.uint32)
    normal = c == e0
    for ovf in overflows(dst):
        pol = resolve_policy(dst, mode, ovf, sr_bits=sr_bits)
        want = engine_cast_codes(u, FP32, dst, pol, rand)[0].astype(np.uint64)
        t = round_word(pol.rounding, x.copy(), sh.copy(), sign=u, rand=rand, sr_bits=sr_bits, smin=s,
                       cap=dst.max_mag_code + 1)
        got = finish(t, u, dst, pol)
        bad = np.flatnonzero(got != want)
        assert not bad.size, f"{ovf}: {bad.size} differ, code {int(u[bad[0]]):#x}: {int(got[bad[0]]):#x} != " \
                             f"{int(want[bad[0]]):#x}"
        r_n = None if rand is None else rand[normal]
        t1 = round_word(pol.rounding, x[normal], s, sign=u[normal], rand=r_n, sr_bits=sr_bits)
        assert np.array_equal(finish(t1, u[normal], dst, pol), want[normal]), ovf


@pytest.mark.parametrize("dst", DSTS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("src", [FP64, FP32], ids=lambda f: f.name)
def test_float_bits_in_place_every_mode_and_overflow_policy(dst, mode, src):
    """Float bits rounded to dst's grid in place (models/accumulate.Arith.round on the normal range): the
    bits' value is the engine's result wherever it is at most max_finite, and the engine overflows where
    it is above."""
    rng = np.random.default_rng([DSTS.index(dst), MODES.index(mode), src.bits])
    u32 = fp32_codes(dst, rng)
    v = u32.view(np.float32)
    keep = np.abs(v) >= np.float32(float(dst.min_normal))
    v = v[keep]
    if src == FP64:   # float64 values with bits below FP32's: more of them rounded off
        v = v.astype(np.float64) * (1 + rng.integers(0, 1 << 20, v.size) * 2.0**-50)
    bits = v.view(np.uint64 if src == FP64 else np.uint32)
    d = src.man_bits - dst.man_bits
    for ovf in overflows(dst):
        pol = resolve_policy(dst, mode, ovf)
        want = engine_cast_codes(bits, src, dst, pol)[0]
        got = round_word(pol.rounding, bits, d, sign=bits, place=True).view(v.dtype).astype(np.float64)
        over = np.abs(got) > float(dst.max_finite)
        assert np.array_equal(decode(want[~over], dst).astype(np.float64), got[~over]), ovf
        neg = (bits[over] >> np.uint64(src.bits - 1)).astype(np.int64)
        assert np.array_equal(want[over].astype(np.uint64), overflow_codes(dst, pol)[neg]), ovf
