"""exact_matmul's Ozaki split: the numba kernels (exact/kernels/ozaki.py) against their numpy twins, bit
for bit, and the Karatsuba plan against exact references.

The references share nothing with the code under test: Python ``Fraction`` / ``int`` products and
sums of the exact input values, rounded once with ``numoracle.core.scalar.round_value``; for
larger sizes ``exact_dot`` on float64 data (its per-product limb path, not the Ozaki split).
All randomness is seeded.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import numoracle as no
from numoracle.core import jit
from numoracle.core.scalar import round_value
from numoracle.exact import exactsum, ozaki
from numoracle.exact.reference import exact_dot, exact_matmul, exact_sum
from optional import kernels

OUTS = ("fp64", "fp32", "bf16", "fp16", "fp8_e4m3fn")


@pytest.fixture(autouse=True)
def _kernels_at_every_size():
    """These tests' data are small, and exact_matmul keeps small calls on numpy: use the kernels anyway."""
    with jit.forced():
        yield


def same(a, b) -> bool:
    """Bitwise equality of float64 arrays (NaN == NaN, -0 != +0)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return False
    return bool(np.all((a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))))


def rounded(x: Fraction, fmt="fp64") -> float:
    f = no.formats.format_of(fmt)
    return float(no.decode(np.array([round_value(x, f)], f.code_dtype), f)[0])


def frac_matmul(a: np.ndarray, b: np.ndarray) -> list[list[Fraction]]:
    fa = [[Fraction(float(x)) for x in row] for row in a.astype(np.float64)]
    fb = [[Fraction(float(x)) for x in row] for row in b.astype(np.float64)]
    K = len(fb)
    return [[sum((r[k] * fb[k][j] for k in range(K)), Fraction(0)) for j in range(len(fb[0]) if K else 0)]
            for r in fa]


def plan_of(a, b):
    A, B = np.asarray(a, np.float64), np.asarray(b, np.float64)
    _, sA = ozaki.line_bit_range(A, 1)
    _, sB = ozaki.line_bit_range(B, 0)
    return ozaki._plan(sA, sB, A.shape[1], A.shape[0], B.shape[1])


def both_paths(fn):
    """fn() on the numpy path and (numba installed) on the kernels; the results, numpy's first."""
    with jit.disabled():
        ref = fn()
    if not jit.enabled():
        return ref, ref
    return ref, fn()


def karatsuba_cases():
    """(name, A, B) on which the planner picks Karatsuba (asserted in the tests)."""
    rng = np.random.default_rng(31)
    cases = []
    a = rng.standard_normal((40, 700)).astype(np.float32)
    b = rng.standard_normal((700, 33)).astype(np.float32)
    cases.append(("fp32 normal", a, b))
    # digit pairs near the bound: with E = 1, x = (2^(b-1) - 1 + d1 / 2^b) 2^(2-b) has the digits
    # d0 = 2^(b-1) - 1 and d1 (d1 < 2^(b-1)); with d1 near 2^(b-1) the digit sums are irregular
    # integers near 2^b, so each chunk of the middle GEMM sums to just under 2^53 (one chunk
    # over all K would round)
    K = 4096
    beta = (55 - (K - 1).bit_length()) // 2

    def near(shape):
        d1 = rng.integers(2 ** (beta - 1) - 2 ** (beta - 6), 2 ** (beta - 1), shape)
        return np.ldexp(2.0 ** (beta - 1) - 1 + np.ldexp(d1.astype(np.float64), -beta), 2 - beta)

    a, b = near((5, K)), near((K, 4))
    cases.append(("digit sums at 2^b", a, b))
    rng = np.random.default_rng(33)
    a = rng.standard_normal((12, 3)) * np.exp2(rng.integers(-100, 100, (12, 3)))  # K = 3: fp64, many slices
    b = rng.standard_normal((3, 9)) * np.exp2(rng.integers(-100, 100, (3, 9)))
    cases.append(("fp64 K=3", a, b))
    a = rng.standard_normal((20, 2048)) * np.exp2(rng.integers(-14, 14, (20, 2048)))
    b = rng.standard_normal((2048, 18)) * np.exp2(rng.integers(-14, 14, (2048, 18)))
    a[:, 1::2] = -a[:, 0::2] * (1 + 2.0**-20)  # near cancellation (in FP32)
    cases.append(("fp32 ill, K=2048 (4 middle chunks)", a.astype(np.float32), b.astype(np.float32)))
    return cases


