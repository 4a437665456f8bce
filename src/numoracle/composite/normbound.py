"""Error bounds of rms_norm and layer_norm (two-pass variance), as CPU and GPU kernels evaluate them.

Modelled in the accumulator acc (unit roundoff u), over K elements:

* rms_norm: t = fl(fl(sum fl(x_i^2)) / K + eps) (squares exact when 2 p_in <= p_acc; the sum along ``order``, h
  roundings; eps rounded into acc unless exact), r = rsqrt(t) (``rsqrt=``: mu_r), y_i = fl(fl(x_i r) w_i). All terms
  are positive, so t^ = t (1 + tau) with 1 + tau <= (1 + u)^(h + 3 [+1 squares]) (+ K eta / t for squares that
  underflow), and |y^ - y| <= |y| [(1 + mu_r)(1 + u)^2 / sqrt(1 - tau) - 1] + eta: a relative bound.
* layer_norm: mean mu^ = fl(fl(sum x) / K), |mu^ - mu| <= E_mu = gamma_h sum|x| / K (1 + u) + u |mu|;
  d_i = fl(x_i - mu^), |d^_i - d_i| <= e_i = E_mu + u (|d_i| + E_mu); variance v^ = fl(fl(sum d^_i^2) / K) with
  |v^ - v| <= E_v = [gamma_(h+1) (sum d^2 + D) + D] / K (1 + u) + u v, D = sum (2 |d_i| e_i + e_i^2) (the two-pass
  analysis of Chan, Golub & LeVeque 1983 and El Arar et al. 2023, made rigorous with these e_i); t = v + eps,
  tau = E_t / t; r^ within (1 + mu_r) / sqrt(1 - tau) of r. The affine part, ``affine="centered"``:
  y = fl(fl(fl(d r) w) + b), or ``"folded"`` (torch's CPU kernel: s = fl(r w), c = fl(b - fl(mu s)),
  y = fl(x s + c) with one FMA rounding): per element, docs/composite.md. Welford's variance is not bounded here.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..bounds.boundmath import Component
from ..core.inputs import exact_float64
from .boundbase import MARGIN, CompositeBound, Setting, component, gamma, out_terms, setting, sum_components

__all__ = ["norm_bound", "NORM_OPS"]

NORM_OPS = ("rmsnorm", "layernorm")
_EXTRA = ("eps", "affine", "weight", "variance")


def _eps_rounding(st: Setting) -> Fraction:
    eps = st.extra.get("eps")
    if eps is None:
        return st.u
    from ..core.engine.convert import cast, decode

    back = float(np.asarray(decode(cast(np.float64(eps), st.acc), st.acc)))
    return Fraction(0) if back == float(eps) else st.u


def _components(st: Setting) -> list[Component]:
    sq_exact = 2 * st.dtype.precision <= st.acc.precision
    comps = [component("squares", st.u, 0 if sq_exact else 1, "x^2 (or d^2) rounded into acc"
                       + (" (exact here)" if sq_exact else ""), "Higham 2002 §2.2")]
    if st.op == "layernorm":
        comps = sum_components(st, st.K, "sum x for the mean") + [
            component("mean division", st.u, 1, "mu = fl(sum / K)", "Higham 2002"),
            component("centring", st.u, 1, "d_i = fl(x_i - mu^)", "Higham 2002")] + [
            component("squares", st.u, 1, "d_i^2 rounded into acc", "Higham 2002")]
    comps += sum_components(st, st.K, "sum of squares")
    comps += [component("division and eps", st.u, 2, "fl(fl(s / K) + eps)", "Higham 2002"),
              component("eps rounding", _eps_rounding(st), 1, "eps rounded into acc (0 when exact)", "Higham 2002"),
              Component("rsqrt", st.rsqrt.relative(st.acc), 1, f"r = rsqrt(t) by {st.rsqrt.name}", st.rsqrt.source)]
    if st.op == "rmsnorm":
        n_mul = 2 if st.extra.get("weight", True) else 1
        comps.append(component("scaling", st.u, n_mul, "y = fl(fl(x r) w)", "Higham 2002"))
    else:
        comps.append(component("affine", st.u, 3, f"y = (x - mu) r w + b, form {st.extra.get('affine', 'centered')}",
                               "Higham 2002"))
    if st.u_out:
        comps.append(component("output rounding", st.u_out, 1, f"y stored in {st.out.name}", "Higham 2002"))
    return comps


def norm_bound(op: str, dtype: Any, K: int, **kw: Any) -> CompositeBound:
    st = setting(op, dtype, K, kw, _EXTRA)
    if st.extra.get("variance", "two_pass") != "two_pass":
        raise ValueError("variance='welford' is not bounded here (only the two-pass variance); pass "
                         "variance='two_pass'")
    if st.extra.get("affine", "centered") not in ("centered", "folded"):
        raise ValueError("affine must be 'centered' ((x - mu) r w + b) or 'folded' (x (r w) + (b - mu r w))")
    if st.kind != "worst":
        raise ValueError(f"{op}: only kind='worst' is modelled")
    comps = _components(st)
    coef = Fraction(0)
    notes = ["per element: .tolerance(x, weight=None, bias=None, eps=...)"]
    if op == "rmsnorm":  # a relative bound: (1 + mu_r) prod(1 + u) / sqrt(1 - tau) - 1, as a float rounded up
        tau = gamma([c for c in comps if c.name not in ("rsqrt", "scaling", "output rounding")])
        rest = gamma([c for c in comps if c.name in ("scaling", "output rounding")])
        coef = Fraction((1 + float(st.rsqrt.relative(st.acc))) * (1 + rest) / (1 - tau) ** 0.5 - 1) * Fraction(
            MARGIN)
    else:
        notes.append("layer_norm's bound is absolute per element (it depends on the variance); coefficient 0 shown")
    return CompositeBound(op, st.dtype, st.acc, K, st.out, st.kind, None, tuple(comps), coef, "worst case (guaranteed)",
                          tuple(notes), dict(st.extra), evaluate=lambda b, *a, **d: _evaluate(st, comps, *a, **d))


def _vec(a: Any, name: str, n: int) -> Any:
    if a is None:
        return None
    v, _ = exact_float64(a, name)
    if v.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},)")
    return v


def _evaluate(st: Setting, comps: list[Component], x: Any, weight: Any = None, bias: Any = None, *,
              eps: float | None = None) -> np.ndarray:
    v, _ = exact_float64(x, "x")
    K = v.shape[-1]
    if K != st.K:
        raise ValueError(f"the bound was made for K = {st.K}; x has {K} elements per row")
    eps = st.extra.get("eps", 0.0) if eps is None else eps
    w, b = _vec(weight, "weight", K), _vec(bias, "bias", K)
    X = v.reshape(-1, K)
    aw = np.ones(K) if w is None else np.abs(w)
    u, (u_out, eta_out, eta_acc) = float(st.u), out_terms(st)
    mu_r = float(st.rsqrt.relative(st.acc))
    g_sum = gamma([c for c in comps if "sum of squares" in c.name])
    with np.errstate(all="ignore"):
        if st.op == "rmsnorm":
            t = np.square(X).mean(axis=1) + eps
            tau = gamma([c for c in comps if c.name not in ("rsqrt", "scaling", "output rounding")])
            tau = tau + K * eta_acc / t  # squares below acc's normal range
            eps_r = np.where(tau < 1, (1 + mu_r) / np.sqrt(1 - np.minimum(tau, 1 - 2.0**-52)) - 1, np.inf)
            y = X / np.sqrt(t)[:, None] * (1.0 if w is None else w)
            n_mul = 1 if w is None else 2
            err = np.abs(y) * ((1 + eps_r[:, None]) * (1 + u) ** n_mul - 1) + n_mul * eta_acc
        else:
            err, y = _layer(st, comps, X, w, b, eps, g_sum, mu_r, aw)
        err = (err * (1 + u_out) + u_out * np.abs(y) + eta_out) * MARGIN
    return err.reshape(v.shape)


def _layer(st: Setting, comps: list[Component], X: np.ndarray, w: Any, b: Any, eps: float, g_sum: float,
           mu_r: float, aw: np.ndarray) -> tuple:
    """layer_norm's per-element bound (module docstring) and the exact-ish result (float64)."""
    K, u, eta = X.shape[1], float(st.u), float(out_terms(st)[2])
    g_mean = gamma([c for c in comps if "mean" in c.name and c.name.startswith("accumulation")])
    mu = X.mean(axis=1)
    E_mu = (g_mean * np.abs(X).sum(axis=1) / K * (1 + u) + u * np.abs(mu) + eta) * MARGIN
    d = X - mu[:, None]
    e = E_mu[:, None] + u * (np.abs(d) + E_mu[:, None])
    Dl = (2 * np.abs(d) * e + e * e).sum(axis=1)
    var = np.square(d).mean(axis=1)
    E_v = ((g_sum * (1 + u)) * (K * var + Dl) + Dl) / K * (1 + u) + u * var + K * eta
    eps_u = float(_eps_rounding(st))
    t = var + eps
    E_t = E_v + eps_u * eps + u * (t + E_v + eps_u * eps)
    tau = E_t / t
    eps_r = np.where(tau < 1, (1 + mu_r) / np.sqrt(1 - tau) - 1, np.inf)
    r = 1 / np.sqrt(t)
    ad, bb = np.abs(d), (0.0 if b is None else np.abs(b))
    y = d * r[:, None] * (1.0 if w is None else w) + (0.0 if b is None else b)
    if st.extra.get("affine", "centered") == "centered":
        Z = r[:, None] * (ad * eps_r[:, None] + e * (1 + eps_r[:, None]))
        z1 = ad * r[:, None] + Z
        err = aw * (Z + u * z1) + u * aw * z1 * (1 + u)
        err = err + u * (np.abs(y) + err) + 3 * eta
    else:
        s = r[:, None] * aw
        eps_s = (1 + eps_r[:, None]) * (1 + u) - 1
        ms = (np.abs(mu)[:, None] + E_mu[:, None]) * s * (1 + eps_s) * (1 + u)
        err = ad * s * eps_s + E_mu[:, None] * s * (1 + eps_s) + u * ms + u * (bb + ms)
        err = err + u * (np.abs(y) + err) + 3 * eta
    return err, y
