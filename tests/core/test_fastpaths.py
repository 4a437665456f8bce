"""The specialised cast paths (core/fast/lanes.py, core/fast/widelane.py) against the generic engine: bit-identical.

Default tier: every 16-bit source (BF16/FP16 -> FP32) in every policy; FP32 sources from each pair's
boundary set, every high half with boundary-relevant and sampled low halves, and seeded random codes,
in every mode and policy combination (a slice of the grid per combination); every 16-bit pattern
shifted into several FP32 positions, the FP8 formats' subnormal / normal / overflow boundaries and
ties, and 2^20 random codes, in every mode (each with its overflow policies, ftz and daz), through
the lane each chunk takes (normal, wide, engine). ``-m slow``: the whole high x low grid and the
16-bit patterns in every combination. ``-m exhaustive``: all 2^32 FP32 codes in RNE for each pair, and
for E4M3FN/E5M2 every code of their range (with margins) in every mode.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import numoracle as no
from numoracle.core import jit
from numoracle.core.engine.convert import cast_codes, engine_cast_codes
from numoracle.core.fast import lanes as fastpaths
from numoracle.core.fast.lanes import FAST_CHUNK, select_fast_path
from numoracle.core.formats.format import BF16, FP8_E4M3FN, FP8_E5M2, FP16, FP32, Format
from numoracle.core.formats.policy import Policy, resolve_policy
from numoracle.formats import FP4_E2M1FN, FP6_E2M3FN, FP6_E3M2FN
from policies import MODES, overflows

NARROW = [BF16, FP16, FP8_E4M3FN, FP8_E5M2]
SMALL = [FP6_E3M2FN, FP6_E2M3FN, FP4_E2M1FN]  # no NaN, no inf: saturating, NaN by nan_to
ALL_MODES = MODES + ["sr"]
SR_BITS = [1, 5, 13, 16, 21, 30, 32]  # below, at and above each pair's discarded width (16, 13, 20, 21)
SR_FEW = [5, 16, 21, 31, 32]  # below / at / above the widths; 31 is the widest the wide lane takes


@pytest.fixture(autouse=True)
def _numpy_lanes():
    """These tests hold the numpy lanes to the engine: the compiled kernel (tests/core/test_jitcast.py) stays off
    whatever NUMORACLE_JIT says."""
    with jit.disabled():
        yield


def policies(dst: Format, modes=ALL_MODES) -> list[Policy]:
    """Every (mode, overflow, daz, ftz, tininess) combination the destination takes (sr at several widths)."""
    out = []
    for mode, ovf, (daz, ftz), tin in itertools.product(modes, overflows(dst), [(0, 0), (1, 0), (0, 1), (1, 1)],
                                                        ["before", "after"]):
        if mode == "sr" and tin == "after":
            continue
        for srb in (SR_BITS if mode == "sr" else [None]):
            out.append(resolve_policy(dst, mode, ovf, None, bool(ftz), bool(daz), srb, tin))
    return out


def same(codes: np.ndarray, src: Format, dst: Format, pol: Policy, seed: int = 0) -> None:
    """cast_codes (fast path) == the engine, codes and flags, with and without flags asked."""
    rand = None
    if pol.sr_bits is not None:
        rand = np.random.default_rng(seed).integers(0, 1 << pol.sr_bits, codes.size, dtype=np.uint64)
        rand = rand.astype(np.uint32)
    want, want_fl = engine_cast_codes(codes, src, dst, pol, rand, flags=True)
    got, got_fl = cast_codes(codes, src, dst, pol, rand, flags=True)
    bad = np.flatnonzero((got != want) | (got_fl != want_fl))
    if bad.size:
        i = bad[0]
        pytest.fail(f"{src.name} -> {dst.name} [{pol}]: {bad.size} differ; code {int(codes[i]):#x}: fast "
                    f"{int(got[i]):#x} flags {int(got_fl[i])}, engine {int(want[i]):#x} flags {int(want_fl[i])}")
    assert np.array_equal(cast_codes(codes, src, dst, pol, rand), want)  # the path without flags


def codes_only(codes: np.ndarray, dst: Format, pol: Policy, seed: int = 0) -> None:
    """cast_codes == the engine without flags (the only calls that take the wide lane)."""
    rand = None
    if pol.sr_bits is not None:
        rand = np.random.default_rng(seed).integers(0, 1 << pol.sr_bits, codes.size, dtype=np.uint64)
        rand = rand.astype(np.uint32)
    want = engine_cast_codes(codes, FP32, dst, pol, rand)[0]
    got = cast_codes(codes, FP32, dst, pol, rand)
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = bad[0]
        pytest.fail(f"FP32 -> {dst.name} [{pol}]: {bad.size} differ; code {int(codes[i]):#x} (rand "
                    f"{None if rand is None else int(rand[i])}): fast {int(got[i]):#x}, engine {int(want[i]):#x}")


def mode_policies(dst: Format, flush=((0, 0), (0, 1), (1, 0))) -> list[Policy]:
    """Every mode (sr at SR_FEW widths) x overflow policy x the (daz, ftz) pairs given, tininess before."""
    return [resolve_policy(dst, mode, ovf, None, bool(ftz), bool(daz), srb)
            for mode in ALL_MODES for ovf in overflows(dst) for daz, ftz in flush
            for srb in (SR_FEW if mode == "sr" else [None])]


def low_halves(dst: Format, rng: np.random.Generator, n_sample: int) -> np.ndarray:
    """Low 16 bits of FP32 codes that matter for dst: around the rounding point, the tie, the sticky bits."""
    s = 23 - dst.man_bits
    pts = {0, 1, 0xFFFF, 0x8000, 0x7FFF, 0x8001}
    for k in range(min(s, 16) + 1):  # the guard bit at s-1 (in the low half for every pair) and its sides
        for v in (1 << k, (1 << k) - 1, (1 << k) + 1):
            pts.add(v & 0xFFFF)
    if s < 16:
        half, unit = 1 << (s - 1), 1 << s
        for q in range(0, 1 << 16, unit):
            pts.update(((q + half) & 0xFFFF, (q + half - 1) & 0xFFFF, (q + half + 1) & 0xFFFF))
    pts.update(int(v) for v in rng.integers(0, 1 << 16, n_sample))
    return np.array(sorted(pts), np.uint32)


def grid(dst: Format, rng: np.random.Generator, n_sample: int) -> np.ndarray:
    """Every FP32 high half (all exponents, signs, top mantissa bits) with each chosen low half."""
    hi = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    return (hi[:, None] | low_halves(dst, rng, n_sample)[None, :]).ravel()


def fp32_codes(dst: Format, rng: np.random.Generator, n_random: int) -> np.ndarray:
    """The pair's boundary set, the specials, seeded random bit patterns and normal values."""
    b = np.asarray(no.conformance.boundary_values(FP32, dst).codes, np.uint32)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFBFFFFF, 1,
                        0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF], np.uint32)
    r = rng.integers(0, 1 << 32, n_random, dtype=np.uint64).astype(np.uint32)
    normal = (rng.standard_normal(n_random) * 8).astype(np.float32).view(np.uint32)
    return np.concatenate([b, special, r, normal])


