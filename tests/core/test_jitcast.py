"""The compiled cast (core/kernels/cast.py) against the engine: codes and flags, bit for bit.

Default tier (each combination of formats and policy is a kernel compiled on a machine's first run, so it keeps a
few): FP32 -> FP8 E4M3FN and INT8 in RNE from boundary-weighted values and random bit patterns, with and without
flags; FP32 -> BF16's one-step loop on every rounding case; FP32 -> INT8 through the floats' own rounding in every
mode and FP32 -> INT32 at the clamp's edge; ``cast`` taking the kernel under ``jit.backend("numba")`` and not under
``"numpy"``. ``-m slow``: the same for FP16 and UINT32 (FP16's one-step loop, the float route from FP16, BF16 and
FP64 and to 16-, 32- and 64-bit integers, INT64's clamp from FP64), FP64 -> FP16's one-step route, E8M0 in every
mode, stochastic rounding at every width; FP32 and FP64 sources to every float destination the kernel covers,
every mode, overflow policy (sr at several widths), daz / ftz and tininess, on boundary values (ties and their
neighbours, the subnormal range and below it, the overflow threshold's neighbourhood, signed zeros, infinities,
NaN payloads quiet and signalling) and random codes.
Integers (core/kernels/castint.py): near integers, ties, powers of two to 2^70 and the formats' limits, with every
nan_to and daz. ``-m exhaustive``: every FP16 and BF16 code to every covered destination in every combination
(FP16 to BF16, E8M0 and FNUZ E5M2, BF16 to FP16 and TF32, through FP32 words).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import numoracle as no
from numoracle.core import jit
from numoracle.core.engine.convert import engine_cast_codes
from numoracle.core.fast.lanes import CastStep
from numoracle.core.formats.format import BF16, FP16, FP32, FP64, registry
from numoracle.core.formats.policy import resolve_policy
from policies import MODES, nan_tos, overflows

pytest.importorskip("numba")
from numoracle.core.kernels import cast as jitcast  # noqa: E402  (needs numba)
from numoracle.core.kernels import onestep as jitonestep
from numoracle.formats import E8M0FNU, FP4_E2M1FN, FP8_E4M3FN, INT8, INT16, INT32, INT64, UINT16, UINT32

FLOATS = [f for f in registry() if not f.is_integer]
INTS = [f for f in registry() if f.is_integer]
FLUSH = [(0, 0, "before"), (1, 0, "before"), (0, 1, "before"), (0, 0, "after"), (1, 1, "after")]
SR_BITS = [1, 5, 13, 16, 21, 31, 32]


def boundary(fmt, rng, n: int = 3000) -> np.ndarray:
    """float64 values around fmt's grid (module docstring), both signs."""
    e = rng.integers(fmt.emin - fmt.man_bits - 3, fmt.emax + 3, n)
    x = np.ldexp(1 + rng.integers(0, 1 << 52, n) * 2.0**-52, e)
    q = np.ldexp(1.0, np.maximum(e, fmt.emin) - fmt.man_bits)          # the grid's quantum at x
    tie = (np.floor(x / q) + 0.5) * q
    x = np.where(rng.random(n) < 0.3, tie * (1 + rng.choice([-1, 0, 0, 1], n) * 2.0**-50), x)
    top, ulp = float(fmt.max_finite), 2.0 ** (fmt.emax - fmt.man_bits)
    mn, ms = float(fmt.min_normal), float(fmt.min_subnormal)
    edge = [top + ulp * d for d in (-1, -0.5, -0.25, 0, 0.25, 0.5, 0.5 + 2**-20, 0.75, 1, 2)]
    edge += [mn, mn * (1 - 2**-30), mn * (1 - 2.0 ** -(fmt.man_bits + 1)), mn * (1 - 2.0 ** -(fmt.man_bits + 2)),
             ms, ms / 2, ms / 2 * (1 + 2**-30), ms / 2 * (1 - 2**-30), ms / 4, 0.0, np.inf, np.nan, 2.0**-1074]
    x = np.concatenate([x, edge])
    return x * rng.choice([-1.0, 1.0], x.size)


def int_values(dst, rng, n: int) -> np.ndarray:
    """float64 values around an integer format's range: near integers (ties, just off them), powers of two up to
    2^70, and the limits min / max, half and one past them, 2^63, 2^64; both signs."""
    k = n // 2
    near = rng.integers(-2**12, 2**12, k) + rng.choice([0, 0.5, 0.25, 0.75, 1e-9, -1e-9, 0.5 + 1e-7], k)
    wide = np.ldexp(rng.random(k) + 1, rng.integers(-5, 70, k))
    lim = [float(dst.max_value) + d for d in (0, 0.5, 1)] + [float(dst.min_value) - d for d in (0, 0.5, 1)]
    x = np.concatenate([near, wide, lim, [2.0**63, 2.0**64, 3 * 2.0**64]])
    return np.concatenate([x, -x])


