"""numoracle.testing.strategies: every draw satisfies its strategy's claim (checked with Fractions), boundary
weighting draws boundary values, shrinking reaches simple examples, and bad arguments fail at call time."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction as F

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis.errors import NoSuchExample

import numoracle as no
from numoracle.conformance.boundary import boundary_values, overflow_threshold
from numoracle.core import scalar as X
from numoracle.core.formats.interop import to_codes
from numoracle.formats import BF16, FP16, FP32, FP64
from numoracle.testing import strategies as nst

SET = settings(max_examples=30, derandomize=True, database=None, deadline=None,
               suppress_health_check=[HealthCheck.too_slow])
FIND = settings(max_examples=1000, derandomize=True, database=None, deadline=None)


def _exact(x, fmt=None):
    """Exact value of a numpy scalar (by its code) or a code of ``fmt``."""
    if fmt is None:
        c, fmt = to_codes(np.asarray(x))
        code = int(np.asarray(c).reshape(-1)[0])
    else:
        code = int(x)
    v = X.value_of(code, fmt)
    return F(v) if isinstance(v, int) else v, code, fmt


# ---- codes / values ------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2fnuz", "e8m0fnu", "fp4_e2m1fn", "int8",
                                 "uint4", "fp64", "uint64"])
def test_codes_respect_their_flags(fmt):
    f = no.formats.format_of(fmt)

    @SET
    @given(nst.codes(f), nst.codes(f, finite=True), nst.codes(f, finite=True, allow_subnormal=False,
                                                              allow_negative=False))
    def check(any_code, fin, plain):
        for c in (any_code, fin, plain):
            assert 0 <= c < (1 << f.bits)
        v = X.value_of(fin, f)
        assert not isinstance(v, X.Special) or v.kind == "zero"
        w = X.value_of(plain, f)
        assert not X.is_subnormal_code(plain, f)
        assert not isinstance(w, X.Special) and w >= 0

    check()


@pytest.mark.parametrize("fmt", ["fp32", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp16"])
def test_non_finite_codes(fmt):
    f = no.formats.format_of(fmt)

    @SET
    @given(nst.codes(f, finite=False), nst.codes(f, finite=False, allow_nan=False) if f.has_inf else nst.codes(f))
    def check(c, c_inf):
        v = X.value_of(c, f)
        assert isinstance(v, X.Special) and v.kind in ("inf", "nan")
        if f.has_inf:
            assert X.value_of(c_inf, f) in (X.POS_INF, X.NEG_INF)

    check()


@pytest.mark.parametrize("fmt,dtype", [("fp16", np.float16), ("fp32", np.float32), ("bf16", ml_dtypes.bfloat16),
                                       ("fp8_e4m3fn", ml_dtypes.float8_e4m3fn), ("int8", np.int8),
                                       ("e8m0fnu", ml_dtypes.float8_e8m0fnu), ("fp4_e2m1fn", ml_dtypes.float4_e2m1fn),
                                       ("int4", np.int64), ("tf32", np.float32)])
def test_values_have_the_native_dtype(fmt, dtype):
    f = no.formats.format_of(fmt)

    @SET
    @given(nst.values(f), nst.value_arrays(f, (2, 3)), nst.code_arrays(f, 4))
    def check(v, arr, carr):
        assert np.asarray(v).dtype == np.dtype(dtype)
        assert arr.shape == (2, 3) and arr.dtype == np.dtype(dtype)
        assert carr.shape == (4,) and carr.dtype == np.dtype(f.code_dtype) and int(carr.max()) < (1 << f.bits)
        if f.name == "int4":
            assert -8 <= int(v) <= 7

    check()


def test_values_round_trip_to_the_same_code():
    @SET
    @given(nst.codes("bf16", allow_nan=False))
    def check(c):
        v = nst._scalar(c, BF16)
        assert int(to_codes(np.asarray(v))[0]) == c

    check()


def test_arrays_of_other_strategies():
    @SET
    @given(nst.value_arrays("fp32", (2, 2), elements=nst.ties("fp32", "fp16")),
           nst.code_arrays("fp16", 3, elements=nst.subnormals("fp16", as_codes=True)))
    def check(t, sub):
        assert t.dtype == np.float32 and t.shape == (2, 2)
        for x in t.ravel():
            nb = X.neighbours(F(float(x)), FP16) if abs(float(x)) <= 65504 else None
            assert nb is None or F(float(x)) == (nb.lower.value + nb.upper.value) / 2 != nb.lower.value
        assert all(X.is_subnormal_code(int(c), FP16) for c in sub)

    check()
    with pytest.raises(TypeError, match="either elements"):
        nst.code_arrays("fp16", 3, elements=nst.codes("fp16"), finite=True)


# ---- ties ----------------------------------------------------------------------------------------------
TIE_PAIRS = [("fp32", "fp16"), ("fp32", "bf16"), ("fp64", "bf16"), ("int32", "fp16"), ("fp16", "fp8_e4m3fn"),
             ("fp32", "int8"), ("bf16", "e8m0fnu"), ("fp16", "fp8_e5m2"), ("int64", "fp32"), ("fp32", "uint8"),
             ("fp8_e5m2", "fp4_e2m1fn"), ("bf16", "fp16"), ("fp8_e4m3fn", "fp8_e5m2")]


def _max_and_ulp(d):
    if d.is_integer:
        return F(d.max_value), F(d.min_value), F(1)
    top = F(2) ** (d.emax - d.man_bits)
    return d.max_finite, (-d.max_finite if d.signed else F(0)), top


@pytest.mark.parametrize("mode", ["rne", "rna"])
@pytest.mark.parametrize("src,dst", TIE_PAIRS, ids=str)
def test_ties_are_exact_midpoints(src, dst, mode):
    d = no.formats.format_of(dst)
    mx, mn, top = _max_and_ulp(d)

    @SET
    @given(nst.ties(src, dst, rounding=mode))
    def check(x):
        v, code, s = _exact(x)
        assert s == no.formats.format_of(src) and isinstance(v, F)
        if v > mx:  # the top tie: max finite and the next value with an unbounded exponent
            assert v == mx + top / 2
        elif v < mn:
            assert v == mn - top / 2
        else:
            nb = X.neighbours(v, d)
            assert nb.lower.value < v < nb.upper.value and v == (nb.lower.value + nb.upper.value) / 2

    check()


@pytest.mark.parametrize("mode", ["rtz", "ru", "rto"])
@pytest.mark.parametrize("src,dst", [("fp32", "fp16"), ("fp16", "fp32"), ("fp32", "int8"), ("int16", "fp8_e4m3fn")],
                         ids=str)
def test_directed_ties_are_destination_values(src, dst, mode):
    d = no.formats.format_of(dst)

    @SET
    @given(nst.ties(src, dst, rounding=mode, as_codes=True))
    def check(code):
        v, _, _ = _exact(code, no.formats.format_of(src))
        _, fl = X.round_value(v, d, rounding=mode, flags=True)
        assert not fl & no.formats.Flags.INEXACT and v != 0

    check()


def test_ties_reach_every_kind_of_tie():
    """find() reaches the subnormal, overflow and negative ties through the segments and the boundary pool."""
    d = FP16
    assert find(nst.ties("fp32", d), lambda x: 0 < x < 2.0**-14, settings=FIND) > 0
    assert float(find(nst.ties("fp32", d), lambda x: x == 65520.0, settings=FIND)) == 65520.0
    assert float(find(nst.ties("fp32", d), lambda x: x < -60000, settings=FIND)) < -60000
    assert float(find(nst.ties("fp32", "int8"), lambda x: x == -128.5, settings=FIND)) == -128.5
    # the uniform segments alone still reach the subnormal ties
    assert find(nst.ties("fp32", d, boundary_weight=0), lambda x: 0 < x < 2.0**-14, settings=FIND) > 0


# ---- near overflow, subnormals ---------------------------------------------------------------------------
@pytest.mark.parametrize("dst,src,mode", [("fp16", None, "rne"), ("fp8_e4m3fn", None, "rne"), ("bf16", "fp64", "rne"),
                                          ("int8", None, "rne"), ("e8m0fnu", None, "rne"), ("fp32", None, "rtz"),
                                          ("fp8_e5m2", "fp16", "ru"), ("uint8", "fp32", "rne")], ids=str)
def test_near_overflow_within_a_few_ulps(dst, src, mode):
    d = no.formats.format_of(dst)
    unit = _max_and_ulp(d)[2]

    @SET
    @given(nst.near_overflow(dst, src=src, rounding=mode, ulps=3))
    def check(x):
        v, _, s = _exact(x)
        assert s == (no.formats.format_of(src) if src else (FP32 if d.bits < 32 else FP64))
        v = F(0) if v is X.NEG_ZERO else v   # (an unsigned integer's lower threshold, -1/2, has -0 within 3 ulps)
        ts = [s * overflow_threshold(d, mode, s)[0] for s in ((1, -1) if d.signed or d.is_integer else (1,))]
        assert min(abs(v - t) for t in ts) <= 3 * unit, (v, ts)

    check()


def test_near_overflow_draws_the_threshold_and_its_neighbours():
    for want in (65519.99609375, 65520.0, 65520.00390625, -65520.0):
        assert float(find(nst.near_overflow("fp16"), lambda x, w=want: float(x) == w, settings=FIND)) == want


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2fnuz", "fp4_e2m1fn", "fp32"])
def test_subnormals_are_subnormal(fmt):
    f = no.formats.format_of(fmt)

    @SET
    @given(nst.subnormals(f), nst.subnormals(f, allow_negative=False, as_codes=True))
    def check(x, code):
        v, c, _ = _exact(x)
        assert X.is_subnormal_code(c, f) and 0 < abs(v) < f.min_normal
        assert X.is_subnormal_code(code, f) and X.value_of(code, f) > 0

    check()


# ---- boundary weighting and shrinking ------------------------------------------------------------------
def _draws(strategy, n: int) -> list:
    seen: list = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None)
    @given(strategy)
    def draw(c):
        seen.append(c)

    draw()
    return seen


def test_boundary_weighting_draws_boundary_values():
    fp32_max = 0x7F7FFFFF
    thr = int(np.float32(65520).view(np.uint32))  # the FP16 overflow threshold, as a float32 code
    # about half the draws come from the boundary set (which holds these codes); which boundary codes a
    # run draws depends on hypothesis's seed, so the test asks for the share, not for one given code
    for against, code in ((None, fp32_max), ("fp16", thr)):
        pool = set(boundary_values("fp32", against or "fp32", intermediates=()).codes.tolist())
        assert code in pool
        seen = _draws(nst.codes("fp32", against=against), 600)
        assert 0.2 < np.mean([c in pool for c in seen]) < 0.8, against
    with pytest.raises(NoSuchExample):  # uniform draws alone practically never hit one given code of 2^32
        find(nst.codes("fp32", boundary_weight=0), lambda c: c == thr, settings=FIND)
    drawn = _draws(nst.codes("fp16", against="fp8_e4m3fn"), 400)
    pool = set(boundary_values("fp16", "fp8_e4m3fn", intermediates=()).codes.tolist())
    share = np.mean([c in pool for c in drawn])
    assert 0.2 < share < 0.8, share  # about half boundary, half uniform


def test_shrinking_reaches_simple_examples():
    # uniform draws shrink to the smallest magnitude that fails: the float32 right after 1000
    v = find(nst.values("fp32", boundary_weight=0), lambda x: x > 1000, settings=FIND)
    assert v == np.nextafter(np.float32(1000), np.float32(np.inf))
    # with boundary weighting, no larger than the simplest boundary value that fails
    pool = [F(x) for x in boundary_values("fp32", "fp32", intermediates=()).values() if isinstance(x, F)]
    got = F(float(find(nst.values("fp32"), lambda x: x > 1000, settings=FIND)))
    assert got <= min(p for p in pool if p > 1000)
    assert find(nst.codes("int16"), lambda c: c != 0, settings=FIND) == 1
    assert float(find(nst.ties("fp64", "bf16"), lambda x: x > 1, settings=FIND)) == 1 + 2.0**-8
    arr = find(nst.value_arrays("bf16", 3), lambda a: bool((a.astype(np.float32) > 1).any()), settings=FIND)
    assert sorted(arr.astype(np.float32).tolist())[:2] == [0.0, 0.0]


# ---- argument checks -----------------------------------------------------------------------------------
def test_arguments_are_checked_at_call_time():
    with pytest.raises(ValueError, match="unknown format"):
        nst.codes("fp17")
    with pytest.raises(ValueError, match="unknown format"):
        nst.ties("fp32", "fp99")
    with pytest.raises(ValueError, match="cannot represent any tie"):
        nst.ties("int32", "int8")
    with pytest.raises(ValueError, match="cannot represent any tie"):
        nst.ties("fp8_e4m3fn", "fp16")
    with pytest.raises(ValueError, match="rounding mode"):
        nst.ties("fp32", "fp16", rounding="nearest-ish")
    with pytest.raises(ValueError, match="no subnormal"):
        nst.subnormals("e8m0fnu")
    with pytest.raises(ValueError, match="no subnormal"):
        nst.subnormals("int8")
    with pytest.raises(ValueError, match="holds no value"):
        nst.near_overflow("fp64", src="fp32")
    with pytest.raises(ValueError, match="contradicts"):
        nst.codes("fp16", finite=True, allow_nan=True)
    with pytest.raises(ValueError, match="has no NaN"):
        nst.codes("fp4_e2m1fn", allow_nan=True)
    with pytest.raises(ValueError, match="no code"):
        nst.codes("int8", finite=False)
    with pytest.raises(ValueError, match="boundary_weight"):
        nst.values("fp16", boundary_weight=2)
    with pytest.raises(TypeError, match="finite"):
        nst.codes("fp16", finite="yes")
    with pytest.raises(ValueError, match="ulps"):
        nst.near_overflow("fp16", ulps=-1)


def test_import_numoracle_leaves_hypothesis_alone():
    code = ("import sys, numoracle, numoracle.conformance.boundary; assert 'hypothesis' not in sys.modules; "
            "import numoracle.testing.strategies; assert 'hypothesis' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("src,dst,mode", [("fp8_e4m3fn", "fp4_e2m1fn", "rne"), ("int8", "fp4_e2m1fn", "rne"),
                                          ("fp8_e4m3fn", "int4", "rne"), ("fp8_e5m2", "fp6_e2m3fn", "rne"),
                                          ("fp8_e4m3fn", "fp6_e3m2fn", "rtz"), ("uint8", "e8m0fnu", "rne")], ids=str)
def test_tie_segments_are_complete(src, dst, mode):
    """Every source value at a destination boundary, found by brute force over all 256 source codes, is
    in the strategy's segments, and nothing else is."""
    from numoracle.testing.strategies import _segments

    s, d = no.formats.format_of(src), no.formats.format_of(dst)
    nearest = mode in ("rne", "rna")
    got = sorted(g.sign * (g.start + i * g.step) for g in _segments(s, d, nearest) for i in range(g.n))
    mx, mn, top = _max_and_ulp(d)
    want = set()
    for code in range(256):
        v = X.value_of(code, s)
        if isinstance(v, X.Special):
            continue
        v = F(v)
        if not nearest:
            if v != 0 and not X.round_value(v, d, rounding="rtz", overflow="saturate", flags=True)[1]:
                want.add(v)
        elif v == mx + top / 2 or v == mn - top / 2 and (d.signed or d.is_integer):
            want.add(v)
        elif mn <= v <= mx:
            nb = X.neighbours(v, d)
            lo, hi = nb.lower, nb.upper
            if lo and hi and lo.value != hi.value and v == (lo.value + hi.value) / 2:
                want.add(v)
    assert got == sorted(want) and len(got) == len(set(got))


