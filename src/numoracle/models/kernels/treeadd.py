"""The additions of simulate's compiled trees on float32 rows (models/kernels/tree.py's steps 4-6), one tile at a time.

Mode _N64 (an FP32 accumulator in RNE over terms that are not FP32 numbers: products of FP32 inputs, made in float64)
and mode _FIG (RNE to a format of p <= 11 bits, every value on float32 words): an addition with a term operand
made in the same loop as the term, checked by a cheap flag per lane (``_cvt32``, ``_fig_lane``), the flagged lanes
redone out of line (``_n32_fix``, ``_fig_fix``: the vector loops stay small); two leaves and their parent
(tree.py's ``_quads``) in one loop (``n32_quad``, ``fig_quad``). A tile is (first row of A, rows, first column,
columns); a term operand is -1 - k (A's column k, B's row k), a row operand a row of the tile's buffer.
"""

from __future__ import annotations

import numpy as np

from ...core import jit
from ...core.kernels import rounding as jr
from .chain import _RNE, _exact_add, _first_nan, _fma, _offset

__all__ = ["n32_add", "n32_quad", "fig_add", "fig_terms", "fig_quad"]


@jit.njit(inline="always")
def _odd32(x, y):
    """fl32(x + y) for exact float64 x, y (step 4): the float64 sum rounded to odd with its TwoSum error, then
    IEEE's conversion to float32 in RNE (gradual underflow, overflow to inf): one correct rounding, 53 >= 24 + 2
    (Boldo & Melquiond 2008). An infinite or NaN sum is converted as it is (x's NaN first)."""
    s = x + y
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    b = jr.as_bits(s)
    odd = (b - ((b ^ jr.as_bits(e)) >> np.uint64(63))) | np.uint64(1)
    s = jr.as_value(odd) if e != 0.0 and abs(s) < np.inf else s
    return _first_nan(x, np.float64(np.float32(s)))


@jit.njit(inline="always")
def _fig_lane(x, y, P):
    """fl(x + y) in RNE on float32 words (mode _FIG, step 5) as (its bits, a flag above P.span where the lane must
    be redone): the float32 sum s, then the rounding on its bits. Rounding twice (to 24 bits, then to p) is the
    correct rounding of the exact sum z unless s is a midpoint of the format's grid other than z: those midpoints
    are FP32 numbers and RN24 is monotone, so s lies with z strictly between the same two midpoints, where
    rounding to p gives one value, or s is a midpoint. That never happens where x and y are values of the
    format (24 >= 2p + 1, Figueroa 1995); a term has up to 2p bits, and a lane whose s is a midpoint and inexact
    (s - x != y or s - y != x: the one of them that subtracts the larger operand is exact) is flagged, as is a
    lane outside the format's normal range. (s's exact midpoints, ties rounded right, are common for products of
    short significands; the inexact ones rare.)"""
    z = x + y                                   # (a NaN is flagged: the redo keeps x's NaN first)
    s = jr.as_bits(z)
    mid = jr.k(s, 0xFFFFFFFF) if jr.and_(s, P.mask) == P.half and (z - x != y or z - y != x) else jr.k(s, 0)
    return jr.round_bits(s, _RNE, P), jr.umax(_offset(s, P), mid)


@jit.njit
def _fig_fix(o, cx, vx, cy, vy, P, P64, lim):
    """o[j] = fl(x + y) by the scalar route where ``_fig_lane`` flags it, x = cx vx[j] and y = cy vy[j] (a term: A's
    entry and B's row; a buffer row: 1 and the row). Out of line: the vector loops stay small."""
    for j in range(o.size):
        x, y = _first_nan(cx, cx * vx[j]), _first_nan(cy, cy * vy[j])
        if _fig_lane(x, y, P)[1] > P.span:
            o[j] = jr.like(x, _exact_add(np.float64(x), np.float64(y), _RNE, P64, lim))


@jit.njit(inline="always")
def _fig_one(x, y, P, P64, lim):
    """fl(x + y) in RNE (mode _FIG) for any lane: ``_fig_lane``, or the scalar route where it flags the lane."""
    r, f = _fig_lane(x, y, P)
    if f > P.span:
        return jr.like(x, _exact_add(np.float64(x), np.float64(y), _RNE, P64, lim))
    return jr.as_value(r)


