"""jax's CPU ``jax.nn.softmax`` (jax 0.10.2, float32 and bfloat16) and ``jax.nn.dot_product_attention`` as
composite models: found on live outputs (docs/composite.md, "Bit-exact models"), with the elementwise exp given
as XLA's own (``jnp.exp``, applied to the exact arguments the model computes): not emulated here, so
``jax_cpu_softmax`` needs jax.

The steps: d = x - max; e = XLA's exp(d); S = the row sum, ``XlaChunks(32)`` (XLA's reduce-window rewrite) when
the whole input has fewer than 4096 elements and YNNPACK's ``YnnSum("k1")`` from 4096 on (as ``jnp.sum``:
models/orders/ynnpack.py; YNNPACK's partial-reduction split, taken for at most 3 rows of more than 32768 terms, is
not covered); y = e * fl(1 / S) (XLA rewrites the division by the broadcast sum as a multiplication by its
reciprocal); results below float32's smallest normal are flushed to +0 (XLA's CPU runs with flush-to-zero).

``jax_cpu_attention`` is ``jax.nn.dot_product_attention`` (``implementation="xla"``) on CPU as such a model:
logits = einsum(q, k) accumulated in fp32 (bf16: ``BF16_BF16_F32``), times fl32(scale), the causal mask (a large
negative number: exp gives 0 as for -inf), the softmax above (in fp32), P cast to the inputs' type, O = einsum(P, v)
rounded to it. XLA's CPU dot picks its kernel by shape (one FMA chain, or 4 or 2 interleaved chains: docs/composite.md),
and that choice is not pinned: the two GEMM orders are parameters (default one chain each).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.formats.format import BF16, FP32
from ...core.inputs import exact_float64
from ...models.engine.simulation import simulate
from ...models.orders.basic import Order, Sequential
from ...models.orders.cpu import XlaChunks
from ...models.orders.ynnpack import YnnSum
from .attention import simulate_attention
from .model import simulate_softmax

__all__ = ["jax_cpu_softmax", "jax_softmax_order", "jax_cpu_attention", "YNN_FROM"]

YNN_FROM = 4096     # inputs of at least this many elements are summed by YNNPACK (jax 0.10.2, measured)


def jax_softmax_order(size: int) -> Order:
    """The order of jax 0.10.2's CPU softmax sum of each row, for an input of ``size`` elements in all."""
    return XlaChunks(32) if size < YNN_FROM else YnnSum("k1")


def jax_cpu_softmax(x: Any) -> np.ndarray:
    """``jax.nn.softmax(x, axis=-1)`` on CPU for float32 or bfloat16 x, bit for bit (needs jax: the exp is
    ``jnp.exp``). bf16: ``_bf16_softmax``."""
    xv, fmt = exact_float64(x, "x")
    if fmt == BF16:
        return _bf16_softmax(xv)
    if fmt != FP32:
        raise ValueError(f"the jax CPU softmax model covers float32 and bfloat16 inputs, got {fmt.name}")
    import jax.numpy as jnp

    def exp(d: np.ndarray) -> np.ndarray:
        return np.asarray(jnp.exp(jnp.asarray(d)))
    y = simulate_softmax(x, jax_softmax_order(int(np.prod(np.shape(x)))), exp=exp)
    return np.where(np.abs(y) < 2.0**-126, 0.0, y)


def _bf16_softmax(x: np.ndarray) -> np.ndarray:
    """jax 0.10.2's CPU softmax of bf16 rows (found on live outputs, confirmed on fresh seeds: docs/composite.md):

    1. d = bf16(x - max) (the subtraction in float32, exact or rounded once, then rounded to bf16: one correct
       rounding, 24 >= 2 * 8 + 1);
    2. e = XLA's exp of d in bf16 (``jnp.exp`` on the bf16 array: a bf16 result);
    3. S = bf16(the row sum of e accumulated in float32) (``jnp.sum`` upcasts bf16), along ``jax_softmax_order``;
    4. y = bf16(e * fl32(1 / S)) (float32 reciprocal and product, one rounding each, then bf16); results below
       2^-126 flushed to +0 as in float32.
    """
    import jax.numpy as jnp
    import ml_dtypes

    bf = ml_dtypes.bfloat16
    xf = np.asarray(x, np.float32)
    d = (xf - xf.max(axis=-1, keepdims=True)).astype(bf)                  # 1.
    e = np.asarray(jnp.exp(jnp.asarray(d))).astype(np.float32)           # 2.
    S = simulate("sum", e, acc="fp32", order=jax_softmax_order(int(x.size)))
    S = np.asarray(S, np.float32).reshape(e.shape[:-1] + (1,)).astype(bf).astype(np.float32)   # 3.
    y = (e * (np.float32(1) / S)).astype(bf).astype(np.float64)         # 4.
    return np.where(np.abs(y) < 2.0**-126, 0.0, y)


def _jexp(d: np.ndarray) -> np.ndarray:
    import jax.numpy as jnp
    return np.asarray(jnp.exp(jnp.asarray(d)))


def jax_cpu_attention(q: Any, k: Any, v: Any, *, causal: bool = False, scale: float | None = None,
                      qk_order: Any = None, pv_order: Any = None) -> np.ndarray:
    """``jax.nn.dot_product_attention(q, k, v, is_causal=causal, scale=scale)`` on CPU (inputs (B, T, N, H), fp32
    or bf16) given the orders of its two einsums (module docstring; None: one FMA chain, ``Sequential()``); float64
    values of q's type. Needs jax (the exp is ``jnp.exp``)."""
    _, fmt = exact_float64(q, "q")
    if fmt not in (FP32, BF16):
        raise ValueError(f"the jax CPU attention model covers float32 and bfloat16 inputs, got {fmt.name}")
    if np.ndim(q) != 4:
        raise ValueError(f"q, k, v must be (B, T, N, H) as jax.nn.dot_product_attention takes them, got {np.shape(q)}")
    B, T, N, _ = np.shape(q)
    size = B * N * T * np.shape(k)[1]
    heads = [np.swapaxes(np.asarray(a), 1, 2) for a in (q, k, v)]
    y = simulate_attention(*heads, scale=scale, causal=causal, qk_order=qk_order or Sequential(),
                           pv_order=pv_order or Sequential(),
                           sum_order=jax_softmax_order(size), exp=_jexp, normalize="before",
                           p_format=BF16 if fmt == BF16 else None)
    return np.swapaxes(y, 1, 2)
