"""numoracle.testing.checks: assert_*_close reports, poison fills and compare_runs verdicts.

Kernels are modelled with ``numoracle.models.engine.simulation`` (bit-exact accumulation orders); bugs are
injected by hand. All randomness is seeded.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from numoracle import orders, simulate
from numoracle.formats import FP64
from numoracle.testing.checks import (
    assert_dot_close,
    assert_matmul_close,
    assert_sum_close,
    check_matmul_close,
    poison_like,
    poison_mask,
)
from numoracle.testing.runs import compare_runs

BF16 = ml_dtypes.bfloat16


def bf16_inputs(m: int, k: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(BF16), rng.standard_normal((k, n)).astype(BF16)


@pytest.fixture(scope="module")
def mm():
    """A, B (bf16, 64x256 @ 256x64) and a correct kernel's bf16 output (FP32 accumulation, rounded once)."""
    A, B = bf16_inputs(64, 256, 64, seed=1)
    out = simulate("matmul", A, B, acc="fp32", out="bf16").astype(BF16)
    return A, B, out


def bump(x: np.ndarray, index: tuple, ulps: int) -> np.ndarray:
    """A copy of x with one element moved by ``ulps`` codes (same sign, away from zero for positive ulps)."""
    y = x.copy()
    codes = y.view(np.uint16)
    codes[index] = codes[index] + ulps
    return y


# ---- assert_matmul_close ------------------------------------------------------------------------------
def test_correct_bf16_matmul_passes(mm):
    A, B, out = mm
    r = assert_matmul_close(out, A, B, acc="fp32")
    assert r.passed and r.n_fail == 0 and r.n_checked == 64 * 64
    assert 0 < r.max_ratio <= 1  # the margin is reported on pass
    assert r.out_format.name == "bf16" and r.bound.out is not None and r.bound.out.name == "bf16"
    assert str(r).splitlines()[0].startswith("Matmul close: all 4096 elements within the bound")
    # other orders are within the "any order" bound too
    for o in (orders.Pairwise(), orders.SplitK(4)):
        out2 = simulate("matmul", A, B, acc="fp32", order=o, out="bf16").astype(BF16)
        assert assert_matmul_close(out2, A, B, acc="fp32").passed


def test_wrong_element_fails_with_summary_and_table(mm):
    A, B, out = mm
    bad = bump(out, (5, 17), 64)
    with pytest.raises(AssertionError) as ei:
        assert_matmul_close(bad, A, B, acc="fp32")
    msg = str(ei.value)
    first = msg.splitlines()[0]
    assert first.startswith("Matmul mismatch: 1 of 4096 elements exceed the bound (max error/bound ")
    assert "at index (5, 17)" in first and first.endswith("allowed outliers 0")
    table = msg.splitlines()
    head = next(i for i, s in enumerate(table) if s.strip().startswith("index"))
    assert "ULPs (bf16)" in table[head] and table[head + 1].strip().startswith("*  (5, 17)")  # * = over the bound
    assert not table[head + 2].strip().startswith("*")  # the next worst is within the bound
    assert "bound: matmul: inputs bf16" in msg and "components" not in msg  # compact: the derivation on demand
    assert "components" in check_matmul_close(bad, A, B, acc="fp32").explain()
    r = check_matmul_close(bad, A, B, acc="fp32")
    assert not r.passed and r.n_fail == 1
    w = r.worst[0]
    assert w.index == (5, 17) and not w.passed and w.ratio > 1 and w.error > w.bound
    assert 63 <= abs(w.ulps) <= 65  # the correct kernel is within one ULP of the correctly rounded result
    assert all(e.passed for e in r.worst[1:])


def test_allow_outliers(mm):
    A, B, out = mm
    bad = bump(out, (5, 17), 64)
    r = assert_matmul_close(bad, A, B, acc="fp32", allow_outliers=1)
    assert r.passed and r.n_fail == 1 and "within the 1 allowed outliers" in str(r).splitlines()[0]
    worse = bump(bad, (0, 0), 64)
    with pytest.raises(AssertionError, match=r"^Matmul mismatch: 2 of 4096 .* allowed outliers 1"):
        assert_matmul_close(worse, A, B, acc="fp32", allow_outliers=1)