@pytest.mark.parametrize("name, a, b", karatsuba_cases(), ids=[c[0] for c in karatsuba_cases()])
def test_karatsuba_plan_is_exact(name, a, b):
    assert plan_of(a, b)[2], f"{name}: the planner should pick Karatsuba here"
    if a.shape[0] * a.shape[1] * b.shape[1] <= 200_000:  # Fractions: small cases
        ref = frac_matmul(a, b)
        for r in both_paths(lambda: exact_matmul(a, b, exact=True)):
            assert r.tolist() == ref
        for out in ("fp64", "bf16"):
            want = [[rounded(x, out) for x in row] for row in ref]
            for r in both_paths(lambda: exact_matmul(a, b, out=out)):  # noqa: B023
                assert same(r, want), (name, out)
    else:  # exact_dot's per-product path on the float64 values
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        want = exact_dot(a64[:, None, :], b64.T[None, :, :], out=("fp64", "fp32"))
        for r in both_paths(lambda: exact_matmul(a, b, out=("fp64", "fp32"))):
            assert all(same(x, y) for x, y in zip(r, want)), name


def boundary_cases():
    rng = np.random.default_rng(32)
    tiny, huge = 2.0**-1074, np.finfo(np.float64).max
    cases = []
    a = rng.standard_normal((6, 11)) * np.exp2(rng.integers(-500, 500, (6, 11)))  # huge spreads
    b = rng.standard_normal((11, 5)) * np.exp2(rng.integers(-500, 500, (11, 5)))
    cases.append(("fp64 spread", a, b))
    a = np.ldexp(rng.integers(1, 2**52, (5, 7)).astype(np.float64), -1074) * rng.choice([-1, 1], (5, 7))
    b = rng.standard_normal((7, 4)) * 2.0**-20
    b[0, 0] = tiny
    cases.append(("subnormals", a, b))
    a = np.array([[1.0, 2.0**-53, tiny], [huge, huge, -huge], [0.0, -0.0, -0.0], [np.inf, 1.0, 0.0],
                  [np.nan, 1.0, 1.0], [1.0 + 2.0**-52, 2.0**-53, 0.0]])
    b = np.array([[1.0, -1.0, 0.0, 1.0], [1.0, 1.0, 1.0, -1.0], [-1.0, 1.0, 1.0, 0.0]])
    cases.append(("ties, overflow, specials", a, b))
    a = rng.standard_normal((4, 1))
    b = rng.standard_normal((1, 6))
    cases.append(("K=1", a, b))
    a = rng.standard_normal((9, 13)).astype(np.float32)
    a[:, 6:12] = -a[:, :6]  # cancellation
    b = np.repeat(rng.standard_normal((1, 5)), 13, axis=0).astype(np.float32)
    cases.append(("fp32 cancellation, K=13", a, b))
    a = rng.standard_normal((7, 29)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((29, 3)).astype(ml_dtypes.bfloat16)
    cases.append(("bf16 K=29", a, b))
    return cases


@pytest.mark.parametrize("name, a, b", boundary_cases(), ids=[c[0] for c in boundary_cases()])
def test_boundary_cases_against_fractions(name, a, b):
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    finite = np.isfinite(a64).all() and np.isfinite(b64).all()
    ref = frac_matmul(a64, b64) if finite else None
    for out in OUTS:
        r0, r1 = both_paths(lambda: exact_matmul(a, b, out=out))  # noqa: B023
        assert same(r0, r1), (name, out)
        if ref is not None:
            assert same(r0, [[rounded(x, out) for x in row] for row in ref]), (name, out)
    if ref is not None:
        for r in both_paths(lambda: exact_matmul(a, b, exact=True)):
            assert r.tolist() == ref


@pytest.mark.parametrize("seed", range(4))
def test_random_sets_both_paths_agree(seed):
    rng = np.random.default_rng(40 + seed)
    M, K, N = rng.integers(1, 70, 3)
    K = int(K) * (1 + 17 * seed)
    spread = [0, 10, 60, 300][seed]
    dt = [np.float32, ml_dtypes.bfloat16, np.float64, np.float32][seed]
    with np.errstate(over="ignore"):  # FP32 / BF16 overflow to inf: specials too
        a = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-spread, spread + 1, (M, K)))).astype(dt)
        b = (rng.standard_normal((K, N)) * np.exp2(rng.integers(-spread, spread + 1, (K, N)))).astype(dt)
    a[0, : K // 2] = 0.0  # part of a zero row
    r0, r1 = both_paths(lambda: exact_matmul(a, b, out=OUTS))
    assert all(same(x, y) for x, y in zip(r0, r1))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = exact_dot(a64[:, None, :], b64.T[None, :, :], out=OUTS)  # the per-product path
    assert all(same(x, y) for x, y in zip(r0, want))


# ---- the kernels one by one ------------------------------------------------------------------------
def _kernels():
    kernels()  # numba installed and the kernels on (NUMORACLE_JIT is not 0)
    from numoracle.exact.kernels import ozaki as jitozaki
    return jitozaki


def test_bit_range_kernel():
    rng = np.random.default_rng(50)
    X = rng.standard_normal((37, 53)) * np.exp2(rng.integers(-1070, 1000, (37, 53)))
    X[3] = 0.0
    X[4, :5] = [2.0**-1074, -3 * 2.0**-1074, 2.0**-1022 - 2.0**-1074, np.finfo(np.float64).max, -0.0]
    X[:, 7] = -0.0
    X[5] = np.ldexp(rng.integers(1, 2**52, 53).astype(np.float64), -1074)
    for axis in (0, 1):
        with jit.disabled():
            want = ozaki.line_bit_range(X, axis)
        got = _kernels().bit_range(X, axis)
        assert all(np.array_equal(g, w) for g, w in zip(got, want)), axis


def test_digits_kernel_matches_numpy_on_the_lines_used():
    rng = np.random.default_rng(51)
    X = rng.standard_normal((30, 41)) * np.exp2(rng.integers(-60, 60, (30, 41)))
    X[2] = 0.0
    X[3, 5] = 2.0**-1074  # a line of wide span: more slices than the others
    for axis in (0, 1):
        E, span = ozaki.line_bit_range(X, axis)
        for beta in (9, 21, 26):
            S = ozaki.slice_counts(span, beta)
            count = int(S.max())
            with jit.disabled():
                want = ozaki._digits(X, E, beta, count, axis, S)
            got, stat = _kernels().digits(X, E, beta, count, axis, S, pairs=1)
            # the early rounding's per-line statistics: sum |d| over rows, max |d| over columns
            f = np.sum if axis == 1 else np.max
            assert np.array_equal(stat, [f(np.abs(w), axis=axis) for w in want]), (axis, beta)
            for s in range(count):
                lines = np.arange(S.size) if 2 * int((S > s).sum()) >= S.size else np.flatnonzero(S > s)
                g, w = (got[s][lines], want[s][lines]) if axis == 1 else (got[s][:, lines], want[s][:, lines])
                assert np.array_equal(g, w), (axis, beta, s)
            assert np.array_equal(got[count], want[0] + want[1])  # Karatsuba's pair sum


def test_digits_kernel_stores_only_the_planes_kept():
    """``keep``: the planes kept are those of a run that keeps every plane, the others None; the statistics of
    every slice are there (the early rounding's bound needs them). Pair sums of unkept slices, and slices
    with a pair sum of their own, are kept or not independently."""
    rng = np.random.default_rng(59)
    X = rng.standard_normal((26, 37)) * np.exp2(rng.integers(-60, 60, (26, 37)))
    X[3, 5] = 2.0**-1074  # a line of wide span: more slices than the others
    for axis in (0, 1):
        E, span = ozaki.line_bit_range(X, axis)
        S = ozaki.slice_counts(span, 9)
        count = int(S.max())
        full, stat = _kernels().digits(X, E, 9, count, axis, S, pairs=2)
        for keep in ([False, True] * (count // 2 + 2))[:count + 2], [True] * count + [False, True]:
            got, st = _kernels().digits(X, E, 9, count, axis, S, 2, None, 0, None, keep)
            assert np.array_equal(st, stat), (axis, keep)
            for i, (g, w, k) in enumerate(zip(got, full, keep)):
                if not k:
                    assert g is None, (axis, keep, i)
                    continue
                lines = np.flatnonzero(S > i) if i < count and 2 * int((S > i).sum()) < S.size else slice(None)
                g, w = (g[lines], w[lines]) if axis == 1 else (g[:, lines], w[:, lines])  # the lines it is read on
                assert np.array_equal(g, w), (axis, keep, i)


def test_round_limbs_kernel():
    rng = np.random.default_rng(52)
    R = 4000
    limbs = rng.integers(-(2**40), 2**40, (6, R))
    limbs[-2:] = rng.integers(-3, 4, (2, R))
    limbs[:, :50] = 0
    limbs[0, :10] = rng.integers(-5, 6, 10)  # tiny values
    limbs[2, 60:80] = 1 << 20  # ties and near ties: a single bit below a block of zeros
    limbs[:2, 60:80] = 0
    base = rng.integers(-1300, 1100, R)  # subnormal results, overflow to inf / max finite
    base[:200] = -1074 - 32 * rng.integers(0, 3, 200)
    got = _kernels().round_limbs(limbs.copy(), base)
    want = exactsum.round_limbs(limbs.copy(), base)
    assert same(got[0], want[0]) and same(got[1], want[1])
    # with pieces added on the fly (the early rounding's m +- R)
    at = rng.integers(0, 4, R)
    add = rng.integers(-(2**32), 2**32, (3, R))
    moved = limbs.copy()
    moved[at, np.arange(R)] += add[0]
    moved[at + 1, np.arange(R)] += add[1]
    moved[at + 2, np.arange(R)] += add[2]
    got = _kernels().round_limbs(limbs.copy(), base, add, at)
    want = exactsum.round_limbs(moved, base)
    assert same(got[0], want[0]) and same(got[1], want[1])


def test_add_product_kernel():
    rng = np.random.default_rng(53)
    G = rng.integers(-(2**53), 2**53 + 1, (9, 7)).astype(np.float64)
    G[0, :3] = [2.0**53, -(2.0**53), 0.0]
    rows, cols = np.array([0, 2, 3, 5, 6, 7, 8, 9, 11]), np.arange(1, 8)
    for off in (0, 1, 31, 32, 33, 95):
        a = np.zeros((off // 32 + 4, 12, 9), np.int64)
        b = a.copy()
        _kernels().add_product(a, G, off, rows, cols)
        ozaki.add_shifted(b, G.astype(np.int64), off, np.ix_(rows, cols))
        assert np.array_equal(a, b), off


# ---- early rounding (ozakitail.py) -----------------------------------------------------------------
def _ill(seed, M=24, K=1024, N=20):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)) * np.exp2(rng.integers(-40, 41, (M, K)))
    b = rng.standard_normal((K, N)) * np.exp2(rng.integers(-40, 41, (K, N)))
    a[:3, K // 2:] = -a[:3, : K // 2]  # rows 0-2 cancel against columns whose halves are equal
    b[K // 2:, :4] = b[: K // 2, :4]
    a[1, -1] *= 1 + 2.0**-20  # entry (1, j < 4): a small remainder, far below the row's scale
    a[2, 0] = 2.0**-149  # entry (2, j < 4): a subnormal product left
    b[0, :4] = np.float32(2.0**-10)
    return a.astype(np.float32), b.astype(np.float32)


@pytest.mark.parametrize("fallback", ["one by one", "remaining GEMMs"])
def test_early_rounding_gives_the_full_results(monkeypatch, fallback):
    from numoracle.exact import ozakitail

    a, b = _ill(60)
    A, B = a.astype(np.float64), b.astype(np.float64)
    E, sA = ozaki.line_bit_range(A, 1)
    _, sB = ozaki.line_bit_range(B, 0)
    ba, bb, _ = ozaki._plan(sA, sB, A.shape[1], A.shape[0], B.shape[1])
    nA, nB = int(ozaki.slice_counts(sA, ba).max()), int(ozaki.slice_counts(sB, bb).max())
    head = ozakitail.head_pairs(nA, nB, ba, bb, A.shape[1], [A.shape[0]] * nA, [B.shape[1]] * nB)
    assert head is not None  # the early rounding is tried
    seen = []
    real = ozakitail.round_bracketed

    def spy(*args):
        r = real(*args)
        seen.append(r[2].size)
        return r

    monkeypatch.setattr(ozakitail, "round_bracketed", spy)
    monkeypatch.setattr(ozakitail, "affordable", lambda *args: fallback == "one by one")
    want = exact_dot(A[:, None, :], B.T[None, :, :], out=OUTS)  # the per-product path
    for r in both_paths(lambda: exact_matmul(a, b, out=OUTS)):
        assert all(same(x, y) for x, y in zip(r, want))
    assert seen and min(seen) > 0  # cancelling entries were left undecided and computed exactly
    assert exact_matmul(a, b, exact=True)[1, 0] == sum(Fraction(float(x)) * Fraction(float(y))
                                                       for x, y in zip(A[1], B[:, 0]))


def test_tail_bound_is_an_upper_bound_and_the_row_sum_column_max_formula():
    from numoracle.exact import ozakitail

    rng = np.random.default_rng(90)
    nA, nB, M, K, N, ba, bb = 4, 3, 5, 40, 6, 9, 11
    Ad = [rng.integers(-(2 ** (ba - 1)), 2 ** (ba - 1) + 1, (M, K)) for _ in range(nA)]
    Bd = [rng.integers(-(2 ** (bb - 1)), 2 ** (bb - 1) + 1, (K, N)) for _ in range(nB)]
    Ad[1][2] = 0  # a zero line
    tail = [(s, t) for s in range(nA) for t in range(nB) if s + t >= 2]
    sum_a = np.array([np.abs(d).sum(axis=1) for d in Ad], np.float64)
    max_b = np.array([np.abs(d).max(axis=0) for d in Bd], np.float64)
    R = ozakitail.tail_bound(tail, ba, bb, sum_a, max_b)

    def off(s, t):
        return (nA - 1 - s) * ba + (nB - 1 - t) * bb

    for i in range(M):
        for j in range(N):
            exact = abs(sum(int((Ad[s][i].astype(object) * Bd[t][:, j].astype(object)).sum()) << off(s, t)
                            for s, t in tail))
            formula = sum(int(sum_a[s, i]) * int(max_b[t, j]) << off(s, t) for s, t in tail)
            assert exact <= formula <= int(R[i, j]) <= formula * (1 + 2.0**-40) + 1


@pytest.mark.parametrize("seed", range(3))
def test_early_rounding_decides_typical_ill_conditioned_entries(seed):
    a, b = _ill(70 + seed)
    want = exact_dot(a.astype(np.float64)[:, None, :], b.astype(np.float64).T[None, :, :], out=("fp64", "bf16"))
    for r in both_paths(lambda: exact_matmul(a, b, out=("fp64", "bf16"))):
        assert all(same(x, y) for x, y in zip(r, want))


def test_reused_digit_planes_across_calls_and_shapes():
    # the kernels reuse their digit planes call after call (per thread and operand): results of
    # growing, shrinking and differently sliced problems in a row equal the numpy path's
    pytest.importorskip("numba")  # (without the kernels both sides are the numpy path)
    rng = np.random.default_rng(80)
    for M, K, N, spread in [(30, 500, 20, 40), (8, 60, 5, 0), (30, 900, 25, 90), (3, 2000, 2, 5), (30, 500, 20, 40)]:
        a = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-spread, spread + 1, (M, K)))).astype(np.float32)
        b = (rng.standard_normal((K, N)) * np.exp2(rng.integers(-spread, spread + 1, (K, N)))).astype(np.float32)
        r0, r1 = both_paths(lambda: exact_matmul(a, b, out=("fp64", "bf16")))  # noqa: B023
        assert all(same(x, y) for x, y in zip(r0, r1)), (M, K, N)


# ---- sparse last slices (jitozaki.product) ---------------------------------------------------------
def test_product_kernel_sparse_and_dense_sides():
    rng = np.random.default_rng(54)
    K, b = 300, 21
    lim = 2 ** (b - 1)
    dense_a = rng.integers(-lim, lim + 1, (40, K)).astype(np.float64)
    dense_b = rng.integers(-lim, lim + 1, (K, 36)).astype(np.float64)
    dense_a[0, :4] = [lim, -lim, lim, -lim]
    sparse_a = np.zeros((3, K))
    sparse_a[0, [5, 9]] = [lim, -lim]
    sparse_a[2, K - 1] = 7.0
    sparse_b = np.zeros((K, 2))
    sparse_b[[0, 5, K - 1], [0, 1, 1]] = [-lim, lim, 3.0]
    for X, Y in [(sparse_a, dense_b), (dense_a, sparse_b), (dense_a, dense_b), (sparse_a, sparse_b),
                 (np.zeros((2, K)), dense_b)]:
        got = _kernels().product(X, Y)
        assert np.array_equal(got, X @ Y), (X.shape, Y.shape)


def test_sparse_last_slices_of_a_few_lines():
    # FP32 data whose few rows / columns with one tiny element need a third slice, mostly zeros:
    # those products go over the nonzeros (asserted), the results equal the per-product path's
    jz = _kernels()
    rng = np.random.default_rng(55)
    a = rng.standard_normal((40, 1500)).astype(np.float32)
    b = rng.standard_normal((1500, 30)).astype(np.float32)
    a[[3, 17], [7, 8]] = np.float32(-1.2345678 * 2.0**-31)
    b[[5, 600], [2, 29]] = np.float32(1.7654321 * 2.0**-33)
    calls = []
    real = jz._sparse_left

    def spy(X, Y, G):
        calls.append("rows of A" if G.flags.c_contiguous else "columns of B")  # the transposes: G.T
        return real(X, Y, G)

    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = exact_dot(a64[:, None, :], b64.T[None, :, :], out=OUTS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jz, "_sparse_left", spy)
        for r in both_paths(lambda: exact_matmul(a, b, out=OUTS)):
            assert all(same(x, y) for x, y in zip(r, want))
        ex = both_paths(lambda: exact_matmul(a, b, exact=True))
    assert {"rows of A", "columns of B"} <= set(calls)
    assert ex[0].tolist() == ex[1].tolist()
    assert ex[0][3, 0] == sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a64[3], b64[:, 0]))


