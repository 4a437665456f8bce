"""Compiled passes over exact_matmul's int64 limbs (see ozaki.py and exactsum.py): adding a slice product into
them, and rounding them to float64 (RNE and round to odd). Part of jitozaki's kernel: it counts and exports
these passes (``jitozaki.add_product``, ``jitozaki.round_limbs``), which compute what their numpy twins
(``ozaki.add_shifted``, ``exactsum.round_limbs``) do, in integer arithmetic and exact float64 scalings: the same
bits (tests/exact/test_jitozaki.py runs both).
"""

from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros  # LLVM's ctlz

from ...core.jit import njit
from ...core.kernels import rounding as jr

_ROUND_BLOCK = 256  # columns rounded together (see _round_kernel)
_POW2 = np.ldexp(1.0, np.arange(-1074, 1024))  # 2^e for e = -1074 .. 1023: exact (subnormals too)
_GRID = jr.int_grid(2)  # a column's kept bits with its guard and sticky bits below: rounded at bit 2


@njit(inline="always")
def pieces(g: int, r: int) -> tuple:
    """g 2^r (int64 g, |g| <= 2^53, 0 <= r < 32) as three limb increments (p0, p1, p2) with g 2^r = p0 + p1 2^32 +
    p2 2^64: p0 = the low 32 - r bits of g shifted up (in [0, 2^32)), then the rest (g >> (32 - r), floor
    division, |rest| < 2^(22 + r)) as its low 32 bits and its signed top. ``ozaki.add_shifted``'s split."""
    rest = g >> (32 - r)
    return (g & ((np.int64(1) << (32 - r)) - 1)) << r, rest & 0xFFFFFFFF, rest >> 32


@njit
def _add_kernel(limbs: np.ndarray, G: np.ndarray, off: int, rows: np.ndarray, cols: np.ndarray) -> None:
    q, r = off // 32, off % 32
    for a in range(G.shape[0]):
        i = rows[a]
        for b in range(G.shape[1]):
            j = cols[b]
            p0, p1, p2 = pieces(np.int64(G[a, b]), r)
            limbs[q, i, j] += p0
            limbs[q + 1, i, j] += p1
            limbs[q + 2, i, j] += p2


@njit
def _add_row(lq: np.ndarray, lq1: np.ndarray, lq2: np.ndarray, g: np.ndarray, r: int, sign: int) -> None:
    """One row of ``_add_kernel`` on whole rows: the limbs' rows q, q + 1, q + 2 += pieces of sign * g << r."""
    for b in range(g.size):
        p0, p1, p2 = pieces(np.int64(g[b]) * sign, r)
        lq[b] += p0
        lq1[b] += p1
        lq2[b] += p2


@njit
def _add_whole(limbs: np.ndarray, G: np.ndarray, off: int, off2: int, two: bool) -> None:
    """limbs += G 2^off (and - G 2^off2 where ``two``) over every entry: rows indexed from 0, so the
    loops vectorise. The same integers land in the same limbs as ``_add_kernel`` adds."""
    q, r = off // 32, off % 32
    q2, r2 = off2 // 32, off2 % 32
    for a in range(G.shape[0]):
        _add_row(limbs[q, a], limbs[q + 1, a], limbs[q + 2, a], G[a], r, 1)
        if two:
            _add_row(limbs[q2, a], limbs[q2 + 1, a], limbs[q2 + 2, a], G[a], r2, -1)


def add_product(limbs: np.ndarray, G: np.ndarray, off: int, rows: np.ndarray, cols: np.ndarray,
                minus: int | None = None) -> None:
    """limbs[:, rows x cols] += G * 2^off (``ozaki.add_shifted``); G float64 integers, |G| <= 2^53.
    ``minus`` (whole blocks only): also limbs -= G * 2^minus, in the same pass."""
    G = np.ascontiguousarray(G)
    if rows.size == limbs.shape[1] and cols.size == limbs.shape[2]:  # every line: rows, cols = 0, 1, ...
        _add_whole(limbs, G, off, off if minus is None else minus, minus is not None)
        return
    _add_kernel(limbs, G, off, rows.astype(np.int64), cols.astype(np.int64))


