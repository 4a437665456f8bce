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
  y = fl(x s + c) with one FMA rounding): per element, docs/composite.md.
* layer_norm, ``variance="welford"`` (torch's CPU ``RowwiseMoments``: Welford updates per lane, states merged by
  Chan, Golub & LeVeque's 1983 pairwise formula), over any tree of updates and merges whose deepest path has
  h = ``moments_depth`` steps (default K - 1, which bounds every tree). Our derivation, in the style of CGL 1983's
  and El Arar et al.'s 2023 analyses of the updating algorithm, made rigorous by induction over the tree: with
  W = max x - min x (every partial mean lies in [min x, max x]), X = max |x|, c = (1 + u)^3 - 1 (the three roundings
  of delta, 1/n and the product; an FMA has fewer), each update or merge maps a mean error a to at most
  (1 + u)(1 + 2c) a + (1 + u) c W + u X (the exact part is a convex combination of the inputs' errors), so
  E_mu = a_h = s (r^h - 1) / (r - 1), r = (1 + u)(1 + 2c), s = (1 + u) c W + u X. A step adds to M2 the term
  delta^2 n_a n_b / n (an update: n_b = 1); its computed value errs by at most min(n_a, n_b) P with
  e = 2 a_h + u (W + 2 a_h), P = 2 W e + e^2 + ((1 + u)^4 - 1)(W + e)^2, and sum min(n_a, n_b) <= K ceil(log2 K)
  over any merge tree (an element is on the smaller side at most log2 K times). These terms sum exactly to
  Q = sum (x - mu)^2 along additions at most 2h deep, so |M2^ - Q| <= N P + gamma_2h (Q + N P), N = K ceil(log2 K),
  and E_v = |M2^ - Q| / K (1 + u) + u v. The rest is the two-pass chain. The bound grows like h u (X + W) W / v
  relative to v, CGL's n kappa u for the updating algorithm.
* kind="probabilistic": every gamma of a sum (the mean's, the squares', rms_norm's t) is replaced by Higham & Mary's
  2019 gamma~(lambda) over the same roundings (boundmath.hm2019, mean-zero independent errors; the union bound over
  the rows' K-term paths sets lambda for ``confidence``); the elementwise functions and Welford's steps stay worst
  case.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..bounds.boundmath import Component
from ..core.inputs import exact_float64
from .boundbase import (
    MARGIN,
    CompositeBound,
    Setting,
    component,
    gamma,
    out_terms,
    setting,
    sum_components,
    summation_gamma,
)

__all__ = ["norm_bound", "NORM_OPS"]

NORM_OPS = ("rmsnorm", "layernorm")
_EXTRA = ("eps", "affine", "weight", "variance", "moments_depth")


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
    variance = st.extra.get("variance", "two_pass")
    if variance not in ("two_pass", "welford") or (variance == "welford" and op != "layernorm"):
        raise ValueError(f"{op}: variance must be 'two_pass' or 'welford' (layernorm only), got {variance!r}")
    depth = st.extra.get("moments_depth")
    if depth is not None and (variance != "welford" or isinstance(depth, bool) or not isinstance(depth, int)
                              or not 0 <= depth <= max(K - 1, 0)):
        raise ValueError("moments_depth (variance='welford' only) is the most updates and merges on one element's "
                         f"path, an int in [0, K - 1]; got {depth!r}")
    if st.extra.get("affine", "centered") not in ("centered", "folded"):
        raise ValueError("affine must be 'centered' ((x - mu) r w + b) or 'folded' (x (r w) + (b - mu r w))")
    comps = _components(st)
    if variance == "welford":
        h = K - 1 if depth is None else depth
        comps = [c for c in comps if "mean" not in c.name and "centring" not in c.name
                 and not (c.name.startswith("accumulation") or c.name == "squares")]
        comps.insert(0, component("Welford moments", st.u, 4 * h, f"updates and merges, deepest path h = {h} "
                                  "(moments_depth); mean and M2 per the module docstring",
                                  "Chan, Golub & LeVeque 1983; El Arar et al. 2023; our derivation"))
    coef = Fraction(0)
    notes = ["per element: .tolerance(x, weight=None, bias=None, eps=...)"]
    if op == "rmsnorm":  # a relative bound: (1 + mu_r) prod(1 + u) / sqrt(1 - tau) - 1, as a float rounded up
        tau = _tau(st, comps, 1)
        rest = gamma([c for c in comps if c.name in ("scaling", "output rounding")])
        coef = Fraction((1 + float(st.rsqrt.relative(st.acc))) * (1 + rest) / (1 - tau) ** 0.5 - 1) * Fraction(
            MARGIN)
    else:
        notes.append("layer_norm's bound is absolute per element (it depends on the variance); coefficient 0 shown")
    method = ("worst case (guaranteed)" if st.kind == "worst" else
              f"probabilistic sums (Higham & Mary 2019, confidence {st.confidence}); other steps worst case")
    return CompositeBound(op, st.dtype, st.acc, K, st.out, st.kind, st.confidence if st.kind != "worst" else None,
                          tuple(comps), coef, method, tuple(notes), dict(st.extra),
                          evaluate=lambda b, *a, **d: _evaluate(st, comps, *a, **d))


def _tau(st: Setting, comps: list[Component], rows: int) -> float:
    """rms_norm's relative error factor of t = sum x^2 / K + eps: worst case, or probabilistic (HM 2019)."""
    path = [c for c in comps if c.name not in ("rsqrt", "scaling", "output rounding")]
    return summation_gamma(st, path, rows * st.K)


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
    g_sum = summation_gamma(st, [c for c in comps if "sum of squares" in c.name], X.shape[0] * K)
    with np.errstate(all="ignore"):
        if st.op == "rmsnorm":
            t = np.square(X).mean(axis=1) + eps
            tau = _tau(st, comps, X.shape[0])
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
    mu = X.mean(axis=1)
    d = X - mu[:, None]
    var = np.square(d).mean(axis=1)
    if st.extra.get("variance") == "welford":
        E_mu, E_v = _welford(st, X, var, eta)
    else:
        g_mean = summation_gamma(st, [c for c in comps if "mean" in c.name and c.name.startswith("accumulation")],
                                 X.shape[0] * K)
        E_mu = (g_mean * np.abs(X).sum(axis=1) / K * (1 + u) + u * np.abs(mu) + eta) * MARGIN
        e = E_mu[:, None] + u * (np.abs(d) + E_mu[:, None])
        Dl = (2 * np.abs(d) * e + e * e).sum(axis=1)
        E_v = ((g_sum * (1 + u)) * (K * var + Dl) + Dl) / K * (1 + u) + u * var + K * eta
    e = E_mu[:, None] + u * (np.abs(d) + E_mu[:, None])
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
    vacuous = ~np.isfinite(eps_r) | ~np.isfinite(E_mu)  # tau >= 1: +inf for the row (never 0 * inf = NaN)
    return np.where(vacuous[:, None], np.inf, err), y


def _welford(st: Setting, X: np.ndarray, var: np.ndarray, eta: float) -> tuple[np.ndarray, np.ndarray]:
    """(E_mu, E_v) of Welford's moments over any tree of depth h (module docstring), per row."""
    K, u = X.shape[1], float(st.u)
    h = K - 1 if st.extra.get("moments_depth") is None else st.extra["moments_depth"]
    W = X.max(axis=1) - X.min(axis=1)
    Xm = np.abs(X).max(axis=1)
    c = (1 + u) ** 3 - 1
    r = (1 + u) * (1 + 2 * c)
    s = (1 + u) * c * W + u * Xm + eta
    a = s * (np.expm1(h * np.log1p(r - 1)) / (r - 1)) * MARGIN if h else np.zeros(len(X))
    e = 2 * a + u * (W + 2 * a)
    P = 2 * W * e + e * e + ((1 + u) ** 4 - 1) * (W + e) ** 2
    N = K * max(1, (K - 1).bit_length()) if K > 1 else 0
    g2h = gamma([component("M2 additions", st.u, 2 * h, "", "")])
    Q = K * var
    b = (N * P + g2h * (Q + N * P)) * MARGIN
    E_v = (b / K * (1 + u) + u * var + (K + N) * eta) * MARGIN
    return a, E_v
