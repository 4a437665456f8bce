"""A bit-exact model of attention's forward pass, softmax(scale q k^T + mask) v, plain, as FlashAttention-2's
online softmax over key blocks, or split over the keys with a log-sum-exp combine (``simulate_attention``), every
step rounded to the compute format, every product and sum along a numoracle order.

Steps (acc the compute format, fl its rounding): S = q k^T (``simulate("matmul")`` along ``qk_order``, accumulated
in acc); ``scaling="scores"``: s = fl(S sc) with sc = ``scale`` (default 1/sqrt(D)) rounded to acc; ``"inputs"``
(torch's math backend): q and k are each multiplied by r = fl(sqrt(|sc|)) (sc in float64; q by -r when sc < 0)
before the product, s = S.
Masked entries are -inf (``causal``: key j kept for query i when j <= i). ``block=None`` (plain): m = max s,
e = exp(fl(s - m)), l = sum e along ``sum_order``; ``normalize="before"``: P = e fl(1/l) (softmax, then P v),
O = P v; ``"after"``: O = fl(fl(e v) / l); ``"after_reciprocal"``: O = fl(fl(e v) fl(1/l)). ``block=Bc`` (online
softmax, Dao 2023 Algorithm 1): per key block, m' = max(m, rowmax s_blk), alpha = alpha_exp(fl(m - m')),
p = exp(fl(s_blk - m')), l = fl(fl(alpha l) + rowsum p) (``l_fma``: one FMA), O = fl(fl(alpha O) + p v_blk)
(``pv_into``: fl(alpha O) + each K block of p v_blk in turn, a GEMM with beta = 1), then O normalised by l
(alpha = 1 while m' is -inf). ``p_format``: P (or p) rounded to it before the PV product (bf16 kernels).

``splits=S`` (split-KV, FlashDecoding): the keys are cut into S consecutive ranges of ceil(Lk / S) (the last
shorter); each range runs the steps above (plain or blocked) to its own O_j = fl(o_j / l_j) (``"after"``) and
lse_j = fl(m_j + log(l_j)) (-inf and O_j = 0 for a row with no live key in the range); then the combine, in acc:
M = max_j lse_j, t = sum_j exp(fl(lse_j - M)) (in split order), lse = fl(fl(log t) + M),
O = sum_j fl(w_j O_j) ... as FMAs: O = fma(w_j, O_j, O) from +0 with w_j = exp(fl(lse_j - lse)).

Inputs (..., L, D), (..., Lk, D), (..., Lk, Dv), the leading axes batched; the result is rounded to ``out``
(default q's format). Fully masked rows give NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.formats.format import format_of
from ...core.inputs import exact_float64
from ...models.engine.simulation import simulate
from ...models.orders.basic import Blocked, Sequential
from . import elementwise as ew
from .accarith import acc_format, add, div, fma, mul, round_to
from .model import _apply, _order_for, _sum_rows

__all__ = ["simulate_attention", "NORMALIZE_ATTENTION", "SCALING"]

NORMALIZE_ATTENTION = ("before", "after", "after_reciprocal")
SCALING = ("scores", "inputs")


def _matmul(a: np.ndarray, b: np.ndarray, f: Any, order: Any) -> np.ndarray:
    """a (m, K) @ b (K, n) accumulated in f along order; a, b hold values of formats within float32."""
    return np.asarray(simulate("matmul", a.astype(np.float32), b.astype(np.float32), acc=f,
                               order=_order_for(order, a.shape[1])), np.float64)


def _matmul_into(c: np.ndarray | None, a: np.ndarray, b: np.ndarray, f: Any, order: Any) -> np.ndarray:
    """C + a b as a GEMM with beta = 1 adds it: each K block of ``order`` (Sequential or Blocked(b) with sequential
    parts) a chain from +0, added to C in turn (C None: beta = 0)."""
    o = _order_for(order, a.shape[1])
    if isinstance(o, Sequential):
        sizes = [a.shape[1]]
    elif isinstance(o, Blocked) and o.inner == Sequential() and o.outer == Sequential() and o.outer_acc is None:
        n = a.shape[1]
        sizes = [o.b] * (n // o.b) + ([n % o.b] if n % o.b else [])
    else:
        raise ValueError(f"pv_into needs pv_order Sequential or Blocked(b) with sequential parts, got {o!r}")
    pos = 0
    for size in sizes:
        part = _matmul(a[:, pos:pos + size], b[pos:pos + size], f, Sequential())
        c = part if c is None else add(c, part, f)
        pos += size
    return c


def _rowmax(s: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return s.max(axis=1, keepdims=True)


@dataclass(frozen=True)
class _Steps:
    """What one attention evaluation is given (besides its data)."""

    f: Any
    block: int | None
    pv_order: Any
    sum_order: Any
    exp: Any
    alpha_exp: Any
    pf: Any
    normalize: str
    pv_into: bool = False
    l_fma: bool = False

    def p_round(self, p: np.ndarray) -> np.ndarray:
        return p if self.pf is None else round_to(p, self.pf)

    def finish(self, o: np.ndarray, lsum: np.ndarray) -> np.ndarray:
        if self.normalize == "after_reciprocal":
            return mul(o, div(1.0, lsum, self.f), self.f)
        return div(o, lsum, self.f)


def _range(s: np.ndarray, v: np.ndarray, st: _Steps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(m, l, O) over one key range: its row max, row sum and output, normalised by l."""
    f = st.f
    if st.block is None:
        m = _rowmax(s)
        base = np.where(np.isfinite(m), m, 0.0)
        e = _apply(st.exp, add(s, -base, f), f, "exp")
        lsum = _sum_rows(e, f, st.sum_order)[:, None]
        if st.normalize == "before":
            return m, lsum, _matmul(st.p_round(mul(e, div(1.0, lsum, f), f)), v, f, st.pv_order)
        return m, lsum, st.finish(_matmul(st.p_round(e), v, f, st.pv_order), lsum)
    L = s.shape[0]
    m = np.full((L, 1), -np.inf)
    lsum = np.zeros((L, 1))
    o = np.zeros((L, v.shape[1]))
    for b0 in range(0, s.shape[1], st.block):
        sb = s[:, b0:b0 + st.block]
        m_new = np.maximum(m, _rowmax(sb))
        live = np.isfinite(m_new)
        base = np.where(live, m_new, 0.0)
        alpha = np.where(live, _apply(st.alpha_exp, np.where(live, add(m, -base, f), 0.0), f, "alpha_exp"), 1.0)
        p = _apply(st.exp, add(sb, -base, f), f, "exp")
        rs = _sum_rows(p, f, st.sum_order)[:, None]
        lsum = fma(alpha, lsum, rs, f) if st.l_fma else add(mul(alpha, lsum, f), rs, f)
        pv, vb = st.p_round(p), v[b0:b0 + st.block]
        if st.pv_into:
            o = _matmul_into(mul(alpha, o, f) if b0 else None, pv, vb, f, st.pv_order)
        else:
            o = add(mul(alpha, o, f), _matmul(pv, vb, f, st.pv_order), f)
        m = m_new
    return m, lsum, st.finish(o, lsum)


