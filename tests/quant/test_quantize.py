"""quantize / dequantize: hand-worked spec examples and exact (Fraction) references.

References: ONNX QuantizeLinear / DynamicQuantizeLinear backend test cases (onnx/backend/test/case/
node/quantizelinear.py, dynamicquantizelinear.py), TFLite's quantization spec (symmetric weights in
[-127, 127]), OCP MX v1.0 (via gfloat's block.py), TransformerEngine's NVFP4 reference recipe; every
other expected value is computed here with Fractions (numoracle.core.scalar), independently of the engine.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numoracle as no
from numoracle.core.scalar import round_value, value_of
from numoracle.formats import (
    BF16,
    FP4_E2M1FN,
    FP6_E2M3FN,
    FP6_E3M2FN,
    FP8_E4M3FN,
    FP8_E5M2,
    FP16,
    FP32,
    FP64,
    INT4,
    INT8,
    INT16,
    UINT8,
    UINT16,
)
from numoracle.quant.arith import div_round, div_values, mul_round, mul_values
from numoracle.quant.layout import Layout
from numoracle.quant.quantizer import dequantize, quantize
from optional import needs

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)
INT8, UINT8, E4M3 = INT8, UINT8, FP8_E4M3FN


def ints(q) -> np.ndarray:
    return no.decode(q.codes, q.fmt)


def fvals(q) -> np.ndarray:
    return no.decode(q.codes, q.fmt)


# ---- the Fraction reference ---------------------------------------------------------------
def ref_t(x: float, s: float, compute=FP32, mode="rne", reciprocal=False) -> Fraction | str | None:
    """t = x / s (or x * fl(1/s)) rounded once (twice) into compute, exactly; None for an infinity, "nan" for
    0 * inf (IEEE 754 §7.2: invalid)."""
    if not math.isfinite(x):
        return None
    if reciprocal:
        r = value_of(round_value(Fraction(1) / Fraction(s), compute, rounding=mode), compute)
        if not isinstance(r, Fraction):  # 1/s overflowed compute: x * inf
            return "nan" if x == 0 else None
        v = value_of(round_value(Fraction(x) * r, compute, rounding=mode), compute)
    else:
        v = value_of(round_value(Fraction(x) / Fraction(s), compute, rounding=mode), compute)
    if isinstance(v, Fraction):
        return v
    return Fraction(0) if v.kind == "zero" else None


def ref_int(t: Fraction, zp: int, lo: int, hi: int) -> int:
    return min(max(round(t) + zp, lo), hi)  # round() of a Fraction is half-to-even


# ---- exact division and multiplication --------------------------------------------------------
FLOATS64 = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True, width=64).filter(lambda v: v != 0)


@SETTINGS
@given(st.lists(st.tuples(FLOATS64, FLOATS64), min_size=1, max_size=20),
       st.sampled_from([FP32, FP64, BF16, FP16, FP8_E4M3FN]),
       st.sampled_from(["rne", "rna", "rtz", "ru", "rd", "rto"]))
def test_div_and_mul_round_once_against_fractions(pairs, fmt, mode):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    ov = "saturate" if not fmt.has_inf else None
    d, m = div_round(a, b, fmt, mode, ov), mul_round(a, b, fmt, mode, ov)
    for i in range(a.size):
        assert int(d[i]) == round_value(Fraction(a[i]) / Fraction(b[i]), fmt, rounding=mode, overflow=ov)
        assert int(m[i]) == round_value(Fraction(a[i]) * Fraction(b[i]), fmt, rounding=mode, overflow=ov)


def test_div_round_adversarial_quotients():
    """Quotients next to powers of two (the lower binade's finer grid), exact products at FP64 midpoints."""
    rng = np.random.default_rng(3)
    b = np.abs(rng.standard_normal(400)) + 0.5
    a = np.ldexp(b, rng.integers(-3, 4, 400))
    a = np.concatenate([a, np.nextafter(a, np.inf), np.nextafter(a, -np.inf)])
    b = np.tile(b, 3)
    pa = 1 + np.ldexp(rng.integers(0, 1 << 20, 400).astype(float), -52)
    pb = np.full(400, 1.5 + 2.0 ** -52)
    tiny = np.array([1e-300, 3e-310, 5e-324, 2.0 ** -1074 * 3])
    for fmt in (FP64, FP32):
        for mode in ("rne", "rtz", "ru", "rd", "rto"):
            d, m = div_round(a, b, fmt, mode), mul_round(pa, pb, fmt, mode)
            td = div_round(tiny, np.array([7.0, 3.0, 3.0, 2.0]), fmt, mode)
            assert all(int(d[i]) == round_value(Fraction(a[i]) / Fraction(b[i]), fmt, rounding=mode)
                       for i in range(a.size))
            assert all(int(m[i]) == round_value(Fraction(pa[i]) * Fraction(pb[i]), fmt, rounding=mode)
                       for i in range(pa.size))
            assert [int(c) for c in td] == [round_value(Fraction(x) / Fraction(y), fmt, rounding=mode)
                                            for x, y in zip(tiny, (7.0, 3.0, 3.0, 2.0))]


def test_div_round_specials_follow_ieee():
    a = np.array([np.nan, np.inf, 1.0, 0.0, -0.0, np.inf, 0.0])
    b = np.array([1.0, 2.0, 0.0, 5.0, 5.0, np.inf, 0.0])
    v = no.decode(div_round(a, b, FP32), FP32)
    assert np.isnan(v[0]) and v[1] == np.inf and v[2] == np.inf and v[3] == 0 and np.signbit(v[4])
    assert np.isnan(v[5]) and np.isnan(v[6])


# ---- step 3 (t = x / s in compute) against Fractions, fast and general paths ----------------------
F32 = st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=True)
S32 = st.floats(width=32, min_value=2.0 ** -149, max_value=2.0 ** 127, allow_subnormal=True)


