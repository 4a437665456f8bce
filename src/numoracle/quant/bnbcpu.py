"""bitsandbytes' native CPU kernel of 8-bit blockwise quantisation, exactly: its 65,536-bin lookup table.

bitsandbytes 0.50.2 runs two different quantisers for ``quantize_blockwise`` on CPU (the 8-bit dynamic map, and
the second level of double quantisation, ``compress_statistics=True``):

* ``path="default"``: ``bitsandbytes/backends/default/ops.py`` (torch; nearest entry by FP32 midpoints, ties
  down; "same assumption as CUDA kernel"). It runs when bitsandbytes' native library did not load
  (``bitsandbytes.cextension.lib`` is an ``ErrorHandlerMockBNBNativeLibrary``). numoracle's
  :func:`~numoracle.quant.codebook.quantize_codebook`.
* ``path="cpu"``: ``bitsandbytes/backends/cpu/ops.py`` -> ``libbitsandbytes_cpu`` ``cquantize_blockwise_cpu_fp32``
  (``_fp16``, ``_bf16``), i.e. ``quantize_cpu_impl`` in ``csrc/cpu_ops.cpp`` (x86-64 build). It runs whenever
  the native library loaded, the usual CPU install. This module.

The native kernel (x86-64 path; each step one FP32 operation, as numpy float32 arithmetic is):

1. ``absmax = max |x|`` over the block, from 0 (no clamp: an all-zero block stores 0 and gets codes 0; a last
   partial block is treated like a full one).
2. ``inv = fl32(1 / absmax)``, ``t = clamp(fl32(x * inv), -1, 1)``.
3. ``i = (uint16)(fl32(fl32(fl32(fl32(t + 1) * 0.5) * 65535) + 0.5))`` (C's truncation).
4. ``code = lut[i]``, where ``lut[i]`` is the number of midpoints ``fl32(0.5 * fl32(c[j] + c[j+1]))`` below
   ``v_i = fl32(-1 + fl32(2i / 65535))``: the entry nearest to ``v_i``, not to ``t``. So a zero (``i = 32768``,
   ``v_i = 1.5259e-05``) gets code 131 (2.125e-05), not code 127 (0.0), and about a fifth of the codes of
   heavy-tailed data lie up to 4 entries from the nearest one.

Checked against bitsandbytes 0.50.2's ``libbitsandbytes_cpu.so`` (x86-64) in
``tests/quant/test_conformance_bitsandbytes.py``: random data and every LUT-bin edge with its FP32 neighbours.
An aarch64 build computes step 3 with NEON (``neon_norm_to_lut_index_x4``) and is not covered here.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ..core.args import check_int
from .codebook import BNB_DYNAMIC8, Codebook, CodebookQuantized, _fp32_values, codebook_of

__all__ = ["BNB_PATHS", "lut_of", "quantize_blockwise_cpu"]

BNB_PATHS = ("default", "cpu")  # bitsandbytes/backends/default/ops.py; backends/cpu/ops.py (the native kernel)
_F = np.float32
_LUT_SIZE = 65536


@lru_cache(maxsize=8)
def _lut(values: tuple[float, ...]) -> np.ndarray:
    """build_quantize_lut (csrc/cpu_ops.cpp): code index of each of the 65,536 bins of [-1, 1]."""
    c = np.asarray(values, dtype=_F)
    mid = (_F(0.5) * (c[:-1] + c[1:]).astype(_F)).astype(_F)
    i = np.arange(_LUT_SIZE)
    v = (_F(-1) + ((_F(2) * i.astype(_F)).astype(_F) / _F(_LUT_SIZE - 1)).astype(_F)).astype(_F)
    # ``while (code_idx < 255 && midpoints[code_idx] < val) ++code_idx``: the count of midpoints below val
    lut = np.searchsorted(mid, v, side="left").astype(np.uint8)
    lut.flags.writeable = False
    return lut


def lut_of(codebook: Any = BNB_DYNAMIC8) -> np.ndarray:
    """The native kernel's lookup table for a sorted 256-entry codebook (uint8 codes, 65,536 bins)."""
    return _lut(_native_codebook(codebook).values)


def _native_codebook(codebook: Any) -> Codebook:
    cb = codebook_of(codebook)
    v = cb.table
    if v.size != 256 or np.any(np.diff(v) < 0) or cb.max_abs != 1.0:
        raise ValueError(f"codebook {cb.name}: bitsandbytes' native CPU kernel takes a 256-entry table sorted by "
                         "value with largest magnitude 1 (as create_dynamic_map gives); use path='default' "
                         "(quantize_codebook) for other tables")
    return cb


def quantize_blockwise_cpu(x: Any, codebook: Any = BNB_DYNAMIC8, *, block: int = 4096) -> CodebookQuantized:
    """bitsandbytes 0.50.2's native CPU ``quantize_blockwise`` (``quantize_cpu_impl``, x86-64) of ``x``
    (FP32 / FP16 / BF16 values, flattened, C order): codes, and absmax per block (unclamped)."""
    cb = _native_codebook(codebook)
    lut = _lut(cb.values)
    block = check_int(block, "block", 1)
    xv = _fp32_values(x, "x")
    flat = xv.ravel()
    if not np.all(np.isfinite(flat)):
        raise ValueError(f"x holds {int(np.count_nonzero(~np.isfinite(flat)))} NaN/inf values; blockwise absmax "
                         "quantisation has no rule for them (bitsandbytes returns garbage codes): remove them")
    nb = -(-flat.size // block)
    pad = np.zeros(nb * block, _F)
    pad[: flat.size] = flat
    rows = pad.reshape(nb, block)
    # step 1: absmax from 0 (the padding's zeros change nothing)
    absmax = np.abs(rows).max(axis=1) if nb else np.zeros(0, _F)
    # step 2: t = clamp(x * fl32(1 / absmax)); a zero block's codes are 0 (the kernel skips it)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = (_F(1) / absmax).astype(_F)
        t = np.clip((rows * inv[:, None]).astype(_F), _F(-1), _F(1))
    t = np.where((absmax == 0)[:, None], _F(-1), t)
    # step 3: the bin, (t + 1) * 0.5 * 65535 + 0.5 in FP32, truncated
    h = (((t + _F(1)).astype(_F) * _F(0.5)).astype(_F) * _F(_LUT_SIZE - 1)).astype(_F)
    idx = (h + _F(0.5)).astype(_F).astype(np.int64)
    codes = np.where((absmax == 0)[:, None], 0, lut[idx]).astype(np.uint8).ravel()[: flat.size]
    return CodebookQuantized(codes.reshape(xv.shape), absmax.astype(_F), cb, int(block), tuple(xv.shape))
