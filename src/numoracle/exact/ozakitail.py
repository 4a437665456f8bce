"""exact_matmul's early rounding: round from the leading slice products when the rest cannot matter.

The Ozaki split (ozaki.py) writes each entry as sum_{s,t} A_s B_t 2^off_st. The slice pairs far
below the leading one (s b_A + t b_B large) are usually far below the entry's last bit. Here the
leading pairs' exact sum m is rounded together with a rigorous bound R on the rest: an entry of
a digit product A_s B_t has magnitude <= sum_k |a_ik| |b_kj| <= (sum_k |a_ik|) max_k |b_kj|, from
the digits' row sums and column maxima, so the skipped pairs add some x with |x| <= R (see
tail_bound). RNE and round-to-odd are monotone, so
where both round m - R and m + R to the same float64 (bit for bit: the sign of a zero too) they
round every value in between, the exact entry included, to it: the result is the correctly
rounded exact value, as if every pair had been computed. The other entries are computed exactly:
one by one as exact dot products when few, else by the skipped pairs' GEMMs. Only exact=False
results round early; exact=True needs every bit.
"""

from __future__ import annotations

import math

import numpy as np

from .exactsum import L, product_terms, round_limbs, split_values, sum_terms

_MARGIN = 16  # bits between the skipped pairs' bound and the leading pair's scale beyond 53 + log2 K
_BLOCK = 1 << 20  # products per block of the per-entry exact dot products
_OPERAND = 32  # an operand value's pass per GEMM, in GEMM products (see affordable)


def head_pairs(nA: int, nB: int, ba: int, bb: int, K: int, rows: list[int], cols: list[int]) -> set | None:
    """The slice pairs computed before the first rounding attempt; None for all of them (also when
    the others would not save one full GEMM). rows / cols: the lines in each slice's GEMMs."""
    far = 55 + max(K - 1, 0).bit_length() + _MARGIN
    head = {(s, t) for s in range(nA) for t in range(nB) if s * ba + t * bb < far}
    saved = sum(rows[s] * cols[t] for s in range(nA) for t in range(nB) if (s, t) not in head)
    return None if saved < max(rows, default=0) * max(cols, default=0) else head


def tail_bound(tail: list[tuple[int, int]], ba: int, bb: int, sum_a: np.ndarray, max_b: np.ndarray) -> np.ndarray:
    """R (M, N): float64 integers >= |sum over the pairs ``tail`` of (A_s B_t)_ij 2^off(s, t)| (units 2^base).

    |(A_s B_t)_ij| <= sum_k |a_ik| |b_kj| <= (sum_k |a_ik|) max_k |b_kj|: sum_a (nA, M) and max_b
    (nB, N) are those of the digits (exact integers). With off(s, t) = (nA - 1 - s) ba + (nB - 1 - t)
    bb this is U V, U_is = sum_a[s, i] 2^((nA-1-s) ba), V_sj = sum over the tail's t of max_b[t, j]
    2^((nB-1-t) bb): a GEMM of nA terms. Every product, scaling and sum rounds to nearest (relative
    error <= 2^-53 each; none underflows: the terms are 0 or >= 1, and overflow gives inf, which
    leaves the entry undecided), so the total times 1 + (nA nB + 8) 2^-52, rounded up to an
    integer, is an upper bound.
    """
    nA, nB = sum_a.shape[0], max_b.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        U = np.ldexp(sum_a.T, ((nA - 1 - np.arange(nA)) * ba)[None, :])
        V = np.zeros((nA, max_b.shape[1]))
        for s, t in tail:
            V[s] += np.ldexp(max_b[t], (nB - 1 - t) * bb)
        R = U @ V
        return np.ceil(R * (1 + (nA * nB + 8) * 2.0**-52))


def _pieces(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """R (float64 integers >= 0) as 32-bit pieces: (at, add (3, n)) with R_c = sum_k add[k, c] 2^(32 (at_c + k))."""
    f, e = np.frexp(R)
    sh = np.maximum(e - 53, 0)
    m = np.ldexp(f, e - sh).astype(np.int64)  # R / 2^sh: an integer below 2^53 (exact)
    q, r = sh // L, sh % L
    p0 = (m & ((np.int64(1) << (L - r)) - 1)) << r  # m 2^r = p0 + rest 2^32, as in ozaki.add_shifted
    rest = m >> (L - r)
    return q.astype(np.int64), np.array([p0, rest & ((1 << L) - 1), rest >> L])


def round_bracketed(limbs: np.ndarray, base: np.ndarray, R: np.ndarray, kern) -> tuple:
    """(RNE, RO, undecided flat indices) of the columns of limbs give or take R (see the module doc).

    ``limbs`` is not modified; the undecided entries' RNE / RO are placeholders. An R too wide
    for the limbs (or not finite) leaves its entry undecided.
    """
    nl, n = limbs.shape
    wide = ~(R < math.ldexp(1.0, min(L * (nl - 3), 1023)))  # the pieces fit below the top limb
    at, add = _pieces(np.where(wide, 0.0, R))
    got = []
    for sign in (-1, 1):
        if kern is not None:
            got.append(kern.round_limbs(limbs, base, sign * add, at))
            continue
        out = limbs.copy()
        cols = np.arange(n)
        for k in range(3):
            out[at + k, cols] += sign * add[k]
        got.append(round_limbs(out, base))
    (a0, b0), (a1, b1) = got
    same = (a0.view(np.uint64) == a1.view(np.uint64)) & (b0.view(np.uint64) == b1.view(np.uint64))
    return a0, b0, np.flatnonzero(~same | wide)


def compiled_entries(A: np.ndarray, B: np.ndarray, kern) -> bool:
    """Do ``entries`` of A and B take the compiled long accumulators (float32 operands, kernels on, K < 2^31: the
    int64 limbs take that many additions)?"""
    return kern is not None and A.dtype == np.float32 and B.dtype == np.float32 and A.shape[1] < 1 << 31


def affordable(undecided: int, K: int, tail: int, M: int, N: int, compiled: bool = False) -> bool:
    """Exact dot products one by one (~80 ns a product on numpy's route, ~5 ns on float32's compiled one:
    ``compiled``) cost less than the tail's GEMMs (~0.02-0.04 ns a product) and their operands' passes (digits or
    residues: ~1 ns a value and GEMM, _OPERAND products' worth, which dominate a product of few rows and columns)?
    (Only the time depends on it.)"""
    return undecided * K * (256 if compiled else 4096) <= tail * (M * N + _OPERAND * (M + N)) * K


def entries(A: np.ndarray, B: np.ndarray, ii: np.ndarray, jj: np.ndarray, kern=None) -> tuple[np.ndarray, np.ndarray]:
    """(RNE, RO) of the exact dot products A[i] . B[:, j] (finite float64 or float32), in blocks of products;
    float32 operands with the compiled kernels (``kern``: exact/kernels/ozaki.py) in long accumulators instead."""
    if compiled_entries(A, B, kern):
        return kern.exact_dots32(A, B, ii, jj)
    K = A.shape[1]
    rne, ro = np.zeros(ii.size), np.zeros(ii.size)
    step = max(1, _BLOCK // max(K, 1))
    for p in range(0, ii.size, step):
        i, j = ii[p:p + step], jj[p:p + step]
        a, b = A[i].astype(np.float64, copy=False), B[:, j].T.astype(np.float64, copy=False)
        terms = product_terms(split_values(a, strip=True), split_values(b, strip=True))
        rne[p:p + step], ro[p:p + step], _ = sum_terms(terms)
    return rne, ro
