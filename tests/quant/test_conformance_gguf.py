"""Conformance: numoracle's GGUF block quantisations against gguf-py 0.19.0 (gguf/quants.py).

Quantisers (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1): the bytes of random FP32 data and of boundary blocks.
Dequantisers (those and Q2_K .. Q6_K): random bytes (FP16 fields drawn finite) and boundary scales.
Default tier 2^16 elements per type, ``-m slow`` 2^20. Report: docs/conformance.md ("gguf").
"""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="needs gguf: pip install gguf")

from numoracle.quant.schemes.gguf import GGUF_TYPES, gguf_dequantize, gguf_quantize  # noqa: E402

QUANTISED = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"]
T = gguf.GGMLQuantizationType


def _x(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * np.exp(rng.uniform(-20, 20, n // 32).repeat(32))).astype(np.float32)
    x[:32] = 0  # an all-zero block
    x[32:64] = np.float32(1.5)  # all equal
    x[64:96] = np.linspace(-1, 1, 32, dtype=np.float32)  # ties of the argmax (first wins), +-1
    x[96:128] = np.float32(2.0**-140)  # subnormal scales
    x[128:160] = np.float32(6.0e4) * np.sign(rng.standard_normal(32)).astype(np.float32)  # FP16 overflow of d
    return x


@pytest.mark.parametrize("name", QUANTISED)
def test_quantisers_byte_for_byte(name):
    x = _x(1 << 16, 0)
    theirs = gguf.quants.quantize(x.reshape(-1, 256), T[name]).ravel()
    assert np.array_equal(theirs, gguf_quantize(x, name))


def _random_blocks(name: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    per, size = GGUF_TYPES[name]
    b = rng.integers(0, 256, (n // per, size), dtype=np.uint8)
    # FP16 fields: finite values over the whole range, with a few boundary ones
    h = (rng.standard_normal(b.shape[0] * 2) * np.exp(rng.uniform(-16, 10, b.shape[0] * 2))).astype(np.float16)
    h[:6] = [np.float16(65504), np.float16(-65504), np.float16(2.0**-24), np.float16(0), np.float16(-0.0),
             np.float16(2.0**-14)]
    h = h.view(np.uint8).reshape(-1, 2, 2)
    at = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
          "Q4_1": (0, 2), "Q5_1": (0, 2)}.get(name, (0,))
    for k, off in enumerate(at):
        b[:, off:off + 2] = h[:, k]
    return b


@pytest.mark.parametrize("name", list(GGUF_TYPES))
def test_dequantisers_bit_for_bit(name):
    b = _random_blocks(name, 1 << 16, 1)
    theirs = gguf.quants.dequantize(b, T[name]).ravel()
    ours = gguf_dequantize(b, name)
    assert np.array_equal(theirs.view(np.uint32), ours.view(np.uint32))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GGUF_TYPES))
def test_million_elements(name):
    if name in QUANTISED:
        x = _x(1 << 20, 2)
        assert np.array_equal(gguf.quants.quantize(x.reshape(-1, 1024), T[name]).ravel(), gguf_quantize(x, name))
    b = _random_blocks(name, 1 << 20, 3)
    assert np.array_equal(gguf.quants.dequantize(b, T[name]).ravel().view(np.uint32),
                          gguf_dequantize(b, name).view(np.uint32))