# ---- which pairs take a fast path -------------------------------------------------------------------------
def test_the_hot_pairs_have_fast_paths_and_others_do_not():
    for dst in NARROW + SMALL:
        assert select_fast_path(FP32, dst, resolve_policy(dst)) is not None
    for src in (BF16, FP16):
        assert select_fast_path(src, FP32, resolve_policy(FP32)) is not None
    assert select_fast_path(FP16, BF16, resolve_policy(BF16)) is None
    assert select_fast_path(FP32, no.formats.format_of("fp64"), resolve_policy(no.formats.format_of("fp64"))) is None


# ---- widening: every 16-bit source, every policy ------------------------------------------------------------
@pytest.mark.parametrize("src", [BF16, FP16], ids=lambda f: f.name)
def test_widening_every_16_bit_code_every_policy(src):
    codes = np.arange(1 << 16, dtype=np.uint16)
    for pol in policies(FP32):
        if pol.sr_bits not in (None, 13):
            continue
        same(codes, src, FP32, pol)


# ---- narrowing: every mode and policy on the boundary set and random codes -------------------------------
@pytest.mark.parametrize("dst", NARROW + SMALL, ids=lambda f: f.name)
def test_narrowing_every_policy_on_boundary_and_random_codes(dst, rng):
    codes = fp32_codes(dst, rng, 1 << 14)  # one chunk; test_dense_and_sparse_chunks_mix crosses chunks
    for k, pol in enumerate(policies(dst)):
        same(codes, FP32, dst, pol, seed=k)


