"""Checks that say what they can detect (report.power), and FTZ in bounds and checks."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle import orders
from numoracle.formats import FP32
from numoracle.testing.checks import check_dot_close, check_matmul_close, check_sum_close

K = 4096


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(20261201)
    return rng.standard_normal((8, K)).astype(np.float32), rng.standard_normal((K, 8)).astype(np.float32)


def _kernel(A, B, acc, order):
    return no.simulate("matmul", A, B, acc=acc, order=order).astype(np.float32)


def test_bf16_accumulation_is_flagged(data):
    """A BF16-accumulated K = 4096 matmul: the default check (FP32 claimed, any order, worst case) fails
    the sequential one; for the pairwise one the report says plainly that the check cannot tell FP32 from
    BF16 accumulation here, and the stricter check it suggests fails that kernel."""
    A, B = data
    seq = check_matmul_close(_kernel(A, B, "bf16", orders.Sequential()), A, B)
    assert not seq.passed
    pw = _kernel(A, B, "bf16", orders.Pairwise())
    r = check_matmul_close(pw, A, B)
    p = r.power
    assert "BF16" in p.cannot_tell
    text = r.explain()  # the detection power is part of the full report
    assert "this check cannot tell FP32 from" in text and "BF16" in text.split("cannot tell FP32 from")[1]
    stricter = {check: flags for check, _, flags in p.stricter}
    assert "BF16 (pairwise)" in stricter["kind='probabilistic'"]
    assert not check_matmul_close(pw, A, B, kind="probabilistic").passed
    assert check_matmul_close(_kernel(A, B, "fp32", orders.Pairwise()), A, B, kind="probabilistic").passed


def test_fp16_accumulation_passes_the_default_check_and_the_report_says_so(data):
    A, B = data
    y = _kernel(A, B, "fp16", orders.Pairwise())
    r = check_matmul_close(y, A, B)
    assert r.passed  # the weak check: worst case over any order
    assert "FP16" in r.power.cannot_tell
    named = [(c, f) for c, _, f in r.power.stricter if c.startswith("order='pairwise'")]
    assert named and "FP16 (sequential, pairwise)" in named[0][1]
    assert not check_matmul_close(y, A, B, order="pairwise").passed  # the named order catches it
    assert check_matmul_close(_kernel(A, B, "fp32", orders.Pairwise()), A, B, order="pairwise").passed


def test_power_rows_and_claimed_accumulator(data):
    A, B = data
    r = check_matmul_close(_kernel(A, B, "fp32", orders.Sequential()), A, B)
    p = r.power
    assert [row.acc.name for row in p.rows] == ["fp32", "tf32", "fp16", "bf16"] and p.rows[0].claimed
    assert set(p.rows[0].ratio) == {"sequential", "pairwise"}
    assert max(p.rows[0].ratio.values()) < 1e-3  # FP32 accumulation stays far inside its own bound
    assert p.coefficient == r.bound.coefficient_float and p.sampled == 8 and p.elements == 64
    # BF16 sequential typical error is well above the bound here: the check itself sees it
    bf16 = p.rows[-1]
    assert bf16.ratio["sequential"] > 1
    assert "smallest error it catches" in r.explain() and "smallest error it catches" not in str(r)


def test_small_k_can_tell():
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((4, 64)).astype(np.float32), rng.standard_normal((64, 4)).astype(np.float32)
    r = check_matmul_close(no.simulate("matmul", A, B, acc="fp32").astype(np.float32), A, B)
    assert r.power.cannot_tell == [] and "cannot tell" not in str(r)


def test_named_order_is_simulated_as_named(data):
    A, B = data
    r = check_matmul_close(_kernel(A, B, "fp32", orders.Pairwise()), A, B, order="pairwise")
    assert set(r.power.rows[0].ratio) == {"pairwise"}


def test_power_of_sum_and_of_an_unsimulable_claim():
    x = np.random.default_rng(4).standard_normal((3, 256)).astype(np.float32)
    r = check_sum_close(no.simulate("sum", x, acc="fp32").astype(np.float32), x)
    assert r.power.rows[0].claimed and r.power.sampled == 3
    xi = np.random.default_rng(5).integers(-100, 100, (2, 16)).astype(np.int8)
    ri = check_sum_close(xi.astype(np.int64).sum(axis=1).astype(np.int32), xi, acc="int32")
    assert r.passed and ri.passed
    assert ri.power.rows[0].note.startswith("not simulated (")  # said, not raised: simulate models floats only


# ---- FTZ -------------------------------------------------------------------------------------------
def test_ftz_is_modelled_in_bound_and_check():
    a = np.full(16, 2.0 ** -70, np.float32)  # products 2^-140: subnormal in FP32, flushed by FTZ
    b = np.full(16, 2.0 ** -70, np.float32)
    y_ftz = np.float32(no.simulate("dot", a, b, acc="fp32", ftz=True))
    assert y_ftz == 0
    assert not check_dot_close(y_ftz, a, b).passed  # gradual underflow assumed: a flushed result is an error
    r = check_dot_close(y_ftz, a, b, ftz=True)
    assert r.passed
    plain = no.expected_error_bound("dot", "fp32", 16, acc="fp32")
    ftz = no.expected_error_bound("dot", "fp32", 16, acc="fp32", ftz=True)
    assert ftz.coefficient == plain.coefficient and ftz.atol_const >= 47 * FP32.min_normal
    assert any("FTZ" in n for n in ftz.notes) and "FTZ" in str(ftz)
    # the FTZ bound still catches a real error
    assert not check_dot_close(np.float32(1e-30), a, b, ftz=True).passed


def test_ftz_refusals_are_clear():
    a = np.ones(8, np.float32)
    with pytest.raises(ValueError, match="daz=True .* not modelled"):
        check_dot_close(np.float32(8), a, a, daz=True)
    with pytest.raises(ValueError, match="ftz=True is not modelled for quantized_matmul"):
        no.expected_error_bound("quantized_matmul", "fp8_e4m3fn", 64, block=32, scale_fmt="e8m0fnu", ftz=True)
    with pytest.raises(ValueError, match="ftz=True is not modelled for blockfma"):
        no.expected_error_bound("dot", "fp8_e4m3fn", 64, acc="fp32", order="blockfma:32:13:13", ftz=True)
