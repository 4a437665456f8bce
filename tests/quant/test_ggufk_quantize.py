"""The K-quant quantisers (quant/schemes/gguf_kquants.py): hand-derived blocks, ggml's nearest_int, and the final pass
re-derived from the stored fields (every code is the clamped nearest integer of ``(x + dm) / d`` in FP32).
Byte-for-byte conformance with ggml itself: test_conformance_ggml.py."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle.quant.schemes.gguf import (
    GGUF_TYPES,
    gguf_codes,
    gguf_dequantize,
    gguf_quantize,
    gguf_reference,
    gguf_values,
)
from numoracle.quant.schemes.gguf_kblocks import scale_min_k4
from numoracle.quant.schemes.gguf_kquants import K_QUANTISERS, nearest_int, quantize_k

f32 = np.float32


def test_nearest_int_is_ggml_magic_number_rounding():
    v = f32([2.5, 3.5, -2.5, -0.5, 0.49999997, 1.5, 4194303.0, -4194303.0, 0.0, -0.0])
    assert nearest_int(v).tolist() == [2, 4, -2, 0, 0, 2, 4194303, -4194303, 0, 0]
    # beyond +-2^22 the C code returns the low mantissa bits of x + 12582912f, minus 2^22 (assertions off)
    # 2^24 + 2 + 12582912 = 29360130, exact (FP32's step is 2 there): mantissa (29360130 - 2^24) / 2 = 6291457
    assert nearest_int(f32([2.0**24 + 2])).item() == 6291457 - 0x400000 == 2097153


@pytest.mark.parametrize("name", K_QUANTISERS)
def test_all_zero_super_block_is_all_zero_bytes(name):
    assert not gguf_quantize(np.zeros(512, f32), name).any()


@pytest.mark.parametrize("name", ["Q6_K", "Q3_K"])
def test_huge_values_give_a_zero_scale_not_nan(name):
    # regression (issue 40, defect 7): near 1e20, x * x overflows FP32, every sub-block scale of make_qx_quants /
    # make_q3_quants is NaN, and ggml's ``if (fabsf(scale) > amax)`` (from amax = 0) never takes one: max_scale
    # stays 0, so Q6_K memsets the block (all-zero bytes) and Q3_K stores d = 0 with zero scales (its codes are
    # make_q3_quants'); numoracle's argmax took the NaN and stored a NaN d (every value dequantised to NaN)
    rng = np.random.default_rng(5)
    x = (1e20 * (1 + rng.random(512)) * np.sign(rng.standard_normal(512))).astype(f32)
    b = gguf_quantize(x, name).reshape(2, -1)
    assert not b[:, -2:].any() and not np.isnan(gguf_dequantize(b, name)).any()
    if name == "Q6_K":
        assert not b.any()
    else:
        assert not b[:, 96:108].any() and not gguf_dequantize(b, name).any()
    # a NaN sub-block among finite ones: the super-block scale is the finite ones' (the ones decode exactly),
    # the NaN sub-block's 8-bit / 6-bit scale is nearest_int(NaN) = 0, so it decodes to zeros
    m = np.ones(256, f32)
    m[:16] = x[:16]
    y = gguf_dequantize(gguf_quantize(m, name), name)
    assert not y[:16].any() and (y[16:] == 1).all()


def test_q6_k_constant_block_by_hand():
    # make_qx_quants on 16 ones: max 1, iscale -32, every l = -32; every trial scale gives the same
    # sumlx^2 / suml2, so the first stands: scale = sumlx / suml2 = -1/32. Sixteen equal scales: max_scale -1/32,
    # iscale 4096, d = fp16(1 / 4096), sub-scale nearest_int(-128) = -128 (MIN(127, .) keeps it), d * sc = -1/32,
    # nearest_int(1 / (-1/32)) = -32 -> code 0.
    b = gguf_quantize(np.ones(256, f32), "Q6_K")
    assert not b[:192].any() and (b[192:208] == 0x80).all() and b[208:210].view(np.float16)[0] == 2.0**-12
    assert (gguf_dequantize(b, "Q6_K") == 1).all()


def test_q3_k_constant_block_by_hand():
    # make_q3_quants on 16 ones: iscale -4, l = -4, sumlx -64, suml2 256; no move has slx > 0: scale -1/4.
    # iscale -32 / (-1/4) = 128, d = fp16(1 / 128), sub-scale nearest_int(-32) + 32 = 0 (stored 0), d * (0 - 32) =
    # -1/4, nearest_int(1 / (-1/4)) = -4 -> code 0: hmask, qs and scales all zero.
    b = gguf_quantize(np.ones(256, f32), "Q3_K")
    assert not b[:108].any() and b[108:110].view(np.float16)[0] == 2.0**-7
    assert (gguf_dequantize(b, "Q3_K") == 1).all()


def _fields(b: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray | None, int, int, int]:
    """Per element: the FP32 divisor d * sc and dm (or None), the code range and offset, read from the bytes."""
    h = lambda at: b[:, at:at + 2].copy().view(np.float16).astype(f32)  # noqa: E731
    if name == "Q2_K":
        sc = b[:, 0:16].astype(np.int64)
        d = (h(80) * (sc & 0xF).astype(f32)).astype(f32)
        return np.repeat(d, 16, 1), np.repeat((h(82) * (sc >> 4).astype(f32)).astype(f32), 16, 1), 0, 3, 0
    if name == "Q3_K":
        s = b[:, 96:108].astype(np.int64)
        j = np.arange(16)
        sc = (((s[:, j % 8] >> (4 * (j // 8))) & 0xF) | (((s[:, 8 + j % 4] >> (2 * (j // 4))) & 3) << 4)) - 32
        return np.repeat((h(108) * sc.astype(f32)).astype(f32), 16, 1), None, -4, 3, 4
    if name == "Q6_K":
        sc = b[:, 192:208].view(np.int8).astype(f32)
        return np.repeat((h(208) * sc).astype(f32), 16, 1), None, -32, 31, 32
    s, m = scale_min_k4(b[:, 4:16])
    top = 15 if name == "Q4_K" else 31
    return (np.repeat((h(0) * s.astype(f32)).astype(f32), 32, 1),
            np.repeat((h(2) * m.astype(f32)).astype(f32), 32, 1), 0, top, 0)


@pytest.mark.parametrize("name", K_QUANTISERS)
def test_final_pass_rederived_from_the_stored_fields(name):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(64 * 256) * np.exp(rng.uniform(-6, 6, 64)).repeat(256)).astype(f32)
    x[:256] = np.abs(x[:256])  # a block whose minimum is positive (min clamped to 0)
    data, q, t = gguf_reference(x, name)
    assert data.shape == (64, GGUF_TYPES[name][1]) and q.shape == (64, 256)
    d, dm, lo, hi, off = _fields(data, name)
    num = x.reshape(64, 256) if dm is None else (x.reshape(64, 256) + dm).astype(f32)
    with np.errstate(all="ignore"):
        tt = (num / d).astype(f32)
    live = d != 0
    assert live.mean() > 0.9
    assert np.array_equal(tt[live].astype(np.float64), t[live]) and np.isnan(t[~live]).all()
    rounded = np.clip(np.rint(tt[live].astype(np.float64)), lo, hi).astype(np.int64) + off  # rint: half to even
    assert np.array_equal(rounded, q[live])
    # the codes read back from the bytes are the codes: dequantising the codes with the fields gives gguf's values
    y = gguf_dequantize(data, name).reshape(64, 256)
    want = (d * (q - off).astype(f32)).astype(f32) - (0 if dm is None else dm)
    assert np.array_equal(y.view(np.uint32), want.astype(f32).view(np.uint32))


@pytest.mark.parametrize("name", K_QUANTISERS)
def test_round_trip_error_is_small(name):
    rng = np.random.default_rng(6)
    x = rng.standard_normal(32 * 256).astype(f32)
    y = gguf_dequantize(gguf_quantize(x, name), name)
    bits = {"Q2_K": 2, "Q3_K": 3, "Q4_K": 4, "Q5_K": 5, "Q6_K": 6}[name]
    rel = np.sqrt(np.mean((y - x) ** 2) / np.mean(x**2))
    assert rel < 2.0 ** (1 - bits)  # e.g. Q4_K: an RMS error under 1/8 of the RMS value
    assert quantize_k(x.reshape(-1, 256), name).data.tobytes() == gguf_quantize(x, name).tobytes()


@pytest.mark.parametrize("name", K_QUANTISERS)
def test_codes_and_fields_give_the_dequantised_values(name):
    rng = np.random.default_rng(8)
    b = rng.integers(0, 256, (16, GGUF_TYPES[name][1]), dtype=np.uint8)
    for at in {"Q2_K": (80, 82), "Q3_K": (108,), "Q6_K": (208,)}.get(name, (0, 2)):
        b[:, at:at + 2] = (rng.standard_normal((16, 1)) * 0.01).astype(np.float16).view(np.uint8)
    q, d, m = gguf_codes(b, name)
    assert q.shape == d.shape == (16, 256) and q.min() >= 0 and q.max() < 2 ** int(name[1])
    assert np.array_equal(gguf_values(q, d, m, name).ravel().view(np.uint32), gguf_dequantize(b, name).view(np.uint32))


@pytest.mark.parametrize("name", K_QUANTISERS)
def test_check_passes_the_reference_and_names_a_corruption(name):
    x = np.random.default_rng(9).standard_normal((4, 256)).astype(f32)
    b = gguf_quantize(x, name)
    no.assert_quantized_close(b, x, fmt=name)
    no.assert_quantized_close(gguf_dequantize(b, name, x.shape), x, fmt=f"gguf:{name}")
    size = GGUF_TYPES[name][1]
    code_byte = {"Q2_K": 20, "Q3_K": 40, "Q4_K": 20, "Q5_K": 60, "Q6_K": 5}[name]  # a byte of element codes
    bad = b.copy()
    bad[2 * size + code_byte] ^= 0x01
    with pytest.raises(AssertionError, match="mismatch"):
        no.assert_quantized_close(bad, x, fmt=name)
    bad = b.copy()
    scale_byte = {"Q2_K": 3, "Q3_K": 100, "Q4_K": 5, "Q5_K": 5, "Q6_K": 195}[name]  # a sub-block scale / min
    bad[size + scale_byte] ^= 0x01
    with pytest.raises(AssertionError, match=r"block 1 element \d+: d \* sc"):
        no.assert_quantized_close(bad, x, fmt=name)


@pytest.mark.parametrize("name, limit", [("Q2_K", 0.0075), ("Q3_K", 0.0040), ("Q4_K", 0.002), ("Q5_K", 0.002),
                                         ("Q6_K", 0.002), ("Q4_0", 0.002), ("Q5_1", 0.002), ("Q8_0", 0.002)])
def test_llama_cpp_total_quantization_error(name, limit):
    # llama.cpp tests/test-quantize-fns.cpp: data 0.1 + 2 cos(i), i < 32 * 128; "array_rmse" = sqrt(sum d^2) / n
    # below MAX_QUANTIZATION_TOTAL_ERROR (_2BITS 0.0075, _3BITS 0.0040, else 0.002)
    i = np.arange(32 * 128)
    x = (0.1 + 2 * np.cos(i.astype(f32)).astype(f32).astype(np.float64)).astype(f32)
    y = gguf_dequantize(gguf_quantize(x, name), name)
    err = np.sqrt(np.sum((x.astype(np.float64) - y) ** 2)) / x.size
    assert limit / 100 < err < limit  # within llama.cpp's limit, and a real quantisation error
