"""exact_matmul's shortcut into narrow formats: one plain float64 GEMM, a rigorous error bound, a bracket.

For a result rounded into formats of at most 51 bits (FP32, BF16, FP16, ...; not FP64, not exact=True) the
float64 product of the unsplit values, Ĉ = fl(A @ B), is usually far closer to the exact C than half a unit of
the destination. K goes in chunks of ``kc`` columns (one float64 GEMM each, results added in order), and

    |Ĉ_ij - C_ij| <= R_ij = (g_kc + g_(nc-1) (1 + g_kc)) S_ij + (underflow terms),   g_n = n u / (1 - n u),

with u = 2^-53, nc the number of chunks and S_ij = sum_k |a_ik| |b_kj| (``gemmbound.factor``; the proof, and why
kc near sqrt(K) makes the factor about 2 sqrt(K) u instead of K u, in exact/gemmbound.py).
S_ij <= min(sum_c rs_ic cm_cj, sum_c rm_ic cs_cj) with rs / rm the row sums / maxima of |A| over chunk c and cs /
cm those of B's columns (sum_(k in c) |a_ik| |b_kj| <= rs_ic cm_cj); the float64 sums and the small GEMMs that form
these err by at most (kc + nc + 2) u relatively and 2^-1075 a product absolutely: the factor 1 + (kc + 2 nc + 64)
2^-52 and (2 nc + 16) 2^-1074 cover them and the final products.

Where the products are exact in float64 (see ``_exact_products``: FP32 inputs always) there are no underflow
terms, and an entry with S_ij = 0 has every product 0, so C_ij = 0 (R = 0: decided; its sign is the caller's,
from the products' signs). Elsewhere the bracket [Ĉ - R, Ĉ + R], widened outward by one float64 step
(the two float64 operations round by at most half a step), is rounded at both ends into every destination:
rounding to nearest even is monotone, so where both ends give the same bits every value in between, C included,
gives them too, and the lower end serves as C's stand-in (``ro``: ``_finish`` casts it). Brackets that hold 0 or
that are not finite stay undecided; those entries are computed exactly (ozaki2.undecided). Only destinations
whose rounding is monotone on all of float64 qualify: IEEE-style float formats (overflow to +-inf).

``choose`` takes the shortcut where it pays: the plain GEMM and the bracket on a few sampled rows give the share of
undecided entries, whose exact dot products cost about ``_ENTRY`` GEMM entries each; against the other engines'
GEMMs (ozaki.planned_gemms, and with the kernels ozaki2.least_gemms plus its overhead, a lower bound of its plan).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.engine.convert import cast
from ..core.formats.format import FP32, AnyFormat
from . import gemmbound, ozaki, ozaki2

_SAMPLE = 8  # rows of A sampled to estimate the undecided share (products of at least 4 x _SAMPLE rows)
_ENTRY = {True: 256, False: 4096}  # an undecided entry's exact dot product in GEMM entries (compiled, numpy)
_COST = 1.35  # the plain GEMM plus the bound, the bracket and the conversions, in GEMMs (an estimate)


@dataclass(frozen=True)
class Bracketed:
    """The shortcut's result on A @ B, raveled: ``ro`` a value that rounds into each destination as the exact
    entry does (+0 where it is exactly 0), and the flat indices of the entries left ``undecided``."""

    ro: np.ndarray
    undecided: np.ndarray


def qualifies(dst: AnyFormat | tuple[AnyFormat, ...], exact: bool) -> tuple[AnyFormat, ...] | None:
    """The destinations as a tuple when the shortcut may serve them all (rounded, IEEE-style float formats of at
    most 51 bits), else None."""
    fmts = dst if isinstance(dst, tuple) else (dst,)
    if exact:
        return None
    for f in fmts:
        if f.is_integer or f.nan != "ieee" or not f.has_inf or f.precision > 51:
            return None
    return fmts


def _exact_products(A: np.ndarray, B: np.ndarray, EA: np.ndarray, sA: np.ndarray, EB: np.ndarray,
                    sB: np.ndarray) -> bool:
    """Is every product a_ik b_kj exact in float64, without underflow or overflow? float32 operands: products of
    24-bit significands in [2^-298, 2^256). Else from the lines: a line's values have at most span significant
    bits, lying in [2^(E - span), 2^E): products of at most 53 bits with their lowest at 2^-1074 or above and
    below 2^1024 are float64 numbers (sums of such are multiples of 2^-1074: no underflow error either)."""
    if (A.dtype == np.float32 and B.dtype == np.float32) or not (EA.size and EB.size):
        return True
    if int(sA.max()) + int(sB.max()) > 53:
        return False
    return int((EA - sA).min()) + int((EB - sB).min()) >= -1074 and int(EA.max()) + int(EB.max()) <= 1024


def widen_stats(X: np.ndarray, kc: int, axis: int, kern=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X in float64 (exact widening; X itself when float64), sums of |x| over each line's chunks of kc values,
    their maxima): rows of A (axis=1: (M, nc)) or columns of B (axis=0: (nc, N)). ``kern``: the compiled twin
    (exact/kernels/ozaki.py), one pass."""
    if kern is not None and X.flags.c_contiguous:
        return kern.widen_stats(X, kc, axis)
    X64 = X.astype(np.float64, copy=False)
    Xt = X64 if axis == 1 else X64.T
    n, K = Xt.shape
    nc = -(-K // kc)
    s, m = np.empty((n, nc)), np.empty((n, nc))
    kf = (K // kc) * kc
    with np.errstate(over="ignore"):
        if kf:
            a = np.abs(Xt[:, :kf]).reshape(n, kf // kc, kc)
            s[:, :kf // kc], m[:, :kf // kc] = a.sum(axis=2), a.max(axis=2)
        if kf < K:
            a = np.abs(Xt[:, kf:])
            s[:, -1], m[:, -1] = a.sum(axis=1), a.max(axis=1)
    return (X64, s, m) if axis == 1 else (X64, s.T, m.T)


def bound(rs: np.ndarray, rm: np.ndarray, cs: np.ndarray, cm: np.ndarray, K: int, kc: int,
          exact_products: bool) -> np.ndarray:
    """R (M, N) >= |gemm(A, B) - A @ B| from A's rows' and B's columns' chunk sums and maxima (``widen_stats``;
    see the module doc); inf where it overflows."""
    nc = -(-K // kc)
    with np.errstate(over="ignore", invalid="ignore"):
        S = np.minimum(rs @ cm, rm @ cs)
        g = gemmbound.factor(kc, nc)
        R = S * (g * (1 + (kc + 2 * nc + 64) * 2.0**-52))
        if not exact_products:
            R += (2 * K + 2 * nc + 16) * 2.0**-1074
        else:  # S = 0: every product is 0 (see the module doc); else the bound's own underflows
            R = np.where(S > 0, R + (2 * nc + 16) * 2.0**-1074, 0.0)
    R[np.isnan(R)] = np.inf
    return R


def gemm(A64: np.ndarray, B64: np.ndarray, kc: int) -> np.ndarray:
    """fl(A @ B) of float64 A and B, K in chunks of kc columns (one GEMM each), the chunks' results added in order."""
    M, K = A64.shape
    N = B64.shape[1]
    C = np.zeros((M, N))
    G = np.empty((M, N))
    with np.errstate(over="ignore", invalid="ignore"):  # FP64 data may overflow: those entries stay undecided
        for k0 in range(0, K, kc):
            a, b = A64[:, k0:k0 + kc], B64[k0:k0 + kc]
            if k0 == 0:
                np.matmul(a, b, out=C)
            else:
                np.matmul(a, b, out=G)
                C += G
    return C


def _rounds(x: np.ndarray, f: AnyFormat) -> np.ndarray:
    """The bits of x (finite float64) rounded to nearest even into f (FP32 by the hardware's conversion: exact_matmul
    refused a thread that flushes subnormals, core/fpmode.py)."""
    if f == FP32:
        with np.errstate(over="ignore"):
            return x.astype(np.float32).view(np.uint32)
    return np.asarray(cast(x, f, rounding="rne"))


def bracket(C: np.ndarray, R: np.ndarray, dst: tuple[AnyFormat, ...]) -> Bracketed:
    """The entries of C +- R that round alike at both ends into every format of ``dst`` (see the module doc)."""
    c, r = C.ravel(), R.ravel()
    with np.errstate(over="ignore", invalid="ignore"):
        lo = np.nextafter(c - r, -np.inf)
        hi = np.nextafter(c + r, np.inf)
        ok = np.isfinite(c) & np.isfinite(lo) & np.isfinite(hi)
    zero = ok & (r == 0)  # C exact (see bound)
    ok &= (lo > 0) | (hi < 0)
    lo, hi = np.where(ok, lo, 0.0), np.where(ok, hi, 0.0)
    for f in dst:
        ok &= _rounds(lo, f) == _rounds(hi, f)
    ok |= zero
    return Bracketed(np.where(zero, 0.0, lo), np.flatnonzero(~ok))  # +0: _finish gives exact zeros their sign


def right(B: np.ndarray, kern=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """B's side of ``shortcut`` (widen_stats at gemmbound.chunk(K)), made once for the sample and the product."""
    return widen_stats(B, gemmbound.chunk(B.shape[0]), 0, kern)


def shortcut(A: np.ndarray, B: np.ndarray, EA, sA, EB, sB, dst: tuple[AnyFormat, ...], kern=None,
             b_side: tuple | None = None) -> Bracketed:
    """The plain GEMM, its bound and the bracket on all of A @ B (finite float32 / float64 values)."""
    K = A.shape[1]
    kc = gemmbound.chunk(K)
    A64, rs, rm = widen_stats(A, kc, 1, kern)
    B64, cs, cm = b_side if b_side is not None else right(B, kern)
    R = bound(rs, rm, cs, cm, K, kc, _exact_products(A, B, EA, sA, EB, sB))
    return bracket(gemm(A64, B64, kc), R, dst)


def choose(A: np.ndarray, B: np.ndarray, EA, sA, EB, sB, dst: tuple[AnyFormat, ...], kern=None) -> tuple | None:
    """B's side (``right``, for ``shortcut``) where the shortcut pays on A @ B, else None: its cost (_COST GEMMs
    plus _ENTRY a predicted undecided entry, the share measured on _SAMPLE evenly spaced rows, one more than seen)
    against the other engines' planned GEMMs."""
    M, K = A.shape
    N = B.shape[1]
    if not (M and N and K):
        return None
    other = ozaki.planned_gemms(sA, sB, K, M, N, False)
    if kern is not None:  # Ozaki scheme II's GEMMs, at least (ozaki2.choose would take the rows' sums first)
        other = min(other, ozaki2.fewest_gemms(sA, sB, K, False) + ozaki2.OVERHEAD)
    if other <= _COST:
        return None
    side = right(B, kern)
    rows = np.unique(np.linspace(0, M - 1, min(M, _SAMPLE)).astype(np.int64)) if M >= 4 * _SAMPLE else np.arange(M)
    share = 0.0
    if rows.size < M:
        got = shortcut(np.ascontiguousarray(A[rows]), B, EA[rows], sA[rows], EB, sB, dst, kern, side)
        share = (got.undecided.size + 1) / (rows.size * N)
    return side if _COST + share * _ENTRY[kern is not None] < other else None
