"""check_invariance: does a kernel's order for one output change with batch size, row position, split or any
parameter? The classes of configurations sharing an order, exact thresholds, and confirmed counterexamples;
assert_batch_invariant, its pytest form."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from typing import Any

import numpy as np

from ..core.args import check_bool, check_choice, check_int, check_number
from ..core.asserting import asserting
from ..core.errors import ArgumentTypeError, NumoracleError
from ..core.formats.format import Format, format_of
from ..core.formats.interop import native_dtype
from ..testing.runs import compare_runs
from .composite import COMPOSITE_OPS, CompositeSweep, check_composite_args, composite_counterexamples, composite_notes
from .counter import find_counterexample
from .kernel import kernel_factory
from .report import Counterexample, InvarianceReport, Threshold
from .search import Sweep
from .space import Space
from .spread import spread

__all__ = ["check_invariance", "assert_batch_invariant"]


def _dtype(dtype: Any) -> tuple[str, np.dtype]:
    fmt = format_of(dtype)
    dt = native_dtype(fmt) if isinstance(fmt, Format) else None
    if dt is None:
        raise NumoracleError(f"dtype must be a float format with a numpy / ml_dtypes type (fp32, bf16, fp16, ...), got "
                         f"{dtype!r}")
    return fmt.name, dt


def _explain_nondeterminism(sweep: Sweep) -> str:
    """Where the two calls differed, and compare_runs' verdict on the two runs."""
    k, inputs, o1, o2 = sweep.nondet  # type: ignore[misc]
    head = f"at {k.config}: two calls on the same inputs differ in {int((o1 != o2).sum())} of {o1.size} outputs"
    dt = native_dtype(k.out_fmt) if k.out_fmt is not None else None
    try:
        if sweep.op == "dot":
            i = k.row
            runs = (o1[i:i + 1].reshape(1, 1), o2[i:i + 1].reshape(1, 1))   # the row's dot as a 1 x 1 matmul
            rc = compare_runs(*(r.astype(dt) for r in runs), "matmul", inputs[0][i:i + 1], inputs[1][i][:, None],
                              identify=False)
        else:
            rc = compare_runs(o1.astype(dt), o2.astype(dt), sweep.op, *inputs, identify=False)
        return head + "\ncompare_runs: " + str(rc)
    except (ValueError, TypeError) as e:
        return head + f"\n(compare_runs could not explain them: {e})"


def _counterexamples(sweep: Sweep, thresholds: list[Threshold], limit: int, seed: int) -> list[Counterexample]:
    """One per pair of classes (the first threshold between them), up to ``limit``."""
    out: list[Counterexample] = []
    done: set[frozenset] = set()
    orders = {c.name: c.order for c in sweep.classes}
    for t in thresholds:
        pair = frozenset((t.below_class, t.above_class))
        if pair in done or len(out) >= limit:
            continue
        done.add(pair)
        ka, kb = sweep.kernel(t.below), sweep.kernel(t.above)
        ce = find_counterexample(ka, kb, (t.below_class, t.above_class), orders[t.below_class],
                                 orders[t.above_class], seed)
        if ce is not None:
            out.append(ce)
    return out


def _verdict(sweep: Sweep, complete: bool, ces: list[Counterexample], undetermined: list) -> str:
    if sweep.nondet is not None:
        return "NOT DETERMINISTIC"
    if any(c.confirmed for c in ces):
        return "VARIANT"
    split = len({sweep.group_of[c.name] for c in sweep.classes}) < len(sweep.classes)
    return "UNDETERMINED" if undetermined or not complete or split else "INVARIANT"


def _notes(sweep: Sweep, complete: bool, ces: list[Counterexample], elapsed: float, limit: float) -> list[str]:
    notes = []
    if not complete:
        notes.append(f"the time budget (max_seconds={limit}) ran out after {elapsed:.1f} s: the configurations not "
                     "tried are not claimed")
    if sweep.matches:
        notes.append(f"'matched': a class's order gave the kernel's bits on all {sweep.draws} check inputs (a check "
                     "on a sample, not a proof that the order is the same)")
    if sweep.space.axes.get("K", [0]).__len__() > 1 or len(sweep.space.axes.get("N", [0])) > 1:
        notes.append("orders are compared only within one (K, N): the classes of different shapes are separate")
    notes += [f"counterexample {c.a} vs {c.b}: the orders differ but no input found gives other bits"
              for c in ces if not c.confirmed]
    if any(not c.model_agrees for c in ces):
        notes.append("on some counterexample the kernel's bits are not those of its class's order")
    return notes


