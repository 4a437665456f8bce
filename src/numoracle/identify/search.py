"""Which accumulation order did a kernel use? Rank candidate arithmetics by how many outputs they reproduce bit for bit.

``identify_order(actual, op, *inputs)`` simulates candidates (an order, and where the search varies them, the
accumulator format and how the operands were rounded on the way in) on the kernel's inputs and compares every
output element's bits with the kernel's. The families are those of :mod:`numoracle.identify.families`:

* matmul / dot: (1) the *unit*: the block FMAs of the GPU presets that take the input format (FP32 inputs: the
  TF32 ones, on the inputs rounded to TF32 by rne, rtz and rna), promoted to FP32 every 32, 64 or 128 terms,
  sequential and pairwise accumulation in each accumulator format, over all of K (up to K = 512 also block FMAs
  beyond the presets); (2) the *split* of K, for each unit in the order of how closely its errors lean like the
  kernel's: even ``SplitK(s)`` and ``TiledSplitK(s, tile)``, s = 2..16 (and 24..64 for the ``keep`` likeliest
  units), each slicing's partials simulated once; (3) the *combine* of those partials: in slice order, a tree,
  the reverse order, rounded to a narrower output format; then any permutation, per output element (atomics):
  :mod:`numoracle.identify.permute`.
* sum: torch's CUDA heuristics, the plain orders, the same in the other accumulator formats, CPU kernels'
  orders, a grid of reduction trees and chunked scans.

Every candidate is scored on a subset of rows first (``prune_rows``); one that reproduces the subset is confirmed
on every output through simulate's own path (``simulate(op, *inputs, arith=...)``); no shortcut score confirms.
When one is confirmed, the verdict step (:mod:`numoracle.identify.verdict`) scores its rivals, groups the
reproducing candidates by what they compute on other inputs and says REPRODUCED or AMBIGUOUS.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..core.args import check_int, check_number
from ..core.engine.convert import cast
from ..core.formats.format import FP32
from ..core.progress import progress
from ..models.engine.simulation import simulate
from ..models.orders.basic import Order, Promoted
from ..models.orders.text import as_order
from . import families as F
from .problem import Problem, native
from .report import Candidate, IdentifyReport

__all__ = ["identify_order", "IdentifyReport", "Candidate"]


def _meet(parts: list[np.ndarray], how: str) -> np.ndarray:
    """FP32 partials combined in IEEE binary32 arithmetic (round to nearest even), as SplitK's combines."""
    if how == "tree":
        if len(parts) == 1:
            return parts[0]
        h = len(parts) - len(parts) // 2
        return _meet(parts[:h], "tree") + _meet(parts[h:], "tree")
    s = np.zeros_like(parts[0])
    for q in (parts[::-1] if how == "rev" else parts):
        s = s + q
    return s


def _plain_first(ranked: list[Candidate]) -> list[Candidate]:
    """Units in rank order, but a unit U moved up just ahead of its first ``Promoted(e, U)`` form (same operands
    and accumulator): ``Promoted(e, U)`` is U split into slices of e whose partials are added in order, one of
    U's own splits, so U's splits are tried first, where any e (192, 384, ...) is found, not only 32, 64, 128."""
    def family(c: Candidate) -> tuple:
        inner = c.order.inner if isinstance(c.order, Promoted) else c.order
        return inner, c.acc, c.operands
    plain = {family(c): c for c in ranked if not isinstance(c.order, Promoted)}
    out: dict[tuple, Candidate] = {}            # by key, in the new order
    for c in ranked:
        u = plain.pop(family(c), None) if isinstance(c.order, Promoted) else None
        for v in ([u] if u is not None else []) + [c]:
            out.setdefault(v.key, v)
    return list(out.values())


