"""exact_matmul's engine: the Ozaki split of A and B into integer digit slices whose products are exact.

Each row of A (column of B) is scaled by a power of two and cut into beta-bit digit slices; slice products
are exact integer matrix products accumulated in int64 limbs, so the sum of all of them is the exact product
(Ozaki, Ogita, Oishi & Rump 2012, "Error-free transformations of matrix multiplication")."""

from __future__ import annotations

import numpy as np

from ..core import jit
from . import ozakitail
from .exactsum import limbs_to_fractions, round_limbs

_MAX_SPAN = 1000  # widest per-row bit span that float64 scaling of the Ozaki split handles exactly
_LIMBS = 1 << 24  # int64 limbs held at once by exact_matmul (128 MiB): B's columns go in blocks


# ---- exact_matmul: the Ozaki split ------------------------------------------------------------
def _bit_range(X: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row (axis=1) or column (axis=0) of finite float64 X: (E, span).

    E: the least integer with max|x| < 2^E. span = E - (exponent of the lowest set bit of any
    element); both 0 for an all-zero line. Computed in cache-sized blocks of rows.
    """
    if jit.enabled():
        from . import jitozaki
        return jitozaki.bit_range(X, axis)
    n0, n1 = X.shape
    step = max(1, (1 << 16) // max(n1, 1))
    big = np.int32(1 << 30)
    lo = np.full(n0 if axis == 1 else n1, big, np.int32)
    hi = np.full(lo.shape, -big, np.int32)
    for i in range(0, n0, step):
        f, ex = np.frexp(X[i:i + step])  # x = f * 2^ex, 0.5 <= |f| < 1: |x| < 2^ex
        m = np.ldexp(f, 53).astype(np.int64)  # the significand as an integer (< 2^53): exact
        m &= -m  # its lowest set bit, a power of two 2^z (0 for x = 0)
        # powers of two below 2^53 are exact in float32; frexp gives z + 1, so the lowest set bit
        # of x is 2^(ex - 53 + z) = 2^(ex + c - 54) with c = z + 1
        c = np.frexp(m.astype(np.float32))[1]
        nz = m != 0
        c += ex
        low = np.where(nz, c, big).min(axis=axis, initial=big)
        ex[~nz] = -big
        top = ex.max(axis=axis, initial=-big)
        if axis == 1:
            lo[i:i + step], hi[i:i + step] = low, top
        else:
            np.minimum(lo, low, out=lo)
            np.maximum(hi, top, out=hi)
    empty = lo == big
    E = np.where(empty, 0, hi).astype(np.int64)
    span = np.where(empty, 0, hi.astype(np.int64) - (lo.astype(np.int64) - 54))
    return E, span


def _scan(X: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray] | None:
    """_bit_range of float32 / float64 X as it is, where the compiled kernel finds in the same pass
    that X is all finite; None otherwise (no numba, integers, or a NaN / infinity in X)."""
    if not jit.enabled() or X.dtype not in (np.float32, np.float64):
        return None
    from . import jitozaki
    E, span, finite = jitozaki.bit_range_finite(X, axis)
    return (E, span) if finite else None


def _slices(span: np.ndarray, beta: int) -> np.ndarray:
    """Slices per line: ceil((span + 1) / beta) (0 for all-zero lines); see _digits."""
    return np.where(span > 0, (span + beta) // beta, 0) if span.size else span


def _digits(X: np.ndarray, E: np.ndarray, beta: int, count: int, axis: int,
            S: np.ndarray | None = None) -> list[np.ndarray]:
    """``count`` slices of balanced integer digits of X, line by line (rows: axis=1).

    t = X * 2^(beta - 1 - E) per line, so |t| < 2^(beta - 1). The scaling is exact: t has X's
    significant bits and its lowest bit is 2^(beta - 1 - span) >= 2^-1074 (span <= _MAX_SPAN).
    Each step: d = rint(t) (RNE to an integer, exact; |d| <= 2^(beta - 1)), then
    t = (t - d) * 2^beta. t - d is exact (it consists of t's bits below the unit, or is t
    when d = 0) and |t - d| <= 1/2, so the new |t| <= 2^(beta - 1) and the product is exact.
    After ceil((span + 1) / beta) slices t is 0: every bit has been moved into a digit, and
    X = 2^(E - beta + 1) * sum_s d_s * 2^(-s beta). Works on blocks of rows that fit in cache.
    ``S`` (slices per line, see _slices): a slice that fewer than half of a block's lines need is
    computed on those lines only (the others' t is already 0, so their digits are 0).
    """
    shape = (-1, 1) if axis == 1 else (1, -1)
    k = (beta - 1 - E).reshape(shape)
    out = [np.empty(X.shape) for _ in range(count)]
    scale = float(2 ** beta)
    step = max(1, (1 << 15) // max(X.shape[1], 1))
    for i in range(0, X.shape[0], step):
        t = np.ldexp(X[i:i + step], (k[i:i + step] if axis == 1 else k).astype(np.int32))
        lines = None if S is None else (S[i:i + step] if axis == 1 else S)
        for s, d in enumerate(out):
            few = None if lines is None else np.flatnonzero(lines > s)
            if few is not None and 2 * few.size < lines.size:
                _digit_lines(t, d[i:i + step], few, scale, axis)
                continue
            np.rint(t, out=d[i:i + step])
            t -= d[i:i + step]
            t *= scale
        if t.any():
            raise AssertionError("internal: Ozaki slices did not exhaust the input")
    return out


def _digit_lines(t: np.ndarray, d: np.ndarray, few: np.ndarray, scale: float, axis: int) -> None:
    """One digit step on the lines ``few`` of a block (rows: axis=1, columns: axis=0); the other digits 0."""
    d[...] = 0
    if not few.size:
        return
    sel = (few,) if axis == 1 else (slice(None), few)
    tt = t[sel]
    dd = np.rint(tt)
    d[sel] = dd
    tt -= dd
    tt *= scale
    t[sel] = tt


def _add_shifted(limbs: np.ndarray, g: np.ndarray, off: int, idx: tuple | None) -> None:
    """limbs += g * 2^off, for an int64 array g with |g| <= 2^53 (idx: a sub-block of entries)."""
    q, r = off // 32, off % 32
    p0 = (g & ((1 << (32 - r)) - 1)) << r  # the low 32 - r bits of g, shifted: in [0, 2^32)
    rest = g >> (32 - r)  # floor division: g << r == p0 + rest * 2^32, |rest| < 2^(22 + r)
    for k, p in enumerate((p0, rest & 0xFFFFFFFF, rest >> 32)):
        if idx is None:
            limbs[q + k] += p
        else:
            limbs[q + k][idx] += p


def _gemm_lines(spans: list[tuple[int, int]], beta: int) -> list[int]:
    """Lines that enter each slice's GEMMs at digit width beta: all where at least half have the
    slice, else those (see _split). ``spans``: (span, lines with it) of the distinct spans."""
    size = sum(c for _, c in spans)
    have = [0] * max((-(-(u + 1) // beta) for u, _ in spans if u > 0), default=0)  # see _slices
    for u, c in spans:
        for s in range(-(-(u + 1) // beta) if u > 0 else 0):
            have[s] += c
    return [size if 2 * n >= size else n for n in have]


def _plan(sA: np.ndarray, sB: np.ndarray, K: int, M: int, N: int) -> tuple[int, int, bool]:
    """(b_A, b_B, Karatsuba?): the digit widths with the least GEMM work.

    Plain: b_A + b_B = total with K * 2^(total - 2) <= 2^53 (ties: the balanced split). Karatsuba
    (see _karatsuba): b_A = b_B = total // 2, and every 2 x 2 block of whole slices takes 3 GEMMs
    instead of 4 (counted as 3 1/8: the digit sums and extra limb additions); used when its work
    is less and its middle GEMM needs at most 4 pieces along K. Only the time depends on the plan.
    """
    total = 55 - max(K - 1, 0).bit_length()

    ua, ub = ([(int(u), int(c)) for u, c in zip(*np.unique(x, return_counts=True))] for x in (sA, sB))

    def work(ba: int, bb: int) -> tuple[int, int, int]:
        ra, cb = _gemm_lines(ua, ba), _gemm_lines(ub, bb)
        blocks = (ra.count(M) // 2) * (cb.count(N) // 2)
        return sum(ra) * sum(cb), blocks, len(ra) * len(cb)

    w, _, ba = min((work(ba, total - ba)[0], abs(2 * ba - total), ba) for ba in range(1, total))
    beta = total // 2
    chunks = -(-K // (1 << max(53 - 2 * beta, 0)))  # the middle GEMM's pieces (see _karatsuba)
    if beta >= 1 and 2 * beta <= 53 and chunks <= 4:
        wk, blocks, _ = work(beta, beta)
        if blocks and 8 * wk - 7 * blocks * M * N < 8 * w:
            return beta, beta, True
    return ba, total - ba, False


def _add(limbs: np.ndarray, G: np.ndarray, off: int, rows: np.ndarray, cols: np.ndarray, kern) -> None:
    """limbs[:, rows x cols] += G * 2^off; G a GEMM result of integers, |G| <= 2^53."""
    if kern is not None:
        kern.add_product(limbs, G, off, rows, cols)
        return
    whole = rows.size == limbs.shape[1] and cols.size == limbs.shape[2]
    _add_shifted(limbs, G.astype(np.int64), off, None if whole else np.ix_(rows, cols))


def _karatsuba(limbs: np.ndarray, A: tuple, B: tuple, beta: int, offs: tuple[int, int, int], kern) -> None:
    """limbs += A0 B0 2^o0 + (A0 B1 + A1 B0) 2^o1 + A1 B1 2^o2 with 3 GEMMs (Karatsuba).

    A = (A0, A1, A0 + A1), B likewise. Digits of width b (|d| <= 2^(b - 1)) with K * 2^(2b - 2)
    <= 2^53: A0 B0 and A1 B1 are exact GEMMs (see _ozaki); A0 B1 + A1 B0 = (A0 + A1)(B0 + B1) -
    A0 B0 - A1 B1, where the digit sums are exact integers of magnitude <= 2^b, so their GEMM is
    exact over chunks of Kc columns with Kc * 2^(2b) <= 2^53; every piece is added (or
    subtracted) into the limbs exactly.
    """
    K = A[0].shape[1]
    rows, cols = np.arange(limbs.shape[1]), np.arange(limbs.shape[2])
    for (X, Y), o in (((A[0], B[0]), offs[0]), ((A[1], B[1]), offs[2])):
        G = X @ Y
        if kern is not None:  # both in one pass
            kern.add_product(limbs, G, o, rows, cols, minus=offs[1])
            continue
        _add(limbs, G, o, rows, cols, kern)
        _add(limbs, np.negative(G, out=G), offs[1], rows, cols, kern)
    kc = 1 << (53 - 2 * beta)  # Kc * 2^(2 beta) <= 2^53 (_plan: 2 beta <= 53)
    for k0 in range(0, K, kc):
        _add(limbs, A[2][:, k0:k0 + kc] @ B[2][k0:k0 + kc], offs[1], rows, cols, kern)


def _products(limbs: np.ndarray, Ad: tuple, Bd: tuple, ba: int, bb: int, kern, pairs: set | None = None) -> None:
    """limbs += sum_{s,t} A_s B_t 2^off_st (off_st = (nA - 1 - s) ba + (nB - 1 - t) bb), over ``pairs``
    (None: all of them).

    Ad, Bd from _split: (slices as [(rows or columns they hold, digits)], sums of whole slice
    pairs). Karatsuba on the 2 x 2 blocks of whole slices whose sums are there (ba == bb: A_s
    B_{t+1} and A_{s+1} B_t have the same offset) and whose pairs are all wanted; plain GEMMs for
    the other pairs.
    """
    (sa, suma, _), (sb, sumb, _) = Ad, Bd
    nA, nB = len(sa), len(sb)

    def off(s: int, t: int) -> int:
        return (nA - 1 - s) * ba + (nB - 1 - t) * bb

    done = set()
    for p, Ap in enumerate(suma):
        for q, Bq in enumerate(sumb):
            s, t = 2 * p, 2 * q
            block = {(s, t), (s, t + 1), (s + 1, t), (s + 1, t + 1)}
            if pairs is not None and not block <= pairs:
                continue
            _karatsuba(limbs, (sa[s][1], sa[s + 1][1], Ap), (sb[t][1], sb[t + 1][1], Bq), ba,
                       (off(s, t), off(s, t + 1), off(s + 1, t + 1)), kern)
            done |= block
    for t, (cols, Bt) in enumerate(sb):
        for s, (rows, As) in enumerate(sa):
            if (s, t) not in done and (pairs is None or (s, t) in pairs):
                # exact: integer entries, every partial sum <= K * 2^(ba-1) * 2^(bb-1) <= 2^53
                _add(limbs, As @ Bt if kern is None else kern.product(As, Bt), off(s, t), rows, cols, kern)


def _round_block(limbs: np.ndarray, base: np.ndarray, head: set | None, Ad: tuple, Bd: tuple, ba: int, bb: int,
                 A: np.ndarray, Bj: np.ndarray, kern) -> tuple[np.ndarray, np.ndarray]:
    """(RNE, RO) of a block's entries, raveled. ``head``: the pairs in limbs so far (None: all);
    entries whose rounding the rest cannot change are rounded now (ozakitail.py), the others
    exactly: one by one when few, else after the remaining pairs' GEMMs."""
    nl, M, Nb = limbs.shape
    rnd = round_limbs if kern is None else kern.round_limbs
    if head is None:
        return rnd(limbs.reshape(nl, M * Nb), base)
    nA, nB = len(Ad[0]), len(Bd[0])

    def off(s: int, t: int) -> int:
        return (nA - 1 - s) * ba + (nB - 1 - t) * bb

    tail = [(s, t) for s in range(nA) for t in range(nB) if (s, t) not in head]
    K = A.shape[1]
    R = ozakitail.tail_bound(tail, ba, bb, Ad[2], Bd[2]).ravel()
    a, b, und = ozakitail.round_bracketed(limbs.reshape(nl, M * Nb), base, R, kern)
    if und.size and ozakitail.affordable(und.size, K, len(tail), M, Nb):
        a[und], b[und] = ozakitail.entries(A, Bj, und // Nb, und % Nb)
    elif und.size:
        _products(limbs, Ad, Bd, ba, bb, kern, set(tail))
        return rnd(limbs.reshape(nl, M * Nb), base)
    return a, b


def _split(X: np.ndarray, E: np.ndarray, beta: int, S: np.ndarray, axis: int, kara: bool, kern) -> tuple:
    """The digit slices of X for the GEMMs: ([(lines, digits)], [sums of whole slice pairs], per slice
    and line sum |d| (rows, axis=1) or max |d| (columns)).

    Slices beyond a line's count are 0; where fewer than half the lines have a slice, only those
    lines enter its GEMMs (less work), otherwise the whole slice does (no gathers). With ``kara``
    the whole slices (a prefix) are paired (0, 1), (2, 3), ... and each pair's sum comes along.
    """
    count = int(S.max(initial=0))
    whole = [2 * int((S > s).sum()) >= S.size for s in range(count)]
    pairs = sum(whole) // 2 if kara else 0
    if kern is not None:  # the planes are reused by the next call for the same operand (this thread)
        slices, stats = kern.digits(X, E, beta, count, axis, S, pairs, "AB"[1 - axis])
        sums = slices[count:]
    else:
        slices = _digits(X, E, beta, count, axis, S)
        sums = [slices[2 * p] + slices[2 * p + 1] for p in range(pairs)]
        f = np.sum if axis == 1 else np.max  # digits are integers: the sums are exact (<= 2^53)
        stats = np.array([f(np.abs(d), axis=axis) for d in slices]).reshape(count, S.size)
    out = []
    for s in range(count):
        lines = np.flatnonzero(S > s)
        if whole[s]:
            out.append((np.arange(S.size), slices[s]))
        else:
            out.append((lines, slices[s][lines] if axis == 1 else slices[s][:, lines]))
    return out, sums, stats


def _ozaki(A: np.ndarray, B: np.ndarray, EA, sA, EB, sB, exact: bool) -> tuple:
    """Exact A @ B (finite float64, spans <= _MAX_SPAN): (RNE, RO, Fractions or None), raveled."""
    M, K = A.shape
    N = B.shape[1]
    kern = None
    if jit.enabled():
        from . import jitozaki as kern
    ba, bb, kara = _plan(sA, sB, K, M, N)
    SA, SB = _slices(sA, ba), _slices(sB, bb)
    nA = int(SA.max(initial=0))
    Ad = _split(A, EA, ba, SA, 1, kara, kern)
    rne, ro = np.zeros((M, N)), np.zeros((M, N))
    fr = np.empty((M, N), object) if exact else None
    nl_max = (max(nA - 1, 0) * ba + (int(SB.max(initial=1)) - 1) * bb + 54 + 64) // 32 + 4
    step = max(1, _LIMBS // (nl_max * max(M, 1)))  # columns of B per block: limbs stay within _LIMBS
    for j0 in range(0, N, step):
        j1 = min(N, j0 + step)
        nB = int(SB[j0:j1].max(initial=0))
        # entry (i, j) = 2^base_ij * sum_{s,t} G_st[i, j] * 2^off_st with off_st >= 0 (see _digits)
        base = ((EA - ba + 1 - (nA - 1) * ba)[:, None] + (EB[j0:j1] - bb + 1 - (nB - 1) * bb)[None, :]).ravel()
        maxoff = max(nA - 1, 0) * ba + max(nB - 1, 0) * bb
        nl = (maxoff + 54 + (nA * nB).bit_length() + 32) // 32 + 2  # |entry| < nA nB 2^53 2^maxoff
        limbs = np.zeros((nl, M, j1 - j0), np.int64)
        Bd = _split(B[:, j0:j1], EB[j0:j1], bb, SB[j0:j1], 0, kara, kern)
        lines = ([r.size for r, _ in Ad[0]], [c.size for c, _ in Bd[0]])
        head = None if exact else ozakitail.head_pairs(nA, nB, ba, bb, K, *lines)
        _products(limbs, Ad, Bd, ba, bb, kern, head)
        if exact:
            fr[:, j0:j1] = limbs_to_fractions(limbs.reshape(nl, M * (j1 - j0)), base).reshape(M, j1 - j0)
        a, b = _round_block(limbs, base, head, Ad, Bd, ba, bb, A, B[:, j0:j1], kern)
        rne[:, j0:j1], ro[:, j0:j1] = a.reshape(M, j1 - j0), b.reshape(M, j1 - j0)
    return rne.ravel(), ro.ravel(), None if fr is None else fr.ravel()


def _float_lines(v: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values, per-line flag: exact in float64), zeroing the lines that are not.

    float32 values stay float32 for the compiled kernels (they widen each value as they read it:
    no float64 copy), and are widened here (exactly) for the numpy path.
    """
    if v.dtype == np.float32:
        return (v if jit.enabled() else v.astype(np.float64)), np.ones(v.shape[1 - axis], bool)
    if v.dtype == np.float64:
        return v, np.ones(v.shape[1 - axis], bool)
    ok = ((v >= -(1 << 53)) & (v <= 1 << 53)).all(axis=axis)  # integers of <= 2^53: exact in float64
    ok2 = ok[:, None] if axis == 1 else ok[None, :]
    return np.where(ok2, v, 0).astype(np.float64), ok