@njit(inline="always")
def _pow2(e: int) -> float:
    """2^e for e >= -1074 (inf above 1023). m 2^e for an integer m <= 2^53 whose value is a multiple
    of 2^-1074 (the rounding's cut keeps e >= -1074) is then exact or overflows to inf, as ldexp's
    result (and m > 0 wherever e > 1023: the window holds the leading bit there). The table's index
    stays in range either way (a vectorised select reads both sides)."""
    return _POW2[min(e, 1023) + 1074] if e <= 1023 else np.inf


@njit
def _block_digits(limbs: np.ndarray, c0: int, m: int, add: np.ndarray, at: np.ndarray, W: np.ndarray,
                  carry: np.ndarray, sgn: np.ndarray, h: np.ndarray, lo: np.ndarray) -> None:
    """Columns c0 .. c0 + m of the limbs into W (W[2 + j] = limb j, as digits of |value| in [0, 2^32)),
    their signs into sgn, and their highest and lowest nonzero limbs (rows of W; h = -1: value 0)."""
    nl = limbs.shape[0]
    mask = np.int64(0xFFFFFFFF)
    # 1. the limbs, with the pieces added on the fly (the early rounding's m +- R)
    for j in range(nl):
        W[2 + j, :m] = limbs[j, c0:c0 + m]
    for k in range(add.shape[0]):
        for c in range(m):
            W[2 + at[c0 + c] + k, c] += add[k, c0 + c]
    # 2. carries: digits in [0, 2^32) below the top limb, which keeps the sign
    carry[:m] = 0
    for j in range(2, nl + 1):
        for c in range(m):
            v = W[j, c] + carry[c]
            carry[c] = v >> 32
            W[j, c] = v & mask
    for c in range(m):
        W[nl + 1, c] += carry[c]
        sgn[c] = np.int64(1) - 2 * np.int64(W[nl + 1, c] < 0)
        carry[c] = 0
    # 3. |value|: negating every digit (sign -1) and propagating again gives digits in
    # [0, 2^32) and a top >= 0; with sign 1 the digits are unchanged (no carries)
    for j in range(2, nl + 1):
        for c in range(m):
            v = carry[c] + sgn[c] * W[j, c]
            carry[c] = v >> 32
            W[j, c] = v & mask
    for c in range(m):
        W[nl + 1, c] = carry[c] + sgn[c] * W[nl + 1, c]
        h[c] = -1
        lo[c] = nl + 2
    # 4. the highest and the lowest nonzero limb
    for j in range(2, nl + 2):
        for c in range(m):
            h[c] = j if W[j, c] != 0 else h[c]
    for j in range(nl + 1, 1, -1):
        for c in range(m):
            lo[c] = j if W[j, c] != 0 else lo[c]


