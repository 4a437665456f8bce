"""Codebook formats (quant/schemes/codebook.py): published tables, nearest-entry rule, blockwise absmax, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.quant.schemes.codebook import (
    BNB_DYNAMIC8,
    BNB_FP4,
    NF4,
    Codebook,
    codebook_of,
    dequantize_codebook,
    double_quantize,
    quantize_codebook,
    register_codebook,
)


def test_published_nf4_values():
    # QLoRA (arXiv:2305.14314) appendix E lists NF4 to 4 decimals; the table holds bitsandbytes' FP32 values
    paper = [-1.0, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0,
             0.0796, 0.1609, 0.2461, 0.3379, 0.4407, 0.5626, 0.7230, 1.0]
    assert np.allclose(NF4.table, paper, atol=5e-5)
    assert np.array_equal(NF4.table.astype(np.float32).astype(np.float64), NF4.table)
    assert NF4.bits == 4 and list(NF4.order) == list(range(16))


def test_bnb_fp4_is_bit_order_over_twelve():
    assert BNB_FP4.values[:8] == tuple(float(np.float32(v) / np.float32(12)) for v in (0, 0.0625, 8, 12, 4, 6, 2, 3))
    assert BNB_FP4.values[3] == 1.0 and BNB_FP4.values[11] == -1.0
    assert np.signbit(BNB_FP4.values[8]) and BNB_FP4.values[8] == 0.0  # code 8 is -0


def test_nearest_entry_ties_down_and_zeros():
    # the NF4 midpoint between 0 and 0x1.45f5fep-4, computed in FP32, goes to the lower entry
    b = NF4.boundaries[7]
    assert NF4.encode([b])[0] == 7 and NF4.encode([np.nextafter(b, 1)])[0] == 8
    # FP4: +0 (code 0) sorts before -0 (code 8): 0 -> code 0, (0, first midpoint] -> code 8
    assert BNB_FP4.encode([0.0, -0.0, 1e-4])[0] == 0 and BNB_FP4.encode([1e-4])[0] == 8
    up = Codebook("halves_up", (0.0, 0.5, 1.0, -1.0), ties="up")
    assert list(up.encode([0.25, 0.75, -0.5])) == [1, 2, 0]


def test_blockwise_hand_example():
    # block of 4: absmax 2, t = x / 2 -> nearest NF4 entry; dequantised fl32(v * 2)
    q = quantize_codebook(np.array([2.0, -1.0, 0.1, 0.0], np.float32), "nf4", block=4)
    assert list(q.codes) == [15, 2, 8, 7] and q.absmax.tolist() == [2.0]
    assert q.dequantize().tolist() == [2.0, float(np.float32(NF4.values[2]) * np.float32(2)),
                                       float(np.float32(NF4.values[8]) * np.float32(2)), 0.0]
    # the last block may be short; an all-zero full block has absmax 0, an all-zero partial block stores the
    # clamped absmax fl32(1e-38) (bitsandbytes 0.50.2); both decode to 0
    q = quantize_codebook(np.zeros(6, np.float32), "nf4", block=4)
    assert q.absmax.tolist() == [0.0, float(np.float32(1e-38))] and np.all(q.dequantize("fp16") == 0)


def test_partial_block_divides_by_its_absmax():
    # regression (issue 40, defect 4): bitsandbytes 0.50.2 quantises a last partial block (and a tensor shorter
    # than one block) as fl32(x / absmax), not fl32(x * fl32(1 / absmax)): FP4 of [-1.25, 3.0] is code 12
    # (-0.5), as bitsandbytes gives; fl32(-1.25 * fl32(1/3)) lies just past the midpoint -0.41666... (code 13)
    x = np.array([-1.25, 3.0], np.float32)
    assert list(quantize_codebook(x, BNB_FP4, block=64).codes) == [12, 3]
    assert list(quantize_codebook(x, BNB_FP4, block=2).codes) == [13, 3]  # a full block multiplies
    padded = np.concatenate([np.ones(64, np.float32), x])
    assert list(quantize_codebook(padded, BNB_FP4, block=64).codes[64:]) == [12, 3]


def test_exact_round_trip_of_table_values():
    for cb in (NF4, BNB_FP4, BNB_DYNAMIC8):
        x = cb.table.astype(np.float32)
        q = quantize_codebook(x, cb, block=x.size)
        assert np.array_equal(q.dequantize(), cb.table)


def test_user_codebook_registered_and_normalised():
    cb = Codebook("my_int3", (-4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0), source="test")
    with pytest.raises(ValueError, match="normalized"):
        quantize_codebook(np.ones(8, np.float32), cb, block=8)
    n = register_codebook(cb.normalized("my_int3_n"))
    assert codebook_of("MY_INT3_N") is n and n.values[0] == -1.0 and n.values[-1] == 0.75


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="2\\^b entries"):
        Codebook("three", (0.0, 1.0, 2.0))
    with pytest.raises(ValueError, match="FP32 entries"):
        Codebook("third", (0.0, 1 / 3))
    with pytest.raises(ValueError, match="NaN"):
        quantize_codebook(np.array([1.0, np.nan], np.float32), "nf4", block=2)
    with pytest.raises(ValueError, match="codes lie in 0..15"):
        NF4.decode(np.array([16]))
    with pytest.raises(ValueError, match="absmax values"):
        dequantize_codebook(np.zeros(130, np.uint8), np.ones(2, np.float32), NF4, 64)
    with pytest.raises(ValueError, match="fp32 cannot hold"):
        quantize_codebook(np.array([1 + 2.0**-40]), "nf4", block=1)
    with pytest.raises(ValueError, match="unknown codebook"):
        codebook_of("nf5")


def test_double_quantisation_default_offset_is_the_rounded_mean():
    a = np.array([1.0, 2.0, 4.0, 8.0], np.float32)
    dq = double_quantize(a, block=4)
    assert float(dq.offset) == 3.75 and dq.inner.absmax.tolist() == [4.25]
    assert np.all(np.abs(dq.absmax() - a) <= 4.25 * 2.0**-6)
    with pytest.raises(ValueError, match="not an FP32 value"):
        double_quantize(a, offset=0.1)


def test_double_quantisation_paths_name_both_bitsandbytes_kernels():
    # regression (issue 40, defect 5): bitsandbytes 0.50.2's native CPU kernel maps t to one of 65,536 bins,
    # (uint16)((t + 1) * 0.5 * 65535 + 0.5), and the bin to the entry nearest its left edge: t = 0 is bin 32768,
    # v = -1 + 65536 / 65535 = 1.5259e-05, nearest entry code 131 (2.125e-05); the torch kernel gives 127 (0.0)
    from numoracle.quant.schemes.bnbcpu import lut_of
    from numoracle.quant.schemes.codebook import quantize_blockwise_cpu

    a = np.zeros(256, np.float32)
    a[0] = 2.0
    assert lut_of(BNB_DYNAMIC8.values)[32768] == 131 and BNB_DYNAMIC8.table[127] == 0
    cpu, torch_k = double_quantize(a, offset=0.0, path="cpu"), double_quantize(a, offset=0.0, path="default")
    assert cpu.inner.codes[1] == 131 and torch_k.inner.codes[1] == 127 and cpu.inner.codes[0] == 255
    # the native kernel does not clamp absmax: a zero block stores 0 and codes 0, a partial block is a block
    z = quantize_blockwise_cpu(np.zeros(300, np.float32), block=256)
    assert z.absmax.tolist() == [0.0, 0.0] and not z.codes.any()
    with pytest.raises(ValueError, match="path must be 'default'"):
        double_quantize(a, path="native")
    with pytest.raises(ValueError, match="256-entry table sorted"):
        quantize_blockwise_cpu(a, NF4)
