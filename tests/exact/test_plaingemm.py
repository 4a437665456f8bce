"""exact_matmul's shortcut into narrow formats (exact/plaingemm.py): one plain float64 GEMM, its error bound and the
bracket. Its results against the exact engines' bit for bit and against Python ``Fraction`` references (random,
2^+-40 cancelling, subnormal, FP64, FP16/BF16, inf/NaN inputs; entries on and next to FP32 / BF16 midpoints, where
the float64 GEMM's own rounding decides the result if the bound is wrong); the bound against the exact error of
the GEMM (underflowing products included); the compiled widening pass against numpy's; the choice. Seeded.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from test_jitozaki import frac_matmul, rounded, same
from test_ozaki2 import CASES, IDS, spread

from numoracle.core import jit
from numoracle.core.formats.format import BF16, FP8_E4M3FN, FP16, FP32, FP64, INT8
from numoracle.exact import gemmbound, ozaki, plaingemm
from numoracle.exact.reference import exact_matmul

NARROW = ("fp32", "bf16", "fp16")


def shortcut(monkeypatch, on: bool) -> None:
    """exact_matmul with the shortcut always (on) or never taken where it qualifies."""
    monkeypatch.setattr(plaingemm, "choose", lambda A, B, *a: plaingemm.right(B, a[-1]) if on else None)


def midpoints(rng, rows: int, K: int) -> tuple[np.ndarray, np.ndarray]:
    """FP32 A, B whose entries are FP32 (and BF16) midpoints, or a midpoint +- 2^-60 of it, after large terms that
    cancel: the float64 GEMM of such a row rounds away the 2^-24 and the 2^-60 (2^30 + 1 + 2^-24 needs 55 bits),
    so only a bound that covers that rounding leaves these entries to the exact path."""
    A = np.zeros((rows, K), np.float32)
    B = np.ones((K, 3), np.float32)
    for i in range(rows):
        big = float(2 ** rng.integers(20, 40))
        terms = [big, 1.0, 2.0**-24 if i % 2 else 2.0**-8, -big, [0.0, 2.0**-60, -(2.0**-60)][i % 3]]
        terms += list(rng.standard_normal(3) * 2.0**-70)  # not a multiple of anything simple
        at = rng.choice(K, len(terms), replace=False)
        A[i, at] = np.array(terms, np.float32)
    B[:, 1] = np.where(np.arange(K) % 5 == 0, -1.0, 1.0)  # another sign pattern
    B[:, 2] = 2.0 ** rng.integers(-3, 4, K)
    return A, B


ADVERSARIAL = midpoints(np.random.default_rng(39), 12, 300)


@pytest.mark.parametrize("name,a,b", CASES, ids=IDS)
@pytest.mark.parametrize("kernels", [False, True], ids=["numpy", "kernels"])
def test_shortcut_gives_the_exact_engines_results(monkeypatch, name, a, b, kernels):
    with (jit.forced() if kernels else jit.disabled()):
        shortcut(monkeypatch, False)
        want = exact_matmul(a, b, out=NARROW)
        shortcut(monkeypatch, True)
        got = exact_matmul(a, b, out=NARROW)
        one = exact_matmul(a, b, out="fp32")
    for out, x, y in zip(NARROW, want, got):
        assert same(x, y), (name, out)
    assert same(one, want[0]), name


@pytest.mark.parametrize("kernels", [False, True], ids=["numpy", "kernels"])
def test_midpoints_against_python_fractions(monkeypatch, kernels):
    A, B = ADVERSARIAL
    ref = frac_matmul(A, B)
    shortcut(monkeypatch, True)
    with (jit.forced() if kernels else jit.disabled()):
        for out in ("fp32", "bf16"):
            got = exact_matmul(A, B, out=out)
            assert same(got, [[rounded(x, out) for x in row] for row in ref]), out


def test_midpoints_need_the_bound():
    """The adversarial set has teeth: deciding from the float64 GEMM alone (R = 0) rounds some entries wrongly,
    and the real bound leaves every such entry undecided."""
    A, B = ADVERSARIAL
    ref = np.array([[rounded(x, "fp32") for x in row] for row in frac_matmul(A, B)])
    K = A.shape[1]
    kc = gemmbound.chunk(K)
    A64, rs, rm = plaingemm.widen_stats(A, kc, 1)
    B64, cs, cm = plaingemm.widen_stats(B, kc, 0)
    C = plaingemm.gemm(A64, B64, kc)
    naive = C.astype(np.float32).astype(np.float64)
    assert not same(naive, ref)
    R = plaingemm.bound(rs, rm, cs, cm, K, kc, True)
    got = plaingemm.bracket(C, R, (FP32,))
    decided = np.setdiff1d(np.arange(C.size), got.undecided)
    wrong = np.flatnonzero(naive.ravel() != ref.ravel())
    assert not np.intersect1d(wrong, decided).size
    assert same(got.ro[decided].astype(np.float32).astype(np.float64), ref.ravel()[decided])


@pytest.mark.parametrize("kind", ["fp32 normal", "fp32 2^+-40", "fp64 2^+-30", "fp64 underflowing products",
                                  "fp64 huge"])
def test_bound_covers_the_gemms_error(kind):
    rng = np.random.default_rng(len(kind))
    M, K, N = 5, 700, 4
    if kind == "fp32 normal":
        a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    elif kind == "fp32 2^+-40":
        a, b = spread(rng, (M, K)).astype(np.float32), spread(rng, (K, N)).astype(np.float32)
    elif kind == "fp64 2^+-30":
        a, b = spread(rng, (M, K), -30, 30), spread(rng, (K, N), -30, 30)
    elif kind == "fp64 underflowing products":
        a, b = spread(rng, (M, K), -560, -500), spread(rng, (K, N), -560, -500)
    else:
        a, b = spread(rng, (M, K), 480, 500), spread(rng, (K, N), 480, 500)
    EA, sA = ozaki.line_bit_range(a.astype(np.float64), 1)
    EB, sB = ozaki.line_bit_range(b.astype(np.float64), 0)
    kc = gemmbound.chunk(K)
    assert kc < K  # several chunks
    A64, rs, rm = plaingemm.widen_stats(a, kc, 1)
    B64, cs, cm = plaingemm.widen_stats(b, kc, 0)
    exact_products = plaingemm._exact_products(a, b, EA, sA, EB, sB)
    assert exact_products == kind.startswith("fp32")
    R = plaingemm.bound(rs, rm, cs, cm, K, kc, exact_products)
    C = plaingemm.gemm(A64, B64, kc)
    ref = frac_matmul(a, b)
    for i in range(M):
        for j in range(N):
            if np.isfinite(C[i, j]) and np.isfinite(R[i, j]):
                assert abs(Fraction(float(C[i, j])) - ref[i][j]) <= Fraction(float(R[i, j])), (kind, i, j)
            else:
                assert kind == "fp64 huge"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [0, 1])
def test_widening_kernel_matches_numpy(dtype, axis):
    pytest.importorskip("numba")                      # (the kernel's module compiles at import)
    rng = np.random.default_rng(7)
    X = spread(rng, (37, 300), -60, 60).astype(dtype)
    if axis == 0:
        X = np.ascontiguousarray(X.T)
    from numoracle.exact.kernels import ozaki as kern
    for kc in (64, 128, 300, 512):
        want = plaingemm.widen_stats(X, kc, axis)
        got = plaingemm.widen_stats(X, kc, axis, kern)
        assert same(want[0], got[0]) and same(want[2], got[2])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-13)


def test_qualifies_only_narrow_monotone_destinations():
    assert plaingemm.qualifies(FP32, False) == (FP32,)
    assert plaingemm.qualifies((BF16, FP16), False) == (BF16, FP16)
    for dst in (FP64, (FP32, FP64), FP8_E4M3FN, INT8):
        assert plaingemm.qualifies(dst, False) is None
    assert plaingemm.qualifies(FP32, True) is None


def test_choice_takes_the_shortcut_only_where_it_pays():
    pytest.importorskip("numba")
    from numoracle.exact.kernels import ozaki as kern
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((64, 512)).astype(np.float32), rng.standard_normal((512, 64)).astype(np.float32)
    c = spread(rng, (64, 512), -20, 20)
    c[:, 1::2] = -c[:, 0::2] * (1 + 2.0**-22)  # near-total cancellation: the bracket decides few entries
    d = spread(rng, (512, 64), -20, 20)
    d[1::2] = d[0::2]
    c, d = c.astype(np.float32), d.astype(np.float32)
    for x, y, pays in ((a, b, True), (c, d, False)):
        EA, sA = ozaki.line_bit_range(x.astype(np.float64), 1)
        EB, sB = ozaki.line_bit_range(y.astype(np.float64), 0)
        assert (plaingemm.choose(x, y, EA, sA, EB, sB, (FP32,), kern) is not None) is pays
        assert plaingemm.choose(x, y, EA, sA, EB, sB, (FP32,), None) is None  # numpy's exact dot products cost more
        assert same(exact_matmul(x, y, out="fp32"), exact_matmul(x, y, out=("fp64", "fp32"))[1])


@pytest.mark.parametrize("kernels", [False, True], ids=["numpy", "kernels"])
def test_zeros_keep_their_signs(monkeypatch, kernels):
    """Entries that are exactly 0 (products all -0, all +0, or cancelling) get the exact engines' signed zeros."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((6, 96)).astype(np.float32)
    b = rng.standard_normal((96, 5)).astype(np.float32)
    a[0] = -0.0  # products of -0 with positives and negatives
    a[1] = 0.0
    a[2, 1::2] = -a[2, 0::2]
    b[1::2, 0] = b[0::2, 0]  # row 2 x column 0 cancels exactly
    b[:, 1] = np.abs(b[:, 1])  # row 0 x column 1: every product -0
    with (jit.forced() if kernels else jit.disabled()):
        shortcut(monkeypatch, False)
        want = exact_matmul(a, b, out=NARROW)
        shortcut(monkeypatch, True)
        got = exact_matmul(a, b, out=NARROW)
    assert np.signbit(want[0][0, 1]) and want[0][2, 0] == 0
    for out, x, y in zip(NARROW, want, got):
        assert same(x, y), out