def test_nonfinite_actual_fails_and_is_listed(mm):
    A, B, out = mm
    bad = out.copy()
    bad[3, 4] = np.nan
    bad[7, 1] = np.inf
    r = check_matmul_close(bad, A, B, acc="fp32")
    assert not r.passed and r.n_fail == 2 and r.n_nonfinite == 2
    assert set(r.nonfinite) == {(3, 4), (7, 1)}
    assert "2 element(s) are NaN/inf where the exact result is finite" in str(r)
    assert r.worst[0].ulps is None or r.worst[1].ulps is None  # NaN has no ULP distance


def test_vacuous_bound_fails_with_explanation():
    A, B = bf16_inputs(2, 4096, 2, seed=2)
    out = simulate("matmul", A, B, acc="bf16").astype(BF16)
    r = check_matmul_close(out, A, B, acc="bf16")
    assert r.bound.vacuous and not r.passed
    with pytest.raises(AssertionError) as ei:
        assert_matmul_close(out, A, B, acc="bf16")
    first = str(ei.value).splitlines()[0]
    assert first.startswith("Matmul check failed: the error bound is vacuous")
    for hint in ("wider format than bf16", "kind='probabilistic'", "reduce K = 4096"):
        assert hint in first


def test_order_and_probabilistic_tighten(mm):
    A, B, out = mm
    any_ = check_matmul_close(out, A, B, acc="fp32")
    pw = check_matmul_close(simulate("matmul", A, B, acc="fp32", order=orders.Pairwise(), out="bf16").astype(BF16),
                            A, B, acc="fp32", order="pairwise")
    prob = check_matmul_close(out, A, B, acc="fp32", kind="probabilistic")
    assert pw.passed and prob.passed
    assert pw.bound.coefficient < any_.bound.coefficient and prob.bound.coefficient < any_.bound.coefficient


def test_fp32_output_and_out_format():
    A, B = bf16_inputs(16, 128, 8, seed=3)
    out32 = simulate("matmul", A, B, acc="fp32").astype(np.float32)
    r = assert_matmul_close(out32, A, B, acc="fp32")
    assert r.out_format.name == "fp32" and r.bound.u_out is None
    # the same values checked as bf16 results held in a float32 array
    r = assert_matmul_close(simulate("matmul", A, B, acc="fp32", out="bf16").astype(np.float32), A, B, acc="fp32",
                            out="bf16")
    assert r.out_format.name == "bf16"
    # 1-D operands follow numpy's matmul shapes
    v = simulate("dot", A[0], B[:, 0], acc="fp32").astype(np.float32)
    assert assert_matmul_close(np.float32(v)[None], A[0], B[:, :1], acc="fp32").n_checked == 1


def test_shape_mismatch_and_bad_inputs(mm):
    A, B, out = mm
    with pytest.raises(ValueError, match=r"actual has shape \(64, 63\).*has shape \(64, 64\)"):
        check_matmul_close(out[:, :63], A, B, acc="fp32")
    with pytest.raises(ValueError, match=r"\(64, 256\).*\(512, 64\)"):
        check_matmul_close(out, A, np.concatenate([B, B]), acc="fp32")
    Ai = A.copy()
    Ai[0, 0] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        check_matmul_close(out, Ai, B, acc="fp32")
    with pytest.raises(ValueError, match="allow_outliers"):
        check_matmul_close(out, A, B, acc="fp32", allow_outliers=-1)


# ---- sums and dot products ---------------------------------------------------------------------------
def test_assert_sum_close():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 1000)).astype(np.float32)
    assert assert_sum_close(np.sum(x, axis=-1), x, acc="fp32").passed  # numpy's pairwise float32 sum
    assert assert_sum_close(simulate("sum", x, acc="fp32").astype(np.float32), x).passed
    assert assert_sum_close(np.sum(x.T, axis=0), x.T, axis=0).passed
    bad = np.sum(x, axis=-1)
    bad[6] = bad[6] + np.float32(1.0)
    with pytest.raises(AssertionError, match=r"^Sum mismatch: 1 of 8 elements exceed the bound .*at index \(6,\)"):
        assert_sum_close(bad, x)
    with pytest.raises(ValueError, match=r"actual has shape \(1000,\)"):
        assert_sum_close(np.sum(x, axis=0), x)


