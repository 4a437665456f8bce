"""Conformance: numoracle's NF4 / FP4 / double-quantisation references against bitsandbytes' CPU path.

Default tier: 2^16 elements per (codebook, dtype); ``-m slow``: 2^20 (>= 10^6). The report is in
docs/conformance.md ("bitsandbytes"); the one known deviation (the CPU C kernel of the 8-bit blockwise
quantiser, used for the absmax values of double quantisation) is asserted here with its explanation.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch")
bnbf = pytest.importorskip("bitsandbytes.functional", reason="needs bitsandbytes: pip install bitsandbytes")

from numoracle.quant.codebook import (  # noqa: E402
    BNB_DYNAMIC8,
    BNB_FP4,
    NF4,
    dequantize_codebook,
    double_quantize,
    quantize_codebook,
)
from numoracle.quant.packing import pack, unpack  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
KINDS = {"nf4": NF4, "fp4": BNB_FP4}


def _data(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * np.exp(rng.uniform(-6, 6, n))
    x[rng.integers(0, n, n // 64)] = 0.0  # zeros, and whole zero blocks below
    x[: 64 * 3] = 0.0
    return x.astype(np.float32)


def _boundary(cb) -> np.ndarray:
    """Each block: absmax 1 at its first element, then the codebook's midpoints and their FP32 neighbours."""
    b = cb.boundaries.astype(np.float32)
    vals = np.concatenate([b, np.nextafter(b, np.float32(-2)), np.nextafter(b, np.float32(2)),
                           cb.table.astype(np.float32)])
    vals = vals[np.abs(vals) <= 1]
    rows = -(-vals.size // 63)
    out = np.zeros((rows, 64), np.float32)
    out[:, 0] = 1.0
    out.reshape(-1)[np.flatnonzero(np.arange(rows * 64) % 64)[: vals.size]] = vals
    return out.ravel()


def _compare(x: np.ndarray, kind: str, dt: str) -> int:
    xt = torch.from_numpy(x).to(DTYPES[dt]).reshape(-1, 64)
    packed, st = bnbf.quantize_4bit(xt, blocksize=64, quant_type=kind)
    q = quantize_codebook(xt, KINDS[kind], block=64)
    assert np.array_equal(st.absmax.numpy(), q.absmax)
    mism = int(np.count_nonzero(unpack(packed.numpy(), "bnb", q.codes.shape) != q.codes))
    assert np.array_equal(packed.numpy(), pack(q.codes, "bnb"))
    d = bnbf.dequantize_4bit(packed, st).float().numpy().astype(np.float64)
    mism += int(np.count_nonzero(d != q.dequantize(dt)))
    return mism


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_4bit_codes_packing_and_dequantisation_match(kind, dt):
    assert _compare(_data(1 << 16, 1), kind, dt) == 0
    assert _compare(_boundary(KINDS[kind]), kind, dt) == 0


@pytest.mark.slow
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_4bit_million_elements(kind, dt):
    assert _compare(_data(1 << 20, 2), kind, dt) == 0


@pytest.mark.parametrize("kind", list(KINDS))
def test_partial_blocks_and_short_tensors_match(kind):
    """Regression (issue 40, defect 4): a last partial block and a tensor shorter than one block (bitsandbytes
    0.50.2 stores their clamped absmax and divides by it), for sizes around the block and zero tails."""
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 31, 63, 65, 64 * 5 + 1, 64 * 5 + 33, 64 * 7 - 1):
        x = (rng.standard_normal(n) * np.exp(rng.uniform(-4, 4, n))).astype(np.float32)
        for data in (x, np.concatenate([x[: 64 * (n // 64)], np.zeros(n % 64, np.float32)])):
            if data.size == 0:
                continue
            packed, st = bnbf.quantize_4bit(torch.from_numpy(data), blocksize=64, quant_type=kind)
            q = quantize_codebook(data, KINDS[kind], block=64)
            assert np.array_equal(st.absmax.numpy(), q.absmax)
            assert np.array_equal(unpack(packed.numpy(), "bnb", q.codes.shape), q.codes)
            d = bnbf.dequantize_4bit(packed, st).float().numpy().astype(np.float64)
            assert np.array_equal(d.ravel(), q.dequantize("fp32"))
    packed, _ = bnbf.quantize_4bit(torch.tensor([-1.25, 3.0]), blocksize=64, quant_type="fp4")
    assert list(unpack(packed.numpy(), "bnb", (2,))) == [12, 3]


def test_published_tables_are_bitsandbytes_own():
    for kind, cb in KINDS.items():
        assert np.array_equal(bnbf.get_4bit_type(kind, device="cpu").numpy().astype(np.float64), cb.table)
    assert np.array_equal(bnbf.create_dynamic_map().numpy().astype(np.float64), BNB_DYNAMIC8.table)


def test_known_deviation_cpu_blockwise_kernel_is_not_nearest():
    """bitsandbytes 0.50.2's CPU C kernel (cquantize_blockwise_cpu_fp32) does not always return the nearest
    entry of the dynamic map; numoracle follows the nearest-entry rule of bitsandbytes' torch kernel
    (backends/default/ops.py, "same assumption as CUDA kernel"). Witness: a zero gets code 131 (2.125e-05),
    not code 127 (0.0); the other mismatches lie at most 4 entries away, mostly where |t| < 1e-4."""
    zero = np.zeros(256, np.float32)
    zero[0] = 1.0
    out, _ = bnbf.quantize_blockwise(torch.from_numpy(zero), blocksize=256)
    assert int(out.numpy()[1]) == 131 and 2.12e-5 < BNB_DYNAMIC8.table[131] < 2.13e-5
    assert int(quantize_codebook(zero, BNB_DYNAMIC8, block=256).codes[1]) == 127 and BNB_DYNAMIC8.table[127] == 0
    a = _data(1 << 16, 3)
    out, st = bnbf.quantize_blockwise(torch.from_numpy(a), blocksize=256)
    q = quantize_codebook(a, BNB_DYNAMIC8, block=256)
    assert np.array_equal(st.absmax.numpy(), q.absmax)
    d = out.numpy().astype(np.int64) - q.codes.astype(np.int64)
    assert np.count_nonzero(d) and np.abs(d).max() <= 4


def test_double_quantisation_matches_given_bitsandbytes_offset():
    x = torch.from_numpy(_data(1 << 16, 4))
    packed, st = bnbf.quantize_4bit(x, blocksize=64, quant_type="nf4", compress_statistics=True)
    _, plain = bnbf.quantize_4bit(x, blocksize=64, quant_type="nf4")
    dq = double_quantize(plain.absmax.numpy(), offset=st.offset.item())
    assert np.array_equal(st.state2.absmax.numpy(), dq.inner.absmax)
    c_bnb, c_ours = st.absmax.numpy().astype(np.int64), dq.inner.codes.astype(np.int64)
    assert np.all(np.abs(c_bnb - c_ours) <= 4)  # the C kernel's picks (above)
    d = bnbf.dequantize_4bit(packed, st).numpy().astype(np.float64)
    # dequantising with bitsandbytes' own second-level codes reproduces its output bit for bit
    absmax = (dequantize_codebook(c_bnb.astype(np.uint8), dq.inner.absmax, BNB_DYNAMIC8, 256).astype(np.float32)
              + dq.offset).astype(np.float32)
    q = quantize_codebook(x, NF4, block=64)
    assert np.array_equal(d.ravel(), dequantize_codebook(q.codes, absmax, NF4, 64))
