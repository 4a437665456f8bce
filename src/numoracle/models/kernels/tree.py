"""simulate's trees compiled (numba): a whole program of additions, one tile of outputs at a time, bit-identical.

Trees (Pairwise, TreeOrder, the trees of GpuReduce, the CPU orders' lanes and cascades, Blocked trees) compile to
waves of ``Add`` steps, with ``Const``, ``Load`` and ``Chain`` steps between them (models/engine/steps.py). The numpy
path
runs each wave across every output, its values in slots of a buffer as wide as the widest wave (2048 slots for a
pairwise sum of 4096 terms): each wave streams that buffer through memory. Here the program is one ``TreeRun``
step, and ``run`` computes its result per tile of outputs in one call, every value held in a few rows of a buffer
that stays in L1:

1. the tape (``_tape``, once per program): every addition of every step becomes one node (a Chain of L additions,
   L nodes); the nodes are put in depth-first order from the result (any order that reads a value after it is
   made gives the same bits: each node is one rounding of its operands), and each node gets a buffer row freed
   after its last reader, so that a pairwise tree of K terms needs about log2(K) rows. A node's row is never
   one of its operands' rows (a node whose vector step flags lanes reads its operands again);
2. per tile of outputs (row i of A, up to ``_TILE`` columns j; or up to ``_TILE`` lanes of a batch of sums): the
   tape's nodes in order, each over the tile: a term operand t_k = A[i, k] B[k, j] (exact: the products
   simulate accepts are exact in float64, and in float32 on the float32 words below), rounded to the
   accumulator first where the step says so (fma=False), then the addition;
3. the addition is models/kernels/chain.py's: IEEE binary32 addition for an FP32 accumulator in RNE whose operands
   are FP32 numbers (``Arith.native``: one rounding of the exact sum, as the numpy path's fl64 then fl32 is,
   Figueroa 1995), else its steps 1-4 (TwoSum, round to odd, the rounding on the bits) on float32 words for the
   formats of at most 22 bits inside FP32's normal range whose terms are FP32 numbers, float64 words for the
   rest; a lane outside the format's normal range is redone by the scalar route (jitchain's ``_exact_add`` and
   core/jitround.round_value). NaN operands: the first operand's NaN wins, as in numpy's loops;
4. an FP32 accumulator in RNE whose terms are not FP32 numbers (products of FP32 inputs: 48 bits, float64 words):
   a program of plain additions keeps its rows in float32 words (``tree_kernel_n32``), the terms in float64: two
   rows add in IEEE binary32; a term's addition is the float64 sum (an fma of the two products) converted, redone
   by round to odd at 53 bits with its TwoSum error where that sum lies on an FP32 midpoint (Boldo & Melquiond
   2008), in FP32's subnormal range or is NaN (out of line: the vector loops stay small). Other programs take
   steps 1-3 on float64 words;
5. RNE to a format of p <= 11 bits (FP16, BF16, FP8) on float32 words: the float32 sum, then step 3's rounding on
   its bits: rounding to 24 bits first keeps the RNE rounding to p bits unless the float32 sum is a midpoint of the
   format's grid and inexact, which two values of the format never give (24 >= 2p + 1, Figueroa 1995) and a term
   (up to 2p bits) may: such lanes, rare, are redone by the scalar route, with those outside the normal range;
6. a pairwise tree's two lowest levels (two additions of two terms each, read only by a third that adds them:
   ``Tape.quad``) run in one loop in steps 4 and 5 (``n32_quad``, ``fig_quad``): four terms in, one row out.
   Steps 4-6's additions are models/kernels/treeadd.py's.

Covered: every step a Const, Load, Add or Chain, at least one of them an Add, a Load or a Chain over values (the
partials of GotoBlocks, XlaChunks: a program of chains of terms alone is models/kernels/chain.py's, step by step), one
arithmetic (format, rounding, ftz) for all of them other than FP64. Anything else (block FMA steps, TreeOrders with
several step kinds, an FP64 accumulator) stays with the step-by-step backends (models/engine/dispatch.py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ...core import jit
from ...core.kernels import rounding as jr
from ..engine.accumulate import Arith, native_fp32_ok
from ..engine.sources import MatSource
from ..engine.steps import Add, Chain, Const, Load, Operand, TreeRun
from .chain import _MODES, _RNE, _exact_add, _first_nan, _low32, _offset, _params, _step
from .treeadd import fig_add, fig_quad, fig_terms, n32_add, n32_quad

__all__ = ["covers", "run", "calls", "tape_of", "Tape"]

calls = jit.Calls()  # TreeRun steps run by the kernel (the tests read calls.count)

_TILE = 2048         # outputs per tile (lanes): the tape's rows of them stay in cache
_MAX_NODES = 1 << 21  # additions of the largest program taken (its tape: 40 bytes each)
_COLS = 256          # columns of a tile (the rest of the tile: rows of A; a sum's batch: columns only)
_HW = max(_MODES.values()) + 10   # this kernel's own mode code: IEEE binary32 addition (FP32 accumulator, RNE)
_N64 = _HW + 1                    # and FP32 in RNE on float64 words (step 4): round to odd, then one conversion
_FIG = _HW + 2                    # and RNE to p <= 11 bits on float32 words: two values add in float32 first (step 5)

# node kinds and flags of the tape
_CONST, _LOAD, _ADD = 0, 1, 2
_NEG, _FINITE, _RA, _RB = 1, 2, 4, 8    # b negated, +0 where not finite, a term a / b rounded to the format first


# ======================================================================================================
# The tape (Python, once per program): nodes from the steps, then depth-first order and rows
# ======================================================================================================

def _arith_of(steps: tuple) -> Arith | None:
    """The one arithmetic of the steps' roundings, or None when they have several."""
    ars = {(s.ar.fmt, s.ar.mode, s.ar.ftz, s.ar.native) for s in steps if not isinstance(s, Const)}
    if len(ars) != 1:
        return None
    return next(s.ar for s in steps if not isinstance(s, Const))


