"""Classification of a converter's mismatches and the :class:`SweepReport` of a conformance sweep.

A mismatch is an input whose code from the converter under test (``fn``) differs from the
engine's (``numoracle.cast`` with the sweep's policy). :func:`classify_mismatches` puts each one
into the first class of :data:`CLASSES` (this order is the precedence) whose test it passes:

1. ``nan_payload_or_sign``: both results are NaN (different NaN codes: sign or payload).
2. ``nan_to_policy``: the source is NaN or +-inf and the destination has no NaN (FP6, FP4,
   integers): the converter maps the special to another finite value than the ``nan_to`` /
   overflow policy says.
3. ``saturation_vs_inf_nan``: one side is +-inf or NaN, the other finite, and the converter's
   code equals the engine's with the other overflow choice (``overflow='saturate'`` when the
   sweep's policy is IEEE/NaN, the destination's IEEE/NaN default when it is saturate).
4. ``signed_zero``: both results are zeros of different signs.
5. ``double_rounding``: the converter's code equals the engine's cast of the source first rounded
   (RNE) to an intermediate format I, tried in the order FP32, FP16, BF16, TF32, where I holds
   every destination value (``I`` wider than ``dst``) and not every source value (narrower than
   ``src``); the second hop uses the sweep's policy or its other overflow choice. Checked before
   flush-to-zero because rounding through FP32 can itself give 0 next to the smallest subnormal.
6. ``flush_to_zero``: the converter gives +-0 where the source is nonzero and below the
   destination's smallest normal, or its code equals the engine's with ``ftz`` and/or ``daz``
   toggled.
7. ``off_by_one_ulp``: both results are numbers one step apart in the destination's order;
   whether the source lies exactly at a rounding tie (a midpoint of two destination values, or
   ``k + 1/2`` for integer destinations) is counted.
8. ``other``: anything else.

Separately from these classes, a sample of every chunk is converted twice; elements whose two
codes differ are counted as ``non_deterministic``.

Each element is classified on its own, so one cause can show under several classes: a converter
that truncates (or uses any other rounding mode) differs from RNE next to destination ties exactly
as a double rounding through FP32 does, and is counted there, and elsewhere as ``off_by_one_ulp``
not at a tie; a double rounding that lands on the overflow threshold counts as saturation. To test
such a hypothesis, sweep again with the suspected policy (``rounding='rtz'``, ``overflow='wrap'``
...): the classes it explains disappear.

With a known library (``fn`` one of numpy / ml_dtypes / torch, or a callable with such a
``library`` attribute) each mismatch is also checked against ``deviations.KNOWN_DEVIATIONS``
(per element, see :func:`known_labels`), under the library's default policy only.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..chains.verdict import fmt_value
from ..core.engine.codekeys import is_nan
from ..core.formats.format import AnyFormat
from ..core.formats.policy import Policy
from ..core.scalar import value_of
from ..core.text import hex_width
from .classify import (
    CLASSES,
    classify_mismatches,
    first_true,
    inf_mask,
    intermediates,
    known_labels,
    smallest,
    tie_mask,
)

__all__ = ["CLASSES", "SweepReport", "Witness", "ClassStats", "SweepError", "classify_mismatches",
           "intermediates", "tie_mask"]



def summarise(src: AnyFormat, dst: AnyFormat, pol: Policy, library: str | None, k: int, x: np.ndarray,
              a: np.ndarray, r: np.ndarray, ascending: bool = False) -> dict[str, Any]:
    """Counts per class, known-deviation coverage and labels, ties and the ``k`` smallest witnesses per class.

    ``ascending``: ``x`` holds distinct codes in increasing order (an exhaustive range).
    """
    cls, det = classify_mismatches(src, dst, pol, x, a, r)
    counts = np.bincount(cls, minlength=len(CLASSES))
    out: dict[str, Any] = {"counts": Counter(), "known": Counter(), "labels": Counter(), "ties": Counter(),
                           "witnesses": {}}
    ids, labels = (None, []) if library is None else known_labels(library, src, dst, pol, cls, x, a, r)
    if ids is not None:
        L = len(labels)
        pair = np.bincount(cls.astype(np.int32) * L + ids, minlength=len(CLASSES) * L).reshape(len(CLASSES), L)
        known = pair[:, 2:].sum(axis=1)  # label ids 0 ("" ) and 1 ("unexplained") are not known
        for c, j in zip(*np.nonzero(pair[:, 2:])):
            out["labels"][(CLASSES[c], labels[j + 2])] += int(pair[c, j + 2])
    inters = intermediates(src, dst)
    for c in np.flatnonzero(counts):
        name = CLASSES[c]
        out["counts"][name] += int(counts[c])
        if ids is not None:
            out["known"][name] += int(known[c])
        mask = cls == c
        if name == "off_by_one_ulp":
            d = det[mask]
            out["ties"][name] += -1 if (d < 0).any() else int(np.count_nonzero(d == 1))
        if ascending:  # distinct codes in increasing order: the first k are the smallest
            pos = first_true(mask, k)
        else:
            sel = np.flatnonzero(mask)
            pos = sel[smallest(x[sel], k)]
        ws = []
        for i in pos:
            note = ""
            if name == "double_rounding":
                note = f"via {inters[det[i]].name}"
            elif name == "off_by_one_ulp":
                note = {1: "at an exact tie", 0: "not at a tie"}.get(int(det[i]), "")
            elif name == "saturation_vs_inf_nan":
                fin = not (is_nan(a[i:i + 1], dst)[0] or inf_mask(a[i:i + 1], dst)[0])
                note = "fn saturates" if fin else "fn gives inf/NaN"
            ws.append(Witness(int(x[i]), int(a[i]), int(r[i]), note, labels[ids[i]] if ids is not None else ""))
        out["witnesses"][name] = tuple(ws)
    return out


# ---- merging chunk results ----------------------------------------------------------------
@dataclass
class MergedChunks:
    """What the chunks of a sweep found, merged as they arrive (the report is made from it)."""

    compared: int = 0
    matching: int = 0
    counts: Counter = field(default_factory=Counter)
    known: Counter = field(default_factory=Counter)
    labels: Counter = field(default_factory=Counter)
    ties: dict = field(default_factory=dict)
    witnesses: dict = field(default_factory=dict)
    nondet: int = 0
    nondet_witnesses: tuple = ()
    errors: dict = field(default_factory=dict)  # (kind, message) -> [lo, hi, first, last, chunks, elements, compared]
    cpu: float = 0.0

    def add(self, r: Any, k: int) -> None:
        self.compared += r.compared
        self.matching += r.matching
        self.counts.update(r.counts)
        self.known.update(r.known)
        self.labels.update(r.labels)
        for name, t in r.ties.items():
            prev = self.ties.get(name, 0)
            self.ties[name] = -1 if (prev < 0 or t < 0) else prev + t
        for name, ws in r.witnesses.items():
            self.witnesses[name] = merge_witnesses(self.witnesses.get(name, ()), ws, k)
        self.nondet += r.nondet
        self.nondet_witnesses = merge_witnesses(self.nondet_witnesses, r.nondet_witnesses, k)
        if r.error is not None:
            self.error(r.error[0], r.error[1], r.part, r.first_last, r.error[2])
        self.cpu += r.cpu

    def error(self, kind: str, message: str, part: Any, first_last: tuple[int, int], compared: bool) -> None:
        n = 0 if compared else part.hi - part.lo
        e = self.errors.get((kind, message))
        if e is None or part.lo < e[0]:
            self.errors[(kind, message)] = [part.lo, part.hi, *first_last, (e[4] if e else 0) + 1,
                                            (e[5] if e else 0) + n, compared]
        else:
            e[4] += 1
            e[5] += n


# ---- the report ---------------------------------------------------------------------------------
def code_hex(code: int, fmt: AnyFormat) -> str:
    return f"0x{int(code):0{hex_width(fmt)}x}"


def show_code(code: int, fmt: AnyFormat) -> str:
    """``0x3f81 (1.0078125)``: the code and its exact value (dyadic values by their float64 repr)."""
    return f"{code_hex(code, fmt)} ({fmt_value(value_of(int(code), fmt))})"


@dataclass(frozen=True, order=True)
class Witness:
    """One input of a class: the source code, the converter's and the engine's codes, a note."""

    source: int
    fn_code: int
    engine_code: int
    note: str = ""
    known: str = ""  # the known deviation's label (library sweeps), "" if none

    def describe(self, src: AnyFormat, dst: AnyFormat, fn_name: str = "fn") -> str:
        extra = "; ".join(t for t in (self.note, f"known: {self.known}" if self.known else "") if t)
        return (f"{src.name} {show_code(self.source, src)} -> {fn_name} {show_code(self.fn_code, dst)}, "
                f"numoracle {show_code(self.engine_code, dst)}" + (f"  [{extra}]" if extra else ""))

    def describe_calls(self, src: AnyFormat, dst: AnyFormat) -> str:
        """A non-determinism witness: ``fn_code`` and ``engine_code`` hold fn's first and second result."""
        return (f"{src.name} {show_code(self.source, src)}: call 1 {show_code(self.fn_code, dst)}, "
                f"call 2 {show_code(self.engine_code, dst)}")

    def to_dict(self, src: AnyFormat, dst: AnyFormat) -> dict[str, Any]:
        return {"source": code_hex(self.source, src), "source_value": fmt_value(value_of(self.source, src)),
                "fn": code_hex(self.fn_code, dst), "fn_value": fmt_value(value_of(self.fn_code, dst)),
                "engine": code_hex(self.engine_code, dst), "engine_value": fmt_value(value_of(self.engine_code, dst)),
                "note": self.note, "known": self.known}


