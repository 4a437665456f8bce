"""Exact reference of attention's forward pass, softmax(scale q k^T + mask) v, correctly rounded to an output format.

q (..., Lq, D), k (..., Lk, D), v (..., Lk, Dv) with equal batch dimensions; ``scale`` the exact value of the
number given, or (None) the real 1/sqrt(D) itself (not a float rounding of it); ``causal=True`` keeps key j for
query i when j <= i (top-left aligned, torch's ``is_causal``); ``mask`` a boolean array broadcastable to
(..., Lq, Lk), True = the key takes part (torch's boolean ``attn_mask``). A query whose keys are all masked gives NaN
(``empty_rows="nan"``, torch's math backend) or 0 (``"zero"``, FlashAttention). q, k, v must be finite.

The float64 path: G = q k^T and |q| |k|^T by BLAS (error <= (D+1) u |q||k|^T: a classical GEMM, as
exact_matmul assumes), s = scale G, shifted by the row max, exp, l = sum p, N = p v and the bound A = p |v|; the
output's error bound follows from these (docs/composite.md). Undecided elements are retried in mpmath interval
arithmetic from the exact scores (``exact_matmul(..., exact=True)``); an output that is rational (every group of
equal scores has the same mean value of v: a constant column of v, an all-equal row of scores) is given exactly.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.inputs import exact_float64
from ..exact.reference import exact_matmul
from .rows import check_empty, output_format, values_of
from .softmax import FE, TINY_D, TINY_E
from .ziv import U64, decide, settle

__all__ = ["attention_reference"]

_M = 1 + 2.0**-20
_SMALL = 2.0**-30


def _keep_mask(batch: tuple, Lq: int, Lk: int, causal: bool, mask: Any) -> np.ndarray:
    keep = np.ones((*batch, Lq, Lk), bool)
    if causal:
        keep &= np.tril(np.ones((Lq, Lk), bool))
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype != np.bool_:
            raise TypeError(f"mask must be a boolean array (True = the key takes part), got dtype {m.dtype}")
        try:
            keep = keep & np.broadcast_to(m, keep.shape)
        except ValueError:
            raise ValueError(f"mask of shape {m.shape} does not broadcast to {keep.shape}") from None
    return keep


def _read(q: Any, k: Any, v: Any) -> tuple:
    vals = []
    for a, name in ((q, "q"), (k, "k"), (v, "v")):
        x, fmt = exact_float64(a, name)
        if fmt.is_integer or x.ndim < 2:
            raise TypeError(f"{name} must be a floating-point array of shape (..., L, D)")
        if not np.isfinite(x).all():
            raise ValueError(f"{name} holds NaN or inf; attention_reference takes finite inputs (mask keys with mask=)")
        vals.append((x, fmt))
    (qv, fq), (kv, _), (vv, _) = vals
    if not (qv.shape[:-2] == kv.shape[:-2] == vv.shape[:-2]) or qv.shape[-1] != kv.shape[-1] \
            or kv.shape[-2] != vv.shape[-2]:
        raise ValueError(f"shapes q {qv.shape}, k {kv.shape}, v {vv.shape} do not fit (..., Lq, D), (..., Lk, D), "
                         "(..., Lk, Dv)")
    return qv, kv, vv, fq


def _scale(scale: Any, D: int) -> tuple[float, float, Any]:
    """(float64 scale, its relative error bound, the exact scale: a Fraction, or None for 1/sqrt(D))."""
    if scale is None:
        r = math.isqrt(D)
        if r * r == D:
            return 1.0 / r, (0.0 if r & (r - 1) == 0 else U64), Fraction(1, r)
        return float(1 / np.sqrt(np.float64(D))), 2 * U64 * _M, None
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating)) or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite number or None (1/sqrt(D)), got {scale!r}")
    return float(scale), 0.0, Fraction(float(scale))


def _fast_batch(q: np.ndarray, k: np.ndarray, v: np.ndarray, keep: np.ndarray, sc: float, r_sc: float) -> tuple:
    """One batch entry's float64 output, its error bound and the row shifts (the max score)."""
    D, n = q.shape[1], k.shape[0]
    with np.errstate(all="ignore"):
        G = q @ k.T
        eG = ((D + 2) * U64) * (np.abs(q) @ np.abs(k).T) * _M
        s = sc * G
        es = (np.abs(s) * (U64 + r_sc) + sc * eG) * _M
        m = np.where(keep, s, -np.inf).max(axis=1, initial=-np.inf)
        m = np.where(np.isfinite(m), m, 0.0)
        d = s - m[:, None]
        ed = (es + U64 * np.abs(d)) * _M
        tiny = d < TINY_D
        p = np.where(keep & ~tiny, np.exp(np.where(tiny, 0.0, d)), 0.0)
        rho = np.where(keep & ~tiny, (ed + FE) * _M, 0.0).max(axis=1, initial=0.0)
        rho = np.where(rho < _SMALL, rho, np.inf)
        n_tiny = (keep & tiny).sum(axis=1)
        l_ = p.sum(axis=1)
        rl = ((n * U64) * (1 + rho) + rho + 2 * n_tiny * TINY_E) * _M  # l >= exp(-ed) >= 1/2 (the max's term)
        N = p @ v
        A = p @ np.abs(v)
        eN = ((rho * (1 + rho) + (n + 1) * U64)[:, None] * A + (n_tiny * TINY_E)[:, None] * np.abs(v).sum(0)) * _M
        o = N / l_[:, None]
        eo = ((np.abs(o) * rl[:, None] + eN / l_[:, None]) * (1 + 2 * rl[:, None]) + U64 * np.abs(o)) * _M
    return o, eo, m