# ---- float32 operands read as they are --------------------------------------------------------------
def _fp32_edges(rng, shape):
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-140, 120, shape))).astype(np.float32)
    x.flat[:8] = np.array([2.0**-149, -3 * 2.0**-149, 2.0**-126 - 2.0**-149, 2.0**-126, -0.0, 0.0,
                           np.finfo(np.float32).max, -(2.0**-127)], np.float32)
    return x


def test_bit_range_kernel_float32_bit_fields():
    rng = np.random.default_rng(56)
    X = _fp32_edges(rng, (23, 31))
    X[4] = 0.0
    X[:, 9] = -0.0
    X[6] = np.ldexp(rng.integers(1, 2**23, 31).astype(np.float64), -149).astype(np.float32)  # subnormals
    for axis in (0, 1):
        with jit.disabled():
            want = ozaki.line_bit_range(X.astype(np.float64), axis)
        got = _kernels().bit_range(X, axis)
        assert all(np.array_equal(g, w) for g, w in zip(got, want)), axis


def test_float32_operands_subnormal_and_huge_against_fractions():
    rng = np.random.default_rng(57)
    a, b = _fp32_edges(rng, (7, 19)), _fp32_edges(rng, (19, 6))
    ref = frac_matmul(a, b)
    for out in OUTS:
        r0, r1 = both_paths(lambda: exact_matmul(a, b, out=out))  # noqa: B023
        assert same(r0, r1) and same(r0, [[rounded(x, out) for x in row] for row in ref]), out
    for r in both_paths(lambda: exact_matmul(a, b, exact=True)):
        assert r.tolist() == ref
    a[1, 2], b[3, 4] = np.inf, np.nan  # specials: the float32 values' classes
    r0, r1 = both_paths(lambda: exact_matmul(a, b, out=OUTS))
    assert all(same(x, y) for x, y in zip(r0, r1))
    want = exact_matmul(a.astype(np.float64), b.astype(np.float64), out=OUTS)
    assert all(same(x, y) for x, y in zip(r0, want))


