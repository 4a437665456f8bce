"""An order simulated on many inputs at once, for the verification and the fits on random data (reveal/report.py).

Every output of a sum, a dot or a matmul is the order applied to its n terms: the inputs themselves (a sum) or
the products a_k b_k, exact in float64 where the input format has at most 26 significand bits (p_a + p_b <= 53:
every format but FP64). Where no node is fused (a BlockFMA step reads its products as products), the outputs of
all draws, of every kind, are columns of one matrix of terms, and the order runs once per batch (its Python cost
paid once, not once per draw and kind); a PerPosition order runs each of its trees on the columns of its own
positions only. A TreeOrder runs level by level (reveal/levels.py: the tree's depth in numpy steps, where
simulate's chains take several times that), the terms placed in the order its levels read them; other orders go
through ``simulate("sum", terms, order=...)``. The terms are built in chunks of under ``CHUNK`` values (a 64 x 4096
x 64 matmul has 16 M terms a draw). Other dots and matmuls go through ``simulate(op, ...)`` draw by draw. That
every route gives simulate(op)'s bits is tested (tests/reveal/test_reveal_replay.py).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..core import jit
from ..core.formats.format import Format
from ..models.engine.simulation import simulate
from ..models.orders.basic import BlockFMA, Order
from ..models.orders.tree import TreeOrder
from .levels import Levels

__all__ = ["replay", "CHUNK"]

# terms per chunk (32 MB of float64): as many as stay under simulate's threshold for its compiled kernels
# (core/jit.py), whose first load in a process (about a second) a reveal would not repay
CHUNK = jit.MIN_WORK - 1


def _as_sums(op: str, order: Order, fmt: Format) -> bool:
    """Can the outputs be simulated as sums of their terms? A sum always; a dot or matmul where the products are
    exact in float64 and no node is fused (a BlockFMA step reads its products as products: simulate(op))."""
    if op == "sum":
        return True
    trees = order.orders if getattr(order, "per_position", False) else (order,)
    return 2 * fmt.precision <= 53 and all(
        isinstance(t, TreeOrder) and not any(isinstance(st, BlockFMA) for st in t.steps) for t in trees)


def replay(op: str, inputs: list[tuple], order: Order, fmt: Format, positions: Iterable[int] | None = None, *,
           at: list | None = None) -> list[np.ndarray]:
    """The order's outputs on every input of ``inputs`` (each fn's arguments), flattened over output positions:
    one float64 array per input, of every position (NaN at those not in ``positions``, where given; ``at``: the
    positions of each input instead, None for every position)."""
    if not inputs:
        return []
    if not _as_sums(op, order, fmt):
        return [np.asarray(simulate(op, *i, order=order), np.float64).reshape(-1) for i in inputs]
    stacks = [np.stack([np.asarray(i[k]) for i in inputs]) for k in range(len(inputs[0]))]
    if op == "sum":
        X = stacks[0].reshape(len(inputs), -1, stacks[0].shape[-1])   # (draws, positions, n)
        npos, n = X.shape[1], X.shape[2]
    elif op == "dot":
        npos, n = 1, stacks[0].shape[-1]
    else:
        A, B = stacks                                                 # (draws, M, K), (draws, K, N)
        npos, n, N = A.shape[1] * B.shape[2], A.shape[2], B.shape[2]
    out = np.full((len(inputs), npos), np.nan)
    per = at if at is not None else [positions] * len(inputs)
    pos = [np.arange(npos) if x is None else np.asarray(list(x), np.int64) for x in per]
    index = np.asarray(order.index, np.int64) if getattr(order, "per_position", False) else None
    orders = [order] if index is None else list(order.orders)
    # per order: the (draw, position) pairs it gives, draw by draw
    pairs = [(np.concatenate([np.full(p.size, i) for i, p in enumerate(pos)]).astype(np.int64),
              np.concatenate(pos))] if index is None else \
        [(np.concatenate([np.full(int((index[p] == j).sum()), i) for i, p in enumerate(pos)]).astype(np.int64),
          np.concatenate([p[index[p] == j] for p in pos])) for j in range(len(orders))]
    levels = [Levels.of(o) for o in orders]
    quantum = _quantum(op, stacks, fmt) if any(lv is not None for lv in levels) else 0.0
    rows = max(1, CHUNK // n)
    if op == "matmul" and any(lv is None for lv in levels):
        Bt = np.ascontiguousarray(B.transpose(0, 2, 1))               # columns of B as rows: gathered fast
    # the level replays' work array: one buffer for every order and chunk (a fresh array would be touched anew)
    size = max([(n + lv.slots) * min(rows, d.size) for lv, (d, _) in zip(levels, pairs) if lv is not None] + [0])
    buf = np.empty(size)
    for o, lv, (d, q) in zip(orders, levels, pairs):
        for lo in range(0, d.size, rows):
            dd, qq = d[lo:lo + rows], q[lo:lo + rows]
            if lv is not None:      # level by level (reveal/levels.py): the terms as rows, one column an output
                W = buf[:(n + lv.slots) * dd.size].reshape(n + lv.slots, dd.size)
                k = lv.terms
                if op == "sum":
                    W[:n] = X[dd[:, None], qq[:, None], k].T
                elif op == "dot":
                    np.multiply(stacks[0][dd][:, k].T, stacks[1][dd][:, k].T, out=W[:n], dtype=np.float64)
                else:       # the factors with K first (in the levels' order of the terms)
                    _products(A, B, k, dd, qq, W[:n])
                out[dd, qq] = lv.run(W, quantum)
                continue
            if op == "sum":
                T = X[dd, qq]                                      # the inputs, as they are
            elif op == "dot":
                T = stacks[0][dd].astype(np.float64) * stacks[1][dd].astype(np.float64)
            else:
                r, c = np.divmod(qq, N)
                T = A[dd, r].astype(np.float64) * Bt[dd, c].astype(np.float64)
            out[dd, qq] = np.asarray(simulate("sum", T, order=o), np.float64).reshape(-1)
    return list(out)


def _products(A: np.ndarray, B: np.ndarray, k: np.ndarray, dd: np.ndarray, qq: np.ndarray, out: np.ndarray) -> None:
    """out[i, j] = A[dd[j], r, k[i]] * B[dd[j], k[i], c] at position qq[j] = (r, c), in float64 (exact: the inputs'
    format has at most 26 significand bits, _as_sums). The columns come draw by draw; where a draw's positions are
    a grid of rows x columns in order (a matmul's lane classes: whole columns of B, or rows of A), one product per
    grid point from the grid's rows of A and columns of B, else one per column."""
    N = B.shape[2]
    cuts = np.flatnonzero(np.diff(dd)) + 1
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), dd.size]):
        d, ps = int(dd[lo]), qq[lo:hi]
        r, c = np.divmod(ps, N)
        rows, cols = np.unique(r), np.unique(c)
        if rows.size * cols.size == ps.size and np.array_equal(ps, (rows[:, None] * N + cols[None, :]).ravel()):
            a = A[d][np.ix_(rows, k)].astype(np.float64)           # (R, K)
            b = B[d][np.ix_(k, cols)].astype(np.float64)           # (K, C)
            view = out[:, lo:hi].reshape(k.size, rows.size, cols.size)  # a view: each row's columns split
            if np.may_share_memory(view, out):
                np.einsum("rk,kc->krc", a, b, out=view)            # (one product each, no sum)
            else:                                                   # (numpy chose a copy: written back)
                out[:, lo:hi] = np.einsum("rk,kc->krc", a, b).reshape(k.size, -1)
        else:
            np.multiply(A[d][np.ix_(r, k)].T, B[d][np.ix_(k, c)], out=out[:, lo:hi], dtype=np.float64)


def _quantum(op: str, stacks: list, fmt: Format) -> float:
    """A power of two every term is a multiple of: the input format's quantum at the smallest magnitude present
    (a sum's terms are the inputs; a product's quantum is at least the product of its factors'); 0 where unknown."""
    q = 1.0
    for x in stacks[:1 if op == "sum" else 2]:
        a = np.abs(np.asarray(x, np.float64))
        nz = a[a > 0]
        if nz.size == 0:
            continue
        if not np.isfinite(nz).all():
            return 0.0
        e = int(np.frexp(nz.min())[1]) - 1                      # floor(log2) of the smallest magnitude
        q *= 2.0 ** (max(e, fmt.emin) - fmt.man_bits)
    return q