# ---- value strategies as elements, as hypothesis.extra.numpy takes them ----------------------------------
def test_value_arrays_take_value_strategies():
    from hypothesis import strategies as st

    @SET
    @given(nst.value_arrays("fp16", (3, 2), elements=st.floats(-10, 10)),
           nst.value_arrays("int8", 4, elements=st.integers(-128, 127)),
           nst.value_arrays("bf16", 5, elements=nst.values("bf16", finite=True)))
    def check(h, i, b):
        assert h.dtype == np.float16 and h.shape == (3, 2) and np.all(np.abs(h) <= 10)
        assert i.dtype == np.int8 and i.shape == (4,)
        assert b.dtype == ml_dtypes.bfloat16 and np.all(np.isfinite(b.astype(np.float32)))

    check()


def test_value_arrays_round_values_into_the_format():
    from hypothesis import strategies as st

    a = find(nst.value_arrays("fp16", 1, elements=st.just(0.1)), lambda a: True, settings=FIND)
    assert a.dtype == np.float16 and a[0] == np.float16(0.1)  # round to nearest even, as numpy's cast
    b = find(nst.value_arrays("bf16", 1, elements=st.just(1 + 2**-8)), lambda a: True, settings=FIND)
    assert float(b[0]) == 1.0  # the tie goes to even


