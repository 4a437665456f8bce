"""Integer saturation is exact at every range end: ``np.clip`` in float32 rounds INT32's 2^31 - 1 up to
2^31, which the code mask wrapped to -2^31 (3e9 quantised to -2^31, 5e9 in uint32 to 0)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import numoracle as no
from numoracle.core.formats.format import INT32, INT64, UINT32, UINT64
from numoracle.quant.quantizer import _saturate_integral, quantize

_ROUND = {"rne": round, "rtz": math.trunc, "ru": math.ceil, "rd": math.floor}


def _expected(x: np.ndarray, s: np.ndarray, lo: int, hi: int, compute: str, rounding: str) -> list[int]:
    """saturate(round(t)) with t = x / s rounded in compute (scales here are powers of two: t = fl(x) / s)."""
    dt = np.float32 if compute == "fp32" else np.float64
    t = [Fraction(float(dt(v))) / Fraction(float(d)) for v, d in zip(x.ravel(), s.ravel())]
    return [min(max(_ROUND[rounding](v), lo), hi) for v in t]


def _ints(q) -> list[int]:
    return [int(v) for v in no.decode(q.codes, q.fmt).ravel()]


I32 = 2 ** 31
U32 = 2 ** 32
# (fmt, clip, lo, hi, values): past, at and just inside each end (exact float64 values; the fp32 compute
# rounds the ones FP32 cannot hold, and the expected codes model that rounding)
CASES = [
    ("int32", "narrow", -(I32 - 1), I32 - 1,
     [3e9, -3e9, I32, I32 - 1, I32 - 2, I32 - 128, -I32, -(I32 - 1), -(I32 - 2), -I32 - 256, 2.0 ** 40, -2.0 ** 40]),
    ("int32", "full", -I32, I32 - 1,
     [3e9, -3e9, I32, I32 - 1, I32 - 128, -I32, -(I32 - 1), -I32 - 1, -I32 - 256, 2.0 ** 40, -2.0 ** 40]),
    ("uint32", "full", 0, U32 - 1,
     [5e9, U32, U32 - 1, U32 - 2, U32 - 256, -1.0, -0.5, -0.0, 0.0, -3e9, 2.0 ** 40]),
]


@pytest.mark.parametrize("rounding", ["rne", "rtz", "ru"])
@pytest.mark.parametrize("compute", ["fp32", "fp64"])
@pytest.mark.parametrize("fmt,clip,lo,hi,vals", CASES)
def test_integer_saturation_is_exact_at_the_range_ends(fmt, clip, lo, hi, vals, compute, rounding):
    x = np.array(vals, np.float64)
    q = quantize(x, fmt, scale=1.0, scale_fmt="fp64", clip=clip, compute=compute, rounding=rounding)
    want = _expected(x, np.ones_like(x), lo, hi, compute, rounding)
    assert _ints(q) == want
    r = np.array([_ROUND[rounding](Fraction(float(t))) for t in q.scaled.ravel()], dtype=object)
    assert q.clipped.tolist() == [bool(v > hi or v < lo) for v in r]


def test_issue_examples():
    assert _ints(quantize(np.float32([3e9]), "int32", scale=1.0)) == [I32 - 1]
    assert _ints(quantize(np.float32([5e9]), "uint32", scale=1.0)) == [U32 - 1]
    assert _ints(quantize(np.float32([-3e9]), "int32", scale=1.0)) == [-(I32 - 1)]  # narrow range
    assert _ints(quantize(np.float32([-3e9]), "int32", scale=1.0, clip="full")) == [-I32]
    q = quantize(np.float32([1.0, -1.0]), "int32", scale_fmt="fp64")  # absmax: saturates, never wraps
    assert all(v > 0 for v in _ints(q)[:1]) and all(v < 0 for v in _ints(q)[1:])


@pytest.mark.parametrize("gran,axis,scale", [
    ("channel", 0, np.array([1.0, 2.0])),
    (("group", 2), -1, np.array([[1.0, 4.0], [2.0, 0.5]])),
    (("block", (2, 2)), -1, np.array([[2.0, 1.0]])),
])
@pytest.mark.parametrize("compute", ["fp32", "fp64"])
def test_saturation_per_layout(gran, axis, scale, compute):
    x = np.array([[3e9, -3e9, 2.0 ** 31, -(2.0 ** 31)],
                  [5e9, -5e9, 2.0 ** 32 - 2, -(2.0 ** 32) + 2]])
    q = quantize(x, "int32", scale=scale, scale_fmt="fp64", granularity=gran, axis=axis, compute=compute)
    s = q.scale_per_element()
    assert _ints(q) == _expected(x, s, -(I32 - 1), I32 - 1, compute, "rne")
    assert max(_ints(q)) == I32 - 1 and min(_ints(q)) == -(I32 - 1)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("fmt,lo", [(INT64, -(2 ** 63)), (INT64, -(2 ** 63) + 1), (UINT64, 0),
                                    (INT32, -(2 ** 31) + 1), (UINT32, 0)])
def test_saturate_integral_64_bit_formats(fmt, lo, dt):
    """The element step's saturation itself is exact up to INT64 / UINT64 (quantize takes elements of at most
    32 bits; the helper does not rely on that)."""
    hi = fmt.max_value
    vals = [2.0 ** 64, 2.0 ** 63, -(2.0 ** 63), -(2.0 ** 64), 2.0 ** 62, -(2.0 ** 62), 2.0 ** 32, 2.0 ** 31,
            -(2.0 ** 31), 5.0, -5.0, -0.0, float(np.nextafter(dt(2.0 ** 63), dt(0))),
            float(np.nextafter(dt(2.0 ** 64), dt(0))), float(np.nextafter(dt(-(2.0 ** 63)), dt(0)))]
    v = np.array(vals, dt)
    codes = _saturate_integral(v, lo, hi, fmt)
    assert codes.dtype == np.dtype(fmt.code_dtype)
    want = [min(max(int(float(a)), lo), hi) for a in v]
    got = [int(c) for c in codes]
    assert got == [w & ((1 << fmt.bits) - 1) for w in want]
    assert [int(c) for c in _saturate_integral(np.array([np.nan], dt), lo, hi, fmt)] == [0]