@jit.njit
def _fig_quad_fix(o, c, e, g, h, b1, b2, b3, b4, P, P64, lim):
    """o[j] = fl(fl(t1 + t2) + fl(t3 + t4)) (t1 = c b1[j], ...) by ``_fig_one``, every lane. Out of line."""
    for j in range(o.size):
        t1, t2 = _first_nan(c, c * b1[j]), _first_nan(e, e * b2[j])
        t3, t4 = _first_nan(g, g * b3[j]), _first_nan(h, h * b4[j])
        o[j] = _fig_one(_fig_one(t1, t2, P, P64, lim), _fig_one(t3, t4, P, P64, lim), P, P64, lim)


@jit.njit
def fig_quad(dr, op, ops, am, bm, tile, P, P64, lim):
    """The three ops op, op + 1, op + 2 of a ``_quads`` group in mode _FIG: dr = fl(l1 + l2), l1 and l2 the leaves
    (``_fig_lane`` of two terms each), all in one loop; a tile with a flagged lane is redone by ``_fig_quad_fix``."""
    jr.wide_vectors()
    i0, ni, j0, nt = tile
    k1, k2, k3, k4 = -1 - ops[op, 2], -1 - ops[op, 3], -1 - ops[op + 1, 2], -1 - ops[op + 1, 3]
    b1, b2, b3, b4 = bm[k1, j0:j0 + nt], bm[k2, j0:j0 + nt], bm[k3, j0:j0 + nt], bm[k4, j0:j0 + nt]
    worst = jr.k(P.lo, 0)
    for ii in range(ni):
        c, e, g, h = am[i0 + ii, k1], am[i0 + ii, k2], am[i0 + ii, k3], am[i0 + ii, k4]
        o = dr[ii * nt:(ii + 1) * nt]
        for j in range(nt):
            r1, f1 = _fig_lane(c * b1[j], e * b2[j], P)
            r2, f2 = _fig_lane(g * b3[j], h * b4[j], P)
            s = jr.as_bits(jr.as_value(r1) + jr.as_value(r2))     # (values of the format: no midpoint test)
            worst = jr.umax(worst, jr.umax(jr.umax(f1, f2), _offset(s, P)))
            o[j] = jr.as_value(jr.round_bits(s, _RNE, P))
    if worst > P.span:
        for ii in range(ni):
            _fig_quad_fix(dr[ii * nt:(ii + 1) * nt], am[i0 + ii, k1], am[i0 + ii, k2], am[i0 + ii, k3],
                          am[i0 + ii, k4], b1, b2, b3, b4, P, P64, lim)


@jit.njit
def fig_add(d, x, y, P, P64, lim):
    """d = fl(x + y) in RNE for x, y values of a format of p <= 11 bits on float32 words (mode _FIG, step 5): the
    float32 sum, then the rounding on its bits (``_fig_lane``, whose midpoint test no lane meets here). Lanes
    outside the format's normal range go to the scalar route."""
    jr.wide_vectors()
    worst = jr.k(P.lo, 0)
    for j in range(d.size):
        b = jr.as_bits(x[j] + y[j])             # (a NaN lane is redone: x's NaN first)
        worst = jr.umax(worst, _offset(b, P))
        d[j] = jr.as_value(jr.round_bits(b, _RNE, P))
    if worst > P.span:
        one = d.dtype.type(1.0)
        _fig_fix(d, one, x, one, y, P, P64, lim)


