"""Exact references of rms_norm and layer_norm over the last axis, correctly rounded to an output format.

rms_norm:   y_i = x_i / sqrt(mean(x^2) + eps) * w_i
layer_norm: y_i = (x_i - mean(x)) / sqrt(var(x) + eps) * w_i + b_i,  var the biased (population) variance

over the last axis (torch's ``normalized_shape`` of one dimension), with ``eps`` the exact value of the float given
(the kernel may round it to its own precision: the bounds count that). Each element is the nearest value (RNE) of
``out`` to the exact result. Only the square root is irrational: mean, variance and eps are exact rationals, so the
slow path computes them with Fractions and the root in mpmath interval arithmetic; a perfect-square variance + eps,
or x_i equal to the mean, gives a rational result, rounded exactly. Exact zero results are +0. A row whose
variance + eps is 0 (constant row, eps = 0) gives NaN (0 / 0); a row holding NaN or inf gives NaN.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.inputs import exact_float64
from ..exact.reference import exact_sum
from .rows import output_format, values_of
from .ziv import U64, decide, settle

__all__ = ["rms_norm_reference", "layer_norm_reference"]

_M = 1 + 2.0**-20
_SMALL = 2.0**-30  # relative errors above this leave the first-order regime: the element is retried exactly
_UF = 2.0**-1070  # absolute error of a float64 square or quotient that underflows (a few subnormal steps)


def _inputs(x: Any, weight: Any, bias: Any, eps: Any, out: Any) -> tuple:
    v, fmt = exact_float64(x, "x")
    if fmt.is_integer or v.ndim == 0:
        raise TypeError("x must be a floating-point array with at least one dimension")
    n = v.shape[-1]
    aff = []
    for a, name in ((weight, "weight"), (bias, "bias")):
        if a is None:
            aff.append(None)
            continue
        av, _ = exact_float64(a, name)
        if av.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},) (the normalised axis), got {av.shape}")
        aff.append(av)
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or not eps >= 0 or math.isinf(eps):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    return v.reshape(-1, n), aff[0], aff[1], float(eps), output_format(out, fmt), v.shape


def _root_interval(t: Fraction, bits: int) -> Any:
    from mpmath import iv

    iv.prec = bits
    return iv.sqrt(iv.mpf(t.numerator) / t.denominator)


def _square_root(t: Fraction) -> Fraction | None:
    """sqrt(t) when t is the square of a rational, else None."""
    a, b = math.isqrt(t.numerator), math.isqrt(t.denominator)
    return Fraction(a, b) if a * a == t.numerator and b * b == t.denominator else None


def _settle_rows(codes: np.ndarray, hard: np.ndarray, v: np.ndarray, stats: Any, elem: Any, dst: Any) -> None:
    """Retry the hard elements: ``stats(row)`` -> (centre, t) exact; ``elem(row, col, c, root)`` -> result."""
    rows, cols = np.nonzero(hard)
    cache: dict[int, tuple] = {}

    def evaluate(k: int, bits: int) -> Any:
        i, j = int(rows[k]), int(cols[k])
        if i not in cache:
            cache.clear()
            cache[i] = stats(i)
        c, t = cache[i]
        num = Fraction(float(v[i, j])) - c
        root = _square_root(t)
        if root is not None or num == 0:  # rational result
            return elem(j, num, Fraction(1) if num == 0 else 1 / root, exact=True)
        from mpmath import iv

        return elem(j, iv.mpf(num.numerator) / num.denominator, 1 / _root_interval(t, bits), exact=False)

    codes[rows, cols] = settle(rows.size, evaluate, dst)


def _affine(w: np.ndarray | None, b: np.ndarray | None) -> Any:
    def elem(j: int, num: Any, inv_root: Any, exact: bool) -> Any:
        y = num * inv_root
        if w is not None:
            y = y * (Fraction(float(w[j])) if exact else float(w[j]))
        if b is not None:
            y = y + (Fraction(float(b[j])) if exact else float(b[j]))
        return y

    return elem


def _finish(codes: np.ndarray, dst: Any, v: np.ndarray, nan_rows: np.ndarray, aff: tuple, shape: tuple) -> Any:
    y = values_of(codes, dst)
    bad = nan_rows | ~np.isfinite(v).all(axis=1)
    for a in aff:
        if a is not None:
            bad = bad | ~np.isfinite(a).all()
    y[bad] = np.nan
    y[y == 0] = 0.0  # exact zeros are +0
    return y.reshape(shape)


def rms_norm_reference(x: Any, weight: Any = None, *, eps: float = 1e-6, out: Any = None) -> Any:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis, correctly rounded (RNE) to ``out``; float64."""
    v, w, _, eps, dst, shape = _inputs(x, weight, None, eps, out)
    n = v.shape[1]
    with np.errstate(all="ignore"):
        s = np.square(v).sum(axis=1)  # |s^ - s| <= (n+1) u s + n _UF (squares and sum, positive terms)
        t = s / n + eps
        rel_t = ((n + 3) * U64 + n * _UF / (n * t)) * _M
        r = 1 / np.sqrt(t)
        rel_r = np.where(rel_t < _SMALL, (rel_t / 2 + 2 * U64) * _M * _M, np.inf)
        wv = 1.0 if w is None else w
        y = v * r[:, None] * wv
        err = np.abs(y) * (rel_r[:, None] + 2 * U64) * _M + 2 * _UF
    ok = np.isfinite(v).all(axis=1) & (t > 0)
    codes, hard = decide(np.where(ok[:, None], y, 0.0), np.where(ok[:, None], err, 0.0), dst)
    hard &= ok[:, None]

    def stats(i: int) -> tuple:
        return Fraction(0), sum((Fraction(float(a)) ** 2 for a in v[i]), Fraction(0)) / n + Fraction(eps)

    _settle_rows(codes, hard, v, stats, _affine(w, None), dst)
    return _finish(codes, dst, v, ~(t > 0), (w,), shape)


