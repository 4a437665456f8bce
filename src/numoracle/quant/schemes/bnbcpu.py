"""bitsandbytes' native CPU kernel of 8-bit blockwise quantisation, exactly: its 65,536-bin lookup table.

bitsandbytes 0.50.2 runs two different quantisers for ``quantize_blockwise`` on CPU (the 8-bit dynamic map, and
the second level of double quantisation, ``compress_statistics=True``):

* ``path="default"``: ``bitsandbytes/backends/default/ops.py`` (torch; nearest entry by FP32 midpoints, ties
  down; "same assumption as CUDA kernel"). It runs when bitsandbytes' native library did not load
  (``bitsandbytes.cextension.lib`` is an ``ErrorHandlerMockBNBNativeLibrary``). numoracle's
  :func:`~numoracle.quant.schemes.codebook.quantize_codebook`.
* ``path="cpu"``: ``bitsandbytes/backends/cpu/ops.py`` -> ``libbitsandbytes_cpu`` ``cquantize_blockwise_cpu_fp32``
  (``_fp16``, ``_bf16``), i.e. ``quantize_cpu_impl`` in ``csrc/cpu_ops.cpp`` (x86-64 build). It runs whenever
  the native library loaded, the usual CPU install. This module (on arrays; :func:`~numoracle.quant.schemes.codebook.
  quantize_blockwise_cpu` is the user-facing function, with the codebook checks).

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

import numpy as np

__all__ = ["BNB_PATHS", "lut_of", "blockwise_cpu_codes"]

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


def lut_of(values: tuple[float, ...]) -> np.ndarray:
    """The native kernel's lookup table (uint8 codes of 65,536 bins) for a sorted 256-entry table of values."""
    v = tuple(float(a) for a in values)
    if len(v) != 256 or any(b < a for a, b in zip(v, v[1:])):
        raise ValueError(f"bitsandbytes' native CPU kernel takes a 256-entry table sorted by value, got {len(v)} "
                         "entries" + ("" if len(v) != 256 else ", not sorted"))
    return _lut(v)


def blockwise_cpu_codes(flat: np.ndarray, values: tuple[float, ...], block: int) -> tuple[np.ndarray, np.ndarray]:
    """(codes uint8, absmax FP32 per block) of finite FP32 values ``flat`` (1-D), steps 1-4 above."""
    lut = lut_of(values)
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
    zero = (absmax == 0)[:, None]
    t = np.where(zero, _F(-1), t)
    # step 3: the bin, (t + 1) * 0.5 * 65535 + 0.5 in FP32, truncated
    h = (((t + _F(1)).astype(_F) * _F(0.5)).astype(_F) * _F(_LUT_SIZE - 1)).astype(_F)
    idx = (h + _F(0.5)).astype(_F).astype(np.int64)
    # step 4: the table
    codes = np.where(zero, 0, lut[idx]).astype(np.uint8).ravel()[: flat.size]
    return codes, absmax.astype(_F)