def check_invariance(fn: Callable | None, op: str, *, vary: Mapping[str, Any], at: Mapping[str, Any] | None = None,
                     make_fn: Callable | None = None, dtype: Any = "fp32", exhaustive: bool = False,
                     evidence: str = "match", draws: int | None = None, max_seconds: float = 600.0,
                     reveal_seconds: float = 300.0, reveal_calls: int = 5_000_000, call_seconds: float = 60.0,
                     counterexamples: int = 4, progress: Any = False, seed: int = 0, workers: int = 0,
                     executor: Executor | None = None, models: Any = "auto") -> InvarianceReport:
    """Is the order of a watched output the same at every configuration? (Batch invariance and its kin.)

    fn: the kernel, ``fn(X[M, K]) -> [M]`` (op "sum", over the last axis), ``fn(A[M, K], B[M, K]) -> [M]``
    ("dot", one per row), ``fn(A[M, K], B[K, N]) -> [M, N]`` ("matmul") or ``fn(X[M, K]) -> [M, K]`` (a
    composite op: "softmax", "log_softmax", "rms_norm", "layer_norm", over the last axis; ``composite.py``: the
    watched row's K outputs compared bit for bit on seeded rows, each class named by the model of ``models`` that
    reproduces it: "auto" is identify_composite's grid, None names none); or None with ``make_fn(**params) ->
    fn`` when user parameters vary. vary: axis -> values (``M``, ``row``: the watched row, negative from the end,
    ``K``, ``N``, user parameters), e.g. ``{"M": range(1, 257)}``; at: the fixed axes (``K`` and, for matmul,
    ``N`` are needed; ``M`` defaults to 1, ``row`` to 0). K and N are shapes: orders are compared within one (K, N).

    Method: every value of small axes (<= 16 values) or with ``exhaustive``, else the likely breakpoints (ends,
    powers of two and neighbours, multiples of 8..128 and neighbours); then bisection between neighbouring tried
    configurations of different orders until they are adjacent (each threshold exact). At each configuration the
    kernel is first checked against the known orders on ``draws`` seeded random rows ("matched"); otherwise (or
    always with ``evidence="reveal"``) reveal_order reveals the watched row's order ("revealed") and it is
    compared structurally. Untried values between tried ones are reported as not claimed.

    Verdicts: NOT DETERMINISTIC (first; compare_runs explains the two runs), VARIANT (classes, thresholds and a
    counterexample per pair of neighbouring classes, searched through simulate for the largest difference and
    confirmed by calling the kernel), UNDETERMINED (a configuration the kernel or reveal failed at, or the time
    budget), INVARIANT. Budgets: ``max_seconds`` in all, ``reveal_seconds`` / ``reveal_calls`` per reveal,
    ``call_seconds`` for each of the check's own calls and reveal's first (a kernel that hangs there is reported,
    not waited for; reveal's later probing calls are not limited). ``workers`` (processes; the kernel must pickle)
    or ``executor`` (a Dask client's ``get_executor()``, say): the first configurations are spread over them in
    contiguous parts, each part's classes merged by structural order equality; bisection runs here.
    """
    op = check_choice(op, "op", ("sum", "dot", "matmul", *COMPOSITE_OPS))
    if (fn is None) == (make_fn is None):
        raise ArgumentTypeError("give the kernel as fn, or a factory as make_fn=... (not both)")
    if not callable(fn if fn is not None else make_fn):
        raise ArgumentTypeError(f"the kernel must be callable, got {type(fn or make_fn).__name__}")
    evidence = check_choice(evidence, "evidence", ("match", "reveal"))
    exhaustive = check_bool(exhaustive, "exhaustive")
    draws = check_int(draws, "draws", 1, 1000) if draws is not None else (6 if op == "matmul" else 12)
    limits = [check_number(x, name, 0.001, 1e9) for x, name in ((max_seconds, "max_seconds"), (reveal_seconds,
              "reveal_seconds"), (call_seconds, "call_seconds"))]
    composite = op in COMPOSITE_OPS
    if composite:
        models = check_composite_args(op, evidence, workers, executor, models)
    name, dt = _dtype(dtype)
    space = Space.build(op, vary, at or {}, make_fn is not None)
    say = (lambda s: print(s, file=sys.stderr)) if progress is True else progress if callable(progress) else None
    t0 = time.perf_counter()
    seed = check_int(seed, "seed", 0)
    kernel_at = kernel_factory(fn, make_fn, op, dt, limits[2], seed, max(space.axes["M"]))
    reveal_kw = {"max_seconds": limits[1], "max_calls": check_int(reveal_calls, "reveal_calls", 1)}
    kw: dict[str, Any] = {"evidence": evidence, "draws": draws, "reveal_kw": reveal_kw, "deadline": t0 + limits[0],
                          "progress": say, "seed": seed}
    sweep = (CompositeSweep(kernel_at, space, op, name, models=models, model_kw={}, **kw) if composite else
             Sweep(kernel_at, space, op, name, **kw))
    if workers or executor is not None:
        complete = spread(sweep, sweep.grid(exhaustive), fn=fn, make_fn=make_fn, dt=dt, call_seconds=limits[2],
                          max_m=max(space.axes["M"]), workers=check_int(workers, "workers", 0, 256),
                          executor=executor, seconds=limits[0])
        complete = sweep.run([]) and complete
    else:
        complete = sweep.run(sweep.grid(exhaustive))
    thresholds, gaps = sweep.thresholds_and_gaps()
    limit = check_int(counterexamples, "counterexamples", 0)
    ces = ([] if sweep.nondet else composite_counterexamples(sweep, thresholds, limit) if composite else
           _counterexamples(sweep, thresholds, limit, seed))
    undetermined = [p for p in sweep.points.values() if p.evidence == "undetermined"]
    verdict = _verdict(sweep, complete, ces, undetermined)
    elapsed = time.perf_counter() - t0
    notes = composite_notes if composite else _notes
    calls = sum(k.calls for k in sweep.kernels.values()) + sweep.calls_elsewhere
    return InvarianceReport(verdict, op, name, space.axes, space.varying, sweep.classes, list(sweep.points.values()),
                            thresholds, gaps, ces, undetermined,
                            _explain_nondeterminism(sweep) if sweep.nondet else None,
                            sum(space.valid(c) for c in _all_configs(space)), sweep.reveals, sweep.matches, calls,
                            elapsed, notes(sweep, complete, ces, elapsed, limits[0]))


def _all_configs(space: Space) -> Any:
    from itertools import product

    for vs in product(*space.axes.values()):
        yield space.config(dict(zip(space.axes, vs)))


assert_batch_invariant = asserting(check_invariance, "assert_batch_invariant")
