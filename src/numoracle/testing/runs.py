"""compare_runs: two runs of one kernel on the same inputs told apart: bit-identical, a reordering (within a
reordered accumulation's bound, or exactly the same split partials combined in another order), unexplained, or
never written (the poison pattern)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..bounds.expected import ErrorBound
from ..core.engine.codekeys import is_nan, to_key
from ..core.engine.convert import cast
from ..core.formats.format import FP32, AnyFormat, Format, format_of
from ..models.arithmetic import Arithmetic, takes_arithmetic
from .closeproblem import Problem
from .closereport import Element, element_table, vacuous_text
from .judge import Setup, ulp_distances, ulp_format_of, worst_first
from .poison import poison_code, ranges_text

__all__ = ["compare_runs", "RunComparison", "VERDICTS"]

VERDICTS = ("IDENTICAL", "REORDERING", "UNEXPLAINED", "UNWRITTEN")


# ---- comparing two runs ------------------------------------------------------------------------------
@dataclass
class RunComparison:
    """Verdict on two runs of one kernel on the same inputs (see :func:`compare_runs`)."""

    verdict: str
    op: str
    n_elements: int
    n_differ: int  # elements whose bits differ between the runs
    max_run_ulps: int | None  # largest ULP distance between the runs (None when a NaN is involved)
    unwritten: dict[str, list[str]]  # run name -> index ranges still holding the poison code
    n_unwritten: dict[str, int]
    unexplained: list[tuple[str, Element]]  # (run, element) outside every bound, worst first
    n_unexplained: int
    bound: ErrorBound | None
    max_ratio: float
    out_format: AnyFormat
    identified: dict[str, Any] = field(default_factory=dict)  # run name -> the order reproducing it, or None
    ulp_format: AnyFormat | None = None  # the format max_run_ulps counts in (the output format when it holds them)
    exact: Any = None  # identify.runs.ExactExplanation: differing elements as the same split partials reordered
    by_exact: bool = False  # UNEXPLAINED because ``exact`` found elements no order of the partials gives (in bound)

    def _diff_text(self) -> str:
        ufmt = self.ulp_format or self.out_format
        return f"{self.n_differ} of {self.n_elements} elements differ" + (
            f" (at most {self.max_run_ulps} ULPs of {ufmt.name} apart)" if self.max_run_ulps is not None else "")

    def summary(self) -> str:
        """One line: what was compared and the verdict (every numoracle report has summary())."""
        v = self.verdict
        if v == "IDENTICAL":
            return f"IDENTICAL: the two runs of {self.op} are bit-identical ({self.n_elements} elements)"
        if v == "UNWRITTEN":
            return ("UNWRITTEN: " + "; ".join(f"{r}: {c} element(s)" for r, c in self.n_unwritten.items() if c)
                    + f" of {self.n_elements} still hold the poison pattern")
        exact = self.exact is not None and self.exact.complete
        if v == "REORDERING":
            return f"REORDERING: {self._diff_text()}, " + (
                "each differing element is the other run's split partials combined in another order" if exact else
                "every element within a reordering's bound")
        why = "equal no order of the split partials" if self.by_exact else "outside every order's bound"
        return f"UNEXPLAINED: {self._diff_text()}; {self.n_unexplained} element(s) {why}"

    def __str__(self) -> str:
        v, n = self.verdict, self.n_elements
        diff = self._diff_text()
        if v == "IDENTICAL":
            lines = [f"IDENTICAL: the two runs are bit-identical ({n} elements)"]
        elif v == "UNWRITTEN":
            lines = ["UNWRITTEN: elements still hold the poison pattern, so the kernel never wrote them (their "
                     "values depend on what the buffer held before): "
                     + "; ".join(f"{r}: {c} element(s)" for r, c in self.n_unwritten.items() if c)]
            for r, rng in self.unwritten.items():
                if rng:
                    more = f" ... ({len(rng) - 12} more ranges)" if len(rng) > 12 else ""
                    lines.append(f"  {r}: " + ", ".join(rng[:12]) + more)
        elif v == "REORDERING":
            lines = [f"REORDERING: {diff}, and every element of both runs lies within the error bound of a "
                     f"reordered accumulation around the exact result (max error/bound {self.max_ratio:.4g}): "
                     "expected from split-K, atomics or other order changes"]
        elif self.by_exact:
            lines = [f"UNEXPLAINED: {diff}; {self.n_unexplained} element(s) equal no order of the split partials "
                     f"that give the others, though inside the bound (max error/bound {self.max_ratio:.4g}): a "
                     "corrupted element, not a reordering", "elements no order of the partials gives:"]
        else:
            lines = [f"UNEXPLAINED: {diff}; {self.n_unexplained} element(s) lie outside the bound of every order "
                     f"considered (max error/bound {self.max_ratio:.4g}): a bug, not a reordering"]
            lines.append("worst elements outside the bound:")
        if v == "UNEXPLAINED":
            lines += element_table([e for _, e in self.unexplained], self.out_format, "run index",
                                   [r for r, _ in self.unexplained])
        if self.identified:
            found = {r: o for r, o in self.identified.items() if o is not None}
            lines.append("identified: " + ", ".join(f"{r} = {o!r}" if o is not None else f"{r}: no model tried "
                                                    "reproduces it" for r, o in self.identified.items())
                         + (": the runs are the same arithmetic in two orders (reordering)"
                            if len(found) == len(self.identified) and v != "UNEXPLAINED" else ""))
        if self.exact is not None:
            lines.append(self.exact.text())
        if self.bound is not None:
            if self.bound.vacuous and v in ("REORDERING", "UNEXPLAINED"):
                lines.append("WARNING: " + vacuous_text(self.bound) + ("; the exact explanation above does not rely "
                             "on it" if self.exact is not None and self.exact.complete else
                             "; REORDERING says little here"))
            lines.append("bound:")
            lines += ["  " + s for s in str(self.bound).splitlines()]
        return "\n".join(lines)


def _run_ulp_codes(ca: np.ndarray, cb: np.ndarray, fa: AnyFormat, ofmt: AnyFormat,
                   acc: Any) -> tuple[AnyFormat, np.ndarray, np.ndarray]:
    """The format to count the runs' ULP distances in, and both runs' codes in it: the output format when both
    runs hold only its values (fp16 results stored as float32 or float64), else the accumulator's when no output
    format is given and it holds them (simulate's float64 holding FP32 sums), else the stored format."""
    for f in (ofmt, None if acc is None else ulp_format_of(np.concatenate([ca, cb]), fa, None, acc)):
        if f is None or f == fa or not isinstance(f, Format) or not isinstance(fa, Format):
            continue
        with np.errstate(all="ignore"):
            na, nb = (np.asarray(cast(c, f, src=fa)).reshape(-1) for c in (ca, cb))
            back = [np.asarray(cast(x, fa, src=f)).reshape(-1) for x in (na, nb)]
        fin = [~is_nan(c, fa) for c in (ca, cb)]
        if all(np.array_equal(b[m].astype(np.uint64), c[m].astype(np.uint64)) for b, c, m in zip(back, (ca, cb), fin)):
            return f, na, nb
    return fa, ca, cb


def _differences(op: str, ca: np.ndarray, cb: np.ndarray, fa: AnyFormat, shape: tuple, out: Any, acc: Any,
                 pattern: int | None) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, Any]]:
    """Step 1: the poison masks, the differing elements, and the fields every verdict reports."""
    ofmt = format_of(out) if out is not None else fa
    code = np.uint64(poison_code(fa) if pattern is None else int(pattern))
    masks = {"run_a": (ca.astype(np.uint64) == code).reshape(shape),
             "run_b": (cb.astype(np.uint64) == code).reshape(shape)}
    differ = ca.astype(np.uint64) != cb.astype(np.uint64)
    known = ~is_nan(ca, fa) & ~is_nan(cb, fa)
    ufmt, ua, ub = _run_ulp_codes(ca, cb, fa, ofmt, acc if out is None else None)
    d = ulp_distances(to_key(np.where(known, ua, 0), ufmt), to_key(np.where(known, ub, 0), ufmt), ufmt)
    max_ulps: int | None = 0
    if differ.any():
        max_ulps = int(np.abs(d[differ]).max()) if known[differ].all() else None
    base: dict[str, Any] = dict(op=op, n_elements=int(ca.size), n_differ=int(differ.sum()), max_run_ulps=max_ulps,
                                ulp_format=ufmt, unwritten={k: ranges_text(m) for k, m in masks.items()},
                                n_unwritten={k: int(m.sum()) for k, m in masks.items()}, out_format=ofmt)
    return masks, differ, base