@pytest.mark.parametrize("dst", NARROW, ids=lambda f: f.name)
def test_narrowing_every_mode_on_a_slice_of_the_high_low_grid(dst, rng):
    g = grid(dst, rng, 4)
    sl = g[rng.integers(0, g.size, 1 << 17)]  # a seeded slice of the grid per mode
    for k, mode in enumerate(ALL_MODES):
        for ovf in overflows(dst):
            pol = resolve_policy(dst, mode, ovf, None, False, False, 16 if mode == "sr" else None)
            same(sl, FP32, dst, pol, seed=k)


@pytest.mark.parametrize("dst", NARROW, ids=lambda f: f.name)
def test_narrowing_rne_on_2_20_random_codes_and_the_whole_grid(dst, rng):
    r = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    same(r, FP32, dst, resolve_policy(dst))
    same(grid(dst, rng, 0), FP32, dst, resolve_policy(dst))


def test_dense_and_sparse_chunks_mix(rng):
    """Chunks of random bit patterns, of values below the smallest normal and of NaNs (the engine takes
    such chunks whole), of normal values with a tenth tiny (the tiny path) and of normal values."""
    n = FAST_CHUNK // 2
    normal = (rng.standard_normal(2 * n) * 8).astype(np.float32).view(np.uint32)
    bits = rng.integers(0, 1 << 32, 2 * n, dtype=np.uint64).astype(np.uint32)
    tiny = (rng.integers(0, 1 << 31, 2 * n, dtype=np.uint64).astype(np.uint32) & np.uint32(0x387FFFFF)) | \
        (rng.integers(0, 2, 2 * n).astype(np.uint32) << np.uint32(31))  # exponent fields below 113
    nan = np.full(n, 0x7FC00000, np.uint32)
    sparse = normal.copy()  # a tenth of the values tiny: the fast lane's own tiny path
    sparse[::10] = tiny[::10]
    codes = np.concatenate([normal[:n], bits, tiny, nan, sparse, normal[n:]])
    for dst in NARROW:
        for mode in ALL_MODES:
            for srb in ([7, 30, 32] if mode == "sr" else [None]):
                same(codes, FP32, dst, resolve_policy(dst, mode, sr_bits=srb))
        same(codes, FP32, dst, resolve_policy(dst, "rne", daz=True))


def test_shapes_and_public_cast_use_the_fast_path(rng):
    x = (rng.standard_normal((3, 5, 7)) * 100).astype(np.float32)
    for dst in NARROW:
        got = no.cast(x, dst)
        want = engine_cast_codes(x.view(np.uint32), FP32, dst, resolve_policy(dst))[0].reshape(x.shape)
        assert got.shape == x.shape and np.array_equal(got, want)
    assert no.cast(np.float32(1.5), "bf16") == 0x3FC0
    assert cast_codes(np.zeros(0, np.uint32), FP32, BF16, resolve_policy(BF16)).size == 0


# ---- slow and exhaustive tiers ----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("dst", NARROW, ids=lambda f: f.name)
def test_narrowing_every_policy_on_the_whole_grid(dst, rng):
    g = grid(dst, rng, 8)
    for k, pol in enumerate(policies(dst)):
        same(g, FP32, dst, pol, seed=k)


