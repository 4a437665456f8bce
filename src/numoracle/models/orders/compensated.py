"""A summation tree whose chains carry an error term: compensated (Kahan, Neumaier) levels inside a TreeOrder.

``CompensatedTree(tree, chains, method, flush)``: ``tree`` is a :class:`~numoracle.orders.TreeOrder`; each entry
of ``chains`` lists node indices of the tree, bottom first, where node ``chains[k][i + 1]`` has node
``chains[k][i]`` as a child (a chain). The chain's first node's children are its start ``s`` (the first child)
and its first input; every later node adds its other child ``x``. Every other node is the tree's own plain
rounding. A chain's nodes are two-child additions of one step (its format and rounding); with ``s`` the running
sum and ``c = +0`` the error term:

* ``method="kahan"`` (Kahan 1965): per input x, ``y = fl(x - c)``, ``t = fl(s + y)``, ``c = fl(fl(t - s) - y)``
  (+0 where that is not finite, as YNNPACK's ``kahan_sum`` guards it; a kernel without the guard differs only
  after an overflow), ``s = t``. The chain's value is ``s``; ``flush=True`` adds one more step with input +0
  (``s = fl(s + fl(0 - c))``: the error term folded in, as YNNPACK's last ``accumulate(0)`` does when its level-1
  accumulator is empty).
* ``method="neumaier"`` (Neumaier 1974; Kahan-Babuska): per input x, ``t = fl(s + x)``, the exact error of that
  addition (TwoSum: ``b' = fl(t - s)``, ``a' = fl(t - b')``, ``e = fl(fl(s - a') + fl(x - b'))``, the same value
  as Neumaier's branch on ``|s| >= |x|`` without overflow), ``c = fl(c + e)``, ``s = t``; the chain's value is
  ``fl(s + c)`` (``flush`` must be True: the correction is part of the method).
* ``err``: the format of the error term's operations (``c`` and the roundings that make it; None: the chain's
  own). A float32 Kahan sum that keeps ``c`` in float64 is ``err="fp64"``: ``c = fl64(fl64(t - s) - y)``, and
  ``y = fl(x - c)`` rounds once to the chain's format.

simulate runs the plain parts as TreeOrder does (chains of one step as one ``chain`` wave); the compensated chains
of one level and length run side by side, one ``add`` / ``sub`` / ``subz`` wave per operation and step. The bounds
read the schedule's depth (``ScheduleOrder``, as :class:`~numoracle.orders.YnnSum`): every operation of a
compensated step counts as a rounding on the path, a bound of the plain tree's form, looser than compensated
summation needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.args import check_bool, check_choice
from .basic import BlockFMA, Schedule, Wave, float_format
from .cpu import ScheduleOrder
from .tree import TreeOrder, _TreeBuilder

__all__ = ["CompensatedTree", "METHODS"]

METHODS = ("kahan", "neumaier")


@dataclass(frozen=True)
class CompensatedTree(ScheduleOrder):
    """A TreeOrder whose ``chains`` (node indices, bottom first) are compensated sums (module docstring)."""

    tree: Any
    chains: Any = ()
    method: str = "kahan"
    flush: bool = False
    err: Any = None

    def __post_init__(self):
        if not isinstance(self.tree, TreeOrder):
            raise TypeError(f"CompensatedTree tree must be a TreeOrder, got {type(self.tree).__name__}")
        object.__setattr__(self, "method", check_choice(self.method, "CompensatedTree method", METHODS))
        object.__setattr__(self, "flush", check_bool(self.flush, "CompensatedTree flush"))
        object.__setattr__(self, "err", float_format(self.err, "CompensatedTree err (the error term's format)"))
        if self.method == "neumaier" and not self.flush:
            raise ValueError("CompensatedTree method 'neumaier' adds its error term at the end of the chain: give "
                             "flush=True")
        t = self.tree
        chains = tuple(tuple(int(i) for i in c) for c in self.chains)
        seen: set[int] = set()
        for c in chains:
            if not c:
                raise ValueError("CompensatedTree chains: each chain lists at least one node")
            for k, i in enumerate(c):
                if not 0 <= i < len(t.nodes) or i in seen:
                    raise ValueError(f"CompensatedTree chains: node {i} is not a node of the tree (0.."
                                     f"{len(t.nodes) - 1}) or is in two chains")
                seen.add(i)
                if len(t.nodes[i]) != 2 or isinstance(t.step_of(i), BlockFMA):
                    raise ValueError(f"CompensatedTree chains: node {i} is not a two-child addition {t.nodes[i]}")
                if k and t.n + c[k - 1] not in t.nodes[i]:
                    raise ValueError(f"CompensatedTree chains: node {i} does not read node {c[k - 1]} (a chain "
                                     "lists nodes bottom first, each reading the previous)")
                if t.step_of(i) != t.step_of(c[0]):
                    raise ValueError(f"CompensatedTree chains: node {i} has another step than node {c[0]}: one "
                                     "chain rounds in one format and mode")
        object.__setattr__(self, "chains", chains)

    @property
    def depth(self) -> int:
        """The tree's depth (its additions on the deepest path; a Kahan step's extra operations not counted)."""
        return self.tree.depth

    def text(self, limit: int = 256) -> str:
        """The tree's text (TreeOrder.text), then the compensated chains' node indices."""
        return f"{self.tree.text(limit)}; {self.method} chains (nodes): {list(self.chains)}"

    def draw(self, ax: Any = None, *, max_leaves: int = 64) -> Any:
        """The tree's picture (TreeOrder.draw), its title naming the compensated chains."""
        ax = self.tree.draw(ax, max_leaves=max_leaves)
        ax.set_title(f"{ax.get_title()}; {len(self.chains)} {self.method} chains")
        return ax

    def slots(self) -> int:
        return self.tree.n

    def _schedule(self, n: int, key: tuple) -> Schedule:
        if n != self.tree.n:
            raise ValueError(f"this CompensatedTree sums n = {self.tree.n} terms; the reduction has K = {n}")
        return _Builder(self, key).build()


