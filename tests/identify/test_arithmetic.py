"""One value for a kernel's arithmetic: identify_order hands it out, simulate, the bounds and the checks take it."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_identify import _mm

import numoracle as no
from numoracle import orders as O
from numoracle.formats import FP32
from numoracle.identify.search import identify_order
from numoracle.models.orders.gpu import TiledSplitK


@pytest.mark.parametrize("fmt", ["fp16", pytest.param("bf16", marks=pytest.mark.slow)])   # bf16: the same path
def test_the_identified_arithmetic_checks_the_recorded_kernel(fmt):
    d, a, b, _ = _mm(f"{fmt}_128x4096x128_cancel")
    out = d[f"{fmt}_128x4096x128_cancel__torch_mm_out_fp32"]
    rep = identify_order(out, "matmul", a, b)
    arith = rep.arithmetic
    assert arith.order == TiledSplitK(3, 64, O.preset("h200", fmt)) and arith.accumulator == FP32
    # the value reproduces the kernel through simulate, bounds it, and checks it end to end
    np.testing.assert_array_equal(no.simulate("matmul", a, b, arith=arith).astype(np.float32), out)
    report = no.assert_matmul_close(out, a, b, arith)
    assert report.passed and str(report.bound.order) == str(no.expected_error_bound(
        "matmul", fmt, a.shape[1], arith).order)
    # a corrupted element of the same kernel's output is caught against that order's bound
    bad = out.copy()
    bad[3, 5] = np.float32(bad[3, 5] * 1.01 + 1.0)
    with pytest.raises(no.NumoracleAssertionError):
        no.assert_matmul_close(bad, a, b, arith)


def test_arith_and_keywords_agree_and_do_not_mix():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 300)).astype(np.float16)
    arith = no.Arithmetic(acc="fp32", order="blocked:64", rounding="rtz")
    np.testing.assert_array_equal(no.simulate("sum", x, arith=arith),
                                  no.simulate("sum", x, acc="fp32", order=O.Blocked(64), rounding="rtz"))
    assert no.expected_error_bound("sum", "fp16", 300, arith) == \
        no.expected_error_bound("sum", "fp16", 300, acc="fp32", order="blocked:64", rounding="rtz")
    no.assert_sum_close(no.simulate("sum", x, arith=arith).astype(np.float32), x, arith)
    with pytest.raises(TypeError, match="either arith= or the keywords acc"):
        no.simulate("sum", x, arith=arith, acc="fp16")
    with pytest.raises(TypeError, match="numoracle.Arithmetic"):
        no.simulate("sum", x, arith={"acc": "bf16"})
    with pytest.raises(ValueError, match="does not model out_rounding"):
        no.check_sum_close(no.simulate("sum", x, arith=arith), x, arith.replace(out="bf16", out_rounding="rne"))
    with pytest.raises(ValueError, match="conflicts with the order's own accumulator"):
        no.Arithmetic(acc="fp16", order=O.preset("h100", "fp8"))
    assert str(no.Arithmetic(order=O.Promoted(64, O.preset("h100", "fp8"), FP32))) == \
        'Arithmetic(acc=fp32, order=Promoted(every=64, inner=preset("h100", "fp8"), outer_acc=Format(fp32)))'


def test_operands_are_read_as_the_kernel_reads_them():
    rng = np.random.default_rng(12)
    a = rng.standard_normal((8, 64)).astype(np.float32)
    b = rng.standard_normal((64, 8)).astype(np.float32)
    tf32 = no.Arithmetic(order=O.preset("h100", "tf32"), operands="tf32", operands_rounding="rtz")
    ra = no.decode(no.cast(a, "tf32", rounding="rtz"), "tf32").astype(np.float32)
    rb = no.decode(no.cast(b, "tf32", rounding="rtz"), "tf32").astype(np.float32)
    got = no.simulate("matmul", a, b, arith=tf32)
    np.testing.assert_array_equal(got, no.simulate("matmul", ra, rb, order=O.preset("h100", "tf32")))
    no.assert_matmul_close(got, a, b, tf32)       # checked against the exact product of what the kernel read
    rne = tf32.replace(operands_rounding="rne")
    b1 = no.expected_error_bound("matmul", "fp32", 64, rne)
    assert b1 == no.expected_error_bound("matmul", "tf32", 64, acc="fp32", order=O.preset("h100", "tf32"),
                                         inputs_rounded_from="fp32")
    with pytest.raises(ValueError, match="rounded to nearest"):
        no.expected_error_bound("matmul", "fp32", 64, tf32)


def test_compare_runs_takes_the_arithmetic():
    rng = np.random.default_rng(13)
    a = rng.standard_normal((4, 256)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((256, 4)).astype(ml_dtypes.bfloat16)
    arith = no.Arithmetic(order=O.SplitK(4))
    run_a = no.simulate("matmul", a, b, arith=arith).astype(np.float32)
    run_b = no.simulate("matmul", a, b, arith=arith.replace(order=O.SplitK(4, permutation=(3, 2, 1, 0)))
                        ).astype(np.float32)
    cmp = no.compare_runs(run_a, run_b, "matmul", a, b, arith=arith, identify=False)
    assert cmp.verdict in ("IDENTICAL", "REORDERING")