@jit.njit
def fig_terms(dr, R, a, b, am, bm, tile, P, P64, lim):
    """dr = fl(x + y) in RNE (mode _FIG) where x or y is a term, made here: ``_fig_lane``, its flagged lanes redone
    by ``_fig_fix``."""
    jr.wide_vectors()
    i0, ni, j0, nt = tile
    one = dr.dtype.type(1.0)
    if a < 0 and b < 0:
        ka, kb = -1 - a, -1 - b
        brow, crow = bm[ka, j0:j0 + nt], bm[kb, j0:j0 + nt]
        worst = jr.k(P.lo, 0)
        for ii in range(ni):
            o = dr[ii * nt:(ii + 1) * nt]
            c, e = am[i0 + ii, ka], am[i0 + ii, kb]
            for j in range(nt):
                r, f = _fig_lane(c * brow[j], e * crow[j], P)
                worst = jr.umax(worst, f)
                o[j] = jr.as_value(r)
        if worst > P.span:
            for ii in range(ni):
                _fig_fix(dr[ii * nt:(ii + 1) * nt], am[i0 + ii, ka], brow, am[i0 + ii, kb], crow, P, P64, lim)
        return
    first, k = (True, -1 - a) if a < 0 else (False, -1 - b)     # one row and one term: t + y or x + t
    brow = bm[k, j0:j0 + nt]
    for ii in range(ni):
        row, o = R[b if first else a, ii * nt:(ii + 1) * nt], dr[ii * nt:(ii + 1) * nt]
        c = am[i0 + ii, k]
        worst = jr.k(P.lo, 0)
        if first:
            for j in range(nt):
                r, f = _fig_lane(c * brow[j], row[j], P)
                worst = jr.umax(worst, f)
                o[j] = jr.as_value(r)
        else:
            for j in range(nt):
                r, f = _fig_lane(row[j], c * brow[j], P)
                worst = jr.umax(worst, f)
                o[j] = jr.as_value(r)
        if worst > P.span:
            if first:
                _fig_fix(o, c, brow, one, row, P, P64, lim)
            else:
                _fig_fix(o, one, row, c, brow, P, P64, lim)


@jit.njit(inline="always")
def _cvt32(s):
    """(float32(s), 1 where that conversion may not be the correct rounding): s is the float64 sum of exact operands,
    rounded once to 53 bits; converting it rounds once more, which is the correct rounding of the exact sum unless s
    lies on an FP32 midpoint (its 29 dropped bits 1 then zeros: ties, and the threshold of overflow) or in FP32's
    subnormal range, where ``_odd32`` redoes it (rare: a float64 sum lands on a midpoint about once in 2^29). A NaN
    is flagged too: the redo keeps the first operand's NaN (the vector loops add without ``_first_nan``)."""
    b = jr.as_bits(s)
    mid = (b & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000)
    odd = not abs(s) >= 2.0**-126 and s != 0.0        # (NaN: neither >= nor ==)
    return np.float32(s), np.uint8(1) if mid or odd else np.uint8(0)


@jit.njit
def _n32_fix(o, c, brow, v, e, crow, first):
    """o[j] = fl32(x + y) by ``_odd32`` where ``_cvt32`` flags the lane: x, y the terms c brow[j] and e crow[j] (v
    empty), or a term c brow[j] and the row value v[j] (the term first where ``first``). Out of line: the vector
    loops stay small."""
    for j in range(o.size):
        t = _first_nan(c, c * np.float64(brow[j]))
        if v.size == 0:
            x, y = t, _first_nan(e, e * np.float64(crow[j]))
        else:
            x, y = (t, np.float64(v[j])) if first else (np.float64(v[j]), t)
        if _cvt32(x + y)[1]:
            o[j] = np.float32(_odd32(x, y))


