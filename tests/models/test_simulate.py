"""simulate() and the accumulation orders: bit-exact against a slow step-by-step Fraction emulation.

The reference (tests/simref.py) is independent of numoracle.models.engine.simulation / accumulate / orders' schedules:
exact values, one ``exact.round_value`` per step, each order's association written out as recursion.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numoracle as no
from numoracle import orders as O
from numoracle.core import scalar as exact
from numoracle.core.formats.format import Format
from numoracle.core.formats.policy import Rounding
from numoracle.formats import BF16, FP8_E4M3FN, FP8_E5M2FNUZ, FP16, FP32, FP64, TF32
from numoracle.models.engine.accumulate import Arith
from numoracle.models.engine.simulation import simulate
from simref import assert_same, exact_add, frac, neg, reference, result_fmt, rnd, val

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True)
MODES = ["rne", "rna", "rtz", "ru", "rd", "rto"]


# ======================================================================================================
# Strategies
# ======================================================================================================

IN_FMTS = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
           "e5m2": ml_dtypes.float8_e5m2, "fp32": np.float32}
ACCS = [FP32, FP16, BF16, TF32]


@st.composite
def arrays(draw, shape, dtype, spread=None):
    """Values of dtype: a few binades around a random centre (cancellation, ties and carries happen)."""
    n = int(np.prod(shape))
    centre = draw(st.integers(-6, 6))
    spread = draw(st.integers(0, 12)) if spread is None else spread
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    mant = rng.integers(1, 16, n) * rng.choice([-1, 1], n)
    if draw(st.booleans()):
        mant = np.where(rng.random(n) < 0.15, 0, mant)
    v = mant * np.exp2(centre + rng.integers(-spread, spread + 1, n) - 3)
    return v.reshape(shape).astype(dtype)


@st.composite
def leaf_orders(draw):
    kind = draw(st.sampled_from(["seq", "pw", "blocked", "splitk"]))
    if kind == "seq":
        return O.Sequential()
    if kind == "pw":
        return O.Pairwise()
    inner = draw(st.sampled_from([O.Sequential(), O.Pairwise()]))
    outer = draw(st.sampled_from([O.Sequential(), O.Pairwise()]))
    if kind == "blocked":
        return O.Blocked(draw(st.integers(1, 9)), inner, outer, draw(st.sampled_from([None, FP32])))
    s = draw(st.integers(1, 6))
    perm = draw(st.permutations(list(range(s))))
    return O.SplitK(s, inner, outer, perm)


# ======================================================================================================
# Property tests: every order bit-exact against the reference
# ======================================================================================================

@SETTINGS
@given(st.data())
def test_orders_sum(data):
    acc = data.draw(st.sampled_from(ACCS))
    fin = data.draw(st.sampled_from(["fp16", "bf16", "e4m3", "fp32"]))
    mode = data.draw(st.sampled_from(MODES))
    fma = data.draw(st.booleans())
    order = data.draw(leaf_orders())
    rows, K = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 40))
    x = data.draw(arrays((rows, K), IN_FMTS[fin]))
    got = simulate("sum", x, acc=acc, order=order, rounding=mode, fma=fma, codes=True)
    assert got.shape == (rows,)
    assert_same(got, reference("sum", [x], order, acc, mode, fma), result_fmt(order, acc))


@SETTINGS
@given(st.data())
def test_orders_matmul(data):
    acc = data.draw(st.sampled_from(ACCS))
    fa = data.draw(st.sampled_from(["fp16", "bf16", "e4m3", "e5m2", "fp32"]))
    fb = data.draw(st.sampled_from(["e4m3", "bf16"]))
    mode = data.draw(st.sampled_from(MODES))
    fma = data.draw(st.booleans())
    order = data.draw(leaf_orders())
    m, n, K = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 24))
    a = data.draw(arrays((m, K), IN_FMTS[fa]))
    b = data.draw(arrays((K, n), IN_FMTS[fb]))
    got = simulate("matmul", a, b, acc=acc, order=order, rounding=mode, fma=fma, codes=True)
    assert got.shape == (m, n)
    assert_same(got, reference("matmul", [a, b], order, acc, mode, fma), result_fmt(order, acc))


@SETTINGS
@given(st.data())
def test_dot_ftz_and_out(data):
    acc = data.draw(st.sampled_from([FP16, BF16]))
    mode = data.draw(st.sampled_from(MODES))
    K = data.draw(st.integers(1, 30))
    a = data.draw(arrays((K,), np.float16, spread=14))
    b = data.draw(arrays((K,), np.float16, spread=14))
    order = data.draw(leaf_orders())
    got = simulate("dot", a, b, acc=acc, order=order, rounding=mode, ftz=True, codes=True)
    assert got.shape == ()
    ref = reference("dot", [a, b], order, acc, mode, True, ftz=True)
    assert_same(got, ref, result_fmt(order, acc))
    out = simulate("dot", a, b, acc=acc, order=order, rounding=mode, ftz=True, out=FP8_E4M3FN,
                   out_rounding="rtz", codes=True)
    assert int(out) == exact.round_value(ref[0], FP8_E4M3FN, rounding="rtz", ftz=True)


@st.composite
def block_fmas(draw):
    n = draw(st.integers(1, 8))
    F = draw(st.sampled_from([3, 6, 10, 13, 23, 24, 25]))
    out_bits = draw(st.sampled_from([None, 13, 6]))
    return O.BlockFMA(n, F, truncate=draw(st.booleans()), out_rounding=draw(st.sampled_from(["rtz", "rne", "ru"])),
                      out_frac_bits=out_bits, carry_bit=draw(st.booleans()))


@SETTINGS
@given(st.data())
def test_block_fma_matmul(data):
    o = data.draw(block_fmas())
    acc = data.draw(st.sampled_from([FP32, FP16]))
    fa = data.draw(st.sampled_from(["fp16", "bf16", "e4m3", "e5m2"]))
    m, n, K = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 20))
    a = data.draw(arrays((m, K), IN_FMTS[fa]))
    b = data.draw(arrays((K, n), IN_FMTS[fa]))
    got = simulate("matmul", a, b, acc=acc, order=o, codes=True)
    assert_same(got, reference("matmul", [a, b], o, acc), acc)


@SETTINGS
@given(st.data())
def test_block_fma_subnormal_inputs_and_sum(data):
    """Labels of subnormal inputs are their format's emin (K&M clamp), not their own exponent."""
    o = data.draw(block_fmas())
    K = data.draw(st.integers(1, 16))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    codes = rng.integers(0, 0x7F, (2, K)) | (rng.integers(0, 2, (2, K)) << 7)   # all finite E4M3 codes
    a = no.formats.as_native(codes[0].astype(np.uint8), FP8_E4M3FN)
    b = no.formats.as_native(codes[1].astype(np.uint8), FP8_E4M3FN)
    got = simulate("dot", a, b, acc=FP32, order=o, codes=True)
    assert_same(got, reference("dot", [a, b], o, FP32), FP32)
    x = data.draw(arrays((2, K), np.float16, spread=12))
    got = simulate("sum", x, acc=FP32, order=o, codes=True)
    assert_same(got, reference("sum", [x], o, FP32), FP32)


