"""Explicit-tree orders: a summation tree written out node by node, and orders that differ per output position.

``TreeOrder(n, nodes, kinds, steps, acc, leaf, out)`` is the order :func:`numoracle.reveal_order` returns; any
association of n terms can be written as one:

* The terms are refs ``0 .. n-1``; node i is ref ``n + i``. ``nodes[i]`` lists node i's children (terms or
  earlier nodes); the last node is the root. Every term and every node but the root is a child exactly once.
* ``steps[kinds[i]]`` says what node i does (``kinds=()``: every node does ``steps[0]``):

  - ``(fmt, mode)``, two children: ``fl(x + y)``, the exact sum rounded once to ``fmt`` with ``mode``
    (``None``: simulate's ``acc`` / ``rounding``); one child: ``fl(x)``, that child rounded (a product rounded
    before it enters a chain, as ``s = 0; s = fl(s + a_0 b_0)`` does with its first product);
  - a :class:`~numoracle.orders.BlockFMA` (a *fused node*): one block FMA ``BFMA(c; t_1..t_k)``: its children are
    terms and at most one node, the accumulator input ``c`` (+0 when there is none), all added in one step
    as the BlockFMA docstring says (alignment, truncation, carry bit, one normalisation).
* ``leaf``: terms entering a two-child node are first rounded to this format (a product rounded before it is
  added: no FMA); ``None``: they enter exactly.
* ``out``: the root's value is rounded once more to this format (a kernel that stores a narrower type).

``n = 1`` with no nodes is ``fl(t_0)``. ``TreeOrder.from_text("((0+1)+(2+3))")`` reads the small text form that
:meth:`TreeOrder.text` writes. simulate runs the tree as a Schedule: chains of two-child nodes (a node whose
heavier child is a node of the same step) become one ``chain`` wave, the rest ``add`` and ``bfma`` waves,
level by level, each vectorised over every output.

``PerPosition(orders, index)``: output position ``p`` of a matmul (or of a batched sum) is reduced by
``orders[index[p]]``; simulate runs each distinct order once and picks its positions.
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.formats.policy import Rounding
from .basic import BlockFMA, Order, Schedule, Wave, float_format, positive_int
from .schedule import WaveBuilder
from .spec import OrderSpec

__all__ = ["TreeOrder", "PerPosition"]


def _norm_step(s: Any) -> Any:
    if isinstance(s, BlockFMA):
        return s
    if s is None:
        return (None, None)
    if not isinstance(s, tuple) or len(s) != 2:
        raise ValueError(f"TreeOrder step must be (format or None, rounding or None) or a BlockFMA, got {s!r}")
    fmt, mode = s
    return (float_format(fmt, "TreeOrder step format"), None if mode is None else Rounding.of(mode).value)


def _index(x: Any, what: str) -> int:
    """x as an int index; a float (1.9) is refused, not truncated."""
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{what} must be an int (a ref or a step index), got {type(x).__name__} {x!r:.40}") from None


def _plain_nodes(nodes: Any, n: int, steps: tuple) -> tuple | None:
    """``nodes`` itself where it is already canonical and valid for addition steps: a tuple of tuples of one or two
    plain ints, each a term or an earlier node (checked in one vectorised pass: the per-node checks of
    ``_canonical`` cost milliseconds on a tree of thousands of nodes); None where the general path must look."""
    if type(nodes) is not tuple or any(isinstance(st, BlockFMA) for st in steps):
        return None
    if not all(type(ch) is tuple for ch in nodes):
        return None
    lens = list(map(len, nodes))
    if not lens or not set(lens) <= {1, 2}:
        return None
    flat = list(itertools.chain.from_iterable(nodes))
    if set(map(type, flat)) != {int}:
        return None
    refs = np.array(flat, np.int64)
    owner = np.repeat(np.arange(len(nodes), dtype=np.int64), lens)
    return nodes if bool(((refs >= 0) & (refs < n + owner)).all()) else None


@dataclass(frozen=True)
class TreeOrder(Order):
    """An explicit summation tree over ``n`` terms (see the module docstring)."""

    n: int
    nodes: Any = ()
    kinds: Any = ()
    steps: Any = ((None, None),)
    acc: Any = None
    leaf: Any = None
    out: Any = None

    def __post_init__(self):
        n = positive_int(self.n, "TreeOrder n (terms)")
        object.__setattr__(self, "n", n)
        steps = tuple(_norm_step(s) for s in (self.steps or ((None, None),)))
        nodes = _plain_nodes(self.nodes, n, steps)
        if nodes is None:
            nodes = tuple(tuple(_index(c, "TreeOrder nodes: a child") for c in ch) for ch in self.nodes)
        kinds = self.kinds if type(self.kinds) is tuple and set(map(type, self.kinds)) <= {int} else \
            tuple(_index(k, "TreeOrder kinds: an entry") for k in self.kinds)
        if kinds and not any(kinds):
            kinds = ()
        if kinds and (len(kinds) != len(nodes) or min(kinds) < 0 or max(kinds) >= len(steps)):
            raise ValueError(f"TreeOrder kinds: one index into steps (0..{len(steps) - 1}) per node "
                             f"({len(nodes)}), got {len(kinds)}")
        if nodes is not self.nodes or any(isinstance(st, BlockFMA) for st in steps):
            nodes = tuple(self._canonical(i, ch, steps[kinds[i] if kinds else 0], n) for i, ch in enumerate(nodes))
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "kinds", kinds)
        object.__setattr__(self, "steps", steps)
        for f in ("acc", "leaf", "out"):
            object.__setattr__(self, f, float_format(getattr(self, f), f"TreeOrder {f}"))
        self._check_tree()

    @staticmethod
    def _canonical(i: int, ch: tuple, step: Any, n: int) -> tuple:
        if any(c < 0 or c >= n + i for c in ch):
            raise ValueError(f"TreeOrder node {i}: children must be terms (0..{n - 1}) or earlier nodes "
                             f"(n + j, j < {i}), got {ch}")
        if isinstance(step, BlockFMA):
            inner = [c for c in ch if c >= n]
            if len(inner) > 1 or not ch:
                raise ValueError(f"TreeOrder node {i}: a fused (BlockFMA) node reads terms and at most one node "
                                 f"(its accumulator input), got {ch}")
            return tuple(inner) + tuple(c for c in ch if c < n)
        if len(ch) not in (1, 2):
            raise ValueError(f"TreeOrder node {i}: an addition node has two children (a rounding node one), got "
                             f"{ch}; give a node of more children a fused step (a BlockFMA in steps)")
        return ch

    def _check_tree(self) -> None:
        n, nodes = self.n, self.nodes
        if not nodes:
            if n != 1:
                raise ValueError(f"TreeOrder over n = {n} terms needs nodes (only n = 1 has none)")
            return
        n_refs = sum(map(len, nodes))
        if n_refs != n + len(nodes) - 1 and n > 2 * n_refs + 1024:   # before any array of n entries (n may be huge)
            raise ValueError(f"TreeOrder: {len(nodes)} nodes with {n_refs} children cannot be a tree over n = {n} "
                             f"terms (every term and every node except the root is a child exactly once: "
                             f"{n + len(nodes) - 1} children)")
        refs = np.fromiter(itertools.chain.from_iterable(nodes), np.int64, n_refs)
        seen = np.bincount(refs, minlength=n + len(nodes))
        seen[n + len(nodes) - 1] += 1          # the root is nobody's child
        bad = np.flatnonzero(seen != 1)
        if bad.size:
            r = int(bad[0])
            what = f"term {r}" if r < n else f"node {r - n}"
            raise ValueError(f"TreeOrder: {what} is used {int(seen[r]) - (r == n + len(nodes) - 1)} times; every "
                             "term and every node except the root (the last) must be a child exactly once")

    # ---- structure --------------------------------------------------------------------------------------
    def step_of(self, i: int) -> Any:
        return self.steps[self.kinds[i] if self.kinds else 0]

    def parents(self) -> np.ndarray:
        """Parent node index of every ref (terms, then nodes); -1 for the root."""
        par = np.full(self.n + len(self.nodes), -1, np.int64)
        for i, ch in enumerate(self.nodes):
            par[list(ch)] = i
        return par

    def path_counts(self) -> np.ndarray:
        """(n, len(steps)): how many nodes of each step lie on each term's path to the root."""
        nn = len(self.nodes)
        cnt = np.zeros((nn, len(self.steps)), np.int64)
        kinds = np.asarray(self.kinds or [0] * nn, np.int64)
        par = self.parents()
        for i in range(nn - 1, -1, -1):
            p = par[self.n + i]
            if p >= 0:
                cnt[i] = cnt[p]
            cnt[i, kinds[i]] += 1
        return cnt[par[:self.n]] if nn else np.zeros((self.n, len(self.steps)), np.int64)

    def depths(self) -> np.ndarray:
        """Roundings on each term's path to the root (the tree's depth histogram is np.bincount of this)."""
        return self.path_counts().sum(axis=1)

    @property
    def depth(self) -> int:
        return int(self.depths().max()) if self.nodes else 0

    # ---- the bounds -------------------------------------------------------------------------------------
    def spec(self) -> OrderSpec:
        counts = self.path_counts().max(axis=0) if self.nodes else np.zeros(len(self.steps), np.int64)
        parts = []
        for s, c in zip(self.steps, counts.tolist()):
            if c:
                parts.append(("bfma", s.spec(), c) if isinstance(s, BlockFMA) else ("add", s[0], s[1], c))
        totals = np.bincount(np.asarray(self.kinds or [0] * len(self.nodes), np.int64), minlength=len(self.steps))
        for s, t in zip(self.steps, totals.tolist()):   # every rounding node of a step (the underflow sites)
            if t and not isinstance(s, BlockFMA):
                parts.append(("nodes", s[0], s[1], t))
        for what in ("leaf", "out"):
            if getattr(self, what) is not None:
                parts.append((what, getattr(self, what), None, 1))
        return OrderSpec("tree", max(self.depth, 1), acc=self.acc, params=tuple(parts))

    # ---- simulate ---------------------------------------------------------------------------------------
    def _schedule(self, n: int, key: tuple) -> Schedule:
        if n != self.n:
            raise ValueError(f"this TreeOrder sums n = {self.n} terms (it was revealed or written for that length); "
                             f"the reduction has K = {n}")
        return _TreeBuilder(self, key).build()

    # ---- text and pictures ------------------------------------------------------------------------------
    def text(self, limit: int = 256) -> str:
        """The tree as nested sums: ``((0+1)+(2+3))``; a rounding node as ``{0}``; fused nodes as ``[c; 4 5 6 7]``
        (``[4 5 6 7]`` from +0)."""
        if self.n > limit:
            return (f"TreeOrder over {self.n} terms, depth {self.depth}: too large to print (limit={limit}); "
                    "see .draw() or .depths()")
        if not self.nodes:
            return "0"
        memo: dict[int, str] = {}
        for i, ch in enumerate(self.nodes):
            parts = [str(c) if c < self.n else memo.pop(c) for c in ch]
            if isinstance(self.step_of(i), BlockFMA):
                head = f"{parts[0]}; " if ch[0] >= self.n else ""
                rest = parts[1:] if ch[0] >= self.n else parts
                memo[self.n + i] = "[" + head + " ".join(rest) + "]"
            elif len(ch) == 1:
                memo[self.n + i] = "{" + parts[0] + "}"
            else:
                memo[self.n + i] = f"({parts[0]}+{parts[1]})"
        return memo[self.n + len(self.nodes) - 1]

    @classmethod
    def from_text(cls, text: str, **fields: Any) -> TreeOrder:
        """The TreeOrder of a text ``(({0}+1)+(2+3))`` of two-child and rounding nodes (as :meth:`text` writes them)."""
        tokens = re.findall(r"\d+|[(){}+]", text)
        nodes: list[tuple[int, ...]] = []
        pos = 0

        def term() -> int:
            nonlocal pos
            t = tokens[pos]
            pos += 1
            if t == "{":
                inner = term()
                pos += 1  # "}"
                nodes.append((inner,))
                return -len(nodes)
            if t != "(":
                return int(t)
            left = term()
            if tokens[pos] != "+":
                raise ValueError(f"tree text {text!r}: expected '+' at token {pos}")
            pos += 1
            right = term()
            pos += 1  # ")"
            nodes.append((left, right))
            return -len(nodes)       # node ids are fixed up once n is known

        term()
        if pos != len(tokens):
            raise ValueError(f"tree text {text!r}: unexpected text after the root")
        n = max(int(t) for t in tokens if t.isdigit()) + 1
        fix = [tuple(c if c >= 0 else n + (-c - 1) for c in ch) for ch in nodes]
        return cls(n, tuple(fix), **fields)

    def draw(self, ax: Any = None, *, max_leaves: int = 64) -> Any:
        """A picture: the tree itself for n <= max_leaves, else the histogram of leaf depths (matplotlib)."""
        try:
            import matplotlib.pyplot as plt
        except ImportError as e:  # pragma: no cover - optional dependency
            raise ImportError("TreeOrder.draw needs matplotlib: pip install matplotlib") from e
        if ax is None:
            _, ax = plt.subplots(figsize=(8, 4))
        if self.n > max_leaves or not self.nodes:
            d = self.depths()
            ax.bar(np.arange(d.max() + 1), np.bincount(d), color="tab:blue")
            ax.set_xlabel("roundings on the path to the root")
            ax.set_ylabel("terms")
            ax.set_title(f"TreeOrder over {self.n} terms: depth histogram (max {d.max()})")
            return ax
        x = np.zeros(self.n + len(self.nodes))
        y = np.zeros_like(x)
        x[:self.n] = np.arange(self.n)
        for i, ch in enumerate(self.nodes):
            r = self.n + i
            x[r] = np.mean(x[list(ch)])
            y[r] = 1 + max(y[list(ch)])
            for c in ch:
                ax.plot([x[c], x[r]], [y[c], y[r]], color="0.4", lw=1)
            fused = isinstance(self.step_of(i), BlockFMA)
            ax.plot(x[r], y[r], "s" if fused else "o", color="tab:red" if fused else "tab:blue", ms=4)
        ax.plot(x[:self.n], y[:self.n], "k.", ms=3)
        ax.set_title(f"TreeOrder over {self.n} terms (depth {self.depth}; squares: fused nodes)")
        ax.set_yticks([])
        return ax