def test_sum_overflow_to_inf_matches_the_correct_rounding():
    x = np.array([[60000, 60000], [1, 2]], np.float16)
    ok = np.array([np.inf, 3], np.float16)  # 120000 rounds to inf in fp16: inf is the correct result
    assert assert_sum_close(ok, x).passed
    with pytest.raises(AssertionError, match="NaN/inf where the exact result is finite"):
        assert_sum_close(np.array([np.nan, 3], np.float16), x)


def test_assert_dot_close():
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal(512).astype(np.float16) for _ in range(2))
    good = np.float16(simulate("dot", a, b, acc="fp32", out="fp16"))
    r = assert_dot_close(good, a, b, acc="fp32")
    assert r.passed and r.n_checked == 1 and r.worst[0].index == ()
    with pytest.raises(AssertionError, match=r"^Dot mismatch: 1 of 1 elements"):
        assert_dot_close(np.float16(float(good) + 1.0), a, b, acc="fp32")
    # batches: leading axes broadcast
    A = rng.standard_normal((3, 512)).astype(np.float16)
    res = np.array([simulate("dot", A[i], b, acc="fp32", out="fp16") for i in range(3)], np.float16)
    assert assert_dot_close(res, A, b, acc="fp32").n_checked == 3
    with pytest.raises(ValueError, match="last axis"):
        assert_dot_close(good, a, b[:100])


# ---- poison ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, code", [(np.float32, 0x7FA5A5A5), (np.float16, 0x7DA5), (BF16, 0x7FA5),
                                         (ml_dtypes.float8_e4m3fn, 0x7F), (np.int8, 0xA5), (np.uint16, 0xA5A5),
                                         (np.float64, 0x7FF5A5A5A5A5A5A5)])
def test_poison_like(dtype, code):
    x = np.zeros((3, 5), dtype)
    p = poison_like(x)
    assert p.shape == x.shape and p.dtype == x.dtype and not np.shares_memory(p, x)
    assert (p.view(np.dtype(f"u{x.dtype.itemsize}")) == code).all()
    assert poison_mask(p).all() and not poison_mask(x).any()
    if x.dtype.kind == "f" or dtype in (BF16, ml_dtypes.float8_e4m3fn):
        with np.errstate(invalid="ignore"):  # converting a signalling NaN raises the invalid flag
            assert np.isnan(p.astype(np.float32)).all()


def test_poison_like_torch():
    torch = pytest.importorskip("torch")
    t = torch.zeros(4, 6, dtype=torch.bfloat16)
    p = poison_like(t)
    assert isinstance(p, torch.Tensor) and p.dtype == torch.bfloat16 and p.shape == t.shape
    assert (p.view(torch.int16) == 0x7FA5).all()
    p32 = poison_like(torch.zeros(2, dtype=torch.float32))
    assert (p32.view(torch.int32) == 0x7FA5A5A5).all() and poison_mask(p32).all()


# ---- compare_runs ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mm32():
    A, B = bf16_inputs(64, 256, 64, seed=6)
    return A, B, simulate("matmul", A, B, acc="fp32").astype(np.float32)


def test_compare_identical(mm32):
    A, B, run = mm32
    c = compare_runs(run, run.copy(), "matmul", A, B)
    assert c.verdict == "IDENTICAL" and c.n_differ == 0 and str(c).startswith("IDENTICAL")


def test_compare_split_k_is_reordering():
    A, B = bf16_inputs(4, 4096, 4, seed=7)
    r2 = simulate("matmul", A, B, acc="fp32", order=orders.SplitK(2)).astype(np.float32)
    r8_order = orders.SplitK(8, permutation=(7, 3, 1, 5, 0, 6, 2, 4))
    r8 = simulate("matmul", A, B, acc="fp32", order=r8_order)
    r8 = r8.astype(np.float32)
    assert (r2 != r8).any()  # the data makes the orders differ
    c = compare_runs(r2, r8, "matmul", A, B)
    assert c.verdict == "REORDERING" and c.n_differ > 0 and c.max_run_ulps > 0
    assert 0 < c.max_ratio <= 1 and str(c).startswith("REORDERING")
    # the runs' orders: split-K 2 is found; the permutation of 8 slices is found per element (atomics stage)
    assert c.identified["run_a"] == orders.SplitK(2) and c.identified["run_b"] is not None
    assert np.array_equal(simulate("matmul", A, B, acc="fp32", order=c.identified["run_b"]).astype(np.float32), r8)
    assert "identified: run_a = SplitK(s=2" in str(c) and "(reordering)" in str(c)
    c = compare_runs(r2, r8, "matmul", A, B, orders=["splitk:2", "splitk:8"], identify=[orders.SplitK(2), r8_order])
    assert c.verdict == "REORDERING" and c.identified == {"run_a": orders.SplitK(2), "run_b": r8_order}
    assert "(reordering)" in str(c)


