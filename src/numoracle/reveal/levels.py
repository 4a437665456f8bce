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
from typing import Any

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
    a: Any              # rows of W: a slice (one block) or an index array
    b: Any
    dst: slice


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
    terms: np.ndarray   # the term in each of W's first n rows (the order the levels read them: one block a level)
    quantum: float      # the smallest quantum of the nodes' formats (their values are multiples of it)

    @staticmethod
    def of(order: object) -> Levels | None:
        """The level plan of a TreeOrder of additions and rounding nodes; None where simulate must run it."""
        if not isinstance(order, TreeOrder) or not order.nodes:
            return None
        try:
            return _plan(order, native_fp32_ok())
        except _Uncovered:
            return None

    def run(self, W: np.ndarray, quantum: float = 0.0) -> np.ndarray:
        """The outputs (one per column of W) for W whose row i < n holds term ``terms[i]``; W has n + slots rows
        and is overwritten (the terms too, where ``leaf`` rounds them). ``quantum``: a power of two every term is a
        multiple of (0: unknown); with the nodes' own (``self.quantum``) at least 2^-179, every sum below FP32's
        normal range is exact in float64 (a multiple of it below 2^-126: at most 53 bits) and _add32 need not look
        for them."""
        n = self.n
        tiny = min(quantum, self.quantum) < 2.0**-179
        with np.errstate(all="ignore"):
            if self.leaf is not None:
                W[:n] = self.leaf.round(W[:n])
            for ar, a, b, dst, how in self._steps:
                if how == 0:
                    W[dst] = ar.round(W[a])
                elif how == 2:
                    W[dst] = _add32(ar, W[a], W[b], tiny)
                else:
                    W[dst] = ar.add(W[a], W[b], "f64" if ar.is64 else "odd")
            r = W[self.root]
            return self.out.round(r) if self.out is not None else r

    @property
    def _steps(self) -> list:
        """The groups as (arithmetic, a, b, dst, how): 0 a rounding, 2 an FP32 addition (_add32), 1 another."""
        steps = self.__dict__.get("_steps_")
        if steps is None:
            steps = [(g.ar, g.a, g.b, g.dst, 0 if g.b is None else 2 if g.ar.native else 1) for g in self.groups]
            object.__setattr__(self, "_steps_", steps)
        return steps


_LOW = np.uint64((1 << 29) - 1)      # the float64 bits below FP32's last place
_MID = np.uint64(1 << 28)            # ... as they are at an FP32 midpoint
_MIN_NORMAL32 = 2.0**-126


def _add32(ar: Arith, x: np.ndarray, y: np.ndarray, tiny: bool = True) -> np.ndarray:
    """fl32(x + y) (IEEE binary32, RNE) for exact float64 x, y: ``Arith.add``'s "odd" plan with its test in fewer
    passes, as float32 values. s = fl64(x + y) cast to float32 is one correct rounding of x + y unless s is an FP32
    midpoint (Arith's docstring: no grid point or midpoint lies strictly between s and x + y) or below FP32's
    normal range (where the midpoints lie elsewhere); those take the exact route (``Arith.add_exact``). Above the
    range no test is needed: the cast rounds s to max_finite or inf as it rounds x + y, the midpoint
    2^128 - 2^103 itself being caught by the midpoint test. ``tiny`` False: no sum below the normal range can be
    inexact (Levels.run), so those are not looked for."""
    s = x + y
    need = (s.view(np.uint64) & _LOW) == _MID
    if tiny:
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
    # each node's operands, a value child first (fl(x + y) = fl(y + x)): a chain's running sums are one operand
    first = [ch[1] if len(ch) == 2 and ch[0] < n <= ch[1] else ch[0] for ch in nodes]
    second = [(ch[0] if ch[0] < n <= ch[1] else ch[1]) if len(ch) == 2 else -1 for ch in nodes]
    height = [0] * (n + nn)
    for i in range(nn):
        x, y = height[first[i]], height[second[i]] if second[i] >= 0 else 0
        height[n + i] = (x if x > y else y) + 1
    # levels in order; within a level, one group per (step, one or two children)
    S = len(ars)
    key = [(height[n + i] * S + kinds[i]) * 2 + (second[i] >= 0) for i in range(nn)]
    order = sorted(range(nn), key=key.__getitem__)
    rows = _Rows(n, nn)
    groups = []
    j = 0
    while j < nn:
        k0, j0 = key[order[j]], j
        while j < nn and key[order[j]] == k0:
            j += 1
        members = order[j0:j]
        if len(members) > 1 and first[members[0]] >= n:
            members.sort(key=lambda i: rows.row[first[i]])     # running sums in the order of their rows
        a = rows.read([first[i] for i in members])
        b = rows.read([second[i] for i in members]) if second[members[0]] >= 0 else None
        dst = rows.write([n + i for i in members], a, b)
        groups.append(_Group(ars[kinds[members[0]]], a, b, dst))
    out = _arith(t.out, rne, native) if t.out is not None else None
    leaf = _arith(t.leaf, rne, native) if t.leaf is not None else None
    assert rows.placed == n, "every term is read once"
    quantum = min(2.0 ** (a.fmt.emin - a.fmt.man_bits) for a in ars + [x for x in (out, leaf) if x is not None])
    return Levels(n, rows.top - n, tuple(groups), rows.row[n + nn - 1], out, leaf, np.asarray(rows.term_at, np.int64),
                  quantum)


class _Rows:
    """The rows of the work array: terms in the order the levels read them (a level's terms one block), values in
    reused rows (a chain's running sums updated in place: each value is read once, by its parent)."""

    def __init__(self, n: int, nn: int):
        self.n, self.top, self.placed = n, n, 0
        self.row = [-1] * (n + nn)             # ref -> row, once placed (terms) or computed (values)
        self.term_at = [0] * n                 # the term in each term row
        self.free: list[int] = []

    def read(self, refs: list[int]) -> Any:
        """The operand of these refs: a slice where the rows are consecutive, else an index array. Terms are
        placed here, consecutively."""
        row, n = self.row, self.n
        for r in refs:
            if r < n and row[r] < 0:
                row[r] = self.placed
                self.term_at[self.placed] = r
                self.placed += 1
        out = [row[r] for r in refs]
        lo = out[0]
        if out[-1] - lo == len(out) - 1 and out == list(range(lo, lo + len(out))):
            return slice(lo, lo + len(out))
        return np.array(out, np.int64)

    def write(self, refs: list[int], a: Any, b: Any) -> slice:
        """Rows for the group's results: the rows of its value operand where they are one block (in place),
        else a block of freed or new rows; the operands' other value rows freed."""
        n = self.n
        dst = a if isinstance(a, slice) and a.start >= n else b if isinstance(b, slice) and b.start >= n else None
        for x in (a, b):
            if x is not None and x is not dst:
                self.free.extend(r for r in (range(x.start, x.stop) if isinstance(x, slice) else x.tolist()) if r >= n)
        if dst is None:
            k, f = len(refs), self.free
            f.sort()
            at = next((i for i in range(len(f) - k + 1) if f[i + k - 1] - f[i] == k - 1), None)
            if at is not None:          # (sorted and distinct: k consecutive rows)
                dst = slice(f[at], f[at] + k)
                del f[at:at + k]
            else:
                dst = slice(self.top, self.top + k)
                self.top += k
        row = self.row
        for ref, r in zip(refs, range(dst.start, dst.stop)):
            row[ref] = r
        return dst
