"""The sweep of an invariance check: each configuration tried (matched against a known class's order, else revealed),
bisection between tried configurations of different classes, and the thresholds and untried intervals read off.

Evidence per configuration:

* "matched": a class's order, simulated, gave the kernel's watched outputs bit for bit on every check input (seeded
  random rows of kinds normal / wide / cancelling, the same rows at every configuration of one K, N); a check on a
  sample, so weaker than "revealed", and said so;
* "revealed": reveal_order found the order of the watched row at this configuration (on the one-row view), and
  it is compared with every class's order structurally (same tree, node formats, fused nodes);
* "undetermined": the kernel raised, hung, returned a wrong shape, or reveal could not reproduce it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import product
from typing import Any

import numpy as np

from ..models.orders.basic import Order
from ..reveal.probe import RevealError
from ..reveal.report import reveal_order
from .kernel import KINDS, KernelAt, KernelCallError, RowData, draw_row, same_bits
from .report import Gap, OrderClass, Point, Threshold
from .space import Config, Space

__all__ = ["Sweep", "OutOfTime"]


class OutOfTime(Exception):
    """The check's time budget ran out (the sweep stops; untried configurations are reported as such)."""


def _class_name(i: int) -> str:
    return chr(ord("A") + i % 26) + (str(i // 26) if i >= 26 else "")


class Sweep:
    """Tries configurations of ``space`` on ``kernel_at(config) -> KernelAt`` and keeps the classes."""

    def __init__(self, kernel_at: Callable[[Config], KernelAt], space: Space, op: str, dtype: str, *,
                 evidence: str, draws: int, reveal_kw: dict, deadline: float, progress: Callable | None, seed: int):
        self.kernel_at, self.space, self.op, self.dtype = kernel_at, space, op, dtype
        self.evidence, self.draws, self.reveal_kw = evidence, draws, reveal_kw
        self.deadline, self.progress, self.seed = deadline, progress, seed
        self.classes: list[OrderClass] = []
        self.group_of: dict[str, tuple] = {}          # class name -> (K, N)
        self.points: dict[Config, Point] = {}
        self.kernels: dict[Config, KernelAt] = {}
        self.reveals = self.matches = self.calls = 0
        self.calls_elsewhere = 0                         # kernel calls made in workers (spread.py)
        self.nondet: tuple | None = None               # (KernelAt, inputs, first outputs, second outputs)
        self._rows: dict[tuple, list[RowData]] = {}
        self._sims: dict[tuple, list[np.ndarray]] = {}

    # ---- one configuration ------------------------------------------------------------------------------
    def rows(self, k: KernelAt) -> list[RowData]:
        """The check inputs of one (K, N): seeded, the same at every configuration of that shape."""
        key = (k.K, k.N)
        if key not in self._rows:
            rng = np.random.default_rng([self.seed, 7, k.K, k.N])
            self._rows[key] = [draw_row(rng, self.op, k.K, k.N, KINDS[i % 3], k.dt) for i in range(self.draws)]
        return self._rows[key]

    def _class_sims(self, c: OrderClass, k: KernelAt) -> list[np.ndarray]:
        key = (c.name, k.K, k.N)
        if key not in self._sims:
            self._sims[key] = [k.simulate(c.order, d) for d in self.rows(k)]
        return self._sims[key]

    def evaluate(self, c: Config) -> Point:
        """Try one configuration (once): match, else reveal; the Point is kept in ``points``."""
        if c in self.points:
            return self.points[c]
        if time.perf_counter() > self.deadline:
            raise OutOfTime
        try:
            k = self.kernel_at(c)
            self.kernels[c] = k
            p = self._try(c, k)
        except KernelCallError as e:
            p = Point(c, None, "undetermined", str(e))
        self.points[c] = p
        if self.progress is not None:
            self.progress(f"invariance: {c}: " + (f"class {p.cls} ({p.evidence})" if p.cls else p.evidence)
                          + f" [{len(self.points)} tried, {self.reveals} revealed]")
        return p

    def _observe(self, c: Config, k: KernelAt) -> tuple[list, Point | None]:
        """The watched outputs on every seeded row (the first row's batch called twice), or the point "not
        deterministic" where those two calls differ."""
        rows = self.rows(k)
        before = k.calls
        try:
            first = k.batch(rows[0])
            o1, o2 = k.outputs(*first), k.outputs(*first)
            outs = [o1[k.row].reshape(-1)] + [k.watched(d) for d in rows[1:]]
        finally:
            self.calls += k.calls - before
        if not same_bits(o1, o2).all():
            if self.nondet is None:
                self.nondet = (k, first, o1, o2)
            return outs, Point(c, None, "not deterministic", "two calls on the same inputs gave different bits")
        return outs, None

    def _try(self, c: Config, k: KernelAt) -> Point:
        outs, odd = self._observe(c, k)
        if odd is not None:
            return odd
        rows = self.rows(k)
        group = [x for x in self.classes if self.group_of[x.name] == (k.K, k.N)]
        hits = [x for x in group if all(same_bits(s, o).all() for s, o in zip(self._class_sims(x, k), outs))]
        if self.evidence == "match" and len(hits) == 1:
            self.matches += 1
            hits[0].members.append(c)
            return Point(c, hits[0].name, "matched", f"class {hits[0].name}'s order gave the kernel's bits on all "
                         f"{len(rows)} check inputs ({sum(o.size for o in outs)} outputs)")
        return self._reveal(c, k, outs, group)

    def _reveal(self, c: Config, k: KernelAt, outs: list[np.ndarray], group: list[OrderClass]) -> Point:
        """reveal_order on the one-row view; the order compared with the group's classes structurally."""
        self.reveals += 1
        before = k.calls
        shape: dict[str, Any] = {"shape": (1, k.K, k.N)} if self.op == "matmul" else {"n": k.K}
        t0 = time.perf_counter()
        try:
            budget = min(self.reveal_kw["max_seconds"], max(self.deadline - t0, 0.001))
            rep = reveal_order(k.one_row(), self.op, dtype=self.dtype, seed=self.seed, **shape,
                               **{**self.reveal_kw, "max_seconds": budget})
        except RevealError as e:
            return Point(c, None, "undetermined", f"reveal_order could not probe the kernel: {e}")
        finally:
            self.calls += k.calls - before
        if rep.verdict == "not deterministic":
            return Point(c, None, "not deterministic", "reveal_order: " + "; ".join(rep.notes[:1]))
        if rep.verdict != "reproduced" or rep.order is None:
            why = "; ".join(n for n in rep.notes if "verified on" not in n)[:300]
            return Point(c, None, "undetermined", f"reveal_order's verdict: {rep.verdict}" + (f" ({why})" if why
                                                                                              else ""))
        order: Order = rep.order
        if not all(same_bits(k.simulate(order, d), o).all() for d, o in zip(self.rows(k), outs)):
            return Point(c, None, "undetermined", "the revealed order reproduced reveal's random data but not the "
                         "check inputs: the order may depend on the data")
        same = [x for x in group if x.order == order]
        if same:
            same[0].members.append(c)
            return Point(c, same[0].name, "revealed", f"the same order as class {same[0].name}")
        cls = OrderClass(_class_name(len(self.classes)), order, c, rep.calls, time.perf_counter() - t0, [c])
        self.classes.append(cls)
        self.group_of[cls.name] = (k.K, k.N)
        return Point(c, cls.name, "revealed", f"a new order ({rep.calls} calls)")

    def clear_caches(self) -> None:
        """Drop the check inputs and simulations (rebuilt on demand; not worth sending back from a worker)."""
        self._rows, self._sims = {}, {}

    # ---- the sweep ---------------------------------------------------------------------------------------
    def grid(self, exhaustive: bool) -> list[Config]:
        """The configurations tried before bisection: the product of the candidates, rows inside the batch."""
        cand = self.space.candidates(exhaustive)
        cs = (self.space.config(dict(zip(cand, vs))) for vs in product(*cand.values()))
        return [c for c in cs if self.space.valid(c)]

    def run(self, configs: list[Config], bisect: bool = True) -> bool:
        """Try ``configs``, then bisect; False when the time budget ran out."""
        try:
            for c in configs:
                self.evaluate(c)
            while bisect and self._bisect_once():
                pass
        except OutOfTime:
            return False
        return True

    def kernel(self, c: Config) -> KernelAt:
        """The kernel at ``c`` (made here when c was tried in a worker)."""
        if c not in self.kernels:
            self.kernels[c] = self.kernel_at(c)
        return self.kernels[c]

    def adopt(self, part: Sweep) -> None:
        """Take in a sweep run elsewhere (a worker's part): its classes merged by structural order equality."""
        names: dict[str, str] = {}
        for c in part.classes:
            group = part.group_of[c.name]
            same = [x for x in self.classes if self.group_of[x.name] == group and x.order == c.order]
            if same:
                names[c.name] = same[0].name
                continue
            new = OrderClass(_class_name(len(self.classes)), c.order, c.revealed_at, c.reveal_calls,
                             c.reveal_seconds, [])
            self.classes.append(new)
            self.group_of[new.name] = group
            names[c.name] = new.name
        byname = {c.name: c for c in self.classes}
        for p in part.points.values():
            q = Point(p.config, names.get(p.cls) if p.cls else None, p.evidence, p.detail)
            self.points[q.config] = q
            if q.cls:
                byname[q.cls].members.append(q.config)
        self.reveals += part.reveals
        self.matches += part.matches
        self.calls_elsewhere += part.calls
        if self.nondet is None and part.nondet is not None:
            k, inputs, o1, o2 = part.nondet
            here = self.kernel(k.config)
            here.out_fmt = k.out_fmt
            self.nondet = (here, inputs, o1, o2)

    def lines(self, axis: str) -> list[list[Point]]:
        """Tried points grouped by their other coordinates, each line sorted along ``axis``."""
        vals = self.space.axes[axis]
        by: dict[tuple, list[Point]] = {}
        for c, p in self.points.items():
            key = tuple(v for n, v in zip(c.names, c.values) if n != axis)
            by.setdefault(key, []).append(p)
        return [sorted(ps, key=lambda p: vals.index(p.config.get(axis))) for ps in by.values() if len(ps) > 1]

    def _between(self, axis: str, p: Point, q: Point) -> list:
        vals = self.space.axes[axis]
        i, j = vals.index(p.config.get(axis)), vals.index(q.config.get(axis))
        return [v for v in vals[i + 1:j] if self.space.valid(p.config.replace(axis, v))]

    def _bisect_once(self) -> bool:
        """Evaluate the middle of every pair of neighbouring tried points of different classes; True if any."""
        did = False
        for axis in self.space.varying:
            for line in self.lines(axis):
                for p, q in zip(line, line[1:]):
                    if p.cls is None or q.cls is None or p.cls == q.cls:
                        continue
                    mid = self._between(axis, p, q)
                    if mid:
                        self.evaluate(p.config.replace(axis, mid[len(mid) // 2]))
                        did = True
        return did

    def thresholds_and_gaps(self) -> tuple[list[Threshold], list[Gap]]:
        ts, gaps = [], []
        for axis in self.space.varying:
            for line in self.lines(axis):
                for p, q in zip(line, line[1:]):
                    inside = self._between(axis, p, q)
                    if p.cls and q.cls and p.cls != q.cls:
                        ts.append(Threshold(axis, p.config, q.config, p.cls, q.cls, not inside))
                    if inside:
                        gaps.append(Gap(axis, p.config, q.config, len(inside), _claim(p, q)))
        return ts, gaps


def _claim(p: Point, q: Point) -> str:
    if p.cls and p.cls == q.cls:
        return (f"not claimed (both ends are class {p.cls}; nothing is proven about the values between: an order "
                "could change and change back)")
    if p.cls and q.cls:
        return (f"not claimed (class {p.cls} below, {q.cls} above; the time budget stopped the bisection "
                "before the threshold was located)")
    return "not claimed (an end is undetermined)"
