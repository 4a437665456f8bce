"""Exact references of softmax, log_softmax, logsumexp and cross-entropy, correctly rounded to an output format.

Each element is the nearest value (round to nearest even) of ``out`` to the exact result of the given inputs:
softmax_i = exp(x_i) / sum_j exp(x_j), log_softmax_i = x_i - log sum_j exp(x_j), logsumexp = log sum_j exp(x_j),
cross_entropy = -log_softmax_target (per row; ``reduction="none"``). Conventions (torch's, stated once here):

* masked entries (``-inf`` values, or ``mask`` False) take no part: softmax 0, log_softmax -inf;
* a fully masked row gives NaN everywhere (``empty_rows="nan"``, torch) or 0 (``"zero"``, FlashAttention's
  output); its logsumexp is -inf either way;
* a row holding a kept NaN or +inf gives NaN (x - max is NaN there in IEEE arithmetic).

How (docs/composite.md): the float64 path shifts by the row max m (exact: m is an input value), computes
d = x - m, exp(d), S = sum exp(d) and the result, with a rigorous bound on each step's error (``FE`` for numpy's exp
and log, n u for the sum, u per rounding); ``ziv.decide`` rounds what the bound decides and ``ziv.settle`` retries
the rest in mpmath interval arithmetic. Exact cases are rational and given exactly: softmax of an all-equal row is
1/n, a row with one kept entry has softmax 1, log_softmax 0, logsumexp = that entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .rows import Rows, check_empty, output_format, to_rows, values_of
from .ziv import U64, decide, settle

__all__ = ["softmax_reference", "log_softmax_reference", "logsumexp_reference", "cross_entropy_reference", "FE"]

# Assumed bound on the relative error of numpy's float64 exp and log (glibc documents <= 1 ulp = 2^-52, numpy's SIMD
# paths <= 4 ulp); 2^-45 = 256 ulp leaves a wide margin. Only the speed depends on it being loose: the tests hold
# the results to mpmath.
FE = 2.0**-45
TINY_D = -700.0  # exp(d) < 1e-303 below: such terms count as 0 with that absolute error
TINY_E = 1e-303
_M = 1 + 2.0**-20  # covers second-order terms and float64's own roundings of the bounds (all below 2^-30 relative)


@dataclass(frozen=True)
class _Fast:
    """The float64 path's row statistics and their error bounds."""

    m: np.ndarray  # (R,) row max over kept entries (exact)
    d: np.ndarray  # (R, n) x - m (rounded), -inf where not kept
    err_d: np.ndarray  # |d - (x - m)| bound
    e: np.ndarray  # exp(d) (0 where not kept or d < TINY_D)
    rel_e: np.ndarray  # relative error bound of e (kept, not tiny)
    S: np.ndarray  # (R,) sum of e (>= 1 in exact arithmetic for rows with a kept entry)
    rS: np.ndarray  # relative error bound of S
    L: np.ndarray  # log S
    err_L: np.ndarray  # absolute error bound of L


def _fast(r: Rows) -> _Fast:
    n = r.v.shape[1]
    with np.errstate(all="ignore"):
        m = np.where(r.keep, r.v, -np.inf).max(axis=1, initial=-np.inf)
        m = np.where(np.isfinite(m), m, 0.0)
        d = np.where(r.keep, r.v - m[:, None], -np.inf)
        err_d = np.where(r.keep, np.abs(d) * U64, 0.0)
        tiny = d < TINY_D
        e = np.exp(np.where(tiny, -np.inf, d))
        rel_e = np.where(r.keep & ~tiny, (err_d + FE) * _M, 0.0)  # exp(err_d) - 1 <= err_d (1 + err_d)
        S = e.sum(axis=1)
        r_e = rel_e.max(axis=1, initial=0.0)
        # |S^ - S| <= gamma_n sum e^ + r_e S + n TINY_E, and S >= 1 (the max's term is exp(0))
        rS = ((n * U64) * (1 + r_e) + r_e + n * TINY_E) * _M
        rS = np.where(rS < 2.0**-30, rS, np.inf)  # beyond the first-order regime: undecided (retried exactly)
        L = np.log(S)
        err_L = (rS * _M + FE * np.abs(L)) * _M  # |log(1 + s)| <= s / (1 - s)
    return _Fast(m, d, err_d, e, rel_e, S, rS, L, err_L)


# log S for S = 1 + (terms below 2^-1200): the result is a multiple of 2^-1074 (a difference of input values)
# moved by less than 2^-1200; every value strictly between it and that multiple rounds alike in every format (their
# rounding boundaries are multiples of 2^-1075), so the rational stand-in 2^-1300 decides it
_STAND_IN = Fraction(1, 2**1300)