def layer_norm_reference(x: Any, weight: Any = None, bias: Any = None, *, eps: float = 1e-5, out: Any = None) -> Any:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis, correctly rounded (RNE) to ``out``; float64."""
    v, w, b, eps, dst, shape = _inputs(x, weight, bias, eps, out)
    n = v.shape[1]
    fin = np.isfinite(v).all(axis=1)
    vf = np.where(fin[:, None], v, 0.0)
    with np.errstate(all="ignore"):
        mu = np.asarray(exact_sum(vf, axis=1), np.float64) / n  # exact sum rounded once, then / n
        err_mu = (2 * U64 * np.abs(mu) + _UF) * _M
        d = vf - mu[:, None]
        err_d = (err_mu[:, None] + U64 * np.abs(d)) * _M
        q = np.square(d).sum(axis=1)
        # sum d^2 - sum (x - mean)^2: sum 2|d| e + 3 e^2 (d^ = (x - mean) + e), then the float64 squares and sum
        dq = (2 * (np.abs(d) * err_d).sum(axis=1) + 3 * np.square(err_d).sum(axis=1) + (n + 1) * U64 * q
              + n * _UF) * _M
        t = q / n + eps
        err_t = (dq / n + 2 * U64 * t) * _M
        rel_t = err_t / t
        r = 1 / np.sqrt(t)
        rel_r = np.where(rel_t < _SMALL, (rel_t / 2 + 2 * U64) * _M * _M, np.inf)
        wv = 1.0 if w is None else w
        z = d * r[:, None] * wv  # |z^ - z| <= |z^| (rel_r + 2u) + err_d r |w| (1 + rel_r)
        err = (np.abs(z) * (rel_r[:, None] + 2 * U64) + err_d * r[:, None] * np.abs(wv) * (1 + rel_r[:, None])) * _M
        y = z + (0.0 if b is None else b)
        err = (err + U64 * np.abs(y)) * _M + 4 * _UF
    ok = fin & (t > 0)
    codes, hard = decide(np.where(ok[:, None], y, 0.0), np.where(ok[:, None], err, 0.0), dst)
    hard &= ok[:, None]

    def stats(i: int) -> tuple:
        xs = [Fraction(float(a)) for a in v[i]]
        c = sum(xs, Fraction(0)) / n
        return c, sum(((a - c) ** 2 for a in xs), Fraction(0)) / n + Fraction(eps)

    _settle_rows(codes, hard, v, stats, _affine(w, b), dst)
    return _finish(codes, dst, v, fin & ~(t > 0), (w, b), shape)