@SETTINGS
@given(st.data())
def test_promoted(data):
    every = data.draw(st.integers(1, 12))
    inner = data.draw(block_fmas())
    order = O.Promoted(every, O.BlockFMA(inner.n, inner.frac_bits, inner.truncate, "rtz", 13, inner.carry_bit,
                                         acc=FP32), FP32)
    K = data.draw(st.integers(1, 40))
    a = data.draw(arrays((2, K), ml_dtypes.float8_e4m3fn))
    b = data.draw(arrays((K, 2), ml_dtypes.float8_e5m2))
    got = simulate("matmul", a, b, order=order, codes=True)
    assert_same(got, reference("matmul", [a, b], order, FP32), FP32)


# ======================================================================================================
# Acceptance facts and hand-checked cases
# ======================================================================================================

def test_ones_saturate():
    assert float(simulate("sum", np.ones(4096, np.float16), acc="fp16")) == 2048.0
    assert float(simulate("sum", np.ones(4096, np.float16), acc="bf16")) == 256.0
    assert float(simulate("sum", np.ones(4096, np.float16), acc="fp32")) == 4096.0
    assert float(simulate("sum", np.ones(4096, np.float16), acc="fp16", order=O.Pairwise())) == 4096.0
    # 2048 + 1 is a tie in FP16; rtz and rne both stay, ru moves on by 2 each step
    assert float(simulate("sum", np.ones(2050, np.float16), acc="fp16", rounding="ru")) == 2052.0