def test_all_finite_kernel():
    jz = _kernels()
    for dt in (np.float64, np.float32):
        fin = np.finfo(dt)
        base = np.array([0.0, -0.0, fin.max, -fin.max, fin.tiny, -fin.smallest_subnormal, 1.5], dt)
        assert jz.all_finite(base) and jz.all_finite(base.reshape(7, 1)) and jz.all_finite(base[:0])
        for bad in (np.inf, -np.inf, np.nan, -np.nan):
            x = np.tile(base, 5)
            x[17] = bad
            assert jz.all_finite(x) is bool(np.isfinite(x).all()) is False, (dt, bad)
        x = np.tile(base, 3)
        x[4] = -x[4]  # a sign bit on a finite value (fin.tiny): still finite
        x[5] = -x[5]
        assert jz.all_finite(x) is bool(np.isfinite(x).all())


def test_bit_range_finite_flags_nan_and_inf():
    jz = _kernels()
    rng = np.random.default_rng(58)
    for dt in (np.float64, np.float32):
        X = rng.standard_normal((9, 14)).astype(dt)
        X[2, 3] = np.finfo(dt).max
        for axis in (0, 1):
            E, span, fin = jz.bit_range_finite(X, axis)
            want = ozaki.line_bit_range(X.astype(np.float64), axis)
            assert fin and np.array_equal(E, want[0]) and np.array_equal(span, want[1])
        for bad in (np.inf, -np.inf, np.nan):
            Y = X.copy()
            Y[5, 7] = bad
            assert not any(jz.bit_range_finite(Y, axis)[2] for axis in (0, 1)), (dt, bad)