def _negligible(L: Any) -> bool:
    """The interval L lies in [0, 2^-1200)."""
    lo, hi = L._mpi_
    return lo[0] == 0 and hi[0] == 0 and hi[1] > 0 and hi[2] + hi[3] < -1200


def _shaped(values: np.ndarray, r: Rows, last: bool = True) -> np.ndarray:
    if last:
        return np.moveaxis(values.reshape(r.shape), -1, r.axis)
    return values.reshape(r.shape[:-1])


class _Exact:
    """The slow path's exact row data: values as mpmath intervals, cached per (row, precision)."""

    def __init__(self, r: Rows) -> None:
        self.r = r
        self._cache: dict[tuple[int, int], Any] = {}

    def sum_exp(self, row: int, bits: int) -> Any:
        """sum_j exp(x_j - m) over the kept entries of ``row``, an interval at ``bits`` of precision."""
        from mpmath import iv

        key = (row, bits)
        if key not in self._cache:
            iv.prec = bits
            vals = self.r.v[row][self.r.keep[row]]
            m = iv.mpf(float(vals.max()))
            self._cache = {key: (m, sum((iv.exp(iv.mpf(float(x)) - m) for x in vals), iv.mpf(0)))}
        return self._cache[key]

    def all_equal(self, row: int) -> bool:
        vals = self.r.v[row][self.r.keep[row]]
        return bool(vals.size) and bool((vals == vals[0]).all())


def _prepare(x: Any, axis: int, mask: Any, out: Any, empty_rows: Any) -> tuple[Rows, Any, str]:
    r = to_rows(x, axis, mask)
    return r, output_format(out, r.fmt), check_empty(empty_rows)


def _row_specials(values: np.ndarray, r: Rows, empty: str, masked: float) -> np.ndarray:
    """Masked entries, fully masked rows and rows with a kept NaN / +inf, written over ``values`` (R, n)."""
    values = np.where(r.keep, values, masked)
    values[r.n_kept == 0] = np.nan if empty == "nan" else 0.0
    values[r.bad] = np.nan
    return values


def softmax_reference(x: Any, axis: int = -1, *, mask: Any = None, out: Any = None, empty_rows: str = "nan") -> Any:
    """softmax(x) along ``axis``, each element correctly rounded (RNE) to ``out`` (default: x's format); float64."""
    r, dst, empty = _prepare(x, axis, mask, out, empty_rows)
    f = _fast(r)
    with np.errstate(all="ignore"):
        y = f.e / f.S[:, None]
        err = y * (f.rel_e + f.rS[:, None] + U64) * _M + np.where(r.keep & (f.e == 0), TINY_E, 0.0)
    codes, hard = decide(y, err, dst, sign=r.keep)
    hard &= r.keep & ~r.bad[:, None]
    rows, cols = np.nonzero(hard)
    ex = _Exact(r)
    n_kept = r.n_kept

    def evaluate(k: int, bits: int) -> Any:
        i, j = rows[k], cols[k]
        if ex.all_equal(i):
            return Fraction(1, int(n_kept[i]))
        from mpmath import iv

        m, S = ex.sum_exp(i, bits)
        return iv.exp(iv.mpf(float(r.v[i, j])) - m) / S

    codes[rows, cols] = settle(rows.size, evaluate, dst, sign=1)
    return _shaped(_row_specials(values_of(codes, dst), r, empty, 0.0), r)


def log_softmax_reference(x: Any, axis: int = -1, *, mask: Any = None, out: Any = None,
                          empty_rows: str = "nan") -> Any:
    """log_softmax(x) along ``axis``, correctly rounded (RNE) to ``out`` (default: x's format); float64."""
    r, dst, empty = _prepare(x, axis, mask, out, empty_rows)
    f = _fast(r)
    with np.errstate(all="ignore"):
        y = f.d - f.L[:, None]
        err = (f.err_d + f.err_L[:, None] + U64 * np.abs(y)) * _M
    one = r.n_kept == 1
    neg = np.where(r.keep & ~one[:, None], -1, 0)  # x_i - log sum exp(x) < 0 when another entry is kept
    codes, hard = decide(np.where(r.keep, y, 0.0), np.where(r.keep, err, 0.0), dst, sign=neg)
    hard &= r.keep & ~r.bad[:, None]
    rows, cols = np.nonzero(hard)
    ex = _Exact(r)

    def evaluate(k: int, bits: int) -> Any:
        i, j = rows[k], cols[k]
        if one[i]:
            return Fraction(0)  # x_i - log exp(x_i)
        from mpmath import iv

        m, S = ex.sum_exp(i, bits)
        L = iv.log(S)
        if _negligible(L):  # 0 < L < 2^-1200: x_i - m - L rounds as x_i - m - 2^-1300 does
            return Fraction(float(r.v[i, j])) - Fraction(float(r.v[i][r.keep[i]].max())) - _STAND_IN
        return (iv.mpf(float(r.v[i, j])) - m) - L

    codes[rows, cols] = settle(rows.size, evaluate, dst, sign=neg[rows, cols])
    return _shaped(_row_specials(values_of(codes, dst), r, empty, -np.inf), r)