@SETTINGS
@given(st.lists(F32, min_size=1, max_size=30), S32, st.booleans(),
       st.sampled_from([(FP32, "rne"), (FP32, "rtz"), (FP64, "rne"), (BF16, "ru"), (FP16, "rne")]))
def test_scaled_is_one_correct_rounding(xs, s, reciprocal, compute_mode):
    compute, mode = compute_mode
    x = np.array(xs, np.float32)
    q = quantize(x, E4M3, scale=s, reciprocal=reciprocal, compute=compute, compute_rounding=mode)
    t = q.scaled
    for i, xi in enumerate(x):
        r = ref_t(float(xi), s, compute, mode, reciprocal)
        assert (np.isinf(t[i]) if r is None else np.isnan(t[i]) if r == "nan" else Fraction(float(t[i])) == r), \
            (xi, s, t[i], r)
    ref_codes = no.cast(t, E4M3, overflow="saturate")
    assert np.array_equal(q.codes, ref_codes)


def test_scaled_adversarial_ties_subnormals_and_huge_scales():
    """Ties x/s = k + 1/2, results in FP32's subnormal range, and tiny/huge scales, FP32 and FP64 inputs."""
    k = np.arange(-40, 40)
    cases = [
        (np.ldexp(k + 0.5, -7).astype(np.float32), 2.0 ** -7),  # exact ties, s a power of two
        ((k + 0.5).astype(np.float32) * 3, 3.0),  # exact ties, s = 3
        (np.ldexp(np.arange(1, 60, dtype=np.float32), -140), 2.0 ** 12),  # subnormal results
        (np.float32([1.0, 3.0, -7.0, 1e-30]), 2.0 ** -149),  # tiny scale: t overflows FP32 to inf
        (np.float32([3e38, 1.0, 2.0 ** -149]), 1.7e38),  # huge scale
        (np.array([1 + 2 ** -40, np.pi, -1e-300, 1e300], np.float64), 0.1),  # FP64 inputs: the general path
    ]
    for x, s in cases:
        s = float(np.float32(s))
        for recip in (False, True):
            q = quantize(x, INT8, scale=s, reciprocal=recip, clip="full")
            for xi, ti, ci in zip(x, q.scaled, ints(q)):
                r = ref_t(float(xi), s, reciprocal=recip)
                if r is None:
                    assert np.isinf(ti) and ci == (127 if ti > 0 else -128)
                else:
                    assert Fraction(float(ti)) == r and ci == ref_int(r, 0, -128, 127), (xi, s, ti, r)