class _TreeBuilder(WaveBuilder):
    """A TreeOrder's Schedule: chains of two-child nodes of one step, grouped into waves level by level."""

    def __init__(self, t: TreeOrder, key: tuple):
        super().__init__(key)
        self.t = t

    def _wkey(self, step: tuple) -> tuple:
        return (step[0] if step[0] is not None else self.key[0], step[1] if step[1] is not None else self.key[1])

    def _chains(self) -> tuple[list[list[int]], np.ndarray]:
        """Chains of nodes (bottom first): a two-child node continues its heavier child's chain when that child
        is a two-child node of the same step. Returns (chains, chain index of every node)."""
        t, n = self.t, self.t.n
        nn = len(t.nodes)
        height = np.zeros(n + nn, np.int64)
        chain_of = np.full(nn, -1, np.int64)
        chains: list[list[int]] = []
        for i, ch in enumerate(t.nodes):
            height[n + i] = 1 + max(height[c] for c in ch)
            best = self._continues(i, ch, height)
            if best >= 0:
                chain_of[i] = chain_of[best]
                chains[chain_of[i]].append(i)
            else:
                chain_of[i] = len(chains)
                chains.append([i])
        return chains, chain_of

    _kept: frozenset = frozenset()    # nodes of chains fixed elsewhere (a subclass's): never continued here

    def _continues(self, i: int, ch: tuple, height: np.ndarray) -> int:
        """The node whose chain node i continues (-1: it starts one): its heavier child that is a two-child node of
        the same step, where node i is a two-child addition."""
        t, n = self.t, self.t.n
        st = t.step_of(i)
        if isinstance(st, BlockFMA) or len(ch) != 2:
            return -1
        cand = [c - n for c in ch if c >= n and c - n not in self._kept and t.step_of(c - n) == st
                and len(t.nodes[c - n]) == 2]
        return max(cand, key=lambda j: height[n + j]) if cand else -1

    def build(self) -> Schedule:
        t, n = self.t, self.t.n
        if not t.nodes:
            if t.out is None:
                return Schedule(n, 0, [], -1)
            d = self.new(1)
            self.waves.append(Wave("load", (t.out, self.key[1]), d, np.array([-1])))
            return Schedule(n, self.nv, self.waves, int(d[0]))
        chains, chain_of = self._chains()
        ref = np.full(n + len(t.nodes), 0, np.int64)        # operand of every ref once computed
        ref[:n] = -1 - np.arange(n)
        raw = ref[:n].copy()                                  # fused nodes read the terms exactly
        if t.leaf is not None:
            d = self.new(n)
            self.waves.append(Wave("load", (t.leaf, self.key[1]), d, raw.copy()))
            ref[:n] = d
        zero = None
        if any(isinstance(s, BlockFMA) for s in t.steps):
            zero = int(self.new(1)[0])
            self.waves.append(Wave("const", self.key, np.array([zero]), const=0.0))
        level = np.zeros(len(chains), np.int64)
        for ci in sorted(range(len(chains)), key=lambda k: chains[k][-1]):   # a chain after every chain it reads
            c = chains[ci]
            reads = [r for i in c for r in t.nodes[i] if r >= n and chain_of[r - n] != ci]
            level[ci] = 1 + max((level[chain_of[r - n]] for r in reads), default=0)
        for lv in range(1, int(level.max()) + 1):
            self._level([chains[ci] for ci in np.flatnonzero(level == lv)], ref, raw, zero)
        root = int(ref[n + len(t.nodes) - 1])
        if t.out is not None:
            d = self.new(1)
            self.waves.append(Wave("load", (t.out, self.key[1]), d, np.array([root])))
            root = int(d[0])
        return Schedule(n, self.nv, self.waves, root)

    def _level(self, chains: list[list[int]], ref: np.ndarray, raw: np.ndarray, zero: int | None) -> None:
        t, n = self.t, self.t.n
        fused: dict[tuple, list[int]] = {}
        firsts: dict[tuple, list[list[int]]] = {}
        loads: dict[tuple, list[int]] = {}
        for c in chains:
            st = t.step_of(c[0])
            if len(t.nodes[c[0]]) == 1 and not isinstance(st, BlockFMA):
                loads.setdefault(self._wkey(st), []).append(c[0])
            elif isinstance(st, BlockFMA):
                fused.setdefault((st, len(t.nodes[c[0]])), []).append(c[0])
            else:
                firsts.setdefault(self._wkey(st), []).append(c)
        for wkey, idx in loads.items():
            d = self.new(len(idx))
            self.waves.append(Wave("load", wkey, d, np.array([ref[t.nodes[i][0]] for i in idx], np.int64)))
            ref[n + np.asarray(idx)] = d
        for (st, _), idx in fused.items():
            acc_in = [int(ref[t.nodes[i][0]]) if t.nodes[i][0] >= n else zero for i in idx]
            terms = [[int(raw[c]) for c in t.nodes[i] if c < n] for i in idx]
            d = self.new(len(idx))
            k = (st, self.key[0] if st.acc is None else st.acc)
            self.waves.append(Wave("bfma", k, d, np.array(acc_in, np.int64), np.array(terms, np.int64)))
            ref[n + np.asarray(idx)] = d
        for wkey, cs in firsts.items():
            heads = [c[0] for c in cs]
            d = self.new(len(cs))
            a = np.array([ref[t.nodes[i][0]] for i in heads], np.int64)
            b = np.array([ref[t.nodes[i][1]] for i in heads], np.int64)
            self.waves.append(Wave("add", wkey, d, a, b))
            ref[n + np.asarray(heads)] = d
            by_len: dict[int, list[list[int]]] = {}
            for c in cs:
                if len(c) > 1:
                    by_len.setdefault(len(c) - 1, []).append(c)
            for _, group in sorted(by_len.items()):
                starts = np.array([ref[n + c[0]] for c in group], np.int64)
                adds = np.array([[ref[next(r for r in t.nodes[i] if r != n + prev)]
                                  for prev, i in zip(c[:-1], c[1:])] for c in group], np.int64)
                d = self.new(len(group))
                self.waves.append(Wave("chain", wkey, d, starts, adds))
                ref[n + np.array([c[-1] for c in group])] = d


