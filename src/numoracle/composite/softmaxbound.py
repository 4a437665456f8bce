"""Error bounds of softmax, log_softmax, logsumexp and cross-entropy evaluated with the max shift.

The kernel modelled (every framework's stable form, Blanchard, Higham & Higham 2021, Algorithm 2.2 / 3.1): in the
accumulator format acc (unit roundoff u), m = max_j x_j (exact), d_i = fl(x_i - m) (|error| <= u |d_i|),
e_i = exp(d_i) by a function of relative error mu_exp (``exp=``: correctly rounded by default, or a table entry of
composite/ulps.py), S = sum e_i along ``order`` (h roundings on the deepest path), then

* softmax   y_i = e_i / S  (``div=``: one division of error mu_div),
* log_softmax y_i = d_i - log S,  logsumexp y = m + log S  (``log=``: mu_log),
* cross_entropy (reduction "none") the negated log_softmax at the target.

With rho_i = exp(u |d_i|)(1 + mu_exp) - 1 and sigma = (1 + gamma_h)(1 + sum_j p_j rho_j + K eta_e) - 1 (p the exact
softmax, eta_e the absolute error of an exp result below acc's normal range; S >= 1), the derivation in
docs/composite.md gives per element

    softmax:      |y^ - y| <= y [(1 + rho_i)(1 + mu_div) / (1 - sigma) - 1] + eta,
    log_softmax:  |y^ - y| <= (u |d_i| + lam + mu_log (L + lam))(1 + u) + u |y|,   lam = -log(1 - sigma),
    logsumexp:    |y^ - y| <= (lam + mu_log (L + lam))(1 + u) + u |y|,             L = log S,

then the output rounding (1 + u_out) and its underflow. The a priori coefficient is the softmax one at d_i = 0
(the largest entries): about (h + 2) u + 2 mu_exp; BHH 2021's Theorem 3.3 has the same shape. The probabilistic
kind replaces gamma_h by Higham & Mary's (2019) gamma~_h(lambda).

Intermediate formats (our derivation, in BHH 2021's framework: every stored value is one more factor (1 + delta),
|delta| <= u_f, on the quantity it stores):

* ``stats=F`` (unit roundoff u_s): S and log S are stored in F between the steps (torch 2.13.0's CPU bf16
  log_softmax keeps them in ``scalar_t`` buffers). S' = S^ (1 + delta_s) lies within a factor 1 +/- sigma' of S,
  sigma' = (1 + sigma)(1 + u_s) - 1 (since 1 - sigma' <= (1 - sigma)(1 - u_s)), so softmax's bound holds with
  sigma', lam = -log(1 - sigma'), and log S' stored in F errs by mu_L |log S'| with
  mu_L = (1 + mu_log)(1 + u_s) - 1, |log S'| <= L + lam: E = lam + mu_L (L + lam). The max needs no rounding (it is
  an input element; F must hold the input format).
* ``form="composed"``: every step is a separate operation storing ``out`` (torch.logsumexp: amax, sub, exp, sum,
  log, add, each a bf16 tensor; jax.nn.softmax's bf16 steps). The shift is then rounded twice (acc, then out):
  u_d = (1 + u)(1 + u_o) - 1 in place of u, so rho_i = exp(u_d |d_i|)(1 + mu_exp)(1 + u_o) - 1 (the exps stored,
  their underflow eta_e + eta_o), S and log S stored in out (stats = out), and log_softmax's final subtraction
  uses the stored shift (u_d |d_i|). A step a kernel keeps in acc instead has delta = 0, inside |delta| <= u_o: the
  composed bound covers every subset of these stores (jax 0.10.2's bf16 softmax: XLA fuses some of them).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..bounds.boundmath import Component, nested, underflow_eta
from ..core.formats.format import format_of
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
from .rows import to_rows

__all__ = ["softmax_family_bound", "SOFTMAX_OPS"]

SOFTMAX_OPS = ("softmax", "log_softmax", "logsumexp", "cross_entropy")


_EXTRA = ("stats", "form")
_OURS = "our derivation in Blanchard, Higham & Higham 2021's framework (module docstring; docs/composite.md)"


def _stats_u(st: Setting) -> tuple[float, float, float]:
    """(u_o, u_s, eta_o): a composed form's per-step storage rounding, the statistics' storage, out's underflow."""
    composed = st.extra.get("form", "fused") == "composed"
    u_o = float(st.u_out) if composed else 0.0
    eta_o = float(underflow_eta(st.out, "rne")) if composed and st.u_out else 0.0
    sf = st.extra.get("stats")
    u_s = 0.0 if sf is None else float(format_of(sf).unit_roundoff("rne"))
    if sf is not None and nested(st.acc, format_of(sf)):
        u_s = 0.0
    return u_o, max(u_s, u_o), eta_o