def v100():
    return O.preset("v100", "fp16")


def test_block_fma_hand_checked():
    # V100: n = 4, F = 23, RZ. 1 + 3 * 2^-24: every 2^-24 is below the 2^-23 window and truncates away.
    a = np.array([1, 2**-12, 2**-12, 2**-12], np.float16)
    b = np.array([1, 2**-12, 2**-12, 2**-12], np.float16)
    assert float(simulate("dot", a, b, order=v100())) == 1.0
    # A100 keeps one more bit (F = 24): S = 2^24 + 3, normalised and truncated to FP32: 1 + 2^-23
    assert float(simulate("dot", a, b, order=O.preset("a100", "fp16"))) == 1 + 2**-23
    # a sequential FP32 FMA chain rounding up moves one FP32 ulp (2^-23) per 2^-24 term
    assert float(simulate("dot", a, b, acc="fp32", rounding="ru")) == 1 + 3 * 2**-23
    assert float(simulate("dot", a, b, acc="fp32")) == 1.0   # RNE: each 1 + 2^-24 is a tie to even


def test_block_fma_accumulator_dominates():
    # c = 1024 from the first block; the later terms 2^-14 are below the window 2^(10-23) and vanish
    x = np.array([1024] + [2**-14] * 7, np.float16)
    assert float(simulate("sum", x, order=v100())) == 1024.0
    # small terms first: a sequential FP32 sum keeps them (7 * 2^-14, then one rounding: 1024 + 2^-11) ...
    y = x[::-1].copy()
    assert float(simulate("sum", y, acc="fp32")) == 1024 + 2**-11
    # ... but in one block E is set by the largest term, wherever it stands, and they truncate away
    assert float(simulate("sum", y, order=O.BlockFMA(8, 23, acc=FP32))) == 1024.0
    # two blocks of four: the first sums 4 * 2^-14 = 2^-12 exactly; in the second, that c survives the
    # 2^-13 window and the three 2^-14 do not
    assert float(simulate("sum", y, order=v100())) == 1024 + 2**-12


def test_block_fma_carry_bit():
    # largest product 1.5*1.5 = 2.25 has significand >= 2: with the extra bit (K&M spcFlag) three
    # 2^-23 products survive (F = 24 relative to E = 1); without it they truncate to 0.
    a = np.array([1.5, 2**-12, 2**-12, 2**-12], np.float16)
    b = np.array([1.5, 2**-11, 2**-11, 2**-11], np.float16)
    assert float(simulate("dot", a, b, order=v100())) == 2.25 + 2**-22
    assert float(simulate("dot", a, b, order=O.BlockFMA(4, 23, carry_bit=False, acc=FP32))) == 2.25
    # a sticky bit (truncate=False) rounds up the truncated tail under out_rounding="ru"
    # (three sticky units of 2^-23 add up to 1.5 FP32 ulps, which round up to 2)
    o = O.BlockFMA(4, 23, truncate=False, out_rounding="ru", carry_bit=False, acc=FP32)
    assert float(simulate("dot", a, b, order=o)) == 2.25 + 2**-21


def test_block_fma_c_label_is_its_fp32_register_exponent():
    # c = 2^-140 is an FP32 subnormal: its label is clamped to -126 (K&M), so the next block's window
    # is 2^(-126-25) and eight products 2^-152 truncate away; with c's own exponent they would add 2^-149.
    a = np.array([2.0**-70] + [0.0] * 7 + [2.0**-76] * 8, ml_dtypes.bfloat16)
    o = O.BlockFMA(8, 25, acc=FP32)
    assert float(simulate("dot", a, a, order=o)) == 2.0**-140
    assert float(simulate("dot", a, a, order=O.BlockFMA(16, 25, acc=FP32))) == 2.0**-140 + 2.0**-149


