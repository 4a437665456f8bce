"""quantize against numpy, ml_dtypes and torch where they implement the same rule, on seeded data.

* FP8 after scaling: numpy's FP32 division (IEEE, correctly rounded) gives the same t as numoracle's
  compute='fp32' step; ml_dtypes' and torch's casts of t give the same codes where they saturate
  (ml_dtypes never does: clamp first; torch's CPU E4M3FN cast does, a deviation numoracle records).
* INT8: the plain numpy rule np.clip(np.rint(x / s), -127, 127) with FP32 division is numoracle's
  default model bit for bit; numpy with float64 division is the compute='fp64' model, and torch's
  quantize_per_tensor / quantize_per_channel is the reciprocal=True model. Where the models differ
  a witness shows the element and why.
* NVFP4: TransformerEngine's reference recipe restated with torch FP32 ops gives numoracle's codes.
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from numoracle.conformance.deviations import deviations_for
from numoracle.formats import FP4_E2M1FN, FP8_E4M3FN, FP8_E5M2, INT8
from numoracle.quant.quantizer import quantize

torch = pytest.importorskip("torch")

E4M3, E5M2 = FP8_E4M3FN, FP8_E5M2


def data(seed: int, shape=(64, 256)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.logspace(-4, 4, shape[0])[:, None]
    x[0, :5] = [0.0, -0.0, 1e-41, -3e-39, 65504.0]  # zeros and FP32 subnormals
    return x.astype(np.float32)


def codes_of(a) -> np.ndarray:
    return np.asarray(a).view(np.uint8)


@pytest.mark.parametrize(("fmt", "ml"), [(E4M3, ml_dtypes.float8_e4m3fn), (E5M2, ml_dtypes.float8_e5m2)])
@pytest.mark.parametrize("rule", ["absmax", "mx"])
def test_fp8_after_scaling_matches_ml_dtypes_and_torch(fmt, ml, rule):
    x = data(1)
    kw = {"granularity": "channel", "axis": 0} if rule == "absmax" else {"scale_rule": "mx"}
    q = quantize(x, fmt, **kw)
    s = q.scale_per_element().astype(np.float32)
    if rule == "absmax":  # the scale itself: numpy's FP32 division amax / max_finite, rounded once
        assert np.array_equal(q.scales.ravel(), (np.abs(x).max(axis=1) / np.float32(fmt.max_finite)).astype(np.float64))
    else:  # X = 2^(floor(log2 amax) - emax): frexp is exact; E8M0 codes by ml_dtypes
        _, e = np.frexp(np.abs(x).reshape(64, -1, 32).max(axis=-1))
        X = np.exp2(np.clip(e - 1 - fmt.emax, -127, 127).astype(np.float64))
        assert np.array_equal(q.scale_codes, X.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8))
    t = x / s  # numpy FP32 division: correctly rounded, as the compute='fp32' model
    assert np.array_equal(q.scaled, t.astype(np.float64))
    m = float(fmt.max_finite)
    assert np.array_equal(q.codes, codes_of(np.clip(t, -m, m).astype(ml)))
    tt = torch.from_numpy(np.clip(t, -m, m)).to(getattr(torch, ml.__name__))
    assert np.array_equal(q.codes, tt.view(torch.uint8).numpy())
    if rule == "mx" and fmt == E4M3:
        assert q.clipped.sum() > 0  # MX lands amax in [256, 512): some elements saturate
        # unclamped: torch's CPU cast saturates (numoracle records it), ml_dtypes gives NaN (non-saturating OCP)
        assert any(d.kind == "saturation_vs_nan" for d in deviations_for("torch", "fp32", "fp8_e4m3fn"))
        assert np.array_equal(q.codes, torch.from_numpy(t).to(torch.float8_e4m3fn).view(torch.uint8).numpy())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raw = codes_of(t.astype(ml))
        differ = raw != q.codes
        assert np.array_equal(differ, q.clipped) and np.all(np.isnan(t[differ].astype(ml).astype(np.float32)))


def test_int8_per_channel_matches_plain_numpy():
    w = data(2, (256, 128)).T.copy()  # per output channel (axis 0), channels of very different scales
    s = np.abs(w).max(axis=1, keepdims=True) / np.float32(127)  # FP32 division: one correct rounding
    ref = np.clip(np.rint(w / s), -127, 127).astype(np.int8)
    q = quantize(w, INT8, granularity="channel", axis=0)
    assert np.array_equal(q.scales, s.astype(np.float64))
    assert np.array_equal(q.codes.view(np.int8), ref)


def test_int8_float64_division_is_the_fp64_model():
    """numpy with float64 division is compute='fp64'; it differs from the FP32 model exactly where fl32(x / s)
    rounds onto a tie k + 1/2 that x / s misses (random data almost never does: x = fl32((k + 1/2) s) does)."""
    rng = np.random.default_rng(5)
    s = rng.uniform(0.5, 2, (16, 1)).astype(np.float32)
    w = ((rng.integers(-126, 126, (16, 512)) + 0.5) * s).astype(np.float32)
    w[:, 0] = 127 * s[:, 0]  # the amax: fl32(amax / 127) is s or next to it, so x / s lies next to ties
    q = quantize(w, INT8, granularity="channel", axis=0)
    q64 = quantize(w, INT8, granularity="channel", axis=0, compute="fp64")
    s = q.scales.astype(np.float32)
    ref = np.clip(np.rint(w / s), -127, 127).astype(np.int8)
    ref64 = np.clip(np.rint(w.astype(np.float64) / s), -127, 127).astype(np.int8)
    assert np.array_equal(q.codes.view(np.int8), ref) and np.array_equal(q64.codes.view(np.int8), ref64)
    diff = ref64 != ref
    assert diff.sum() > 100 and np.array_equal(diff, q.ties & ~q64.ties & (q.codes != q64.codes))


def test_compute_precision_witness():
    """Witness: x = 0.5, s = fl32(5/255): x/s = 25.49999996 rounds to the FP32 tie 25.5, so the FP32 model
    (ONNX's own reference, and every FP32 kernel) gives 26 where float64 division gives 25."""
    x, s = np.float32([0.5]), float(np.float32(5 / 255))
    assert np.rint(x / np.float32(s))[0] == 26 and np.rint(x.astype(np.float64) / s)[0] == 25
    assert quantize(x, INT8, scale=s).codes[0] == 26
    assert quantize(x, INT8, scale=s, compute="fp64").codes[0] == 25


@pytest.mark.filterwarnings("ignore:.*quantize_per_tensor.*:UserWarning")
def test_torch_quantize_per_tensor_and_channel_are_the_reciprocal_model():
    x = data(3, (32, 300))
    for s in (7.0, 0.1, 0.0123, float(np.float32(5 / 255))):
        s = float(np.float32(s))
        tq = torch.quantize_per_tensor(torch.from_numpy(x), s, 3, torch.qint8).int_repr().numpy()
        q = quantize(x, INT8, symmetric=False, scale=s, zero_point=3, reciprocal=True)
        assert np.array_equal(q.codes.view(np.int8), tq)
    sc = (np.abs(x).max(axis=1) / np.float32(127)).astype(np.float64)
    tq = torch.quantize_per_channel(torch.from_numpy(x), torch.from_numpy(sc), torch.zeros(32, dtype=torch.int64),
                                    0, torch.qint8).int_repr().numpy()
    q = quantize(x, INT8, granularity="channel", axis=0, scale=sc, clip="full", reciprocal=True)
    assert np.array_equal(q.codes.view(np.int8), tq)
    # witness: 885.5 / 7 = 126.5 (a tie -> 126 by division); torch multiplies by fl32(1/7) and gets 127
    w = torch.quantize_per_tensor(torch.tensor([885.5]), 7.0, 0, torch.qint8).int_repr().item()
    assert w == 127 == quantize(np.float32([885.5]), INT8, scale=7.0, reciprocal=True).codes[0]
    assert quantize(np.float32([885.5]), INT8, scale=7.0).codes[0] == 126


def _te_nvfp4_reference(x: torch.Tensor) -> tuple[np.ndarray, np.ndarray, float]:
    """TransformerEngine's NVFP4 reference recipe (1x16 blocks), restated with torch FP32 operations."""
    f32 = torch.float32
    fp4_max, fp8_max = torch.tensor(6.0, dtype=f32), torch.tensor(448.0, dtype=f32)
    amax = x.abs().max().to(f32)
    s_enc = torch.minimum((fp8_max * fp4_max) / amax, torch.tensor(torch.finfo(f32).max))
    s_dec = torch.tensor(1.0, dtype=f32) / s_enc
    blocks = x.view(x.shape[0], -1, 16)
    vec_max = blocks.abs().amax(dim=-1, keepdim=True)
    d = torch.clamp((vec_max / fp4_max) * s_enc, max=fp8_max).to(torch.float8_e4m3fn)
    enc = torch.minimum(torch.tensor(1.0, dtype=f32) / (d.to(f32) * s_dec), torch.tensor(torch.finfo(f32).max))
    scaled = torch.clamp(blocks * enc, -fp4_max, fp4_max).reshape(x.shape)
    fp4 = scaled.numpy().astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & np.uint8(0xF)
    return fp4, d.view(torch.uint8).numpy()[..., 0], float(s_dec)


def test_nvfp4_matches_transformer_engine_recipe():
    x = data(4, (32, 128))
    x[5, 16:32] = 0.0  # an all-zero block: d = 0
    x[6, 32:48] *= 1e-7  # a block whose d rounds to 0 though it is not zero
    codes, d, glob = _te_nvfp4_reference(torch.from_numpy(x))
    q = quantize(x, FP4_E2M1FN, scale_rule="nvfp4", reciprocal=True)
    assert q.global_scale == glob
    assert np.array_equal(q.scale_codes, d)
    assert np.array_equal(q.codes, codes)