class _Row:
    """The slow path's exact data of one query row, cached per precision."""

    def __init__(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, keep: np.ndarray, sc_exact: Any, D: int,
                 shift: float) -> None:
        js = np.flatnonzero(keep)
        self.G = exact_matmul(q[None, :], k[js].T, exact=True)[0] if js.size else np.zeros(0, object)
        self.v = v[js]
        self.sc, self.D, self.shift = sc_exact, D, shift
        self.bits = -1
        self.p: list = []
        self.l: Any = None

    def rational(self, c: int) -> Fraction | None:
        """The output when it is rational: every group of equal scores has the same mean of v[:, c]."""
        groups: dict[Fraction, list] = {}
        for g, x in zip(self.G, self.v[:, c]):
            groups.setdefault(g, []).append(Fraction(float(x)))
        means = {sum(xs, Fraction(0)) / len(xs) for xs in groups.values()}
        return means.pop() if len(means) == 1 else None

    def value(self, c: int, bits: int) -> Any:
        from mpmath import iv

        if bits != self.bits:
            iv.prec = bits
            sc = 1 / iv.sqrt(self.D) if self.sc is None else iv.mpf(self.sc.numerator) / self.sc.denominator
            sh = iv.mpf(self.shift)
            self.p = [iv.exp(sc * (iv.mpf(g.numerator) / g.denominator) - sh) for g in self.G]
            self.l, self.bits = sum(self.p, iv.mpf(0)), bits
        iv.prec = bits
        return sum((pj * float(x) for pj, x in zip(self.p, self.v[:, c])), iv.mpf(0)) / self.l


def attention_reference(q: Any, k: Any, v: Any, *, scale: Any = None, causal: bool = False, mask: Any = None,
                        out: Any = None, empty_rows: str = "nan") -> Any:
    """softmax(scale q k^T, masked) v, each element correctly rounded (RNE) to ``out`` (default: q's format)."""
    qv, kv, vv, fq = _read(q, k, v)
    dst, empty = output_format(out, fq), check_empty(empty_rows)
    batch, (Lq, D), Lk, Dv = qv.shape[:-2], qv.shape[-2:], kv.shape[-2], vv.shape[-1]
    keep = _keep_mask(batch, Lq, Lk, bool(causal), mask).reshape(-1, Lq, Lk)
    qv, kv, vv = qv.reshape(-1, Lq, D), kv.reshape(-1, Lk, D), vv.reshape(-1, Lk, Dv)
    sc, r_sc, sc_exact = _scale(scale, D)
    result = np.empty((qv.shape[0], Lq, Dv))
    for b in range(qv.shape[0]):
        o, eo, m = _fast_batch(qv[b], kv[b], vv[b], keep[b], sc, r_sc)
        live = keep[b].any(axis=1)
        codes, hard = decide(np.where(live[:, None], o, 0.0), np.where(live[:, None], eo, 0.0), dst)
        rows, cols = np.nonzero(hard & live[:, None])
        cache: dict[int, _Row] = {}

        def evaluate(j: int, bits: int, b: int = b, m: np.ndarray = m, rows: Any = rows, cols: Any = cols) -> Any:
            i, c = int(rows[j]), int(cols[j])
            if i not in cache:
                cache.clear()
                cache[i] = _Row(qv[b, i], kv[b], vv[b], keep[b, i], sc_exact, D, float(m[i]))
            exact = cache[i].rational(c)
            return exact if exact is not None else cache[i].value(c, bits)

        codes[rows, cols] = settle(rows.size, evaluate, dst)
        y = values_of(codes, dst)
        y[~live] = np.nan if empty == "nan" else 0.0
        result[b] = y
    return result.reshape(*batch, Lq, Dv)
