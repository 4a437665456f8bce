"""exact_matmul's engine: the Ozaki split of A and B into integer digit slices whose products are exact.

Each row of A (column of B) is scaled by a power of two and cut into beta-bit digit slices; slice products
are exact integer matrix products accumulated in int64 limbs, so the sum of all of them is the exact product
(Ozaki, Ogita, Oishi & Rump 2012, "Error-free transformations of matrix multiplication")."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from ..core import jit
from . import ozakitail
from .exactsum import limbs_to_fractions, round_limbs

MAX_SPAN = 1000  # widest per-row bit span that float64 scaling of the Ozaki split handles exactly
_LIMBS = 1 << 24  # int64 limbs held at once by exact_matmul (128 MiB): B's columns go in blocks
_CHUNK_BYTES = 1 << 23  # digit planes of one K-chunk of both operands (see _chunk): they stay in cache
_MIN_CHUNK = 512  # shorter chunks cost more (GEMM efficiency, accumulator adds) than the cache saves
def _kernels():
    from .kernels import ozaki
    return ozaki

logger = logging.getLogger("numoracle.exact")


@dataclass(frozen=True)
class Pass:
    """A pass of the exact reductions that the compiled kernels (exact/kernels/ozaki.py) may run: "all_finite",
    "bit_range", "bit_range_finite", or "split" (the Ozaki split's digits, slice products, limb additions
    and rounding, which exact_matmul runs as one); on an array of ``dtype``, C-contiguous or not."""

    name: str
    dtype: np.dtype
    contiguous: bool = True


def compiled(name: str, X: np.ndarray) -> Any:
    """The one decision for the pass ``name`` on X (``jit.kernel_for``): the kernel module (for "split") or
    its runner of the pass (``run(X, ...)``) when it runs here, else None (the numpy path). Logged at DEBUG."""
    step = Pass(name, X.dtype, bool(X.flags.c_contiguous))
    kern = jit.kernel_for(step, _kernels)
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("exact: %s %s", name, "numba" if kern is not None else "numpy")
    if kern is None or name == "split":
        return kern
    return partial(kern.run, step)


# ---- exact_matmul: the Ozaki split ------------------------------------------------------------
def line_bit_range(X: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row (axis=1) or column (axis=0) of finite float64 X: (E, span).

    E: the least integer with max|x| < 2^E. span = E - (exponent of the lowest set bit of any
    element); both 0 for an all-zero line. Computed in cache-sized blocks of rows.
    """
    run = compiled("bit_range", X)
    if run is not None:
        return run(X, axis)
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


def scan_finite(X: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray] | None:
    """line_bit_range of float32 / float64 X as it is, where the compiled kernel finds in the same pass
    that X is all finite; None otherwise (no numba, integers, or a NaN / infinity in X)."""
    run = compiled("bit_range_finite", X)
    if run is None:
        return None
    E, span, finite = run(X, axis)
    return (E, span) if finite else None