def test_h100_fp8_precision():
    # H100 FP8: 13 fraction bits kept: 1 + 2^-14 (an E5M2 product 2^-7 * 2^-7) is lost, 1 + 2^-13 kept
    a = np.array([1, 2**-7], ml_dtypes.float8_e5m2)
    assert float(simulate("dot", a, a, order=O.preset("h100", "fp8"))) == 1.0
    b = np.array([1, 2**-6, 2**-7], ml_dtypes.float8_e5m2)
    c = np.array([1, 2**-7, 2**-6], ml_dtypes.float8_e5m2)
    assert float(simulate("dot", b, c, order=O.preset("h100", "fp8"))) == 1 + 2**-12
    # after a 1.0, products 2^-14 (subnormal E4M3 2^-7 squared) vanish in every later block; promoting
    # to FP32 every 128 terms (DeepSeek-V3) loses only those of the first chunk, which holds the 1.0
    x = np.array([1] + [2**-7] * 4095, ml_dtypes.float8_e4m3fn)
    assert float(simulate("dot", x, x, order=O.preset("h100", "fp8"))) == 1.0
    assert float(simulate("dot", x, x, order=O.preset("deepseek", "fp8"))) == 1 + 31 * 2**-7


def test_presets_table():
    assert O.preset("v100", "fp16") == O.BlockFMA(4, 23, acc=FP32)
    assert O.preset("a100", "bf16") == O.BlockFMA(8, 24, acc=FP32)
    assert O.preset("a100", "tf32").n == 4 and O.preset("h100", "tf32").n == 8
    assert O.preset("h100", "fp16") == O.preset("h200", "fp16") == O.BlockFMA(16, 25, acc=FP32)
    assert O.preset("h100", "fp8") == O.BlockFMA(32, 13, out_frac_bits=13, acc=FP32)
    assert O.preset("b200", "fp8") == O.BlockFMA(32, 25, acc=FP32)
    assert O.preset("v100", "fp16", out="fp16") == O.BlockFMA(4, 23, out_rounding="rne", acc=FP16)
    assert O.preset("deepseek", "fp8") == O.Promoted(128, O.preset("h100", "fp8"), FP32)
    assert O.preset("h100", "e4m3", promote=64).every == 64
    assert O.preset("numpy", "fp16") == O.NumpyPairwise(acc=FP32, carry=FP16)
    for bad in [("v100", "bf16"), ("x100", "fp16"), ("numpy", "bf16"), ("h100", "fp8", "fp16")]:
        with pytest.raises(ValueError):
            O.preset(*bad[:2], **({"out": bad[2]} if len(bad) > 2 else {}))


def test_fp16_output_preset():
    a = np.array([2048, 1, 1, 1], np.float16)
    b = np.ones(4, np.float16)
    # exact 2051 rounds (RNE, FP16) to 2052; the V100 FP16-output block does that once per block
    assert float(simulate("dot", a, b, order=O.preset("v100", "fp16", out="fp16"))) == 2052.0
    assert float(simulate("dot", a, b, acc="fp16")) == 2048.0


# ======================================================================================================
# numpy's np.sum, bit for bit
# ======================================================================================================

def _np_sum_check(x, order, acc=None):
    got = simulate("sum", x, order=order, acc=acc, codes=True, out=x.dtype)
    assert got.tobytes() == np.sum(x).tobytes(), (x.size, got, np.sum(x))


_EDGES = sorted({*range(1, 260), *(b + d for b in (384, 512, 1024, 1536, 2048) for d in (-9, -8, -1, 0, 1, 8)),
                 *np.random.default_rng(8).integers(260, 2049, 40).tolist()})


@pytest.mark.parametrize("lengths", [_EDGES, pytest.param(range(1, 2049), marks=pytest.mark.slow)],
                         ids=["unroll and block edges", "every length"])
