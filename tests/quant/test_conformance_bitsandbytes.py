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

from numoracle.quant.schemes.codebook import (  # noqa: E402
    BNB_DYNAMIC8,
    BNB_FP4,
    NF4,
    dequantize_codebook,
    double_quantize,
    quantize_codebook,
)
from numoracle.quant.schemes.packing import pack, unpack  # noqa: E402

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
    for n in (2, 63, 65, 64 * 5 + 33):
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


def _native_loaded() -> bool:
    from bitsandbytes.cextension import ErrorHandlerMockBNBNativeLibrary, lib

    return not isinstance(lib, ErrorHandlerMockBNBNativeLibrary)


def _default_kernel(a: np.ndarray, blocksize: int) -> tuple[np.ndarray, np.ndarray]:
    """bitsandbytes' torch kernel (backends/default/ops.py) on CPU, past its native CPU kernel."""
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)
    out, absmax = torch.ops.bitsandbytes.quantize_blockwise.default.redispatch(
        keys, torch.from_numpy(a), bnbf.create_dynamic_map(), blocksize)
    return out.numpy(), absmax.numpy()


def _blockwise_data(seed: int) -> list[np.ndarray]:
    a = _data(1 << 16, seed)
    b = _boundary(BNB_DYNAMIC8)
    # every bin edge of the native kernel's table ((t + 1) * 0.5 * 65535 + 0.5 = k) and 3 FP32 neighbours each
    k = np.arange(1, 65536)
    edge = (2 * (k - 0.5) / 65535 - 1).astype(np.float32)
    near, up, down = [edge], edge, edge
    for _ in range(3):
        up, down = np.nextafter(up, np.float32(2)), np.nextafter(down, np.float32(-2))
        near += [up, down]
    t = np.concatenate(near)
    t = t[np.abs(t) <= 1]
    rows = np.zeros((-(-t.size // 255), 256), np.float32)
    rows[:, 0] = 1.0
    rows[:, 1:].reshape(-1)[: t.size] = t
    tail = np.concatenate([np.ones(256, np.float32), np.zeros(100, np.float32)])  # a zero partial block
    return [a, b, rows.ravel(), tail, a[:300], a[:5]]


def test_blockwise_native_cpu_kernel_matches():
    """bitsandbytes 0.50.2's native CPU quantize_blockwise (libbitsandbytes_cpu, cquantize_blockwise_cpu_*):
    numoracle.quant.schemes.codebook.quantize_blockwise_cpu (quant/bnbcpu.py), codes and absmax, for FP32 / FP16 / BF16
    inputs (issue 40, defect 5)."""
    if not _native_loaded():
        pytest.skip("bitsandbytes' native CPU library did not load here; its kernel cannot be compared")
    from numoracle.quant.schemes.codebook import quantize_blockwise_cpu

    for x in _blockwise_data(3):
        for dt in DTYPES.values():
            xt = torch.from_numpy(x).to(dt)
            out, st = bnbf.quantize_blockwise(xt, blocksize=256)
            q = quantize_blockwise_cpu(xt.float().numpy(), BNB_DYNAMIC8, block=256)
            assert np.array_equal(st.absmax.numpy(), q.absmax)
            assert np.array_equal(out.numpy(), q.codes)


def test_blockwise_default_kernel_matches():
    """bitsandbytes 0.50.2's torch kernel (backends/default/ops.py), reached past the native one: numoracle's
    quantize_codebook (nearest entry; partial blocks clamped and divided)."""
    for x in _blockwise_data(4):
        out, absmax = _default_kernel(x, 256)
        q = quantize_codebook(x, BNB_DYNAMIC8, block=256)
        assert np.array_equal(absmax, q.absmax)
        assert np.array_equal(out, q.codes)


def test_the_two_blockwise_kernels_differ_as_documented():
    """The witness of quant/bnbcpu.py's docstring: a zero is code 131 (2.125e-05) in the native kernel, 127 (0.0) in the
    torch kernel; the other differences lie at most 4 entries away."""
    zero = np.zeros(256, np.float32)
    zero[0] = 1.0
    if _native_loaded():
        assert int(bnbf.quantize_blockwise(torch.from_numpy(zero), blocksize=256)[0].numpy()[1]) == 131
    assert int(_default_kernel(zero, 256)[0][1]) == 127 and 2.12e-5 < BNB_DYNAMIC8.table[131] < 2.13e-5
    a = _data(1 << 16, 3)
    native = double_quantize(a, offset=0.0, path="cpu").inner.codes.astype(np.int64)
    torch_k = double_quantize(a, offset=0.0, path="default").inner.codes.astype(np.int64)
    assert np.count_nonzero(native != torch_k) and np.abs(native - torch_k).max() <= 4


@pytest.mark.parametrize("n", [1 << 16, 64 * 2048])
def test_double_quantisation_matches_given_bitsandbytes_offset(n):
    """compress_statistics=True on CPU: bitsandbytes 0.50.2 quantises absmax - offset with its native kernel
    where that loaded (path="cpu"), else with its torch kernel (path="default"); codes, second-level absmax and
    the dequantised output bit for bit (issue 40, defect 5: 3 of 2048 codes and every exact zero differed)."""
    x = torch.from_numpy(_data(n, 4))
    packed, st = bnbf.quantize_4bit(x, blocksize=64, quant_type="nf4", compress_statistics=True)
    _, plain = bnbf.quantize_4bit(x, blocksize=64, quant_type="nf4")
    path = "cpu" if _native_loaded() else "default"
    dq = double_quantize(plain.absmax.numpy(), offset=st.offset.item(), path=path)
    assert np.array_equal(st.state2.absmax.numpy(), dq.inner.absmax)
    assert np.array_equal(st.absmax.numpy(), dq.inner.codes)
    d = bnbf.dequantize_4bit(packed, st).numpy().astype(np.float64)
    q = quantize_codebook(x, NF4, block=64)
    assert np.array_equal(d.ravel(), dequantize_codebook(q.codes, dq.absmax(), NF4, 64))
    # the torch kernel on the same values: bitsandbytes' own, past its native kernel
    shifted = (plain.absmax.numpy() - np.float32(st.offset.item())).astype(np.float32)
    codes, absmax2 = _default_kernel(shifted, 256)
    dd = double_quantize(plain.absmax.numpy(), offset=st.offset.item(), path="default")
    assert np.array_equal(codes, dd.inner.codes) and np.array_equal(absmax2, dd.inner.absmax)