@pytest.mark.exhaustive
@pytest.mark.parametrize("dst", NARROW, ids=lambda f: f.name)
def test_narrowing_every_fp32_code_rne(dst):
    pol = resolve_policy(dst)
    step = 1 << 24
    for lo in range(0, 1 << 32, step):
        same(np.arange(lo, lo + step, dtype=np.uint64).astype(np.uint32), FP32, dst, pol)


@pytest.mark.exhaustive
@pytest.mark.parametrize("dst", [FP8_E4M3FN, FP8_E5M2], ids=lambda f: f.name)
def test_fp8_range_every_fp32_code_every_mode(dst):
    """Every FP32 code from 2^-14 below the smallest normal to past the overflow threshold (the normal and
    the wide lane, the engine's chunks of the flags calls), both signs, every mode and overflow policy."""
    e0, e_top = dst.emin + 127, dst.emax + 127
    step = 1 << 23  # one binade of one sign
    for sign in (0, 1 << 31):
        for e in range(e0 - 14, e_top + 3):
            codes = np.arange(sign | (e << 23), (sign | (e << 23)) + step, dtype=np.uint64).astype(np.uint32)
            for k, mode in enumerate(ALL_MODES):
                for ovf in overflows(dst):
                    same(codes, FP32, dst, resolve_policy(dst, mode, ovf, sr_bits=16 if mode == "sr" else None), seed=k)