def test_numpy_pairwise_float32_every_length(lengths):
    """Every length to 259 (the 8-lane unrolled loop, the first split at 128), the neighbours of the splits and
    of multiples of 8 above, and 40 random lengths to 2048; ``-m slow``: every length to 2048."""
    rng = np.random.default_rng(7)
    for n in lengths:
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-8, 9, n))).astype(np.float32)
        _np_sum_check(x, O.NumpyPairwise())


def _numpy_sum_order(inputs: str):
    """numpy's np.sum order on the installed numpy: the preset (numpy 2); numpy 1.x (1.24, the oldest declared)
    cuts even a contiguous reduction into buffers of np.getbufsize() = 8192 (measured on numpy 1.24.0)."""
    o = O.preset("numpy", inputs)
    return o if int(np.__version__.split(".")[0]) >= 2 else O.NumpyPairwise(8192, o.acc, o.carry)


@pytest.mark.parametrize("n", [10**5, 2**20 + 3, 8191, 8193, 16391])
def test_numpy_pairwise_large(n):
    rng = np.random.default_rng(n)
    x = rng.uniform(0, 1, n).astype(np.float32)
    _np_sum_check(x, _numpy_sum_order("fp32"))
    x16 = rng.uniform(0, 1, n).astype(np.float16)
    _np_sum_check(x16, _numpy_sum_order("fp16"))
    # casting reductions run through numpy's 8192-element buffer: one pairwise sum per chunk
    x32 = simulate("sum", x16, order=O.NumpyPairwise(chunk=np.getbufsize()), acc="fp32", codes=True)
    assert x32.view(np.float32) == np.sum(x16, dtype=np.float32)
    x64 = simulate("sum", x, order=O.NumpyPairwise(chunk=np.getbufsize()), acc="fp64")
    assert x64 == np.sum(x, dtype=np.float64)
    assert simulate("sum", x.astype(np.float64), order=_numpy_sum_order("fp64")) == np.sum(x.astype(np.float64))


def test_numpy_pairwise_float16_lengths_and_rows():
    rng = np.random.default_rng(3)
    for n in list(range(1, 300)) + [1000, 1024, 2047, 5000]:
        x = rng.uniform(-1, 4, n).astype(np.float16)
        _np_sum_check(x, O.preset("numpy", "fp16"))
        _np_sum_check(x, O.NumpyPairwise())     # FP32 accumulation, one rounding to FP16 at the end
    X = rng.standard_normal((5, 777)).astype(np.float32)
    got = simulate("sum", X, order=O.NumpyPairwise(), codes=True, out="fp32")
    assert got.tobytes() == np.sum(X, axis=-1).tobytes()
    # along axis 0 numpy adds whole rows in turn: a sequential sum per column, not pairwise
    Y = (rng.standard_normal((300, 7)) * 8).astype(np.float32)
    got = simulate("sum", np.ascontiguousarray(Y.T), order=O.Sequential(), acc="fp32", codes=True)
    assert got.tobytes() == np.sum(Y, axis=0).tobytes()
    assert got.tobytes() != simulate("sum", np.ascontiguousarray(Y.T), order=O.NumpyPairwise(), codes=True).tobytes()
    # -0 handling: numpy's identity is +0, so a sum of -0s is +0
    assert np.signbit(simulate("sum", np.array([-0.0, -0.0], np.float32), order=O.NumpyPairwise())) == \
        np.signbit(np.sum(np.array([-0.0, -0.0], np.float32)))


# ======================================================================================================
# The rounding kernels against the engine
# ======================================================================================================

def _edge_values(fmt, rng):
    """float64 values around every binade of fmt: grid points, midpoints, +-1 ulp of float64, random."""
    p = fmt.precision
    es = np.arange(fmt.emin - p - 2, fmt.emax + 2)
    e = rng.choice(es, 4000)
    m = rng.integers(1 << (p - 1), 1 << p, 4000).astype(np.float64)
    base = np.ldexp(m, e - p + 1)
    mid = base + np.ldexp(1.0, e - p)
    v = np.concatenate([base, mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf),
                        np.ldexp(rng.random(4000) + 1, e), [0.0, float(fmt.max_finite), float(fmt.min_normal)]])
    v = np.concatenate([v, -v, [np.inf, -np.inf, np.nan, 1e300]])
    return v


