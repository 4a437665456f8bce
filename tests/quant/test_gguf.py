"""GGUF block layouts (quant/schemes/gguf.py, quant/schemes/gguf_kblocks.py): hand-checked blocks, round trips,
refusals."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.quant.schemes.gguf import GGUF_TYPES, gguf_blocks, gguf_dequantize, gguf_quantize
from numoracle.quant.schemes.gguf_kblocks import scale_min_k4


def test_q8_0_hand_block():
    x = np.arange(-16, 16, dtype=np.float32) * np.float32(0.5)  # amax 8: d = 8/127, q = round(x * 127/8)
    b = gguf_quantize(x, "Q8_0")
    assert b.size == 34 and b[:2].view(np.float16)[0] == np.float16(np.float32(8) / np.float32(127))
    q = b[2:].view(np.int8)
    assert q[0] == -127 and q[-1] == 119 and q[16] == 0  # 7.5 * 127 / 8 = 119.06
    assert np.all(np.abs(gguf_dequantize(b, "Q8_0") - x) <= 8 / 127 / 2 * 1.01)


def test_q4_0_layout_and_values():
    x = np.zeros(32, np.float32)
    x[0], x[16], x[1] = -8.0, 4.0, 1.0  # max = -8 (largest magnitude): d = 1, q = x + 8
    b = gguf_quantize(x, "Q4_0")
    assert b[:2].view(np.float16)[0] == 1.0
    assert b[2] == 0x00 | (12 << 4) and b[3] == 9 | (8 << 4)  # byte j: q[j] low, q[j + 16] high
    assert np.array_equal(gguf_dequantize(b, "Q4_0"), x)


def test_exact_round_trip_q4_1_grid():
    # values on Q4_1's own grid (min 0, d = 1) come back exactly
    cases = {"Q4_1": np.tile(np.arange(16, dtype=np.float32), 2), "Q5_1": np.arange(32, dtype=np.float32) - 7,
             "Q8_0": np.concatenate([[-127.0], np.arange(31) * 4 - 60]).astype(np.float32)}
    for name, x in cases.items():
        assert np.array_equal(gguf_dequantize(gguf_quantize(x, name), name), x)


def test_k4_scale_packing():
    sc = np.zeros((1, 12), np.uint8)
    sc[0, 0], sc[0, 4], sc[0, 8] = 0b11_000101, 0b10_000011, 0xA7  # scale0 = 5, min0 = 3; scale4 = 7 | 3<<4
    s, m = scale_min_k4(sc)
    assert s[0, 0] == 5 and m[0, 0] == 3 and s[0, 4] == 7 | (3 << 4) and m[0, 4] == 0xA | (2 << 4)


def test_q6_k_hand_block():
    b = np.zeros(210, np.uint8)
    b[208:210] = np.array([0.5], np.float16).view(np.uint8)
    b[192] = 2  # scale of sub-block 0
    b[0] = 0x1F  # element 0: low nibble 0xF; element 64: high nibble 1
    b[128] = 0b10  # element 0: high bits 2 -> q = 0xF | 2 << 4 = 47
    y = gguf_dequantize(b, "Q6_K")
    assert y[0] == 0.5 * 2 * (47 - 32) and y[1] == 0.5 * 2 * -32 and y[64] == 0.5 * b[192 + 4].view(np.int8) * (1 - 32)


@pytest.mark.parametrize("name", ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
def test_block_whose_reciprocal_scale_overflows_gets_code_bytes_zero(name):
    # values below 2^-125: 1 / d overflows FP32, x * id is +-inf or NaN; ggml (x86) converts that to INT_MIN,
    # whose low byte is 0 (numpy's int64 cast, clamped to 15, gave 0xF nibbles here before)
    x = (np.random.default_rng(2).standard_normal(32) * 2.0**-130).astype(np.float32)
    b = gguf_quantize(x, name)
    head = 4 if name in ("Q4_1", "Q5_1") else 2
    assert not b[head:].any() and not gguf_dequantize(b, name).any()


@pytest.mark.parametrize("name", ["Q4_0", "Q5_0", "Q4_1", "Q5_1"])
@pytest.mark.parametrize("first", [-0.0, 0.0])
def test_all_zero_block_scale_signs_are_ggml_own(name, first):
    # regression (issue 40, defect 6): ggml-quants.c quantize_row_q4_0_ref starts from max = 0.0f and replaces it
    # only on amax < fabsf(v), so an all-zero block has d = +0 / -8 = -0.0 whatever its zeros' signs (numoracle
    # stored +0 when the first zero was -0.0); Q4_1 / Q5_1 keep the first minimum (v < min): m = x[0], -0.0 here.
    # gguf-py 0.19.0 (numpy argmax / min) differs from ggml's C here, so these bytes are stated from the C code.
    import numoracle as no

    x = np.zeros(32, np.float32)
    x[0] = first
    x[5] = -0.0
    b = gguf_quantize(x, name)
    if name in ("Q4_0", "Q5_0"):
        assert b[:2].tobytes() == b"\x00\x80"  # FP16 -0.0
    else:
        assert b[:2].tobytes() == b"\x00\x00"  # d = x[0] - x[0] = +0
        assert b[2:4].tobytes() == (b"\x00\x80" if np.signbit(first) else b"\x00\x00")
    ggml = b.copy()  # the bytes ggml writes, and a flipped sign of the zero scale: a different field
    no.assert_quantized_close(ggml, x, fmt=name)
    flipped = ggml.copy()
    flipped[3 if name in ("Q4_1", "Q5_1") else 1] ^= 0x80
    with pytest.raises(AssertionError):
        no.assert_quantized_close(flipped, x, fmt=name)


def test_refusals():
    with pytest.raises(ValueError, match="144 bytes per block of 256 values; got 100 bytes"):
        gguf_blocks(np.zeros(100, np.uint8), "Q4_K")
    with pytest.raises(ValueError, match="not a multiple of 256"):
        gguf_quantize(np.zeros(255, np.float32), "Q4_K")
    with pytest.raises(ValueError, match="NaN"):
        gguf_quantize(np.full(256, np.inf, np.float32), "Q6_K")
    with pytest.raises(ValueError, match="not a multiple of 32"):
        gguf_quantize(np.zeros(33, np.float32), "Q8_0")
    with pytest.raises(ValueError, match="NaN"):
        gguf_quantize(np.full(32, np.nan, np.float32), "Q4_0")
    with pytest.raises(ValueError, match="unknown GGUF type"):
        gguf_quantize(np.zeros(32, np.float32), "Q4_2")
    with pytest.raises(ValueError, match="not shape"):
        gguf_dequantize(np.zeros(34, np.uint8), "Q8_0", shape=(4, 4))
    assert set(GGUF_TYPES) >= {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}
