"""Ozaki scheme II over primes below 2^8 with an exact int8 GEMM (exact/intgemm.py, exact/ozaki2.py): its results
against the split's (ozaki.py) and Python ``Fraction`` references bit for bit (here on remainder pieces and
midpoints; on every data set of test_ozaki2.py as its "int8 primes"), its int8 residue planes against the numpy
pass, its int32 and float64 sums over chunks of K, the self-test that turns torch's GEMM on or off, and the choice
that takes it. The int8 GEMM is numpy's exact integer product here (conftest.exact_int_gemm) except in the torch
tests. All randomness is seeded.
"""

from __future__ import annotations

import logging
import math
import sys
import types

import numpy as np
import pytest
from test_jitozaki import frac_matmul, rounded, same
from test_ozaki2 import CASES, engine, midpoint_case, pieces_cases, spread

from conftest import exact_int_gemm
from numoracle.core import jit
from numoracle.exact import intgemm, ozaki, ozaki2
from numoracle.exact.reference import exact_matmul
from optional import needs


def test_small_primes_fit_int8_and_int32():
    primes = ozaki2.small_primes()
    assert len(primes) == 32 and primes[0] == 251 and list(primes) == sorted(primes, reverse=True)
    assert all(p % 2 and all(p % d for d in range(2, math.isqrt(p) + 1)) for p in primes)
    assert max(primes) < 256 and intgemm.MAX_K * ((max(primes) - 1) // 2) ** 2 < 2**31


@pytest.mark.parametrize("kernels", [False, True], ids=["numpy", "kernels"])
def test_small_primes_on_remainder_pieces_and_midpoints(monkeypatch, int8_gemm, kernels):
    """Remainder GEMMs in pieces of 512 (K = 1300) against the split; float64 midpoints and 2^-80 off them behind
    2^+-40 cancelling data against Fractions."""
    a, b = midpoint_case(np.random.default_rng(4243), 4, 1100, 5)
    ref = frac_matmul(a, b)
    with (jit.forced() if kernels else jit.disabled()):
        engine(monkeypatch, "crt8")
        got = exact_matmul(a, b, out=("fp64", "fp32"))
        for out, r in zip(("fp64", "fp32"), got):
            assert same(r, [[rounded(x, out) for x in row] for row in ref]), out
        for name, a, b in pieces_cases(9003):
            engine(monkeypatch, "split")
            want = exact_matmul(a, b, out=("fp64", "bf16"))
            engine(monkeypatch, "crt8")
            got = exact_matmul(a, b, out=("fp64", "bf16"))
            assert all(same(x, y) for x, y in zip(want, got)), name


@pytest.mark.parametrize("max_k", [intgemm.MAX_K, 64], ids=["int32 sums", "float64 sums"])
@pytest.mark.parametrize("kernels", [False, True], ids=["numpy", "kernels"])
def test_chunks_along_k_in_int32_and_float64(monkeypatch, int8_gemm, max_k, kernels):
    """K in chunks of 37, the primes' products summed over them in int32 (K <= MAX_K) or float64 (beyond: here
    MAX_K = 64 for K = 300-400), the same results as K in one chunk."""
    for name, a, b in [c for c in CASES if "cancel" in c[0] or "normal" in c[0]]:
        A = np.where(np.isfinite(a), a, 0).astype(np.float64)
        B = np.where(np.isfinite(b), b, 0).astype(np.float64)
        EA, sA = ozaki.line_bit_range(A, 1)
        EB, sB = ozaki.line_bit_range(B, 0)
        for exact in (False, True):
            pl = ozaki2.plan(A, B, EA, sA, EB, sB, exact, int8=True)
            assert pl.int8 and all(p < 256 for p in pl.primes)
            with (jit.forced() if kernels else jit.disabled()):
                whole = ozaki2.product(A, B, EA, sA, EB, sB, exact, pl)
                monkeypatch.setattr(intgemm, "MAX_K", max_k)
                monkeypatch.setattr(ozaki2, "_chunk", lambda *x: 37)
                chunked = ozaki2.product(A, B, EA, sA, EB, sB, exact, pl)
                monkeypatch.setattr(intgemm, "MAX_K", intgemm.MAX_K)
            monkeypatch.undo()
            monkeypatch.setitem(intgemm._state, "f", exact_int_gemm)
            assert same(whole[0], chunked[0]) and same(whole[1], chunked[1]), name
            if exact:
                assert (whole[2] == chunked[2]).all(), name


@pytest.mark.parametrize("axis", [1, 0])
def test_int8_residue_planes_match_numpy(axis):
    """The compiled pass's int8 planes: one step below 2^50, two below 2^53, value by value above (bits 20 to the
    full span), against numpy's two steps, and within the primes' balanced range."""
    rng = np.random.default_rng(31 + axis)
    X = spread(rng, (23, 41), -70, 70)
    X[3, 5], X[4] = 0.0, 0.0
    X[5, :4] = [2.0**49 - 1, -(2.0**50) + 3, 2.0**52 - 5, 1.0]  # lines whose |h| lie near 2^50 and 2^53
    # integers (at bits = 54: t = x) whose h / 251 lies so near a half-integer that one step would miss (>= 2^51)
    X[6], X[:, 6] = 1.0, 3.0
    X[6, :2] = X[:2, 6] = [7178630733127866.0, -4435791803312158.0]
    E, span = ozaki.line_bit_range(X, axis)
    primes = ozaki2.small_primes()[:9]
    for bits in (20, 51, 52, 53, 54, 60, int(span.max()) + 1):
        with jit.disabled():
            r0 = ozaki2.residues(X, E, bits, axis, primes, axis == 0, int8=True)
        with jit.forced():
            r1 = ozaki2.residues(X, E, bits, axis, primes, axis == 0, int8=True)
            r64 = ozaki2.residues(X, E, bits, axis, primes, axis == 0)
        assert r0.planes.dtype == r1.planes.dtype == np.int8
        assert same(r0.planes, r1.planes) and same(r1.planes, r64.planes.astype(np.int8)), bits
        h = r0.h.astype(object)
        want = np.array([[[int(v) % p for v in row] for row in h] for p in primes])
        assert ((r0.planes.astype(np.int64) - want) % np.array(primes)[:, None, None] == 0).all()
        assert (np.abs(r0.planes.astype(np.int64)) <= (np.array(primes)[:, None, None] - 1) // 2).all()


def test_the_choice_takes_small_primes_where_the_gemm_runs(monkeypatch, int8_gemm):
    """Normal FP32 data: the split without the int8 GEMM, small primes with it (about 14 int8 GEMMs for no
    remainders, fewer float64-GEMM equivalents than the split's three)."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((32, 4096)).astype(np.float32), rng.standard_normal((4096, 32)).astype(np.float32)
    A, B = a.astype(np.float64), b.astype(np.float64)
    EA, sA = ozaki.line_bit_range(A, 1)
    EB, sB = ozaki.line_bit_range(B, 0)
    with jit.forced():
        pl = ozaki2.choose(A, B, EA, sA, EB, sB, False)
        monkeypatch.setitem(intgemm._state, "f", None)
        assert ozaki2.choose(A, B, EA, sA, EB, sB, False) is None
    if jit.enabled():
        assert pl is not None and pl.int8 and pl.tails == 0
        assert pl.gemms + ozaki2.OVERHEAD < ozaki.planned_gemms(sA, sB, 4096, 32, 32, False)
        assert ozaki2.least_gemms(sA, sB, 4096, False, True) <= pl.gemms


def fake_torch(monkeypatch, int_mm) -> None:
    mod = types.ModuleType("torch")
    mod.__version__ = "0.0-fake"
    mod._int_mm = int_mm
    mod.from_numpy = lambda x: x
    monkeypatch.setitem(sys.modules, "torch", mod)
    intgemm.reset()


def test_no_torch_no_gemm_and_a_wrong_one_refused(monkeypatch, caplog):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    intgemm.reset()
    assert intgemm.matmul() is None and "f" not in intgemm._state  # decided again once torch is loaded

    class Result(np.ndarray):
        def numpy(self):
            return np.asarray(self)

    fake_torch(monkeypatch, lambda x, y: exact_int_gemm(x, y).view(Result))
    assert intgemm.matmul() is not None  # the exact contract passes the self-test
    off_by_one = exact_int_gemm(np.ones((1, 1), np.int8), np.ones((1, 1), np.int8))
    fake_torch(monkeypatch, lambda x, y: (exact_int_gemm(x, y) + off_by_one[0, 0] * (x.shape[0] > 30)).view(Result))
    with caplog.at_level(logging.WARNING, logger="numoracle.exact"):
        assert intgemm.matmul() is None
    assert "differs from the exact product" in caplog.text

    def fails(x, y):
        raise RuntimeError("no CPU kernel")
    fake_torch(monkeypatch, fails)
    assert intgemm.matmul() is None
    intgemm.reset()


def test_torch_int_mm_is_exact_here(monkeypatch):
    """torch's own ``_int_mm`` passes the self-test and gives numoracle the same bits on 2^+-40 data."""
    torch = needs("torch")
    intgemm.reset()
    f = intgemm.matmul()
    if f is None:
        pytest.skip(f"torch {torch.__version__} has no CPU _int_mm here")
    rng = np.random.default_rng(17)
    x, y = rng.integers(-125, 126, (40, 700)).astype(np.int8), rng.integers(-125, 126, (700, 30)).astype(np.int8)
    assert same(f(x, y), exact_int_gemm(x, y))
    _, a, b = CASES[1]
    with jit.forced():
        engine(monkeypatch, "split")
        want = exact_matmul(a, b)
        engine(monkeypatch, "crt8")
        got = exact_matmul(a, b)
    assert same(want, got)
    intgemm.reset()


def test_head_bound_in_integers_is_the_fraction_bound():
    """The plan's bound on |Ah @ Bh| (integer arithmetic) against the same formula in Fractions."""
    from fractions import Fraction
    rng = np.random.default_rng(77)
    for _ in range(300):
        pA, pB, K = (int(x) for x in (*rng.integers(1, 130, 2), rng.integers(0, 1 << 20)))
        rA, rB = (float(x) for x in rng.uniform(0, 5000, 2) * rng.choice([1, 2.0**-30, 1 / 3], 2))
        a, b = Fraction(2) ** (pA - 1), Fraction(2) ** (pB - 1)
        want = math.ceil(min((a * Fraction(rA) + Fraction(K, 2)) * b, a * (b * Fraction(rB) + Fraction(K, 2))))
        assert ozaki2._head_bound(pA, pB, rA, rB, K) == want