@pytest.mark.parametrize("fmt", [FP32, FP16, BF16, TF32, FP8_E4M3FN, FP8_E5M2FNUZ])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ftz", [False, True])
def test_arith_round_matches_engine(fmt, mode, ftz):
    rng = np.random.default_rng(11)
    v = _edge_values(fmt, rng)
    ar = Arith(fmt, Rounding.of(mode), ftz)
    got = ar.round(v)
    want = no.decode(no.cast(v, fmt, rounding=mode, ftz=ftz), fmt)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok].view(np.uint64), want[ok].view(np.uint64))


@pytest.mark.parametrize("fmt", [FP32, FP16, BF16])
@pytest.mark.parametrize("mode", MODES)
def test_arith_add_odd_path(fmt, mode):
    """x + y with y a hair above / below a tie or grid point: only the exact route gets these right."""
    rng = np.random.default_rng(5)
    ar = Arith(fmt, Rounding.of(mode), False)
    x = no.decode(no.cast(rng.standard_normal(400) * 8, fmt), fmt)
    ulp = np.ldexp(1.0, np.frexp(x)[1] - fmt.precision)
    k = rng.integers(-3, 4, x.size)
    y = np.concatenate([k * ulp / 2 + np.ldexp(ulp, -40) * rng.choice([-1, 1], x.size),
                        k * ulp / 2, np.ldexp(x, -60), -x])
    x = np.concatenate([x, x, x, x])
    got = ar.add(x, y, "odd")
    ref = [rnd(exact_add(val(a), val(b), mode), fmt, mode) for a, b in zip(x, y)]
    assert np.array_equal(got, [float(frac(r)) for r in ref])
    assert np.array_equal(np.signbit(got), [neg(r) for r in ref])


@pytest.mark.parametrize("fmt", [FP16, BF16, TF32])
@pytest.mark.parametrize("mode", MODES)
def test_arith_add32(fmt, mode):
    """The float32 twin: operands are FP32 numbers a hair from ties and grid points, zeros, cancellations."""
    rng = np.random.default_rng(6)
    ar = Arith(fmt, Rounding.of(mode), False)
    assert ar.low32
    x = no.decode(no.cast(rng.standard_normal(300) * np.exp2(rng.integers(-20, 20, 300)), fmt), fmt)
    x = x[np.isfinite(x)]
    ulp = np.ldexp(1.0, np.frexp(x)[1] - fmt.precision)
    k = rng.integers(-3, 4, x.size)
    j = rng.choice([8, 12, 14], x.size)
    y = np.concatenate([k * ulp / 2 + np.ldexp(ulp, -j) * rng.choice([-1, 1], x.size), k * ulp / 2,
                        np.ldexp(x, -12), -x])
    x = np.concatenate([x, x, x, x])
    assert np.array_equal(y.astype(np.float32), y)
    got = ar.add32(x.astype(np.float32), y.astype(np.float32)).astype(np.float64)
    ref = [rnd(exact_add(val(a), val(b), mode), fmt, mode) for a, b in zip(x, y)]
    assert np.array_equal(got, [float(frac(r)) for r in ref])
    assert np.array_equal(np.signbit(got), [neg(r) for r in ref])


@pytest.mark.parametrize("mode", ["rne", "rtz", "ru", "rd", "rto"])
def test_fp64_accumulator(mode):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 50)) * np.exp2(rng.integers(-30, 30, (4, 50)))).astype(np.float32)
    got = simulate("sum", x, acc="fp64", rounding=mode, codes=True)
    assert_same(got, reference("sum", [x], O.Sequential(), FP64, mode), FP64)
    big = np.array([1.7e308, 1.7e308], np.float64)
    r = simulate("sum", big, acc="fp64", rounding=mode)
    assert r == (np.inf if mode in ("rne", "ru") else np.finfo(np.float64).max)


