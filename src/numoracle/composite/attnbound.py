"""Error bound of attention's forward pass: plain three-step, online softmax (FlashAttention-2), split-KV combine.

Modelled in acc (unit roundoff u): scores s = fl(scale fl(q . k)) (the dot along ``score_order``, products exact
when 2 p_in <= p_acc; ``scale_rounded=True`` when the kernel uses fl(1/sqrt(D)) against the exact 1/sqrt(D)),
p_j = exp(fl(s_j - m)), P rounded to ``p_format`` before PV (FlashAttention: bf16/fp16), l = sum p, N = P v along
``order``, o = N / l. Let E_j bound the score error, so p^_j = c e^{s_j} (1 + theta_j) with
|theta_j| <= rho_j = exp(E_j + u |d_j|)(1 + mu_exp) - 1 (c = exp(-m^) cancels in N / l). Then

    lam = (1 + gamma_l)(1 + sum_j P_j rho_j) - 1,     rho^N_j = (1 + rho_j)(1 + u_p) - 1,
    |o^ - o| <= |o| [(1 + mu_div) / (1 - lam) - 1]
                + (1 + mu_div) / (1 - lam) * sum_j P_j |v_j| [(1 + rho^N_j)(1 + gamma_pv) - 1]

with P the exact softmax weights. Online softmax (``block=Bc``, T = ceil(Lk / Bc) key blocks; our derivation,
docs/composite.md): every term passes T - 1 rescalings alpha = exp(m_old - m_new), each an exp (mu_exp), a
subtraction (u |m_old - m_new|; these sum to at most the row's score range R) and one multiply of l and of the
accumulator (u), so rho_j gains the factor [(1 + mu_exp)(1 + u)^2]^(T-1) e^(u R); the sums have depth
h(Bc) + T - 1. Split-KV (``splits=S``, FlashDecoding): each split's (o_s, lse_s) by the above, then
o = sum_s w_s o_s with w_s = exp(lse_s - lse); with Lam the largest error of an lse_s and omega the weights'
relative error (exp(2 Lam + u R_lse)(1 + mu_exp)(1 + mu_div) over the normalising sum),
|o^ - o| <= (1 + omega)(1 + gamma_S) max_s(alpha_s + beta_s) A + (omega + gamma_S (1 + omega)) A,
A = sum_j P_j |v_j| (our derivation; no published bound was found for either).

kind="probabilistic": the three sums' factors (q.k over D, l and PV over the keys, with their block trees) become
Higham & Mary's 2019 gamma~(lambda) over the same roundings, lambda set by a union bound over the call's
B Lq Lk (D + 2) paths for ``confidence``; exp, the rescalings, the divisions and the split-KV combine stay worst case.

``normalize="before"`` (jax 0.10.2's ``dot_product_attention``: P = softmax(s) in fp32, rounded to ``p_format``, then
o = P v): p^_j = e^_j / l^ (1 + delta_div) lies within P_j (1 + rho_j)(1 + mu_div) / (1 - lam) - P_j (the same
symmetric argument as softmax's, BHH 2021), then (1 + u_p) and the PV sum's gamma_pv on every term, so
|o^ - o| <= A [(1 + mu_div)/(1 - lam) (1 + rho)(1 + u_p)(1 + gamma_pv) - 1] = alpha A + beta A: the form above with
|o| replaced by A >= |o| (one-pass plain attention only; online blocks and split-KV normalise after).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..bounds.boundmath import Component
from ..core.formats.format import format_of
from ..core.inputs import exact_float64
from .boundbase import (
    MARGIN,
    CompositeBound,
    Setting,
    component,
    out_terms,
    setting,
    sum_components,
    summation_gamma,
)

__all__ = ["attention_bound"]

_EXTRA = ("head_dim", "block", "splits", "p_format", "score_order", "scale_rounded", "normalize")


def _depths(st: Setting, n: int, events: int = 1) -> tuple[float, float, int]:
    """(gamma_l, gamma_pv, T) for n keys: the row sum's and PV's factors, the number of key blocks (worst case, or
    Higham & Mary 2019's probabilistic factor over ``events`` such paths)."""
    g = lambda comps: summation_gamma(st, comps, events)  # noqa: E731
    Bc = st.extra.get("block")
    p_fmt = format_of(st.extra["p_format"]) if st.extra.get("p_format") else st.acc
    prod = 0 if 2 * max(p_fmt.precision, st.dtype.precision) <= st.acc.precision or (
        p_fmt.precision + st.dtype.precision <= st.acc.precision) else 1
    if Bc:
        T = -(-n // Bc)
        inner = sum_components(st, min(Bc, n), "block sum")
        return (g(inner + [component("blocks", st.u, T - 1, "", "")]),
                g(inner + [component("blocks", st.u, T - 1 + prod, "", "")]), T)
    comps = sum_components(st, n, "row")
    return g(comps), g(comps + [component("products", st.u, prod, "", "")]), 1


def _components(st: Setting) -> list[Component]:
    D = st.extra.get("head_dim", 128)
    comps = sum_components(st, D, "scores q . k", st.extra.get("score_order"))
    comps.append(component("scale", st.u, 1 + bool(st.extra.get("scale_rounded")), "s = fl(scale * (q . k)) (and "
                           "fl(1/sqrt(D)) when scale_rounded)", "Higham 2002"))
    comps.append(component("shift", st.u, 1, "fl(s - m): u |d| inside exp", "Higham 2002"))
    comps.append(Component("exp", st.exp.relative(st.acc), 1, f"p = exp(d) by {st.exp.name}", st.exp.source))
    if st.extra.get("p_format"):
        pf = format_of(st.extra["p_format"])
        comps.append(component("P rounding", pf.unit_roundoff("rne"), 1, f"P rounded to {pf.name} before PV",
                               "Dao 2023 (FlashAttention-2)"))
    comps += sum_components(st, st.K, "l = sum p and PV")
    if st.extra.get("block"):
        T = -(-st.K // st.extra["block"])
        comps.append(component("online rescaling", st.u, 3 * (T - 1), f"T - 1 = {T - 1} rescalings: exp, "
                               "subtraction, multiply (ours)", "docs/composite.md"))
    if st.extra.get("splits"):
        comps.append(component("split-KV combine", st.u, 4 + st.extra["splits"], "lse_s, weights, sum over splits "
                               "(ours)", "docs/composite.md"))
    comps.append(Component("division", st.div.relative(st.acc), 1, f"o = N / l by {st.div.name}", st.div.source))
    if st.u_out:
        comps.append(component("output rounding", st.u_out, 1, f"o stored in {st.out.name}", "Higham 2002"))
    return comps


def attention_bound(op: str, dtype: Any, K: int, **kw: Any) -> CompositeBound:
    st = setting(op, dtype, K, kw, _EXTRA)
    if st.extra.get("normalize", "after") not in ("after", "before"):
        raise ValueError("normalize must be 'after' (o = (P v) / l) or 'before' (P = e / l, then P v)")
    if st.extra.get("normalize") == "before" and (st.extra.get("block") or st.extra.get("splits")):
        raise ValueError("normalize='before' is the one-pass kernel: pass block=None and splits=None")
    for name in ("block", "splits"):
        val = st.extra.get(name)
        if val is not None and (isinstance(val, bool) or not isinstance(val, int) or val < 1):
            raise ValueError(f"{name} must be a positive int, got {val!r}")
    comps = _components(st)
    g_l, g_pv, T = _depths(st, K, K)
    mu_e, mu_d = float(st.exp.relative(st.acc)), float(st.div.relative(st.acc))
    u = float(st.u)
    u_p = float(format_of(st.extra["p_format"]).unit_roundoff("rne")) if st.extra.get("p_format") else 0.0
    rho = ((1 + mu_e) * ((1 + mu_e) * (1 + u) ** 2) ** (T - 1)) - 1
    lam = (1 + g_l) * (1 + rho) - 1
    beta = (1 + mu_d) / (1 - lam) * ((1 + rho) * (1 + u_p) * (1 + g_pv) - 1)
    coef = Fraction(((1 + mu_d) / (1 - lam) - 1 + beta) * (1 + float(st.u_out)) + float(st.u_out)) * Fraction(MARGIN)
    notes = ("a priori coefficient: for scores all equal and exact (d = 0), times A = sum_j P_j |v_j| >= |o|; "
             "per element: .tolerance(q, k, v, scale=None, causal=False, mask=None)",)
    method = ("worst case (guaranteed)" if st.kind == "worst" else f"probabilistic sums (Higham & Mary 2019, "
              f"confidence {st.confidence}: q.k, l and PV); exp, rescalings and the combine worst case")
    return CompositeBound(op, st.dtype, st.acc, K, st.out, st.kind, st.confidence if st.kind != "worst" else None,
                          tuple(comps), coef, method, notes, dict(st.extra),
                          evaluate=lambda b, *a, **d: _evaluate(st, *a, **d))


def _keep(shape: tuple, causal: bool, mask: Any) -> np.ndarray:
    keep = np.ones(shape, bool)
    if causal:
        keep &= np.tril(np.ones(shape[-2:], bool))
    return keep if mask is None else keep & np.broadcast_to(np.asarray(mask, bool), shape)


def _split_terms(st: Setting, s: np.ndarray, keep: np.ndarray, absqk: np.ndarray, v: np.ndarray, sc: float) -> tuple:
    """For one split's keys: (alpha, beta) per row (beta: the max over keys), lse, its error, P, A."""
    u, n = float(st.u), s.shape[1]
    events = st.extra.get("events", 1)  # every term's path in the call (the union bound of the probabilistic kind)
    g_qk = summation_gamma(st, sum_components(st, st.extra.get("head_dim", 1), "scores", st.extra.get("score_order")),
                           events)
    k_sc = 1 + bool(st.extra.get("scale_rounded"))
    mu_d, u_p = float(st.div.relative(st.acc)), 0.0
    if st.extra.get("p_format"):
        u_p = float(format_of(st.extra["p_format"]).unit_roundoff("rne"))
    g_l, g_pv, T = _depths(st, n, events)
    with np.errstate(all="ignore"):
        m = np.where(keep, s, -np.inf).max(axis=1)
        d = np.where(keep, s - np.where(np.isfinite(m), m, 0)[:, None], -np.inf)
        e = np.exp(d)
        l_ = e.sum(axis=1)
        P = e / l_[:, None]
        E = (g_qk * (1 + u) ** k_sc) * sc * absqk + ((1 + u) ** k_sc - 1) * np.abs(s)
        ad = np.where(keep, np.abs(d), 0.0)
        R = ad.max(axis=1)
        mu_e = (float(st.exp.ulps) + float(st.exp.per_arg) * ad + 0.5) * 2.0 ** (1 - st.acc.precision)
        rho = np.exp(E + u * ad) * (1 + mu_e) - 1
        if T > 1:
            mu_r = (float(st.exp.ulps) + float(st.exp.per_arg) * R + 0.5) * 2.0 ** (1 - st.acc.precision)
            rho = (1 + rho) * (((1 + mu_r) * (1 + u) ** 2) ** (T - 1) * np.exp(u * R))[:, None] - 1
        rho = np.where(keep, rho, 0.0)
        lam = (1 + g_l) * (1 + (P * rho).sum(axis=1)) - 1
        lam = np.where(lam < 1, lam, np.inf)
        k_ = np.where(lam < 1, (1 + mu_d) / (1 - lam), np.inf)  # lam >= 1: vacuous
        alpha = k_ - 1
        beta = k_ * ((1 + rho.max(axis=1)) * (1 + u_p) * (1 + g_pv) - 1)
        lse = m + np.log(l_)
        mu_log = float(st.log.relative(st.acc))
        Lam = (np.where(lam < 1, -np.log1p(-np.minimum(lam, 1 - 2.0**-52)), np.inf) + mu_log * np.abs(np.log(l_))
               + u * np.abs(lse) * 2)
        none = ~keep.any(axis=1)  # a split without a kept key for the row takes no part in the combine (weight 0)
        alpha, beta, Lam = (np.where(none, 0.0, a) for a in (alpha, beta, Lam))
    return alpha, beta, lse, Lam, P, l_


def _evaluate(st: Setting, q: Any, k: Any, v: Any, *, scale: Any = None, causal: bool = False,
              mask: Any = None) -> np.ndarray:
    qv, kv, vv = (exact_float64(a, n)[0] for a, n in ((q, "q"), (k, "k"), (v, "v")))
    D, Lk = qv.shape[-1], kv.shape[-2]
    if Lk != st.K:
        raise ValueError(f"the bound was made for K = {st.K} keys; k has {Lk}")
    events = int(np.prod(qv.shape[:-1])) * Lk * (D + 2)  # paths of q.k, l and PV, every row of every batch entry
    st = Setting(**{**st.__dict__, "extra": {**st.extra, "head_dim": D, "events": events}})
    sc = 1 / math.sqrt(D) if scale is None else float(scale)
    batch, Lq = qv.shape[:-2], qv.shape[-2]
    keep = _keep((*batch, Lq, Lk), causal, mask)
    S = st.extra.get("splits") or 1
    bounds = np.zeros((*batch, Lq, vv.shape[-1]))
    for idx in np.ndindex(*batch):  # one batch entry at a time: (Lq, Lk) arrays stay in cache-sized pieces
        qb, kb, vb = qv[idx], kv[idx], vv[idx]
        s = sc * (qb @ kb.T)
        absqk = (np.abs(qb) @ np.abs(kb).T) * (1 + (D + 2) * 2.0**-53)
        bounds[idx] = _entry_bound(st, s, keep[idx], absqk, vb, sc, S)
    return bounds


def _entry_bound(st: Setting, s: np.ndarray, keep: np.ndarray, absqk: np.ndarray, v: np.ndarray, sc: float,
                 S: int) -> np.ndarray:
    """One batch entry's per-element bound (plain or online: one split; split-KV: S splits and the combine)."""
    u, (u_out, eta_out, _) = float(st.u), out_terms(st)
    parts = np.array_split(np.arange(s.shape[1]), S)
    terms = [_split_terms(st, s[:, js], keep[:, js], absqk[:, js], v[js], sc) for js in parts]
    with np.errstate(all="ignore"):
        if S == 1:
            P = terms[0][4]
        else:
            e = np.where(keep, np.exp(s - np.where(keep, s, -np.inf).max(axis=1, keepdims=True)), 0.0)
            P = e / e.sum(axis=1, keepdims=True)
        P = np.where(keep, P, 0.0)
        A = P @ np.abs(v)
        o = P @ v
        if S == 1:
            lead = A if st.extra.get("normalize") == "before" else np.abs(o)
            err = terms[0][0][:, None] * lead + terms[0][1][:, None] * A
            err = np.where(np.isfinite(terms[0][0] + terms[0][1])[:, None], err, np.inf)  # vacuous: +inf, not NaN
        else:
            ab = np.max([t[0] + t[1] for t in terms], axis=0)[:, None]
            lse = np.array([t[2] for t in terms])
            R = lse.max(axis=0) - np.where(np.isfinite(lse), lse, np.inf).min(axis=0)
            Lam = np.nanmax(np.array([t[3] for t in terms]), axis=0)
            g_S = (1 + u) ** (S + 1) - 1
            w = np.exp(2 * Lam + u * R) * (1 + float(st.exp.relative(st.acc))) * (1 + float(st.div.relative(st.acc)))
            omega = (w * (1 + g_S)) / (1 - ((1 + g_S) * w - 1)) - 1
            omega = np.where(omega >= 0, omega, np.inf)[:, None]
            err = (1 + omega) * (1 + g_S) * ab * A + (omega + g_S * (1 + omega)) * A
        return (err * (1 + u_out) + u_out * np.abs(o) + eta_out) * MARGIN
