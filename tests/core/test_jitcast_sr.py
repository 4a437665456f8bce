"""The compiled cast's stochastic rounding and round to odd routes against the engine (core/kernels/cast.py,
core/kernels/castint.py): the random bits read in their own dtype and checked in the kernel's loop, and the integer
destinations' float route for to odd and stochastic rounding (on the magnitude as an integer word, or on the
float where floor(|x| * 2^R) does not fit the word).

Default tier (each combination a kernel compiled on a machine's first run): FP32 -> INT8, random bits of every dtype
without flags, and ``cast`` with int16 bits; ``-m slow``: E4M3FN and flags, FP64 -> BF16, the other sources (FP64,
FP16 and BF16 on every code), every nan_to and ``cast`` with each dtype of bits to INT8, E4M3FN and BF16.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import numoracle as no
from numoracle.core import jit
from numoracle.core.engine.convert import _check_random_bits, engine_cast_codes
from numoracle.core.fast.lanes import CastStep
from numoracle.core.formats.format import BF16, FP16, FP32, FP64
from numoracle.core.formats.policy import resolve_policy
from numoracle.formats import FP8_E4M3FN, INT8, INT16, UINT8, UINT16
from policies import nan_tos

pytest.importorskip("numba")
from test_jitcast import SR_BITS, codes_of, same  # noqa: E402

from numoracle.core.kernels import cast as jitcast  # noqa: E402  (needs numba)

DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int16, np.int32, np.int64]


def _routes(monkeypatch) -> list:
    """The float route's kernels asked for, as (mode, check, mag) (jitcast.run's calls of float_kernel)."""
    taken = []
    real = jitcast.float_kernel
    monkeypatch.setattr(jitcast, "float_kernel",
                        lambda m, s, c=False, g=False: taken.append((m, c, g)) or real(m, s, c, g))
    return taken


@pytest.mark.parametrize("src,dst", [(FP32, INT8), pytest.param(FP64, INT16, marks=pytest.mark.slow),
                                     pytest.param(FP16, INT8, marks=pytest.mark.slow),
                                     pytest.param(BF16, UINT16, marks=pytest.mark.slow),
                                     pytest.param(FP32, UINT8, marks=pytest.mark.slow)],
                         ids=["fp32-int8", "fp64-int16", "fp16-int8", "bf16-uint16", "fp32-uint8"])
def test_float_route_to_odd_and_stochastic(src, dst, rng, monkeypatch):
    """To odd and stochastic rounding at every width under saturate without flags take jitcastint.float_kernel:
    on the magnitude (to odd; sr where bits + R fits the word) or on the float (sr at the widest R), both
    against the engine (``same`` compares the codes without flags too); 16-bit sources on every code."""
    taken = _routes(monkeypatch)
    codes = np.arange(1 << 16, dtype=np.uint16) if src.bits == 16 else codes_of(src, dst, rng, 1500)
    w = 64 if src == FP64 else 32
    for nt in (nan_tos(dst) if src == FP32 and dst == INT8 else nan_tos(dst)[:1]):
        assert same(codes, src, dst, resolve_policy(dst, "rto", "saturate", nt, False, False, None))
        for srb in SR_BITS:
            pol = resolve_policy(dst, "sr", "saturate", nt, False, False, srb)
            assert same(codes, src, dst, pol) == (srb < w)
    assert (jit.ODD, False, True) in taken
    assert (jitcast.SR, False, True) in taken
    assert ((jitcast.SR, False, False) in taken) == any(dst.bits + b >= w for b in SR_BITS if b < w)
    assert not any(g for m, c, g in taken if m not in (jit.ODD, jitcast.SR))


CASES = [(FP32, INT8, False)] + [
    pytest.param(*c, marks=pytest.mark.slow) for c in ((FP32, FP8_E4M3FN, True), (FP32, INT8, True),
                                                       (FP32, FP8_E4M3FN, False),
                                                       (FP64, BF16, False), (FP64, INT8, False),
                                                       (FP16, BF16, False))]


@pytest.mark.parametrize("src,dst,want", CASES, ids=lambda c: getattr(c, "name", str(c)))
def test_random_bits_in_their_own_dtype_checked_in_the_loop(src, dst, want, rng):
    """Random bits of every integer dtype (no wider than the word: read as they are; wider: converted) give the
    engine's codes and flags, with the check in the loop or without it; a value out of range (2^R, or negative)
    raises cast's error, found by the loop (rand_check then called once) or, for wider dtypes, before it."""
    codes = np.arange(1 << 16, dtype=np.uint16) if src.bits == 16 else codes_of(src, dst, rng, 2000)
    for srb, dt in itertools.product((3, 8, 13, 16), DTYPES):
        if np.iinfo(dt).max < (1 << srb) - 1:
            continue
        pol = resolve_policy(dst, "sr", "saturate" if dst.is_integer else None, None, False, False, srb)
        step = CastStep(src, dst, pol)
        assert jitcast.covers(step)
        rand = rng.integers(0, 1 << srb, codes.size).astype(dt)
        rand[::5] = (1 << srb) - 1
        ref, ref_fl = engine_cast_codes(codes, src, dst, pol, rand.astype(np.uint64), True)
        _, check = _check_random_bits(rand, rand.shape, srb)
        calls: list = []
        counted = None if check is None else (lambda r, calls=calls, check=check: calls.append(1) or check(r))
        got, fl = jitcast.run(step, codes, want, rand, counted)
        assert np.array_equal(got, ref) and (not want or np.array_equal(fl, ref_fl)), (srb, dt)
        assert calls == [1] * (check is not None and np.dtype(dt).itemsize * 8 > (64 if src == FP64 else 32))
        if check is None:
            continue
        for bad in ([1 << srb] if np.iinfo(dt).max >= 1 << srb else []) + ([-1] if np.iinfo(dt).min < 0 else []):
            r2 = rand.copy()
            r2[codes.size // 3] = bad
            calls.clear()
            with pytest.raises(ValueError, match="random_bits must lie in"):
                jitcast.run(step, codes, want, r2, counted)
            assert calls == [1], (srb, dt, bad)


@pytest.mark.parametrize("dt,dst", [(np.int16, INT8)] + [
    pytest.param(dt, dst, marks=pytest.mark.slow)
    for dt, dst in itertools.product((np.uint16, np.int16, np.uint32, np.int64), (INT8, FP8_E4M3FN, BF16))
    if (dt, dst) != (np.int16, INT8)], ids=str)
def test_cast_with_random_bits_of_each_dtype(dt, dst, rng):
    """``cast`` on the numba backend equals the numpy backend for random bits of each dtype, and raises for bits
    out of range on both."""
    x = rng.standard_normal(5000).astype(np.float32) * 300
    r = rng.integers(0, 1 << 12, x.size).astype(dt)
    out = {}
    for b in ("numpy", "numba"):
        with jit.backend(b):
            out[b] = no.cast(x, dst, rounding="sr", sr_bits=12, random_bits=r)
            r2 = r.copy()
            r2[-1] = 1 << 12
            with pytest.raises(ValueError, match="random_bits must lie in"):
                no.cast(x, dst, rounding="sr", sr_bits=12, random_bits=r2)
    assert np.array_equal(out["numpy"], out["numba"]), (dt, dst)
