"""Compiled twins of the Ozaki split's passes around the GEMMs (see ozaki.py).

Imported lazily when ``core.jit.kernel_for`` picks it for an ``ozaki.Pass`` (core/jit.py's contract:
``covers``, ``run``, ``calls``; once the "split" pass is taken its passes are called by name, counted too).
Each kernel computes what its numpy twin in ozaki.py / exactsum.py does, in one pass over the data:
:func:`all_finite` (``np.isfinite(v).all()`` of float bits, one reduction); :func:`bit_range`
(``line_bit_range``: per line (E, span) from the float64 or float32 bit fields); :func:`digits` (``_digits``:
all digit slices of a block in one pass, with the sums of slice pairs that Karatsuba multiplies, in planes
reused call after call); :func:`product` (a slice product over the nonzeros of a sparse slice);
:func:`exact_dots32` (``ozakitail.entries`` for float32 operands: exact dot products one by one, in long
accumulators); :func:`widen_stats` (plaingemm's float64 copy of an operand and its chunks' sums and maxima);
and from jitlimbs.py, the int64 limbs' passes: ``add_product`` (``add_shifted`` of one
product into the limbs) and ``round_limbs`` (carries, RNE, RO).

float32 operands are read as they are and widened value by value (exact), not copied to float64.
All of it is integer arithmetic or exact float64 steps (power-of-two scalings, ``rint`` of values
below 2^53), so the results are the same bits as numpy's; tests/exact/test_jitozaki.py runs both.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros, trailing_zeros  # LLVM's ctlz / cttz

from ...core.jit import Calls, njit
from ...core.kernels import rounding as jr
from . import limbs as jitlimbs
from .held import held

calls = Calls()  # passes the kernels have run (the tests read calls.count)
# the limbs' passes (jitlimbs.py), counted here with the others
add_product = calls.counting(jitlimbs.add_product)
round_limbs = calls.counting(jitlimbs.round_limbs)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_BIG = 1 << 30
_CACHE_BYTES = 1 << 29  # digit planes kept for reuse, per thread and operand


def covers(step: Any) -> bool:
    """Does a pass (ozaki.Pass) run here? Every pass on float32 / float64 arrays; all_finite on contiguous ones."""
    return step.dtype in _FLOATS and (step.contiguous or step.name != "all_finite")


def run(step: Any, *args: Any) -> Any:
    """The pass ``step.name`` on its arguments (those of the function of that name below)."""
    return {"all_finite": all_finite, "bit_range": bit_range, "bit_range_finite": bit_range_finite}[step.name](*args)


@njit
def _largest_pattern(bits: np.ndarray) -> int:
    """The largest |bit pattern| of a flat array of float bits (a max reduction that vectorises)."""
    absmask = (np.int64(1) << (8 * bits.itemsize - 1)) - 1
    top = np.int64(0)
    for i in range(bits.size):
        top = max(top, np.int64(bits[i]) & absmask)
    return top


@calls.counting
def all_finite(v: np.ndarray) -> bool:
    """``np.isfinite(v).all()`` for float64 / float32 v in one pass without a mask: every |bit
    pattern| below the infinity's (NaN patterns lie above it)."""
    ibits, inf = (np.int32, 0x7F800000) if v.dtype == np.float32 else (np.int64, 0x7FF0000000000000)
    return bool(_largest_pattern(np.ascontiguousarray(v).view(ibits).ravel()) < inf)


@njit
def _low(b, man, fmask, one, off, big):  # numba: the word type is the arguments'
    """Exponent of the lowest set bit of the finite float with |bit pattern| b; ``big`` for a zero. Every
    argument is of b's word type (int32 for float32: twice the vector lanes of int64): ``man`` fraction bits,
    ``fmask`` = 2^man - 1, ``one`` = 1, ``off`` = bias + man. Branch-free (selects), so line loops vectorise.

    Normal x = (2^man + f) 2^(be - bias - man); subnormal x = f 2^(1 - bias - man) (be = 0): the
    lowest set bit of the integer significand, at 2^(max(be, 1) - bias - man). The bit 2^(man + 1)
    stops the count for a zero, which is then replaced."""
    be = b >> man
    hidden = fmask + one  # 2^man
    full = (b & fmask) | (hidden if be != 0 else b - b) | (hidden << one)
    low = trailing_zeros(full) + max(be, one) - off
    return low if b != 0 else big


