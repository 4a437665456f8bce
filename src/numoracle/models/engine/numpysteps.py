"""The numpy reference of every kind of step of simulate's program: what each step computes.

``RUNNERS[type(step)](step, V, sub, ctx)`` returns the step's values (rows, batch) for the chunk ``sub`` of the
source; V holds the value slots of that chunk. These are the definition the compiled kernels are held to
(models/kernels/chain.py, jitblock.py, jitblockrun.py: the same bits). Wide steps run in row pieces of about
_PASS elements, so that each numpy pass stays in cache.
"""

from __future__ import annotations

import numpy as np

from .accumulate import block_fma
from .sources import as_index
from .steps import Add, BlockRun, BlockStep, Chain, Const, Context, Load, TreeRun

__all__ = ["RUNNERS", "PASS"]

PASS = 1 << 18          # elements of the widest operand of one numpy pass (2 MiB: stays in cache)


def _pieces(rows: int, per_row: int, B: int) -> list[tuple[int, int]]:
    """Row ranges of a wave so that each numpy pass touches about PASS elements (a wave's rows are
    independent, so they may run in pieces; results are stored after all pieces have read)."""
    step = max(1, PASS // max(1, per_row * B))
    return [(r, min(r + step, rows)) for r in range(0, rows, step)]


def _in_pieces(rows: int, per_row: int, V, piece) -> np.ndarray:
    """piece(r0, r1) over the row pieces of a step, gathered (one call when one piece covers it)."""
    pieces = _pieces(rows, per_row, V.shape[1])
    if len(pieces) == 1:
        return piece(0, rows)
    res = np.empty((rows, V.shape[1]))
    for r0, r1 in pieces:
        res[r0:r1] = piece(r0, r1)
    return res


def run_const(st: Const, V, sub, ctx: Context):
    return st.value


def run_load(st: Load, V, sub, ctx: Context) -> np.ndarray:
    return st.ar.round(st.a.fetch(V, sub, None))


def run_add(st: Add, V, sub, ctx: Context) -> np.ndarray:
    a, b, rnd = st.a, st.b, st.rnd

    def piece(r0, r1):
        y = b.part(r0, r1).fetch(V, sub, rnd)
        r = st.ar.add(a.part(r0, r1).fetch(V, sub, rnd), -y if st.neg else y, st.plan)
        return np.where(np.isfinite(r), r, 0.0) if st.finite else r

    return _in_pieces(a.width, 1, V, piece)


def run_chain(st: Chain, V, sub, ctx: Context) -> np.ndarray:
    return _in_pieces(st.a.width, 2, V, lambda r0, r1: _chain_rows(st, V, sub, r0, r1))


def _chain_rows(st: Chain, V, sub, r0: int, r1: int) -> np.ndarray:
    """Rows r0..r1-1 of a chain step: s = a; s = fl(s + b[:, j]) for every column j."""
    variant, ar, rnd, kind, data = st.variant, st.ar, st.rnd, st.addends, st.ids
    f32 = variant != "f64"
    one = r1 - r0 == 1

    def addend(j):
        if kind == "t":
            ids = slice(int(data[r0, j]), int(data[r0, j]) + 1) if one else as_index(data[r0:r1, j])
            t = sub.terms32(ids) if f32 else sub.terms(ids)
            if rnd is not None and variant != "f32":   # fma=False: the term is rounded to acc first
                t = rnd.round32(t) if f32 else rnd.round(t)
            return t
        if kind == "v":
            ids = slice(int(data[r0, j]), int(data[r0, j]) + 1) if one else as_index(data[r0:r1, j])
            return V[ids].astype(np.float32) if f32 else V[ids]
        return data[j].part(r0, r1).fetch(V, sub, rnd)

    s = st.a.part(r0, r1).fetch(V, sub, None)
    if variant == "f32":
        return _chain_f32(st, V, sub, r0, r1, s.astype(np.float32), addend)   # exact: FP32 numbers
    if variant == "low32":
        s = s.astype(np.float32)
        for j in range(st.length):
            s = ar.add32(s, addend(j))
        return s
    for j in range(st.length):
        s = ar.add(s, addend(j), st.plan)
    return s


def _chain_f32(st: Chain, V, sub, r0: int, r1: int, s: np.ndarray, addend) -> np.ndarray:
    """A chain of IEEE binary32 additions (FP32 accumulator, RNE) from the float32 sums s."""
    n, lanes = st.length, s.size
    if lanes > 64 or st.addends == "m":
        for j in range(n):
            s += addend(j)
        return s
    # few lanes (a single dot product or sum): many steps per numpy call. np.add.accumulate along
    # the last axis is the same sequence of IEEE binary32 additions, out[i] = out[i-1] + in[i]
    # (accumulate is never reassociated)
    block = max(1, PASS // lanes)
    for j0 in range(0, n, block):
        j1 = min(j0 + block, n)
        ids = as_index(st.ids[r0:r1, j0:j1].T.ravel())
        t = sub.terms32(ids) if st.addends == "t" else V[ids].astype(np.float32)
        run = np.concatenate([s.reshape(lanes, 1), t.reshape(j1 - j0, lanes).T], axis=1)
        s = np.add.accumulate(run, axis=1)[:, -1].reshape(s.shape)
    return s


def run_block(st: BlockStep, V, sub, ctx: Context) -> np.ndarray:
    """accumulate.block_fma on the step's terms (float32 where ``b32``), in row pieces."""
    tids, B = st.tids, V.shape[1]
    res = np.empty((tids.shape[0], B))
    for r0, r1 in _pieces(tids.shape[0], tids.shape[1], B):
        flat = as_index(tids[r0:r1].ravel())
        T = (sub.terms32_copy(flat) if st.b32 else sub.terms_copy(flat)).reshape(r1 - r0, tids.shape[1], B)
        X = sub.labels(flat).reshape(r1 - r0, tids.shape[1], B)
        res[r0:r1] = block_fma(T, X, st.c.part(r0, r1).fetch(V, sub, None), st.order, st.ar, ctx.sub_inputs)
    return res


def run_block_run(st: BlockRun, V, sub, ctx: Context) -> np.ndarray:
    """The run's steps one after the other (each reads the previous one's output from V)."""
    for s in st.steps[:-1]:
        V[s.dst] = run_block(s, V, sub, ctx)
    return run_block(st.steps[-1], V, sub, ctx)


def run_tree_run(st: TreeRun, V, sub, ctx: Context) -> np.ndarray:
    """The program's steps one after the other; the result's row."""
    for s in st.steps:
        V[s.dst] = RUNNERS[type(s)](s, V, sub, ctx)
    return V[st.dst]


RUNNERS = {Const: run_const, Load: run_load, Add: run_add, Chain: run_chain, BlockStep: run_block,
           BlockRun: run_block_run, TreeRun: run_tree_run}
