"""Order-controlled, bit-exact models of what a softmax, log_softmax, logsumexp, layer_norm or rms_norm kernel
computes (``simulate_softmax``, ...), in the style of :func:`numoracle.simulate`.

Every step rounds to the compute format ``acc`` (round to nearest even) exactly as written in each function's
docstring; every sum runs through :func:`numoracle.simulate` along ``order`` (any numoracle order, its text, or a
callable ``n -> order`` for kernels whose order depends on the row length); the row max is exact in every order
(it rounds nothing), so it takes none. The elementwise functions (``exp``, ``log``, ``rsqrt``) are parameters:
correctly rounded by default (``sim/elementwise.py``), or any callable: a numoracle one
(``elementwise.sleef_expf_u10``) or a library's (``torch.exp``), called once on the (rows, n) array of the exact
arguments the model computed (float32 when ``acc`` is FP32; a torch function gets a tensor), so that the model is
bit-exact wherever the kernel's elementwise function is the one given. The result is rounded once more to ``out``
(default: the input's format), as float64 values of it.

Arithmetic is exact: a + b, a - b and a b + c are rounded to odd at 53 bits (TwoSum) and then to ``acc``; a b and
a / b round once in float64 and once to ``acc``, which is innocuous for ``acc`` of at most 24 bits (53 >= 2p + 2,
Figueroa 1995): so ``acc`` must have p <= 24 (FP32, TF32, BF16, FP16).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.formats.format import FP32, Format, format_of
from ...core.inputs import exact_float64
from ...models.engine.simulation import simulate
from ...models.orders.basic import Order, Sequential
from . import elementwise as ew
from .accarith import acc_format as _acc
from .accarith import add as _add
from .accarith import div as _div
from .accarith import fma as _fma
from .accarith import mul as _mul
from .accarith import round_to as _round
from .moments import rowwise_moments

__all__ = ["simulate_softmax", "simulate_log_softmax", "simulate_logsumexp", "simulate_layer_norm",
           "simulate_rms_norm", "NORMALIZE", "VARIANCE", "AFFINE", "SQUARES"]

NORMALIZE = ("reciprocal", "divide")     # y = e * fl(1 / S) (torch's CPU kernels) or y = e / S
VARIANCE = ("two_pass", "welford", "rowwise")
AFFINE = ("centered", "folded", "scaled")
SQUARES = ("rounded", "fma")


# ---- the pieces a model is given --------------------------------------------------------------------------------

def _order_for(order: Any, n: int) -> Order | str:
    if order is None:
        return Sequential()
    if callable(order) and not isinstance(order, Order):
        return order(n)
    return order


def _sum_rows(t: np.ndarray, fmt: Format, order: Any) -> np.ndarray:
    """The sum of each row of t (values of fmt) along order, accumulated in fmt."""
    src = t.astype(np.float32) if fmt.precision <= 24 else t
    return np.asarray(simulate("sum", src, acc=fmt, order=_order_for(order, t.shape[-1])), np.float64)


def _apply(fn: Any, v: np.ndarray, fmt: Format, name: str) -> np.ndarray:
    """fn on the exact arguments v (values of fmt); its results must be values of fmt."""
    if fn in ew.ELEMENTWISE_FNS.values():
        return np.asarray(fn(v, fmt), np.float64)
    if not callable(fn):
        raise TypeError(f"{name} must be None (correctly rounded) or a callable, got {type(fn).__name__}")
    arg = v.astype(np.float32) if fmt == FP32 else v
    try:
        r = fn(arg)
    except TypeError:                    # a torch function: a tensor in, a tensor out
        import torch
        r = fn(torch.from_numpy(np.ascontiguousarray(arg)))
    if hasattr(r, "detach"):
        r = r.detach().cpu().numpy()
    r = np.asarray(r, np.float64)
    if r.shape != v.shape:
        raise ValueError(f"{name} returned shape {r.shape} for arguments of shape {v.shape}: it must act elementwise")
    ok = (_round(r, fmt) == r) | np.isnan(r)
    if not ok.all():
        raise ValueError(f"{name} returned values that are not {fmt.name} numbers: give a function that returns "
                         f"{fmt.name} values (e.g. one that computes in {fmt.name})")
    return r


def _choice(value: Any, allowed: tuple, name: str) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return str(value)


def _rows(x: Any, acc: Format, out: Any) -> tuple[np.ndarray, Format, tuple]:
    v, fmt = exact_float64(x, "x")
    if fmt.is_integer or v.ndim == 0:
        raise TypeError("x must be a floating-point array with at least one dimension")
    dst = fmt if out is None else format_of(out)
    if dst.is_integer:
        raise ValueError(f"out must be a floating-point format, got {dst.name}")
    shape = v.shape
    return _round(v.reshape(-1, shape[-1]), acc), dst, shape


def _finish(y: np.ndarray, dst: Format, shape: tuple) -> np.ndarray:
    return _round(y, dst).reshape(shape)


# ---- the softmax family -----------------------------------------------------------------------------------------

def _shifted(x: Any, order: Any, acc: Any, out: Any, exp: Any) -> tuple:
    f = _acc(acc)
    v, dst, shape = _rows(x, f, out)
    with np.errstate(all="ignore"):
        m = v.max(axis=1, keepdims=True)              # exact; NaN propagates (vec::maximum)
    d = _add(v, -m, f)
    e = _apply(exp or ew.exp_cr, d, f, "exp")
    s = _sum_rows(e, f, order)
    return f, dst, shape, m, d, e, s


def simulate_softmax(x: Any, order: Any = None, *, acc: Any = "fp32", out: Any = None, exp: Any = None,
                     normalize: str = "reciprocal") -> np.ndarray:
    """softmax over the last axis as a kernel computes it: v = x rounded to acc, m = max v (exact),
    d = fl(v - m), e = exp(d), S = the sum of e along ``order``, then ``normalize="reciprocal"``:
    y = fl(e fl(1 / S)) (torch's CPU kernels) or ``"divide"``: y = fl(e / S); y rounded to ``out``.

    >>> import numpy as np
    >>> float(simulate_softmax(np.array([1.0, 1.0, 1.0], np.float32))[0]) == float(np.float32(1 / 3))
    True
    """
    f, dst, shape, _, _, e, s = _shifted(x, order, acc, out, exp)
    if _choice(normalize, NORMALIZE, "normalize") == "reciprocal":
        y = _mul(e, _div(1.0, s, f)[:, None], f)
    else:
        y = _div(e, s[:, None], f)
    return _finish(y, dst, shape)


def _log_sum(s: np.ndarray, f: Format, log: Any, stats: Any) -> np.ndarray:
    """L = log(S) as a column; with ``stats`` (a format) S is stored in it before the log and L after it."""
    sf = None if stats is None else format_of(stats)
    if sf is not None:
        s = _round(s, sf)
    L = _apply(log or ew.log_cr, s[:, None], f, "log")
    return L if sf is None else _round(L, sf)


def simulate_log_softmax(x: Any, order: Any = None, *, acc: Any = "fp32", out: Any = None, exp: Any = None,
                         log: Any = None, stats: Any = None) -> np.ndarray:
    """log_softmax over the last axis: d and S as :func:`simulate_softmax`, L = log(S), y = fl(d - L) (torch's
    CPU order: x - max - logsum, never x - (max + logsum)); rounded to ``out``. ``stats``: a format the kernel
    stores S and L in between the steps (torch's CPU bf16 kernel: its per-row buffers are bf16), default none."""
    f, dst, shape, _, d, _, s = _shifted(x, order, acc, out, exp)
    return _finish(_add(d, -_log_sum(s, f, log, stats), f), dst, shape)


def simulate_logsumexp(x: Any, order: Any = None, *, acc: Any = "fp32", out: Any = None, exp: Any = None,
                       log: Any = None, stats: Any = None) -> np.ndarray:
    """logsumexp over the last axis: m + log(S), one rounding to acc for the addition, then ``out``
    (``stats`` as :func:`simulate_log_softmax`)."""
    f, dst, shape, m, _, _, s = _shifted(x, order, acc, out, exp)
    return _finish(_add(m, _log_sum(s, f, log, stats), f)[:, 0], dst, shape[:-1])


# ---- the norms --------------------------------------------------------------------------------------------------

def _mean(total: np.ndarray, n: int, f: Format, how: str) -> np.ndarray:
    return _div(total, float(n), f) if how == "divide" else _mul(total, _round(1.0 / n, f), f)


def _square_sum(d: np.ndarray, f: Format, order: Any, squares: str) -> np.ndarray:
    if squares == "rounded":
        return _sum_rows(_mul(d, d, f), f, order)
    o = _order_for(order, d.shape[1])                 # products enter exact (an FMA chain / exact tree leaves)
    src = d.astype(np.float32)
    return np.array([float(simulate("dot", r, r, acc=f, order=o, fma=True)) for r in src])


def _welford(v: np.ndarray, f: Format) -> tuple[np.ndarray, np.ndarray]:
    """Welford's recurrence, one element at a time, every step rounded: delta = x - mean, mean += delta / k,
    m2 += delta (x - mean) (the product rounded, then the sum)."""
    R, n = v.shape
    mean = np.zeros(R)
    m2 = np.zeros(R)
    for k in range(1, n + 1):
        x = v[:, k - 1]
        delta = _add(x, -mean, f)
        mean = _add(mean, _div(delta, float(k), f), f)
        m2 = _add(m2, _mul(delta, _add(x, -mean, f), f), f)
    return mean, m2


def _rstd(var: np.ndarray, eps: Any, f: Format, rsqrt: Any) -> np.ndarray:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or not eps >= 0 or math.isinf(eps):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    t = _add(var, _round(float(eps), f), f)          # eps held in acc, as a kernel holds it
    return _apply(rsqrt or ew.rsqrt_cr, t, f, "rsqrt")


def _affine_args(a: Any, n: int, f: Format, name: str) -> np.ndarray | None:
    if a is None:
        return None
    av, _ = exact_float64(a, name)
    if av.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (the normalised axis), got {av.shape}")
    return _round(av, f)


def simulate_layer_norm(x: Any, weight: Any = None, bias: Any = None, *, eps: float = 1e-5, order: Any = None,
                        acc: Any = "fp32", out: Any = None, variance: str = "two_pass", mean: str = "divide",
                        squares: str = "rounded", rsqrt: Any = None, affine: str = "centered",
                        lanes: int = 16, fused: bool = True, contract: bool = False, load: int = 1) -> np.ndarray:
    """layer_norm over the last axis as a kernel computes it, every step rounded to ``acc``.

    ``variance="two_pass"``: mu = fl(sum(v) / n) (``mean="reciprocal"``: fl(sum(v) fl(1/n))), d = fl(v - mu),
    var = mean of the squares d^2 (``squares="rounded"``: each square rounded, then summed; ``"fma"``: the
    products enter the sum exact, an FMA dot), both sums along ``order``. ``"welford"``: Welford's recurrence in
    element order (``order`` must be None), var = fl(m2 / n). ``"rowwise"``: torch's CPU ``RowwiseMoments``
    (``sim/moments.py``: Welford per vector lane of ``lanes``, chunks merged by a cascade, ``load`` float
    vectors per loaded vector (2 for bf16 / fp16 inputs); ``order`` must be None). ``contract=True``: the
    kernel's a b + c are FMAs (in the moments and the affine step). rstd = rsqrt(fl(var + eps)) with eps rounded
    to acc. ``affine="centered"``: y = fl(fl(d rstd) w) then fl(. + b) (one FMA with ``contract``); ``"folded"``:
    a = fl(rstd w), c = fl(b - fl(mu a)), y = fl(v a + c) (one FMA); ``"scaled"`` (torch's CPU bf16 kernel):
    t = fl(v rstd - fl(rstd mu)), y = fl(t w + b) (each one FMA with ``contract``, else two roundings).
    Missing weight / bias: 1 / 0.
    """
    f = _acc(acc)
    v, dst, shape = _rows(x, f, out)
    n = v.shape[1]
    w = _affine_args(weight, n, f, "weight")
    b = _affine_args(bias, n, f, "bias")
    how = _choice(mean, ("divide", "reciprocal"), "mean")
    kind = _choice(variance, VARIANCE, "variance")
    if kind != "two_pass" and order is not None:
        raise ValueError(f"variance={kind!r} fixes its own order: leave order=None")
    if kind == "welford":
        mu, m2 = _welford(v, f)
        var = _div(m2, float(n), f)
    elif kind == "rowwise":
        mo = rowwise_moments(v, f, lanes=lanes, fused=fused, contract=bool(contract), load=load)
        mu, var = mo.mean, mo.var
    else:
        mu = _mean(_sum_rows(v, f, order), n, f, how)
        var = _mean(_square_sum(_add(v, -mu[:, None], f), f, order, _choice(squares, SQUARES, "squares")),
                    n, f, how)
    r = _rstd(var, eps, f, rsqrt)[:, None]
    mu = mu[:, None]
    if _choice(affine, AFFINE, "affine") == "centered":
        y = _mul(_add(v, -mu, f), r, f)
        if contract and (w is not None or b is not None):
            y = _fma(y, 1.0 if w is None else w, 0.0 if b is None else b, f)
        else:
            if w is not None:
                y = _mul(y, w, f)
            if b is not None:
                y = _add(y, b, f)
    elif affine == "folded":
        a = r if w is None else _mul(r, w, f)
        c = _add(0.0 if b is None else b, -_mul(mu, a, f), f)
        y = _fma(v, a, c, f)
    else:
        shift = -_mul(r, mu, f)
        y = _fma(v, r, shift, f) if contract else _add(_mul(v, r, f), shift, f)
        if w is not None or b is not None:
            wv, bv = (1.0 if w is None else w), (0.0 if b is None else b)
            y = _fma(y, wv, bv, f) if contract else _add(_mul(y, wv, f), bv, f)
    return _finish(y, dst, shape)


def simulate_rms_norm(x: Any, weight: Any = None, *, eps: float = 1e-6, order: Any = None, acc: Any = "fp32",
                      out: Any = None, mean: str = "divide", squares: str = "rounded", rsqrt: Any = None,
                      scale: str = "separate") -> np.ndarray:
    """rms_norm over the last axis: ms = mean of v^2 (squares and ``mean`` as :func:`simulate_layer_norm`,
    along ``order``), r = rsqrt(fl(ms + eps)), y = fl(fl(v r) w) (``scale="separate"``) or fl(v fl(r w))
    (``"folded"``); rounded to ``out``."""
    f = _acc(acc)
    v, dst, shape = _rows(x, f, out)
    n = v.shape[1]
    w = _affine_args(weight, n, f, "weight")
    ms = _mean(_square_sum(v, f, order, _choice(squares, SQUARES, "squares")), n, f,
               _choice(mean, ("divide", "reciprocal"), "mean"))
    r = _rstd(ms, eps, f, rsqrt)[:, None]
    if _choice(scale, ("separate", "folded"), "scale") == "folded" and w is not None:
        y = _mul(v, _mul(r, w, f), f)
    else:
        y = _mul(v, r, f)
        if w is not None:
            y = _mul(y, w, f)
    return _finish(y, dst, shape)
