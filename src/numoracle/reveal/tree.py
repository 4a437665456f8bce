"""The summation tree of a kernel from masking probes (FPRev's idea), for every output position at once.

A probe puts +M at term i, -M at term j and one unit u at every other term. M absorbs every partial sum of
units it meets (M + c u = M in the accumulator), and M - M = 0 exactly where i and j meet: the output counts the
units outside the smallest subtree holding i and j, so ``size(i, j) = n - output / u`` is that subtree's leaf
count. From leaf a, the sizes ``size(a, j)`` order the other leaves along a's path to the root: leaves of equal
size hang off the same path node, and each such group is revealed the same way (recursively, from one of its
leaves). A group whose leaves meet a's subtree only at the group's parent is a set of siblings there: a node of
more than two children (a fused node). Every answer is checked against the tree it implies (the path node of
size s holds exactly s leaves), so a kernel that is not a tree of exact additions is reported, not guessed.

All output positions see the same probe (rows of A and columns of B repeat); the search follows one *leader*
position, and every position whose answers ever differ from the leader's is searched again with its own leader.
Calls: n - 1 for a chain, about (n/2) log2 n for a balanced tree (FPRev's recursive search), times the number of
distinct trees among the output positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .probe import Prober, RevealError

__all__ = ["Masking", "search_tree", "to_nodes"]


class Masking:
    """The probe magnitudes for one kernel: unit u = 2^eu at the counted terms, +-M = +-2^eM at the pair."""

    def __init__(self, p: Prober):
        f, g = p.fmt, p.out_fmt
        assert g is not None
        prod = 1 if p.op == "sum" else 2
        # +-M: the largest power of two of the terms, inside the output's range and (unless the inputs are wider)
        # FP32's; smaller while a probe overflows (a narrower accumulator)
        top = min(prod * f.emax, getattr(g, "emax", 62) - 2, max(125, f.emax - 1))
        low = max(prod * (f.emin - f.man_bits), getattr(g, "emin", -1000) - getattr(g, "man_bits", 0))
        need = (max(p.n, 2) - 1).bit_length() + 2   # ceil(log2 n), in integers
        if p.n >= 2 ** getattr(g, "precision", 64):
            raise RevealError(f"the output format {g.name} cannot count {p.n} terms exactly (p = {g.precision}); "
                              "reveal needs n < 2^p of the output format")
        self.eu = max(low, top - 66 - need)
        c0 = p.calls
        while top - self.eu > need + 12:
            p.set_masking(2.0**self.eu, 2.0**top)
            if np.isfinite(p.pair(0, 1)).all():
                break
            top -= 2
            self.eu = max(low, top - 66 - need)
        self.eM = top
        while self.eu < top - need - 12:   # calibrate: n and n - 1 units must come back exactly (no underflow)
            u, t = 2.0**self.eu, np.full(p.n, 2.0**self.eu)
            if (p.terms(t) == p.n * u).all():
                t[0] = 0
                if (p.terms(t) == (p.n - 1) * u).all():
                    break
            self.eu += 1
        self.calls = p.calls - c0
        self.absorbs = self.eM - self.eu - need      # accumulators of up to this many bits are masked
        if self.absorbs < 12:
            raise RevealError(f"{f.name} inputs leave too little range to mask partial sums "
                              f"(2^{self.eM} against units 2^{self.eu})")
        self.u, self.M = 2.0**self.eu, 2.0**self.eM


class _Search:
    def __init__(self, p: Prober, mask: Masking, positions: np.ndarray, leader: int):
        self.p, self.m, self.n = p, mask, p.n
        self.positions, self.leader = positions, leader
        self.diverged = np.zeros(positions.size, bool)
        p.set_masking(mask.u, mask.M)

    def ask(self, a: int, js: list[int]) -> np.ndarray:
        """size(a, j) at the leader for every j (one call each); marks positions that answer otherwise."""
        if self.rows:
            return self._ask_rows(a, js)
        out = np.empty(len(js), np.int64)
        for k, j in enumerate(js):
            vals = self.p.pair(a, j)[self.positions]
            c = vals / self.m.u
            if not np.isfinite(c).all():
                raise RevealError(f"fn returned {vals[~np.isfinite(c)][0]} on finite inputs (probe {a}, {j})")
            size = self.n - c
            if not (c == np.round(c)).all() or (size < 2).any() or (size > self.n).any():
                bad = vals[(c != np.round(c)) | (size < 2) | (size > self.n)][0]
                raise _NotATree(f"a masking probe (+M at term {a}, -M at term {j}, units elsewhere) gave {bad!r}, "
                                f"not a count of units (a multiple of {self.m.u!r} up to {self.n - 2} units): the "
                                "kernel does not add these terms as a tree of exact additions with M absorbing")
            lead = size[self.leader]
            self.diverged |= size != lead
            out[k] = int(lead)
        return out

    rows = False

    def _ask_rows(self, a: int, js: list[int]) -> np.ndarray:
        """Row r of the matmul answers size(a, js[r]): M queries per call; every column of a row must agree."""
        out = np.empty(len(js), np.int64)
        M = self.p.out_shape[0]
        for lo in range(0, len(js), M):
            part = js[lo:lo + M]
            vals = self.p.pair_rows(a, part)[:len(part)]
            c = vals / self.m.u
            size = self.n - c
            if not np.isfinite(c).all() or not (c == np.round(c)).all() or (size < 2).any():
                raise _NotATree(f"a masking probe (+M at term {a}) gave {vals.ravel()[0]!r}, not a count of units")
            if not (size == size[:, :1]).all():
                raise _Columns("output columns answer differently")
            out[lo:lo + len(part)] = size[:, 0].astype(np.int64)
        return out

    def forest(self, G: list[int], top: int | None, depth: int) -> list[Any]:
        """The subtrees whose leaves are G: G is a whole tree (top None) or some children of a node of size top."""
        if len(G) == 1:
            return [G[0]]
        a = G[0] if depth % 2 == 0 else G[-1]
        others = [j for j in G if j != a]
        s = self.ask(a, others)
        sib = (s == top) if top is not None else np.zeros(len(others), bool)
        inside = [j for j, x in zip(others, sib) if not x]
        sin = s[~sib]
        node: Any = a
        for sk in np.unique(sin):
            if top is not None and sk > top or 1 + int((sin <= sk).sum()) != sk:
                raise _NotATree(f"the probes from term {a} imply a subtree of {int(sk)} terms holding "
                                f"{1 + int((sin <= sk).sum())}: no summation tree gives these answers")
            H = [j for j, x in zip(inside, sin) if x == sk]
            node = (node, *self.forest(H, int(sk), depth + 1))
        rest = [j for j, x in zip(others, sib) if x]
        return [node] + (self.forest(rest, top, depth + 1) if rest else [])


class _NotATree(RevealError):
    """The masking answers are not those of a summation tree."""


class _Columns(RevealError):
    """Row-parallel probing saw columns that differ: search position by position instead."""


def search_tree(p: Prober, mask: Masking, rows: bool = False) -> list[tuple[Any, np.ndarray]]:
    """[(nested tree, positions it holds for)]: one search per distinct tree among the output positions.

    ``rows`` (matmul): each row of A carries its own probe, M probes per call, on the assumption that every
    output position has the same tree (the caller verifies it and searches again without ``rows`` if not)."""
    npos = max(1, int(np.prod(p.out_shape, dtype=np.int64)))
    if rows:
        s = _Search(p, mask, np.arange(npos), 0)
        s.rows = p.set_row_masking(mask.u, mask.M)
        if s.rows:
            try:
                return [(_one(s.forest(list(range(p.n)), None, 0)), np.arange(npos))]
            except (_Columns, _NotATree, RecursionError):
                pass
    todo = np.arange(npos)
    found = []
    while todo.size:
        s = _Search(p, mask, todo, 0)
        try:
            trees = s.forest(list(range(p.n)), None, 0)
        except RecursionError:
            raise RevealError("the tree is too deep for the recursive search (a chain the probes peel one leaf "
                              "at a time)") from None
        found.append((_one(trees), todo[~s.diverged]))
        todo = todo[s.diverged]
    return found


def _one(trees: list) -> Any:
    if len(trees) != 1:
        raise _NotATree("the probes give a forest, not one tree")
    return trees[0]


def to_nodes(tree: Any, n: int) -> list[tuple[int, ...]]:
    """A nested tree (leaves are term ints, nodes tuples of children) as TreeOrder nodes (post-order)."""
    nodes: list[tuple[int, ...]] = []
    stack: list[tuple[Any, bool]] = [(tree, False)]
    done: list[int] = []
    while stack:
        t, expanded = stack.pop()
        if not isinstance(t, tuple):
            done.append(int(t))
            continue
        if expanded:
            k = len(t)
            ch = tuple(done[len(done) - k:])
            del done[len(done) - k:]
            nodes.append(ch)
            done.append(n + len(nodes) - 1)
            continue
        stack.append((t, True))
        for c in reversed(t):
            stack.append((c, False))
    return nodes


NotATree = _NotATree