class _Search:
    """The candidates scored so far, those confirmed on every row, and the notes of one identification."""

    def __init__(self, p: Problem, sub: np.ndarray | None, budget_s: float | None, max_candidates: int | None = None):
        self.p, self.sub = p, sub
        self.bar = progress(desc="identify: orders scored", unit="order")  # on a terminal only
        self.scored: list[Candidate] = []
        self.keys: set = set()
        self.confirmed: dict[tuple, Candidate] = {}
        self.notes: list[str] = []
        self.t0, self.budget_s, self.max_candidates = time.perf_counter(), budget_s, max_candidates
        self.stopped: str | None = None

    def over_budget(self) -> bool:
        if self.stopped is None and self.max_candidates is not None and len(self.scored) >= self.max_candidates:
            self.stopped = (f"it reached its budget of {self.max_candidates} candidates (max_candidates=None "
                            "searches every family)")
        if self.budget_s is not None and time.perf_counter() - self.t0 > self.budget_s and self.stopped is None:
            self.stopped = (f"its time budget of {self.budget_s:g} s ran out after {len(self.scored)} candidates "
                            "(budget_s=None searches every family)")
        return self.stopped is not None

    def run(self, stage: str, trials: list, collect: bool = False) -> Candidate | None:
        """Score the trials not scored yet; the first one confirmed on every row wins (collect: score them all)."""
        win = None
        for order, acc, ops in trials:
            if (order, acc, ops) in self.keys:
                continue
            if self.over_budget():
                break
            c = self.add(self.p.score(order, self.sub, stage, acc, ops))
            if c is not None and win is None:
                win = c
                if not collect:
                    return win
        return win

    def add(self, c: Candidate) -> Candidate | None:
        self.scored.append(c)
        self.keys.add(c.key)
        self.bar.update(1)
        return self.confirm(c) if c.matched == c.total else None

    def confirm(self, c: Candidate) -> Candidate | None:
        """c scored on every output through simulate (cached); returned when it reproduces them all. A score
        taken on a row subset or by a shortcut is never the confirmation: the arithmetic is simulated whole."""
        if c.key not in self.confirmed:
            self.confirmed[c.key] = c if c.confirmed else self.p.score(c.order, None, c.stage, c.acc, c.operands)
        full = self.confirmed[c.key]
        return full if full.matched == full.total else None

    def best(self, stages: tuple, n: int, by_bias: bool = False) -> list[Candidate]:
        pool = [c for c in self.scored if c.stage in stages]
        if by_bias:   # the units whose errors lean like the kernel's (truncation vs rounding to nearest)
            p, sub = self.p, self.sub
            target = p.bias(p.codes if sub is None else p.codes[sub], sub)
            return sorted(pool, key=lambda c: (c.fraction < 0.5, abs(c.bias - target)))[:n]
        return sorted(pool, key=lambda c: (-c.fraction, c.median_ulps))[:n]

    def perm_units(self) -> list[Candidate]:
        """Units for the atomics stage: the two closest, and the plain sequential one in the given accumulator."""
        plain = [c for c in self.scored
                 if c.stage == "unit" and c.acc is None and type(c.order).__name__ == "Sequential"]
        return list({c.key: c for c in self.best(("unit",), 2) + plain[:1]}.values())

    def split_stage(self, unit: Candidate, many: bool, collect: bool = False,
                    only: list | None = None) -> Candidate | None:
        """Splits of K for one unit: every slicing's partials simulated once, slice by slice; the combines applied
        to them in float32 arithmetic where that is exact (FP32 partials and combine, round to nearest), else each
        combined order simulated. A shortcut score guides only; a match is confirmed by simulating the order."""
        p, sub, ops = self.p, self.sub, unit.operands
        unit_acc = unit.acc or (p.acc if unit.order.acc is None else unit.order.acc)
        fast = p.acc == FP32 and unit_acc == FP32 and p.op != "sum" and unit.acc is None
        win = None
        for split in (F.splits(unit.order, p.K, many) if only is None else only):
            combos = [(how, o) for how, o in F.combines(split, p.K, p.out, p.acc)
                      if (o, unit.acc, ops) not in self.keys]
            if not combos or self.over_budget():
                continue
            if fast:
                bounds = np.concatenate([[0], np.cumsum(F.slice_sizes(split, p.K))])
                parts = [simulate(p.op, *p.cut(sub, int(lo), int(hi), ops), acc=unit_acc,
                                  order=unit.order).astype(np.float32) for lo, hi in zip(bounds[:-1], bounds[1:])]
                p.evaluated += len(parts)
            for how, o in combos:
                if fast and how != "out":
                    y = _meet(parts, how)
                    got = y.view(np.uint32) if p.out == FP32 else cast(y, p.out)
                    c = p.compare(o, got, sub, "split", simulated=False, acc=unit.acc, operands=ops)
                else:
                    c = p.score(o, sub, "split", unit.acc, ops)
                found = self.add(c)
                if found is not None and win is None:
                    win = found
                    if not collect:
                        return win
        return win

    def auto(self, outputs: int | None, units: list[Order], keep: int) -> tuple[Candidate | None, list]:
        """The guided search of the module docstring: the winner and the stages tried up to it (for the rivals)."""
        p = self.p
        tried: list = []
        if p.op == "sum":
            for stage, trials in F.sum_stages(p.in_fmt, p.K, outputs or p.n_outputs, p.acc, p.out):
                tried.append((stage, trials))
                win = self.run(stage, trials)
                if win:
                    return win, tried
            return None, tried
        given = [(u, None, v) for u in units for v in p.operand_variants()]
        unit_trials = given + F.units(p.in_fmt, p.out, p.acc, p.operand_variants())
        tried.append(("unit", unit_trials))
        win = self.run("unit", unit_trials)
        if win:
            return win, tried
        if p.K <= F.SMALL_K:
            tried.append(("unit", F.variants(p.in_fmt)))
            win = self.run("unit", F.variants(p.in_fmt))
            if win:
                return win, tried
        self.notes.append("no block FMA or plain order alone reproduces the outputs: trying splits of K and the "
                          "ways their partials meet")
        from .permute import permutation_stage
        ranked = _plain_first(self.best(("unit",), len(self.scored), by_bias=True))
        ranked = [c for c in ranked if not getattr(c.order, "per_position", False)]   # an order per output: no split
        ranked.sort(key=lambda c: (c.acc is not None, F.is_cpu(c.order)))   # other accumulators, CPU lanes last
        permuted = False
        for i, c in enumerate(ranked):
            win = self.split_stage(c, many=i < keep)   # 24..64 slices for the `keep` likeliest units
            if win:
                tried.append(("split", (c, win)))
                return win, tried
            if i == min(keep, len(ranked)) - 1:      # atomics: partials per element in any order (bounded cost)
                permuted = True
                win = permutation_stage(self, self.perm_units())
                if win:
                    return win, tried
            if self.over_budget():
                break
        return (None if permuted else permutation_stage(self, self.perm_units())), tried


