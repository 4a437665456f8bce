"""A bit-exact model of attention's forward pass, softmax(scale q k^T + mask) v, plain or as FlashAttention-2's
online softmax over key blocks (``simulate_attention``), every step rounded to the compute format, every product
and sum along a numoracle order.

Steps (acc the compute format, fl its rounding): S = q k^T (``simulate("matmul")`` along ``qk_order``, accumulated
in acc), s = fl(S sc) with sc = ``scale`` (default 1/sqrt(D)) rounded to acc, masked entries -inf (``causal``:
key j kept for query i when j <= i). ``block=None`` (plain): m = max s, e = exp(fl(s - m)), l = sum e along
``sum_order``; ``normalize="before"``: P = e fl(1/l) (torch's math backend: softmax, then P v), O = P v;
``"after"``: O = fl(fl(e v) / l). ``block=Bc`` (online softmax, Dao 2023 Algorithm 1): per key block, m' = max(m,
rowmax s_blk), alpha = exp(fl(m - m')), p = exp(fl(s_blk - m')), l = fl(fl(alpha l) + rowsum p), O = fl(fl(alpha O)
+ p v_blk), and O = fl(O / l) at the end (alpha = 1 while m' is -inf). ``p_format``: P (or p) rounded to it before
the PV product (FlashAttention's kernels: bf16). Inputs (..., L, D), (..., Lk, D), (..., Lk, Dv), the leading axes
batched; the result is rounded to ``out`` (default q's format). Fully masked rows give NaN.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.formats.format import format_of
from ...core.inputs import exact_float64
from ...models.engine.simulation import simulate
from . import elementwise as ew
from .accarith import acc_format, add, div, mul, round_to
from .model import _apply, _order_for, _sum_rows

__all__ = ["simulate_attention"]


def _matmul(a: np.ndarray, b: np.ndarray, f: Any, order: Any) -> np.ndarray:
    """a (m, K) @ b (K, n) accumulated in f along order; a, b hold values of formats within float32."""
    return np.asarray(simulate("matmul", a.astype(np.float32), b.astype(np.float32), acc=f,
                               order=_order_for(order, a.shape[1])), np.float64)


def _rowmax(s: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return s.max(axis=1, keepdims=True)


def _one(q: np.ndarray, k: np.ndarray, v: np.ndarray, f: Any, sc: float, causal: bool, block: int | None,
         qk_order: Any, pv_order: Any, sum_order: Any, exp: Any, pf: Any, normalize: str) -> np.ndarray:
    L, Lk = q.shape[0], k.shape[0]
    s = mul(_matmul(q, k.T, f, qk_order), sc, f)
    if causal:
        s = np.where(np.arange(Lk)[None, :] <= np.arange(L)[:, None], s, -np.inf)
    ex = exp or ew.exp_cr

    def p_round(p: np.ndarray) -> np.ndarray:
        return p if pf is None else round_to(p, pf)

    if block is None:
        m = _rowmax(s)
        e = _apply(ex, add(s, -m, f), f, "exp")
        lsum = _sum_rows(e, f, sum_order)[:, None]
        if normalize == "before":
            return _matmul(p_round(mul(e, div(1.0, lsum, f), f)), v, f, pv_order)
        return div(_matmul(p_round(e), v, f, pv_order), lsum, f)
    m = np.full((L, 1), -np.inf)
    lsum = np.zeros((L, 1))
    o = np.zeros((L, v.shape[1]))
    for b0 in range(0, Lk, block):
        sb = s[:, b0:b0 + block]
        m_new = np.maximum(m, _rowmax(sb))
        live = np.isfinite(m_new)
        base = np.where(live, m_new, 0.0)
        alpha = np.where(live, _apply(ex, np.where(live, add(m, -base, f), 0.0), f, "exp"), 1.0)
        p = _apply(ex, add(sb, -base, f), f, "exp")
        lsum = add(mul(alpha, lsum, f), _sum_rows(p, f, sum_order)[:, None], f)
        o = add(mul(alpha, o, f), _matmul(p_round(p), v[b0:b0 + block], f, pv_order), f)
        m = m_new
    return div(o, lsum, f)


def simulate_attention(q: Any, k: Any, v: Any, *, scale: float | None = None, causal: bool = False,
                       block: int | None = None, qk_order: Any = None, pv_order: Any = None, sum_order: Any = None,
                       acc: Any = "fp32", out: Any = None, exp: Any = None, p_format: Any = None,
                       normalize: str = "before") -> np.ndarray:
    """Attention's forward pass as a kernel computes it (module docstring); float64 values of ``out``."""
    f = acc_format(acc)
    qv, qfmt = exact_float64(q, "q")
    kv, _ = exact_float64(k, "k")
    vv, _ = exact_float64(v, "v")
    if qv.ndim < 2 or kv.shape[:-2] != qv.shape[:-2] or vv.shape[:-1] != kv.shape[:-1] or kv.shape[-1] != qv.shape[-1]:
        raise ValueError(f"q (..., L, D), k (..., Lk, D) and v (..., Lk, Dv) do not fit: {qv.shape}, {kv.shape}, "
                         f"{vv.shape}")
    if normalize not in ("before", "after"):
        raise ValueError(f"normalize must be 'before' or 'after', got {normalize!r}")
    if block is not None and (isinstance(block, bool) or not isinstance(block, int) or block < 1):
        raise ValueError(f"block must be None (plain) or a positive int (keys per block), got {block!r}")
    D = qv.shape[-1]
    sc = float(round_to(1 / math.sqrt(D) if scale is None else float(scale), f))
    dst = qfmt if out is None else format_of(out)
    pf = None if p_format is None else format_of(p_format)
    lead = qv.shape[:-2]
    qs, ks, vs = (a.reshape((-1,) + a.shape[-2:]) for a in (round_to(qv, f), round_to(kv, f), round_to(vv, f)))
    res = np.stack([_one(qs[i], ks[i], vs[i], f, sc, causal, block, qk_order, pv_order, sum_order, exp, pf,
                         normalize) for i in range(qs.shape[0])])
    return round_to(res, dst).reshape(lead + res.shape[-2:])
