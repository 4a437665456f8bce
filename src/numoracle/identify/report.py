"""The report of :func:`numoracle.identify_order`: candidates ranked, the reproducing order first."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.formats.format import AnyFormat
from ..models.arithmetic import Arithmetic
from ..models.orders.presets import preset_name, preset_systems
from ..models.orders.text import order_text
from .cpuvariants import variant_notes

__all__ = ["Candidate", "IdentifyReport", "ulp_histogram", "BUCKETS"]

BUCKETS = ("1", "2-3", "4-15", "16-255", ">=256")


def preset_notes(order: Any) -> list[str]:
    """For each preset inside the order: the systems of the preset table whose tensor cores are that arithmetic."""
    found: list[Any] = []

    def walk(o: Any) -> None:
        if preset_name(o) is not None:
            found.append(o)
        elif dataclasses.is_dataclass(o):
            for f in dataclasses.fields(o):
                walk(getattr(o, f.name))

    walk(order)
    notes = []
    for o in dict.fromkeys(found):
        systems = preset_systems(o)
        if systems:
            gpus = ", ".join(dict.fromkeys(g for g, _ in systems))
            inputs = " or ".join(dict.fromkeys(i for _, i in systems))
            notes.append(f"{preset_name(o)} is the arithmetic of {gpus} with {inputs} inputs (numoracle.orders."
                         f"GPU_PRESETS)")
    return notes


def ulp_histogram(d: np.ndarray, n_nan: int = 0) -> dict[str, int]:
    """Counts of |ULP distance| in BUCKETS, plus "nan" (one side NaN, the other not)."""
    a = np.abs(np.asarray(d, np.int64))
    edges = ((1, 1), (2, 3), (4, 15), (16, 255), (256, None))
    out = {b: int(((a >= lo) & (a <= hi if hi else True)).sum()) for b, (lo, hi) in zip(BUCKETS, edges)}
    out["nan"] = int(n_nan)
    return out


@dataclass
class Candidate:
    """One candidate arithmetic (an order, and where the search varied them, its accumulator and how the operands
    were rounded on the way in) scored on some rows: how many output elements it reproduces bit for bit."""

    order: Any
    stage: str
    matched: int
    total: int
    ulps: dict[str, int]        # the other elements by |ULP distance| to the kernel's
    median_ulps: float          # over all compared elements (0 when at least half match)
    confirmed: bool             # scored on every row through simulate (not the pruning subset, not a shortcut)
    bias: float = 0.0           # mean error direction vs the float64 result: -1 toward zero, +1 away
    simulated: bool = True      # scored on simulate's own output (False: a shortcut, never a confirmation)
    acc: Any = None             # the accumulator the search chose (None: the order's own, else identify's acc)
    operands: Any = None        # (format, rounding) the inputs were rounded with on the way in (None: as given)

    @property
    def key(self) -> tuple:
        """What makes two candidates the same trial: order, accumulator, operand rounding."""
        return (self.order, self.acc, self.operands)

    @property
    def fraction(self) -> float:
        return self.matched / self.total if self.total else 0.0

    @property
    def name(self) -> str:
        """The order's text, with the accumulator and operand rounding the search chose."""
        extra = ([f"acc={self.acc.name}"] if self.acc is not None else []) + (
            [f"operands {self.operands[0]} ({self.operands[1]})"] if self.operands else [])
        return order_text(self.order) + (f" [{', '.join(extra)}]" if extra else "")

    def to_dict(self) -> dict[str, Any]:
        return {"order": repr(self.order), "name": order_text(self.order), "stage": self.stage,
                "acc": None if self.acc is None else self.acc.name,
                "operands": None if self.operands is None else list(self.operands),
                "matched": self.matched, "total": self.total,
                "fraction": self.fraction, "ulps": dict(self.ulps), "median_ulps": self.median_ulps,
                "all_rows": self.confirmed, "bias": self.bias}


def _hist_text(h: dict[str, int]) -> str:
    parts = [f"{k}: {v}" for k, v in h.items() if v]
    return ", ".join(parts) if parts else "-"