@njit
def _top(b: np.int64, man: int, bias: int) -> int:
    """The least ex with |x| < 2^ex, for the finite nonzero float with |bit pattern| b."""
    be = b >> man
    if be == 0:  # subnormal: the significand's bit length, from 2^(1 - bias - man)
        return 64 - np.int64(leading_zeros(np.uint64(b))) + 1 - bias - man
    return be + 1 - bias


def _words(word: type, man: int, bias: int) -> tuple:
    """_bit_range_kernel's constants in the word type of a float's bits (see _low): man, fmask, one, off,
    big and the magnitude's mask."""
    return word(man), word((1 << man) - 1), word(1), word(bias + man), word(_BIG), word(np.iinfo(word).max)


@njit
def _row_ranges(bits: np.ndarray, words: tuple, hi: np.ndarray, lo: np.ndarray) -> None:
    """Per row of bits: the largest |bit pattern| into hi, the lowest set bit's exponent into lo. In 512-bit
    vectors (measured on 256 x 4096 float32: 0.36 against 0.69 ms at 256 bits)."""
    jr.wide_vectors()
    man, fmask, one, off, big, absmask = words
    for i in range(bits.shape[0]):
        rhi, rlo = one - one, big
        for j in range(bits.shape[1]):
            b = bits[i, j] & absmask
            rhi = max(rhi, b)
            rlo = min(rlo, _low(b, man, fmask, one, off, big))
        hi[i], lo[i] = rhi, rlo


@njit
def _column_ranges(bits: np.ndarray, words: tuple, hi: np.ndarray, lo: np.ndarray) -> None:
    """``_row_ranges`` per column, row after row. In LLVM's default 256-bit vectors (measured on 4096 x 256
    float32: 0.55 against 0.6-0.75 ms at 512 bits)."""
    man, fmask, one, off, big, absmask = words
    for i in range(bits.shape[0]):
        for j in range(bits.shape[1]):
            b = bits[i, j] & absmask
            hi[j] = max(hi[j], b)
            lo[j] = min(lo[j], _low(b, man, fmask, one, off, big))


@njit
def _bit_range_kernel(bits: np.ndarray, by_rows: bool, words: tuple) -> tuple:
    """Per line: the largest |bit pattern| (its float is the line's largest |x|: patterns of
    non-negative floats order as their values) and the lowest set bit's exponent; also the largest
    |bit pattern| of all (at or above the infinity's where X holds a NaN or an infinity). The loops
    work in the bits' own word type (``words``: see _words)."""
    man, big, off = words[0], words[4], words[3]
    nl = bits.shape[0] if by_rows else bits.shape[1]
    lo = np.full(nl, big, bits.dtype)
    hi = np.zeros(nl, bits.dtype)
    if by_rows:
        _row_ranges(bits, words, hi, lo)
    else:
        _column_ranges(bits, words, hi, lo)
    E = np.zeros(nl, np.int64)
    span = np.zeros(nl, np.int64)
    for k in range(nl):
        if hi[k] != 0:
            E[k] = _top(np.int64(hi[k]), np.int64(man), np.int64(off) - np.int64(man))
            span[k] = E[k] - np.int64(lo[k])
    top = np.int64(0)
    for k in range(nl):
        top = max(top, np.int64(hi[k]))
    return E, span, top


_WORDS32, _WORDS64 = _words(np.int32, 23, 127), _words(np.int64, 52, 1023)
# exact_dots32: a product of two finite float32 values is M 2^E with M < 2^53 an integer and E >= -298 - 52; its
# magnitude is below 2^256, a sum of K < 2^31 of them below 2^287: 32-bit limbs from 2^_DOT_BASE, the top ones 0
_DOT_BASE = -352
_DOT_LIMBS = 22