@pytest.mark.parametrize("forced", [False, True], ids=["chosen", "shortcut"])
def test_flush_to_zero_mode_is_refused(monkeypatch, forced):
    """torch.set_flush_denormal(True) makes the CPU's float64 -> float32 conversion flush subnormal results (with
    the compiled kernels on, 29 of these 30 FP32 results differed in that mode before the guard): exact_matmul
    refuses the thread (core/fpmode.py) and gives the IEEE results once the mode is off."""
    from numoracle.core.errors import FlushToZeroError

    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    a = spread(rng, (5, 64), -72, -66).astype(np.float32)  # normal inputs (a DAZ mode would zero subnormal ones)
    b = spread(rng, (64, 6), -64, -60).astype(np.float32)  # whose results are FP32 subnormals
    with jit.disabled():
        want = exact_matmul(a, b, out="fp32")
    assert ((want != 0) & (np.abs(want) < 2.0**-126)).any()
    if forced:
        shortcut(monkeypatch, True)
    if not torch.set_flush_denormal(True):
        pytest.skip("the CPU has no flush-to-zero mode")
    try:
        with pytest.raises(FlushToZeroError):
            exact_matmul(a, b, out="fp32")
    finally:
        torch.set_flush_denormal(False)
    with jit.forced():
        assert same(exact_matmul(a, b, out="fp32"), want)