def codes_of(src, fmt, rng, n: int = 3000) -> np.ndarray:
    """Source codes: fmt's boundary values rounded to src, random bit patterns, NaN payloads (quiet and
    signalling), signed zeros and the source's subnormal edges."""
    with np.errstate(all="ignore"):
        v = int_values(fmt, rng, n) if fmt.is_integer else boundary(fmt, rng, n)
        if src == FP32:
            extra = [0x7F800001, 0xFF800001, 0x7FC00000, 0xFFBFFFFF, 0x00000001, 0x807FFFFF, 0x00400000,
                     0x7F7FFFFF, 0xFF7FFFFF, 0x80000000]
            return np.concatenate([v.astype(np.float32).view(np.uint32),
                                   rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32),
                                   np.array(extra, np.uint32)])
        extra = [0x7FF0000000000001, 0xFFF0000000000001, 0x7FF8000000000000, 1, 0x800FFFFFFFFFFFFF,
                 0x0008000000000000, 0x8000000000000000]
        return np.concatenate([v.view(np.uint64), rng.integers(0, 1 << 63, n, dtype=np.uint64) * np.uint64(2),
                               np.array(extra, np.uint64)])


def policies(dst, modes=(*MODES, "sr"), flush=FLUSH):
    """Every mode x overflow policy x (daz, ftz, tininess); sr at widths below, at and above the discarded bits.
    Integers: every mode x overflow policy x nan_to x daz."""
    if dst.is_integer:
        for mode, ovf, nt, daz in itertools.product(modes, overflows(dst), nan_tos(dst), (False, True)):
            for srb in (SR_BITS if mode == "sr" else [None]):
                yield resolve_policy(dst, mode, ovf, nt, False, daz, srb)
        return
    for mode, ovf, (daz, ftz, tin) in itertools.product(modes, overflows(dst), flush):
        if mode != "sr":
            yield resolve_policy(dst, mode, ovf, None, bool(ftz), bool(daz), None, tin)
        elif tin == "before":
            for srb in SR_BITS:
                yield resolve_policy(dst, mode, ovf, None, bool(ftz), bool(daz), srb, tin)


def same(codes, src, dst, pol) -> bool:
    """The kernel == the engine (codes and flags; codes without flags too); False where the kernel does not
    cover the combination."""
    step = CastStep(src, dst, pol)
    if not jitcast.covers(step):
        return False
    rand = None
    if pol.sr_bits is not None:
        rand = np.random.default_rng(pol.sr_bits).integers(0, 1 << pol.sr_bits, codes.size, dtype=np.uint64)
        rand[::7] = (1 << pol.sr_bits) - 1                  # the largest: every nonzero fraction's carry
    want, want_fl = engine_cast_codes(codes, src, dst, pol, rand, True)
    got, got_fl = jitcast.run(step, codes, True, rand)
    got2, _ = jitcast.run(step, codes, False, rand)
    bad = np.flatnonzero((got != want) | (got_fl != want_fl) | (got2 != want))
    if bad.size:
        i = bad[0]
        pytest.fail(f"{src.name} -> {dst.name} [{pol}]: {bad.size} differ; code {int(codes[i]):#x}: kernel "
                    f"{int(got[i]):#x} flags {int(got_fl[i])} (without flags {int(got2[i]):#x}), engine "
                    f"{int(want[i]):#x} flags {int(want_fl[i])}")
    return True


@pytest.mark.parametrize("dst", [FP8_E4M3FN, pytest.param(FP16, marks=pytest.mark.slow)], ids=lambda f: f.name)
def test_fp32_rne_boundary_and_random_codes(dst, rng):
    assert same(codes_of(FP32, dst, rng), FP32, dst, resolve_policy(dst, "rne", None, None, False, False, None))


@pytest.mark.parametrize("dst", [INT8, pytest.param(UINT32, marks=pytest.mark.slow)], ids=lambda f: f.name)
def test_fp32_to_integers_rne(dst, rng):
    codes = codes_of(FP32, dst, rng)
    for ovf in overflows(dst):
        assert same(codes, FP32, dst, resolve_policy(dst, "rne", ovf, None, False, False, None))