@njit
def _round_columns(W: np.ndarray, m: int, h: np.ndarray, lo: np.ndarray, sgn: np.ndarray, base: np.ndarray,
                   g, rne: np.ndarray, ro: np.ndarray) -> bool:
    """(RNE, RO) into rne / ro of each column c < m of a block, |value| = sum_j W[j, c] 2^(32 j + base[c] - 64)
    with h and lo its highest and lowest nonzero limbs (h = -1: the value 0, which gives +0), its sign sgn;
    returns whether some column's limbs were too short. Positions count from 64 bits below limb 0 (W[0],
    W[1] = 0). Branch-free over the columns (gathers of each column's limbs), so the loop vectorises."""
    jr.wide_vectors()
    n = W.shape[0]
    short = np.int64(0)
    for c in range(m):
        hc = max(h[c], np.int64(2))  # a zero column reads zero limbs: its results are replaced by +0 below
        top = W[hc, c]
        blen = 64 - np.int64(leading_zeros(np.uint64(top)))  # bit length (top > 0)
        b64 = base[c] - 64
        # 5. bits below cut are rounded off: 53 significant bits, or fewer at the quantum 2^-1074
        cut = max(32 * hc + blen - 53, -1074 - b64)
        c1 = cut - 1  # the window: bits [c1, c1 + 54), kept bits and the guard bit; c1 >= 10
        j0 = c1 >> 5
        sh = c1 & 31
        # limbs j0 + 1, j0 + 2 lie inside the window where nonzero (its top is the leading bit or
        # above), so their shifted values are below 2^54 and no shift drops a set bit; a window above
        # every limb (at the quantum 2^-1074) reads the zero limbs above: win = 0
        l0 = W[min(j0, n - 1), c]
        win = (l0 >> sh) | (W[min(j0 + 1, n - 1), c] << (32 - sh)) | (W[min(j0 + 2, n - 1), c] << min(64 - sh, 63))
        sticky = np.int64((l0 & ((np.int64(1) << sh) - 1)) != 0) | np.int64(lo[c] < j0)
        # 6. round the kept bits, the guard bit and the sticky bit at bit 2 (g: core/jitround.int_grid(2)), by
        # the kernels' one rounding step: RNE (ties to even) and RO (a dropped bit ORed into the last kept bit)
        w = (win << 1) | sticky
        p2 = _pow2(b64 + cut)  # b64 + cut >= -1074 (cut's second term)
        a = np.float64(jr.round_bits(w, jr.RNE, g) >> 2) * p2  # overflow gives inf: RNE's rule
        b = np.float64(jr.round_bits(w, jr.ODD, g) >> 2) * p2
        b = 1.7976931348623157e308 if b == np.inf else b  # RO overflows to the largest finite value
        zero, neg = h[c] < 0, sgn[c] < 0
        rne[c] = 0.0 if zero else -a if neg else a
        ro[c] = 0.0 if zero else -b if neg else b
        short |= np.int64(top >= np.int64(1) << 32)
    return short != 0


@njit
def _round_kernel(limbs: np.ndarray, base: np.ndarray, add: np.ndarray, at: np.ndarray, g) -> tuple:
    """Per column: carries, |value|, leading bit, the 54-bit window and sticky bit, both roundings.

    Columns go in blocks of _ROUND_BLOCK: the carry, sign and leading-limb steps run limb by limb
    over a block's columns (loops that vectorise), then the window and the rounding (_round_columns). A
    block's limbs are copied between two zero limbs below and three above: positions count from
    64 bits below limb 0, so the window's lowest bit is at or above 0 and its limbs exist."""
    nl, R = limbs.shape
    cb = _ROUND_BLOCK
    rne = np.zeros(R)
    ro = np.zeros(R)
    W = np.zeros((nl + 5, cb), np.int64)  # rows 0, 1, nl + 2 .. stay 0
    carry, sgn, h, lo = np.zeros(cb, np.int64), np.zeros(cb, np.int64), np.zeros(cb, np.int64), np.zeros(cb, np.int64)
    bad = False
    for c0 in range(0, R, cb):
        m = min(cb, R - c0)
        _block_digits(limbs, c0, m, add, at, W, carry, sgn, h, lo)
        bad |= _round_columns(W, m, h, lo, sgn, base[c0:c0 + m], g, rne[c0:c0 + m], ro[c0:c0 + m])
    return rne, ro, bad


def round_limbs(limbs: np.ndarray, base: np.ndarray, add: np.ndarray | None = None,
                at: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``exactsum.round_limbs``: (RNE, RO) of ``sum_j limbs[j] * 2^(32 j + base)`` per column.

    ``limbs`` is left unchanged (the numpy twin normalises it in place). ``add`` (n, R) int64 and
    ``at`` (R,): round as if add[k, c] had been added to limbs[at[c] + k, c] (they must fit)."""
    if add is None:
        add, at = np.zeros((0, limbs.shape[1]), np.int64), np.zeros(limbs.shape[1], np.int64)
    rne, ro, bad = _round_kernel(np.ascontiguousarray(limbs), base.astype(np.int64),
                                 np.ascontiguousarray(add, np.int64), at.astype(np.int64), _GRID)
    if bad:
        raise AssertionError("internal: limb accumulator too short")
    return rne, ro
