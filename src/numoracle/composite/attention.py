"""Exact reference of attention's forward pass, softmax(scale q k^T + mask) v, correctly rounded to an output format.

q (..., Lq, D), k (..., Lk, D), v (..., Lk, Dv) with equal batch dimensions; ``scale`` the exact value of the
number given, or (None) the real 1/sqrt(D) itself (not a float rounding of it); ``causal=True`` keeps key j for
query i when j <= i (top-left aligned, torch's ``is_causal``); ``mask`` a boolean array broadcastable to
(..., Lq, Lk), True = the key takes part (torch's boolean ``attn_mask``). A query whose keys are all masked gives NaN
(``empty_rows="nan"``, torch's math backend) or 0 (``"zero"``, FlashAttention). q, k, v must be finite.

The float64 tier: G = q k^T by BLAS (error <= (D+2) u |q||k|^T <= (D+2) u ||q|| ||k||: a classical GEMM, as
exact_matmul assumes), s = scale G, shifted by the row max, exp, l = sum p, N = p v and the bound A = p |v|; the
output's error bound follows from these (docs/composite.md). The rows it leaves undecided (outputs near 0, where
the absolute error matters) repeat it in numpy's long double (64-bit significands; skipped where long double is
float64). Still undecided elements are retried in mpmath interval
arithmetic from the exact scores (``exact_matmul(..., exact=True)``); an output that is rational (every group of
equal scores has the same mean value of v: a constant column of v, an all-equal row of scores) is given exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.inputs import exact_float64
from ..exact.reference import exact_matmul
from .rows import check_empty, masked, output_format, values_of
from .softmax import TINY_D, TINY_E
from .ziv import U64, decide, settle

__all__ = ["attention_reference"]

_M = 1 + 2.0**-20
_SMALL = 2.0**-30


def _keep_mask(batch: tuple, Lq: int, Lk: int, causal: bool, mask: Any) -> np.ndarray:
    keep = np.ones((*batch, Lq, Lk), bool)
    if causal:
        keep &= np.tril(np.ones((Lq, Lk), bool))
    return masked(keep, mask, "the scores' shape")


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


def _scale(scale: Any, D: int) -> tuple[float, Any]:
    """(float64 scale or None for 1/sqrt(D) evaluated per tier, the exact scale: a Fraction, or None)."""
    if scale is None:
        r = math.isqrt(D)
        return (1.0 / r, Fraction(1, r)) if r * r == D and r & (r - 1) == 0 else (None, None)
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating)) or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite number or None (1/sqrt(D)), got {scale!r}")
    return float(scale), Fraction(float(scale))


@dataclass(frozen=True)
class _Weights:
    """One tier's softmax numerators p = exp(s - m) of some query rows, with their error bounds."""

    p: np.ndarray  # (rows, Lk) in the tier's dtype; 0 for masked keys and for d < TINY_D
    rho: np.ndarray  # (rows,) relative error bound of every p of the row
    lsum: np.ndarray  # (rows,) sum of p
    rl: np.ndarray  # (rows,) relative error bound of l
    m: np.ndarray  # (rows,) the shift (the row's largest computed score)
    n_tiny: np.ndarray  # (rows,) kept keys counted as 0 (exp(d) < TINY_E)
    u: Any

    def take(self, r: np.ndarray) -> _Weights:
        return _Weights(self.p[r], self.rho[r], self.lsum[r], self.rl[r], self.m[r], self.n_tiny[r], self.u)


def _weights(q: np.ndarray, k: np.ndarray, keep: np.ndarray, scale: float | None, dt: Any) -> _Weights:
    """p = exp(scale q k^T - m) in ``dt`` (float64, or long double for the second tier), with bounds."""
    D, n = q.shape[1], k.shape[0]
    u = dt(2.0) ** -(np.finfo(dt).nmant + 1)
    fe = u * 2**8  # assumed relative error bound of numpy's exp in dt (see softmax.FE)
    sc, r_sc = (dt(1) / np.sqrt(dt(D)), 2 * u * _M) if scale is None else (dt(scale), dt(0))
    with np.errstate(all="ignore"):
        G = q.astype(dt) @ k.astype(dt).T
        s = sc * G
        m = np.where(keep, s, -np.inf).max(axis=1, initial=-np.inf)
        lo = np.where(keep, s, np.inf).min(axis=1, initial=np.inf)
        m = np.where(np.isfinite(m), m, dt(0))
        # sum_d |q_d k_d| <= ||q|| ||k|| (Cauchy-Schwarz), in float64 with a factor covering its roundings
        qn = np.sqrt(np.square(q.astype(np.float64)).sum(axis=1)) * (1 + (D + 4) * U64)
        kn = float(np.sqrt(np.square(k.astype(np.float64)).sum(axis=1)).max(initial=0.0)) * (1 + (D + 4) * U64)
        smax = np.where(keep, np.abs(s), dt(0)).max(axis=1, initial=0.0)
        es = (smax * (u + r_sc) + sc * ((D + 2) * u) * (qn * kn).astype(dt)) * _M  # every score's error, per row
        d = s - m[:, None]
        tiny = d < TINY_D
        p = np.where(keep & ~tiny, np.exp(np.where(tiny, dt(0), d)), dt(0))
        rho = ((es + u * np.where(np.isfinite(lo), m - lo, dt(0)) * _M) * _M + fe) * _M  # exp(ed) - 1 <= ed(1 + ed)
        rho = np.where(rho < _SMALL, rho, np.inf)
        n_tiny = (keep & tiny).sum(axis=1)
        l_ = p.sum(axis=1)
        rl = ((n * u) * (1 + rho) + rho + 2 * n_tiny * TINY_E) * _M  # l >= exp(-ed) >= 1/2 (the max's term)
    return _Weights(p, rho, l_, rl, m, n_tiny, u)


