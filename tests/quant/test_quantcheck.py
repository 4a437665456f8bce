"""assert_quantized_close: exact codes, tie and scale-flip outliers, budgets and the failure report."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from numoracle.core.engine.codekeys import from_key, to_key
from numoracle.core.engine.convert import cast
from numoracle.core.formats.format import format_of
from numoracle.quant.checks.check import QuantizedMismatch, assert_quantized_close, check_quantized_close
from numoracle.quant.quantizer import quantize

CONFIGS = [
    dict(fmt="int8", granularity="channel", axis=0),
    dict(fmt="int4", symmetric=False, granularity=("group", 16)),
    dict(fmt="uint8", symmetric=False),
    dict(fmt="fp8_e4m3fn", granularity=("block", 32)),
    dict(fmt="fp8_e5m2", scale_rule="mx"),
    dict(fmt="fp4_e2m1fn", scale_rule="mx"),
    dict(fmt="fp4_e2m1fn", scale_rule="nvfp4"),
]


def _x(seed=0, shape=(8, 64)):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _shift(codes, fmt, where, d):
    """Codes moved by d in ordered-code space at the flat indices ``where``."""
    f = format_of(fmt)
    c = np.asarray(codes).astype(np.uint64).copy()
    k = to_key(c.ravel()[where], f) + d
    c.ravel()[where] = from_key(k, f)
    return c.astype(np.dtype(f.code_dtype))


@pytest.mark.parametrize("kw", CONFIGS, ids=lambda k: "-".join(map(str, k.values())))
def test_exact_codes_pass_in_every_form(kw):
    x = _x(1)
    q = quantize(x, **kw)
    r = assert_quantized_close(q.codes, x, **kw)
    assert r.passed and r.counts["exact"] == x.size and r.n_outliers == 0 and r.mode == "codes"
    assert 0.5 < r.max_error_ratio <= 1.0  # the margin against the quantisation error bound, printed on pass
    assert assert_quantized_close(q, x, **kw).passed  # a Quantized: its scales are compared too
    assert assert_quantized_close(q.dequantize(), x, **kw).mode == "values"  # exact float64 values
    assert assert_quantized_close(q.dequantize(out="fp32").view(np.float32), x, **kw).passed
    assert assert_quantized_close(q.dequantize(out="bf16").view(ml_dtypes.bfloat16), x, **kw).passed
    if q.fmt.name in ("fp8_e4m3fn", "fp8_e5m2", "fp4_e2m1fn"):
        native = q.codes.view(getattr(ml_dtypes, {"fp8_e4m3fn": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
                                                  "fp4_e2m1fn": "float4_e2m1fn"}[q.fmt.name]))
        assert assert_quantized_close(native, x, **kw).passed
    if q.fmt.is_integer:  # signed integer values in a wider native array (int4 in int8, uint8 in int16)
        vals = q.values().astype(np.int16 if q.fmt.name == "uint8" else np.int8)
        assert assert_quantized_close(vals, x, **kw).passed


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    x = _x(2)
    for kw, dt in ((dict(fmt="int8"), torch.int8), (dict(fmt="fp8_e4m3fn", scale_rule="mx"), torch.float8_e4m3fn)):
        q = quantize(torch.from_numpy(x), **kw)
        t = torch.from_numpy(q.codes.view(np.int8)) if dt is torch.int8 else \
            torch.from_numpy(q.codes).view(torch.float8_e4m3fn)
        assert assert_quantized_close(t, torch.from_numpy(x), **kw).passed


def _tie_data():
    s = 2.0**-3  # amax 127 s: s = 2^-3 exactly, every x / s below is an exact tie k + 1/2
    k = np.arange(-60, 60)
    return np.concatenate([[127 * s], (k + 0.5) * s]).astype(np.float32)


def test_planted_tie_flip_within_and_beyond_budget():
    x = _tie_data()
    q = quantize(x, "int8")
    assert q.ties[1:].all()
    flipped = _shift(q.codes, "int8", [5, 9], [+1, -1])  # the other neighbour of a tie
    r = assert_quantized_close(flipped, x, fmt="int8", allow_outliers=2)
    assert r.passed and r.counts["tie"] == 2 and r.counts["mismatch"] == 0
    assert sorted(e.index for e in r.worst) == [(5,), (9,)]
    assert all(e.cls == "tie" and abs(e.distance) == 1 for e in r.worst)
    assert "2 tie" in str(r) and "outliers 2 of 2 allowed" in str(r)
    with pytest.raises(QuantizedMismatch) as ei:
        assert_quantized_close(flipped, x, fmt="int8", allow_outliers=1)
    msg = str(ei.value)
    assert msg.startswith("Quantized mismatch (2 outliers exceed the budget of 1)")
    assert ei.value.report.counts["tie"] == 2 and isinstance(ei.value, AssertionError)


def test_round_half_away_kernel_against_rne():
    # a kernel rounding ties away from zero differs from RNE at every tie with an even lower neighbour
    x = _tie_data()
    rna = quantize(x, "int8", rounding="rna").codes
    n = int(np.sum(rna != quantize(x, "int8").codes))
    assert n > 40
    r = assert_quantized_close(rna, x, fmt="int8", allow_outliers=n)
    assert r.counts["tie"] == n
    with pytest.raises(AssertionError, match=f"{n} outliers exceed the budget of {n - 1}"):
        assert_quantized_close(rna, x, fmt="int8", allow_outliers=n - 1)


def test_non_tie_off_by_one_fails_with_the_worst_elements():
    x = _x(3, (4, 32))
    kw = dict(fmt="fp8_e4m3fn", granularity=("block", 32))
    q = quantize(x, **kw)
    i = int(np.flatnonzero(~q.ties.ravel() & (np.abs(x.ravel()) > 0.1))[0])
    bad = _shift(q.codes, "fp8_e4m3fn", [i, i + 1], [+1, -3])
    with pytest.raises(QuantizedMismatch) as ei:
        assert_quantized_close(bad, x, allow_outliers=10, **kw)
    rep, msg = ei.value.report, str(ei.value)
    assert rep.counts["mismatch"] == 2 and not rep.passed
    lines = msg.splitlines()
    assert lines[0].startswith("Quantized mismatch (2 element(s) no tie or scale flip explains)")
    assert "index" in lines[2] and "expected" in lines[2] and "distance" in lines[2]
    idx = tuple(int(v) for v in np.unravel_index(i + 1, x.shape))
    worst = lines[3]  # the largest distance first
    assert str(idx) in worst and "-3" in worst and "mismatch" in worst
    assert f"0x{int(q.codes.ravel()[i + 1]):02x}" in worst and f"0x{int(bad.ravel()[i + 1]):02x}" in worst
    assert repr(float(x.ravel()[i + 1])) in worst and repr(float(q.scaled.ravel()[i + 1])) in worst
    assert rep.max_error_ratio > 1  # the planted codes also break the quantisation error bound


def test_scale_off_by_one_ulp():
    x = np.stack([_tie_data() * np.float32(2.0**k) for k in range(4)])  # exact ties, power-of-two scales
    kw = dict(fmt="int8", granularity="channel", axis=0)
    q = quantize(x, **kw)
    sc = q.scales.astype(np.float32).copy()
    sc[1, 0] = np.nextafter(sc[1, 0], np.float32(np.inf))  # a kernel whose amax/127 rounded up
    act = quantize(x, "int8", granularity="channel", axis=0, scale=sc.astype(np.float64))
    n = int(np.sum(act.codes != q.codes))
    assert n > 20  # t = x / s' falls just below each tie: every tie that RNE rounded up flips
    r = check_quantized_close(act.codes, x, actual_scales=sc, allow_outliers=n, **kw)
    assert r.passed and r.scales_off_by_one == 1 and r.counts["scale off by one ULP"] == n
    assert "scales: 1 of 4 off by one ULP of fp32" in r.summary()
    assert assert_quantized_close(act, x, allow_outliers=n, **kw).scales_off_by_one == 1  # a Quantized
    sc2 = sc.copy()
    sc2[2, 0] = np.nextafter(np.nextafter(sc2[2, 0], np.float32(0)), np.float32(0))
    with pytest.raises(AssertionError, match="1 scale\\(s\\) off by more than one ULP"):
        assert_quantized_close(act.codes, x, actual_scales=sc2, allow_outliers=x.size, **kw)
    with pytest.raises(AssertionError, match="outliers exceed the budget"):
        assert_quantized_close(act.codes, x, actual_scales=sc, allow_outliers=n - 1, **kw)
    # MX: an E8M0 scale one ULP up halves every code of its block; the requantised codes are accepted
    x = _x(4, (4, 64))
    kw = dict(fmt="fp8_e4m3fn", scale_rule="mx")
    q = quantize(x, **kw)
    e8 = q.scale_codes.copy()
    e8[0, 1] += 1
    act = quantize(x, "fp8_e4m3fn", granularity=("block", 32), scale_fmt="e8m0fnu",
                   scale=cast(e8, "fp64", src="e8m0fnu").view(np.float64))
    n = int(np.sum(act.codes != q.codes))
    assert n > 20
    r = assert_quantized_close(act.codes, x, actual_scales=e8, allow_outliers=n, **kw)
    assert r.counts["scale off by one ULP"] == n and r.counts["mismatch"] == 0


def test_values_mode_mismatch_and_specials():
    x = _x(5, (2, 32))
    kw = dict(fmt="int8")
    q = quantize(x, **kw)
    v = q.dequantize().astype(np.float32)
    v[0, 3] *= np.float32(1.01)  # no code gives this value
    with pytest.raises(QuantizedMismatch) as ei:
        assert_quantized_close(v, x, **kw)
    assert ei.value.report.counts["mismatch"] == 1 and "(0, 3)" in str(ei.value)
    # NaN propagates (both NaN: exact); the other signed zero is accepted as an equal value
    y = np.array([[np.nan] + [0.0] * 31, [-1e-9] + [1.0] * 31], np.float32)
    kw = dict(fmt="fp8_e4m3fn", scale_rule="mx")
    q = quantize(y, **kw)
    c = q.codes.copy()
    assert c[1, 0] == 0x80  # -0
    c[1, 0] = 0
    r = assert_quantized_close(c, y, **kw)
    assert r.signed_zeros == 1 and r.counts["exact"] == y.size and "other signed zero" in str(r)
    assert (q.codes[0] == 0x7F).all()  # the NaN's block has a NaN scale: every code of it is NaN
    c[1, 5] = 0x7F  # NaN where a number is expected
    assert check_quantized_close(c, y, **kw).counts["mismatch"] == 1


def test_bad_inputs():
    x = _x(6, (4, 32))
    q = quantize(x, "int8")
    with pytest.raises(ValueError, match=r"actual has shape \(4, 31\), but x has shape \(4, 32\)"):
        assert_quantized_close(q.codes[:, :31], x, fmt="int8")
    with pytest.raises(TypeError, match="float8_e5m2|fp8_e5m2"):
        assert_quantized_close(q.codes.view(ml_dtypes.float8_e5m2), x, fmt="fp8_e4m3fn")
    with pytest.raises(ValueError, match="outside int4's range"):
        assert_quantized_close(q.values().astype(np.int8), x, fmt="int4")
    with pytest.raises(ValueError, match="beyond the 4 bits"):
        assert_quantized_close(q.codes, x, fmt="int4")
    with pytest.raises(TypeError, match="fmt="):
        assert_quantized_close(q.codes, x)
    with pytest.raises(ValueError, match="allow_outliers"):
        assert_quantized_close(q.codes, x, fmt="int8", allow_outliers=-1)
    with pytest.raises(ValueError, match="actual_scales has shape"):
        assert_quantized_close(q.codes, x, fmt="int8", actual_scales=np.ones(3, np.float32))
    with pytest.raises(TypeError, match="quantised to int8"):
        assert_quantized_close(q, x, fmt="int4")
    assert math.isfinite(assert_quantized_close(q.codes, x, fmt="int8").max_error_ratio)


def test_zero_points_that_differ_fail_and_say_so():
    import dataclasses

    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    q = quantize(x, "uint8", symmetric=False)
    r = check_quantized_close(dataclasses.replace(q, zero_points=q.zero_points + 1), x, fmt="uint8", symmetric=False)
    assert not r.passed and r.zero_points_differ and r.scales_mismatch == 0
    assert r.summary().startswith("Quantized mismatch (zero points differ)")


def test_nan_where_finite_expected_is_reported_not_a_ratio_of_one():
    """NaN elements used to be skipped by the error ratio, which then read like a pass ("bound 1")."""
    x = _x(7, (4, 32))
    kw = dict(fmt="fp8_e4m3fn", granularity=("block", 32))
    q = quantize(x, **kw)
    c = q.codes.copy()
    c[0, 3] = c[1, 5] = c[2, 7] = 0x7F  # NaN codes where finite ones are expected
    c[3, 1] = _shift(q.codes, kw["fmt"], [3 * 32 + 1], 1).ravel()[3 * 32 + 1]  # a plain one-code mismatch
    with pytest.raises(QuantizedMismatch) as ei:
        assert_quantized_close(c, x, **kw)
    r, msg = ei.value.report, str(ei.value)
    assert r.nan_where_finite == 3 and r.inf_where_finite == 0 and r.finite_where_nan == 0
    assert r.max_error_ratio == math.inf
    head = msg.splitlines()[0]
    assert "3 NaN where finite expected" in head and "bound inf (NaN where finite expected)" in head
    assert "bound 1" not in msg
    assert "3 NaN where finite expected: first at (0, 3), (1, 5), (2, 7)" in msg
    lines = msg.splitlines()
    table = lines[next(i for i, ln in enumerate(lines) if ln.startswith("worst")) + 2:]  # after the header row
    assert [" ".join(ln.split()[:2]) for ln in table] == ["(0, 3)", "(1, 5)", "(2, 7)", "(3, 1)"]  # NaN first
    # dequantized values: NaN and inf where finite values are expected
    v = q.dequantize().astype(np.float32)
    v[1, 2], v[2, 9] = np.nan, -np.inf
    r = check_quantized_close(v, x, **kw)
    assert not r.passed and r.nan_where_finite == 1 and r.inf_where_finite == 1 and r.max_error_ratio == math.inf
    assert "1 NaN where finite expected; 1 inf where finite expected: first at (1, 2), (2, 9)" in str(r)


def test_finite_where_nan_expected_is_reported():
    """The other way round: the reference is NaN (a NaN input under nan='ignore', or a NaN-scaled block)
    and the actual holds a number there."""
    y = np.array([[np.nan] + [0.5] * 31, [0.25] * 32], np.float32)
    kw = dict(fmt="fp8_e4m3fn", granularity=("block", 32), nan="ignore")
    q = quantize(y, **kw)
    c = q.codes.copy()
    assert c[0, 0] == 0x7F
    c[0, 0] = 0x30
    r = check_quantized_close(c, y, **kw)
    assert not r.passed and r.finite_where_nan == 1 and r.nan_where_finite == 0
    assert "1 non-NaN where NaN expected" in r.summary() and "first at (0, 0)" in str(r)
    assert math.isfinite(r.max_error_ratio)  # no finite reference went non-finite: x there is NaN (no bound)
    kw = dict(fmt="int8", granularity=("block", 32))  # nan="propagate": the whole block dequantizes to NaN
    q = quantize(y, **kw)
    v = q.dequantize()
    assert np.isnan(v[0]).all()
    v[0, 4] = 0.5
    r = check_quantized_close(v, y, **kw)
    assert not r.passed and r.finite_where_nan == 1 and "first at (0, 4)" in str(r)