class _Nodes:
    """The nodes of a program: kind, operands a and b (a node id >= 0, or a term -1 - k), flags, constant."""

    def __init__(self, nslots: int):
        self.cur = np.full(nslots, np.iinfo(np.int64).min, np.int64)   # the node each slot holds now
        self.parts: list[tuple] = []
        self.n = 0

    def refs(self, op: Operand) -> np.ndarray:
        r = op.refs.copy()
        isv = r >= 0
        r[isv] = self.cur[op.slot[r[isv]]]
        return r

    def add(self, kind: int, a, b, flags, const=0.0) -> np.ndarray:
        a = np.asarray(a, np.int64)
        ids = np.arange(self.n, self.n + a.size, dtype=np.int64)
        self.n += a.size
        self.parts.append((np.full(a.size, kind, np.int64), a, np.broadcast_to(np.asarray(b, np.int64), a.shape),
                           np.broadcast_to(np.asarray(flags, np.int64), a.shape),
                           np.full(a.size, const, np.float64)))
        return ids


def _chain_nodes(nodes: _Nodes, st: Chain) -> np.ndarray:
    """The nodes of a Chain step, column by column: s_j = fl(s_{j-1} + addend_j); returns the last column's."""
    start = nodes.refs(st.a)
    if st.addends == "t":
        cols = -1 - np.asarray(st.ids, np.int64)                                  # (rows, L) terms
    elif st.addends == "v":
        cols = nodes.cur[np.asarray(st.ids, np.int64)]                            # (rows, L) slots
    else:
        cols = np.stack([nodes.refs(op) for op in st.ids], axis=1)                # one Operand per column
    flags = _RB if st.rnd is not None else 0
    W, L = cols.shape
    ids = nodes.n + np.arange(W * L, dtype=np.int64).reshape(L, W)           # node of (step j, row r): ids[j, r]
    made = nodes.add(_ADD, np.concatenate([start, ids[:-1].ravel()]), cols.T.ravel(), flags)
    assert made[0] == ids[0, 0]
    return ids[-1]


