"""Quantization error bounds, the quantized-matmul bound, and the SQNR / cosine metrics
(numoracle.quant.bounds.error)."""

from __future__ import annotations

import math
import zlib
from fractions import Fraction

import ml_dtypes
import mpmath
import numpy as np
import pytest

from numoracle import expected_error_bound
from numoracle.quant.bounds.error import cosine, cosine_bound, sqnr, sqnr_bound

U32 = Fraction(1, 2**24)


# ---- metrics: hand values and exact references ------------------------------------------------------
def _sqnr_ref(x, y) -> float:
    """SQNR from Fractions (exact sums) and mpmath (the logarithm)."""
    num = sum(Fraction(float(v)) ** 2 for v in np.ravel(x))
    den = sum((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(np.ravel(x), np.ravel(y)))
    with mpmath.workdps(40):
        return float(10 * mpmath.log10(mpmath.mpf(num.numerator) / num.denominator
                                       / (mpmath.mpf(den.numerator) / den.denominator)))


def test_sqnr_hand_values():
    assert sqnr([3.0, 4.0], [3.0, 4.5]) == pytest.approx(20.0, abs=1e-13)  # 25 / 0.25 = 100
    assert sqnr([1.0, 2.0], [1.0, 2.5]) == pytest.approx(10 * math.log10(20), abs=1e-13)
    assert sqnr([1.0, -2.0], [1.0, -2.0]) == math.inf
    assert sqnr([0.0, 0.0], [0.0, 0.0]) == math.inf
    assert sqnr([0.0, 0.0], [0.0, 1e-300]) == -math.inf


def test_sqnr_exact_where_float_sums_fail():
    # the difference 1 - 2^-60 is not a float64: naive float sums give 0 dB, the exact value is ~1e-17 dB
    x, y = np.array([1.0]), np.array([2.0**-60])
    naive = 10 * math.log10(float(np.sum(x * x)) / float(np.sum((x - y) ** 2)))
    assert naive == 0.0 and sqnr(x, y) > 0
    assert sqnr(x, y) == pytest.approx(_sqnr_ref(x, y), rel=1e-12)
    # squares overflow float64 naively; the scaled exact sums do not
    x, y = np.array([2.0**600, 1.0]), np.array([2.0**600, 0.0])
    assert sqnr(x, y) == pytest.approx(12000 * math.log10(2), rel=1e-14)
    rng = np.random.default_rng(5)
    x = rng.normal(size=300)
    y = x + rng.normal(size=300) * 1e-3
    assert sqnr(x, y) == pytest.approx(_sqnr_ref(x, y), rel=1e-13)


def test_sqnr_accepts_native_and_torch():
    torch = pytest.importorskip("torch")
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = x.astype(ml_dtypes.bfloat16)
    assert sqnr(x, y) == math.inf  # small integers are exact in bf16
    assert sqnr(torch.tensor([3.0, 4.0]), torch.tensor([3.0, 4.5])) == pytest.approx(20.0, abs=1e-12)


def test_cosine_hand_values():
    assert cosine([3.0, 4.0], [4.0, 3.0]) == pytest.approx(24 / 25, abs=1e-15)
    assert cosine([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0
    assert cosine([1.0, 2.0], [-1.0, -2.0]) == -1.0
    assert cosine([1.0, 0.0], [0.0, 1.0]) == 0.0
    assert math.isnan(cosine([0.0, 0.0], [1.0, 2.0]))
    # huge and tiny magnitudes: the power-of-two scaling keeps the sums in range
    assert cosine([1e300, 1e300], [1e-300, 1e-300]) == pytest.approx(1.0, abs=1e-15)


def test_metric_errors():
    with pytest.raises(ValueError, match="shape"):
        sqnr([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="NaN/inf"):
        cosine([1.0, math.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="non-negative"):
        sqnr_bound([1.0, 2.0], [-1.0, 0.0])


def test_implied_bounds_hold_for_every_perturbation_within_the_bound():
    rng = np.random.default_rng(11)
    x = rng.normal(size=(64, 32))
    b = np.abs(rng.normal(size=x.shape)) * 1e-2
    s_b, c_b = sqnr_bound(x, b), cosine_bound(x, b)
    for trial in range(20):
        e = b * rng.uniform(-1, 1, size=x.shape)
        if trial == 0:
            e = b * np.sign(rng.normal(size=x.shape))  # every element at its bound
        assert sqnr(x, x + e) >= s_b
        assert cosine(x, x + e) >= c_b
    assert cosine_bound(x, np.zeros_like(x)) == 1.0 and sqnr_bound(x, np.zeros_like(x)) == math.inf
    assert cosine_bound([1.0], [2.0]) == -1.0  # ||e|| >= ||x||: nothing guaranteed
    # tight: the bound's SQNR is attained when the errors equal the bounds
    assert sqnr(x, x + b) == pytest.approx(s_b, abs=1e-9) and sqnr(x, x + b) >= s_b


# ---- the a priori quantized-matmul bound ---------------------------------------------------------------
def test_quantized_matmul_int8_components():
    b = expected_error_bound("quantized_matmul", "int8", 4096)
    names = [c.name for c in b.components]
    assert names[:2] == ["products", "accumulation"] and all(c.count == 0 for c in b.components[:2])
    assert b.acc.name == "int32" and b.block == 4096 and b.m == 1
    # exact integer dot product, then D -> fp32, fl(s_a s_b), fl(D * S): three FP32 roundings
    assert b.coefficient == (1 + U32) ** 3 - 1
    text = str(b)
    for name in ("A quantisation", "B quantisation", "cross term", "integer result conversion",
                 "scale product s_a*s_b", "scale multiply"):
        assert name in text


def test_quantized_matmul_mx_block_components():
    b = expected_error_bound("quantized_matmul", "fp8_e4m3fn", 1024, block=32, scale_fmt="e8m0fnu",
                             acc="fp32", order="sequential", out="bf16")
    # inside 32-blocks 31 FP32 roundings; E8M0 scale products and multiplies exact; 31 block-sum additions
    assert b.kernel_coefficient == (1 + U32) ** (31 + 31) - 1
    assert b.coefficient == b.kernel_coefficient * (1 + Fraction(1, 2**8))
    assert b.to_dict()["block"] == 32 and b.m == 32
    fp32_scales = expected_error_bound("quantized_matmul", "fp8_e4m3fn", 1024, block=128, acc="fp32")
    assert fp32_scales.kernel_coefficient == (1 + U32) ** (127 + 2 + 7) - 1
    nv = expected_error_bound("quantized_matmul", "fp4_e2m1fn", 64, block=16, scale_fmt="fp8_e4m3fn",
                              acc="fp32", order="sequential", global_scale=True)
    # E4M3 x E4M3 scale products are exact in FP32 (4 + 4 bits); the multiply rounds; 2 global roundings
    assert nv.kernel_coefficient == (1 + U32) ** (15 + 1 + 3 + 2) - 1


def test_quantized_matmul_bad_arguments():
    with pytest.raises(ValueError, match="kind='worst'"):
        expected_error_bound("quantized_matmul", "int8", 64, kind="probabilistic")
    with pytest.raises(ValueError, match="block"):
        expected_error_bound("quantized_matmul", "int8", 64, block=65)
    with pytest.raises(TypeError, match="block"):
        expected_error_bound("matmul", "bf16", 64, block=32)
    with pytest.raises(ValueError, match="data"):
        expected_error_bound("quantized_matmul", "int8", 64).rtol_atol()
    with pytest.raises(ValueError, match="integer accumulator"):
        expected_error_bound("quantized_matmul", "fp8_e4m3fn", 64, acc="int32")


# ---- elementwise quantisation bounds --------------------------------------------------------------------
from numoracle.quant.bounds.error import quantization_error_bound  # noqa: E402
from numoracle.quant.quantizer import quantize  # noqa: E402


def _exact_errors(q, x) -> list[Fraction]:
    """|x - (q - zp) s g| per element, in Fractions (independent of dequantize and of the bound's float64)."""
    v = q.values().ravel()
    s = q.layout.expand(np.asarray(q.scales, np.float64)).ravel()
    z = np.zeros(v.size) if q.zero_points is None else q.layout.expand(np.asarray(q.zero_points, float)).ravel()
    g = Fraction(1) if q.global_scale is None else Fraction(float(q.global_scale))
    xs = np.asarray(x, np.float64).ravel()
    return [abs(Fraction(float(xi)) - (Fraction(float(vi)) - Fraction(float(zi))) * Fraction(float(si)) * g)
            for xi, vi, zi, si in zip(xs, v, z, s)]


def _check(x, exact: bool = False, **kw):
    """quantize, bound, and assert the bound holds (TwoSum-exact, or Fraction-exact when ``exact``)."""
    q = quantize(x, **kw)
    r = quantization_error_bound(q, x)
    assert not r.exceeded(q).any(), (kw, np.flatnonzero(r.exceeded(q))[:5])
    if exact:
        b = r.bound.ravel()
        for i, e in enumerate(_exact_errors(q, x)):
            if np.isfinite(b[i]):
                assert e <= Fraction(float(b[i])), (kw, i, float(e), b[i])
    return q, r


CONFIGS = [
    dict(fmt="int8"), dict(fmt="int8", clip="full"), dict(fmt="int8", granularity="channel", axis=0),
    dict(fmt="int8", reciprocal=True), dict(fmt="int8", symmetric=False), dict(fmt="uint8", symmetric=False),
    dict(fmt="int4", granularity=("group", 32)), dict(fmt="int4", symmetric=False, granularity=("group", 16)),
    dict(fmt="int8", rounding="rtz"), dict(fmt="int8", rounding="rna", compute="bf16"),
    dict(fmt="fp8_e4m3fn", granularity=("block", 32)), dict(fmt="fp8_e5m2", granularity=("block", (8, 16))),
    dict(fmt="fp8_e4m3fn", granularity=("block", 32), scale_rule="pow2"),
    dict(fmt="fp8_e4m3fn", granularity="channel", axis=0, rounding="ru", compute_rounding="rtz"),
    dict(fmt="fp8_e4m3fn", scale_rule="mx"), dict(fmt="fp6_e3m2fn", scale_rule="mx"),
    dict(fmt="fp4_e2m1fn", scale_rule="mx"), dict(fmt="fp4_e2m1fn", scale_rule="nvfp4"),
    dict(fmt="fp4_e2m1fn", scale_rule="nvfp4", reciprocal=True), dict(fmt="fp8_e4m3fn", compute="fp16"),
]


@pytest.mark.parametrize("kw", CONFIGS, ids=lambda k: "-".join(f"{v}" for v in k.values()))
def test_bound_holds_on_seeded_random_data(kw):
    rng = np.random.default_rng(zlib.crc32(repr(kw).encode()))
    x = (rng.standard_t(3, size=(32, 64)) * rng.choice([1e-3, 1.0, 50.0], size=(32, 1))).astype(np.float32)
    q, r = _check(x, **kw)
    ok = r.in_range
    # the SQNR and cosine the bound implies are never above the measured ones
    y = q.dequantize()
    assert sqnr(x, y) >= r.sqnr_bound() and cosine(x, y) >= r.cosine_bound()
    # useful, not vacuous: the largest error reaches most of its bound, and in range it is about half a step
    assert float(np.nanmax(r.ratio(q))) > 0.8
    assert np.all(r.bound[ok] <= r.step[ok] * (0.5 if kw.get("rounding", "rne") in ("rne", "rna") else 1) * 1.001
                  + r.compute_term[ok])


def test_bound_exact_on_small_data_with_fractions():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 32)) * np.array([[1e-30], [1.0], [1e20], [3.0]])  # float64, not fp32 values
    for kw in (dict(fmt="int8", granularity="channel", axis=0), dict(fmt="fp8_e4m3fn", scale_rule="mx"),
               dict(fmt="int4", symmetric=False, granularity="channel", axis=0),
               dict(fmt="fp4_e2m1fn", scale_rule="nvfp4", reciprocal=True)):
        _check(x, exact=True, **kw)


def test_hand_worked_int8_bound():
    x = np.array([127 / 8, 0.3, -1.0625, 0.0])  # amax 127/8: s = 2^-3 exactly
    q, r = _check(x, exact=True, fmt="int8")
    assert float(q.scales.ravel()[0]) == 0.125
    # 0.3: t* = 2.4, one FP32 rounding: |t - t*| <= 2.4 (1 + 2^-53) 2^-24 + 2^-150, and s/2 = 1/16
    assert r.bound[1] >= 0.0625 and r.bound[1] - 0.0625 == pytest.approx(0.125 * 2.4 * 2**-24, rel=1e-6)
    assert r.bound[3] == pytest.approx(0.125 * 0.5, rel=1e-6) and r.in_range[1:].all() and r.edge[0]
    assert str(r).startswith("QuantErrorReport: 4 element(s) of int8 (rne)")


def test_compute_rounding_moves_t_across_a_tie():
    # s = 1 exactly (amax 127); x = 1.5 - 2^-25 is no tie, but fl32(x) = 1.5 is, and RNE takes it to 2:
    # the error 0.5 + 2^-25 exceeds s/2; the bound's compute term covers it
    x = np.array([127.0, 1.5 - 2.0**-25])
    q, r = _check(x, exact=True, fmt="int8")
    assert q.values()[1] == 2 and q.ties[1]
    assert _exact_errors(q, x)[1] == Fraction(1, 2) + Fraction(1, 2**25) > Fraction(1, 2)
    assert r.bound[1] >= 0.5 + 2.0**-25
    # with reciprocal=True the same happens through fl(x * fl(1/s))
    _check(np.array([127.0 * 3, 4.5 - 2.0**-23]), exact=True, fmt="int8", reciprocal=True)


def test_exact_ties_and_clip_edges():
    s = 2.0**-3
    k = np.arange(-127, 127)
    ties = (k + 0.5) * s  # t = k + 1/2 exactly
    edge = np.array([127 * s, -127 * s, 126.75 * s])
    x = np.concatenate([ties, edge])
    q, r = _check(x, exact=True, fmt="int8")
    assert q.ties[: ties.size].all()
    err = _exact_errors(q, x)
    assert all(e == Fraction(1, 16) for e in err[: ties.size])  # half a step, exactly
    # full range: -128 is reachable; asymmetric ints: zp shifts the range
    _check(np.concatenate([ties, [-128 * s, -128.6 * s]]), exact=True, fmt="int8", clip="full")
    _check(np.concatenate([ties, [1.0, 40.0]]), exact=True, fmt="uint8", symmetric=False)
    # given scales: values beyond the range clip, with the exact saturation error
    xs = np.array([0.0, 10.0, 200.0, -300.0, 127.5, 126.5, -127.5, 127.4, -128.0, 127.0])
    q, r = _check(xs, exact=True, fmt="int8", scale=np.float64(1.0))
    assert r.clipped.tolist() == [False, False, True, True, True, False, True, True, True, False]
    assert r.edge.tolist() == [False] * 9 + [True]  # t = 127 +- the compute rounding: either side
    assert r.bound[2] == pytest.approx(73.0) and r.bound[3] == pytest.approx(173.0)
    assert _exact_errors(q, xs)[4] == Fraction(1, 2) == _exact_errors(q, xs)[6]


def test_mx_block_clipping_to_448():
    # an MX E4M3 block whose amax lands in [256, 512) after scaling: 480 > 464 saturates to 448
    x = np.full(32, 0.5)
    x[0] = 480.0 * 2.0**-0  # floor(log2 480) = 8 = emax: X = 1, t = 480
    x[1] = 464.0  # rounds to 448 without clipping (464 is the E4M3 tie below its overflow threshold)
    q, r = _check(x, exact=True, fmt="fp8_e4m3fn", scale_rule="mx")
    assert float(q.scales.ravel()[0]) == 1.0 and r.clipped[0] and r.bound[0] == pytest.approx(32.0)
    assert _exact_errors(q, x)[0] == 32 and _exact_errors(q, x)[1] == 16


def test_tiny_and_huge_scales_and_subnormals():
    rng = np.random.default_rng(9)
    base = np.clip(rng.normal(size=64), -3, 3)
    for mag in (1e-40, 1e-44, 1e38, 1e-20):  # FP32 subnormal scales, near-overflow, tiny normal
        x = (base * mag).astype(np.float32)
        for kw in (dict(fmt="int8", scale_range="clamp"), dict(fmt="int8", scale_range="clamp", reciprocal=True),
                   dict(fmt="fp8_e4m3fn", scale_range="clamp"), dict(fmt="fp8_e5m2", scale_rule="mx")):
            _check(x, exact=True, **kw)
    # subnormal element values (E4M3 below 2^-6 after scaling) and subnormal t in an FP16 compute
    x = np.concatenate([[448.0], np.geomspace(1e-7, 1e-2, 60), -np.geomspace(1e-9, 1e-5, 30)])
    _check(x, exact=True, fmt="fp8_e4m3fn", compute="fp16")
    _check(x, exact=True, fmt="fp8_e4m3fn", compute="fp16", compute_rounding="rtz", rounding="rtz")
    # float64 data beyond FP32's range with an FP64 scale and compute
    _check(np.array([1e300, -3e299, 1e-300, 7.0]), exact=True, fmt="int8", scale_fmt="fp64", compute="fp64")


def test_zero_scale_nan_blocks_and_non_saturating_overflow():
    # NVFP4: a block whose E4M3 scale rounds to 0 dequantises to 0: the error is |x|, exactly
    x = np.concatenate([np.full(16, 1e-9), np.full(16, 1e3)]).astype(np.float32)
    q, r = _check(x, exact=True, fmt="fp4_e2m1fn", scale_rule="nvfp4")
    assert (q.scales.ravel()[0] == 0) and np.array_equal(r.bound[:16], np.abs(x[:16]).astype(np.float64))
    # NaN under nan="propagate": its block has a NaN scale, so no finite bound there (void), others hold
    y = np.arange(64, dtype=np.float32).reshape(2, 32)
    y[0, 3] = np.nan
    q, r = _check(y, fmt="fp8_e4m3fn", scale_rule="mx")
    assert r.nonfinite[0, 3] and r.void[0].sum() == 31 and not r.void[1].any()
    # overflow="nan" (OCP non-saturating): elements that may leave the range get no bound
    z = np.array([1.0, 2.0, 500.0])
    q, r = _check(z, fmt="fp8_e4m3fn", scale=np.float64(1.0), overflow="nan")
    assert r.void.tolist() == [False, False, True] and "void" in str(r).lower()


def test_quantization_error_bound_inputs():
    x = np.linspace(-1, 1, 64).astype(np.float32)
    a = quantization_error_bound("int8", x)
    b = quantization_error_bound({"fmt": "int8"}, x)
    assert np.array_equal(a.bound, b.bound)
    with pytest.raises(TypeError, match="no quantize parameters"):
        quantization_error_bound(quantize(x, "int8"), x, fmt="int8")
    with pytest.raises(ValueError, match="shape"):
        quantization_error_bound(quantize(x, "int8"), x[:10])


# ---- the quantized-matmul bound against an exact reference and a simulated kernel ------------------------
from numoracle import exact_matmul, simulate  # noqa: E402
from numoracle.core.engine.convert import cast as _cast  # noqa: E402
from numoracle.core.engine.convert import decode as _decode  # noqa: E402
from numoracle.models.orders.basic import Sequential  # noqa: E402
from numoracle.quant.bounds.matmul import quantized_matmul_bound  # noqa: E402

_NATIVE = {"fp8_e4m3fn": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2,
           "fp4_e2m1fn": ml_dtypes.float4_e2m1fn, "fp6_e3m2fn": ml_dtypes.float6_e3m2fn}


def _operand(X, q, axis_k):
    """(element values (q - zp) as a native array, per-block scales at each K-block start, global scale)."""
    if q is None:
        return X, np.ones(X.shape), 1.0
    v = q.values()
    if q.zero_points is not None:
        v = v - q.layout.expand(np.asarray(q.zero_points, np.float64))
    nat = v.astype(_NATIVE[q.fmt.name]) if q.fmt.name in _NATIVE else v.astype(np.float32)
    return nat, q.layout.expand(np.asarray(q.scales, np.float64)), q.global_scale or 1.0


def _kernel(A, B, qa, qb, G, int_acc, out=None):
    """The modelled kernel, bit for bit: block partials (exact int64, or simulate in FP32), then FP32
    numpy arithmetic (correctly rounded): fl(D) * fl(s_a s_b), blocks added in order, global scales last."""
    va, sa, ga = _operand(A, qa, -1)
    vb, sb, gb = _operand(B, qb, -2)
    K = A.shape[1]
    C = None
    for k0 in range(0, K, G):
        a, b = va[:, k0:k0 + G], vb[k0:k0 + G, :]
        if int_acc:
            D = (np.asarray(a, np.float64).astype(np.int64) @ np.asarray(b, np.float64).astype(np.int64))
            D = D.astype(np.float32)
        else:
            D = simulate("matmul", a, b, acc="fp32", order=Sequential()).astype(np.float32)
        S = sa[:, k0:k0 + 1].astype(np.float32) * sb[k0:k0 + 1, :].astype(np.float32)
        P = D * S
        C = P if C is None else C + P
    if ga != 1.0 or gb != 1.0:
        C = C * (np.float32(ga) * np.float32(gb))
    if out is not None:
        return _decode(_cast(C, out), out)
    return C.astype(np.float64)


def _assert_within(C, A, B, tol):
    ref = exact_matmul(A, B)  # correctly rounded float64 of the exact product
    err = np.abs(C - ref) + np.spacing(np.abs(ref))  # >= |C - exact|, up to float64 rounding of tiny terms
    assert np.all(err <= tol), (float(np.max(err / tol)), np.unravel_index(np.argmax(err / tol), tol.shape))
    return float(np.max(np.abs(C - ref) / tol))


def _mm_case(A, B, ka, kb, acc=None, out=None, int_acc=False):
    qa = quantize(A, **ka) if ka else None
    qb = quantize(B, **kb) if kb else None
    b = quantized_matmul_bound(A, B, qa, qb, acc=acc, order="sequential", out=out)
    parts = b.tolerance(A, B, qa=qa, qb=qb, parts=True)
    # the quantisation part alone covers the exact product of the dequantised operands
    Ah = A if qa is None else qa.dequantize()
    Bh = B if qb is None else qb.dequantize()
    _assert_within(exact_matmul(Ah, Bh), A, B, parts["quantization"] * (1 + 2.0**-40))
    ratio = _assert_within(_kernel(A, B, qa, qb, b.block, int_acc, out), A, B, parts["total"])
    return b, parts, ratio


def test_notebook_per_channel_vs_per_tensor():
    """The notebook's experiment: one output channel scaled 10x; INT8 symmetric weights, FP32 activations."""
    rng = np.random.default_rng(10)
    x = rng.normal(size=(32, 128)).astype(np.float32)
    w = (rng.normal(size=(128, 32)) * 0.2).astype(np.float32)
    w[:, 0] *= 10
    ref = exact_matmul(x, w)
    res = {}
    for name, g in (("channel", dict(granularity="channel", axis=1)), ("tensor", dict(granularity="tensor"))):
        b, parts, _ = _mm_case(x, w, None, dict(fmt="int8", **g), acc="fp32")
        qw = quantize(w, "int8", **g)
        err = np.abs(exact_matmul(x, qw.dequantize()) - ref)
        res[name] = (err, parts["total"])
        assert np.all(err <= parts["total"])
    (err_c, tol_c), (err_t, tol_t) = res["channel"], res["tensor"]
    assert err_c.mean() < err_t.mean()  # per-channel is more accurate ...
    assert tol_c.mean() < tol_t.mean()  # ... and the bound says so beforehand,
    assert np.all(tol_c[:, 1:] < tol_t[:, 1:])  # for every output of the unscaled channels
    assert np.allclose(tol_c[:, 0], tol_t[:, 0], rtol=1e-3)  # channel 0 keeps its scale
    assert err_t.mean() / err_c.mean() > 3 and tol_t.mean() / tol_c.mean() > 3


@pytest.mark.parametrize("case", ["int8-int32", "int8-asym", "fp8-block32", "mx-fp8", "mx-fp4", "nvfp4",
                                  "int4-weight-only", "e5m2-out-bf16"])
def test_quantized_matmul_bound_holds_against_the_simulated_kernel(case):
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    M, K, N = 8, 128, 12
    A = rng.normal(size=(M, K)).astype(np.float32)
    B = (rng.standard_t(4, size=(K, N)) * 0.1).astype(np.float32)
    row, col = dict(granularity="channel", axis=0), dict(granularity="channel", axis=1)
    spec = {
        "int8-int32": (dict(fmt="int8", **row), dict(fmt="int8", **col), None, None, True),
        "int8-asym": (dict(fmt="int8", symmetric=False), dict(fmt="int8", **col), None, "bf16", True),
        "fp8-block32": (dict(fmt="fp8_e4m3fn", granularity=("block", 32)),
                        dict(fmt="fp8_e4m3fn", granularity=("block", 32), axis=0), "fp32", None, False),
        "mx-fp8": (dict(fmt="fp8_e4m3fn", scale_rule="mx"), dict(fmt="fp8_e4m3fn", scale_rule="mx", axis=0),
                   "fp32", None, False),
        "mx-fp4": (dict(fmt="fp4_e2m1fn", scale_rule="mx"), dict(fmt="fp4_e2m1fn", scale_rule="mx", axis=0),
                   "fp32", None, False),
        "nvfp4": (dict(fmt="fp4_e2m1fn", scale_rule="nvfp4"), dict(fmt="fp4_e2m1fn", scale_rule="nvfp4", axis=0),
                  "fp32", None, False),
        "int4-weight-only": (None, dict(fmt="int4", granularity=("group", 32), axis=0), "fp32", None, False),
        "e5m2-out-bf16": (dict(fmt="fp8_e5m2", **row), dict(fmt="fp8_e5m2", **col), "fp32", "bf16", False),
    }[case]
    ka, kb, acc, out, int_acc = spec
    b, parts, ratio = _mm_case(A, B, ka, kb, acc=acc, out=out, int_acc=int_acc)
    assert 0 < ratio <= 1 and b.block in (32, 16, 128)
    assert all(name in str(b) for name in ("A quantisation", "scale multiply"))


def test_quantized_matmul_adversarial():
    rng = np.random.default_rng(77)
    M, K, N = 4, 64, 6
    i8 = (dict(fmt="int8", scale_range="clamp"), dict(fmt="int8", granularity="channel", axis=1,
                                                       scale_range="clamp"))
    for sa, sb in ((1e-30, 1e-12), (1e-40, 1.0), (1e17, 1e18), (1.0, 1.0)):
        A = (rng.normal(size=(M, K)) * sa).astype(np.float32)
        B = (rng.normal(size=(K, N)) * sb).astype(np.float32)
        _mm_case(A, B, *i8, int_acc=True)
        _mm_case(A, B, dict(fmt="fp8_e4m3fn", scale_rule="mx"), dict(fmt="fp8_e4m3fn", scale_rule="mx", axis=0),
                 acc="fp32")
    # exact ties everywhere (x / s = k + 1/2) and heavy cancellation (the exact product is 0)
    s = 2.0**-4
    A = ((rng.integers(-127, 127, size=(M, K)) + 0.5) * s).astype(np.float32)
    A[:, 0] = 127 * s
    B = np.tile(np.array([[1.0], [-1.0]], np.float32), (K // 2, N))
    _mm_case(A, B, dict(fmt="int8"), dict(fmt="int8"), int_acc=True)
    C = np.repeat(A[:, :1], K, axis=1) * np.tile([1, -1], K // 2).astype(np.float32)
    b, parts, _ = _mm_case(C, np.ones((K, N), np.float32), dict(fmt="int8"), None, acc="fp32")
    assert np.all(exact_matmul(C, np.ones((K, N), np.float32)) == 0) and np.all(parts["total"] > 0)


def test_quantized_matmul_errors():
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(4, 64)).astype(np.float32), rng.normal(size=(64, 3)).astype(np.float32)
    qa = quantize(A, "int8", granularity=("group", 32))
    qb = quantize(B, "int8", granularity=("group", 16), axis=0)
    assert quantized_matmul_bound(A, B, qa, qb).block == 16
    b = expected_error_bound("quantized_matmul", "int8", 64)
    with pytest.raises(ValueError, match="K-blocks of 64"):
        b.tolerance(A, B, qa=qa, qb=qb)
    with pytest.raises(ValueError, match="not a int8 value|is not a int8"):
        b.tolerance(A, B)  # plain float operands are not int8 values
    with pytest.raises(ValueError, match="2-D"):
        quantized_matmul_bound(A[0], B, None, None)
    with pytest.raises(ValueError, match="nest"):
        quantized_matmul_bound(A[:, :48], B[:48], quantize(A[:, :48], "int8", granularity=("group", 16)),
                               quantize(B[:48], "int8", granularity=("group", 24), axis=0))
    big = expected_error_bound("quantized_matmul", "int8", 64, a_params={}, b_params={})
    with pytest.raises(ValueError, match="overflow"):
        big.tolerance(A * np.float32(1e37), B * np.float32(1e37))


def test_exceeded_is_exact_at_the_bound():
    x = np.array([1.0, -0.3, 1e-3])
    r = quantization_error_bound("int8", x)
    for i in range(3):
        b = Fraction(float(r.bound[i]))
        for sign in (1, -1):
            centre = float(Fraction(float(x[i])) - sign * b)  # the nearest float64 to x -+ b
            v = np.array([centre] * 3, np.float64)
            for step in range(-3, 4):
                w = centre
                for _ in range(abs(step)):
                    w = math.nextafter(w, math.inf if step > 0 else -math.inf)
                v[i] = w
                exact = abs(Fraction(float(x[i])) - Fraction(w)) > b
                assert bool(r.exceeded(v)[i]) == exact, (i, sign, step)
