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
from ...core.kernels import rounding as jr
from .held import held

calls = Calls()
_CACHE_BYTES = 1 << 28  # residue buffers kept for reuse, per thread and slot
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_TWO53 = 2.0**53
_ONE_STEP = 2.0**50  # |h| below: q = rint(h / p) in float64 is h's nearest quotient. fl(h fl(1/p)) is within
# |h / p| 2^-52 < 1/(2p) of h / p, which lies at least 1/(2p) from a half-integer (p odd); h - q p is exact


def covers(step: Any) -> bool:
    """The residue pass (and the lines' sums of |x| before it) on float32 / float64 operands."""
    return step.name == "residues" and step.dtype in _FLOATS


@njit
def _abs_sums(X: np.ndarray, by_rows: bool, out: np.ndarray) -> None:
    """out[line] = sum of |x| over each row (by_rows) or column of X, in float64 (any order: a bound reads it)."""
    jr.wide_vectors()
    n0, n1 = X.shape
    lanes = np.zeros(16)  # a row's sum in 16 interleaved partial sums (they vectorise; a bound reads the total)
    for i in range(n0):
        if by_rows:
            lanes[:] = 0.0
            top = n1 - n1 % 16
            for j in range(0, top, 16):
                for w in range(16):
                    lanes[w] += abs(np.float64(X[i, j + w]))
            acc = 0.0
            for j in range(top, n1):
                acc += abs(np.float64(X[i, j]))
            out[i] = acc + lanes.sum()
        else:
            for j in range(n1):
                out[j] += abs(np.float64(X[i, j]))


