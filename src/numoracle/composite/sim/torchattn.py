"""torch's CPU ``scaled_dot_product_attention`` as composite models (torch 2.13.0+cpu, x86-64, CPU capability
AVX512, MKL 2024.2; docs/composite.md, "Bit-exact models"): ``torch_cpu_sdpa(q, k, v, backend=...)``.

* The GEMMs (MKL ``sgemm``, one thread or many): each output a chain of FMAs from +0 over K blocks, the block
  results added in order (``torch_gemm_order``): one block for K <= 192, two of K // 2 (and the rest, one term
  when K is odd) for 192 < K < 384, blocks of 192 from K = 384; the same for every M and N tried and for both
  operand layouts. GEMMs of at most 3 rows (M <= 3) take other MKL paths (products rounded before they are
  added, orders that differ by output column): not modelled (``torch_flash_modelled_rows``).
* ``backend="math"`` (ATen ``_scaled_dot_product_attention_math``): bf16 inputs upcast to fp32; q and k each
  multiplied by fl(sqrt(scale)); S = q k^T; the causal mask added (-inf / 0); torch's CPU softmax (SLEEF
  ``expf_u10``, its sum order, e fl(1/S)); O = P v; rounded to the input's type.
* ``backend="flash"`` (ATen ``cpu_flash_attention``, ``FlashAttentionKernel.cpp``), per key block of 512 (its kv
  split): S = q k^T (bf16: products of bf16 values, accumulated in fp32), s = fl(S fl(scale)), m = max,
  e = ATen's ``exp_u20`` (bf16: ``fexp_u20``) on the block's full 16-lane vectors and the scalar ``exp`` on its
  tail (correctly rounded reproduces it; glibc's ``expf`` does not),
  l = 16 lanes over the full vectors, halving, then the tail in order; bf16: e rounded to bf16 before PV;
  O = e v; after the first block, online (``simulate_attention``'s blocked form): alpha = ``std::exp(m - m')``,
  glibc's ``expf`` (``glibc_expf``, not correctly rounded), l = fma(alpha, l, rowsum e), O = fl(alpha O) with each K
  block of e v added to it in turn (the GEMM's beta = 1);
  out = fl(O fl(1/l)) rounded to the input's type. Queries run in blocks of 32 (L < 192), 64 (L < 768)
  or 256; a last block of at most 3 rows is one of MKL's small-M GEMMs: those rows are not reproduced.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.formats.format import BF16, FP32, format_of
from ...core.inputs import exact_float64
from ...models.orders.basic import Blocked, Order, Sequential
from ...models.orders.cpu import Interleaved
from . import elementwise as ew
from .attention import simulate_attention
from .torchcpu import torch_softmax_order

__all__ = ["torch_cpu_sdpa", "torch_gemm_order", "torch_flash_exp", "torch_flash_modelled_rows", "FLASH_KV_SPLIT",
           "SDPA_BACKENDS", "SMALL_M"]

FLASH_KV_SPLIT = 512        # cpu_flash_attention's kv split size: keys per block
SDPA_BACKENDS = ("math", "flash")
SMALL_M = 3                 # MKL's GEMMs of at most this many rows take other paths (products rounded): not modelled
_LANES = 16


def torch_gemm_order(k: int) -> Order:
    """The K order of torch 2.13.0's CPU float32 GEMM (MKL sgemm, this build) for a dot of k terms."""
    if k <= 192:
        return Sequential()
    return Blocked(k // 2 if k < 384 else 192)


def torch_flash_q_split(L: int) -> int:
    """The query block of torch's CPU flash kernel for L queries (``flash_attention_kernel_impl``)."""
    return 256 if L >= 768 else 64 if L >= 192 else 32


def torch_flash_modelled_rows(L: int) -> np.ndarray:
    """Which of L query rows the flash model reproduces: all but a last query block of at most ``SMALL_M`` rows
    (its GEMMs are MKL's small-M paths)."""
    qs = min(torch_flash_q_split(L), L)
    rows = np.ones(L, bool)
    last = L % qs
    if 0 < last <= SMALL_M or L <= SMALL_M:
        rows[L - (last or L):] = False
    return rows


def torch_flash_exp(fmt: Any = FP32) -> Any:
    """The exp of torch's CPU flash kernel on a (rows, n) block for inputs of ``fmt``: on the full 16-lane vectors
    ``exp_u20`` (fp32) or ``fexp_u20`` (bf16), on the tail the kernel's scalar ``exp`` (correctly rounded reproduces it:
    glibc's ``expf`` does not, so it is taken as C's double ``exp`` rounded to float)."""
    vec = ew.torch_fexp_u20 if format_of(fmt) == BF16 else ew.torch_exp_u20

    def exp(d: np.ndarray) -> np.ndarray:
        main = d.shape[-1] - d.shape[-1] % _LANES
        return np.concatenate([vec(d[..., :main]), ew.exp_cr(d[..., main:])], axis=-1)
    return exp


def torch_cpu_sdpa(q: Any, k: Any, v: Any, *, causal: bool = False, scale: float | None = None,
                   backend: str = "math") -> np.ndarray:
    """``F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)`` on CPU with the given backend
    (``SDPBackend.MATH`` or ``FLASH_ATTENTION``), float32 or bfloat16, bit for bit (flash: the rows of
    ``torch_flash_modelled_rows``; bf16 at 512 keys about 1 element in 10^5 differs); float64 values of q's type."""
    _, fmt = exact_float64(q, "q")
    if fmt not in (FP32, BF16):
        raise ValueError(f"the torch CPU attention models cover float32 and bfloat16 inputs, got {fmt.name}")
    if backend == "math":
        return simulate_attention(q, k, v, scale=scale, causal=causal, scaling="inputs", qk_order=torch_gemm_order,
                                  pv_order=torch_gemm_order, sum_order=lambda n: torch_softmax_order(n, FP32),
                                  exp=ew.sleef_expf_u10, normalize="before")
    if backend != "flash":
        raise ValueError(f"backend must be one of {SDPA_BACKENDS}, got {backend!r}")
    return simulate_attention(q, k, v, scale=scale, causal=causal, block=FLASH_KV_SPLIT, alpha_exp=ew.glibc_expf,
                              pv_into=True, l_fma=True, qk_order=torch_gemm_order,
                              pv_order=torch_gemm_order, sum_order=Interleaved(_LANES, combine="halving", tail="after"),
                              exp=torch_flash_exp(fmt), normalize="after_reciprocal",
                              p_format=BF16 if fmt == BF16 else None)