def _nodes_of(steps: tuple, nslots: int) -> tuple[_Nodes, np.ndarray]:
    """Every step's nodes, each step reading the slots as the steps before it left them; returns the nodes and
    the node each slot holds at the end."""
    nodes = _Nodes(nslots)
    for st in steps:
        if isinstance(st, Const):
            ids = nodes.add(_CONST, np.zeros(np.arange(nslots)[st.dst].size, np.int64), 0, 0, st.value)
        elif isinstance(st, Load):
            ids = nodes.add(_LOAD, nodes.refs(st.a), 0, 0)
        elif isinstance(st, Add):
            flags = (_NEG if st.neg else 0) | (_FINITE if st.finite else 0) | ((_RA | _RB) if st.rnd is not None else 0)
            ids = nodes.add(_ADD, nodes.refs(st.a), nodes.refs(st.b), flags)
        else:
            ids = _chain_nodes(nodes, st)
        nodes.cur[st.dst] = ids                 # (after all of the step's reads: a wave reads, then writes)
    return nodes, nodes.cur


@jit.njit(inline="always")
def _operands(kind, a, b, v):
    """The node operands of node v (-1 where none): an addition reads a and b, a load a, a constant nothing."""
    x = a[v] if kind[v] != _CONST and a[v] >= 0 else -1
    y = b[v] if kind[v] == _ADD and b[v] >= 0 else -1
    return x, y


@jit.njit
def _order(kind, a, b, root):
    """Depth-first order of the nodes the root needs (operand a's subtree first) and a buffer row per node,
    freed after its last reader (never a reader's own row). Returns (order, rows, row count)."""
    n = kind.size
    uses = np.zeros(n, np.int64)
    seen = np.zeros(n, np.bool_)
    order = np.empty(n, np.int64)
    no = 0
    stack = np.empty(n + 1, np.int64)
    done = np.zeros(n, np.bool_)         # the node's operands are on the stack or made
    stack[0] = root
    seen[root] = True
    sp = 1
    while sp > 0:
        v = stack[sp - 1]
        if done[v]:
            sp -= 1
            order[no] = v
            no += 1
            continue
        done[v] = True
        x, y = _operands(kind, a, b, v)
        for w in (y, x):                 # (pushed b first: a's subtree is made first)
            if w >= 0:
                uses[w] += 1
                if not seen[w]:
                    seen[w] = True
                    stack[sp] = w
                    sp += 1
    uses[root] += 1
    rows = np.empty(n, np.int64)
    free = np.empty(n, np.int64)
    nfree, nrows = 0, 0
    for i in range(no):
        v = order[i]
        if nfree > 0:
            nfree -= 1
            rows[v] = free[nfree]
        else:
            rows[v] = nrows
            nrows += 1
        x, y = _operands(kind, a, b, v)
        for w in (x, y):
            if w >= 0:
                uses[w] -= 1
                if uses[w] == 0:
                    free[nfree] = rows[w]
                    nfree += 1
    return order[:no], rows, nrows


class Tape(NamedTuple):
    """A program as the kernel runs it: ``ops`` (n, 5) kind, row, a, b, flags (a and b rows, or terms -1 - k'),
    the constants, the row count, the result's row, ``perm``: term k' is the program's term perm[k'], and
    ``quad`` (``_quads``)."""

    ops: np.ndarray
    consts: np.ndarray
    nrows: int
    result: int
    perm: np.ndarray
    quad: np.ndarray


