"""Schedules: the data-flow graph of an accumulation order (waves of roundings over value slots).

An Order builds a Schedule for n terms; simulate runs it. These are the building blocks the orders share:
chains, pairwise combination, parallel groups and slices combined by an outer order."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# =====================================================================================================
# Schedule IR: an order compiles, for a given K, into "waves" of independent operations. Values are
# numbered (SSA); an operand ref r >= 0 names value r, r < 0 names term (-1 - r). Every wave runs as
# one vectorised numpy step across its width and the whole batch of independent outputs.
# Kinds: "const" (dst = const), "load" (dst = fl(a)), "add" (dst = fl(a + b)),
#        "sub" (dst = fl(a - b)), "subz" (the same, +0 where the result is not finite: a compensated sum's
#        error term), "chain" (s = a; s = fl(s + b[:, j]) for j = 0..L-1; dst = s: a run of sequential additions),
#        "bfma" (dst = BlockFMA(c=a; terms b[:, 0..N-1])).
# key: (Format | None, rounding str | None) for const/load/add/chain (None: simulate's acc / rounding);
#      (BlockFMA, Format | None) for bfma.
# =====================================================================================================


@dataclass(eq=False)
class Wave:
    """One step of a schedule: independent roundings of one kind over value slots (the kinds are listed above)."""

    kind: str
    key: tuple
    dst: np.ndarray
    a: np.ndarray | None = None
    b: np.ndarray | None = None
    const: float = 0.0

    def group(self) -> tuple:
        extra = self.b.shape[1] if self.kind in ("bfma", "chain") else np.float64(self.const).tobytes()
        return (self.kind, self.key, extra)


@dataclass(eq=False)
class Schedule:
    """What an order compiles to over n terms: waves of roundings over value slots, and the slot of the result."""

    n_terms: int
    n_vals: int
    waves: list = field(default_factory=list)
    result: int = 0  # operand ref (a value, or a bare term when the reduction is one term)


def _shift(r: np.ndarray, voff: np.ndarray, toff: np.ndarray) -> np.ndarray:
    """Refs of copies: value ids shifted by voff, term refs by toff (broadcast over copies)."""
    if voff.size == 1:
        v, t = int(voff[0]), int(toff[0])
        return r if v == 0 and t == 0 else np.where(r >= 0, r + v, r - t)
    shape = (-1,) + (1,) * r.ndim
    v, t = voff.reshape(shape), toff.reshape(shape)
    return np.where(r >= 0, r + v, r - t).reshape((-1,) + r.shape[1:])


def parallel_schedules(groups: list[tuple[Schedule, np.ndarray]]) -> tuple[list, np.ndarray, int]:
    """Run independent schedules side by side. groups: (schedule, term offsets of its copies).

    Returns (waves, result refs of every copy in group order, total values). Wave i of every copy is
    merged with wave i of the others when kind and key agree (they touch disjoint values).
    """
    streams, results, nv = [], [], 0
    for s, toffs in groups:
        toffs = np.asarray(toffs, np.int64)
        voffs = nv + s.n_vals * np.arange(toffs.size, dtype=np.int64)
        nv += s.n_vals * toffs.size
        results.append(_shift(np.array([s.result], np.int64), voffs, toffs))
        streams.append([Wave(w.kind, w.key, _shift(w.dst, voffs, toffs),
                             None if w.a is None else _shift(w.a, voffs, toffs),
                             None if w.b is None else _shift(w.b, voffs, toffs), w.const) for w in s.waves])
    waves = []
    for i in range(max((len(st) for st in streams), default=0)):
        merged: dict[tuple, list] = {}
        for st in streams:
            if i < len(st):
                merged.setdefault(st[i].group(), []).append(st[i])
        for ws in merged.values():
            w0 = ws[0]
            dst, a, b = ([None if getattr(w0, f) is None else np.concatenate([getattr(w, f) for w in ws])
                          for f in ("dst", "a", "b")])
            waves.append(Wave(w0.kind, w0.key, dst, a, b, w0.const))
    return waves, np.concatenate(results) if results else np.empty(0, np.int64), nv


def substitute(s: Schedule, refs: np.ndarray, voff: int) -> tuple[list, int]:
    """Waves of ``s`` reading ``refs[t]`` for its term t, its values moved up by ``voff``."""
    refs = np.asarray(refs, np.int64)

    def sub(r):
        r = np.asarray(r, np.int64)
        return np.where(r >= 0, r + voff, refs[np.where(r < 0, -1 - r, 0)])

    waves = [Wave(w.kind, w.key, w.dst + voff, None if w.a is None else sub(w.a),
                  None if w.b is None else sub(w.b), w.const) for w in s.waves]
    return waves, int(sub(np.array([s.result]))[0])


def const_schedule(n_terms: int, value: float, key: tuple) -> Schedule:
    return Schedule(n_terms, 1, [Wave("const", key, np.array([0]), const=value)], 0)


def chain_schedule(n: int, key: tuple, start: float) -> Schedule:
    """s = start; s = fl(s + t_i), i = 0..n-1 (one "chain" wave)."""
    waves = [Wave("const", key, np.array([0]), const=start)]
    if n:
        waves.append(Wave("chain", key, np.array([1]), np.array([0]), -1 - np.arange(n, dtype=np.int64)[None, :]))
    return Schedule(n, len(waves), waves, len(waves) - 1)


def combine2(left: Schedule, right: Schedule, key: tuple) -> Schedule:
    """fl(left + right), the two sides evaluated side by side."""
    waves, res, nv = parallel_schedules([(left, [0]), (right, [left.n_terms])])
    waves.append(Wave("add", key, np.array([nv]), res[:1], res[1:]))
    return Schedule(left.n_terms + right.n_terms, nv + 1, waves, nv)


def split_groups(sizes: list[int], build_one) -> tuple[list[tuple[Schedule, np.ndarray]], np.ndarray]:
    """Group consecutive slices by size: [(schedule for that size, term offsets of its slices)], and
    the slice indices in group order."""
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    order, groups = [], []
    for size in sorted(set(sizes)):
        idx = np.flatnonzero(np.asarray(sizes) == size)
        groups.append((build_one(size), starts[idx]))
        order.append(idx)
    return groups, np.concatenate(order)


class WaveBuilder:
    """Waves of one schedule with fresh value ids (SSA), and the steps the orders build from: chains from a start
    (or +0), additions where +0 is left out, terms rounded before they are added, the schedule's result."""

    def __init__(self, key: tuple):
        self.key, self.nv, self.waves = key, 0, []

    def new(self, k: int) -> np.ndarray:
        """k fresh value ids."""
        ids = np.arange(self.nv, self.nv + k, dtype=np.int64)
        self.nv += k
        return ids

    def zeros(self, k: int) -> np.ndarray:
        ids = self.new(k)
        self.waves.append(Wave("const", self.key, ids, const=0.0))
        return ids

    def chain(self, start: np.ndarray, addends: np.ndarray) -> np.ndarray:
        ids = self.new(start.size)
        self.waves.append(Wave("chain", self.key, ids, np.asarray(start, np.int64), np.asarray(addends, np.int64)))
        return ids

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        ids = self.new(x.size)
        self.waves.append(Wave("add", self.key, ids, np.asarray(x, np.int64), np.asarray(y, np.int64)))
        return ids

    def sub(self, x: np.ndarray, y: np.ndarray, finite: bool = False) -> np.ndarray:
        """fl(x - y); finite: +0 where that is not finite (kind "subz")."""
        ids = self.new(x.size)
        self.waves.append(Wave("subz" if finite else "sub", self.key, ids, np.asarray(x, np.int64),
                               np.asarray(y, np.int64)))
        return ids

    def load(self, refs: np.ndarray) -> np.ndarray:
        """Each ref rounded to this builder's format (a term rounded before it is added)."""
        ids = self.new(refs.size)
        self.waves.append(Wave("load", self.key, ids, np.asarray(refs, np.int64)))
        return ids

    def chain_from(self, start: np.ndarray | None, addends: np.ndarray) -> np.ndarray:
        """Per row of addends (W, L): s = start (None: +0); s = fl(s + a_j). Returns (W,) value ids."""
        w = addends.shape[0]
        s = self.zeros(w) if start is None else np.asarray(start, np.int64)
        return s if addends.shape[1] == 0 else self.chain(s, addends)

    def add_opt(self, x: np.ndarray | None, y: np.ndarray | None) -> np.ndarray | None:
        """fl(x + y), where None is +0 (left out: adding +0 is exact)."""
        if x is None or y is None:
            return y if x is None else x
        return self.add(x, y)

    def terms(self, n: int, fma: bool) -> np.ndarray:
        """Refs of terms 0..n-1 as the additions read them: exact (``fma``: products fused into the addition),
        else each rounded to this builder's format first (a product rounded before it is added)."""
        t = -1 - np.arange(n, dtype=np.int64)
        return t if fma or n == 0 else self.load(t)

    def result(self, n: int, res: np.ndarray | None) -> Schedule:
        """The Schedule of these waves over n terms with result res ((1,) ids; None: +0, no term added)."""
        if res is None:
            res = self.zeros(1)
        return Schedule(n, self.nv, self.waves, int(res[0]))