@dataclass(frozen=True)
class PerPosition(Order):
    """Output position p (row-major over the output shape) reduced by ``orders[index[p]]``."""

    orders: Any
    index: Any
    shape: Any = None

    def __post_init__(self):
        orders = tuple(self.orders)
        if not orders or not all(isinstance(o, Order) and not isinstance(o, PerPosition) for o in orders):
            raise TypeError("PerPosition orders must be a non-empty tuple of Orders (not PerPosition)")
        idx = np.asarray(self.index, np.int64)
        given = tuple(self.shape if self.shape is not None else idx.shape)
        shape = tuple(_index(s, "PerPosition shape: a size") for s in given)
        if any(s < 0 or isinstance(g, (bool, np.bool_)) for s, g in zip(shape, given)):
            raise ValueError(f"PerPosition shape: sizes are counts >= 0, got {shape}")
        idx = idx.reshape(-1)
        bad = idx.size and (idx.min() < 0 or idx.max() >= len(orders))
        if idx.size != math.prod(shape) or bad:      # Python ints: a product never wraps
            raise ValueError(f"PerPosition index: one entry in 0..{len(orders) - 1} per output position of shape "
                             f"{shape}")
        object.__setattr__(self, "orders", orders)
        object.__setattr__(self, "index", tuple(int(i) for i in idx))
        object.__setattr__(self, "shape", shape)
        accs = {o.acc for o in orders}
        if len(accs) > 1:
            raise ValueError("PerPosition orders must fix the same accumulator (or none)")

    @property
    def acc(self):
        return self.orders[0].acc

    per_position = True

    def order_at(self, *pos: int) -> Order:
        return self.orders[self.index[int(np.ravel_multi_index(pos, self.shape))]]

    def spec(self) -> OrderSpec:
        specs = [o.spec() for o in self.orders]
        if len(set(specs)) == 1:
            return specs[0]
        if all(s.kind == "tree" for s in specs):
            worst: dict[tuple, int] = {}
            for s in specs:
                for p in s.params:
                    worst[p[:-1]] = max(worst.get(p[:-1], 0), p[-1])
            return OrderSpec("tree", max(s.n for s in specs), acc=self.acc,
                             params=tuple(k + (c,) for k, c in worst.items()))
        return OrderSpec("any")

    def _schedule(self, n, key):
        raise ValueError("a PerPosition order has one schedule per output position; simulate runs it through "
                         "simulate_positions")

    def simulate_positions(self, run: Any, op: str, inputs: tuple, **kw: Any) -> np.ndarray:
        """simulate of each distinct order, each output position taken from its own order's result."""
        idx = np.asarray(self.index, np.int64).reshape(self.shape)
        res = None
        for j, o in enumerate(self.orders):
            if not (idx == j).any():
                continue
            r = run(op, *inputs, order=o, **kw)
            if r.shape != idx.shape:
                raise ValueError(f"this PerPosition order maps outputs of shape {self.shape}; the reduction gives "
                                 f"shape {r.shape}")
            res = r.copy() if res is None else res
            res[idx == j] = r[idx == j]
        assert res is not None
        return res