@pytest.mark.parametrize("dst", NARROW, ids=lambda f: f.name)
def test_stochastic_rounding_at_the_carry_threshold(dst, rng):
    """rand = 2^R - floor(frac * 2^R) carries and one less does not: random bits at the exact threshold
    (computed with Fractions), for normal and tiny results, below and above each pair's discarded width."""
    from fractions import Fraction

    codes = np.concatenate([(rng.standard_normal(300) * 8).astype(np.float32).view(np.uint32),
                            rng.integers(0, 1 << 32, 300, dtype=np.uint64).astype(np.uint32)])
    v = codes.view(np.float32)
    codes = codes[np.isfinite(v) & (v != 0) & (np.abs(v) < float(dst.max_finite))]
    for R in (3, 16, 24, 32):
        rand = []
        for c in codes:
            x = abs(Fraction(float(np.uint32(c).view(np.float32))))
            # the quantum at x: 2^(floor(log2 x) - m), and 2^(emin - m) below the smallest normal
            e = x.numerator.bit_length() - x.denominator.bit_length()  # floor(log2 x) or one more
            e -= Fraction(2) ** e > x
            q = Fraction(2) ** (max(e, dst.emin) - dst.man_bits)
            frac = x / q - (x // q)
            top = int(frac * (1 << R))
            rand.append(((1 << R) - top) % (1 << R))
        rand = np.array(rand, np.uint64)
        pol = resolve_policy(dst, "sr", sr_bits=R)
        for rr in (rand, (rand + (1 << R) - 1) % (1 << R)):
            rr = rr.astype(np.uint32)
            want = engine_cast_codes(codes, FP32, dst, pol, rr)[0]
            assert np.array_equal(cast_codes(codes, FP32, dst, pol, rr), want)


# ---- the wide lane (results below the smallest normal, overflows, zeros) and the random bits' check ----
def patterns16(shifts=(16, 13, 10, 7, 0)) -> np.ndarray:
    """Every 16-bit pattern shifted into FP32 positions: at 16 with the low half 0, 1 and 0xFFFF (every
    sign, exponent and top mantissa bits, sticky bits off and on), lower with every other one negative."""
    p = np.arange(1 << 16, dtype=np.uint32)
    out = [(p << np.uint32(16)) | np.uint32(low) for low in (0, 1, 0xFFFF)]
    out += [(p << np.uint32(k)) | ((p & np.uint32(1)) << np.uint32(31)) for k in shifts if k != 16]
    return np.concatenate(out)


def fp8_boundaries(dst: Format) -> np.ndarray:
    """FP32 codes at and around every value of dst, its midpoints (ties), half the smallest subnormal,
    every power of two below the smallest normal, the overflow threshold and 2^(emax+1); both signs,
    each with its FP32 neighbours (+-1, +-2 ulps)."""
    from fractions import Fraction

    m, emin = dst.man_bits, dst.emin
    vals = [no.decode(np.array([c]), dst)[0] for c in range(dst.max_mag_code + 1)]
    pts = [float(v) for v in vals] + [(float(a) + float(b)) / 2 for a, b in zip(vals, vals[1:])]
    top_ulp = float(dst.top_ulp)
    pts += [float(dst.max_finite) + top_ulp / 2, float(dst.max_finite) + top_ulp, 2.0 ** (dst.emax + 1)]
    pts += [2.0 ** k for k in range(-149, emin + 1)] + [float(Fraction(2) ** (emin - m - 1))]
    c = np.array(pts, np.float32).view(np.uint32)
    c = (c[:, None].astype(np.int64) + np.arange(-2, 3)[None, :]).ravel()
    c = c[(c >= 0) & (c < 0x7F800000)].astype(np.uint32)
    return np.concatenate([c, c | np.uint32(0x80000000), np.array([0x7F800000, 0xFF800000, 0x7FC00000], np.uint32)])


def wide_calls(monkeypatch) -> list[int]:
    """Count the wide lane's chunks (a lane that is never taken would make the tests below vacuous)."""
    calls: list[int] = []
    real = fastpaths.round_wide

    def counting(*args):
        calls.append(args[4].size)  # the chunk's length
        return real(*args)

    monkeypatch.setattr(fastpaths, "round_wide", counting)
    return calls


@pytest.mark.parametrize("dst", NARROW + SMALL, ids=lambda f: f.name)
def test_every_16_bit_pattern_in_fp32_positions_every_mode(dst, monkeypatch):
    codes = patterns16()
    calls = wide_calls(monkeypatch)
    for k, pol in enumerate(mode_policies(dst, flush=((0, 0), (1, 1)))):
        codes_only(codes, dst, pol, seed=k)
    assert (len(calls) > 0) == (dst != BF16)  # BF16's results below its smallest normal are FP32 subnormals
    for pol in policies(dst, ["rne", "ru", "sr"])[::7]:  # flags too: a slice of the policies and codes
        same(codes[::5], FP32, dst, pol)


@pytest.mark.parametrize("dst", [FP8_E4M3FN, FP8_E5M2], ids=lambda f: f.name)
def test_fp8_boundaries_and_ties_dense_and_sparse(dst, rng, monkeypatch):
    """The boundary set alone (the wide lane) and scattered among normal values (the normal lane and _tiny)."""
    b = fp8_boundaries(dst)
    normal = (rng.standard_normal(FAST_CHUNK) * float(dst.max_finite) / 8).astype(np.float32).view(np.uint32)
    step = normal.size // b.size
    sparse = normal.copy()
    sparse[::step][:b.size] = b
    calls = wide_calls(monkeypatch)
    for k, pol in enumerate(policies(dst)):
        same(b, FP32, dst, pol, seed=k)
        codes_only(np.concatenate([b, sparse]), dst, pol, seed=k)
    assert calls and max(calls) >= b.size


@pytest.mark.parametrize("dst", [FP16, FP8_E4M3FN, FP8_E5M2], ids=lambda f: f.name)
def test_wide_stochastic_rounding_at_the_short_forms_limit(dst, rng, monkeypatch):
    """The wide lane's shorter stochastic rounding (sr_bits above the discarded width, while
    (max_mag + 2) 2^R fits 32 bits: core/fast/widelane.py) at its largest R, and the general form one
    above, on random bit patterns (overflows, normal, subnormal and zero results), every overflow policy."""
    limit = max(R for R in range(1, 32) if (dst.max_mag_code + 2) << R <= 1 << 32)
    codes = rng.integers(0, 1 << 32, 1 << 17, dtype=np.uint64).astype(np.uint32)
    calls = wide_calls(monkeypatch)
    for R in (limit, limit + 1):
        for k, ovf in enumerate(overflows(dst)):
            codes_only(codes, dst, resolve_policy(dst, "sr", ovf, sr_bits=R), seed=R + k)
    assert calls


@pytest.mark.parametrize("dst", NARROW + [pytest.param(d, marks=pytest.mark.slow) for d in SMALL], ids=lambda f: f.name)
def test_2_20_random_codes_every_mode_and_policy(dst, rng, monkeypatch):
    r = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    calls = wide_calls(monkeypatch)
    for k, pol in enumerate(mode_policies(dst, flush=((0, 0),))):
        codes_only(r, dst, pol, seed=k)
    for k, pol in enumerate(mode_policies(dst, flush=((0, 1), (1, 0)))):  # ftz, daz: a slice
        codes_only(r[:1 << 17], dst, pol, seed=k)
    assert (len(calls) > 0) == (dst != BF16)
    calls.clear()
    for k, pol in enumerate(policies(dst)):  # flags (the wide lane sets them too), every policy: a slice
        same(r[k << 12:(k + 1) << 12], FP32, dst, pol, seed=k)
    assert (len(calls) > 0) == (dst != BF16)


@pytest.mark.slow
@pytest.mark.parametrize("dst", NARROW + SMALL, ids=lambda f: f.name)
def test_every_16_bit_pattern_every_policy_with_flags(dst):
    codes = patterns16()
    for k, pol in enumerate(policies(dst)):
        same(codes, FP32, dst, pol, seed=k)


def test_random_bits_are_checked_in_every_chunk():
    """cast() checks the random bits' range inside the lane (chunk by chunk) and before the engine: a bad
    value in the last chunk, a negative one, one above 2^32 in uint64 are refused on both routes; valid
    bits in any integer dtype give the uint32 bits' result."""
    n = 3 * FAST_CHUNK + 5
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    good = np.random.default_rng(4).integers(0, 1 << 12, n, dtype=np.uint32)
    for dst, src_x in (("bf16", x), ("fp8_e4m3fn", x), ("fp16", x.astype(np.float64))):  # the last: the engine
        want = no.cast(src_x, dst, rounding="sr", sr_bits=12, random_bits=good)
        for dt in (np.int64, np.uint64, np.int16):
            assert np.array_equal(no.cast(src_x, dst, rounding="sr", sr_bits=12, random_bits=good.astype(dt)), want)
        for bad_v, dt in ((1 << 12, np.uint32), (-1, np.int64), ((1 << 32) + 1, np.uint64)):
            bad = good.astype(dt)
            bad[-1] = bad_v
            with pytest.raises(ValueError, match=r"random_bits must lie in \[0, 2\*\*12\)"):
                no.cast(src_x, dst, rounding="sr", sr_bits=12, random_bits=bad)
    r32 = np.full(n, 0xFFFFFFFF, np.uint64)
    r32[0] = 1 << 32
    with pytest.raises(ValueError, match=r"\[0, 2\*\*32\)"):
        no.cast(x, "fp8_e5m2", rounding="sr", sr_bits=32, random_bits=r32)


def test_numpy_shifts_by_32_or_more_give_zero():
    """The wide lane relies on it (core/fast/widelane.py): uint32 shifts by >= 32 bits, scalar or array, give 0."""
    x = np.array([0xFFFFFFFF, 1, 0x00FFFFFF], np.uint32)
    for k in (32, 33, 63, 140, 0xFFFFFFF0):
        sh = np.full(3, k, np.uint32)
        assert not np.right_shift(x, sh).any() and not np.left_shift(x, sh).any()
        assert not np.right_shift(np.uint32(0x7FFFFFFF), sh).any()
