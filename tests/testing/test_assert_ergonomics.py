"""Assertion ergonomics: explicit keyword signatures, msg= (str or callable), a compact report with the
elements over the bound marked, ULPs in the output format's units, and the full derivation on demand."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import numoracle as no
from numoracle.formats import BF16, FP32, FP64
from numoracle.testing.checks import (
    assert_dot_close,
    assert_matmul_close,
    assert_sum_close,
    check_dot_close,
    check_matmul_close,
    check_sum_close,
)

bf16 = ml_dtypes.bfloat16
HELPERS = [assert_sum_close, assert_dot_close, assert_matmul_close, check_sum_close, check_dot_close,
           check_matmul_close, no.assert_quantized_close, no.check_quantized_close]


@pytest.fixture(scope="module")
def mm():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((8, 128)).astype(bf16)
    B = rng.standard_normal((128, 6)).astype(bf16)
    return A, B, no.simulate("matmul", A, B, acc="fp32")


@pytest.mark.parametrize("fn", HELPERS, ids=lambda f: f.__name__)
def test_signatures_are_explicit(fn):
    params = inspect.signature(fn).parameters.values()
    assert not [p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD], \
        f"{fn.__name__} hides its parameters behind **kwargs"
    if fn.__name__.startswith("assert_"):
        names = {p.name for p in params}
        assert "msg" in names and ("verbose" in names or "quantized" in fn.__name__)


@pytest.mark.parametrize("pair", [(assert_sum_close, check_sum_close), (assert_dot_close, check_dot_close),
                                  (assert_matmul_close, check_matmul_close)], ids=lambda p: p[0].__name__)
def test_assert_takes_every_check_parameter(pair):
    a, c = (inspect.signature(f).parameters for f in pair)
    assert set(c) <= set(a)
    assert all(a[n].default == c[n].default for n in c)


def _wrong(out):
    bad = out.copy()
    bad[1, 2] = float(np.float32(bad[1, 2] * 1.01))  # an FP32 value, far outside an FP32 accumulator's bound
    return bad


def test_msg_string_and_callable(mm):
    A, B, out = mm
    bad = _wrong(out)
    with pytest.raises(AssertionError) as e:
        assert_matmul_close(bad, A, B, acc="fp32", msg="layer 7")
    lines = str(e.value).splitlines()
    assert lines[0] == "layer 7" and lines[1].startswith("Matmul mismatch: 1 of 48 elements")
    seen = []

    def rewrite(text: str) -> str:
        seen.append(text)
        return "custom: " + text.splitlines()[0]

    with pytest.raises(AssertionError) as e:
        assert_matmul_close(bad, A, B, acc="fp32", msg=rewrite)
    assert str(e.value).startswith("custom: Matmul mismatch") and "\n" not in str(e.value)
    assert seen and seen[0].startswith("Matmul mismatch")
    assert e.value.report.n_fail == 1  # the report object is still attached
    with pytest.raises(TypeError, match="msg must be a str or a callable"):
        assert_matmul_close(bad, A, B, acc="fp32", msg=3)
    assert assert_matmul_close(out, A, B, acc="fp32", msg="unused").passed  # msg only matters on failure


def test_compact_report_marks_the_elements_over_the_bound(mm):
    A, B, out = mm
    r = check_matmul_close(_wrong(out), A, B, acc="fp32", show=4)
    text = str(r).splitlines()
    assert len(text) <= 10  # headline, table head + 4 rows, bound line, hint
    head = next(i for i, s in enumerate(text) if "index" in s and "ULPs" in s)
    rows = text[head + 1: head + 5]
    assert rows[0].lstrip().startswith("* (1, 2)") and all(not r.lstrip().startswith("*") for r in rows[1:])
    assert [e.passed for e in r.worst] == [False, True, True, True]
    assert "components" not in str(r) and text[-2].startswith("bound: matmul: inputs bf16, accumulator fp32")
    full = r.explain()
    assert full.startswith(text[0]) and "components" in full and "detection power" in full


def test_verbose_shows_the_derivation(mm):
    A, B, out = mm
    with pytest.raises(AssertionError) as e:
        assert_matmul_close(_wrong(out), A, B, acc="fp32", verbose=True)
    assert "components" in str(e.value) and "detection power" in str(e.value)


def test_ulps_count_in_the_accumulator_format_for_simulate_output(mm):
    """simulate returns float64 holding FP32 values: the ULP column counts FP32 steps, not float64 ones."""
    A, B, out = mm
    assert out.dtype == np.float64
    bad = out.copy()
    bad[0, 0] = np.nextafter(np.nextafter(np.float32(bad[0, 0]), np.float32(np.inf)), np.float32(np.inf))
    r = check_matmul_close(bad, A, B, acc="fp32", show=48)
    assert r.ulp_format == FP32 and "ULPs (fp32)" in str(r)
    by_index = {e.index: e.ulps for e in r.worst}
    exact32 = no.exact_matmul(A, B, out="fp32")

    def key(v):  # FP32 values in order as integers
        i = int(np.float32(v).view(np.int32))
        return i if i >= 0 else -(i & 0x7FFFFFFF)

    for e in r.worst:  # FP32 steps between the kernel's value and the correctly rounded result
        assert e.ulps == key(bad[e.index]) - key(exact32[e.index])
    assert abs(by_index[(0, 0)]) < 2**12  # FP32 steps, not float64's (2^29 times as many)
    # a float64 value that FP32 cannot hold: ULPs stay float64's (the claim would be false otherwise)
    bad[0, 0] = out[0, 0] + 2.0**-40
    assert check_matmul_close(bad, A, B, acc="fp32").ulp_format == FP64
    # an explicit out= decides the units
    assert check_matmul_close(out, A, B, acc="fp32", out="bf16").ulp_format == BF16


def test_the_quantized_checks_pass_on_every_quantize_parameter():
    from numoracle.quant.checks.check import _QUANTIZE_KEYS

    q = set(inspect.signature(no.quantize).parameters) - {"x"}
    assert set(_QUANTIZE_KEYS) == q
    for fn in (no.check_quantized_close, no.assert_quantized_close):
        params = inspect.signature(fn).parameters
        assert q <= set(params) and all(params[k].default == inspect.signature(no.quantize).parameters[k].default
                                        for k in q - {"fmt"})
