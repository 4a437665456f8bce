"""Group-wise int4 weights (quant/schemes/int4.py) and the dequantise-then-accumulate GEMV bound
(quant/bounds/dequantgemm.py)."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.orders import Blocked
from numoracle.quant.bounds.dequantgemm import dequant_matmul, dequant_matmul_check
from numoracle.quant.schemes.int4 import INT4_CONVENTIONS, Int4Weights, dequantize_int4, quantize_int4


def _w(K=256, N=64, seed=0):
    return np.random.default_rng(seed).standard_normal((K, N)).astype(np.float16).astype(np.float32)


def test_hand_checked_dequantisation():
    # q = 15, z = 8, s = 0.1 (FP16 0x2E66 = 0.0999755859375): fl16(7 * s) = 0.69970703125 (7s = 0.6998291015625)
    s = float(np.float16(0.1))
    w = dequantize_int4(np.array([[15]]), [[s]], [[8]], group=1)
    assert w.tolist() == [[float(np.float16(7 * s))]] and w[0, 0] == 0.69970703125
    # HQQ rounds q - z first: fl16(15 - 8.3) = 6.69921875, then fl16(6.69921875 * s)
    z = float(np.float16(8.3))
    w = dequantize_int4(np.array([[15]]), [[s]], [[z]], group=1, convention="hqq")
    assert w[0, 0] == float(np.float16(float(np.float16(15 - z)) * s))


@pytest.mark.parametrize("conv", INT4_CONVENTIONS)
def test_pack_round_trip_every_convention(conv):
    w = quantize_int4(_w(), group=128, convention=conv)
    t = w.pack()
    r = Int4Weights.from_packed(t, convention=conv, shape=(256, 64), group=128)
    assert np.array_equal(r.codes, w.codes) and np.array_equal(r.zeros, w.zeros)
    assert np.array_equal(r.dequantize(), w.dequantize())


def test_round_to_nearest_reference_error():
    W = _w()
    w = quantize_int4(W, group=128)
    # every weight within half a step (plus the FP16 rounding of the product) of the original
    step = np.repeat(w.scales, 128, axis=0)
    assert np.all(np.abs(w.dequantize() - W) <= step / 2 + np.abs(W) * 2.0**-10 + 1e-7)
    assert w.zeros.min() >= 0 and w.zeros.max() <= 15


def test_bad_input_names_the_convention():
    w = quantize_int4(_w(), group=128, convention="gptq")
    t = w.pack()
    with pytest.raises(ValueError, match="gptq: qweight .* must have shape \\(32, 64\\)"):
        Int4Weights.from_packed({**t, "qweight": t["qweight"][:16]}, convention="gptq", shape=(256, 64), group=128)
    with pytest.raises(ValueError, match="awq: qweight for AutoAWQ's layout must have shape \\(256, 8\\)"):
        Int4Weights.from_packed(t, convention="awq", shape=(256, 64), group=128)  # GPTQ's tensors read as AWQ
    ta = Int4Weights(w.codes, w.scales, w.zeros, 128, "awq").pack()
    with pytest.raises(ValueError, match="awq: qzeros is int32, got uint8"):
        Int4Weights.from_packed({**ta, "qzeros": ta["qzeros"].view(np.uint8)}, convention="awq", shape=(256, 64),
                                group=128)
    zero = Int4Weights(w.codes, w.scales, np.zeros_like(w.zeros), 128, "gptq")
    with pytest.raises(ValueError, match="zeros minus one"):
        zero.pack()
    with pytest.raises(ValueError, match="integers in this convention"):
        dequantize_int4(w.codes, w.scales, w.zeros + 0.5, group=128, convention="awq")
    with pytest.raises(ValueError, match="fp16 cannot hold"):
        Int4Weights.from_packed({**t, "scales": t["scales"].astype(np.float32) * np.float32(1 + 2**-20)},
                                convention="gptq", shape=(256, 64), group=128)


@pytest.mark.parametrize("acc", ["fp16", "fp32"])
def test_gemv_bound_holds_for_torch_and_catches_a_corruption(acc):
    torch = pytest.importorskip("torch", reason="needs torch")
    W = _w(1024, 128)
    w = quantize_int4(W, group=128)
    x = np.random.default_rng(1).standard_normal(1024).astype(np.float16)
    dm = dequant_matmul(x, w, acc=acc, order=Blocked(64) if acc == "fp16" else None, W=W)
    dt = torch.float16 if acc == "fp16" else torch.float32
    wt = torch.from_numpy(w.dequantize().astype(np.float16)).to(dt)
    y = (torch.from_numpy(x).to(dt).reshape(1, -1).reshape(1, 16, 64).transpose(0, 1)
         @ wt.reshape(16, 64, 128)).sum(0, dtype=dt) if acc == "fp16" else torch.from_numpy(x).to(dt) @ wt
    y = y.reshape(-1).to(torch.float16).numpy()
    dequant_matmul_check(y, dm)
    dequant_matmul_check(y, dm, against="weights")
    bad = y.copy()
    bad[5] = np.float16(float(bad[5]) + 4 * float(dm.kernel[5]) + 0.01)
    with pytest.raises(AssertionError, match="worst at \\(5,\\)"):
        dequant_matmul_check(bad, dm)


def test_dequantisation_rounds_once_for_any_float64_scale():
    # 7 * s is just above 1 + 2^-11 (FP16's midpoint between 1 and 1 + 2^-10); float64 rounds the product onto
    # the midpoint, and a second rounding into FP16 would give 1.0 (ties to even): the exact result is 1 + 2^-10
    s = float.fromhex("0x1.24b6db6db6db7p-3")
    w = dequantize_int4(np.array([[7]]), np.array([[s]]), np.array([[0]]), group=1, convention="gptq", out="fp16")
    assert w[0, 0] == 1 + 2**-10
    # hqq: q - z is rounded once into FP16 too; a float64 zero point whose difference float64 cannot hold raises
    with pytest.raises(ValueError, match="hqq: q - zero"):
        dequantize_int4(np.array([[1]]), np.array([[1.0]]), np.array([[-(2**-11 + 2**-60)]]), group=1,
                        convention="hqq")


def test_from_packed_names_what_is_wrong():
    from numoracle.quant.schemes.int4 import Int4Weights, quantize_int4

    W = np.random.default_rng(3).standard_normal((256, 8)).astype(np.float32)
    packed = quantize_int4(W, group=128, convention="gptq").pack()
    with pytest.raises(ValueError, match="not a multiple of group"):
        Int4Weights.from_packed(packed, convention="gptq", shape=(256, 8), group=96)
    with pytest.raises(ValueError, match="gptq stores its weights as qweight, qzeros, scales; .* lack qzeros"):
        Int4Weights.from_packed({k: v for k, v in packed.items() if k != "qzeros"}, convention="gptq",
                                shape=(256, 8), group=128)
    with pytest.raises(ValueError, match="convention"):
        Int4Weights.from_packed(packed, convention="gtpq", shape=(256, 8), group=128)
    back = Int4Weights.from_packed(packed, convention="gptq", shape=(256, 8), group=128)
    assert np.array_equal(back.codes, quantize_int4(W, group=128, convention="gptq").codes)
