"""The verdict step of identify_order: once one candidate reproduces every output, score its rivals and group
every reproducing candidate by what it computes on other inputs.

Rivals: every candidate of the stages the search went through up to the winner (the rest of the winner's stage
included: the first match is not the only one), and for sums the plain orders in every accumulator format and the
CPU kernels' orders. Each rival that reproduces the pruning rows is confirmed on every output through simulate. The
reproducing candidates are then simulated on drawn inputs (:func:`numoracle.identify.separate.separating_inputs`): two
that differ on some drawn input are arithmetically different, so the outputs cannot tell which one the kernel used
(AMBIGUOUS);
two that agree on every drawn input are one arithmetic (REPRODUCED names the first and counts the others).
An open search's one arithmetic is REPRODUCED only where the outputs are evidence enough that the kernel is it
rather than an order outside the tried set landing on them by chance (:mod:`numoracle.identify.evidence`); else
AMBIGUOUS, with fresh inputs on which it predicts bits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from . import families as F
from .evidence import Evidence, evidence
from .report import Candidate
from .separate import separating_inputs

__all__ = ["settle", "Settled"]


def _rivals(search: Any, win: Candidate, tried: list) -> None:
    p = search.p
    for stage, trials in tried:
        if stage == "split":      # the other ways the winning split's partials meet (the slicings before it failed)
            unit, won = trials
            base = won.order
            if hasattr(base, "combine"):
                base = type(base)(**{**{f: getattr(base, f) for f in base.__dataclass_fields__},
                                     "combine": F.Sequential(), "combine_acc": None,
                                     **({"permutation": None} if hasattr(base, "permutation") else {})})
            search.split_stage(unit, many=True, collect=True, only=[base])
        else:
            search.run(stage, trials, collect=True)
    if p.op == "sum" and all(stage != "given" for stage, _ in tried):     # given candidates: those only
        for stage, trials in F.sum_stages(p.in_fmt, p.K, p.n_outputs, p.acc, p.out):
            if stage in ("plain orders", "cpu kernels", "accumulator"):
                search.run(stage, trials, collect=True)


def _classes(search: Any, reproducing: list[Candidate]) -> list[list[Candidate]]:
    """Union of the candidates no drawn input tells apart; the winner's class first."""
    if len(reproducing) < 2:
        return [reproducing]
    p = search.p
    if p.op == "matmul":
        shape: tuple = (16, p.K, min(4, p.inputs[1].shape[1]))
    elif p.op == "dot":
        shape = (p.K,)
    else:
        shape = (16, p.K)
    op = "matmul" if p.op == "dot" else p.op       # a dot's pool: rows against one column
    if op == "matmul" and p.op == "dot":
        shape = (16, p.K, 1)
    sep = separating_inputs(reproducing, op, shape, p.in_fmt, acc=p.acc, out=p.out, pools=3, pool_rows=32)
    parent = list(range(len(reproducing)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in sep.not_separated:
        parent[root(j)] = root(i)
    groups: dict[int, list[Candidate]] = {}
    for k, c in enumerate(reproducing):
        groups.setdefault(root(k), []).append(c)
    return list(groups.values())


def _operand_twins(search: Any, win: Candidate) -> None:
    """A reproducing candidate whose operand rounding read the same values here as another rounding (TF32 by rne
    and by rna on inputs without a tie): the other is its twin, reproducing every output as well. The search tried
    one of the two; the twin joins the verdict, where inputs with ties tell them apart (else one is dropped
    unseen and REPRODUCED names a rounding the outputs cannot tell)."""
    p = search.p
    for c in [win] + [c for c in search.confirmed.values() if c.fraction == 1.0]:
        for v, same in p.aliases:
            if c.operands == same:
                twin = replace(c, operands=v)
                search.confirmed.setdefault(twin.key, twin)


@dataclass
class Settled:
    """The verdict step's result: the reproducing candidates in classes (the winner's first), the inputs that
    separate them (or, where the evidence is too weak, on which the one class predicts bits), and the evidence."""

    classes: list[list[Candidate]]
    separating: Any = None
    evidence: Evidence | None = None     # None: a closed set (the candidates given), not estimated


def _portable(c: Candidate) -> Candidate | None:
    """The candidate as an order that applies to inputs of any shape: a ``PerPosition`` of one order (the
    permutation stage's answer for one output) is that order; one of several orders per element is None."""
    order = c.order
    if type(order).__name__ != "PerPosition":
        return c
    return replace(c, order=order.orders[0]) if len(order.orders) == 1 else None


def _confirm_rows(p: Any, ev: Evidence) -> int:
    """Rows (dots: calls) of fresh inputs whose outputs reach the evidence needed, twice over (16 .. 256)."""
    per_row = 1 if p.op == "dot" else max(1, p.codes.size // max(1, p.n_rows))
    return int(min(256, max(16, 2 * -(-(ev.outputs_needed() or 128) // per_row))))


def _fresh_shape(p: Any, rows: int) -> tuple:
    if p.op == "matmul":
        return (max(rows, p.inputs[0].shape[0]), p.K, p.inputs[1].shape[1])
    if p.op == "dot":
        return (p.K,)
    return (max(rows, p.n_rows), p.K)


def settle(search: Any, win: Candidate, tried: list) -> Settled:
    """Classes of reproducing candidates, separating inputs when there are several classes or when an open search's
    evidence is too weak for REPRODUCED (:mod:`numoracle.identify.evidence`)."""
    p = search.p
    if win.stage != "permutation":
        budget = search.budget_s, search.max_candidates     # rivals are scored in full: the verdict needs them
        search.budget_s = search.max_candidates = None
        _rivals(search, win, tried)
        search.budget_s, search.max_candidates = budget
    _operand_twins(search, win)
    reproducing = [win] + [c for k, c in search.confirmed.items() if c.fraction == 1.0 and k != win.key]
    classes = _classes(search, reproducing)
    classes.sort(key=lambda cls: win not in cls)
    given = any(stage == "given" for stage, _ in tried)     # the user's candidates: a closed set
    # one hypothesis per arithmetic: the winner's class (orders no drawn input tells apart) counts once
    twins = {c.key for c in classes[0] if c.key != win.key}
    ev = None if given else evidence({k: v for k, v in p.predictions.items() if k not in twins}, p.watched(),
                                     p.codes.size)
    separating = None
    weak = ev is not None and not ev.enough
    confirm = _confirm_rows(p, ev) if weak else 1     # outputs enough to confirm what the rerun names
    if len(classes) > 1:
        reps = [cls[0] for cls in classes]
        rows = max(16, 2 * len(reps), confirm)     # room for a row per pair to separate, at least the kernel's rows
        separating = separating_inputs(reps, p.op, _fresh_shape(p, rows), p.in_fmt, acc=p.acc, out=p.out,
                                       calls=rows if p.op == "dot" else 1, min_calls=confirm)
        separating.row_calls = p.vector     # the kernel sums one vector: one call per row of the inputs
        search.notes.append(f"AMBIGUOUS among {len(classes)} arithmetics: rerun the kernel on rep.separating.inputs "
                            "(rep.separating.calls: the calls to make) and call rep.separating.which(new_output), "
                            "or call rep.separating.rerun(kernel)")
    elif weak:
        # fresh inputs on which the one class predicts bits
        rows = confirm
        one = _portable(classes[0][0])
        if one is None:             # per-element orders: they predict the recorded shape only
            one, rows = classes[0][0], (1 if p.op == "dot" else p.n_rows)
        separating = separating_inputs([one], p.op, _fresh_shape(p, rows), p.in_fmt, acc=p.acc, out=p.out,
                                       calls=rows if p.op == "dot" else 1)
        separating.row_calls = p.vector
        search.notes.append("AMBIGUOUS: too few outputs to decide (rep.evidence). Rerun the kernel on "
                            "rep.separating.inputs (rep.separating.calls: the calls to make) and call "
                            "rep.separating.which(new_output), or call rep.separating.rerun(kernel): it names the "
                            "candidate if the kernel is it, and nothing if the kernel is an order outside the set")
    return Settled(classes, separating, ev)