def _components(st: Setting) -> list[Component]:
    f = st.acc
    u_o, u_s, _ = _stats_u(st)
    comps = [component("shift x - max", st.u, 1, "d_i = fl(x_i - m): |error| <= u |d_i|; exp turns it into a "
                       "relative error exp(u |d_i|) - 1 (per element: the data decide)")]
    if u_o:
        comps.append(component("shift stored", st.out.unit_roundoff("rne"), 1, f"d_i stored in {st.out.name} "
                               "(form='composed')", _OURS))
    comps.append(Component("exp", st.exp.relative(f), 1, f"e_i = exp(d_i) by {st.exp.name}", st.exp.source))
    if u_o:
        comps.append(component("exp stored", st.out.unit_roundoff("rne"), 1, f"e_i stored in {st.out.name} "
                               "(form='composed')", _OURS))
    comps += sum_components(st, st.K, "S = sum exp")
    if u_s:
        sf = st.out if u_o else format_of(st.extra["stats"])
        comps.append(component("statistics stored", sf.unit_roundoff("rne"), 1 if st.op == "softmax" else 2,
                               f"S (and log S) stored in {sf.name} between the steps", _OURS))
    if st.op == "softmax":
        comps.append(Component("division", st.div.relative(f), 1, f"y_i = e_i / S by {st.div.name}", st.div.source))
    else:
        comps.append(Component("log", st.log.relative(f), 1, f"log S by {st.log.name}", st.log.source))
        comps.append(component("final addition", st.u, 1, "y = d_i - log S (or m + log S): u |y|"))
    if st.u_out:
        comps.append(component("output rounding", st.u_out, 1, f"y stored in {st.out.name}"))
    return comps


def _coefficient(st: Setting, comps: list[Component]) -> Fraction:
    """softmax's relative coefficient at d = 0 (exact rational arithmetic, upward where a float enters)."""
    u_o, u_s, _ = (Fraction(t) for t in _stats_u(st))
    mu_e, mu_d = (1 + st.exp.relative(st.acc)) * (1 + u_o) - 1, st.div.relative(st.acc)
    g = Fraction(summation_gamma(st, [c for c in comps if c.name.startswith("accumulation")], st.K))
    sigma = ((1 + g) * (1 + mu_e)) * (1 + u_s) - 1
    if sigma >= 1:
        return Fraction(2) ** 64  # vacuous: the sum's error may reach 100%
    c = (1 + mu_e) * (1 + mu_d) / (1 - sigma) - 1
    return (1 + c) * (1 + st.u_out) - 1 if st.u_out else c


def softmax_family_bound(op: str, dtype: Any, K: int, **kw: Any) -> CompositeBound:
    st = setting(op, dtype, K, kw, _EXTRA)
    form = st.extra.get("form", "fused")
    if form not in ("fused", "composed"):
        raise ValueError(f"form must be 'fused' (one kernel, acc between the steps) or 'composed' (every step "
                         f"stores out), got {form!r}")
    if form == "composed" and st.out is None:
        raise ValueError("form='composed' stores every step in out: pass out= (e.g. out='bf16')")
    if st.extra.get("stats") is not None and not nested(st.dtype, format_of(st.extra["stats"])):
        raise ValueError(f"stats={st.extra['stats']!r} cannot hold the inputs ({st.dtype.name}): the max is stored "
                         "there exactly; pass a format at least as wide as dtype")
    comps = _components(st)
    coef = _coefficient(st, comps)
    method = ("worst case (guaranteed)" if st.kind == "worst" else
              f"probabilistic sum (Higham & Mary 2019, confidence {st.confidence})")
    notes = ("per element: .tolerance(x, mask=None, axis=-1) (cross_entropy: .tolerance(logits, target))",
             "log_softmax / logsumexp / cross_entropy have no purely relative form: the coefficient shown is softmax's "
             "at d = 0; their per-element bound is absolute (module docstring)") if op != "softmax" else ()
    return CompositeBound(op, st.dtype, st.acc, K, st.out, st.kind, st.confidence if st.kind != "worst" else None,
                          tuple(comps), coef, method, notes, {"order": str(st.order.kind), **st.extra},
                          evaluate=lambda b, *a, **d: _evaluate(st, comps, *a, **d))