def test_chunks_and_pieces_do_not_change_results(monkeypatch):
    """Cutting the batch into chunks and wide waves into row pieces (to stay in cache) is invisible."""
    import importlib

    S = importlib.import_module("numoracle.models.engine.simulation")   # the module, not the function

    rng = np.random.default_rng(4)
    a = rng.standard_normal((7, 70)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((70, 5)).astype(ml_dtypes.bfloat16)
    x = (rng.standard_normal((6, 300)) * 4).astype(np.float16)
    cases = [("matmul", (a, b), dict(order=O.Pairwise(), acc="bf16")),
             ("matmul", (a, b), dict(order=O.Blocked(8, O.Pairwise(), O.Pairwise()), acc="fp16", fma=False)),
             ("matmul", (a, b), dict(order=O.Promoted(16, O.BlockFMA(4, 13, out_frac_bits=13, acc=FP32)))),
             ("matmul", (a, b), dict(order=O.SplitK(5, O.BlockFMA(8, 23), O.Pairwise(), (4, 2, 0, 1, 3)))),
             ("sum", (x,), dict(order=O.NumpyPairwise(), acc="fp32")),
             ("sum", (x,), dict(order=O.Blocked(16, O.Sequential(), O.Pairwise()), acc="bf16", rounding="rtz"))]
    want = [simulate(op, *ins, codes=True, **kw) for op, ins, kw in cases]
    monkeypatch.setattr(importlib.import_module("numoracle.models.engine.numpysteps"), "PASS", 16)
    monkeypatch.setattr(S, "_BUDGET", 4096)
    for (op, ins, kw), w in zip(cases, want):
        assert np.array_equal(simulate(op, *ins, codes=True, **kw), w), (op, kw)
    # the inputs are never written to (block_fma works on its own copy of the terms)
    x0 = x.copy()
    simulate("sum", x, order=O.BlockFMA(4, 10, acc=FP32))
    assert np.array_equal(x.view(np.uint16), x0.view(np.uint16))


# ======================================================================================================
# Specials and errors
# ======================================================================================================

def test_nan_inf_propagate():
    x = np.array([[1, np.inf, 2], [np.inf, -np.inf, 1], [np.nan, 1, 1], [60000, 60000, -60000]], np.float16)
    r = simulate("sum", x, acc="fp16")
    assert r[0] == np.inf and np.isnan(r[1]) and np.isnan(r[2]) and r[3] == np.inf
    r = simulate("sum", x, acc="fp16", rounding="rtz")
    assert r[3] == 65504 - 60000
    a = np.array([0, 1], np.float16)
    b = np.array([np.inf, 1], np.float16)
    assert np.isnan(simulate("dot", a, b))
    for order in (v100(), O.Pairwise(), O.preset("deepseek", "fp8")):
        assert np.isnan(simulate("dot", a, b, order=order))
    assert simulate("dot", a[1:], b[:1], order=v100()) == np.inf


def test_signed_zero():
    z = np.array([-0.0, -0.0], np.float16)
    assert np.signbit(simulate("sum", z, acc="fp16")) == np.signbit(np.float16(0) + np.float16(-0.0))
    assert np.signbit(simulate("sum", z, acc="fp16", order=O.Pairwise()))       # -0 + -0 = -0
    c = np.array([1, -1], np.float16)
    assert not np.signbit(simulate("sum", c, acc="fp16"))
    assert np.signbit(simulate("sum", c, acc="fp16", rounding="rd"))


def test_torch_and_bf16_inputs():
    torch = pytest.importorskip("torch")
    a = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.bfloat16)
    b = torch.tensor([[1.0], [1.0], [2.0**-9]], dtype=torch.bfloat16)
    assert float(simulate("matmul", a, b, acc="bf16")[0, 0]) == 3.0        # 3 * 2^-9 is 3/8 of a bf16 ulp
    assert float(simulate("matmul", a, b, acc="fp32")[0, 0]) == 3 + 3 * 2**-9


