"""The report of :func:`numoracle.composite.identify_composite`: candidate models ranked by the output elements they
reproduce bit for bit, the classes of reproducing models, the verdict and the rows that separate the classes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...core.formats.format import AnyFormat
from .models import CompositeModel
from .pool import SeparatingRows

__all__ = ["CompositeCandidate", "CompositeIdentifyReport"]


@dataclass
class CompositeCandidate:
    """One candidate model scored: ``matched`` of ``total`` output elements bit for bit; ``ulps``: the others by
    |ULP distance| in the output format; ``confirmed``: scored on every row (not only the pruning subset);
    ``error``: why the model could not run on these inputs (then it scored nothing)."""

    model: CompositeModel
    matched: int
    total: int
    ulps: dict[str, int]
    confirmed: bool
    error: str | None = None

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def fraction(self) -> float:
        return self.matched / self.total if self.total else 0.0

    @property
    def reproduces(self) -> bool:
        return self.confirmed and self.total > 0 and self.matched == self.total

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "matched": self.matched, "total": self.total, "fraction": self.fraction,
                "ulps": dict(self.ulps), "all_rows": self.confirmed, "error": self.error}


def _hist(h: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in h.items() if v) or "-"


@dataclass
class CompositeIdentifyReport:
    """verdict: "REPRODUCED" (the models that reproduce every output element give the same bits on every drawn
    row: one class, named by its first model), "AMBIGUOUS" (several classes do: ``classes``, and ``separating``
    rows to rerun the kernel on), "NOT REPRODUCED" (no candidate does; the closest first)."""

    op: str
    shape: tuple
    in_format: AnyFormat
    out_format: AnyFormat
    candidates: list[CompositeCandidate]
    classes: list[list[CompositeCandidate]]
    separating: SeparatingRows | None
    pool_rows: int
    n_rows: int
    prune_rows: int | None
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if not self.classes:
            return "NOT REPRODUCED"
        return "AMBIGUOUS" if len(self.classes) > 1 else "REPRODUCED"

    @property
    def model(self) -> CompositeModel | None:
        """The reproducing model (REPRODUCED only; None otherwise)."""
        return self.classes[0][0].model if len(self.classes) == 1 else None

    @property
    def name(self) -> str | None:
        return None if self.model is None else self.model.name

    @property
    def best(self) -> CompositeCandidate | None:
        return self.candidates[0] if self.candidates else None

    def summary(self) -> str:
        return self.headline()

    def headline(self) -> str:
        what = (f"({self.op}, {self.in_format.name} inputs, {self.out_format.name} outputs; "
                f"{len(self.candidates)} candidate models scored)")
        if self.verdict == "REPRODUCED":
            c = self.classes[0]
            same = f" (and {len(c) - 1} model(s) giving the same bits on every drawn row)" if len(c) > 1 else ""
            return f"REPRODUCED: {c[0].name} reproduces all {c[0].total} output elements bit for bit{same} {what}"
        if self.verdict == "AMBIGUOUS":
            return (f"AMBIGUOUS: {len(self.classes)} models that differ on other rows each reproduce all "
                    f"{self.classes[0][0].total} output elements: " + "; ".join(c[0].name for c in self.classes[:4])
                    + (" ..." if len(self.classes) > 4 else "") + f" {what}")
        b = self.best
        if b is None or b.total == 0:
            return f"NOT REPRODUCED: no candidate model could run on these inputs {what}"
        rows = "every row" if b.confirmed else f"{self.prune_rows} pruning rows"
        return (f"NOT REPRODUCED: no candidate model reproduces every element; the closest, {b.name}, matches "
                f"{b.matched} of {b.total} ({100 * b.fraction:.1f} %) on {rows}, the rest off by ULPs "
                f"{_hist(b.ulps)}. The kernel is not among the models tried {what}")

    def __str__(self) -> str:
        lines = [self.headline()]
        if len(self.classes) > 1:
            lines.append("reproducing every element (one line per class; models on one line agree on every drawn row):")
            lines += ["  - " + " == ".join(c.name for c in cls[:3]) + (" ..." if len(cls) > 3 else "")
                      for cls in self.classes]
            if self.separating is not None:
                lines.append("to settle it: " + self.separating.instructions())
        lines += [f"note: {n}" for n in self.notes]
        lines.append(f"{len(self.candidates)} candidates, {self.seconds:.2f} s; "
                     + (f"pruned on {self.prune_rows} of {self.n_rows} rows" if self.prune_rows else
                        f"all {self.n_rows} rows") + f"; classes told apart on {self.pool_rows} drawn rows")
        for c in self.candidates[:10]:
            lines.append(f"  {c.matched:>8} / {c.total:<8} {100 * c.fraction:6.2f}%  {'all' if c.confirmed else 'sub'}"
                         f"  {_hist(c.ulps):<28}  {c.name}" + (f"  ({c.error})" if c.error else ""))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "name": self.name, "headline": self.headline(), "op": self.op,
                "shape": list(self.shape), "in_format": self.in_format.name, "out_format": self.out_format.name,
                "classes": [[c.name for c in cls] for cls in self.classes], "n_rows": self.n_rows,
                "prune_rows": self.prune_rows, "pool_rows": self.pool_rows, "seconds": self.seconds,
                "notes": list(self.notes), "candidates": [c.to_dict() for c in self.candidates]}

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **({"indent": 1} | kw))