def test_fp32_fast_path_equals_the_exact_division_on_random_bits():
    """numpy's FP64 quotient of FP32 values rounded to FP32 (the fast path) is the exact division, subnormals
    and overflow included (double rounding is innocuous: 53 >= 2 * 24 + 2); checked on random bit patterns."""
    rng = np.random.default_rng(12)
    x = rng.integers(0, 1 << 32, 1 << 15, dtype=np.uint64).astype(np.uint32).view(np.float32)
    s = (rng.integers(1, 0x7F800000, x.size, dtype=np.uint64).astype(np.uint32)).view(np.float32)
    x = np.where(np.isfinite(x), x, np.float32(1.5)).reshape(128, -1)
    s = s.reshape(x.shape).astype(np.float64)
    q = quantize(x, E4M3, granularity=("group", 1), scale=s)
    r = quantize(x, E4M3, granularity=("group", 1), scale=s, reciprocal=True)
    assert np.array_equal(q.scaled, div_values(x, s, FP32), equal_nan=True)
    recip = div_values(1.0, s, FP32)
    assert np.array_equal(r.scaled, mul_values(x, recip, FP32), equal_nan=True)
    assert np.count_nonzero(np.abs(q.scaled) < 2.0 ** -126) > 100 and np.isinf(q.scaled).sum() > 100


def test_reciprocal_rounds_twice_and_differs_at_a_tie():
    # 885.5 / 7 = 126.5 exactly: one rounding keeps the tie (-> 126, even); fl32(1/7) is 4.5e-8 too large,
    # so 885.5 * fl32(1/7) = 126.5000057 rounds to 126.50000763 in FP32 and then to 127
    x = np.float32([885.5])
    q1, q2 = quantize(x, INT8, scale=7.0), quantize(x, INT8, scale=7.0, reciprocal=True)
    assert ints(q1)[0] == 126 and q1.ties[0] and q1.scaled[0] == 126.5
    assert ints(q2)[0] == 127 and not q2.ties[0] and q2.scaled[0] == 126.5 + 2.0 ** -17
    assert q2.reciprocals[0] == float(np.float32(1 / 7)) and q1.reciprocals is None


# ---- ONNX QuantizeLinear (given scales; round half to even, then + zero point, saturate) -------------
def test_onnx_quantizelinear_uint8():
    x = np.array([0, 2, 3, 1000, -254, -1000], np.float32)
    q = quantize(x, UINT8, symmetric=False, scale=2.0, zero_point=128)
    assert q.codes.tolist() == [128, 129, 130, 255, 1, 0]
    assert q.clipped.tolist() == [False, False, False, True, False, True]
    assert q.params.scale_rule == "given" and q.params.clip == "full"


def test_onnx_quantizelinear_uint16_and_int16_half_even():
    x = np.array([0.0, -128.0, 3.0, -3.0, 2.9, -2.9, 3.1, -3.1, 65536.0, -65534.0, 70000.0, -70000.0], np.float32)
    q = quantize(x, UINT16, symmetric=False, scale=2.0, zero_point=32767)
    assert q.codes.tolist() == [32767, 32703, 32769, 32765, 32768, 32766, 32769, 32765, 65535, 0, 65535, 0]
    assert q.ties.tolist()[2:4] == [True, True]  # 1.5 -> 2 and -1.5 -> -2: rounded BEFORE adding 32767
    x = np.array([0.0, -514.0, 3.0, -3.0, 2.9, -2.9, 3.1, -3.1, 65022.0, -66046.0, 65023.0, -66047.0, 65024.0,
                  -66048.0, 70000.0, -70000.0], np.float32)
    q = quantize(x, INT16, symmetric=False, scale=2.0, zero_point=256)
    assert ints(q).tolist() == [256, -1, 258, 254, 257, 255, 258, 254, 32767, -32767, 32767, -32768, 32767,
                                -32768, 32767, -32768]  # 32511.5 -> 32512 and -33023.5 -> -33024 (even)


def test_onnx_quantizelinear_axis_int4_and_fp8():
    x = np.array([[[[-162, 10], [-100, 232], [-20, -50]], [[-76, 0], [0, 252], [32, -44]],
                   [[245, -485], [-960, -270], [-375, -470]]]], np.float32)
    q = quantize(x, UINT8, granularity="channel", axis=1, symmetric=False, scale=[2.0, 4.0, 5.0],
                 zero_point=[84, 24, 196])
    assert q.codes.reshape(3, 6).tolist() == [[3, 89, 34, 200, 74, 59], [5, 24, 24, 87, 32, 13],
                                              [245, 99, 4, 142, 121, 102]]
    x = np.array([[0.0, 2.5, 4.8, 8.6], [-30, -20, 6, 9], [12, 15, 16, 40]], np.float32)
    q = quantize(x, INT4, granularity="channel", axis=0, symmetric=False, scale=[2.0, 3.0, 4.0],
                 zero_point=[1, 1, 1])
    assert ints(q).ravel().tolist() == [1, 2, 3, 5, -8, -6, 3, 4, 4, 5, 5, 7]
    x = np.array([0.0, 1.0, 2.0, 100000.0, 200.0], np.float32)  # 100 -> 96: the tie between 96 and 104
    assert fvals(quantize(x, E4M3, scale=2.0)).tolist() == [0, 0.5, 1, 448, 96]
    assert fvals(quantize(x, FP8_E5M2, scale=2.0)).tolist() == [0, 0.5, 1, 49152, 96]


