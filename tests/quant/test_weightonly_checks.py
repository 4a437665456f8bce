"""The checks and the matmul bound on the formats users hold: codebooks (NF4), GGUF blocks, packed int4.

assert_quantized_close / check_quantized_close compare codes, bytes or values with numoracle's reference and name
the worst element; quantized_matmul_bound / expected_error_bound("quantized_matmul", ...) give the
dequantise-then-accumulate bound for Int4Weights, CodebookQuantized and GgufWeights.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import numoracle as no
from numoracle.quant.bounds.weightonly import DequantMatmulBound, GgufWeights
from numoracle.quant.schemes.codebook import NF4, quantize_codebook
from numoracle.quant.schemes.gguf import gguf_quantize
from numoracle.quant.schemes.packing import pack

RNG = np.random.default_rng(25)
X = RNG.standard_normal((8, 64)).astype(np.float32)


# ---- codebooks ----------------------------------------------------------------------------------
def test_nf4_codes_packed_and_values_pass():
    q = quantize_codebook(X, "nf4", block=64)
    for actual in (q.codes, pack(q.codes, "bnb"), q, q.dequantize("fp16").astype(np.float16)):
        r = no.assert_quantized_close(actual, X, fmt="nf4", granularity=("block", 64))
        assert r.counts["exact"] == X.size


def test_nf4_corrupted_code_fails_naming_the_element():
    q = quantize_codebook(X, "nf4", block=64)
    bad = q.codes.copy()
    bad[3, 5] = (bad[3, 5] + 1) % 16
    with pytest.raises(AssertionError, match=r"1 mismatch") as e:
        no.assert_quantized_close(bad, X, fmt="nf4", granularity=("block", 64))
    assert "(3, 5)" in str(e.value)
    vals = q.dequantize("fp32").astype(np.float32)
    vals[6, 1] *= np.float32(1.5)
    with pytest.raises(AssertionError, match=r"\(6, 1\)"):
        no.assert_quantized_close(vals, X, fmt="nf4")


def test_nf4_tie_on_a_boundary_is_an_outlier_and_absmax_must_match():
    x = np.zeros(64, np.float32)
    x[0], x[1] = 1.0, NF4.boundaries[9]  # absmax 1: t = the FP32 midpoint, bitsandbytes takes the lower entry
    q = quantize_codebook(x, "nf4", block=64)
    up = q.codes.copy()
    up[1] = NF4.order[10]  # the entry above the midpoint
    r = no.check_quantized_close(up, x, fmt="nf4")
    assert not r.passed and r.counts["tie"] == 1
    assert no.check_quantized_close(up, x, fmt="nf4", allow_outliers=1).passed
    with pytest.raises(AssertionError, match="block 0: 0.5 vs 1.0"):
        no.assert_quantized_close(q.codes, x, fmt="nf4", actual_scales=np.float32([0.5]))


def test_bitsandbytes_nf4_passes_the_check():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("bitsandbytes.functional", reason="needs bitsandbytes")
    packed, state = F.quantize_4bit(torch.from_numpy(X), blocksize=64, quant_type="nf4")
    no.assert_quantized_close(packed.numpy(), X, fmt="nf4", granularity=("block", 64),
                              actual_scales=state.absmax.numpy())


# ---- GGUF ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
def test_gguf_bytes_and_values_pass_and_a_flipped_bit_fails(qtype):
    b = gguf_quantize(X, qtype)
    no.assert_quantized_close(b, X, fmt=qtype)
    no.assert_quantized_close(no.quant.gguf_dequantize(b, qtype, X.shape), X, fmt=f"gguf:{qtype}")
    bad = b.copy()
    size = bad.size // (X.size // 32)
    bad[3 * size + size - 1] ^= 0x10  # block 3's last byte: an element's code
    with pytest.raises(AssertionError, match="mismatch") as e:
        no.assert_quantized_close(bad, X, fmt=qtype)
    assert "(1, 63)" in str(e.value) or "(1, 47)" in str(e.value) or "(1, 62)" in str(e.value)
    bad = b.copy()
    bad[2 * size] ^= 0x01  # block 2's d
    with pytest.raises(AssertionError, match="block 2: d"):
        no.assert_quantized_close(bad, X, fmt=qtype)


def test_gguf_library_output_passes():
    gq = pytest.importorskip("gguf.quants", reason="needs gguf")
    from gguf.constants import GGMLQuantizationType as T

    for t in (T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
        no.assert_quantized_close(gq.quantize(X, t), X, fmt=t)


# ---- packed int4 --------------------------------------------------------------------------------
def test_int4_weights_pass_and_a_corrupted_code_fails():
    W = RNG.standard_normal((256, 32)).astype(np.float16).astype(np.float32)
    w = no.quant.quantize_int4(W, group=128, convention="awq")
    back = no.quant.Int4Weights.from_packed(w.pack(), convention="awq", shape=W.shape, group=128)
    no.assert_quantized_close(back, W)
    c = w.codes.copy()
    c[7, 3] = (c[7, 3] + 3) % 16
    with pytest.raises(AssertionError, match=r"\(7, 3\)"):
        no.assert_quantized_close(dataclasses.replace(w, codes=c), W)
    z = w.zeros.copy()
    z[1, 2] += 1
    with pytest.raises(AssertionError, match="zero points differ"):
        no.assert_quantized_close(dataclasses.replace(w, zeros=z), W)
    with pytest.raises(ValueError, match="dequant_matmul_check"):
        no.check_quantized_close(dataclasses.replace(w, convention="hqq"), W)


# ---- the dequantise-then-accumulate bound ------------------------------------------------------
def _weights(kind: str, W: np.ndarray):
    """(weights object, B (K, N), w~ as the kernel multiplies it (K, N) float32)."""
    if kind == "int4":
        Wk = W.T.astype(np.float16).astype(np.float32)
        w = no.quant.quantize_int4(Wk, group=64)
        return w, Wk, w.dequantize("fp16").astype(np.float32)
    if kind == "nf4":
        q = quantize_codebook(W, "nf4", block=64)
        return q, W.T, q.dequantize("fp16").astype(np.float16).astype(np.float32).T
    t = "Q5_K" if kind == "gguf_k" else "Q4_1"
    g = GgufWeights(gguf_quantize(W, t), t, W.shape)
    return g, W.T, g.dequantize().astype(np.float16).astype(np.float32).T


@pytest.mark.parametrize("kind", ["int4", "nf4", "gguf", "gguf_k"])
@pytest.mark.parametrize("acc", ["fp32", "fp16"])
def test_dequant_bound_holds_and_catches_a_corruption(kind, acc):
    W = RNG.standard_normal((48, 256)).astype(np.float32)  # the layer's (N, K) tensor
    A = RNG.standard_normal((5, 256)).astype(np.float16)
    qb, B, wt = _weights(kind, W)
    b = no.quant.quantized_matmul_bound(A, B, qb=qb, acc=acc, out="fp16")
    assert isinstance(b, DequantMatmulBound) and b.model == "dequantize-then-accumulate"
    C = (A.astype(np.float32) @ wt).astype(np.float16)  # FP32 accumulation, FP16 output
    if acc == "fp32":
        b.check(C, A, B)
    b.check(C, A, B, against="weights")
    p = b.tolerance(A, B, parts=True)
    assert np.all(p["quantization"] > 0) and np.all(p["total"] >= p["kernel"])
    bad = C.astype(np.float32)
    bad[4, 17] += 4 * float(p["kernel"][4, 17]) + 0.01
    with pytest.raises(AssertionError, match=r"worst at \(4, 17\)"):
        b.check(bad, A, B)
    bad[4, 17] += 4 * float(p["total"][4, 17])
    with pytest.raises(AssertionError, match=r"worst at \(4, 17\)"):
        b.check(bad, A, B, against="weights")


def test_expected_error_bound_takes_weight_only_formats():
    W = RNG.standard_normal((16, 128)).astype(np.float32)
    A = RNG.standard_normal((2, 128)).astype(np.float16)
    g = GgufWeights(gguf_quantize(W, "Q8_0"), "Q8_0", W.shape)
    b = no.expected_error_bound("quantized_matmul", "fp16", 128, dtype_b="gguf:Q8_0", acc="fp32")
    assert isinstance(b, DequantMatmulBound) and b.weights_fmt == no.formats.format_of("fp16")
    C = A.astype(np.float32) @ g.dequantize().astype(np.float16).astype(np.float32).T
    b.check(C, A, W.T, qb=g)
    assert no.expected_error_bound("quantized_matmul", "fp16", 128, dtype_b="nf4").inner.K == 128
    assert no.expected_error_bound("quantized_matmul", "fp16", 128, dtype_b="int4:gptq").weights_fmt.name == "fp16"
    # "int4" alone stays numoracle's INT4 element format (the scaled-block model)
    assert type(no.expected_error_bound("quantized_matmul", "int4", 128)).__name__ == "QuantMatmulBound"
    with pytest.raises(ValueError, match="give A's format as dtype"):
        no.expected_error_bound("quantized_matmul", "nf4", 128)
    with pytest.raises(TypeError, match="do not pass block"):
        no.expected_error_bound("quantized_matmul", "fp16", 128, dtype_b="nf4", block=32)


def test_generic_paths_refuse_weight_only_objects_by_name():
    W = RNG.standard_normal((128, 16)).astype(np.float16).astype(np.float32)
    A = RNG.standard_normal((2, 128)).astype(np.float16)
    w = no.quant.quantize_int4(W, group=64)
    with pytest.raises(ValueError, match="qb=weights"):
        no.quant.quantized_matmul_bound(A, W, qa=w)
    b = no.quant.quantized_matmul_bound(A, W, qb=no.quantize(W, "int8", granularity="channel", axis=1))
    with pytest.raises(TypeError, match=r"quantized_matmul_bound\(A, B, qb=weights\)"):
        b.tolerance(A, W, qb=w)
    with pytest.raises(ValueError, match=r"the weights have shape \(128, 16\) as B \(K, N\)"):
        no.quant.quantized_matmul_bound(A, W, qb=w).tolerance(A, W[:, :8])