class _Builder(_TreeBuilder):
    """The TreeOrder's schedule with the compensated chains taken out of the plain chains and run step by step."""

    def __init__(self, o: CompensatedTree, key: tuple):
        super().__init__(o.tree, key)
        self.o = o
        self.comp = {c[0]: c for c in o.chains}      # first node -> chain
        self.member = self._kept = frozenset(i for c in o.chains for i in c)
        self.prev = {c[k]: c[k - 1] for c in o.chains for k in range(1, len(c))}

    def _continues(self, i: int, ch: tuple, height: np.ndarray) -> int:
        """A compensated chain's later node continues it; other nodes chain as in a TreeOrder, never onto one."""
        if i in self.member:
            return self.prev.get(i, -1)
        return super()._continues(i, ch, height)

    def _level(self, chains: list[list[int]], ref: np.ndarray, raw: np.ndarray, zero: int | None) -> None:
        comp = [c for c in chains if c[0] in self.comp]
        plain = [c for c in chains if c[0] not in self.comp]
        if plain:
            super()._level(plain, ref, raw, zero)
        groups: dict[tuple, list[list[int]]] = {}
        for c in comp:
            groups.setdefault((self._wkey(self.t.step_of(c[0])), len(c)), []).append(c)
        for (wkey, _), cs in groups.items():
            self._compensated(cs, wkey, ref)

    def _op(self, kind: str, wkey: tuple, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ids = self.new(a.size)
        self.waves.append(Wave(kind, wkey, ids, np.asarray(a, np.int64), np.asarray(b, np.int64)))
        return ids

    def _compensated(self, cs: list[list[int]], wkey: tuple, ref: np.ndarray) -> None:
        """Chains of one length and step, side by side: the start, then each input, then the end."""
        t, n = self.t, self.t.n
        s = np.array([ref[t.nodes[c[0]][0]] for c in cs], np.int64)
        inputs = [np.array([ref[t.nodes[c[0]][1]] for c in cs], np.int64)]
        for k in range(1, len(cs[0])):
            inputs.append(np.array([ref[next(r for r in t.nodes[c[k]] if r != n + c[k - 1])] for c in cs], np.int64))
        ekey = wkey if self.o.err is None else (self.o.err, wkey[1])
        add = lambda a, b: self._op("add", wkey, a, b)        # noqa: E731
        sub = lambda a, b: self._op("sub", wkey, a, b)        # noqa: E731
        esub = lambda a, b: self._op("sub", ekey, a, b)       # noqa: E731
        eadd = lambda a, b: self._op("add", ekey, a, b)       # noqa: E731
        c_err: np.ndarray | None = None
        if self.o.method == "kahan":
            for x in inputs:
                y = x if c_err is None else sub(x, c_err)     # c = +0: y = x exactly
                tt = add(s, y)
                c_err = self._op("subz", ekey, esub(tt, s), y)
                s = tt
            if self.o.flush:
                zeros = self.new(len(cs))
                self.waves.append(Wave("const", wkey, zeros, const=0.0))
                s = add(s, sub(zeros, c_err))
        else:
            for x in inputs:
                tt = add(s, x)
                bp = esub(tt, s)
                e = eadd(esub(s, esub(tt, bp)), esub(x, bp))
                c_err = e if c_err is None else eadd(c_err, e)
                s = tt
            s = add(s, c_err)
        ref[n + np.array([c[-1] for c in cs])] = s