@calls.counting
def bit_range(X: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """``ozaki.line_bit_range``: per row (axis=1) or column (axis=0) of finite float64 or float32 X, (E, span)
    (float32 read from its own bit fields: the same values as of the float64 widening)."""
    return bit_range_finite.__wrapped__(X, axis)[:2]


@calls.counting
def bit_range_finite(X: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """(E, span, X all finite) of float64 or float32 X in one pass; (E, span) hold only where it is."""
    if X.dtype == np.float32:
        E, span, top = _bit_range_kernel(np.ascontiguousarray(X).view(np.int32), axis == 1, _WORDS32)
        return E, span, bool(top < 0x7F800000)
    E, span, top = _bit_range_kernel(np.ascontiguousarray(X).view(np.int64), axis == 1, _WORDS64)
    return E, span, bool(top < 0x7FF0000000000000)


@njit
def _dots32(A: np.ndarray, Bt: np.ndarray, ii: np.ndarray, jj: np.ndarray, limbs: np.ndarray) -> None:
    """limbs[p] += A[ii[p]] . Bt[jj[p]] exactly, for finite float32 A and Bt (B's columns as rows), in 32-bit limbs
    from 2^_DOT_BASE.

    1. a product of two float32 values is exact in float64: 48 significant bits, and its exponent lies within
       float64's normal range (2^-298 <= |a b| < 2^256), so the product is M 2^E with M = its significand with the
       hidden bit (< 2^53) and E = its exponent field - 1075;
    2. +-M goes in at E - _DOT_BASE >= 2 in three limbs (jitlimbs.pieces, as ``ozaki.add_shifted`` adds): K < 2^31
       such additions stay within int64 (``ozakitail.compiled_entries`` holds K there) and the carries are left to
       the rounding."""
    for p in range(ii.size):
        a, b, acc = A[ii[p]], Bt[jj[p]], limbs[p]
        for k in range(a.size):
            v = np.float64(a[k]) * np.float64(b[k])
            if v == 0.0:
                continue
            bits = np.int64(jr.as_bits(v))
            m = (bits & ((np.int64(1) << 52) - 1)) | (np.int64(1) << 52)
            g = -m if bits < 0 else m
            o = ((bits >> 52) & 0x7FF) - 1075 - _DOT_BASE
            q = o >> 5
            p0, p1, p2 = jitlimbs.pieces(g, o & 31)
            acc[q] += p0
            acc[q + 1] += p1
            acc[q + 2] += p2


@calls.counting
def exact_dots32(A: np.ndarray, B: np.ndarray, ii: np.ndarray, jj: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(RNE, RO) of the exact dot products A[ii[p]] . B[:, jj[p]] of finite float32 A and B (``ozakitail.entries``'
    numpy route gives the same values): long accumulators (_dots32) over the rows and columns taken, copied
    contiguous, rounded by jitlimbs.round_limbs."""
    ui, iinv = np.unique(ii, return_inverse=True)
    uj, jinv = np.unique(jj, return_inverse=True)
    limbs = np.zeros((ii.size, _DOT_LIMBS), np.int64)
    _dots32(np.ascontiguousarray(A[ui]), np.ascontiguousarray(B[:, uj].T), iinv.astype(np.int64),
            jinv.astype(np.int64), limbs)
    return jitlimbs.round_limbs(np.ascontiguousarray(limbs.T), np.full(ii.size, _DOT_BASE, np.int64))


@njit
def _two_digits(x: float, scale: float) -> tuple:
    """Two digit steps of ``_digits_kernel`` on one value: (d0, d1, what is left of x)."""
    v0 = np.rint(x)
    x = (x - v0) * scale
    v1 = np.rint(x)
    return v0, v1, (x - v1) * scale


@njit(inline="always")  # (inlined: a call per line costs 5-10% on the 256-value rows of B)
def _pair_pass(x: np.ndarray, s1: np.ndarray, s2: np.ndarray, d0: np.ndarray, d1: np.ndarray, c: np.ndarray,
               scale: float, stat: np.ndarray, i: int, by_rows: bool) -> int:
    """Slices 0 and 1 of one line of X and their sum (Karatsuba's operand), in one pass over x, read as it is:
    t = x s1 s2 and the same steps as two passes of ``_digits_kernel``'s slice loop and its pair sum, the same
    values. Returns how many values have something left after the two digits (the line's t is not kept)."""
    jr.wide_vectors()
    rest = np.int64(0)
    if by_rows:  # a row of A, scaled by s1[i] s2[i]: sum |d| per slice
        acc0, acc1 = np.int64(0), np.int64(0)
        a, b = s1[i], s2[i]
        for j in range(x.size):
            v0, v1, r = _two_digits(x[j] * a * b, scale)
            d0[j], d1[j], c[j] = v0, v1, v0 + v1
            acc0 += np.int64(abs(v0))
            acc1 += np.int64(abs(v1))
            rest += np.int64(r != 0.0)  # a count, not an OR: integer sums vectorise
        stat[0, i] += acc0
        stat[1, i] += acc1
    else:  # a row of B, column j scaled by s1[j] s2[j]: max |d| per slice and column
        top0, top1 = stat[0], stat[1]
        for j in range(x.size):
            v0, v1, r = _two_digits(x[j] * s1[j] * s2[j], scale)
            d0[j], d1[j], c[j] = v0, v1, v0 + v1
            top0[j] = max(top0[j], abs(v0))
            top1[j] = max(top1[j], abs(v1))
            rest += np.int64(r != 0.0)
    return rest


@njit(inline="always")
def _row(buf: np.ndarray, off: np.ndarray, at: np.ndarray, s: int, i: int, n1: int) -> np.ndarray:
    """Row i of plane s (see _digits_kernel)."""
    return buf[off[s] + i * at[s]:off[s] + i * at[s] + n1]


@njit
def _digits_kernel(X: np.ndarray, k0: int, k1: int, k: np.ndarray, beta: int, S: np.ndarray, whole: int,
                   pairs: int, by_rows: bool, buf: np.ndarray, off: np.ndarray, at: np.ndarray,
                   stat: np.ndarray) -> bool:
    """The digits of X's columns (rows of A: by_rows) or rows (columns of B) k0:k1, each line
    scaled by 2^k, into the planes (slices, then pair sums) in ``buf``; see ``digits``. Row i of plane s starts
    at off[s] + i at[s]: at[s] = 0 for a plane not kept (one row, written over line after line). One flat
    buffer, not a tuple of planes: a tuple's length is part of its type, so each count of planes compiled anew."""
    jr.wide_vectors()
    n0 = X.shape[0] if by_rows else k1 - k0
    n1 = k1 - k0 if by_rows else X.shape[1]
    scale = 2.0 ** beta
    # t = x * 2^k as two exact multiplications by normal powers of two (the intermediate's
    # magnitude and lowest bit lie between x's and t's, so it is exact too)
    s1 = np.empty(k.size)
    s2 = np.empty(k.size)
    for m in range(k.size):
        s1[m] = math.ldexp(1.0, k[m] // 2)
        s2[m] = math.ldexp(1.0, k[m] - k[m] // 2)
    # a line's slices past its own S are 0 (t is 0 by then); they are written only where the
    # slice is used whole (the first ``whole`` slices): the others are read on their own lines only
    count = off.size - pairs
    deep = np.flatnonzero(S > whole)  # the lines (columns of B) with slices past the whole ones
    t = np.empty(n1)
    left = False
    for i in range(n0):
        x = X[i, k0:k1] if by_rows else X[k0 + i]  # a view: the loops below index from 0, so they vectorise
        n = max(S[i], whole) if by_rows else whole
        paired = n == 2 and pairs >= 1
        if paired:  # the common case (FP32 data): both slices and their sum in one pass over x
            rest = _pair_pass(x, s1, s2, _row(buf, off, at, 0, i, n1), _row(buf, off, at, 1, i, n1),
                              _row(buf, off, at, count, i, n1), scale, stat, i, by_rows)
            if not by_rows:  # the deep columns go on from their t after two digits (computed again here)
                for j in deep:
                    t[j] = _two_digits(x[j] * s1[j] * s2[j], scale)[2]
                    rest -= np.int64(t[j] != 0.0)  # theirs is checked after their own slices, below
            left |= rest != 0
            n = 0
        elif by_rows:
            for j in range(n1):
                t[j] = x[j] * s1[i] * s2[i]
        else:
            for j in range(n1):
                t[j] = x[j] * s1[j] * s2[j]
        for s in range(n):  # one slice of the row at a time
            d = _row(buf, off, at, s, i, n1)  # this row's digits
            if by_rows:  # rows of A: sum |d| (integers, <= K 2^(beta - 1) <= 2^53: exact)
                acc = np.int64(0)
                for j in range(n1):
                    v = np.rint(t[j])
                    d[j] = v
                    t[j] = (t[j] - v) * scale
                    acc += np.int64(abs(v))  # an integer sum: the loop vectorises
                stat[s, i] += acc
            else:  # columns of B: max |d|
                top = stat[s]
                for j in range(n1):
                    v = np.rint(t[j])
                    d[j] = v
                    t[j] = (t[j] - v) * scale
                    top[j] = max(top[j], abs(v))
            if s % 2 == 1 and s // 2 < pairs:  # a pair's second slice: the pair's sum (exact integers)
                c, e = _row(buf, off, at, count + s // 2, i, n1), _row(buf, off, at, s - 1, i, n1)
                for j in range(n1):
                    c[j] = e[j] + d[j]
        if not by_rows:
            for j in deep:
                for s in range(whole, S[j]):
                    v = np.rint(t[j])
                    buf[off[s] + i * at[s] + j] = v
                    t[j] = (t[j] - v) * scale
                    stat[s, j] = max(stat[s, j], abs(v))
        if not paired:
            for j in range(n1):
                left |= t[j] != 0.0
        elif not by_rows:
            for j in deep:
                left |= t[j] != 0.0
    return left


@calls.counting
def digits(X: np.ndarray, E: np.ndarray, beta: int, count: int, axis: int, S: np.ndarray, pairs: int = 0,
           slot: str | None = None, k0: int = 0, k1: int | None = None,
           keep: list[bool] | None = None) -> tuple[list[np.ndarray | None], np.ndarray]:
    """``ozaki._digits``: ``count`` slices of balanced integer digits of X (rows: axis=1), of its
    columns (axis=1) or rows (axis=0) k0:k1 (all of them: k1 None), read in place.

    ``S`` the slices per line; slice s is complete where at least half the lines have it, else
    only on those lines (the others hold garbage: ``ozaki.ozaki_product`` reads just those lines).
    ``pairs`` > 0 (whole slices 0 .. 2 pairs - 1): after the slices, the sums of slices 2p and
    2p + 1 for p < pairs (Karatsuba's operands; see ``ozaki._products``). ``slot``: the planes
    are this thread's held ones for that name (held.py), valid until the next call for it.
    Also returns per slice and line (count, lines) sum |d| (rows, axis=1) or max |d| (columns),
    for ``ozakitail``'s bound. ``keep`` (one flag per plane: slices, then sums; None: all): the planes not
    kept are computed (a later slice needs them) but not stored, and come back as None; their statistics
    are there.
    """
    k1 = X.shape[axis] if k1 is None else k1  # K: columns of A (axis=1), rows of B
    shape = (X.shape[0], k1 - k0) if axis == 1 else (k1 - k0, X.shape[1])
    if count + pairs == 0:  # all-zero (or empty) lines: no slices
        return [], np.zeros((0, S.size))
    k = (beta - 1 - E).astype(np.int64)
    whole = sum(2 * int((S > s).sum()) >= S.size for s in range(count))  # a prefix of the slices
    keep = [True] * (count + pairs) if keep is None else list(keep)
    size = shape[0] * shape[1]
    lengths = [size if k else shape[1] for k in keep]  # a plane not kept: one row
    off = np.cumsum([0] + lengths[:-1]).astype(np.int64)
    buf = held(slot, np.float64, sum(lengths), _CACHE_BYTES)  # this thread's, for ``slot`` (held.py)
    at = np.array([shape[1] if k else 0 for k in keep], np.int64)
    stat = np.zeros((count, S.size))
    left = _digits_kernel(np.ascontiguousarray(X), k0, k1, k, beta, S.astype(np.int64), whole, pairs, axis == 1,
                          buf, off, at, stat)
    if left:
        raise AssertionError("internal: Ozaki slices did not exhaust the input")
    return [buf[o:o + size].reshape(shape) if k else None for o, k in zip(off, keep)], stat


@njit
def _sparse_left(X: np.ndarray, Y: np.ndarray, G: np.ndarray) -> None:
    """G += X @ Y over X's nonzeros (X few rows: row by row, Y's rows streamed). A few columns of Y
    go through the transposes (G^T += Y^T X^T, views: the same memory order as a loop of its own)."""
    for i in range(X.shape[0]):
        for k in range(X.shape[1]):
            a = X[i, k]
            if a != 0.0:
                for j in range(Y.shape[1]):
                    G[i, j] += a * Y[k, j]


@calls.counting
def product(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """X @ Y for digit slices whose GEMM is exact (``ozaki._products``): the same integers.

    A slice kept on a few lines (a row's or column's last digits) is mostly zeros: its product
    (at most a quarter of the other operand's size) goes over the nonzeros only when they are
    under 1/16 of it (the BLAS GEMM reads the other, whole operand for a handful of lines). Every
    product and partial sum is an integer of magnitude <= K 2^(b_A - 1) 2^(b_B - 1) <= 2^53 in
    any order, so G is the BLAS GEMM's, bit for bit (a zero's sign aside, which the int64 limbs
    drop).
    """
    left = X.shape[0] <= Y.shape[1]
    few, other = (X, Y) if left else (Y, X)
    if 4 * few.size > other.size or 16 * np.count_nonzero(few) > few.size:  # counting: << the GEMM
        return X @ Y
    G = np.zeros((X.shape[0], Y.shape[1]))
    if left:
        _sparse_left(np.ascontiguousarray(X), np.ascontiguousarray(Y), G)
    else:
        _sparse_left(np.ascontiguousarray(Y).T, np.ascontiguousarray(X).T, G.T)
    return G


@njit
def _widen_rows(X: np.ndarray, kc: int, out: np.ndarray, s: np.ndarray, m: np.ndarray, write: bool) -> None:
    """out = X in float64 (where ``write``), s / m = sums / maxima of |X| over each row's chunks of kc columns."""
    M, K = X.shape
    for i in range(M):
        for c0 in range(0, K, kc):
            acc, top = 0.0, 0.0
            for k in range(c0, min(K, c0 + kc)):
                v = np.float64(X[i, k])
                if write:
                    out[i, k] = v
                a = abs(v)
                acc += a
                top = max(top, a)
            s[i, c0 // kc], m[i, c0 // kc] = acc, top


@njit
def _widen_cols(X: np.ndarray, kc: int, out: np.ndarray, s: np.ndarray, m: np.ndarray, write: bool) -> None:
    """out = X in float64 (where ``write``), s / m = sums / maxima of |X| over each column's chunks of kc rows."""
    K, N = X.shape
    for k in range(K):
        c = k // kc
        sc, mc = s[c], m[c]
        for j in range(N):
            v = np.float64(X[k, j])
            if write:
                out[k, j] = v
            a = abs(v)
            sc[j] += a
            mc[j] = max(mc[j], a)


@calls.counting
def widen_stats(X: np.ndarray, kc: int, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """plaingemm.widen_stats in one pass over X (C-contiguous float32 / float64): (X as float64 (X itself when
    float64), sums of |x| over chunks of kc along ``axis`` per line, maxima); the sums in another order (the
    bounds that read them hold for any)."""
    n0, n1 = X.shape
    K = n1 if axis == 1 else n0
    nc = -(-K // kc)
    write = X.dtype != np.float64
    out = np.empty(X.shape if write else (0, 0))
    if axis == 1:
        s, m = np.empty((n0, nc)), np.empty((n0, nc))
        _widen_rows(X, kc, out, s, m, write)
    else:
        s, m = np.zeros((nc, n1)), np.zeros((nc, n1))
        _widen_cols(X, kc, out, s, m, write)
    return (out if write else X), s, m
