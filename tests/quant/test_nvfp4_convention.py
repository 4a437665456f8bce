"""NVFP4's per-tensor FP32 scale as a library stores it: global_scale_convention="decode" (TransformerEngine:
amax / (448 * 6), the default) or "encode" (compressed-tensors: 448 * 6 / amax)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numoracle as no
from numoracle import QuantRecipe, dequantize, quantize

f32 = np.float32
RNG = np.random.default_rng(41)
X = (RNG.standard_normal((8, 64)) * np.exp(RNG.uniform(-3, 3, (8, 4))).repeat(16, axis=1)).astype(f32)


def _e4m3(v: np.ndarray) -> np.ndarray:
    return v.astype(ml_dtypes.float8_e4m3fn).astype(f32)


def _e2m1(t: np.ndarray) -> np.ndarray:
    return np.clip(t, -6, 6).astype(ml_dtypes.float4_e2m1fn).astype(f32)


def _compressed_tensors(x: np.ndarray) -> tuple[f32, np.ndarray, np.ndarray]:
    """compressed-tensors 0.20.0's NVFP4 weight recipe restated in FP32 numpy (no all-zero block):
    G = 448 * 6 / amax; d = e4m3(min(fl(amax_b / 6) * G, 448)); element = e2m1(x / fl(d / G))."""
    g = f32(448 * 6) / f32(np.abs(x).max())
    amax_b = np.abs(x.reshape(x.shape[0], -1, 16)).max(axis=2)
    d = _e4m3(np.minimum(f32(amax_b / f32(6)) * g, f32(448)))
    div = (d / g).astype(f32)
    t = (x.reshape(x.shape[0], -1, 16) / div[..., None]).astype(f32)
    return g, d, _e2m1(t).reshape(x.shape)


def test_decode_is_the_default_and_encode_stores_the_reciprocal():
    dec = quantize(X, "fp4_e2m1fn", scale_rule="nvfp4")
    enc = quantize(X, "fp4_e2m1fn", scale_rule="nvfp4", global_scale_convention="encode")
    g = f32(448 * 6) / f32(np.abs(X).max())
    assert enc.global_scale == float(g) and dec.global_scale == float(f32(1) / g)
    assert np.array_equal(enc.scale_codes, dec.scale_codes)  # the same block scales d
    d = enc.scales.astype(f32)
    assert np.array_equal(enc.divisors, (d / g).astype(f32).astype(np.float64))
    assert np.array_equal(dec.divisors, (d * (f32(1) / g)).astype(f32).astype(np.float64))
    assert np.array_equal(dequantize(enc), no.decode(enc.codes, "fp4_e2m1fn") * enc.layout.expand(enc.divisors))


def test_encode_reproduces_compressed_tensors_restated():
    g, d, vals = _compressed_tensors(X)
    q = quantize(X, "fp4_e2m1fn", scale_rule="nvfp4", global_scale_convention="encode")
    assert q.global_scale == float(g) and np.array_equal(q.scales, d.astype(np.float64))
    assert np.array_equal(no.decode(q.codes, "fp4_e2m1fn"), vals.astype(np.float64))


def test_the_conventions_differ_on_some_divisors():
    x = (np.random.default_rng(42).standard_normal((64, 256)) * 3).astype(f32)
    dec = quantize(x, "fp4_e2m1fn", scale_rule="nvfp4")
    enc = quantize(x, "fp4_e2m1fn", scale_rule="nvfp4", global_scale_convention="encode")
    differ = dec.divisors != enc.divisors  # fl(d * fl(1 / G)) vs fl(d / G): one FP32 ulp apart at most
    assert differ.any() and np.all(np.abs(dec.divisors - enc.divisors) <= np.spacing(enc.divisors.astype(f32)))


def test_given_scale_is_read_in_the_stated_convention():
    amax = float(np.abs(X).max())
    g = float(f32(448 * 6) / f32(amax))
    enc = quantize(X, "fp4_e2m1fn", scale_rule="nvfp4", global_scale=g, global_scale_convention="encode")
    assert np.array_equal(enc.codes, quantize(X, "fp4_e2m1fn", scale_rule="nvfp4",
                                              global_scale_convention="encode").codes)
    with pytest.raises(ValueError, match="it is the encode scale of that amax: pass global_scale_convention='encode'"):
        quantize(X, "fp4_e2m1fn", scale_rule="nvfp4", global_scale=g, global_amax=amax)
    with pytest.raises(ValueError, match="it is the decode scale of that amax: pass global_scale_convention='decode'"):
        quantize(X, "fp4_e2m1fn", scale_rule="nvfp4", global_scale=float(f32(1) / f32(g)), global_amax=amax,
                 global_scale_convention="encode")
    with pytest.raises(ValueError, match=r"under global_scale_convention='encode' \(the encode scale"):
        quantize(X, "fp4_e2m1fn", scale_rule="nvfp4", global_scale=-1.0, global_scale_convention="encode")


def test_bad_conventions_are_named():
    with pytest.raises(ValueError, match="unknown global_scale_convention 'inverse'; valid: 'decode'"):
        quantize(X, "fp4_e2m1fn", scale_rule="nvfp4", global_scale_convention="inverse")
    with pytest.raises(ValueError, match="needs scale_rule='nvfp4'"):
        quantize(X, "int8", global_scale_convention="encode")


def test_check_states_its_convention():
    enc = quantize(X, "fp4_e2m1fn", scale_rule="nvfp4", global_scale_convention="encode")
    with pytest.raises(ValueError, match="stored in global_scale_convention='encode'.*assumes 'decode'"):
        no.check_quantized_close(enc, X, scale_rule="nvfp4")
    recipe = QuantRecipe("fp4_e2m1fn", scale_rule="nvfp4", global_scale_convention="encode")
    assert no.assert_quantized_close(enc, X, recipe).passed
    # values dequantised as compressed-tensors does (code * fl(d / G)) pass under "encode"
    no.assert_quantized_close(dequantize(enc), X, recipe)
    # codes quantised with the other convention's divisors fail where they round differently: an element at
    # 0.25 * fl(d / G) (an E2M1 tie, to 0 under "encode") in a block whose fl(d * S_dec) is one ulp below
    x = (np.random.default_rng(42).standard_normal((64, 256)) * 3).astype(f32)
    d0 = quantize(x, "fp4_e2m1fn", scale_rule="nvfp4")
    e0 = quantize(x, recipe)
    r, c = np.argwhere(d0.divisors != e0.divisors)[0]
    de, dd = f32(e0.divisors[r, c]), f32(d0.divisors[r, c])
    near = f32(0.75) * de + np.arange(-4, 5).astype(f32) * np.spacing(f32(0.75) * de)  # around a midpoint
    split = _e2m1((near / de).astype(f32)) != _e2m1((near / dd).astype(f32))
    x[r, 16 * c + 1] = near[np.argmax(split)]  # t rounds across the midpoint under one divisor only
    dec = quantize(x, "fp4_e2m1fn", scale_rule="nvfp4")
    enc_v = no.decode(quantize(x, recipe).codes, "fp4_e2m1fn")[r, 16 * c + 1]
    assert no.decode(dec.codes, "fp4_e2m1fn")[r, 16 * c + 1] != enc_v
    assert not np.array_equal(dec.codes, quantize(x, recipe).codes)
    assert not no.check_quantized_close(dec.codes, x, recipe).passed
    assert no.check_quantized_close(dec.codes, x, recipe.replace(global_scale_convention="decode")).passed


def test_matmul_bound_refuses_encode():
    B = np.ascontiguousarray(X.T)  # (K, N), blocks of 16 along K
    enc = quantize(B, "fp4_e2m1fn", scale_rule="nvfp4", axis=0, global_scale_convention="encode")
    with pytest.raises(ValueError, match="global_scale_convention='encode'; the quantized-matmul bound models"):
        no.quant.quantized_matmul_bound(X[:2].astype(np.float16), B, qb=enc)


@pytest.mark.parametrize("reciprocal", [False, True])
def test_error_bound_holds_in_the_encode_convention(reciprocal):
    x = (np.random.default_rng(2).standard_normal((64, 256)) * 3).astype(f32)
    q = quantize(x, "fp4_e2m1fn", scale_rule="nvfp4", global_scale_convention="encode", reciprocal=reciprocal)
    err = np.abs(x.astype(np.float64) - dequantize(q))
    bound = no.quant.quantization_error_bound(q, x).bound
    assert np.all(err <= bound) and np.any(err > 0.5 * bound)  # holds, and is not loose everywhere
