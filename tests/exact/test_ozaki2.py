"""exact_matmul's Ozaki scheme II engine (exact/ozaki2.py): its results against the split's (ozaki.py) bit for
bit and against Python ``Fraction`` references, its exact pieces (balanced residues, Garner's reconstruction, the
remainders' error bound) against Python integers / Fractions, its compiled residue pass against the numpy one,
and the choice between the engines. All randomness is seeded.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from test_jitozaki import frac_matmul, rounded, same

from conftest import exact_int_gemm
from numoracle.core import jit
from numoracle.exact import intgemm, ozaki, ozaki2, ozakitail
from numoracle.exact.exactsum import limbs_to_fractions
from numoracle.exact.reference import exact_matmul

OUTS = ("fp64", "fp32", "bf16", "fp16")


def engine(monkeypatch, which: str) -> None:
    """exact_matmul on one engine: "crt" (this one wherever it has a plan), "crt8" (the same with primes below 2^8,
    the int8 GEMM as numpy's exact product: tests/exact/test_intgemm.py) or "split" (ozaki.py only)."""
    if which == "crt8":
        monkeypatch.setitem(intgemm._state, "f", exact_int_gemm)
    take = {"crt": lambda *a: ozaki2.plan(*a), "crt8": lambda *a: ozaki2.plan(*a, int8=True)}.get(which)
    monkeypatch.setattr(ozaki2, "choose", take or (lambda *a: None))


def spread(rng, shape, lo=-40, hi=41):
    return rng.standard_normal(shape) * np.exp2(rng.integers(lo, hi, shape))


def cases():
    rng = np.random.default_rng(2025)
    out = []
    a, b = rng.standard_normal((7, 300)), rng.standard_normal((300, 5))
    out.append(("fp32 normal", a.astype(np.float32), b.astype(np.float32)))
    a, b = spread(rng, (6, 400)), spread(rng, (400, 7))
    a[:, 1::2] = -a[:, 0::2]
    a[:, 1::4] *= 1 + 2.0**-20
    out.append(("fp32 2^+-40, cancelling", a.astype(np.float32), b.astype(np.float32)))
    a, b = spread(rng, (5, 64), -149, -120), spread(rng, (64, 6), -10, 10)
    out.append(("fp32 subnormal x normal", a.astype(np.float32), b.astype(np.float32)))
    a, b = spread(rng, (5, 90), -300, 300), spread(rng, (90, 4), -300, 300)
    out.append(("fp64 2^+-300", a, b))
    a, b = rng.standard_normal((6, 128)), rng.standard_normal((128, 5))
    out.append(("fp64 normal", a, b))
    a, b = spread(rng, (7, 3), -100, 100), spread(rng, (3, 6), -100, 100)
    out.append(("fp64 2^+-100, K=3 (the largest primes)", a, b))
    a, b = spread(rng, (5, 200), -12, 12), spread(rng, (200, 6), -12, 12)
    out.append(("fp16", a.astype(np.float16), b.astype(np.float16)))
    out.append(("bf16", a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)))
    a, b = spread(rng, (6, 120)).astype(np.float32), spread(rng, (120, 5)).astype(np.float32)
    a[1, 3], a[2, 7], b[9, 1], b[4, 4], a[3, 11] = np.inf, np.nan, -np.inf, 0.0, -np.inf
    out.append(("fp32 with inf and nan", a, b))
    # rows whose exact products nearly cancel: the early rounding leaves entries undecided
    a = spread(rng, (6, 256), -20, 20)
    b = spread(rng, (256, 5), -20, 20)
    a[:, 1::2] = -a[:, 0::2] * (1 + 2.0**-22)
    b[1::2] = b[0::2]
    out.append(("fp32 near-total cancellation", a.astype(np.float32), b.astype(np.float32)))
    return out