def _row_terms(st: Setting, comps: list[Component], x: Any, mask: Any, axis: int) -> tuple:
    """Per row and element: d, p, rho, sigma, L (float64), the rows object."""
    r = to_rows(x, axis, mask)
    if r.v.shape[1] != st.K:
        raise ValueError(f"the bound was made for K = {st.K} entries per row; x has {r.v.shape[1]}")
    f = st.acc
    u = float(st.u)
    u_o, u_s, eta_o = _stats_u(st)
    u_d = (1 + u) * (1 + u_o) - 1
    with np.errstate(all="ignore"):
        m = np.where(r.keep, r.v, -np.inf).max(axis=1, initial=-np.inf)
        d = np.where(r.keep, r.v - np.where(np.isfinite(m), m, 0.0)[:, None], -np.inf)
        e = np.exp(d)
        S = e.sum(axis=1)
        p = e / S[:, None]
        ad = np.where(r.keep, np.abs(d), 0.0)
        mu_e = (float(st.exp.ulps) + float(st.exp.per_arg) * ad + 0.5) * 2.0 ** (1 - f.precision)
        rho = (np.expm1(u_d * ad) * (1 + mu_e) + mu_e) * (1 + u_o) + u_o
        eta_e = (float(st.exp.ulps) + float(st.exp.per_arg) * ad.max(axis=1) + 0.5) * float(f.min_subnormal)
        eta_e = eta_e * (1 + u_o) + eta_o
        g = summation_gamma(st, [c for c in comps if c.name.startswith("accumulation")],
                            r.v.shape[0] * st.K)  # every term's path in every row
        sigma = ((1 + g) * (1 + (p * rho).sum(axis=1) + st.K * eta_e) * (1 + u_s) - 1) * MARGIN
        sigma = np.where(sigma < 1, sigma, np.inf)
        L = np.log(S)
    return r, d, p, rho, sigma, L, eta_e


def _evaluate(st: Setting, comps: list[Component], x: Any, target: Any = None, *, mask: Any = None,
              axis: int = -1) -> np.ndarray:
    if st.op == "cross_entropy":
        if target is None:
            raise ValueError("cross_entropy's tolerance needs (logits, target)")
        axis = -1
    elif target is not None:
        raise TypeError(f"{st.op}'s tolerance takes x (and mask=, axis=); a target is for cross_entropy")
    r, d, p, rho, sigma, L, eta_e = _row_terms(st, comps, x, mask, axis)
    u, (u_out, eta_out, eta_acc) = float(st.u), out_terms(st)
    mu_div = float(st.div.relative(st.acc))
    u_o, u_s, _ = _stats_u(st)
    u_d = (1 + u) * (1 + u_o) - 1
    mu_log = (1 + float(st.log.relative(st.acc))) * (1 + u_s) - 1  # log S, stored in stats
    with np.errstate(all="ignore"):
        if st.op == "softmax":
            k = np.where(sigma[:, None] < 1, (1 + mu_div) / (1 - sigma[:, None]), np.inf)  # sigma >= 1: vacuous
            err = p * ((1 + rho) * k - 1) + (eta_e[:, None] * k + eta_acc)
            y = p
        else:
            lam = np.where(sigma < 1, -np.log1p(-np.minimum(sigma, 1 - 2.0**-52)), np.inf)  # sigma >= 1: vacuous
            E = lam + mu_log * (np.abs(L) + lam)
            if st.op == "logsumexp":
                y = np.where(np.isfinite(L), L, 0.0) + np.where(r.keep, r.v, -np.inf).max(axis=1)
                err = E * (1 + u) + u * np.abs(y)
            else:
                y = d - L[:, None]
                err = (u_d * np.abs(d) + E[:, None]) * (1 + u) + u * np.abs(y)
        err = (err * (1 + u_out) + u_out * np.abs(y) + eta_out) * MARGIN
    if st.op == "cross_entropy":
        t = np.asarray(target).reshape(-1)
        return err[np.arange(t.size), t].reshape(r.shape[:-1])
    if st.op == "logsumexp":
        return err.reshape(r.shape[:-1])
    return np.moveaxis(np.where(r.keep, err, 0.0).reshape(r.shape), -1, r.axis)