@jit.njit
def _quads(ops, nrows, result):
    """quad[o]: ops o and o + 1 each add two terms (plain additions), op o + 2 adds their rows (o's first), and no
    other op (nor the result) reads what o and o + 1 write: a kernel may make the three in one loop (the sum of
    four terms, as a pairwise tree's lowest levels are), writing op o + 2's row only."""
    n = ops.shape[0]
    reads = np.zeros(n + 1, np.int64)          # how often the value op o writes is read
    writer = np.full(nrows, n, np.int64)       # (n: no op)
    for o in range(n):
        kind, a, b = ops[o, 0], ops[o, 2], ops[o, 3]
        if kind != _CONST and a >= 0:
            reads[writer[a]] += 1
        if kind == _ADD and b >= 0:
            reads[writer[b]] += 1
        writer[ops[o, 1]] = o
    reads[writer[result]] += 1
    quad = np.zeros(n, np.bool_)
    for o in range(n - 2):
        leaves = True
        for v in (o, o + 1):
            leaves = leaves and ops[v, 0] == _ADD and ops[v, 4] == 0 and ops[v, 2] < 0 and ops[v, 3] < 0
            leaves = leaves and reads[v] == 1
        p = o + 2
        quad[o] = (leaves and ops[p, 0] == _ADD and ops[p, 4] == 0 and ops[p, 2] == ops[o, 1]
                   and ops[p, 3] == ops[o + 1, 1] and ops[o, 1] != ops[o + 1, 1])
    return quad


@lru_cache(maxsize=16)      # (a tape: 48 bytes an addition, up to _MAX_NODES of them)
def tape_of(steps: tuple, result: int, nslots: int) -> Tape:
    """The Tape of a program's steps whose result is in slot ``result``."""
    nodes, cur = _nodes_of(steps, nslots)
    kind, a, b, flags, const = (np.concatenate(c) for c in zip(*nodes.parts))
    root = int(cur[result])
    order, rows, nrows = _order(kind, a, b, root)
    ops = np.empty((order.size, 5), np.int64)
    ops[:, 0], ops[:, 1], ops[:, 4] = kind[order], rows[order], flags[order]
    k = kind[order]
    for col, ref, reads in ((2, a[order], k != _CONST), (3, b[order], k == _ADD)):
        is_node = (ref >= 0) & reads
        ops[:, col] = np.where(is_node, rows[np.where(is_node, ref, 0)], np.where(reads & (ref < 0), ref, 0))
    # the terms renumbered in the order the tape first reads them: the kernel reads B's rows (permuted alike)
    # one after the other, as the CPU's prefetcher likes, whatever the order's pattern of terms
    refs = ops[:, 2:4].ravel()
    first = np.unique(-1 - refs[refs < 0], return_index=True)
    perm = first[0][np.argsort(first[1], kind="stable")]
    rank = np.empty(int(perm.max(initial=-1)) + 1, np.int64)
    rank[perm] = np.arange(perm.size)
    term = ops[:, 2:4] < 0
    ops[:, 2:4][term] = -1 - rank[-1 - ops[:, 2:4][term]]
    nrows, res = max(nrows, 1), int(rows[root])
    return Tape(ops, np.ascontiguousarray(const[order]), nrows, res, perm, _quads(ops, nrows, res))


# ======================================================================================================
# The kernel
# ======================================================================================================

@jit.njit
def _term_row(out, am, bm, tile, k):
    """out[ii * nt + j] = the term k of output (i0 + ii, j0 + j): A[i0 + ii, k] B[k, j0 + j], exact, for the tile's
    rows ii < ni and columns j < nt (``tile`` = (i0, ni, j0, nt))."""
    jr.wide_vectors()
    i0, ni, j0, nt = tile
    brow = bm[k, j0:j0 + nt]
    for ii in range(ni):
        a = am[i0 + ii, k]
        o = out[ii * nt:(ii + 1) * nt]
        for j in range(nt):
            o[j] = _first_nan(a, a * brow[j])


@jit.njit
def _round_row(x, d, offs, nt, mode, P, P64, lim):
    """d[j] = x[j] rounded to the format (x exact; the scalar route where outside the normal range)."""
    jr.wide_vectors()
    worst = jr.k(P.lo, 0)
    for j in range(nt):
        b = jr.as_bits(x[j])
        off = _offset(b, P)
        offs[j] = off
        worst = jr.umax(worst, off)
        d[j] = jr.as_value(jr.round_bits(b, mode, P))
    if worst > P.span:
        for j in range(nt):
            if offs[j] > P.span:
                d[j] = jr.like(x[j], jr.round_value(np.float64(x[j]), mode, P64, lim))


