"""Conformance: numoracle's HQQ 4-bit packing and dequantisation against hqq 0.2.8.post1.

Default tier 2^16 elements, ``-m slow`` 2^20; random codes, zero points and scales (FP16), plus boundary
codes 0 and 15. The report is in docs/conformance.md ("hqq").
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch")
hqq_quantize = pytest.importorskip("hqq.core.quantize", reason="needs hqq: pip install hqq")

from numoracle.quant.schemes.int4 import dequantize_int4  # noqa: E402
from numoracle.quant.schemes.packing import pack, unpack  # noqa: E402


def _case(n: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    group = 64
    M = n // group
    codes = rng.integers(0, 16, (group, M))
    codes[0], codes[1] = 0, 15  # boundary codes
    zero = (rng.uniform(0, 15, (1, M))).astype(np.float16)
    scale = (rng.standard_normal((1, M)) * np.exp(rng.uniform(-8, 4, (1, M)))).astype(np.float16)
    BitPack = hqq_quantize.BitPack
    theirs_packed = BitPack.pack_4bit_u8(torch.from_numpy(codes.astype(np.uint8))).numpy()
    mism = int(np.count_nonzero(theirs_packed != pack(codes, "hqq")))
    mism += int(np.count_nonzero(unpack(theirs_packed, "hqq", codes.shape) != codes))
    meta = {"packing": "4bit_u8", "view_as_float": False, "nbits": 4, "group_size": group, "axis": 0,
            "shape": (group, M), "compute_dtype": torch.float16,
            "zero": torch.from_numpy(zero), "scale": torch.from_numpy(scale)}
    d = hqq_quantize.Quantizer.dequantize(torch.from_numpy(theirs_packed), meta).numpy().astype(np.float64)
    ours = dequantize_int4(codes, scale.astype(np.float64), zero.astype(np.float64), group=group,
                           convention="hqq")
    return mism + int(np.count_nonzero(d != ours))


def test_hqq_pack_and_dequantise_bit_for_bit():
    assert _case(1 << 16, 0) == 0


@pytest.mark.slow
def test_hqq_million_elements():
    assert _case(1 << 20, 1) == 0