@jit.njit
def n32_add(dr, x, y, a, b, am, bm, tile):
    """dr = fl32(x + y) in mode _N64 (an FP32 accumulator in RNE without ftz; terms exact products in float64 that
    are not all FP32 numbers) on float32 rows (x, y: the operand rows; a row that is a term's is not read): every
    value of the program is an FP32 number, so the rows hold float32 words and two rows add in IEEE binary32. A
    term's addition is the float64 sum converted (``_cvt32``); the lanes it flags are redone by ``_n32_fix``. A and
    B are float32 where the inputs are FP32 numbers (half the memory read), their products made in float64."""
    jr.wide_vectors()
    i0, ni, j0, nt = tile
    if a >= 0 and b >= 0:
        for j in range(ni * nt):
            dr[j] = _first_nan(x[j], x[j] + y[j])
        return
    flag = np.uint8(0)
    if b >= 0 or a >= 0:                        # one row and one term (the first operand's NaN wins)
        row, k, first = (y, -1 - a, True) if b >= 0 else (x, -1 - b, False)
        brow = bm[k, j0:j0 + nt]
        for ii in range(ni):
            c = np.float64(am[i0 + ii, k])
            r, o = row[ii * nt:(ii + 1) * nt], dr[ii * nt:(ii + 1) * nt]
            for j in range(nt):
                o[j], f = _cvt32(c * np.float64(brow[j]) + np.float64(r[j]))
                flag |= f
        if flag:
            for ii in range(ni):
                _n32_fix(dr[ii * nt:(ii + 1) * nt], np.float64(am[i0 + ii, k]), brow, row[ii * nt:(ii + 1) * nt],
                         0.0, brow, first)
        return
    ka, kb = -1 - a, -1 - b
    brow, crow = bm[ka, j0:j0 + nt], bm[kb, j0:j0 + nt]
    for ii in range(ni):
        c, e = np.float64(am[i0 + ii, ka]), np.float64(am[i0 + ii, kb])
        o = dr[ii * nt:(ii + 1) * nt]
        for j in range(nt):
            o[j], f = _leaf32(c, brow[j], e, crow[j])
            flag |= f
    if flag:
        for ii in range(ni):
            _n32_fix(dr[ii * nt:(ii + 1) * nt], np.float64(am[i0 + ii, ka]), brow, dr[:0],
                     np.float64(am[i0 + ii, kb]), crow, True)


@jit.njit(inline="always")
def _leaf32(c, b, e, d):
    """``_cvt32`` of the float64 sum of the exact products c b and e d (an fma: c b exact, one rounding)."""
    return _cvt32(_fma(c, np.float64(b), e * np.float64(d)))


@jit.njit
def _n32_quad_fix(o, c, e, g, h, b1, b2, b3, b4):
    """o[j] = fl32(fl32(t1 + t2) + fl32(t3 + t4)) (t1 = c b1[j], ...) where a leaf's ``_cvt32`` flags the lane, its
    leaves redone by ``_odd32``. Out of line: the vector loop stays small."""
    for j in range(o.size):
        t1, t2 = _first_nan(c, c * np.float64(b1[j])), _first_nan(e, e * np.float64(b2[j]))
        t3, t4 = _first_nan(g, g * np.float64(b3[j])), _first_nan(h, h * np.float64(b4[j]))
        if _cvt32(t1 + t2)[1] or _cvt32(t3 + t4)[1]:
            x, y = np.float32(_odd32(t1, t2)), np.float32(_odd32(t3, t4))
            o[j] = _first_nan(x, x + y)


@jit.njit
def n32_quad(dr, op, ops, am, bm, tile):
    """The three ops op, op + 1, op + 2 of a ``_quads`` group in mode _N64: dr = fl32(l1 + l2), l1 and l2 the leaves
    (fl32 of the sum of two terms each, ``_cvt32``), all in one loop; rows of flagged lanes by ``_n32_quad_fix``."""
    jr.wide_vectors()
    i0, ni, j0, nt = tile
    k1, k2, k3, k4 = -1 - ops[op, 2], -1 - ops[op, 3], -1 - ops[op + 1, 2], -1 - ops[op + 1, 3]
    b1, b2, b3, b4 = bm[k1, j0:j0 + nt], bm[k2, j0:j0 + nt], bm[k3, j0:j0 + nt], bm[k4, j0:j0 + nt]
    flag = np.uint8(0)
    for ii in range(ni):
        c, e = np.float64(am[i0 + ii, k1]), np.float64(am[i0 + ii, k2])
        g, h = np.float64(am[i0 + ii, k3]), np.float64(am[i0 + ii, k4])
        o = dr[ii * nt:(ii + 1) * nt]
        for j in range(nt):
            x, f = _leaf32(c, b1[j], e, b2[j])
            y, f2 = _leaf32(g, b3[j], h, b4[j])
            o[j] = x + y                        # (a NaN leaf is flagged)
            flag |= f | f2
    if flag:
        for ii in range(ni):
            _n32_quad_fix(dr[ii * nt:(ii + 1) * nt], np.float64(am[i0 + ii, k1]), np.float64(am[i0 + ii, k2]),
                          np.float64(am[i0 + ii, k3]), np.float64(am[i0 + ii, k4]), b1, b2, b3, b4)
