"""FP64 casts through FP32 words rounded to odd (core/kernels/castodd.py) against the engine: codes, bit for bit.

Default tier: FP64 -> BF16 and E4M3FN in RNE and RU; ``-m slow``: every destination the route covers, every mode
it takes and every overflow policy. Values: the destination's boundary values and random codes (test_jitcast's
codes_of) and the double-rounding traps: ties of the destination's grid and its points moved by 2^-k of a
quantum for k = 1..60 (where a rounding to FP32 to nearest would make or break a tie), FP32's overflow threshold,
its subnormal range and the values under its smallest subnormal.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import numoracle as no
from numoracle.core.engine.convert import engine_cast_codes
from numoracle.core.fast.lanes import CastStep
from numoracle.core.formats.format import BF16, FP8_E5M3FNU, FP16, FP32, FP64, registry
from numoracle.core.formats.policy import resolve_policy
from optional import kernels
from policies import overflows

pytest.importorskip("numba")
from test_jitcast import codes_of  # noqa: E402

from numoracle.core.kernels import castodd as jitcastodd  # noqa: E402  (needs numba)
from numoracle.formats import E8M0FNU, FP8_E4M3FN

MODES = ("rne", "rna", "ru", "rd", "rto")
COVERED = [f for f in registry() if not f.is_integer and f.signed and f.has_subnormals and f.man_bits <= 21]


def traps(dst, rng, n: int = 4000) -> np.ndarray:
    """FP64 values where a narrowing to FP32 by RNE would round differently (module docstring), both signs."""
    e = rng.integers(dst.emin - dst.man_bits - 2, dst.emax + 1, n)
    q = np.ldexp(1.0, np.maximum(e, dst.emin) - dst.man_bits)           # the quantum at 2^e
    g = np.ldexp(1.0, e) + rng.integers(0, 1 << max(dst.man_bits, 1), n) * q
    k = rng.integers(1, 61, n)
    x = g + q * rng.choice([0.0, 0.5], n) + q * np.ldexp(rng.choice([-1.0, 1.0], n), -k)
    f32 = np.finfo(np.float32)
    edge = [float(f32.max) * (1 + d) for d in (2.0**-25, 2.0**-24, 2.0**-30, 1e-3, 1.0)] + [1e300, 2.0**128,
            2.0**128 - 2.0**103, 2.0**-149, 2.0**-150, 2.0**-150 * (1 + 2.0**-40), 2.0**-151, 1e-300, 5e-324,
            2.0**-126 * (1 - 2.0**-30), 2.0**-133 * 1.5, 2.0**-134 * (1 + 2.0**-45)]
    x = np.concatenate([x, edge])
    return x * rng.choice([-1.0, 1.0], x.size)


def check(dst, pol, codes) -> None:
    step = CastStep(FP64, dst, pol)
    assert jitcastodd.covers(step) and jitcastodd.takes(dst, pol)
    want, _ = engine_cast_codes(codes, FP64, dst, pol, None, False)
    before = jitcastodd.kernel.cache_info().hits + jitcastodd.kernel.cache_info().misses
    got, _ = jitcastodd.run(step, codes, False)
    assert jitcastodd.kernel.cache_info().hits + jitcastodd.kernel.cache_info().misses == before + 1  # the route ran
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = bad[0]
        pytest.fail(f"fp64 -> {dst.name} [{pol}]: {bad.size} differ; {codes[i].view(np.float64)!r} "
                    f"({int(codes[i]):#x}): kernel {int(got[i]):#x}, engine {int(want[i]):#x}")


def _codes(dst, rng) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.concatenate([codes_of(FP64, dst, rng, 4000), traps(dst, rng).view(np.uint64)])


@pytest.mark.parametrize("dst", [BF16, FP8_E4M3FN], ids=lambda f: f.name)
def test_fp64_through_fp32_rounded_to_odd(dst, rng):
    codes = _codes(dst, rng)
    for mode in ("rne", "ru"):
        check(dst, resolve_policy(dst, mode, None, None, False, False, None), codes)


@pytest.mark.parametrize("dst", [BF16, FP16], ids=lambda f: f.name)
def test_one_step_after_the_narrowing(dst, rng):
    """RNE to BF16 and FP16 without flags: FP32's one-step cast (jitonestep.one_step: one integer rounding, the
    hardware's conversion) after the narrowing, on the double-rounding traps. FP16 goes on FP64's own words where
    the CPU converts FP64 -> FP16 in one instruction (AVX512-FP16: test_jitcast's test of it)."""
    pol = resolve_policy(dst, "rne", None, None, False, False, None)
    if not jitcastodd.takes(dst, pol):
        assert dst == FP16 and jitcastodd.jr.cpu_has("avx512fp16")
        return
    assert jitcastodd.one_step_kind(FP32, dst, pol) != 0
    check(dst, pol, _codes(dst, rng))


@pytest.mark.slow
@pytest.mark.parametrize("dst", COVERED, ids=lambda f: f.name)
def test_fp64_through_fp32_every_mode_and_policy(dst, rng):
    codes = _codes(dst, rng)
    for mode, ovf in itertools.product(MODES, overflows(dst)):
        pol = resolve_policy(dst, mode, ovf, None, False, False, None)
        if jitcastodd.takes(dst, pol):
            check(dst, pol, codes)
        else:
            assert dst == FP16 and mode == "rne"                  # the hardware's one conversion (avx512fp16)


def test_what_stays_on_fp64_words():
    """Flags, daz, ftz, stochastic rounding and toward zero keep FP64's own loop; so do formats without
    subnormals, unsigned ones and those of a precision above 22."""
    pol = resolve_policy(BF16, "rne", None, None, False, False, None)
    assert jitcastodd.takes(BF16, pol) and jitcastodd.covers(CastStep(FP64, BF16, pol))
    assert not jitcastodd.covers(CastStep(FP32, BF16, pol))
    assert not jitcastodd.takes(BF16, resolve_policy(BF16, "sr", None, None, False, False, 8))
    assert not jitcastodd.takes(BF16, resolve_policy(BF16, "rtz", None, None, False, False, None))
    assert not jitcastodd.takes(FP32, resolve_policy(FP32, "ru", None, None, False, False, None))
    for f in (E8M0FNU, FP8_E5M3FNU):
        assert not jitcastodd.takes(f, resolve_policy(f, "ru", None, None, False, False, None))
    codes = np.array([0x3FF0000000000001, 0x0000000000000001], np.uint64)
    n = jitcastodd.kernel.cache_info().hits + jitcastodd.kernel.cache_info().misses
    jitcastodd.run(CastStep(FP64, BF16, pol), codes, True)
    jitcastodd.run(CastStep(FP64, BF16, resolve_policy(BF16, "rne", None, None, False, True, None)), codes, False)
    assert jitcastodd.kernel.cache_info().hits + jitcastodd.kernel.cache_info().misses == n


def test_cast_takes_the_route(rng):
    """``cast`` of FP64 values picks this module where kernels run (fastpaths.select_fast_path asks it first)."""
    from numoracle.core import jit

    kernels()  # the route is taken only where the kernels are on (NUMORACLE_JIT is not 0)
    x = rng.standard_normal(1000)
    pol = resolve_policy(BF16, "ru", None, None, False, False, None)
    n = jitcastodd.kernel.cache_info().hits + jitcastodd.kernel.cache_info().misses
    with jit.forced():
        got = no.cast(x, BF16, rounding="ru")
    assert jitcastodd.kernel.cache_info().hits + jitcastodd.kernel.cache_info().misses == n + 1
    want, _ = engine_cast_codes(x.view(np.uint64), FP64, BF16, pol, None, False)
    assert np.array_equal(np.asarray(got), want)


@pytest.mark.parametrize("m,route", [(22, False), pytest.param(21, True, marks=pytest.mark.slow)])
def test_the_theorem_needs_two_bits_fewer_than_fp32(m, route):
    """A user format of 8 exponent and 22 fraction bits (precision 23: only one bit fewer than FP32's, and a
    subnormal quantum of 2^-148, twice FP32's) must not go through FP32 rounded to odd: there ties of its grid
    are FP32 numbers, and rounding to odd lands on them (1 + 2^-23 + 2^-40 came out 1, not 1 + 2^-22). One
    fraction bit fewer (precision 22) takes the route (its kernel, compiled for this format alone, ``-m slow``), and
    both give the engine's codes."""
    from numoracle.core import jit
    from numoracle.core.formats.format import Format

    f = Format(f"e8m{m}", 8, m, 127)
    pol = resolve_policy(f, "rne", None, None, False, False, None)
    assert jitcastodd.takes(f, pol) is route, m
    q = 2.0 ** -m
    x = np.array([1 + q / 2 + 2.0**-40, 1 + 1.5 * q + 2.0**-40, 2.0**(-126 - m) * 1.5 * (1 + 2.0**-30),
                  2.0**-126 * (1 + q / 2 + 2.0**-35), -(1 + q / 2 + 2.0**-40)])
    want, _ = engine_cast_codes(x.view(np.uint64), FP64, f, pol, None, False)
    with jit.forced():
        got = no.cast(x, f)
    assert np.array_equal(np.asarray(got), want), (m, [hex(g) for g in got], [hex(w) for w in want])
