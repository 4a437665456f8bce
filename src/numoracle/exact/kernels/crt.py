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
    """np.rint(y) for |y| < 2^51 (branch-free: the loops vectorise)."""
    return (y + _MAGIC) - _MAGIC


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
def _kernel(X: np.ndarray, lo: np.ndarray, hi: np.ndarray, by_rows: bool, primes: np.ndarray, inv: np.ndarray,
            T: np.ndarray, planes: np.ndarray, keep_t: np.ndarray, h_out: np.ndarray, stats: np.ndarray,
            want_t: bool) -> None:
    """t = x lo hi per line, h = rint(t); keep_t gets t (want_t) or t - h; stats (4, lines): sum |h|,
    max |h|, sum |t - h|, max |t - h|. A row whose |h| are all below 2^53 (the common case) takes its
    residues in loops over the row, one prime at a time (they vectorise); others value by value."""
    n0, n1 = X.shape
    m1 = np.empty(n1)
    m0 = np.empty(n1)
    for i in range(n0):
        big = 0.0
        for j in range(n1):
            line = i if by_rows else j
            t = np.float64(X[i, j]) * lo[line] * hi[line]
            h = np.rint(t)
            d = t - h
            h_out[i, j] = h
            keep_t[i, j] = t if want_t else d
            ah, ad = abs(h), abs(d)
            big = max(big, ah)
            stats[0, line] += ah
            stats[1, line] = max(stats[1, line], ah)
            stats[2, line] += ad
            stats[3, line] = max(stats[3, line], ad)
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
             want_t: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(planes (n, *X.shape), t or t - h, h, stats (4, lines)) of ozaki2.residues, in one compiled pass.

    The scaling 2^k is applied as two factors 2^(k // 2) 2^(k - k // 2), each representable; every
    intermediate lies between x and t in magnitude and in its lowest bit, so both products are exact."""
    calls.add()
    X = np.ascontiguousarray(X)
    k = k.astype(np.int64)
    lo = np.ldexp(1.0, (k // 2).astype(np.int32))
    hi = np.ldexp(1.0, (k - k // 2).astype(np.int32))
    p = np.array(primes, np.float64)
    planes = np.empty((len(primes),) + X.shape)
    keep, h = np.empty(X.shape), np.empty(X.shape)
    stats = np.zeros((4, X.shape[0] if axis == 1 else X.shape[1]))
    _kernel(X, lo, hi, axis == 1, p, 1.0 / p, T, planes, keep, h, stats, want_t)
    return planes, keep, h, stats