def test_add_product_kernel_whole_blocks_and_minus():
    rng = np.random.default_rng(59)
    G = rng.integers(-(2**53), 2**53 + 1, (6, 11)).astype(np.float64)
    G[0, :4] = [2.0**53, -(2.0**53), 0.0, -0.0]
    rows, cols = np.arange(6), np.arange(11)
    for off, minus in [(0, None), (31, None), (64, 33), (95, 0), (40, 40)]:
        a = rng.integers(-(2**40), 2**40, (max(off, minus or 0) // 32 + 4, 6, 11))
        b = a.copy()
        _kernels().add_product(a, G, off, rows, cols, minus=minus)
        ozaki.add_shifted(b, G.astype(np.int64), off, None)
        if minus is not None:
            ozaki.add_shifted(b, (-G).astype(np.int64), minus, None)
        assert np.array_equal(a, b), (off, minus)


def test_the_passes_count_their_runs_and_the_log_names_the_backend(caplog):
    jz = _kernels()
    rng = np.random.default_rng(60)
    a, b = rng.standard_normal((6, 40)).astype(np.float32), rng.standard_normal((40, 5)).astype(np.float32)
    before = jz.calls.count
    with caplog.at_level("DEBUG", logger="numoracle.exact"):
        got = exact_matmul(a, b)
        ran = jz.calls.count - before
        with jit.backend("numpy"):
            want = exact_matmul(a, b)
    assert ran > 0 and jz.calls.count - before == ran and same(got, want)
    lines = [r.getMessage() for r in caplog.records if r.name == "numoracle.exact"]
    assert "exact: split numba" in lines and "exact: split numpy" in lines
    x = rng.standard_normal((3, 50))
    before = jz.calls.count
    assert same(exact_sum(x, axis=1), both_paths(lambda: exact_sum(x, axis=1))[0])
    assert jz.calls.count > before          # all_finite and bit_range of the forced call


def test_exact_dots32_against_the_numpy_route():
    """Long accumulators for float32 operands: the numpy route's values (RNE and RO, bit for bit), over products
    from 2^-298 to near 2^256, exact cancellations, zeros and rows given in any order, repeated or not."""
    from numoracle.exact import ozakitail

    rng = np.random.default_rng(58)
    a, b = _fp32_edges(rng, (9, 300)), _fp32_edges(rng, (300, 7))
    a[1, :150], a[1, 150:] = a[1, 150:], -a[1, 150:]  # a row that cancels against column 0's halves
    b[:150, 0] = b[150:, 0]
    a[2, 7] = np.float32(2.0**-149)  # the smallest product, left after the cancellation
    b[7, 0] = np.float32(2.0**-149)
    a[3] = np.finfo(np.float32).max  # products near 2^256, summed
    a[4] = 0.0
    ii = np.array([0, 1, 2, 3, 4, 1, 8, 0, 5, 6, 7, 2])
    jj = np.array([0, 0, 0, 3, 2, 6, 6, 5, 1, 4, 0, 0])
    with jit.disabled():
        want = ozakitail.entries(a, b, ii, jj)
    got = _kernels().exact_dots32(a, b, ii, jj)
    assert same(got[0], want[0]) and same(got[1], want[1])
    ref = frac_matmul(a.astype(np.float64), b.astype(np.float64))
    assert same(got[0], [rounded(ref[i][j]) for i, j in zip(ii, jj)])