def test_value_arrays_refuse_what_the_format_cannot_hold():
    from hypothesis import strategies as st
    from hypothesis.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="fp16 cannot hold"):
        find(nst.value_arrays("fp16", 2, elements=st.just(1e6)), lambda a: True, settings=FIND)
    with pytest.raises(InvalidArgument, match="fp8_e4m3fn cannot hold"):
        find(nst.value_arrays("fp8_e4m3fn", 2, elements=st.just(float("inf"))), lambda a: True, settings=FIND)
    with pytest.raises(InvalidArgument, match="not a number"):
        find(nst.value_arrays("fp16", 2, elements=st.just("1.0")), lambda a: True, settings=FIND)


def _falsifying(strategy) -> str:
    @settings(database=None, max_examples=50, derandomize=True)
    @given(strategy)
    def t(x):
        raise AssertionError("always fails")

    with pytest.raises(AssertionError) as e:
        t()
    # hypothesis' note: "Falsifying example: t(x=...)" (older releases) or "Failing test case: t(x=...)"
    note = next(n for n in getattr(e.value, "__notes__", []) if n.startswith(("Falsifying example",
                                                                                "Failing test case")))
    line = note.split("x=", 1)[1].split("\n", 1)[0]
    return line.split(",  #")[0].rstrip(",").strip()