@jit.njit(inline="always")
def _add_loop(x, y, d, offs, nt, mode, P):
    worst = jr.k(P.lo, 0)
    for j in range(nt):
        r, off = _step(x[j], y[j], mode, P)
        offs[j] = off
        worst = jr.umax(worst, off)
        d[j] = jr.as_value(r)
    return worst


@jit.njit(inline="always")
def _add_row(x, y, d, offs, nt, mode, P, P64, lim):
    """d[j] = fl(x[j] + y[j]) (jitchain's steps 1-4; the scalar route for the lanes outside the normal range)."""
    jr.wide_vectors()
    if mode == _HW:
        for j in range(nt):
            d[j] = _first_nan(x[j], x[j] + y[j])
        return
    worst = _add_loop(x, y, d, offs, nt, _RNE, P) if mode == _RNE else _add_loop(x, y, d, offs, nt, mode, P)
    if worst > P.span:
        for j in range(nt):
            if offs[j] > P.span:
                d[j] = jr.like(x[j], _exact_add(np.float64(x[j]), np.float64(y[j]), mode, P64, lim))


@jit.njit(inline="always")
def _operand(R, S, W, ref, rounded, am, bm, tile, nt, offs, mode, P, P64, lim):
    """An operand's row: the buffer row ``ref``, or the term -1 - ref made in S (made in W and rounded into S
    where asked)."""
    if ref >= 0:
        return R[ref]
    if not rounded or mode == _HW:              # (_HW: the terms are FP32 numbers, rounding keeps them)
        _term_row(S, am, bm, tile, -1 - ref)
    else:
        _term_row(W, am, bm, tile, -1 - ref)
        _round_row(W, S, offs, nt, mode, P, P64, lim)
    return S


@jit.njit
def _hw_add(R, dr, a, b, am, bm, tile):
    """dr = x + y in IEEE binary32 (mode _HW), the terms among x and y made in the same loop (FP32 numbers here:
    finite inputs, exact products)."""
    jr.wide_vectors()
    i0, ni, j0, nt = tile
    if a >= 0 and b >= 0:
        x, y = R[a], R[b]
        for j in range(ni * nt):
            dr[j] = _first_nan(x[j], x[j] + y[j])
        return
    if b >= 0 or a >= 0:                        # one row and one term: x + t or t + y (the row's NaN wins)
        row, k = (R[b], -1 - a) if b >= 0 else (R[a], -1 - b)
        brow = bm[k, j0:j0 + nt]
        for ii in range(ni):
            c = am[i0 + ii, k]
            x, o = row[ii * nt:(ii + 1) * nt], dr[ii * nt:(ii + 1) * nt]
            for j in range(nt):
                o[j] = _first_nan(x[j], x[j] + c * brow[j])
        return
    ka, kb = -1 - a, -1 - b
    brow, crow = bm[ka, j0:j0 + nt], bm[kb, j0:j0 + nt]
    for ii in range(ni):
        c, e = am[i0 + ii, ka], am[i0 + ii, kb]
        o = dr[ii * nt:(ii + 1) * nt]
        for j in range(nt):
            o[j] = c * brow[j] + e * crow[j]    # (two products and one rounding: no fma, numba does not contract)


