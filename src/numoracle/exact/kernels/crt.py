"""Compiled twin of Ozaki scheme II's residue pass (exact/ozaki2.py ``residues``).

One pass over an operand: per value the scaled t (two power-of-two factors: exact, as numpy's ldexp),
its integer h = rint(t), the lines' statistics of |h| and |t - h|, and h's balanced residue modulo each
prime, by the same exact float64 steps as the numpy path (so the same bits; tests/exact/test_ozaki2.py
runs both). Imported lazily through ``core.jit.kernel_for`` (``covers``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.jit import Calls, njit

calls = Calls()
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_TWO53 = 2.0**53


def covers(step: Any) -> bool:
    """The residue pass on float32 / float64 operands."""
    return step.name == "residues" and step.dtype in _FLOATS


_MAGIC = 1.5 * 2.0**52  # y + _MAGIC - _MAGIC = rint(y) for |y| < 2^51, in float64's round to nearest even


@njit(inline="always")
def _rint(y: float) -> float:
    """np.rint(y) for |y| < 2^51, the sign of a zero too (branch-free: the loops vectorise)."""
    return math.copysign((y + _MAGIC) - _MAGIC, y)


@njit
def _residue(h: float, primes: np.ndarray, inv: np.ndarray, T: np.ndarray, planes: np.ndarray, i: int,
             j: int) -> None:
    """planes[:, i, j] = the balanced residues of the float64 integer h, any magnitude (ozaki2.residues)."""
    z = 0
    m = h
    if abs(h) >= _TWO53:
        f, e = math.frexp(h)
        z = e - 53
        m = math.ldexp(f, 53)
    m1 = math.trunc(m * 2.0**-27)  # |m1| < 2^26
    m0 = m - m1 * 2.0**27
    for q in range(primes.size):
        p = primes[q]
        x = m1 * T[q, z + 27] + m0 * T[q, z]
        r = x - _rint(x * inv[q]) * p
        planes[q, i, j] = r - _rint(r * inv[q]) * p


@njit
def _kernel(X: np.ndarray, lo: np.ndarray, hi: np.ndarray, by_rows: bool, small: bool, primes: np.ndarray,
            inv: np.ndarray, T: np.ndarray, planes: np.ndarray, t_out: np.ndarray, d_out: np.ndarray,
            h_out: np.ndarray, stats: np.ndarray, want_t: bool) -> None:
    """t = x lo hi per line, h = rint(t), d = t - h (into t_out when want_t, d_out always); stats (4, lines):
    sum |h|, max |h|, sum |d|, max |d|. ``small``: every |t| < 2^51 (rint branch-free). A row whose |h| are
    all below 2^53 (the common case) takes its residues in loops over the row, one prime at a time (they
    vectorise); others value by value."""
    n0, n1 = X.shape
    m1 = np.empty(n1)
    m0 = np.empty(n1)
    for i in range(n0):
        for j in range(n1):
            line = i if by_rows else j
            t = np.float64(X[i, j]) * lo[line] * hi[line]
            h = _rint(t) if small else np.rint(t)
            h_out[i, j] = h
            d_out[i, j] = t - h
            if want_t:
                t_out[i, j] = t
        big = 0.0
        if by_rows:
            s0, s1, s2, s3 = 0.0, 0.0, 0.0, 0.0
            for j in range(n1):
                ah, ad = abs(h_out[i, j]), abs(d_out[i, j])
                s0 += ah
                s1 = max(s1, ah)
                s2 += ad
                s3 = max(s3, ad)
            stats[0, i] += s0
            stats[1, i] = max(stats[1, i], s1)
            stats[2, i] += s2
            stats[3, i] = max(stats[3, i], s3)
            big = s1
        else:
            for j in range(n1):
                ah, ad = abs(h_out[i, j]), abs(d_out[i, j])
                stats[0, j] += ah
                stats[1, j] = max(stats[1, j], ah)
                stats[2, j] += ad
                stats[3, j] = max(stats[3, j], ad)
                big = max(big, ah)
        if big >= _TWO53:
            for j in range(n1):
                _residue(h_out[i, j], primes, inv, T, planes, i, j)
            continue
        for j in range(n1):
            h = h_out[i, j]
            a = math.trunc(h * 2.0**-27)
            m1[j] = a
            m0[j] = h - a * 2.0**27
        for q in range(primes.size):
            p, w, t1, t0 = primes[q], inv[q], T[q, 27], T[q, 0]
            for j in range(n1):
                x = m1[j] * t1 + m0[j] * t0
                r = x - _rint(x * w) * p
                planes[q, i, j] = r - _rint(r * w) * p


def residues(X: np.ndarray, k: np.ndarray, axis: int, primes: tuple[int, ...], T: np.ndarray,
             want_t: bool, bits: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]:
    """(planes (n, *X.shape), t (want_t) or None, d, h, stats (4, lines)) of ozaki2.residues, in one compiled pass.

    The scaling 2^k is applied as two factors 2^(k // 2) 2^(k - k // 2), each representable; every
    intermediate lies between x and t in magnitude and in its lowest bit, so both products are exact.
    |t| < 2^(bits - 1): with bits <= 52 the rounding to integers is the branch-free ``_rint``."""
    calls.add()
    X = np.ascontiguousarray(X)
    k = k.astype(np.int64)
    lo = np.ldexp(1.0, (k // 2).astype(np.int32))
    hi = np.ldexp(1.0, (k - k // 2).astype(np.int32))
    p = np.array(primes, np.float64)
    planes = np.empty((len(primes),) + X.shape)
    d, h = np.empty(X.shape), np.empty(X.shape)
    t = np.empty(X.shape) if want_t else np.empty((1, 1))
    stats = np.zeros((4, X.shape[0] if axis == 1 else X.shape[1]))
    _kernel(X, lo, hi, axis == 1, bits <= 52, p, 1.0 / p, T, planes, t, d, h, stats, want_t)
    return planes, (t if want_t else None), d, h, stats