def _output(w: _Weights, N: np.ndarray, A: np.ndarray, absv: np.ndarray) -> tuple:
    """o = N / l and its error bound, from N = p v and A = p |v| (absv: sum_j |v_j| per column)."""
    n, u = w.p.shape[1], w.u
    with np.errstate(all="ignore"):
        eN = ((w.rho * (1 + w.rho) + (n + 1) * u)[:, None] * A + (w.n_tiny * TINY_E)[:, None] * absv) * _M
        o = N / w.lsum[:, None]
        eo = ((np.abs(o) * w.rl[:, None] + eN / w.lsum[:, None]) * (1 + 2 * w.rl[:, None]) + u * np.abs(o)) * _M
    return o, eo


def _tiers(q: np.ndarray, k: np.ndarray, v: np.ndarray, keep: np.ndarray, scale: float | None, dst: Any) -> tuple:
    """Codes of one batch entry from the float64 tier, then long double on the undecided elements; what is left."""
    live = keep.any(axis=1)
    w = _weights(q, k, keep, scale, np.float64)
    absv = np.abs(v).sum(axis=0)
    o, eo = _output(w, w.p @ v, w.p @ np.abs(v), absv)
    codes, hard = decide(np.where(live[:, None], o, 0.0), np.where(live[:, None], eo, 0.0), dst)
    hard &= live[:, None]
    rows = np.flatnonzero(hard.any(axis=1))
    if rows.size and np.finfo(np.longdouble).nmant >= 63:
        w2 = _weights(q[rows], k, keep[rows], scale, np.longdouble)
        r, c = np.nonzero(hard[rows])  # only the undecided (row, column) pairs: N and A as row sums
        vc = v.T[c].astype(np.longdouble)
        w2r = w2.take(r)
        N = np.einsum("ij,ij->i", w2r.p, vc)[:, None]
        A = np.einsum("ij,ij->i", w2r.p, np.abs(vc))[:, None]
        o2, eo2 = _output(w2r, N, A, absv[c][:, None])
        c2, h2 = decide(o2[:, 0], eo2[:, 0], dst)
        codes[rows[r], c] = np.where(h2, codes[rows[r], c], c2)
        hard[rows[r], c] = h2
    return codes, hard, w.m, live


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


def _settle_batch(codes: np.ndarray, hard: np.ndarray, data: tuple, sc_exact: Any, m: np.ndarray, dst: Any) -> None:
    """The undecided elements of one batch entry, retried exactly (row data cached while the row repeats)."""
    q, k, v, keep = data
    rows, cols = np.nonzero(hard)
    cache: dict[int, _Row] = {}

    def evaluate(j: int, bits: int) -> Any:
        i, c = int(rows[j]), int(cols[j])
        if i not in cache:
            cache.clear()
            cache[i] = _Row(q[i], k, v, keep[i], sc_exact, q.shape[1], float(m[i]))
        exact = cache[i].rational(c)
        return exact if exact is not None else cache[i].value(c, bits)

    codes[rows, cols] = settle(rows.size, evaluate, dst)


def attention_reference(q: Any, k: Any, v: Any, *, scale: Any = None, causal: bool = False, mask: Any = None,
                        out: Any = None, empty_rows: str = "nan") -> Any:
    """softmax(scale q k^T, masked) v, each element correctly rounded (RNE) to ``out`` (default: q's format)."""
    qv, kv, vv, fq = _read(q, k, v)
    dst, empty = output_format(out, fq), check_empty(empty_rows)
    batch, (Lq, D), Lk, Dv = qv.shape[:-2], qv.shape[-2:], kv.shape[-2], vv.shape[-1]
    keep = _keep_mask(batch, Lq, Lk, bool(causal), mask).reshape(-1, Lq, Lk)
    qv, kv, vv = qv.reshape(-1, Lq, D), kv.reshape(-1, Lk, D), vv.reshape(-1, Lk, Dv)
    sc, sc_exact = _scale(scale, D)
    result = np.empty((qv.shape[0], Lq, Dv))
    for b in range(qv.shape[0]):
        codes, hard, m, live = _tiers(qv[b], kv[b], vv[b], keep[b], sc, dst)
        _settle_batch(codes, hard, (qv[b], kv[b], vv[b], keep[b]), sc_exact, m, dst)
        y = values_of(codes, dst)
        y[~live] = np.nan if empty == "nan" else 0.0
        result[b] = y
    return result.reshape(*batch, Lq, Dv)