def test_onnx_quantizelinear_blocked():
    x = np.array([[6.0, -8, -10, 5.0], [1.0, 8.0, 4.0, 5.0], [0.0, 20.0, 10.0, 4.0]], np.float32)
    s = np.array([[1.5, 2.5], [3.0, 4.9], [5.1, 6.9]], np.float32)
    q = quantize(x, INT16, granularity=("block", 2), axis=1, scale=s.astype(np.float64), clip="full")
    assert ints(q).tolist() == np.clip(np.rint(x / np.repeat(s, 2, axis=1)), -32768, 32767).tolist()


# ---- ONNX DynamicQuantizeLinear (asymmetric uint8 from the data) ------------------------------
@pytest.mark.parametrize(("x", "scale", "zp", "codes"), [
    ([0, 2, -3, -2.5, 1.34, 0.5], 5 / 255, 153, [153, 255, 0, 26, 221, 179]),
    ([-1.0, -2.1, -1.3, -2.5, -3.34, -4.0], 4 / 255, 255, [191, 121, 172, 96, 42, 0]),
    ([1, 2.1, 1.3, 2.5, 3.34, 4.0, 1.5, 2.6, 3.9, 4.0, 3.0, 2.345], 4 / 255, 0,
     [64, 134, 83, 159, 213, 255, 96, 166, 249, 255, 191, 149]),
])
def test_onnx_dynamicquantizelinear(x, scale, zp, codes):
    q = quantize(np.array(x, np.float32), UINT8, symmetric=False)
    assert q.scales.item() == float(np.float32(scale)) and q.zero_points.item() == zp
    assert q.codes.tolist() == codes


def test_compute_precision_decides_a_tie():
    """0.5 / fl32(5/255) = 25.49999996: FP32 rounds it onto the tie 25.5 (-> 26, ONNX's 179); FP64 gives 25."""
    x = np.array([0, 2, -3, -2.5, 1.34, 0.5], np.float32)
    q32, q64 = quantize(x, UINT8, symmetric=False), quantize(x, UINT8, symmetric=False, compute="fp64")
    assert q32.codes[-1] == 179 and q32.ties[-1] and q64.codes[-1] == 178 and not q64.ties[-1]


# ---- TFLite symmetric weights, asymmetric activations ---------------------------------------------
def test_tflite_symmetric_weights_narrow_range():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((16, 64)).astype(np.float32)
    w[3, 7] = -np.abs(w[3]).max() * 1.5  # a negative amax: -127, never -128
    q = quantize(w, INT8, granularity="channel", axis=0)
    v = ints(q)
    assert q.params.clip == "narrow" and v.min() == -127 and v.max() <= 127 and v[3, 7] == -127
    assert np.all(np.abs(v).max(axis=1) == 127) and q.zero_points is None
    for c in range(16):  # s = fl32(amax / 127), one rounding
        assert q.scale_codes[c, 0] == round_value(Fraction(float(np.abs(w[c]).max())) / 127, FP32)
    # exact ties with a power-of-two scale: amax = 127 * 2^-7 gives s = 2^-7 and t = x * 2^7
    x = np.ldexp(np.array([127, 2.5, 3.5, -2.5, -0.5, 0.5, 1.5], np.float32), -7)
    q = quantize(x, INT8)
    assert q.scales.item() == 2.0 ** -7 and ints(q).tolist() == [127, 2, 4, -2, 0, 0, 2]
    assert q.ties.tolist() == [False] + [True] * 6


def test_tflite_asymmetric_activations_full_range_and_exact_zero():
    rng = np.random.default_rng(6)
    a = (rng.standard_normal(1000) * 2 + 1).astype(np.float32)
    q = quantize(a, INT8, symmetric=False)
    zp, s = int(q.zero_points.item()), q.scales.item()
    assert q.params.clip == "full" and ints(q).min() == -128 and ints(q).max() == 127
    assert s == value_of(round_value((Fraction(float(a.max())) - Fraction(float(a.min()))) / 255, FP32), FP32)
    t_min = ref_t(float(a.min()), s)
    assert zp == min(max(round(-128 - t_min), -128), 127)
    z = quantize(np.float32([0.0]), INT8, symmetric=False, scale=s, zero_point=zp)
    assert dequantize(z)[0] == 0.0  # real zero is exactly representable


