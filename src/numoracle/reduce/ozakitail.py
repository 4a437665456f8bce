"""exact_matmul's early rounding: round from the leading slice products when the rest cannot matter.

The Ozaki split (ozaki.py) writes each entry as sum_{s,t} A_s B_t 2^off_st. The slice pairs far
below the leading one (s b_A + t b_B large) are usually far below the entry's last bit. Here the
leading pairs' exact sum m is rounded together with a rigorous bound R on the rest: every entry
of a digit product A_s B_t has magnitude <= K 2^(b_A - 1) 2^(b_B - 1), so the skipped pairs add
some x with |x| <= R = sum K 2^(b_A + b_B - 2) 2^off_st. RNE and round-to-odd are monotone, so
where both round m - R and m + R to the same float64 (bit for bit: the sign of a zero too) they
round every value in between, the exact entry included, to it: the result is the correctly
rounded exact value, as if every pair had been computed. The other entries are computed exactly:
one by one as exact dot products when few, else by the skipped pairs' GEMMs. Only exact=False
results round early; exact=True needs every bit.
"""

from __future__ import annotations

import numpy as np

from .exactsum import L, product_terms, round_limbs, split_values, sum_terms

_MARGIN = 24  # bits between the skipped pairs' bound and the leading pair's scale beyond 53 + log2 K
_BLOCK = 1 << 20  # products per block of the per-entry exact dot products


def head_pairs(nA: int, nB: int, ba: int, bb: int, K: int) -> set | None:
    """The slice pairs computed before the first rounding attempt; None when that is all of them."""
    far = 55 + max(K - 1, 0).bit_length() + _MARGIN
    head = {(s, t) for s in range(nA) for t in range(nB) if s * ba + t * bb < far}
    return None if len(head) == nA * nB else head


def tail_bound(tail: list[tuple[int, int]], off, K: int, ba: int, bb: int) -> int:
    """R: an integer bound (in units of 2^base) on |sum over the pairs ``tail`` of A_s B_t 2^off(s, t)|."""
    return sum(K << (ba + bb - 2 + off(s, t)) for s, t in tail)


def _shifted(limbs: np.ndarray, R: int, sign: int) -> np.ndarray:
    """A copy of limbs (nl, n) holding value + sign R in every column (R's 32-bit digits added per limb)."""
    out = limbs.copy()
    j = 0
    while R:
        if j >= out.shape[0]:
            raise AssertionError("internal: limb accumulator too short for the tail bound")
        out[j] += sign * (R & ((1 << L) - 1))
        R >>= L
        j += 1
    return out


def round_bracketed(limbs: np.ndarray, base: np.ndarray, R: int, kern) -> tuple:
    """(RNE, RO, undecided flat indices) of the columns of limbs give or take R (see the module doc).

    ``limbs`` is not modified; the undecided entries' RNE / RO are placeholders.
    """
    rnd = round_limbs if kern is None else kern.round_limbs
    a0, b0 = rnd(_shifted(limbs, R, -1), base)
    a1, b1 = rnd(_shifted(limbs, R, 1), base)
    same = (a0.view(np.uint64) == a1.view(np.uint64)) & (b0.view(np.uint64) == b1.view(np.uint64))
    return a0, b0, np.flatnonzero(~same)


def affordable(undecided: int, K: int, tail: int, M: int, N: int) -> bool:
    """Exact dot products one by one (~80 ns a product) cost less than the tail's GEMMs (~0.03 ns a product)?"""
    return undecided * K * 4096 <= tail * M * N * K


def entries(A: np.ndarray, B: np.ndarray, ii: np.ndarray, jj: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(RNE, RO) of the exact dot products A[i] . B[:, j] (finite float64), in blocks of products."""
    K = A.shape[1]
    rne, ro = np.zeros(ii.size), np.zeros(ii.size)
    step = max(1, _BLOCK // max(K, 1))
    for p in range(0, ii.size, step):
        i, j = ii[p:p + step], jj[p:p + step]
        terms = product_terms(split_values(A[i], strip=True), split_values(B[:, j].T, strip=True))
        rne[p:p + step], ro[p:p + step], _ = sum_terms(terms)
    return rne, ro