@dataclass
class ClassStats:
    """Count of one mismatch class, how many a known deviation covers (None: not a library sweep), witnesses."""

    name: str
    count: int
    known: int | None
    labels: dict[str, int] = field(default_factory=dict)  # known-deviation label -> count
    ties: int | None = None  # off_by_one_ulp: how many at an exact tie (None: undecidable / other class)
    witnesses: tuple[Witness, ...] = ()

    @property
    def unexplained(self) -> int:
        return self.count - (self.known or 0)

    def coverage(self) -> str:
        if self.known is None:
            return "known deviations not checked"
        if self.known == self.count:
            return "all covered by known deviations"
        if self.known == 0:
            return "NOT covered by known deviations"
        return f"{self.known} covered, {self.count - self.known} NOT covered by known deviations"


@dataclass(frozen=True)
class SweepError:
    """A problem with the converter itself (an exception, a wrong shape or dtype) or with the executor."""

    kind: str  # "exception" | "wrong_shape" | "wrong_dtype" | "executor"
    message: str
    first_range: tuple[int, int]  # input positions [lo, hi) of the first chunk where it happened
    first_codes: tuple[int, int]  # the first and last source code of that chunk
    chunks: int = 1
    elements: int = 0  # inputs not compared because of it
    compared: bool = False  # wrong_dtype: the values were converted exactly and compared anyway


