"""Quantization metrics: SQNR and cosine similarity, exactly summed, and the values a bound implies for them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.eft import two_sum
from ...core.inputs import exact_float64
from ...exact.reference import exact_dot

# ---- float64 helpers ---------------------------------------------------------------------------
_INF = np.float64(np.inf)


def _dn(r: np.ndarray) -> np.ndarray:
    """A lower bound of the exact result of one RN operation on non-negative exact operands."""
    r = np.asarray(r, np.float64)
    return np.where(r > 0, np.nextafter(r, -_INF), r)


def _as_values(x: Any, name: str) -> np.ndarray:
    """Exact float64 values of an array (numpy, ml_dtypes, torch, lists); NaN/inf kept."""
    return exact_float64(x, name)[0]


def _exact_sq_sum(v: np.ndarray) -> tuple[float, int]:
    """(m, e) with sum v^2 ~= m * 4^e, m the correctly rounded sum of (v 2^-e)^2 (no overflow)."""
    v = v.ravel()
    if v.size == 0:
        return 0.0, 0
    big = float(np.max(np.abs(v)))
    if big == 0:
        return 0.0, 0
    e = math.frexp(big)[1]
    w = np.ldexp(v, -e)  # exact unless |v 2^-e| underflows: those squares are < 2^-2000 of the largest
    return float(exact_dot(w, w)), e


def _flat_pair(x: Any, y: Any, who: str) -> tuple[np.ndarray, np.ndarray]:
    a, b = _as_values(x, "x"), _as_values(y, "y")
    if a.shape != b.shape:
        raise ValueError(f"{who}: x has shape {a.shape} and y has shape {b.shape}; give arrays of one shape")
    bad = ~(np.isfinite(a) & np.isfinite(b))
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"{who}: {int(bad.sum())} NaN/inf value(s) (first at flat index {i}: x = {a.ravel()[i]}, "
                         f"y = {b.ravel()[i]}); these metrics need finite data (mask them out first)")
    return a.ravel(), b.ravel()


# ---- metrics -----------------------------------------------------------------------------------
def sqnr(x: Any, y: Any) -> float:
    """Signal-to-quantization-noise ratio in dB: 10 log10(sum x^2 / sum (x - y)^2).

    ``x`` is the reference signal, ``y`` its approximation (e.g. ``dequantize(quantize(x))``). Both
    sums are exact (TwoSum differences, exact dot products of power-of-two-scaled data), so only the
    final logarithms round. ``inf`` when x and y are identical (all-zero included), ``-inf`` when x is
    all zero and y is not. Raises ValueError for NaN/inf or different shapes.

    >>> round(sqnr([1.0, 2.0], [1.0, 2.5]), 6)   # 10 log10(5 / 0.25)
    13.0103
    """
    a, b = _flat_pair(x, y, "sqnr")
    s, e = two_sum(a, -b)
    if not (s.any() or e.any()):
        return math.inf
    sig, es = _exact_sq_sum(a)
    if sig == 0:
        return -math.inf
    k = math.frexp(float(np.max(np.abs(s))))[1] if s.any() else math.frexp(float(np.max(np.abs(e))))[1]
    ss, ee = np.ldexp(s, -k), np.ldexp(e, -k)
    noise = float(exact_dot(np.concatenate([ss, 2 * ss, ee]), np.concatenate([ss, ee, ee])))
    if abs(es - k) <= 1:  # ratio near 1: 10 log10(1 + (sig - noise)/noise) with the difference exact
        xs = np.ldexp(a, -k)
        diff = float(exact_dot(np.concatenate([xs, ss, 2 * ss, ee]), np.concatenate([xs, -ss, -ee, -ee])))
        if abs(diff) < noise / 2:
            return 10.0 * math.log1p(diff / noise) / math.log(10.0)
    return 10.0 * (math.log10(sig) - math.log10(noise)) + 20.0 * (es - k) * math.log10(2.0)


def cosine(x: Any, y: Any) -> float:
    """Cosine similarity sum(x y) / sqrt(sum x^2 sum y^2), from exact dot products (clamped to [-1, 1]).

    1.0 exactly when x and y are identical and nonzero; NaN when either is all zero (the angle is
    undefined, and NaN fails every threshold comparison). Raises ValueError for NaN/inf or shapes.
    """
    a, b = _flat_pair(x, y, "cosine")
    if not a.any() or not b.any():
        return math.nan
    ka = math.frexp(float(np.max(np.abs(a))))[1]
    kb = math.frexp(float(np.max(np.abs(b))))[1]
    sa, sb = np.ldexp(a, -ka), np.ldexp(b, -kb)
    num = float(exact_dot(sa, sb))
    na, nb = float(exact_dot(sa, sa)), float(exact_dot(sb, sb))
    if np.array_equal(a, b):
        return 1.0
    return max(-1.0, min(1.0, num / math.sqrt(na) / math.sqrt(nb)))


def _bound_array(bound: Any, x: np.ndarray | None) -> np.ndarray:
    if hasattr(bound, "bound") and not isinstance(bound, np.ndarray):  # a QuantErrorReport
        return bound.bound
    if np.iscomplexobj(bound):  # np.asarray(..., float64) would drop the imaginary parts silently
        raise TypeError("bound must be real: a QuantErrorReport or an array of non-negative bounds, got complex values")
    try:
        b = np.asarray(bound, np.float64)
        if x is not None and b.shape != x.shape:
            b = np.broadcast_to(b, x.shape)
    except (ValueError, TypeError) as e:
        like = "" if x is None else f" {x.shape}"
        raise ValueError(f"bound must be a QuantErrorReport or an array of bounds shaped like x{like} "
                         f"({str(e).split('.')[0]})") from None
    return b


def sqnr_bound(x: Any, bound: Any) -> float:
    """The SQNR (dB) that an elementwise error bound guarantees: 10 log10(sum x^2 / sum bound^2), rounded down.

    ``bound``: a :class:`QuantErrorReport` (from :func:`quantization_error_bound`) or an array of
    elementwise bounds |x_i - y_i| <= bound_i. Then sum (x - y)^2 <= sum bound^2, so
    ``sqnr(x, y) >= sqnr_bound(x, bound)`` for every y within the bound (the sums here are rounded
    outward and the result pushed down past the logarithms' rounding). ``inf`` when every bound is 0.
    """
    a = _as_values(x, "x")
    b = _bound_array(bound, a)
    if b.shape != a.shape:
        raise ValueError(f"sqnr_bound: x has shape {a.shape} and the bound {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()) or (b < 0).any():
        raise ValueError("sqnr_bound needs finite x and finite non-negative bounds (a NaN/inf element or a "
                         "void bound has no SQNR guarantee)")
    if not b.any():
        return math.inf
    sig, es = _exact_sq_sum(a)
    if sig == 0:
        return -math.inf
    noise, eb = _exact_sq_sum(b)
    sig, noise = math.nextafter(sig, 0.0), math.nextafter(noise, math.inf)
    r = 10.0 * (math.log10(sig) - math.log10(noise)) + 20.0 * (es - eb) * math.log10(2.0)
    return r - (abs(r) + 100.0) * 2.0**-48


def cosine_bound(x: Any, bound: Any) -> float:
    """The cosine similarity an elementwise bound guarantees: sqrt(1 - sum bound^2 / sum x^2), rounded down.

    With ||y - x|| <= r < ||x|| the angle between x and y is at most arcsin(r / ||x||), so
    ``cosine(x, y) >= cosine_bound(x, bound)``; -1.0 when r >= ||x|| (no guarantee).
    """
    s = sqnr_bound(x, bound)
    if s == math.inf:
        return 1.0
    ratio = 10.0 ** (-s / 10.0)  # >= sum b^2 / sum x^2 (s rounded down), up to 1 ulp of the power
    ratio = math.nextafter(ratio, math.inf)
    if ratio >= 1.0:
        return -1.0
    c = math.sqrt(1.0 - ratio)
    return math.nextafter(math.nextafter(c, 0.0), 0.0)
