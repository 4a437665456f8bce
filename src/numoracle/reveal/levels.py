"""A TreeOrder replayed level by level: every node whose children are ready, one vectorised rounding per level.

simulate runs a tree as chains (models/orders/tree.py): a chain of nodes is one ``chain`` wave, and chains that
start at different heights, or read one another, run one after the other. A CPU kernel's tree (interleaved lanes
in blocks, their partial sums combined) then costs several times its depth in sequential numpy steps. Here node i
runs at its height (1 + its highest child's), all the nodes of one height and one step in one operation over
(nodes of the level, every output): the tree's depth in steps. Each node is the same correctly rounded operation
as simulate's (``Arith.round`` for a one-child node, ``Arith.add`` by its exact route for two children), so the
bits are the same (tests/reveal/test_reveal_replay.py). Terms enter exact (simulate's ``fma=True``), the steps'
open formats and roundings are simulate's defaults (the order's ``acc`` or FP32; RNE), no flush to zero.

``Levels.of(order)`` is None for what it does not cover (fused nodes, a tree without nodes, formats outside
simulate's exact range): the caller simulates those.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..core.formats.format import FP32, FP64, Format
from ..core.formats.policy import Rounding
from ..models.engine.accumulate import Arith, native_fp32_ok
from ..models.orders.tree import TreeOrder

__all__ = ["Levels"]


@dataclass(frozen=True, eq=False)
class _Group:
    """The nodes of one level and one step: dst = round(W[a]) (``b`` None) or fl(W[a] + W[b])."""

    ar: Arith
    a: np.ndarray
    b: np.ndarray | None
    dst: np.ndarray


@dataclass(frozen=True, eq=False)
class Levels:
    """A tree's nodes by level over a work array W: rows 0..n-1 the terms (exact), then ``slots`` value rows
    reused as values are consumed (each value is read once: by its parent)."""

    n: int
    slots: int
    groups: tuple[_Group, ...]
    root: int          # W row of the result (after ``out``)
    out: Arith | None  # the root rounded once more (TreeOrder.out)
    leaf: Arith | None  # every term rounded first (TreeOrder.leaf)

    @staticmethod
    def of(order: object) -> Levels | None:
        """The level plan of a TreeOrder of additions and rounding nodes; None where simulate must run it."""
        if not isinstance(order, TreeOrder) or not order.nodes:
            return None
        try:
            return _plan(order, native_fp32_ok())
        except _Uncovered:
            return None

    def run(self, W: np.ndarray) -> np.ndarray:
        """The outputs (one per column of W) for W whose first n rows hold the terms; W has n + slots rows and is
        overwritten (the terms too, where ``leaf`` rounds them)."""
        n = self.n
        with np.errstate(all="ignore"):
            if self.leaf is not None:
                W[:n] = self.leaf.round(W[:n])
            for g in self.groups:
                if g.b is None:
                    W[g.dst] = g.ar.round(W[g.a])
                elif g.ar.native:
                    W[g.dst] = _add32(g.ar, W[g.a], W[g.b])
                else:
                    W[g.dst] = g.ar.add(W[g.a], W[g.b], "f64" if g.ar.is64 else "odd")
            r = W[self.root]
            return self.out.round(r) if self.out is not None else r


_LOW = np.uint64((1 << 29) - 1)      # the float64 bits below FP32's last place
_MID = np.uint64(1 << 28)            # ... as they are at an FP32 midpoint
_MIN_NORMAL32 = 2.0**-126


def _add32(ar: Arith, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """fl32(x + y) (IEEE binary32, RNE) for exact float64 x, y: ``Arith.add``'s "odd" plan with its test in fewer
    passes, as float32 values. s = fl64(x + y) cast to float32 is one correct rounding of x + y unless s is an FP32
    midpoint (Arith's docstring: no grid point or midpoint lies strictly between s and x + y) or below FP32's
    normal range (where the midpoints lie elsewhere); those take the exact route (``Arith.add_exact``). Above the
    range no test is needed: the cast rounds s to max_finite or inf as it rounds x + y, the midpoint
    2^128 - 2^103 itself being caught by the midpoint test."""
    s = x + y
    need = (s.view(np.uint64) & _LOW) == _MID
    need |= np.abs(s) < _MIN_NORMAL32
    r = s.astype(np.float32)
    if need.any():
        idx = np.flatnonzero(need)
        r.reshape(-1)[idx] = ar.add_exact(x.reshape(-1)[idx], y.reshape(-1)[idx])
    return r


class _Uncovered(Exception):
    pass


def _arith(fmt: Format, mode: Rounding, native: bool) -> Arith:
    """simulate's arithmetic for one step (its range conditions; anything else is left to simulate)."""
    if mode is Rounding.STOCHASTIC or (fmt == FP64 and mode is Rounding.NEAREST_AWAY):
        raise _Uncovered
    if fmt != FP64 and not (fmt.precision <= 51 and fmt.emax <= 1000 and fmt.emin - fmt.man_bits >= -1022
                            and fmt.has_subnormals and fmt.signed):
        raise _Uncovered
    return Arith(fmt, mode, False, native)


@lru_cache(maxsize=32)
def _plan(t: TreeOrder, native: bool) -> Levels:
    n, nodes = t.n, t.nodes
    nn = len(nodes)
    acc = t.acc or FP32
    rne = Rounding.of("rne")
    if any(not isinstance(st, tuple) for st in t.steps):
        raise _Uncovered                                  # a fused node (BlockFMA): simulate's bfma waves
    ars = [_arith(st[0] or acc, Rounding.of(st[1]) if st[1] is not None else rne, native) for st in t.steps]
    kinds = t.kinds or (0,) * nn
    height = [0] * (n + nn)
    for i, ch in enumerate(nodes):
        height[n + i] = 1 + max(height[c] for c in ch)
    # levels in order; within a level, one group per (step, one or two children)
    order = sorted(range(nn), key=lambda i: (height[n + i], kinds[i], len(nodes[i])))
    row = list(range(n)) + [-1] * nn                     # W row of every ref once computed
    free: list[int] = []
    top = n
    groups = []
    j = 0
    while j < nn:
        i0 = order[j]
        key = (height[n + i0], kinds[i0], len(nodes[i0]))
        members = []
        while j < nn and (height[n + order[j]], kinds[order[j]], len(nodes[order[j]])) == key:
            members.append(order[j])
            j += 1
        a = [row[nodes[i][0]] for i in members]
        b = [row[nodes[i][1]] for i in members] if key[2] == 2 else None
        released = [r for r in a + (b or []) if r >= n]   # read once: their rows free for this level's results
        dst = []
        for i in members:
            if free:
                r = free.pop()
            else:
                r = top
                top += 1
            dst.append(r)
            row[n + i] = r
        free.extend(released)      # after this group's results: each freed row is read by this group only
        groups.append(_Group(ars[key[1]], np.array(a, np.int64), None if b is None else np.array(b, np.int64),
                             np.array(dst, np.int64)))
    out = _arith(t.out, rne, native) if t.out is not None else None
    leaf = _arith(t.leaf, rne, native) if t.leaf is not None else None
    return Levels(n, top - n, tuple(groups), row[n + nn - 1], out, leaf)