def identify_order(actual: Any, op: str, *inputs: Any, candidates: Any = "auto", acc: Any = FP32, out: Any = None,
                   rows: Any = None, prune_rows: int = 8, keep: int = 3, outputs: int | None = None,
                   units: Any = (), seed: int = 0, budget_s: float | None = None, max_candidates: int | None = 360,
                   verdict: bool = True) -> IdentifyReport:
    """Rank candidate arithmetics by the fraction of the kernel's outputs they reproduce bit for bit.

    actual: the kernel's outputs (numpy or torch, a float dtype): (m, n) for matmul, the input's leading
    shape for sum (the last axis is reduced), a scalar for dot. inputs: what the kernel was given (FP32 tensors
    fed to TF32 tensor cores as they are: the search tries rounding them to TF32 by rne, rtz and rna, and the
    report shows which one reproduced the outputs). candidates: "auto" (the guided search of the module
    docstring) or a list of orders to score. acc: the accumulator simulate uses where an order does not fix one
    (the search also tries others). out: the format the kernel rounded its outputs to (default: actual's format;
    e.g. "fp16" for fp16 sums stored as float32). rows: a subset of output rows (index array or mask) to use for
    everything. prune_rows: rows each candidate is first scored on (a seeded random subset); keep: how many of
    the best are confirmed on every row when none reproduces the outputs (and how many units, those whose errors
    lean most like the kernel's, are also split into 24..64 slices). outputs: for sum, how many sums the kernel's
    launch computed (torch's launch heuristic depends on it; default: the number of outputs given). units:
    matmul/dot, orders to try first as the unit that splits of K are built of. max_candidates / budget_s: how many
    candidates / seconds the search may spend before it stops and says so (None: no limit; the candidate count
    keeps a search deterministic). verdict: score the winner's rivals and say REPRODUCED or
    AMBIGUOUS (False: stop at the first confirmed order, the verdict then says nothing about uniqueness).
    """
    t0 = time.perf_counter()
    if budget_s is not None:
        budget_s = check_number(budget_s, "budget_s (seconds; None: no time limit)")
    if max_candidates is not None:
        max_candidates = check_int(max_candidates, "max_candidates (None: no limit)", 1)
    p = Problem(actual, op, inputs, acc, out, rows)
    if int(prune_rows) < 1 or int(keep) < 1:
        raise ValueError(f"prune_rows and keep must be >= 1, got {prune_rows} and {keep}")
    rng = np.random.default_rng(seed)
    sub = None if p.n_rows <= prune_rows or p.op == "dot" else np.sort(rng.choice(p.n_rows, prune_rows, replace=False))
    p.watch = sub
    search = _Search(p, sub, budget_s, max_candidates)
    tried: list = []
    if isinstance(candidates, str) and candidates == "auto":
        units = list(units) if isinstance(units, (list, tuple)) else [units]
        if not all(isinstance(u, Order) for u in units):
            raise TypeError(f"units must be numoracle orders, got {units!r}")
        win, tried = search.auto(outputs, units, int(keep))
    else:
        orders = list(candidates) if isinstance(candidates, (list, tuple)) else [candidates]
        for i, o in enumerate(orders):
            if not isinstance(o, (Order, str)):
                raise TypeError(f"candidates must be 'auto' or numoracle orders (or their texts), got {o!r}")
            orders[i] = as_order(o, p.in_fmt)
        tried = [("given", [(o, None, None) for o in orders])]
        win = search.run("given", tried[0][1], collect=True)
    search.bar.close()
    for v, same in p.aliases:
        search.notes.append(f"inputs rounded to {v[0]} by {v[1]} are the same values as "
                            + ("the inputs as given" if same is None else f"by {same[1]}")
                            + " on these inputs (no value where the two differ): the same arithmetic here, "
                            "tried once")
    classes: list = []
    separating = evidence = None
    if win is None:
        for c in search.best(tuple({c.stage for c in search.scored}), keep):
            search.confirm(c)
    elif verdict:
        from .verdict import settle
        settled = settle(search, win, tried)
        classes, separating, evidence = settled.classes, settled.separating, settled.evidence
    final = [search.confirmed.get(c.key, c) for c in search.scored]
    final.sort(key=lambda c: (c.key != (win.key if win else None), not (c.confirmed and c.fraction == 1.0),
                              not c.confirmed, -c.fraction, c.median_ulps))
    return IdentifyReport(p.op, () if p.vector else tuple(p.codes.shape), p.out, p.in_fmt, p.acc, final, win,
                          None if sub is None else len(sub), p.n_rows, p.evaluated, time.perf_counter() - t0,
                          search.notes, classes, separating, search.stopped, evidence)


def identify_runs(identify: Any, runs: dict, op: str, inputs: tuple, acc: Any, out: Any, axis: int,
                  max_rows: int = 64) -> dict:
    """compare_runs' ``identify``: each run's order (or None), judged on its first ``max_rows`` output rows
    (a bounded cost however large the runs). identify: True ("auto"), candidate orders, or False (nothing);
    axis: the reduced axis of a sum."""
    if identify is False or identify is None:
        return {}
    cands = "auto" if identify is True else identify
    ins = inputs
    if op == "sum":
        ins = (np.moveaxis(native(inputs[0], "input 0"), axis, -1),)
    n_rows = 1 if op == "dot" or native(ins[0], "input 0").ndim < 2 else native(ins[0], "input 0").shape[0]
    rows = None if op == "dot" or n_rows <= max_rows else np.arange(max_rows)
    return {name: identify_order(run, op, *ins, candidates=cands, acc=acc, out=out, rows=rows, verdict=False).order
            for name, run in runs.items()}