@pytest.mark.parametrize("src,dst", [(FP32, INT8)] + [
    pytest.param(s, d, marks=pytest.mark.slow) for s, d in ((FP64, INT16), (FP16, INT8), (BF16, UINT16), (FP32, INT32),
                                                             (BF16, INT32), (FP64, INT64))],
                         ids=["fp32-int8", "fp64-int16", "fp16-int8", "bf16-uint16", "fp32-int32", "bf16-int32",
                              "fp64-int64"])
def test_float_route_to_integers_every_mode_and_nan_to(src, dst, rng, monkeypatch):
    """FP32 / FP64 (and FP16 / BF16, widened in the loop) to integers under saturate without flags take the floats'
    own rounding (jitcastint.float_kernel): every mode it takes and every nan_to, against the engine (``same``
    compares the codes without flags too); 16-bit sources on every code."""
    from numoracle.core.kernels import castint as jitcastint

    taken = []
    real = jitcast.float_ok
    monkeypatch.setattr(jitcast, "float_ok", lambda *a: taken.append(real(*a)) or taken[-1])
    codes = np.arange(1 << 16, dtype=np.uint16) if src.bits == 16 else codes_of(src, dst, rng, 1500)
    for mode, nt in itertools.product(("rne", "rna", "rtz", "ru", "rd"), nan_tos(dst)):
        assert same(codes, src, dst, resolve_policy(dst, mode, "saturate", nt, False, False, None))
    assert any(taken) and jitcastint.float_ok(src, dst, resolve_policy(dst, "rne", "saturate", None, False, False,
                                                                         None), False)


@pytest.mark.parametrize("src,dst", [(FP32, INT32), pytest.param(FP64, INT64, marks=pytest.mark.slow)],
                         ids=["fp32-int32", "fp64-int64"])
def test_float_route_where_max_is_not_a_float(src, dst):
    """INT32 from FP32 and INT64 from FP64 on the float route: max (2^(bits-1) - 1) is no float of the source, so the
    clamp is at the largest float below it and anything above saturates. The floats around both ends, in every
    mode the route takes (stochastic rounding with random bits at 8, every carry), against the engine."""
    ftype, utype = (np.float32, np.uint32) if src == FP32 else (np.float64, np.uint64)
    top = ftype(2.0 ** (dst.bits - 1))
    below = np.nextafter(top, ftype(0))
    edges = [top, below, np.nextafter(below, ftype(0)), np.nextafter(top, ftype(np.inf)), ftype(np.inf), ftype(1.5)]
    v = np.array(edges + [-x for x in edges] + [ftype(2.5)], ftype)
    codes = v.view(utype)
    for mode in ("rne", "rna", "rtz", "ru", "rd"):
        pol = resolve_policy(dst, mode, "saturate", None, False, False, None)
        assert jitcast.float_ok(src, dst, pol, False) and same(codes, src, dst, pol), mode
    pol = resolve_policy(dst, "sr", "saturate", None, False, False, 8)
    assert jitcast.float_ok(src, dst, pol, False) and same(codes, src, dst, pol)


@pytest.mark.slow
def test_fp64_to_fp16_rne_in_one_instruction(rng):
    """FP64 -> FP16 in RNE without flags: the hardware's one conversion (AVX512-FP16's vcvtpd2ph; NaNs then the
    canonical one) where the CPU has it, else the integer steps; both against the engine on boundary and random
    codes (``same`` checks the codes without flags, the route this takes)."""
    pol = resolve_policy(FP16, "rne", None, None, False, False, None)
    has = jitcast.jr.cpu_has("avx512fp16")
    assert jitonestep.one_step_kind(FP64, FP16, pol) == (jitonestep.HW_HALF if has else 0)
    before = jitonestep.one_step_loop.cache_info()
    assert same(codes_of(FP64, FP16, rng, 20000), FP64, FP16, pol)
    after = jitonestep.one_step_loop.cache_info()
    assert after.hits + after.misses == before.hits + before.misses + has      # the one-instruction loop ran


