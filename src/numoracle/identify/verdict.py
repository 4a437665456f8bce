"""The verdict step of identify_order: once one candidate reproduces every output, score its rivals and group
every reproducing candidate by what it computes on other inputs.

Rivals: every candidate of the stages the search went through up to the winner (the rest of the winner's stage
included: the first match is not the only one), and for sums the plain orders in every accumulator format and the
CPU kernels' orders. Each rival that reproduces the pruning rows is confirmed on every output through simulate. The
reproducing candidates are then simulated on drawn inputs (:func:`numoracle.identify.separate.separating_inputs`): two
that differ on some drawn input are arithmetically different, so the outputs cannot tell which one the kernel used
(AMBIGUOUS);
two that agree on every drawn input are one arithmetic (REPRODUCED names the first and counts the others).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import families as F
from .report import Candidate
from .separate import separating_inputs

__all__ = ["settle"]


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


def settle(search: Any, win: Candidate, tried: list) -> tuple[list[list[Candidate]], Any]:
    """(classes of reproducing candidates, separating inputs when there are several classes)."""
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
    separating = None
    if len(classes) > 1:
        reps = [cls[0] for cls in classes]
        rows = max(16, 2 * len(reps))      # room for a row per pair to separate, at least the kernel's rows
        if p.op == "matmul":
            shape: tuple = (max(rows, p.inputs[0].shape[0]), p.K, p.inputs[1].shape[1])
        elif p.op == "dot":
            shape = (p.K,)
        else:
            shape = (max(rows, p.n_rows), p.K)
        separating = separating_inputs(reps, p.op, shape, p.in_fmt, acc=p.acc, out=p.out,
                                       calls=rows if p.op == "dot" else 1)
        separating.row_calls = p.vector     # the kernel sums one vector: one call per row of the inputs
        search.notes.append(f"AMBIGUOUS among {len(classes)} arithmetics: rerun the kernel on rep.separating.inputs "
                            "(rep.separating.calls: the calls to make) and call rep.separating.which(new_output), "
                            "or call rep.separating.rerun(kernel)")
    return classes, separating