CASES = cases()
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name,a,b", CASES, ids=IDS)
@pytest.mark.parametrize("kernels", [False, True], ids=["numpy", "kernels"])
@pytest.mark.parametrize("primes", ["crt", "crt8"], ids=["float64 primes", "int8 primes"])
def test_engine_gives_the_split_results_and_the_fractions(monkeypatch, name, a, b, kernels, primes):
    with (jit.forced() if kernels else jit.disabled()):
        engine(monkeypatch, "split")
        want = exact_matmul(a, b, out=OUTS)
        want_fr = exact_matmul(a, b, exact=True)
        engine(monkeypatch, primes)
        got = exact_matmul(a, b, out=OUTS)
        got_fr = exact_matmul(a, b, exact=True)
    for out, x, y in zip(OUTS, want, got):
        assert same(x, y), (name, out)
    assert all((x == y) or (x != x and y != y) for x, y in zip(want_fr.ravel(), got_fr.ravel())), name


@pytest.mark.parametrize("name,a,b", [c for c in CASES if "inf" not in c[0]][:6], ids=IDS[:6])
@pytest.mark.parametrize("primes", ["crt", "crt8"], ids=["float64 primes", "int8 primes"])
def test_engine_against_python_fractions(monkeypatch, name, a, b, primes):
    engine(monkeypatch, primes)
    a, b = a[:4, :60], b[:60, :3]
    ref = frac_matmul(a, b)
    got = exact_matmul(a, b, exact=True)
    assert [[got[i, j] for j in range(3)] for i in range(4)] == ref
    for out in OUTS:
        r = exact_matmul(a, b, out=out)
        assert same(r, [[rounded(x, out) for x in row] for row in ref]), (name, out)


def test_the_rounded_path_leaves_and_settles_undecided_entries(monkeypatch):
    """The near-cancelling case leaves entries to both fallbacks (one by one, and an exact sub-product)."""
    _, a, b = CASES[-1]
    A, B = a.astype(np.float64), b.astype(np.float64)
    EA, sA = ozaki.line_bit_range(A, 1)
    EB, sB = ozaki.line_bit_range(B, 0)
    monkeypatch.setattr(ozaki2, "_EXTRA", 0)  # the fewest primes (the plan would take more here: the next test)
    pl = ozaki2.plan(A, B, EA, sA, EB, sB, False)
    monkeypatch.undo()
    assert pl.tails == 2
    seen = []
    real = ozakitail.round_bracketed
    monkeypatch.setattr(ozakitail, "round_bracketed", lambda *x: seen.append(real(*x)) or seen[-1])
    want = ozaki.ozaki_product(A, B, EA, sA, EB, sB, False)
    for cheap in (True, False):
        monkeypatch.setattr(ozakitail, "affordable", lambda *x, c=cheap: c)
        seen.clear()
        rne, ro, _ = ozaki2.product(A, B, EA, sA, EB, sB, False, pl)
        assert seen[0][2].size > 0
        assert same(rne, want[0]) and same(ro, want[1])


def test_the_plan_takes_more_primes_where_the_entries_cancel(monkeypatch):
    """Entries far below their rows' and columns' scale: the plan weighs the undecided entries its sample predicts
    and takes more primes (fewer entries left, the same results)."""
    _, a, b = CASES[-1]
    A, B = a.astype(np.float64), b.astype(np.float64)
    EA, sA = ozaki.line_bit_range(A, 1)
    EB, sB = ozaki.line_bit_range(B, 0)
    seen = []
    real = ozakitail.round_bracketed
    monkeypatch.setattr(ozakitail, "round_bracketed", lambda *x: seen.append(real(*x)[2].size) or real(*x))
    plans, results = [], []
    for extra in (0, 2):
        monkeypatch.setattr(ozaki2, "_EXTRA", extra)
        plans.append(ozaki2.plan(A, B, EA, sA, EB, sB, False))
        results.append(ozaki2.product(A, B, EA, sA, EB, sB, False, plans[-1]))
    assert len(plans[1].primes) > len(plans[0].primes) and plans[1].undecided < plans[0].undecided
    assert seen[1] < seen[0]
    assert same(results[0][0], results[1][0]) and same(results[0][1], results[1][1])