@pytest.mark.parametrize("dst", [BF16, pytest.param(FP16, marks=pytest.mark.slow)], ids=lambda f: f.name)
def test_fp32_one_step_casts_every_rounding_case(dst, rng):
    """FP32 -> BF16 (one integer rounding) and FP16 (the hardware's conversion) in RNE without flags: the one-step
    loop (``jitonestep.one_step``), against the engine on every FP32 code whose low 16 bits are a rounding case (0,
    the tie 0x8000 and its neighbours, 0x7FFF, 0xFFFF, 0x0001, and random) for each of the 2^16 high halves: every
    exponent, sign, NaN and infinity, the subnormals and the overflow threshold; ``same`` also runs the loop with
    flags (the general steps). The tie, its neighbours and the top of a binade are where a wrong carry shows."""
    low = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, *rng.integers(0, 1 << 16, 4)], np.uint32)
    codes = ((np.arange(1 << 16, dtype=np.uint32)[:, None] << np.uint32(16)) | low[None, :]).ravel()
    before = jitonestep.one_step_loop.cache_info()
    assert same(codes, FP32, dst, resolve_policy(dst, "rne", None, None, False, False, None))
    after = jitonestep.one_step_loop.cache_info()
    assert after.hits + after.misses == before.hits + before.misses + 1      # the one-step loop ran
    for pol in (resolve_policy(dst, "rne", "saturate", None, False, False, None),
                resolve_policy(dst, "rne", None, None, True, False, None)):
        assert jitonestep.one_step_kind(FP32, dst, pol) == 0 or pol.ftz      # other policies: the general steps
        assert same(codes[::7], FP32, dst, pol)


@pytest.mark.slow
def test_fp32_to_e8m0_every_mode(rng):
    codes = codes_of(FP32, E8M0FNU, rng, 1000)
    for pol in policies(E8M0FNU, modes=MODES, flush=[(0, 0, "before")]):
        assert same(codes, FP32, E8M0FNU, pol)


def test_cast_takes_the_kernel_only_on_the_numba_backend(rng, monkeypatch):
    monkeypatch.delenv("NUMORACLE_JIT", raising=False)      # (NUMORACLE_JIT=0 would keep the kernel off)
    x = boundary(FP8_E4M3FN, rng).astype(np.float32)
    before = jitcast.calls.count
    with jit.backend("numpy"):
        ref = no.cast(x, FP8_E4M3FN)
    assert jitcast.calls.count == before
    with jit.backend("numba"):
        got = no.cast(x, FP8_E4M3FN)
    assert jitcast.calls.count == before + 1
    assert np.array_equal(got, ref)


@pytest.mark.slow
def test_fp32_stochastic_rounding_at_every_width(rng):
    codes = codes_of(FP32, FP8_E4M3FN, rng, 1000)
    for srb in SR_BITS[:-1]:
        assert same(codes, FP32, FP8_E4M3FN, resolve_policy(FP8_E4M3FN, "sr", None, None, False, False, srb))


def test_what_the_kernel_leaves_to_the_numpy_paths():
    pol = resolve_policy(FP8_E4M3FN, "sr", None, None, False, False, 32)
    assert not jitcast.covers(CastStep(FP32, FP8_E4M3FN, pol))                 # sr's sum past the word
    assert not jitcast.covers(CastStep(FP32, FP32, resolve_policy(FP32, "rne", None, None, False, False, None)))
    for src in (FP16, BF16):                                              # exact widening: the numpy lanes
        assert not jitcast.covers(CastStep(src, FP32, resolve_policy(FP32, "rne", None, None, False, False, None)))
    assert not jitcast.covers(CastStep(FP64, FP64, resolve_policy(FP64, "rne", None, None, False, False, None)))
    m0 = no.Format.fn(4, 0)                                               # 1-bit significands with subnormals
    assert not jitcast.covers(CastStep(FP32, m0, resolve_policy(m0, "rne", None, None, False, False, None)))
    raise_nan = resolve_policy(FP4_E2M1FN, "rne", None, "raise", False, False, None)
    assert not jitcast.covers(CastStep(FP32, FP4_E2M1FN, raise_nan))


@pytest.mark.slow
@pytest.mark.parametrize("src", [FP32, FP64], ids=lambda f: f.name)
@pytest.mark.parametrize("dst", FLOATS + INTS, ids=lambda f: f.name)
def test_wide_sources_every_mode_and_policy(src, dst, rng):
    codes = codes_of(src, dst, rng)
    covered = [same(codes, src, dst, pol) for pol in policies(dst)]
    e0 = dst.is_integer or dst.emin + src.bias
    assert any(covered) == (dst.is_integer or (dst.man_bits < src.man_bits and (
        e0 >= 1 and dst.man_bits >= 1 if dst.has_subnormals else e0 >= 0)))


@pytest.mark.exhaustive
@pytest.mark.parametrize("src", [FP16, BF16], ids=lambda f: f.name)
@pytest.mark.parametrize("dst", FLOATS + INTS, ids=lambda f: f.name)
def test_every_16_bit_code_every_mode_and_policy(src, dst):
    codes = np.arange(1 << 16, dtype=np.uint16)
    for pol in policies(dst):
        same(codes, src, dst, pol)