@pytest.mark.parametrize("strategy, dtype", [
    (nst.values("fp16"), np.float16), (nst.values("bf16"), ml_dtypes.bfloat16),
    (nst.values("fp8_e4m3fn"), ml_dtypes.float8_e4m3fn), (nst.ties("fp32", "fp16"), np.float32),
    (nst.values("int8"), np.int8), (nst.codes("fp16"), int),
], ids=["fp16", "bf16", "e4m3fn", "ties", "int8", "codes"])
def test_failing_examples_paste_into_example(strategy, dtype):
    text = _falsifying(strategy)
    assert "_scalar" not in text and "lambda" not in text, text
    value = eval(text, {"np": np, "ml_dtypes": ml_dtypes})  # what a user pastes into @example(x=...)
    assert type(value) is (dtype if dtype is int else np.dtype(dtype).type), text


def test_ml_dtypes_nan_prints_its_bits():
    from hypothesis.vendor.pretty import pretty

    nan = np.array([0xFFC1], np.uint16).view(ml_dtypes.bfloat16)[0]
    text = pretty(nan)
    assert text == "np.uint16(0xffc1).view(ml_dtypes.bfloat16)"
    back = eval(text, {"np": np, "ml_dtypes": ml_dtypes})
    assert np.array([back]).view(np.uint16)[0] == 0xFFC1