def slice_counts(span: np.ndarray, beta: int) -> np.ndarray:
    """Slices per line: ceil((span + 1) / beta) (0 for all-zero lines); see _digits."""
    return np.where(span > 0, (span + beta) // beta, 0) if span.size else span


def _digits(X: np.ndarray, E: np.ndarray, beta: int, count: int, axis: int,
            S: np.ndarray | None = None) -> list[np.ndarray]:
    """``count`` slices of balanced integer digits of X, line by line (rows: axis=1).

    t = X * 2^(beta - 1 - E) per line, so |t| < 2^(beta - 1). The scaling is exact: t has X's
    significant bits and its lowest bit is 2^(beta - 1 - span) >= 2^-1074 (span <= MAX_SPAN).
    Each step: d = rint(t) (RNE to an integer, exact; |d| <= 2^(beta - 1)), then
    t = (t - d) * 2^beta. t - d is exact (it consists of t's bits below the unit, or is t
    when d = 0) and |t - d| <= 1/2, so the new |t| <= 2^(beta - 1) and the product is exact.
    After ceil((span + 1) / beta) slices t is 0: every bit has been moved into a digit, and
    X = 2^(E - beta + 1) * sum_s d_s * 2^(-s beta). Works on blocks of rows that fit in cache.
    ``S`` (slices per line, see slice_counts): a slice that fewer than half of a block's lines need is
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


def add_shifted(limbs: np.ndarray, g: np.ndarray, off: int, idx: tuple | None) -> None:
    """limbs += g * 2^off, for an int64 array g with |g| <= 2^53 (idx: a sub-block of entries)."""
    q, r = off // 32, off % 32
    p0 = (g & ((1 << (32 - r)) - 1)) << r  # the low 32 - r bits of g, shifted: in [0, 2^32)
    rest = g >> (32 - r)  # floor division: g << r == p0 + rest * 2^32, |rest| < 2^(22 + r)
    for k, p in enumerate((p0, rest & 0xFFFFFFFF, rest >> 32)):
        if idx is None:
            limbs[q + k] += p
        else:
            limbs[q + k][idx] += p


def _gemm_lines(spans: np.ndarray, betas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each digit width in ``betas``: (lines entering all slices' GEMMs, slices that enter whole).

    A slice enters whole where at least half the lines have it, else on those lines only (see
    _split); line i has ceil((span_i + 1) / beta) slices (see slice_counts). One histogram of slice
    counts per width, summed from the top, gives the lines having each slice.
    """
    size, nb = spans.size, betas.size
    if not size:
        return np.zeros(nb, np.int64), np.zeros(nb, np.int64)
    u, c = np.unique(spans, return_counts=True)  # the distinct spans, and lines with each
    n = np.where(u > 0, (u + betas[:, None]) // betas[:, None], 0)  # slices per distinct span and width
    top = int(n.max()) + 1
    cells = (np.arange(nb)[:, None] * top + n).ravel()
    hist = np.bincount(cells, np.broadcast_to(c, n.shape).ravel(), nb * top).astype(np.int64).reshape(nb, top)
    have = np.cumsum(hist[:, ::-1], axis=1)[:, ::-1][:, 1:]  # have[w, s]: lines with more than s slices
    lines = np.where(2 * have >= size, size, have)
    lines[have == 0] = 0
    return lines.sum(axis=1), (lines == size).sum(axis=1)


def _plan(sA: np.ndarray, sB: np.ndarray, K: int, M: int, N: int) -> tuple[int, int, bool]:
    """(b_A, b_B, Karatsuba?): the digit widths with the least GEMM work.

    Plain: b_A + b_B = total with K * 2^(total - 2) <= 2^53 (ties: the balanced split). Karatsuba
    (see _products): b_A = b_B = total // 2, and every 2 x 2 block of whole slices takes 3 GEMMs
    instead of 4 (counted as 3 1/8: the digit sums and extra limb additions); used when its work
    is less and its middle GEMM needs at most 4 pieces along K. Only the time depends on the plan.
    """
    total = 55 - max(K - 1, 0).bit_length()
    widths = np.arange(1, total)
    ra, wa = (x.tolist() for x in _gemm_lines(sA.astype(np.int64), widths))  # A at width b, B at total - b
    cb, wb = (x.tolist() for x in _gemm_lines(sB.astype(np.int64), total - widths))
    w, _, ba = min((ra[i] * cb[i], abs(2 * b - total), b) for i, b in enumerate(range(1, total)))
    beta = total // 2
    chunks = -(-K // (1 << max(53 - 2 * beta, 0)))  # the middle GEMM's pieces (see _products)
    if beta >= 1 and 2 * beta <= 53 and chunks <= 4:
        j = total - beta - 1  # B at width beta
        blocks, wk = (wa[beta - 1] // 2) * (wb[j] // 2), ra[beta - 1] * cb[j]
        if blocks and 8 * wk - 7 * blocks * M * N < 8 * w:
            return beta, beta, True
    return ba, total - ba, False


def _add(limbs: np.ndarray, G: np.ndarray, off: int, rows: np.ndarray, cols: np.ndarray, kern,
         minus: int | None = None) -> None:
    """limbs[:, rows x cols] += G * 2^off (and -= G * 2^minus); G a GEMM result of integers, |G| <= 2^53."""
    if kern is not None:
        kern.add_product(limbs, G, off, rows, cols, minus=minus)
        return
    whole = rows.size == limbs.shape[1] and cols.size == limbs.shape[2]
    g = G.astype(np.int64)
    add_shifted(limbs, g, off, None if whole else np.ix_(rows, cols))
    if minus is not None:
        add_shifted(limbs, np.negative(g, out=g), minus, None if whole else np.ix_(rows, cols))


class _Side(NamedTuple):
    """One operand's split, the same for every K-chunk: A (rows, axis=1) or a block of B's columns
    (axis=0), the line scales E, slices per line S at digit width ``beta``, each slice's lines in
    its GEMMs (all of them where at least half the lines have it, else those: see _split), and
    the Karatsuba pairs of whole slices (0, 1), (2, 3), ... taken (0 without Karatsuba)."""

    X: np.ndarray
    E: np.ndarray
    S: np.ndarray
    beta: int
    axis: int
    lines: list[np.ndarray]
    pairs: int
    slot: str


def _side(X: np.ndarray, E: np.ndarray, S: np.ndarray, beta: int, axis: int, kara: bool) -> _Side:
    count = int(S.max(initial=0))
    whole = [2 * int((S > s).sum()) >= S.size for s in range(count)]  # a prefix of the slices
    lines = [np.arange(S.size) if whole[s] else np.flatnonzero(S > s) for s in range(count)]
    return _Side(X, E, S, beta, axis, lines, sum(whole) // 2 if kara else 0, "AB"[1 - axis])


def _split(side: _Side, k0: int, k1: int, kern, keep: list[bool] | None = None) -> tuple:
    """The digit slices of the side's columns (A) or rows (B) k0:k1: ([digits of each slice on its
    lines], [sums of the Karatsuba pairs' slices], per slice and line sum |d| (rows of A) or
    max |d| (columns of B)). Slices beyond a line's count are 0 there (see _digits). ``keep`` (a flag
    per slice, then per sum; None: all): the compiled kernels store only those, the others are None."""
    X, E, S, beta, axis = side.X, side.E, side.S, side.beta, side.axis
    count = len(side.lines)
    if kern is not None:  # the planes are reused by the next call for the same operand (this thread)
        slices, stats = kern.digits(X, E, beta, count, axis, S, side.pairs, side.slot, k0, k1, keep)
        sums = slices[count:]
    else:
        slices = _digits(X[:, k0:k1] if axis == 1 else X[k0:k1], E, beta, count, axis, S)
        sums = [slices[2 * p] + slices[2 * p + 1] for p in range(side.pairs)]
        f = np.sum if axis == 1 else np.max  # digits are integers: the sums are exact (<= 2^53)
        stats = np.array([f(np.abs(d), axis=axis) for d in slices]).reshape(count, S.size)
    out = []
    for s, lines in enumerate(side.lines):
        whole = lines.size == S.size
        d = slices[s]
        out.append(d if d is None or whole else d[lines] if axis == 1 else d[:, lines])
    return out, sums, stats


def _chunk(a: _Side, b: _Side, K: int, middle: int, gemms: int) -> int:
    """Columns of A (rows of B) per K-chunk: a power of two whose digit planes of both sides take
    about _CHUNK_BYTES (they stay in cache between the digit pass and the GEMMs that read them),
    at least _MIN_CHUNK and dividing ``middle`` (the Karatsuba middle product's exact span).

    K goes in one chunk where chunks do not pay (_chunks_pay)."""
    M, N = a.S.size, b.S.size
    planes = (len(a.lines) + a.pairs) * M + (len(b.lines) + b.pairs) * N
    kc = 1 << max(_MIN_CHUNK.bit_length() - 1, (_CHUNK_BYTES // (8 * max(planes, 1))).bit_length() - 1)
    if not _chunks_pay(gemms, M * N, planes, kc):
        return max(K, 1)
    return max(1, min(kc, middle, K))


def _chunks_pay(gemms: int, entries: int, planes: int, kc: int) -> bool:
    """Chunks of kc columns cost the sums of the ``gemms`` products' results (about 3 passes over
    their ``entries`` a chunk) and save the traffic of ``planes`` digits per column (2 passes): for
    large M and N the sums cost more. Only the time depends on it."""
    return 3 * gemms * entries < 2 * planes * kc


def _use_chunks(acc: int, nl: int, entries: int) -> bool:
    """K may go in chunks (see _chunk) where the ``acc`` accumulators per entry and its ``nl`` limbs
    fit in _LIMBS, or the accumulators take no more memory than the limbs; else K goes in one
    chunk (large, wide-spread products: the GEMMs' work dominates)."""
    return (nl + acc) * entries <= _LIMBS or acc <= nl


def _gemms(a: _Side, b: _Side, pairs: set | None) -> tuple[list, list]:
    """The products that compute the slice pairs ``pairs`` (None: all): Karatsuba blocks (p, q) of
    whole slices (2p, 2p + 1) x (2q, 2q + 1) all of whose pairs are wanted, and plain pairs (s, t)."""
    blocks, done = [], set()
    for p in range(a.pairs):
        for q in range(b.pairs):
            s, t = 2 * p, 2 * q
            block = {(s, t), (s, t + 1), (s + 1, t), (s + 1, t + 1)}
            if pairs is None or block <= pairs:
                blocks.append((p, q))
                done |= block
    plain = [(s, t) for t in range(len(b.lines)) for s in range(len(a.lines))
             if (s, t) not in done and (pairs is None or (s, t) in pairs)]
    return blocks, plain


def _planes_used(blocks: list, plain: list, side: _Side, k: int) -> list[bool]:
    """Per slice, then per Karatsuba sum of one side (k = 0: A, 1: B): is it an operand of the products
    ``blocks`` / ``plain`` (see _gemms)? Only those are stored (the early rounding's first pass uses some)."""
    slices = {x for bq in blocks for x in (2 * bq[k], 2 * bq[k] + 1)} | {pair[k] for pair in plain}
    sums = {bq[k] for bq in blocks}
    return [s in slices for s in range(len(side.lines))] + [p in sums for p in range(side.pairs)]


def _products(limbs: np.ndarray, a: _Side, b: _Side, kern, pairs: set | None, kc: int) -> tuple:
    """limbs += sum_{s,t} A_s B_t 2^off_st (off_st = (nA - 1 - s) ba + (nB - 1 - t) bb), over ``pairs``
    (None: all of them); returns the digits' (sum |d| per slice and row of A, max |d| per slice and
    column of B) over all of K. ``kc``: columns of A per K-chunk (see _chunk; K: one chunk).

    Karatsuba on the 2 x 2 blocks of whole slices whose sums are there (ba == bb: A_s B_{t+1} and
    A_{s+1} B_t have the same offset) and whose pairs are all wanted: A0 B0 2^o0 + (A0 B1 + A1 B0)
    2^o1 + A1 B1 2^o2 with A0 B1 + A1 B0 = (A0 + A1)(B0 + B1) - A0 B0 - A1 B1. Plain GEMMs for the
    other pairs. K goes in chunks (_chunk); each chunk's digits are computed and multiplied at once,
    and the products summed over chunks in float64, exactly: every slice product's partial sums
    are integers of magnitude <= K 2^(ba - 1) 2^(bb - 1) <= 2^53 (see _plan), and the middle
    product's, whose digit sums are <= 2^b, over ``middle`` columns with middle 2^(2b) <= 2^53,
    goes in pieces of at most ``middle`` columns, added to the limbs at least that often.
    """
    nA, nB, ba, bb = len(a.lines), len(b.lines), a.beta, b.beta
    K = a.X.shape[1]

    def off(s: int, t: int) -> int:
        return (nA - 1 - s) * ba + (nB - 1 - t) * bb

    blocks, plain = _gemms(a, b, pairs)
    middle = 1 << (53 - 2 * ba) if blocks else K  # _plan: 2 ba <= 53 with Karatsuba
    keep_a, keep_b = _planes_used(blocks, plain, a, 0), _planes_used(blocks, plain, b, 1)
    G: dict = {}

    def acc(key: tuple, g: np.ndarray, last: bool, o: int, rows: np.ndarray, cols: np.ndarray,
            minus: int | None = None) -> None:
        """Sum the chunk's product g into the accumulator ``key``; with ``last``, add the total
        into the limbs (times 2^o, and minus it times 2^minus) and start again from 0."""
        if key in G:
            G[key] += g
            if not last:
                return
            g = G.pop(key)
        elif not last:
            G[key] = g
            return
        _add(limbs, g, o, rows, cols, kern, minus)

    stats_a, stats_b = np.zeros((nA, a.S.size)), np.zeros((nB, b.S.size))
    for k0 in range(0, K, kc):
        k1 = min(K, k0 + kc)
        (sa, suma, st_a), (sb, sumb, st_b) = _split(a, k0, k1, kern, keep_a), _split(b, k0, k1, kern, keep_b)
        stats_a += st_a
        np.maximum(stats_b, st_b, out=stats_b)
        last = k1 == K
        for p, q in blocks:
            s, t = 2 * p, 2 * q
            rows, cols, o1 = a.lines[s], b.lines[t], off(s, t + 1)
            acc((p, q, 0), sa[s] @ sb[t], last, off(s, t), rows, cols, o1)
            acc((p, q, 2), sa[s + 1] @ sb[t + 1], last, off(s + 1, t + 1), rows, cols, o1)
            for j0 in range(k0, k1, middle):  # one piece where the chunk is shorter than middle
                j1 = min(k1, j0 + middle)
                acc((p, q, 1), suma[p][:, j0 - k0:j1 - k0] @ sumb[q][j0 - k0:j1 - k0], j1 == K or j1 % middle == 0,
                    o1, rows, cols)
        for s, t in plain:
            X, Y = sa[s], sb[t]
            acc((s, t), X @ Y if kern is None else kern.product(X, Y), last, off(s, t), a.lines[s], b.lines[t])
    return stats_a, stats_b


def _round_block(limbs: np.ndarray, base: np.ndarray, head: set | None, a: _Side, b: _Side, stats: tuple,
                 kern, kc: int) -> tuple[np.ndarray, np.ndarray]:
    """(RNE, RO) of a block's entries, raveled. ``head``: the pairs in limbs so far (None: all);
    entries whose rounding the rest cannot change are rounded now (ozakitail.py), the others
    exactly: one by one when few, else after the remaining pairs' GEMMs."""
    nl, M, Nb = limbs.shape
    rnd = round_limbs if kern is None else kern.round_limbs
    if head is None:
        return rnd(limbs.reshape(nl, M * Nb), base)
    nA, nB = len(a.lines), len(b.lines)
    tail = [(s, t) for s in range(nA) for t in range(nB) if (s, t) not in head]
    K = a.X.shape[1]
    R = ozakitail.tail_bound(tail, a.beta, b.beta, *stats).ravel()
    rr, cc, und = ozakitail.round_bracketed(limbs.reshape(nl, M * Nb), base, R, kern)
    if und.size and ozakitail.affordable(und.size, K, len(tail), M, Nb, ozakitail.compiled_entries(a.X, b.X, kern)):
        rr[und], cc[und] = ozakitail.entries(a.X, b.X, und // Nb, und % Nb, kern)
    elif und.size:
        _products(limbs, a, b, kern, set(tail), kc)
        return rnd(limbs.reshape(nl, M * Nb), base)
    return rr, cc


def planned_gemms(sA: np.ndarray, sB: np.ndarray, K: int, M: int, N: int, exact: bool) -> float:
    """The split's GEMM work for ``ozaki_product`` (before any remaining pairs), in full M x K x N GEMMs:
    the Karatsuba blocks' three products and the plain pairs of its first pass, on the lines they take."""
    if not (M and N):
        return 0.0
    ba, bb, kara = _plan(sA, sB, K, M, N)
    none = np.empty((0, 0))
    a = _side(none, sA, slice_counts(sA, ba), ba, 1, kara)
    b = _side(none, sB, slice_counts(sB, bb), bb, 0, kara)
    nA, nB = len(a.lines), len(b.lines)
    rows, cols = [x.size for x in a.lines], [x.size for x in b.lines]
    head = None if exact else ozakitail.head_pairs(nA, nB, ba, bb, K, rows, cols)
    blocks, plain = _gemms(a, b, head)
    work = sum(3 * rows[2 * p] * cols[2 * q] for p, q in blocks) + sum(rows[s] * cols[t] for s, t in plain)
    return work / (M * N)


def ozaki_product(A: np.ndarray, B: np.ndarray, EA, sA, EB, sB, exact: bool) -> tuple:
    """Exact A @ B (finite float64, spans <= MAX_SPAN): (RNE, RO, Fractions or None), raveled."""
    M, K = A.shape
    N = B.shape[1]
    kern = compiled("split", A)
    ba, bb, kara = _plan(sA, sB, K, M, N)
    SA, SB = slice_counts(sA, ba), slice_counts(sB, bb)
    a, b_all = _side(A, EA, SA, ba, 1, kara), _side(B, EB, SB, bb, 0, kara)
    nA, nB_max = len(a.lines), len(b_all.lines)
    rne, ro = np.zeros((M, N)), np.zeros((M, N))
    fr = np.empty((M, N), object) if exact else None
    nl_max = (max(nA - 1, 0) * ba + max(nB_max - 1, 0) * bb + 54 + 64) // 32 + 4
    acc = nA * nB_max  # a chunked pass's accumulators: one per slice pair at most (_products)
    kc = max(K, 1)
    if _use_chunks(acc, nl_max, M * N):  # the chunk size, from the products of the first pass
        lines = ([x.size for x in s.lines] for s in (a, b_all))
        blocks, plain = _gemms(a, b_all, None if exact else ozakitail.head_pairs(nA, nB_max, ba, bb, K, *lines))
        kc = _chunk(a, b_all, K, 1 << (53 - 2 * ba) if kara else K, 3 * len(blocks) + len(plain))
    step = max(1, _LIMBS // ((nl_max + (acc if kc < K else 0)) * max(M, 1)))  # limbs within _LIMBS
    for j0 in range(0, N, step):
        j1 = min(N, j0 + step)
        b = _side(B[:, j0:j1], EB[j0:j1], SB[j0:j1], bb, 0, kara)
        nB = len(b.lines)
        # entry (i, j) = 2^base_ij * sum_{s,t} G_st[i, j] * 2^off_st with off_st >= 0 (see _digits)
        base = ((EA - ba + 1 - (nA - 1) * ba)[:, None] + (EB[j0:j1] - bb + 1 - (nB - 1) * bb)[None, :]).ravel()
        maxoff = max(nA - 1, 0) * ba + max(nB - 1, 0) * bb
        nl = (maxoff + 54 + (nA * nB).bit_length() + 32) // 32 + 2  # |entry| < nA nB 2^53 2^maxoff
        limbs = np.zeros((nl, M, j1 - j0), np.int64)
        head = None if exact else ozakitail.head_pairs(nA, nB, ba, bb, K, *([x.size for x in s.lines] for s in (a, b)))
        stats = _products(limbs, a, b, kern, head, kc)
        if exact:
            fr[:, j0:j1] = limbs_to_fractions(limbs.reshape(nl, M * (j1 - j0)), base).reshape(M, j1 - j0)
        r, c = _round_block(limbs, base, head, a, b, stats, kern, kc)
        rne[:, j0:j1], ro[:, j0:j1] = r.reshape(M, j1 - j0), c.reshape(M, j1 - j0)
    return rne.ravel(), ro.ravel(), None if fr is None else fr.ravel()


def float_lines(v: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values, per-line flag: exact in float64), zeroing the lines that are not.

    float32 values stay float32 for the compiled kernels (they widen each value as they read it:
    no float64 copy), and are widened here (exactly) for the numpy path.
    """
    if v.dtype == np.float32:
        keep = compiled("split", v) is not None   # the kernels read float32 as it is
        return (v if keep else v.astype(np.float64)), np.ones(v.shape[1 - axis], bool)
    if v.dtype == np.float64:
        return v, np.ones(v.shape[1 - axis], bool)
    ok = ((v >= -(1 << 53)) & (v <= 1 << 53)).all(axis=axis)  # integers of <= 2^53: exact in float64
    ok2 = ok[:, None] if axis == 1 else ok[None, :]
    return np.where(ok2, v, 0).astype(np.float64), ok