@dataclass
class SweepReport:
    """Result of :func:`numoracle.conformance.sweep`. Equal inputs give equal reports (timings are not compared).

    ``verdict``: ``"clean"`` (every input gives the engine's code), ``"explained"`` (every mismatch
    is covered by a known deviation of the library), ``"unexplained"`` (some mismatch is not, or
    the converter is non-deterministic) or ``"error"`` (on some chunk the converter raised,
    returned a wrong shape or dtype, or the executor failed; see ``errors``: a wrong but exactly
    convertible dtype is still compared, and still an error). ``ok`` is True for clean and
    explained, ``clean`` for clean only. ``unexplained`` counts the mismatches no known deviation
    covers (all of them for a converter that is not a known library, or when the policy is not
    the library's default one: ``known_note`` says so). ``classes`` maps each occurring class
    (in :data:`CLASSES` order) to its :class:`ClassStats`; ``counts()`` to its count.
    """

    src: AnyFormat
    dst: AnyFormat
    against: str
    library: str | None
    policy: str
    inputs: str
    n_inputs: int
    compared: int
    matching: int
    classes: dict[str, ClassStats]
    non_deterministic: int = 0
    non_deterministic_witnesses: tuple[Witness, ...] = ()
    errors: tuple[SweepError, ...] = ()
    known_note: str = ""  # why known deviations were not checked ("" when they were)
    seconds: float = field(default=0.0, compare=False)
    cpu_seconds: float = field(default=0.0, compare=False)
    workers: int = field(default=1, compare=False)
    chunks: int = field(default=1, compare=False)
    executor: str = field(default="", compare=False)

    # ---- verdict ----
    @property
    def mismatches(self) -> int:
        return self.compared - self.matching

    @property
    def unexplained(self) -> int:
        return sum(c.unexplained for c in self.classes.values())

    @property
    def status(self) -> str:
        return "error" if self.errors else "ok"

    @property
    def verdict(self) -> str:
        if self.status == "error":
            return "error"
        if self.unexplained or self.non_deterministic:
            return "unexplained"
        return "explained" if self.mismatches else "clean"

    @property
    def ok(self) -> bool:
        return self.verdict in ("clean", "explained")

    @property
    def clean(self) -> bool:
        return self.verdict == "clean"

    def counts(self) -> dict[str, int]:
        """Mismatches per class (only classes that occur)."""
        return {k: c.count for k, c in self.classes.items()}

    # ---- text ----
    def summary(self) -> str:
        """One line: what was checked and the verdict (every numoracle report has summary())."""
        lib = f" ({self.policy})" if self.policy else ""
        return f"sweep {self.src.name} -> {self.dst.name} against {self.against}{lib}; inputs: {self.inputs}"

    def verdict_text(self) -> str:
        v = self.verdict
        mm = self.mismatches
        if v == "error":
            n = sum(e.elements for e in self.errors)
            ch = sum(e.chunks for e in self.errors)
            return (f"ERROR: {ch} chunk(s) failed ({', '.join(sorted({e.kind for e in self.errors}))}), {n} inputs "
                    f"not compared; {self.compared} compared, {mm} mismatching")
        nd = (f"; NON-DETERMINISTIC: {self.non_deterministic} sampled inputs gave different codes on a second call"
              if self.non_deterministic else "")
        if v == "clean":
            return f"CLEAN: all {self.compared} inputs give numoracle's codes"
        if self.unexplained:
            return f"UNEXPLAINED: {self.unexplained} of {mm} mismatches are not covered by a known deviation{nd}"
        if v == "unexplained":
            return f"UNEXPLAINED{nd} ({mm} mismatches, all covered by known deviations)"
        return f"EXPLAINED: {mm} mismatches, all covered by known deviations of {self.library}"

    def _timing(self) -> str:
        return (f"{self.seconds:.1f} s wall, {self.cpu_seconds:.1f} s CPU in chunks; {self.chunks} chunk(s) on "
                f"{self.workers or '?'} worker(s) ({self.executor})")

    def __str__(self) -> str:
        lines = [self.summary(), self.verdict_text(),
                 f"compared {self.compared} of {self.n_inputs} inputs: {self.matching} match, {self.mismatches} differ"]
        if self.known_note:
            lines.append(f"note: {self.known_note}")
        for c in self.classes.values():
            tie = f", {c.ties} at an exact tie" if c.ties is not None else ""
            lab = ", ".join(f"{k}: {n}" for k, n in sorted(c.labels.items()))
            lines.append(f"  {c.name}: {c.count}{tie}; {c.coverage()}" + (f" ({lab})" if lab else ""))
            lines += [f"    {w.describe(self.src, self.dst, self._fn())}" for w in c.witnesses]
        if self.non_deterministic:
            lines.append(f"  non_deterministic: {self.non_deterministic} sampled inputs (a second call on the same "
                         "inputs gave other codes)")
            lines += [f"    {w.describe_calls(self.src, self.dst)}" for w in self.non_deterministic_witnesses]
        for e in self.errors:
            lines.append(f"  {e.kind}: {e.message} (first in inputs [{e.first_range[0]}, {e.first_range[1]}): "
                         f"codes {code_hex(e.first_codes[0], self.src)}..{code_hex(e.first_codes[1], self.src)}; "
                         f"{e.chunks} chunk(s), {e.elements} inputs not compared)")
        lines.append(f"time: {self._timing()}")
        return "\n".join(lines)

    def _fn(self) -> str:
        return self.library or "fn"

    def to_markdown(self) -> str:
        out = [f"### {self.summary()}", "", f"**{self.verdict_text()}**", "",
               f"{self.compared} of {self.n_inputs} inputs compared: {self.matching} match, {self.mismatches} differ."
               + (f" Note: {self.known_note}." if self.known_note else ""), ""]
        if self.classes:
            out += ["| class | count | at a tie | known deviations |", "|---|---:|---:|---|"]
            for c in self.classes.values():
                out.append(f"| {c.name} | {c.count} | {'' if c.ties is None else c.ties} | {c.coverage()} |")
            out.append("")
            out += ["| class | source | fn | numoracle | note |", "|---|---|---|---|---|"]
            for c in self.classes.values():
                for w in c.witnesses:
                    note = "; ".join(t for t in (w.note, f"known: {w.known}" if w.known else "") if t)
                    out.append(f"| {c.name} | `{show_code(w.source, self.src)}` | `{show_code(w.fn_code, self.dst)}` | "
                               f"`{show_code(w.engine_code, self.dst)}` | {note} |")
            out.append("")
        if self.non_deterministic:
            out += [f"Non-deterministic: {self.non_deterministic} sampled inputs gave different codes on a second "
                    "call.", ""]
        for e in self.errors:
            out.append(f"- **{e.kind}**: {e.message} (first in inputs [{e.first_range[0]}, {e.first_range[1]}); "
                       f"{e.chunks} chunk(s), {e.elements} inputs not compared)")
        if self.errors:
            out.append("")
        out.append(f"Time: {self._timing()}.")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "src": self.src.name, "dst": self.dst.name, "against": self.against, "library": self.library,
            "policy": self.policy, "inputs": self.inputs, "n_inputs": self.n_inputs, "verdict": self.verdict,
            "ok": self.ok, "status": self.status, "compared": self.compared, "matching": self.matching,
            "mismatches": self.mismatches, "unexplained": self.unexplained, "known_note": self.known_note,
            "classes": {k: {"count": c.count, "known": c.known, "labels": dict(sorted(c.labels.items())),
                            "ties": c.ties, "witnesses": [w.to_dict(self.src, self.dst) for w in c.witnesses]}
                        for k, c in self.classes.items()},
            "non_deterministic": self.non_deterministic,
            "non_deterministic_witnesses": [
                {"source": code_hex(w.source, self.src), "call_1": code_hex(w.fn_code, self.dst),
                 "call_2": code_hex(w.engine_code, self.dst)} for w in self.non_deterministic_witnesses],
            "errors": [dataclasses.asdict(e) for e in self.errors],
            "seconds": self.seconds, "cpu_seconds": self.cpu_seconds, "workers": self.workers,
            "chunks": self.chunks, "executor": self.executor,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def merge_witnesses(a: tuple[Witness, ...] | list[Witness], b: tuple[Witness, ...] | list[Witness],
                    k: int) -> tuple[Witness, ...]:
    """The ``k`` witnesses with the smallest source codes of both lists (one per source code)."""
    seen: dict[int, Witness] = {}
    for w in sorted([*a, *b]):
        if len(seen) >= k:
            break
        seen.setdefault(w.source, w)
    return tuple(seen.values())