# ---- FP8 per-tensor / per-row / per-block, FP32 and power-of-two scales ---------------------------
def test_fp8_absmax_per_row_and_pow2_scales():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((8, 256)) * np.logspace(-3, 3, 8)[:, None]).astype(np.float32)
    q = quantize(x, E4M3, granularity="channel", axis=0)
    amax = np.abs(x).max(axis=1)
    assert [int(c) for c in q.scale_codes.ravel()] == [round_value(Fraction(float(a)) / 448, FP32) for a in amax]
    assert not q.clipped.any()  # amax / fl32(amax/448) rounds to 448 at most
    p = quantize(x, E4M3, granularity="channel", axis=0, scale_rule="pow2")
    s = p.scales.ravel()
    assert np.all(np.log2(s) == np.round(np.log2(s)))
    assert np.all(amax / s <= 448) and np.all(amax / (s / 2) > 448)  # the smallest power of two that fits
    assert not p.clipped.any()
    e = quantize(np.float32([448 * 2.0 ** -5, 1.0]), E4M3, scale_rule="pow2")  # amax/448 a power of two
    assert e.scales.item() == 2.0 ** -5 and fvals(e)[0] == 448


def test_granularities_match_blockwise_loops():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((16, 24)).astype(np.float32)
    for gran, axis, blk in [("tensor", -1, (16, 24)), ("channel", 1, (16, 1)), (("group", 8), 1, (1, 8)),
                            (("block", 4), 0, (4, 1)), (("block", (8, 12)), -1, (8, 12)),
                            (("block", (6, 4)), (1, 0), (4, 6))]:
        q = quantize(x, INT8, granularity=gran, axis=axis)
        assert q.params.block_shape == blk and q.scales.shape == (16 // blk[0], 24 // blk[1])
        for i in range(q.scales.shape[0]):
            for j in range(q.scales.shape[1]):
                amax = float(np.abs(x[i * blk[0]:(i + 1) * blk[0], j * blk[1]:(j + 1) * blk[1]]).max())
                assert q.scale_codes[i, j] == round_value(Fraction(amax) / 127, FP32)
        assert np.array_equal(q.scale_per_element(), np.kron(q.scales, np.ones(blk)))


def test_layout_chunks_cover_the_array_in_order():
    rng = np.random.default_rng(9)
    for shape, block in [((6, 10), (3, 5)), ((4, 1, 6), (1, 1, 6)), ((2, 3, 4), (2, 3, 4)), ((5, 8), (1, 2))]:
        lay = Layout(shape, block)
        g = rng.standard_normal(lay.grid)
        full = lay.expand(g).ravel()
        seen = np.zeros(full.size, bool)
        for lo, hi, vals in lay.chunks(g, target=7):
            assert np.array_equal(np.broadcast_to(vals, (hi - lo,)), full[lo:hi])
            seen[lo:hi] = True
        assert seen.all()


# ---- OCP MX ---------------------------------------------------------------------------------
def test_mx_e4m3_block_amax_rounds_or_clips_to_448():
    k = 3
    for top, t_top, clipped, tie in [(1.9375, 448, True, True), (1.8125, 448, False, True),
                                     (1.75, 448, False, False), (1.0, 256, False, False)]:
        x = np.float32([top * 2.0 ** k, 2.0 ** k, -(2.0 ** (k - 9)), 0.0] + [0.5] * 28)
        q = quantize(x, E4M3, scale_rule="mx")
        assert q.scale_codes.item() == 127 + k - 8 and q.scales.item() == 2.0 ** (k - 8)
        assert q.scaled[0] == top * 256  # 496, 464, 448, 256: the division by 2^(k-8) is exact
        assert fvals(q)[:3].tolist() == [t_top, 256, -0.5] and q.clipped[0] == clipped and q.ties[0] == tie
    for fmt, emax, big, sat in [(FP8_E5M2, 15, 1.9375, 57344), (FP4_E2M1FN, 2, 1.75, 6),
                                (FP6_E3M2FN, 4, 1.9375, 28), (FP6_E2M3FN, 2, 1.96875, 7.5)]:
        q = quantize(np.float32([big * 4, 1.0] + [0.0] * 30), fmt, scale_rule="mx")
        assert q.scales.item() == 2.0 ** (2 - emax) and fvals(q)[0] == sat and q.clipped[0]


def test_mx_all_zero_block_nan_and_inf_blocks():
    x = np.zeros(96, np.float32)
    x[32:64] = np.linspace(-3, 3, 32)
    x[64], x[70] = np.nan, 1.0
    q = quantize(x, E4M3, scale_rule="mx")
    assert q.scale_codes.tolist() == [0, 128 - 8, 0xFF]  # 2^-127 (gfloat); 2^(1-8); NaN
    assert np.all(q.codes[:32] == 0) and np.all(dequantize(q)[:32] == 0)
    d = dequantize(q)
    assert np.all(np.isnan(d[64:])) and np.all(np.isfinite(d[:64]))
    x[64] = -np.inf
    assert quantize(x, E4M3, scale_rule="mx").scale_codes[-1] == 0xFF
    qi = quantize(x, E4M3, scale_rule="mx", nan="ignore")  # amax over the finite elements; -inf saturates
    assert qi.scale_codes[-1] == 127 - 8 and fvals(qi)[64] == -448 and qi.clipped[64]
    x[64] = np.nan
    qi = quantize(x, E4M3, scale_rule="mx", nan="ignore")
    assert np.isnan(fvals(qi)[64]) and fvals(qi)[70] == 256
    with pytest.raises(ValueError, match="NaN/inf"):
        quantize(x, E4M3, scale_rule="mx", nan="raise")


def test_mx_e8m0_scale_underflow_and_overflow():
    x = np.float32([2.0 ** -140, 2.0 ** -141] + [0] * 30)  # floor(log2) - 8 = -148 < -127: clamped
    q = quantize(x, E4M3, scale_rule="mx")
    assert q.scale_codes.item() == 0 and q.scaled[0] == 2.0 ** -13 and fvals(q)[0] == 0  # below 2^-10
    with pytest.raises(ValueError, match="underflows e8m0fnu"):
        quantize(x, E4M3, scale_rule="mx", scale_range="raise")
    x = np.array([2.0 ** 200, 3.0] + [0.0] * 30)  # FP64 input: 200 - 8 > 127
    q = quantize(x, E4M3, scale_rule="mx")
    assert q.scale_codes.item() == 254 and fvals(q)[0] == 448 and q.clipped[0]
    with pytest.raises(ValueError, match="overflows e8m0fnu"):
        quantize(x, E4M3, scale_rule="mx", scale_range="raise")


def test_mxint8_folds_the_implicit_factor():
    x = np.float32([1.5, -1.0, 0.25] + [0] * 29)  # floor(log2 1.5) = 0; MXINT8 scale 2^-6 (X = 1 times 2^-6)
    q = quantize(x, INT8, scale_rule="mx", clip="full")
    assert q.scales.item() == 2.0 ** -6 and ints(q)[:3].tolist() == [96, -64, 16]


# ---- NVFP4 -------------------------------------------------------------------------------------
def test_nvfp4_recipe_step_by_step():
    x = np.float32([[6.0, -3.0, 1.0, 0.2] + [0.0] * 12, [1e-6] + [0.0] * 15, [0.0] * 16])
    q = quantize(x, FP4_E2M1FN, scale_rule="nvfp4", reciprocal=True)
    f32 = np.float32
    s_enc = f32(2688) / f32(6.0)  # 448: the global amax is 6
    assert q.global_scale == float(f32(1) / s_enc)
    d0 = ml_dtypes.float8_e4m3fn(min(f32(f32(6.0) / f32(6)) * s_enc, f32(448)))
    assert q.scales[0, 0] == float(d0) == 448 and q.scales[2, 0] == 0  # an all-zero block: d = 0
    assert q.scales[1, 0] == float(ml_dtypes.float8_e4m3fn(f32(f32(1e-6) / f32(6)) * s_enc))
    assert fvals(q)[0, :4].tolist() == [6, -3, 1, 0] and np.all(q.codes[2] == 0)
    deq = dequantize(q)  # 6 * 448 * fl32(1/448), exactly (fl32(1/448) = fl32(1/7) / 64 is not 1/448)
    assert deq[0, 0] == 6 * 448 * q.global_scale != 6 and deq[0, 3] == 0
    assert np.array_equal(q.scale_per_element()[0], np.full(16, 448 * q.global_scale))


# ---- per-channel vs per-tensor (the seed notebook's experiment) ------------------------------------
def test_per_channel_beats_per_tensor_with_an_outlier_channel():
    rng = np.random.default_rng(9)
    w = (rng.standard_normal((128, 32)) * 0.2).astype(np.float32)
    w[:, 0] *= 10
    x_in = rng.standard_normal((32, 128)).astype(np.float32)
    ref = x_in.astype(np.float64) @ w
    qc, qt = quantize(w, INT8, granularity="channel", axis=1), quantize(w, INT8)
    err_c = np.abs(dequantize(qc) - w).mean()
    err_t = np.abs(dequantize(qt) - w).mean()
    mm_c = np.abs(x_in @ dequantize(qc) - ref).mean()
    mm_t = np.abs(x_in @ dequantize(qt) - ref).mean()
    assert err_c < err_t and mm_c < mm_t
    for q in (qc, qt):  # inside the range: half a scale, plus the FP32 rounding of x / s (u |t| scales)
        assert np.all(np.abs(dequantize(q) - w) <= q.scale_per_element() * (0.5 + 2.0 ** -24 * np.abs(q.scaled)))


# ---- dequantize exactness -------------------------------------------------------------------
@pytest.mark.parametrize(("fmt", "kw"), [
    (INT8, {"granularity": "channel", "symmetric": False}), (INT4, {"granularity": ("group", 8)}),
    (E4M3, {"scale_rule": "mx"}), (FP4_E2M1FN, {"scale_rule": "nvfp4"}), (FP8_E5M2, {"scale_fmt": "bf16"}),
])
def test_dequantize_is_exact(fmt, kw):
    rng = np.random.default_rng(10)
    x = (rng.standard_normal((4, 64)) * 5).astype(np.float32)
    q = quantize(x, fmt, **kw)
    d = dequantize(q)
    v, s = q.values(), q.scale_per_element()
    zp = q.layout.expand(q.zero_points) if q.zero_points is not None else np.zeros(x.shape)
    sc = q.layout.expand(q.scales)
    for i in np.ndindex(x.shape):
        exact = (Fraction(float(v[i])) - int(zp[i])) * Fraction(float(sc[i])) * Fraction(q.global_scale or 1)
        assert Fraction(float(d[i])) == exact
        assert s[i] == float(Fraction(float(sc[i])) * Fraction(q.global_scale or 1))
    b = dequantize(q, out="bf16")
    for i in np.ndindex(x.shape):
        exact = (Fraction(float(v[i])) - int(zp[i])) * Fraction(float(sc[i])) * Fraction(q.global_scale or 1)
        want = round_value(exact, BF16) if exact else 0x8000 * bool(np.signbit(v[i]))  # -0 keeps its sign
        assert int(b[i]) == want


# ---- rounding modes of the final cast -----------------------------------------------------------
def test_final_rounding_modes_and_stochastic_rounding():
    x = np.float32([2.5, -2.5, 3.5, 2.25, -2.75]) * np.float32(2.0 ** -3)
    exp = {"rne": [2, -2, 4, 2, -3], "rna": [3, -3, 4, 2, -3], "rtz": [2, -2, 3, 2, -2], "ru": [3, -2, 4, 3, -2],
           "rd": [2, -3, 3, 2, -3]}
    for mode, want in exp.items():
        assert ints(quantize(x, INT8, scale=2.0 ** -3, rounding=mode)).tolist() == want
    rb = np.random.default_rng(0).integers(0, 1 << 8, x.shape)
    q = quantize(x, INT8, scale=2.0 ** -3, rounding="sr", random_bits=rb, sr_bits=8)
    assert np.array_equal(q.codes, no.cast(q.scaled, INT8, rounding="sr", random_bits=rb, sr_bits=8))
    q = quantize(x * 100, E4M3, rounding="sr", random_bits=rb, sr_bits=8)
    assert np.array_equal(q.codes, no.cast(q.scaled, E4M3, rounding="sr", random_bits=rb, sr_bits=8,
                                           overflow="saturate"))


# ---- inputs and bad input -----------------------------------------------------------------------
def test_torch_and_ml_dtypes_inputs_read_exactly():
    torch = needs("torch")

    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 32)).astype(ml_dtypes.bfloat16)
    ref = quantize(x.astype(np.float32), E4M3, scale_rule="mx")
    for xi in (x, torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)):
        q = quantize(xi, E4M3, scale_rule="mx")
        assert np.array_equal(q.codes, ref.codes) and np.array_equal(q.scale_codes, ref.scale_codes)
    q8 = quantize(np.arange(-5, 6, dtype=np.int8), INT8, scale=0.5)
    assert ints(q8).tolist() == list(range(-10, 11, 2)) and not q8.clipped.any()