def _columns(rows: list[list[str]], right: int) -> list[str]:
    """Rows of cells as text columns as wide as their widest cell, two spaces apart; the first ``right``
    columns (numbers) aligned right, the others left."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.rjust(w) if i < right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
            .rstrip() for r in rows]


@dataclass
class IdentifyReport:
    """Candidates ranked: the order that reproduces every element (if any) first, then by fraction.

    verdict: "REPRODUCED" (one arithmetic reproduces every element: one order, or several that no input tried
    tells apart), "AMBIGUOUS" (arithmetically different candidates each reproduce every element: ``classes``
    lists them, ``separating`` holds inputs on which they differ; or one does, but the outputs are too few to tell
    it from an order outside the set searched: ``weak``, ``evidence``, and ``separating`` holds fresh inputs on
    which it predicts bits), "NOT REPRODUCED" (the closest listed)."""

    op: str
    shape: tuple
    out_format: AnyFormat
    in_format: AnyFormat
    acc: AnyFormat
    candidates: list[Candidate]
    winner: Candidate | None
    prune_rows: int | None       # rows of the pruning subset (None: every row was used throughout)
    n_rows: int
    simulations: int
    seconds: float
    notes: list[str]
    classes: list[list[Candidate]] = field(default_factory=list)   # reproducing candidates, one list per arithmetic
    separating: Any = None       # SeparatingInputs that tell the classes apart (AMBIGUOUS only)
    stopped: str | None = None   # why the search stopped before its end (a time or candidate budget), if it did
    evidence: Any = None         # Evidence: the outputs' likelihood ratio against an order outside the tried set

    @property
    def weak(self) -> bool:
        """One arithmetic reproduces every output, but an open search's outputs are too few to tell it from an
        order outside the candidates tried (numoracle.identify.evidence): AMBIGUOUS, with fresh inputs to rerun."""
        return (self.winner is not None and len(self.classes) <= 1 and self.evidence is not None
                and not self.evidence.enough)

    @property
    def verdict(self) -> str:
        if self.winner is None:
            return "NOT REPRODUCED"
        return "AMBIGUOUS" if len(self.classes) > 1 or self.weak else "REPRODUCED"

    @property
    def order(self) -> Any:
        """The order that reproduces every element (the search's first when the verdict is AMBIGUOUS), or None."""
        return None if self.winner is None else self.winner.order

    @property
    def arithmetic(self) -> Arithmetic | None:
        """The identified arithmetic as one value (None when nothing reproduced the outputs): hand it to simulate,
        the bounds or the checks, e.g. ``assert_matmul_close(out, A, B, rep.arithmetic)``. It carries the operand
        rounding the search found (FP32 inputs read as TF32, say)."""
        if self.winner is None:
            return None
        w = self.winner
        order = w.order
        acc = w.acc if w.acc is not None else (None if order.acc is not None else self.acc)
        kw = {} if w.operands is None else {"operands": w.operands[0], "operands_rounding": w.operands[1]}
        a = Arithmetic(acc=acc, order=order, **kw)
        # the output rounding is implicit only where the order ends in the accumulator (OpenBlasDot's sum ends in
        # its tail_acc, float64: the kernel rounds that to its output)
        wider = getattr(order, "tail_acc", None)
        if self.out_format == a.accumulator and (wider is None or wider == a.accumulator):
            return a
        return a.replace(out=self.out_format)

    @property
    def best(self) -> Candidate | None:
        conf = [c for c in self.candidates if c.confirmed]
        return self.winner or (conf[0] if conf else (self.candidates[0] if self.candidates else None))

    def summary(self) -> str:
        """One line: the verdict (every numoracle report has summary())."""
        return self.headline()

    def headline(self) -> str:
        tried = f"{len(self.candidates)} candidates tried"
        what = f"({self.op}, {self.in_format.name} inputs, {self.out_format.name} outputs; {tried})"
        if self.winner is not None:
            w = self.winner
            if len(self.classes) > 1:
                return (f"AMBIGUOUS: {len(self.classes)} arithmetically different orders each reproduce all {w.total} "
                        f"output elements bit for bit: " + "; ".join(c[0].name for c in self.classes[:4])
                        + (" ..." if len(self.classes) > 4 else "") + f" {what}")
            same = len(self.classes[0]) - 1 if self.classes else 0
            also = f" (and {same} order(s) that are the same arithmetic on these data)" if same else ""
            if self.weak:
                return (f"AMBIGUOUS: {w.name} reproduces all {w.total} output element(s) bit for bit{also}, but too "
                        f"few outputs to decide: an order outside the {len(self.candidates)} tried lands on them by "
                        f"chance as likely (evidence 10^{self.evidence.log10_ratio:.1f}, REPRODUCED needs "
                        f"10^{self.evidence.needed:g}); rerun the kernel on rep.separating {what}")
            return f"REPRODUCED: {w.name} reproduces all {w.total} output elements bit for bit{also} {what}"
        b = self.best
        if b is None:
            return "NOT REPRODUCED: no candidate was scored"
        rows = "every row" if b.confirmed else f"{self.prune_rows} pruning rows"
        return (f"NOT REPRODUCED: none of the {len(self.candidates)} candidates reproduces every element; "
                f"the closest, {b.name}, matches {b.matched} of {b.total} ({100 * b.fraction:.1f} %) on {rows}, "
                f"the rest off by ULPs {_hist_text(b.ulps)}. The kernel's order is not among the models tried.")

    def _rows(self, top: int) -> list[Candidate]:
        return self.candidates[:top]

    def ambiguity_text(self) -> list[str]:
        """Why the verdict is AMBIGUOUS, and how to settle it."""
        if self.weak:
            lines = [f"why: {self.evidence.text()}"]
            if self.separating is not None:
                lines += ["to settle it: " + line for line in self.separating.instructions().splitlines()]
            return lines
        if len(self.classes) < 2:
            return []
        lines = ["reproducing every element (one line per arithmetic; orders on one line agree on every input tried):"]
        for cls in self.classes:
            lines.append("  - " + " == ".join(c.name for c in cls[:3]) + (" ..." if len(cls) > 3 else ""))
        lines.append(f"why: the {self.out_format.name} outputs keep {getattr(self.out_format, 'precision', '?')} "
                     "significant bits, and on these inputs these orders round every output to the same bits; "
                     "on other inputs they differ")
        if self.separating is not None:
            lines += ["to settle it: " + line for line in self.separating.instructions().splitlines()]
        return lines

    def __str__(self) -> str:
        lines = [self.headline()]
        lines += self.ambiguity_text()
        lines += [f"note: {n}" for n in self.notes + (preset_notes(self.order) + variant_notes(self.order)
                                                                     if self.winner else [])]
        if self.stopped:
            lines.append(f"note: the search stopped early: {self.stopped}")
        lines.append(f"{len(self.candidates)} candidates, {self.simulations} simulations, {self.seconds:.2f} s; "
                     + (f"pruned on {self.prune_rows} of {self.n_rows} rows" if self.prune_rows else
                        f"all {self.n_rows} rows"))
        head = ["identical", "fraction", "rows", "stage", "ULPs of the rest", "order"]
        rows = [[str(c.matched), f"{100 * c.fraction:.2f}%", "all" if c.confirmed else "sub", c.stage,
                 _hist_text(c.ulps), c.name] for c in self._rows(10)]
        return "\n".join(lines + _columns([head, *rows], right=2))

    def to_markdown(self, top: int = 10) -> str:
        lines = [f"**{self.headline()}**", ""]
        lines += [f"- {n}" for n in self.ambiguity_text() + self.notes]
        lines += ["| order | stage | identical | fraction | rows | ULPs of the rest |", "|---|---|---|---|---|---|"]
        for c in self._rows(top):
            lines.append(f"| `{c.name}` | {c.stage} | {c.matched} / {c.total} | "
                         f"{100 * c.fraction:.2f} % | {'all' if c.confirmed else 'subset'} | {_hist_text(c.ulps)} |")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reproduced": self.winner is not None,
                "order": None if self.winner is None else repr(self.order),
                "name": None if self.winner is None else order_text(self.order),
                "arithmetic": None if self.winner is None else str(self.arithmetic),
                "classes": [[c.name for c in cls] for cls in self.classes],
                "headline": self.headline(), "op": self.op, "shape": list(self.shape),
                "in_format": self.in_format.name, "out_format": self.out_format.name, "acc": self.acc.name,
                "prune_rows": self.prune_rows, "n_rows": self.n_rows, "simulations": self.simulations,
                "seconds": self.seconds, "notes": list(self.notes), "stopped": self.stopped,
                "evidence": None if self.evidence is None else self.evidence.to_dict(),
                "candidates": [c.to_dict() for c in self.candidates]}

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **({"indent": 1} | kw))