def test_errors():
    x = np.ones(4, np.float16)
    with pytest.raises(ValueError, match="unknown op"):
        simulate("prod", x)
    with pytest.raises(ValueError, match="shapes"):
        simulate("matmul", np.ones((2, 3), np.float16), np.ones((4, 2), np.float16))
    with pytest.raises(ValueError, match="one length"):
        simulate("dot", x, np.ones(5, np.float16))
    with pytest.raises(ValueError, match="K must be"):
        simulate("sum", np.ones((3, 0), np.float16))
    with pytest.raises(ValueError, match="K must be"):
        simulate("matmul", np.ones((2, 0), np.float16), np.ones((0, 2), np.float16))
    with pytest.raises(ValueError, match="p <= 51"):
        simulate("sum", x, acc=Format("wide", 11, 51, 1023))
    with pytest.raises(ValueError, match="not exact in float64"):
        simulate("dot", np.ones(3), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="Order"):
        simulate("sum", x, order=42)
    assert np.array_equal(simulate("sum", x, order="pairwise"), simulate("sum", x, order=O.Pairwise()),
                          equal_nan=True)   # an order's text is the order (numoracle.orders.parse)
    with pytest.raises(ValueError, match="conflicts"):
        simulate("dot", x, x, order=v100(), acc="fp16")
    with pytest.raises(ValueError, match="sr"):
        simulate("sum", x, rounding="sr")
    with pytest.raises(TypeError, match="integer"):
        simulate("sum", np.ones(3, np.int8))
    with pytest.raises(ValueError, match="rna"):
        simulate("sum", x, acc="fp64", rounding="rna")
    with pytest.raises(ValueError):
        O.SplitK(3, permutation=(0, 0, 1))
    with pytest.raises(ValueError):
        O.Blocked(0)
    with pytest.raises(ValueError):
        O.Blocked(4, outer=O.BlockFMA(4, 23))
    with pytest.raises(ValueError):
        O.BlockFMA(4, 60)


def test_block_fma_float32_terms_match_float64_terms(monkeypatch):
    """The float32 block path (FP8 products) gives the float64 path's bits: zeros, subnormal inputs,
    all-zero blocks after a tiny or huge accumulator, cancellation, inf and NaN."""
    import numoracle.models.engine.program as sim  # prepare decides each block's float32 terms (_block32)

    rng = np.random.default_rng(77)
    m, K, n = 9, 256, 7
    a = (rng.standard_normal((m, K)) * np.exp2(rng.integers(-12, 9, (m, K)))).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((K, n)) * np.exp2(rng.integers(-12, 9, (K, n)))).astype(ml_dtypes.float8_e4m3fn)
    a[0, 32:] = 0                      # blocks without products after a nonzero c
    a[1, :32], a[1, 40:] = 448, 0      # a large c, then tiny and empty blocks
    a[2, ::2], a[2, 1::2] = a[2, 0::2], -a[2, 0::2]
    b[:, 1] = np.abs(b[:, 1])          # pairs in row 2 cancel against column 1
    a[3, :] = ml_dtypes.float8_e4m3fn(2.0**-9)  # subnormal inputs everywhere
    a[4, 100] = np.nan
    a[5, :] = 0                        # c = 0 and no products: a scale beyond float32 (clamped)
    for preset in (O.preset("h100", "fp8"), O.BlockFMA(n=16, frac_bits=13, truncate=False)):
        seen: list[bool] = []

        def record(st, src, terms_fp32, seen=seen, orig=sim._block32):
            seen.append(orig(st, src, terms_fp32))
            return seen[-1]

        monkeypatch.setattr(sim, "_block32", record)
        sim._fitted.cache_clear()          # (prepare keeps fitted programs: fit them again with the patch)
        got = simulate("matmul", a, b, order=preset)
        assert seen and all(seen)  # the float32 path ran
        monkeypatch.setattr(sim, "_block32", lambda st, src, terms_fp32: False)
        sim._fitted.cache_clear()
        want = simulate("matmul", a, b, order=preset)
        monkeypatch.undo()
        sim._fitted.cache_clear()
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64))


def test_accumulator_whose_quantum_is_below_float64s_is_refused_with_its_range():
    """A format whose subnormal quantum 2^(emin - m) has no float64 reciprocal was accepted and then
    failed with a bare OverflowError inside the arithmetic."""
    with pytest.raises(ValueError, match=r"emin - man_bits = -1055"):
        simulate("sum", np.ones(4, np.float32), acc=Format("x", 11, 10, 1046))