def test_balanced_residues_against_python_integers():
    rng = np.random.default_rng(5)
    for p in ozaki2.primes_below(4096)[:3] + ozaki2.primes_below(1)[:2] + (3, 5):
        x = np.concatenate([rng.integers(-(2**50), 2**50, 2000), np.arange(-3 * p, 3 * p + 1, max(p // 50, 1)),
                            [2**50 - 1, -(2**50) + 1, p // 2, -(p // 2), p // 2 + 1]]).astype(np.float64)
        r = ozaki2.balanced(x, float(p))
        want = [((int(v) + p // 2) % p) - p // 2 for v in x]
        assert r.tolist() == want


def test_primes_are_prime_and_their_products_exact_in_float64():
    for K in (1, 3, 4096, 10**6):
        ps = ozaki2.primes_below(K)
        assert len(set(ps)) == len(ps) and ps == tuple(sorted(ps, reverse=True))
        assert all(p % 2 and all(p % d for d in range(3, int(p**0.5) + 1, 2)) for p in ps)
        h = (ps[0] - 1) // 2
        assert K * h * h <= 2**53 and ps[0] < 2**22
        top = min(2 * int((2**53 // K) ** 0.5) + 1, 2**22 - 1)
        assert all(any(q % d == 0 for d in range(3, int(q**0.5) + 1, 2)) for q in range(ps[0] + 2, top + 1, 2))


@pytest.mark.parametrize("kernels", [False, True], ids=["numpy", "kernels"])
def test_garner_limbs_against_python_integers(kernels):
    rng = np.random.default_rng(8)
    primes = ozaki2.primes_below(4096)[:9]
    P = 1
    for p in primes:
        P *= p
    xs = [int(v) for v in rng.integers(-(2**62), 2**62, 40)]
    xs = [x * int(rng.integers(1, 2**60)) * int(rng.integers(1, 2**60)) % P - P // 2 for x in xs]
    xs += [0, 1, -1, P // 2, -(P // 2)]
    for shift in (0, 5, 40):
        # residues as a GEMM gives them: any integer of |C| <= 2^53 in the class
        C = [np.array([float((x % p) - (p if (x + j) % 3 else 0)) for x in xs]) for j, p in enumerate(primes)]
        for n in (len(primes), 3):  # all nine primes, and the first three (the classes of x mod their product)
            with (jit.forced() if kernels else jit.disabled()):
                limbs = ozaki2.garner_limbs(C[:n], primes[:n], ozaki2.limb_count(primes) + 2, shift)
            got = limbs_to_fractions(limbs, np.zeros(len(xs), np.int64))
            Q = math.prod(primes[:n])
            assert [int(g) for g in got] == [(((x + Q // 2) % Q) - Q // 2) << shift for x in xs]


def test_tail_error_bounds_the_float64_gemms_of_the_remainders():
    """The bound against the exact errors (Fractions) of the two remainder GEMMs, on data built to round."""
    rng = np.random.default_rng(12)
    a = spread(rng, (5, 300), -30, 30)
    b = spread(rng, (300, 4), -30, 30)
    EA, sA = ozaki.line_bit_range(a, 1)
    EB, sB = ozaki.line_bit_range(b, 0)
    primes = ozaki2.primes_below(300)[:2]
    ra = ozaki2.residues(a, EA, 30, 1, primes)
    rb = ozaki2.residues(b, EB, 30, 0, primes, want_t=True)
    err = ozaki2.tail_error(ra.stats, rb.stats, 300, True, True)
    for X, Y in ((ra.d, rb.t), (ra.h, rb.d)):
        assert_within(X @ Y, X, Y, err)
    assert (err > 0).all() and (err < 2.0**30).all()  # a bound that is not vacuous


def assert_within(G: np.ndarray, X: np.ndarray, Y: np.ndarray, err: np.ndarray) -> None:
    """|G - X Y| <= err entrywise, X Y exact (Fractions)."""
    fx = [[Fraction(float(v)) for v in row] for row in X]
    fy = [[Fraction(float(v)) for v in row] for row in Y.T]
    for i in range(G.shape[0]):
        for j in range(G.shape[1]):
            exact = sum((p * q for p, q in zip(fx[i], fy[j])), Fraction(0))
            assert abs(Fraction(float(G[i, j])) - exact) <= Fraction(float(err[i, j])), (i, j)


def test_tail_error_bounds_the_remainder_gemms_taken_in_pieces():
    """The bound for the remainders' GEMMs in pieces of kc columns added in order (ozaki2.product's way), against
    the exact errors (Fractions), K not a multiple of the pieces; tighter than the one-GEMM bound."""
    rng = np.random.default_rng(31)
    K, kc = 1100, 64
    a = spread(rng, (4, K), -30, 30)
    b = spread(rng, (K, 3), -30, 30)
    EA, sA = ozaki.line_bit_range(a, 1)
    EB, sB = ozaki.line_bit_range(b, 0)
    primes = ozaki2.primes_below(K)[:2]
    ra = ozaki2.residues(a, EA, 28, 1, primes)
    rb = ozaki2.residues(b, EB, 28, 0, primes, want_t=True)
    nc = -(-K // kc)
    err = ozaki2.tail_error(ra.stats, rb.stats, K, True, True, kc, nc)
    assert (err < ozaki2.tail_error(ra.stats, rb.stats, K, True, True)).all()
    for X, Y in ((ra.d, rb.t), (ra.h, rb.d)):
        G = np.zeros((4, 3))
        for k0 in range(0, K, kc):
            G += X[:, k0:k0 + kc] @ Y[k0:k0 + kc]
        assert_within(G, X, Y, err)


def midpoint_case(rng, m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """FP32 data spread over 2^+-40 whose pairs of columns cancel exactly, with entries put on float64 midpoints
    (1 + 2^-53, behind terms of 2^60 that cancel) and just off them (+-2^-80), and exact zeros."""
    a, b = spread(rng, (m, k)), spread(rng, (k, n))
    a[:, 1::2] = -a[:, 0::2]
    b[1::2] = b[0::2]  # every pair cancels: the entries are the planted terms' exactly
    a[:, :6], b[:6] = 0.0, 0.0
    a[:, 0], b[0] = 2.0**30, 2.0**30
    a[:, 1], b[1] = -(2.0**30), 2.0**30
    a[:, 2], b[2] = 1.0, 1.0
    a[:, 3], b[3] = 2.0**-27, 2.0**-26
    a[:, 4] = 2.0**-40
    b[4] = 2.0**-40 * rng.choice([-1.0, 0.0, 1.0], n)
    a[-1, 2:4] = 0.0  # the last row's entries exactly 0 or +-2^-80
    return a.astype(np.float32), b.astype(np.float32)


@pytest.mark.parametrize("kernels", [False, True], ids=["numpy", "kernels"])
def test_float64_midpoints_after_cancellation_against_fractions(monkeypatch, kernels):
    """Entries exactly on float64 midpoints and 2^-80 off them, behind 2^+-40 cancelling data, K = 1100 (not a
    multiple of the pieces or the chunks), on this engine and on the default choice, against Fractions."""
    a, b = midpoint_case(np.random.default_rng(4242), 4, 1100, 5)
    ref = frac_matmul(a, b)
    want = {out: [[rounded(x, out) for x in row] for row in ref] for out in ("fp64", "fp32")}
    assert want["fp64"][0].count(1.0) >= 1 and 1 + 2.0**-52 in [x for row in want["fp64"] for x in row]
    with (jit.forced() if kernels else jit.disabled()):
        default = exact_matmul(a, b, out=("fp64", "fp32"))
        engine(monkeypatch, "crt")
        crt = exact_matmul(a, b, out=("fp64", "fp32"))
    for got in (default, crt):
        for out, r in zip(("fp64", "fp32"), got):
            assert same(r, want[out]), out


def pieces_cases(seed: int) -> list:
    """Products whose remainder GEMMs go in several pieces (K = 1300: not a multiple of the pieces or the chunks)."""
    rng = np.random.default_rng(seed)
    out = []
    a, b = spread(rng, (9, 1300)), spread(rng, (1300, 8))
    a[:, 1::2] = -a[:, 0::2]
    a[:, 1::4] *= 1 + 2.0**-20
    out.append(("fp32 2^+-40 cancelling", a.astype(np.float32), b.astype(np.float32)))
    a, b = spread(rng, (7, 1300), -560, -545), spread(rng, (1300, 6), -490, -478)  # results in FP64 subnormals
    a[:, 1::2] = -a[:, 0::2]
    a[:, 1::3] *= 1 + 2.0**-30
    a[2], b[:, 0] = -0.0, np.abs(b[:, 0])  # entry (2, 0): every product -0, so -0; (2, 1): mixed, so +0
    out.append(("fp64 subnormal results, a -0 row", a, b))
    a, b = rng.standard_normal((8, 1300)), rng.standard_normal((1300, 7))
    out.append(("fp64 normal", a, b))
    return out


@pytest.mark.parametrize("seed", [9001, 9002])
@pytest.mark.parametrize("kernels", [False, True], ids=["numpy", "kernels"])
def test_remainder_pieces_give_the_split_results(monkeypatch, seed, kernels):
    """This engine (its remainder GEMMs in pieces, 3-4 primes) against the split, bit for bit, on fresh data."""
    for name, a, b in pieces_cases(seed):
        with (jit.forced() if kernels else jit.disabled()):
            engine(monkeypatch, "split")
            want = exact_matmul(a, b, out=("fp64", "fp32", "bf16"))
            engine(monkeypatch, "crt")
            got = exact_matmul(a, b, out=("fp64", "fp32", "bf16"))
        for x, y in zip(want, got):
            assert same(x, y), name
        if "subnormal" in name:
            assert (np.abs(want[0][want[0] != 0]) < 2.0**-1022).any()
            assert np.signbit(want[0][2, 0]) and not np.signbit(want[0][2, 1]) and (want[0][2] == 0).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [1, 0])
def test_residue_kernel_matches_numpy(dtype, axis):
    rng = np.random.default_rng(21 + axis)
    X = spread(rng, (23, 41), -70, 70).astype(dtype)
    X[3, 5], X[4] = 0.0, 0.0
    E, span = ozaki.line_bit_range(X.astype(np.float64), axis)
    primes = ozaki2.primes_below(700)[:5]
    for bits in (20, 60, int(span.max()) + 1):
        with jit.disabled():
            r0 = ozaki2.residues(X, E, bits, axis, primes, axis == 0)
        with jit.forced():
            r1 = ozaki2.residues(X, E, bits, axis, primes, axis == 0)
        assert same(r0.planes, r1.planes) and same(r0.h, r1.h)
        assert same(r0.d, r1.d) and (same(r0.t, r1.t) if axis == 0 else r1.t is None)
        assert same(r0.stats[[1, 3]], r1.stats[[1, 3]])  # maxima exact; sums in another order
        np.testing.assert_allclose(r0.stats[[0, 2]], r1.stats[[0, 2]], rtol=1e-13)
        assert (np.abs(r0.planes) <= (np.array(primes)[:, None, None] - 1) / 2).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_ratio_kernel_bounds_the_exact_line_sums(dtype):
    """The plan's bound on max sum |x| / 2^E (compiled sums of |x|, rows of 37: not a multiple of their 16 lanes)
    against the exact sums (Fractions), on both paths; and the compiled sums next to numpy's."""
    rng = np.random.default_rng(77)
    X = spread(rng, (9, 37), -60, 60).astype(dtype)
    X[2] = 0.0
    for axis in (1, 0):
        E, _ = ozaki.line_bit_range(X.astype(np.float64), axis)
        lines = X if axis == 1 else X.T
        exact = max(sum((abs(Fraction(float(v))) for v in line), Fraction(0)) / Fraction(2) ** int(e)
                    for line, e in zip(lines, E))
        for ctx in (jit.disabled, jit.forced):
            with ctx():
                assert Fraction(ozaki2._sum_ratio(X, E, axis)) >= exact
        if jit.enabled():
            from numoracle.exact.kernels import crt
            np.testing.assert_allclose(crt.abs_sums(X, axis), np.abs(X).sum(axis=axis, dtype=np.float64), rtol=1e-14)


def test_residue_buffers_reused_by_slot_give_the_same_values():
    """A slot's arrays are reused call after call (ozaki2.product's chunks): the values are those of fresh ones."""
    rng = np.random.default_rng(78)
    primes = ozaki2.primes_below(500)[:3]
    for axis in (1, 0):
        for shape in ((7, 50), (5, 31), (7, 50)):  # smaller, then larger again: the buffer grows
            X = spread(rng, shape, -30, 30).astype(np.float32)
            E, _ = ozaki.line_bit_range(X.astype(np.float64), axis)
            with jit.forced():
                r0 = ozaki2.residues(X, E, 28, axis, primes, axis == 0)
                r1 = ozaki2.residues(X, E, 28, axis, primes, axis == 0, slot="test")
            assert same(r0.planes, r1.planes) and same(r0.h, r1.h) and same(r0.d, r1.d)
            assert same(r0.stats, r1.stats) and (axis == 1 or same(r0.t, r1.t))


def test_choice_takes_the_fewer_gemms():
    """Wide exponent ranges take this engine (fewer GEMMs than the split); normal FP32 data keep the split."""
    rng = np.random.default_rng(3)
    a, b = spread(rng, (32, 4096)).astype(np.float32), spread(rng, (4096, 32)).astype(np.float32)
    a[:, 1::2] = -a[:, 0::2]
    n32 = rng.standard_normal((32, 4096)).astype(np.float32), rng.standard_normal((4096, 32)).astype(np.float32)
    for (x, y), wide in (((a, b), True), (n32, False)):
        A, B = x.astype(np.float64), y.astype(np.float64)
        EA, sA = ozaki.line_bit_range(A, 1)
        EB, sB = ozaki.line_bit_range(B, 0)
        pl = ozaki2.plan(A, B, EA, sA, EB, sB, False)
        split = ozaki.planned_gemms(sA, sB, 4096, 32, 32, False)
        with jit.forced():
            took = ozaki2.choose(A, B, EA, sA, EB, sB, False) is not None
        with jit.disabled():  # numpy's residue pass: the split
            assert ozaki2.choose(A, B, EA, sA, EB, sB, False) is None
        assert took == (wide and jit.enabled()) or not jit.enabled()
        if wide:
            assert pl.gemms <= 6 < split


def test_least_gemms_is_a_lower_bound_of_the_plan():
    for name, a, b in CASES:
        A, B = a.astype(np.float64), b.astype(np.float64)
        A, B = np.where(np.isfinite(A), A, 0), np.where(np.isfinite(B), B, 0)
        EA, sA = ozaki.line_bit_range(A, 1)
        EB, sB = ozaki.line_bit_range(B, 0)
        for exact, int8 in ((False, False), (True, False), (False, True), (True, True)):
            pl = ozaki2.plan(A, B, EA, sA, EB, sB, exact, int8)
            if pl is not None:
                assert ozaki2.least_gemms(sA, sB, A.shape[1], exact, int8) <= pl.gemms, (name, int8)


@pytest.mark.parametrize("kernels", [False, True], ids=["numpy", "kernels"])
def test_chunks_along_k_give_the_same_results_and_statistics(monkeypatch, kernels):
    """K in chunks of 37 (the exact GEMMs' partial sums, the remainder GEMMs' sums, the joined statistics)."""
    for name, a, b in [c for c in CASES if "cancel" in c[0] or "normal" in c[0]]:
        A = np.where(np.isfinite(a), a, 0).astype(np.float64)
        B = np.where(np.isfinite(b), b, 0).astype(np.float64)
        EA, sA = ozaki.line_bit_range(A, 1)
        EB, sB = ozaki.line_bit_range(B, 0)
        pl = ozaki2.plan(A, B, EA, sA, EB, sB, False)
        with (jit.forced() if kernels else jit.disabled()):
            whole = ozaki2.product(A, B, EA, sA, EB, sB, False, pl)
            monkeypatch.setattr(ozaki2, "_chunk", lambda *x: 37)
            chunked = ozaki2.product(A, B, EA, sA, EB, sB, False, pl)
            monkeypatch.undo()
        assert same(whole[0], chunked[0]) and same(whole[1], chunked[1]), name
        primes = pl.primes
        st = np.zeros((4, A.shape[0]))
        for k0 in range(0, A.shape[1], 37):
            ozaki2.merge_stats(st, ozaki2.residues(A[:, k0:k0 + 37], EA, pl.pA, 1, primes).stats)
        full = ozaki2.residues(A, EA, pl.pA, 1, primes).stats
        assert same(st[[1, 3]], full[[1, 3]])
        np.testing.assert_allclose(st[[0, 2]], full[[0, 2]], rtol=1e-12)