def test_zero_size_arrays():
    for shape, kw in [((0,), {}), ((0, 4), {"granularity": "channel"}), ((4, 0), {"granularity": ("group", 2)}),
                      ((0, 32), {"scale_rule": "mx"})]:
        q = quantize(np.zeros(shape, np.float32), E4M3, **kw)
        assert q.codes.shape == shape and dequantize(q).shape == shape
    assert quantize(np.zeros((0, 4), np.float32), INT8).scales.tolist() == [[1.0]]


def test_bad_input_raises_with_the_fix():
    x = np.ones((4, 30), np.float32)
    with pytest.raises(ValueError, match="group size 16 does not divide axis 1 of length 30"):
        quantize(x, INT8, granularity=("group", 16))
    with pytest.raises(ValueError, match="unknown granularity"):
        quantize(x, INT8, granularity="row")
    with pytest.raises(ValueError, match="unknown scale_rule"):
        quantize(x, INT8, scale_rule="minmax")
    with pytest.raises(ValueError, match="symmetric=False"):
        quantize(x, E4M3, symmetric=False)
    with pytest.raises(ValueError, match="unknown nan policy"):
        quantize(x, INT8, nan="drop")
    with pytest.raises(ValueError, match="clip='narrow'"):
        quantize(x, UINT8, clip="narrow")
    with pytest.raises(ValueError, match="overflows fp16"):
        quantize(x * 1e7, INT8, scale_fmt="fp16")
    q = quantize(x * 1e7, INT8, scale_fmt="fp16", scale_range="clamp")
    assert q.scales.max() == 65504 and q.clipped.all()
    with pytest.raises(ValueError, match="underflows fp16 .amax / 127 is below the smallest positive value"):
        quantize(x * 1e-12, INT8, scale_fmt="fp16")
    assert quantize(x * 1e-12, INT8, scale_fmt="fp16", scale_range="clamp").scales.min() == 2.0 ** -24
    with pytest.raises(ValueError, match="not a value of scale_fmt"):
        quantize(x, INT8, scale=0.1, scale_fmt="bf16")
    with pytest.raises(ValueError, match="global_scale"):
        quantize(x, INT8, global_scale=1.0)
    with pytest.raises(ValueError, match="NaN scale"):
        quantize(np.float32([np.nan, 1]), INT8, scale_fmt=FP6_E3M2FN)