def _lse_codes(r: Rows, dst: Any, f: _Fast, shift: np.ndarray | None) -> np.ndarray:
    """Codes of logsumexp - shift per row (shift: a kept value per row, or None for 0)."""
    s = np.zeros(r.v.shape[0]) if shift is None else shift
    with np.errstate(all="ignore"):
        y = (f.m - s) + f.L  # m - s is rounded: its error joins the bound
        err = (np.abs(f.m - s) * U64 + f.err_L + U64 * np.abs(y)) * _M
    live = (r.n_kept > 0) & ~r.bad
    codes, hard = decide(np.where(live, y, 0.0), np.where(live, err, 0.0), dst)
    rows = np.flatnonzero(hard & live)
    ex = _Exact(r)

    def evaluate(k: int, bits: int) -> Any:
        i = rows[k]
        if r.n_kept[i] == 1:
            return Fraction(f.m[i]) - Fraction(float(s[i]))
        from mpmath import iv

        m, S = ex.sum_exp(i, bits)
        L = iv.log(S)
        if _negligible(L):  # as in log_softmax
            return Fraction(float(r.v[i][r.keep[i]].max())) - Fraction(float(s[i])) + _STAND_IN
        return (m - iv.mpf(float(s[i]))) + L

    codes[rows] = settle(rows.size, evaluate, dst)
    return codes


def logsumexp_reference(x: Any, axis: int = -1, *, mask: Any = None, out: Any = None) -> Any:
    """log(sum(exp(x))) along ``axis``, correctly rounded (RNE) to ``out`` (default: x's format); float64.

    A fully masked row gives -inf; a row with a kept +inf gives +inf (as torch.logsumexp), one with a kept NaN NaN.
    """
    r, dst, _ = _prepare(x, axis, mask, out, "nan")
    f = _fast(r)
    y = values_of(_lse_codes(r, dst, f, None), dst)
    y[r.n_kept == 0] = -np.inf
    y[r.bad] = np.inf  # log(sum exp) of a row with a kept +inf (torch.logsumexp gives inf too) ...
    y[(r.keep & np.isnan(r.v)).any(axis=1)] = np.nan  # ... and NaN with a kept NaN
    return _shaped(y, r, last=False)


def cross_entropy_reference(logits: Any, target: Any, *, mask: Any = None, out: Any = None,
                            ignore_index: int = -100) -> Any:
    """Per-row cross-entropy logsumexp(logits) - logits[target] (``reduction="none"``), correctly rounded; float64.

    logits (..., C) with classes on the last axis; target (...) integer class indices. A row whose target equals
    ``ignore_index`` gives 0 (torch's reduction="none"); a masked target gives +inf.
    """
    r, dst, _ = _prepare(logits, -1, mask, out, "nan")
    t = np.asarray(target)
    if t.dtype.kind not in "iu":
        raise TypeError(f"target must hold integer class indices, got dtype {t.dtype}")
    t = t.reshape(-1)
    if t.size != r.v.shape[0]:
        raise ValueError(f"target has {t.size} entries; logits have {r.v.shape[0]} rows of {r.v.shape[1]} classes")
    ignored = t == ignore_index
    C = r.v.shape[1]
    if ((t < 0) | (t >= C))[~ignored].any():
        raise ValueError(f"target indices must lie in [0, {C}) (or equal ignore_index={ignore_index})")
    ti = np.where(ignored, 0, t)
    rows = np.arange(t.size)
    xt = r.v[rows, ti]
    f = _fast(r)
    y = values_of(_lse_codes(r, dst, f, np.where(r.keep[rows, ti], xt, 0.0)), dst)
    y[~r.keep[rows, ti]] = np.inf
    y[r.bad] = np.nan
    y[ignored] = 0.0
    return y.reshape(r.shape[:-1])