def _combine(parts: list, f: Any, exp: Any, log: Any) -> np.ndarray:
    """The split-KV combine of (m_j, l_j, O_j) through lse_j = m_j + log l_j (module docstring)."""
    lses, outs = [], []
    for m, lsum, o in parts:
        dead = (lsum == 0) | ~np.isfinite(m)
        lg = _apply(log, np.where(dead, 1.0, lsum), f, "log")
        lses.append(np.where(dead, -np.inf, add(np.where(dead, 0.0, m), lg, f)))
        outs.append(np.where(dead, 0.0, o))
    big = np.max(np.stack(lses), axis=0)
    base = np.where(np.isfinite(big), big, 0.0)
    t = np.zeros_like(big)
    for lse in lses:
        t = add(t, _apply(exp, add(lse, -base, f), f, "exp"), f)
    with np.errstate(all="ignore"):
        total = add(_apply(log, t, f, "log"), big, f)
    res = np.zeros_like(outs[0])
    for lse, o in zip(lses, outs):
        w = _apply(exp, np.where(np.isfinite(total), add(lse, -total, f), np.nan), f, "exp")
        res = fma(w, o, res, f)
    return res


def _one(q: np.ndarray, k: np.ndarray, v: np.ndarray, sc: float, causal: bool, qk_order: Any, splits: int | None,
         log: Any, st: _Steps) -> np.ndarray:
    f = st.f
    L, Lk = q.shape[0], k.shape[0]
    s = _matmul(q, k.T, f, qk_order)
    if sc != 1.0:
        s = mul(s, sc, f)
    if causal:
        s = np.where(np.arange(Lk)[None, :] <= np.arange(L)[:, None], s, -np.inf)
    if splits is None:
        return _range(s, v, st)[2]
    width = -(-Lk // splits)
    parts = [_range(s[:, j:j + width], v[j:j + width], st) for j in range(0, Lk, width)]
    return _combine(parts, f, st.exp, log)


def simulate_attention(q: Any, k: Any, v: Any, *, scale: float | None = None, causal: bool = False,
                       block: int | None = None, qk_order: Any = None, pv_order: Any = None, sum_order: Any = None,
                       acc: Any = "fp32", out: Any = None, exp: Any = None, p_format: Any = None,
                       normalize: str = "before", scaling: str = "scores", alpha_exp: Any = None,
                       splits: int | None = None, log: Any = None, pv_into: bool = False,
                       l_fma: bool = False) -> np.ndarray:
    """Attention's forward pass as a kernel computes it (module docstring); float64 values of ``out``.
    ``exp`` / ``alpha_exp`` / ``log``: the elementwise functions (None: correctly rounded; ``alpha_exp`` None:
    ``exp``), each a numoracle function or a callable on the (rows, n) array of exact arguments. Online form:
    ``l_fma`` makes l = fma(alpha, l, rowsum p) one rounding; ``pv_into`` adds each block's P v into fl(alpha O)
    as a GEMM with beta = 1 does (each K block of ``pv_order`` added to O in turn)."""
    f = acc_format(acc)
    qv, qfmt = exact_float64(q, "q")
    kv, _ = exact_float64(k, "k")
    vv, _ = exact_float64(v, "v")
    if qv.ndim < 2 or kv.shape[:-2] != qv.shape[:-2] or vv.shape[:-1] != kv.shape[:-1] or kv.shape[-1] != qv.shape[-1]:
        raise ValueError(f"q (..., L, D), k (..., Lk, D) and v (..., Lk, Dv) do not fit: {qv.shape}, {kv.shape}, "
                         f"{vv.shape}")
    if normalize not in NORMALIZE_ATTENTION:
        raise ValueError(f"normalize must be one of {NORMALIZE_ATTENTION}, got {normalize!r}")
    if scaling not in SCALING:
        raise ValueError(f"scaling must be one of {SCALING}, got {scaling!r}")
    for name, val in (("block", block), ("splits", splits)):
        if val is not None and (isinstance(val, bool) or not isinstance(val, int) or val < 1):
            raise ValueError(f"{name} must be None or a positive int, got {val!r}")
    if splits is not None and normalize == "before":
        raise ValueError("splits needs each range's output normalised after PV: pass normalize='after' (or "
                         "'after_reciprocal')")
    D = qv.shape[-1]
    sc64 = 1 / math.sqrt(D) if scale is None else float(scale)
    dst = qfmt if out is None else format_of(out)
    st = _Steps(f, block, pv_order, sum_order, exp or ew.exp_cr, alpha_exp or exp or ew.exp_cr,
                None if p_format is None else format_of(p_format), normalize, bool(pv_into), bool(l_fma))
    lead = qv.shape[:-2]
    qs, ks, vs = (a.reshape((-1,) + a.shape[-2:]) for a in (round_to(qv, f), round_to(kv, f), round_to(vv, f)))
    if scaling == "inputs":
        r = float(round_to(math.sqrt(abs(sc64)), f))
        qs, ks, sc = mul(qs, math.copysign(r, sc64), f), mul(ks, r, f), 1.0
    else:
        sc = float(round_to(sc64, f))
    res = np.stack([_one(qs[i], ks[i], vs[i], sc, causal, qk_order, splits, log or ew.log_cr, st)
                    for i in range(qs.shape[0])])
    return round_to(res, dst).reshape(lead + res.shape[-2:])