def test_compare_injected_bug_is_unexplained(mm32):
    A, B, run = mm32
    bug = run.copy()
    bug[32:64, 0:32] *= np.float32(1.01)
    c = compare_runs(run, bug, "matmul", A, B)
    assert c.verdict == "UNEXPLAINED" and c.n_unexplained > 900
    assert all(r == "run_b" and 32 <= e.index[0] < 64 and e.index[1] < 32 for r, e in c.unexplained)
    assert c.unexplained[0][1].ratio == c.max_ratio > 1
    assert str(c).startswith("UNEXPLAINED") and "run_b (" in str(c)


def test_compare_unwritten_tile(mm32):
    A, B, run = mm32
    partial = poison_like(run)
    partial[:, :32] = run[:, :32]
    partial[32:, 32:] = run[32:, 32:]  # tile [0:32, 32:64] never written
    c = compare_runs(run, partial, "matmul", A, B)
    assert c.verdict == "UNWRITTEN" and c.n_unwritten == {"run_a": 0, "run_b": 32 * 32}
    assert c.unwritten["run_b"] == ["[0:32, 32:64]"] and "[0:32, 32:64]" in str(c)
    # both runs unwritten at the same place are bit-identical, and still UNWRITTEN
    assert compare_runs(partial, partial.copy(), "matmul", A, B).verdict == "UNWRITTEN"


def test_compare_errors(mm32):
    A, B, run = mm32
    with pytest.raises(ValueError, match=r"run_b has shape \(64, 32\)"):
        compare_runs(run, run[:, :32], "matmul", A, B)
    with pytest.raises(ValueError, match="one format"):
        compare_runs(run, run.astype(np.float64), "matmul", A, B)


def test_borderline_elements_are_settled_exactly():
    """|actual - exact| is judged in float64 against the fp64-rounded exact result, except within 2^-50 of the
    bound, where the exact rational decides: both directions of the float64 mistake are caught."""
    from numoracle.testing.closeproblem import Problem
    from numoracle.testing.judge import Setup

    x = np.array([[1.0, 2.0**-60]])  # exact sum 1 + 2^-60; its float64 rounding is 1
    pb = Problem("sum", (x,), -1)
    st = Setup(pb, FP64, acc=FP64, order=None, kind="worst", out=None, fma=True, rounding="rne",
                confidence=0.999)
    up = np.array([1.0 + 2.0**-52]).view(np.uint64)    # true error 2^-52 - 2^-60, float64 says 2^-52
    st.tol = np.array([2.0**-52 - 2.0**-60])
    assert st.judge(up, FP64).ok[0]
    st.tol = np.array([2.0**-52 - 2.0**-59])
    assert not st.judge(up, FP64).ok[0]
    down = np.array([1.0 - 2.0**-53]).view(np.uint64)  # true error 2^-53 + 2^-60, float64 says 2^-53
    st.tol = np.array([2.0**-53])
    assert not st.judge(down, FP64).ok[0]


def test_exact_at_matches_fractions_for_every_op():
    from fractions import Fraction

    from numoracle.testing.closeproblem import Problem as _Problem

    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 3, 5)).astype(np.float32)
    b = rng.standard_normal((1, 5, 4)).astype(np.float32)
    pb = _Problem("matmul", (a, b), -1)
    for flat in range(int(np.prod(pb.work_shape))):
        n, i, j = np.unravel_index(flat, pb.work_shape)
        want = sum((Fraction(float(a[n, i, k])) * Fraction(float(b[0, k, j])) for k in range(5)), Fraction(0))
        assert pb.exact_at(flat) == want
    x = rng.standard_normal((3, 5)).astype(np.float16)
    y = rng.standard_normal(5).astype(np.float16)
    pd = _Problem("dot", (x, y), -1)
    assert pd.exact_at(2) == sum((Fraction(float(p)) * Fraction(float(q)) for p, q in zip(x[2], y)), Fraction(0))
    ps = _Problem("sum", (np.arange(12, dtype=np.int32).reshape(3, 4),), 0)
    assert ps.exact_at(1) == 1 + 5 + 9