def _judge_runs(st: Setup, runs: dict[str, np.ndarray], fa: AnyFormat, shape: tuple,
                show: int) -> tuple[dict[str, Any], list[tuple[float, str, Element]], int, float]:
    """Step 2: each run judged against the bound: the judgements, the worst failing elements, their count, the
    largest error/bound."""
    bad: list[tuple[float, str, Element]] = []
    n_bad, mr, judged = 0, 0.0, {}
    for name, codes in runs.items():
        j = judged[name] = st.judge(codes, fa)
        n_bad += int((~j.ok).sum())
        mr = max(mr, float(j.ratio.max()) if j.ratio.size else 0.0)
        bad += [(float(j.ratio[i]), name, st.element(j, int(i), shape)) for i in worst_first(j, show) if not j.ok[i]]
    bad.sort(key=lambda t: -t[0])
    return judged, bad, n_bad, mr


@takes_arithmetic
def compare_runs(run_a: Any, run_b: Any, op: str, *inputs: Any, arith: Arithmetic | None = None,
                 acc: Any = FP32, orders: Any = None,
                 kind: str = "worst", out: Any = None, axis: int = -1, confidence: float = 0.999, fma: bool = True,
                 rounding: Any = "rne", pattern: int | None = None, show: int = 10,
                 identify: Any = True, exact: bool = True) -> RunComparison:
    """Compare two runs of a kernel computing ``op`` ("sum", "dot", "matmul") on ``inputs``.

    Verdicts (in this priority):

    * "UNWRITTEN": some element of either run holds the poison code (``poison_like``; ``pattern``):
      the kernel never wrote it. Lists the index ranges (rectangles for 2-D outputs).
    * "IDENTICAL": the runs are bit-identical.
    * "REORDERING": the runs differ, but every element of both runs is within the bound of some
      order in ``orders`` (default: any order, the worst case) around the exact result, or equals the
      exact result correctly rounded to the output format: what split-K with another S, atomics in
      another order, or another tiling produce.
    * "UNEXPLAINED": some element of a run lies outside those bounds (or is NaN/inf where the exact
      result is finite): no accumulation order explains it. The elements are listed worst first.

    ``orders``: None (= "any"), or a list of orders (strings or ``numoracle.orders`` objects); an element
    is explained when it lies within the largest of their bounds. acc, kind, out, fma, rounding: as in
    :func:`check_matmul_close`; axis: for op="sum".

    ``identify``: when the runs differ, name the order of each run (:func:`numoracle.identify_order`,
    the guided search; or a list of candidate orders; False: skip): ``.identified`` maps "run_a" / "run_b"
    to the order that reproduces that run bit for bit (its first 64 output rows), or None. It explains,
    and never changes the verdict.

    ``exact``: when the runs differ, look for an exact explanation (:mod:`numoracle.identify.runs`): every differing
    element is the same split-K partials combined in another order (atomics: a chain in any order; or any binary
    tree of them, ``((p0 + p1) + (p2 + p3))``), per element, every order and tree up to 8 partials. ``.exact``
    says which elements are; when the search was exhaustive and some differing element equals no combine of those
    partials, the verdict is UNEXPLAINED (a corrupted element) even inside the bound.
    """
    op = str(op).lower()
    if op not in ("sum", "dot", "matmul"):
        raise ValueError(f"unknown op {op!r}; ops: sum, dot, matmul")
    need = 1 if op == "sum" else 2
    if len(inputs) != need:
        raise ValueError(f"{op} takes {need} input array(s), got {len(inputs)}")
    pb = Problem(op, inputs, axis)
    (ca, fa), (cb, fb) = pb.actual(run_a, "run_a"), pb.actual(run_b, "run_b")
    if fa != fb:
        raise ValueError(f"run_a is {fa.name} and run_b is {fb.name}; compare runs stored in one format")
    shape = tuple(pb.shape)
    masks, differ, base = _differences(op, ca, cb, fa, shape, out, acc, pattern)
    if any(m.any() for m in masks.values()):
        return RunComparison("UNWRITTEN", unexplained=[], n_unexplained=0, bound=None, max_ratio=float("nan"), **base)
    if not differ.any():
        return RunComparison("IDENTICAL", unexplained=[], n_unexplained=0, bound=None, max_ratio=0.0, **base)
    ords = None if orders is None else list(orders) if isinstance(orders, (list, tuple)) else [orders]
    ords = None if ords is None else [None if o == "any" else o for o in ords]
    st = Setup(pb, fa, acc=acc, order=None, kind=kind, out=out, fma=fma, rounding=rounding, confidence=confidence,
                orders=ords)
    bound = max(st.bounds, key=lambda b: b.coefficient)
    judged, bad, n_bad, mr = _judge_runs(st, {"run_a": ca, "run_b": cb}, fa, shape, show)
    verdict = "UNEXPLAINED" if n_bad else "REORDERING"
    from ..identify.search import identify_runs

    found = identify_runs(identify, {"run_a": run_a, "run_b": run_b}, op, inputs, acc, out, axis)
    why, by_exact = None, False
    if exact and isinstance(fa, Format):
        from ..identify.runs import explain_runs
        ins = inputs if op != "sum" else (np.moveaxis(np.asarray(inputs[0]), axis, -1),)
        why = explain_runs(ca, cb, fa, op, ins, acc, out, found)
        lost = [(name, int(i)) for name, idx in why.unexplained.items() for i in idx]
        if why.established and lost and verdict == "REORDERING":
            verdict, n_bad, by_exact = "UNEXPLAINED", len(lost), True
            bad = [(0.0, name, st.element(judged[name], i, shape)) for name, i in lost]
    return RunComparison(verdict, unexplained=[(r, e) for _, r, e in bad[:show]], n_unexplained=n_bad, bound=bound,
                         max_ratio=mr, identified=found, exact=why, by_exact=by_exact, **base)

