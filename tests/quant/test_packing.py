"""Packed int4 layouts (quant/schemes/packing.py): hand-checked words, round trips, and refusals naming the
convention."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.quant.schemes.packing import PACKINGS, pack, pack_zeros, unpack, unpack_zeros


def test_hand_checked_words():
    seq = np.arange(8).reshape(8, 1)  # K = 8 rows of one column
    assert pack(seq, "gptq").view(np.uint32).tolist() == [[0x76543210]]
    # AWQ: nibble i holds column [0, 2, 4, 6, 1, 3, 5, 7][i]
    assert pack(np.arange(8).reshape(1, 8), "awq").view(np.uint32).tolist() == [[0x75316420]]
    # compressed-tensors: signed values stored + 8, sequential along K
    assert pack(np.arange(-8, 0).reshape(1, 8), "ct").view(np.uint32).tolist() == [[0x76543210]]
    # hqq: first half of the rows in the high nibble
    assert pack(np.array([[1, 2], [3, 4]]), "hqq").tolist() == [[0x13, 0x24]]
    # bitsandbytes: element 0 in the high nibble
    assert pack(np.array([1, 2, 3, 4]), "bnb").tolist() == [[0x12], [0x34]]


@pytest.mark.parametrize("conv", list(PACKINGS))
def test_round_trip(conv):
    rng = np.random.default_rng(0)
    lo = -8 if conv == "ct" else 0
    c = rng.integers(lo, lo + 16, (16, 24))
    assert np.array_equal(unpack(pack(c, conv), conv, c.shape), c)
    if conv in ("hqq", "bnb"):
        return
    shape = (24, 16) if conv == "ct" else (3, 16)
    z = rng.integers(lo + (conv == "gptq"), lo + 16, shape)
    assert np.array_equal(unpack_zeros(pack_zeros(z, conv), conv, shape), z)


def test_gptq_zeros_minus_one():
    z = np.full((1, 8), 8)
    assert pack_zeros(z, "gptq").view(np.uint32).tolist() == [[0x77777777]]
    assert pack_zeros(z, "gptq_v2").view(np.uint32).tolist() == [[0x88888888]]
    assert unpack_zeros(np.array([[0]], np.int32), "gptq", (1, 8)).tolist() == [[1] * 8]
    with pytest.raises(ValueError, match="zeros minus one"):
        pack_zeros(np.zeros((1, 8), np.int64), "gptq")


def test_refusals_name_the_convention():
    c = np.zeros((16, 8), np.int64)
    with pytest.raises(ValueError, match="gptq: qweight .* must have shape \\(2, 8\\)"):
        unpack(np.zeros((2, 4), np.int32), "gptq", (16, 8))
    with pytest.raises(ValueError, match="awq: qweight is int32, got uint8"):
        unpack(np.zeros((16, 1), np.uint8), "awq", (16, 8))
    with pytest.raises(ValueError, match="ct: weight codes must lie in -8..7"):
        pack(c + 8, "ct")
    with pytest.raises(ValueError, match="awq: zero points must lie in 0..15"):
        pack_zeros(np.full((1, 8), 16), "awq")
    with pytest.raises(ValueError, match="not a multiple of 8"):
        pack(np.zeros((12, 8), np.int64), "gptq")
    with pytest.raises(ValueError, match="unknown packing convention"):
        pack(c, "marlin")
    with pytest.raises(ValueError, match="hqq: zero points are not packed"):
        pack_zeros(c, "hqq")
    with pytest.raises(ValueError, match="odd number of codes"):
        pack(np.zeros(3, np.int64), "bnb")