def test_nan_policies_for_integers():
    x = np.float32([1.0, np.nan, -2.0, 4.0])
    q = quantize(x, INT8)  # propagate: the block's scale is NaN, every element dequantises to NaN
    assert np.isnan(q.scales.item()) and np.all(np.isnan(dequantize(q)))
    q = quantize(x, INT8, nan="ignore")
    assert q.scales.item() == float(np.float32(4 / 127)) and ints(q).tolist() == [32, 0, -64, 127]
    q = quantize(x, INT8, symmetric=False, nan="ignore")
    zp = int(q.zero_points.item())
    assert ints(q)[1] == zp and dequantize(q)[1] == 0


def test_asymmetric_zero_point_is_rounded_once_with_a_wide_compute():
    # scale 2^-8 (fp64), t_min = -(1/2 + 2^-50): qmin - t_min = -127.5 + 2^-50 exactly, which float64
    # rounds onto the tie -127.5; the exact value rounds (half even is not involved) to -127
    rmax, rmin = 255 * 2.0**-8 - 2.0**-9, -(2.0**-9 + 2.0**-58)
    q = quantize(np.array([rmin, rmax]), "int8", symmetric=False, scale_fmt="fp64", compute="fp64")
    assert q.scales.ravel().tolist() == [2.0**-8] and q.zero_points.ravel().tolist() == [-127]


def test_scale_range_applies_to_exact_asymmetric_spans_and_zero_less_scales():
    x = np.array([1e-43, -1e-70, 5e-44])  # rmax - rmin needs more than 53 bits: the exact-span path
    q = quantize(x, "uint8", symmetric=False, scale_range="clamp")
    assert q.scales.ravel().tolist() == [2.0**-149] and q.codes.tolist() == [71, 0, 36]
    with pytest.raises(ValueError, match="underflows fp32"):
        quantize(x, "uint8", symmetric=False)
    with pytest.raises(ValueError, match="underflows e8m0fnu"):  # E8M0 has no zero: the quotient is what counts
        quantize(np.array([1e-300]), "int8", scale_fmt="e8m0")
    q = quantize(np.array([-1.7e308, 1.7e308]), "uint8", symmetric=False, scale_fmt="fp64")  # span overflows
    assert q.scales.ravel()[0] == float(Fraction(int(1.7e308)) * 2 / 255)  # float64 holds 3.4e308/255