@jit.njit
def tree_kernel_n32(am, bm, lo, units, ops, quad, nrows, res, out, lanes, cols):
    """``tree_kernel`` in mode _N64 for a tape of plain additions (no constant, load, negation or rounded term):
    the rows in float32 words (half the memory of float64 rows), the terms made in float64; the ops of a ``quad``
    group in one loop (``n32_quad``)."""
    n = bm.shape[1]
    width = min(n, cols)
    rows = max(1, lanes // n)
    R = np.empty((nrows, rows * width), np.float32)
    for u0 in range(0, units, rows):
        ni = min(rows, units - u0)
        for j0 in range(0, n, width):
            nt = min(width, n - j0)
            tile = (lo + u0, ni, j0, nt)
            o = 0
            while o < ops.shape[0]:
                if quad[o]:
                    n32_quad(R[ops[o + 2, 1]], o, ops, am, bm, tile)
                    o += 3
                    continue
                a, b = ops[o, 2], ops[o, 3]
                n32_add(R[ops[o, 1]], R[max(a, 0)], R[max(b, 0)], a, b, am, bm, tile)
                o += 1
            for ii in range(ni):
                out[(u0 + ii) * n + j0:(u0 + ii) * n + j0 + nt] = R[res, ii * nt:(ii + 1) * nt]
    return out


@jit.njit
def _negated(S, x, nt):
    for j in range(nt):
        S[j] = -x[j]
    return S


@jit.njit(inline="always")
def _node(R, S, o, ops, consts, am, bm, tile, nt, offs, mode, P, P64, lim):
    """Node o of the tape over the tile's nt lanes: its row of R."""
    kind, d, a, b, fl = ops[o, 0], ops[o, 1], ops[o, 2], ops[o, 3], ops[o, 4]
    dr = R[d]
    if kind == _CONST:
        dr[:nt] = consts[o]
        return
    x = _operand(R, S[0], S[2], a, kind == _LOAD or (fl & _RA) != 0, am, bm, tile, nt, offs, mode, P, P64, lim)
    if kind == _LOAD:
        if a < 0 or mode == _HW:                # a term (rounded above), or an FP32 number kept as it is
            dr[:nt] = x[:nt]
        else:
            _round_row(x, dr, offs, nt, mode, P, P64, lim)
        return
    y = _operand(R, S[1], S[2], b, (fl & _RB) != 0, am, bm, tile, nt, offs, mode, P, P64, lim)
    if fl & _NEG:
        y = _negated(S[3], y, nt)
    _add_row(x, y, dr, offs, nt, mode, P, P64, lim)
    if fl & _FINITE:
        for j in range(nt):
            if not np.isfinite(dr[j]):
                dr[j] = 0.0


@jit.njit
def tree_kernel(am, bm, lo, units, ops, quad, consts, nrows, res, out, offs, cols, mode, P, P64, lim):
    """out[u * n + j] = the tape's result for output (lo + u, j), j < n = bm.shape[1], in tiles of at most offs.size
    lanes: several rows u of up to ``cols`` columns each (B's rows then serve them all from cache); in mode _FIG
    the ops of a ``quad`` group in one loop (``fig_quad``)."""
    n = bm.shape[1]
    width = min(n, cols)                        # columns of a tile
    rows = max(1, offs.size // n)               # and rows
    R = np.empty((nrows, rows * width), am.dtype)
    S = np.empty((4, rows * width), am.dtype)
    for u0 in range(0, units, rows):
        ni = min(rows, units - u0)
        for j0 in range(0, n, width):
            nt = min(width, n - j0)
            tile = (lo + u0, ni, j0, nt)
            o = 0
            while o < ops.shape[0]:
                if mode == _FIG and quad[o]:
                    fig_quad(R[ops[o + 2, 1]], o, ops, am, bm, tile, P, P64, lim)
                    o += 3
                    continue
                if mode == _HW and ops[o, 0] == _ADD and (ops[o, 4] & (_NEG | _FINITE)) == 0:
                    _hw_add(R, R[ops[o, 1]], ops[o, 2], ops[o, 3], am, bm, tile)     # (the common case)
                elif mode == _FIG and ops[o, 0] == _ADD and ops[o, 4] == 0:
                    if ops[o, 2] >= 0 and ops[o, 3] >= 0:
                        fig_add(R[ops[o, 1], :ni * nt], R[ops[o, 2]], R[ops[o, 3]], P, P64, lim)
                    else:
                        fig_terms(R[ops[o, 1]], R, ops[o, 2], ops[o, 3], am, bm, tile, P, P64, lim)
                else:
                    _node(R, S, o, ops, consts, am, bm, tile, ni * nt, offs,
                          _RNE if mode == _N64 or mode == _FIG else mode, P, P64, lim)
                o += 1
            for ii in range(ni):
                out[(u0 + ii) * n + j0:(u0 + ii) * n + j0 + nt] = R[res, ii * nt:(ii + 1) * nt]
    return out


# ======================================================================================================
# Dispatch
# ======================================================================================================

def covers(step: TreeRun) -> bool:
    """Does a TreeRun run here? Const, Load, Add and Chain steps, not chains of terms alone, one arithmetic for all
    (not FP64; a mode the kernels take), and the float environment with gradual underflow."""
    steps = step.steps
    if not all(isinstance(s, (Const, Load, Add, Chain)) for s in steps):
        return False
    if all(isinstance(s, Const) or (isinstance(s, Chain) and s.addends == "t") for s in steps):
        return False            # chains of terms only (Sequential, Blocked of chains): jitchain's, step by step
    if any(isinstance(s, Chain) and s.length == 0 for s in steps):
        return False
    adds = sum(s.a.width * (s.length if isinstance(s, Chain) else 1) for s in steps if not isinstance(s, Const))
    if adds > _MAX_NODES:
        return False            # (its tape would take more memory than the numpy path's slots)
    ar = _arith_of(steps)
    return ar is not None and not ar.is64 and ar.mode in _MODES and native_fp32_ok()


def _words(ar: Arith, sub) -> tuple[bool, bool]:
    """(float32 words, IEEE binary32 addition): float32 where every term is an FP32 number (so is every value:
    the accumulator's format fits FP32), for FP32 in RNE (``Arith.native``) or a format of at most 22 bits."""
    t32 = bool(sub.terms_fp32())
    return t32 and (ar.native or _low32(ar)), t32 and ar.native


def _inputs(tape: Tape, f32: bool, sub, ctx) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) with their terms in the tape's order (A's columns and B's rows permuted by ``tape.perm``; a sum's
    inputs as A = ones (1, K) and B = the inputs (K, batch)), float32 or float64: made once per call (the chunks'
    views share ``ctx``) and only where the permutation moves something."""
    key = ("jittree", id(tape), f32)
    if key not in ctx.kernels:
        if isinstance(sub, MatSource):
            am, bm = (sub.a32, sub.b32) if f32 else (sub.a, sub.b)
        else:
            bm = sub.xt32 if f32 else sub.xt
            am = np.ones((1, bm.shape[0]), bm.dtype)
        if not np.array_equal(tape.perm, np.arange(bm.shape[0])):
            am, bm = np.ascontiguousarray(am[:, tape.perm]), np.ascontiguousarray(bm[tape.perm])
        ctx.kernels[key] = am, bm
    return ctx.kernels[key]


def run(step: TreeRun, V, sub, ctx) -> np.ndarray:
    """The result row (1, outputs of the chunk ``sub``) of the step's program: what its steps give on numpy."""
    ar = _arith_of(step.steps)
    tape = tape_of(step.steps, step.result, step.nslots)
    f32, hw = _words(ar, sub)
    mode, P, P64, lim = _params(ar, not f32)
    if hw:
        mode = _HW
    elif ar.native and not f32:
        mode = _N64
    elif f32 and mode == _RNE and 2 * ar.fmt.precision + 1 <= 24:
        mode = _FIG
    am, bm = _inputs(tape, f32, sub, ctx)
    if isinstance(sub, MatSource):
        lo, units = sub.lo, sub.hi - sub.lo
    else:
        bm = np.ascontiguousarray(bm[:, sub.lo:sub.hi])
        lo, units = 0, 1
    out = np.empty(units * bm.shape[1], bm.dtype)
    offs = np.empty(_TILE, np.uint32 if f32 else np.uint64)     # the lanes' offsets (scratch); its size: the tile's
    calls.add()
    if mode == _N64 and tape.ops.size and (tape.ops[:, 0] == _ADD).all() and not tape.ops[:, 4].any():
        return tree_kernel_n32(am, bm, lo, units, tape.ops, tape.quad, tape.nrows, tape.result, out, _TILE,
                               _COLS).reshape(1, -1)
    tree_kernel(am, bm, lo, units, tape.ops, tape.quad, tape.consts, tape.nrows, tape.result, out, offs, _COLS, mode, P,
                P64, lim)
    return out.reshape(1, -1)