def abs_sums(X: np.ndarray, axis: int) -> np.ndarray:
    """``np.abs(X).sum(axis=axis, dtype=np.float64)`` in one compiled pass without a copy (float32 read as it is);
    the sums in another order (ozaki2._sum_ratio's bound holds for any)."""
    calls.add()
    X = np.ascontiguousarray(X)
    out = np.zeros(X.shape[0] if axis == 1 else X.shape[1])
    _abs_sums(X, axis == 1, out)
    return out


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
    sum |h|, max |h|, sum |d|, max |d| (a row's in 16 interleaved partial sums and maxima: they vectorise). ``small``:
    every |t| < 2^51 (rint branch-free). Row by row: t, h and d (the common passes with their branches out of the
    loop), the statistics, the residues (_row_residues)."""
    jr.wide_vectors()
    n0, n1 = X.shape
    m1 = np.empty(n1)
    m0 = np.empty(n1)
    lanes = np.zeros((4, 16))
    top = n1 - n1 % 16
    for i in range(n0):
        if by_rows and small and not want_t:  # the common row pass, its branches out of the loop
            f0, f1 = lo[i], hi[i]
            for j in range(n1):
                t = np.float64(X[i, j]) * f0 * f1
                h = _rint(t)
                h_out[i, j] = h
                d_out[i, j] = t - h
        elif not by_rows and small and want_t:  # the common column pass (B's rows)
            for j in range(n1):
                t = np.float64(X[i, j]) * lo[j] * hi[j]
                h = _rint(t)
                h_out[i, j] = h
                d_out[i, j] = t - h
                t_out[i, j] = t
        else:
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
            lanes[:] = 0.0
            for j in range(0, top, 16):
                for w in range(16):
                    ah, ad = abs(h_out[i, j + w]), abs(d_out[i, j + w])
                    lanes[0, w] += ah
                    lanes[1, w] = max(lanes[1, w], ah)
                    lanes[2, w] += ad
                    lanes[3, w] = max(lanes[3, w], ad)
            s0, s1, s2, s3 = lanes[0].sum(), lanes[1].max(), lanes[2].sum(), lanes[3].max()
            for j in range(top, n1):
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
        _row_residues(h_out[i], big, primes, inv, T, planes, i, m1, m0)


@njit
def _row_residues(h: np.ndarray, big: float, primes: np.ndarray, inv: np.ndarray, T: np.ndarray, planes: np.ndarray,
                  i: int, m1: np.ndarray, m0: np.ndarray) -> None:
    """planes[:, i] = row i's balanced residues, one prime at a time in loops over the row: where its |h| (max: big)
    are below 2^50 in one step, r = h - rint(h / p) p (_ONE_STEP), below 2^53 in ozaki2.residues' two, else value
    by value; the balanced residue is unique, so each way gives the numpy path's bits."""
    n1 = h.size
    if big < _ONE_STEP:
        for q in range(primes.size):
            p, w = primes[q], inv[q]
            for j in range(n1):
                planes[q, i, j] = h[j] - _rint(h[j] * w) * p
        return
    if big >= _TWO53:
        for j in range(n1):
            _residue(h[j], primes, inv, T, planes, i, j)
        return
    for j in range(n1):
        a = math.trunc(h[j] * 2.0**-27)
        m1[j] = a
        m0[j] = h[j] - a * 2.0**27
    for q in range(primes.size):
        p, w, t1, t0 = primes[q], inv[q], T[q, 27], T[q, 0]
        for j in range(n1):
            x = m1[j] * t1 + m0[j] * t0
            r = x - _rint(x * w) * p
            planes[q, i, j] = r - _rint(r * w) * p


def _buffers(n: int, shape: tuple[int, int], want_t: bool, slot: str | None, int8: bool = False) -> tuple:
    """(planes (n, *shape), float64 or ``int8``, d, h, t or a stand-in): this thread's held arrays for ``slot``
    (held.py), valid until the next call for the same slot."""
    size = shape[0] * shape[1]
    buf = held(slot, np.float64, (2 + want_t + (0 if int8 else n)) * size, _CACHE_BYTES)
    planes = (held(slot, np.int8, n * size, _CACHE_BYTES) if int8 else buf[(2 + want_t) * size:]).reshape((n,) + shape)
    d, h = buf[:size].reshape(shape), buf[size:2 * size].reshape(shape)
    t = buf[2 * size:3 * size].reshape(shape) if want_t else np.empty((1, 1))
    return planes, d, h, t


def residues(X: np.ndarray, k: np.ndarray, axis: int, primes: tuple[int, ...], T: np.ndarray,
             want_t: bool, bits: int, slot: str | None = None, int8: bool = False
             ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]:
    """(planes (n, *X.shape), t (want_t) or None, d, h, stats (4, lines)) of ozaki2.residues, in one compiled pass
    (``slot``: the arrays are this thread's cached ones for that name, see _buffers; ``int8``: int8 planes, for
    primes below 2^8, whose balanced residues the kernel stores exactly).

    The scaling 2^k is applied as two factors 2^(k // 2) 2^(k - k // 2), each representable; every
    intermediate lies between x and t in magnitude and in its lowest bit, so both products are exact.
    |t| < 2^(bits - 1): with bits <= 52 the rounding to integers is the branch-free ``_rint``."""
    calls.add()
    X = np.ascontiguousarray(X)
    k = k.astype(np.int64)
    lo = np.ldexp(1.0, (k // 2).astype(np.int32))
    hi = np.ldexp(1.0, (k - k // 2).astype(np.int32))
    p = np.array(primes, np.float64)
    planes, d, h, t = _buffers(len(primes), X.shape, want_t, slot, int8)
    stats = np.zeros((4, X.shape[0] if axis == 1 else X.shape[1]))
    _kernel(X, lo, hi, axis == 1, bits <= 52, p, 1.0 / p, T, planes, t, d, h, stats, want_t)
    return planes, (t if want_t else None), d, h, stats



@njit(inline="always")
def _balanced(x: float, p: float, ip: float) -> float:
    """ozaki2.balanced on one value (|x| < 2^51): the same two exact steps, the same float64 operations."""
    r = x - _rint(x * ip) * p
    return r - _rint(r * ip) * p


@njit
def _garner(C: np.ndarray, primes: np.ndarray, inv: np.ndarray, c26: np.ndarray, wmod: np.ndarray,
            winv: np.ndarray, wl: np.ndarray, limbs: np.ndarray) -> None:
    """ozaki2.garner_limbs' digits and limbs (see there), prime by prime over all entries (loops that vectorise)."""
    jr.wide_vectors()
    n, R = C.shape
    v = np.empty((n, R))
    sm = np.empty(R)
    for j in range(n):
        p, ip, cj, wj = primes[j], inv[j], c26[j], winv[j]
        vj = v[j]
        for r in range(R):
            c = np.float64(C[j, r])
            c1 = np.trunc(c * 2.0**-26)
            vj[r] = _balanced(c1 * cj + (c - c1 * 2.0**26), p, ip)
        if j:
            sm[:] = 0.0
            for i in range(j):
                w, vi = wmod[i, j], v[i]
                for r in range(R):
                    sm[r] += vi[r] * w
            for r in range(R):
                vj[r] = _balanced(_balanced(vj[r] - sm[r], p, ip) * wj, p, ip)
    for j in range(n):
        vj = v[j]
        for k in range(limbs.shape[0]):
            w = wl[j, k]
            if w != 0:
                lk = limbs[k]
                for r in range(R):
                    lk[r] += np.int64(vj[r]) * w


def garner(C: np.ndarray, primes: tuple[int, ...], limbs: np.ndarray, shift: int) -> None:
    """limbs += ozaki2.garner_limbs(C, primes, nl, shift) in one compiled pass (the caller checks the limbs'
    room): the same float64 integers (C as float64 or int32) and int64 products, so the same limbs."""
    calls.add()
    n = len(primes)
    p = np.array(primes, np.float64)
    wmod, winv = np.zeros((n, n)), np.zeros(n)
    wl = np.zeros((n, limbs.shape[0]), np.int64)
    W = 1
    for j, q in enumerate(primes):
        for i in range(j):
            wmod[i, j] = float(math.prod(primes[:i]) % q)
        winv[j] = float(pow(W % q, -1, q)) if j else 1.0
        big = W << shift
        for k in range(limbs.shape[0]):
            wl[j, k] = (big >> (32 * k)) & 0xFFFFFFFF
        W *= q
    c26 = np.array([float((1 << 26) % q) for q in primes])
    C = np.ascontiguousarray(C, None if C.dtype == np.int32 else np.float64)  # int32: read as float64 integers
    _garner(C, p, 1.0 / p, c26, wmod, winv, wl, limbs)
