"""The report of :func:`numoracle.identify_order`: candidates ranked, the reproducing order first."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.formats import AnyFormat
from ..models.arithmetic import Arithmetic
from ..models.ordertext import order_text
from ..models.presets import preset_name, preset_systems

__all__ = ["Candidate", "IdentifyReport", "ulp_histogram", "order_name", "BUCKETS"]

BUCKETS = ("1", "2-3", "4-15", "16-255", ">=256")


def order_name(order: Any) -> str:
    """The order's text with every preset inside it written as the preset call that builds it (parses back)."""
    return order_text(order)


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
    """One order scored on some rows: how many output elements it reproduces bit for bit."""

    order: Any
    stage: str
    matched: int
    total: int
    ulps: dict[str, int]        # the other elements by |ULP distance| to the kernel's
    median_ulps: float          # over all compared elements (0 when at least half match)
    confirmed: bool             # scored on every row (not only the pruning subset)
    bias: float = 0.0           # mean error direction vs the float64 result: -1 toward zero, +1 away
    simulated: bool = True      # scored on simulate's own output (False: a shortcut, never a confirmation)

    @property
    def fraction(self) -> float:
        return self.matched / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"order": repr(self.order), "name": order_name(self.order), "stage": self.stage,
                "matched": self.matched, "total": self.total,
                "fraction": self.fraction, "ulps": dict(self.ulps), "median_ulps": self.median_ulps,
                "all_rows": self.confirmed, "bias": self.bias}


def _hist_text(h: dict[str, int]) -> str:
    parts = [f"{k}: {v}" for k, v in h.items() if v]
    return ", ".join(parts) if parts else "-"


@dataclass
class IdentifyReport:
    """Candidates ranked: the order that reproduces every element (if any) first, then by fraction."""

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

    @property
    def order(self) -> Any:
        """The order that reproduces every element, or None."""
        return None if self.winner is None else self.winner.order

    @property
    def arithmetic(self) -> Arithmetic | None:
        """The identified arithmetic as one value (None when nothing reproduced the outputs): hand it to simulate,
        the bounds or the checks, e.g. ``assert_matmul_close(out, A, B, rep.arithmetic)``."""
        if self.winner is None:
            return None
        order = self.winner.order
        acc = None if order.acc is not None else self.acc
        a = Arithmetic(acc=acc, order=order)
        return a if self.out_format == a.accumulator else a.replace(out=self.out_format)

    @property
    def best(self) -> Candidate | None:
        conf = [c for c in self.candidates if c.confirmed]
        return self.winner or (conf[0] if conf else (self.candidates[0] if self.candidates else None))

    def headline(self) -> str:
        if self.winner is not None:
            w = self.winner
            return (f"REPRODUCED: {order_name(w.order)} reproduces all {w.total} output elements bit for bit "
                    f"({self.op}, {self.in_format.name} inputs, {self.out_format.name} outputs)")
        b = self.best
        if b is None:
            return "NOT REPRODUCED: no candidate was scored"
        rows = "every row" if b.confirmed else f"{self.prune_rows} pruning rows"
        return (f"NOT REPRODUCED: none of the {len(self.candidates)} candidate orders reproduces every element; "
                f"the closest, {order_name(b.order)}, matches {b.matched} of {b.total} "
                f"({100 * b.fraction:.1f} %) on {rows}. "
                "The kernel's order is not among the models tried.")

    def _rows(self, top: int) -> list[Candidate]:
        return self.candidates[:top]

    def __str__(self) -> str:
        lines = [self.headline()]
        lines += [f"note: {n}" for n in self.notes + (preset_notes(self.order) if self.winner else [])]
        lines.append(f"{len(self.candidates)} candidates, {self.simulations} simulations, {self.seconds:.2f} s; "
                     + (f"pruned on {self.prune_rows} of {self.n_rows} rows" if self.prune_rows else
                        f"all {self.n_rows} rows"))
        lines.append("  identical  fraction  rows    stage       ULPs of the rest              order")
        for c in self._rows(10):
            lines.append(f"  {c.matched:>9} {100 * c.fraction:8.2f}%  {'all' if c.confirmed else 'sub':<6}  "
                         f"{c.stage:<10}  {_hist_text(c.ulps):<28}  {order_name(c.order)}")
        return "\n".join(lines)

    def to_markdown(self, top: int = 10) -> str:
        lines = [f"**{self.headline()}**", ""]
        lines += [f"- {n}" for n in self.notes]
        lines += ["| order | stage | identical | fraction | rows | ULPs of the rest |", "|---|---|---|---|---|---|"]
        for c in self._rows(top):
            lines.append(f"| `{order_name(c.order)}` | {c.stage} | {c.matched} / {c.total} | "
                         f"{100 * c.fraction:.2f} % | {'all' if c.confirmed else 'subset'} | {_hist_text(c.ulps)} |")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"reproduced": self.winner is not None, "order": None if self.winner is None else repr(self.order),
                "name": None if self.winner is None else order_name(self.order),
                "headline": self.headline(), "op": self.op, "shape": list(self.shape),
                "in_format": self.in_format.name, "out_format": self.out_format.name, "acc": self.acc.name,
                "prune_rows": self.prune_rows, "n_rows": self.n_rows, "simulations": self.simulations,
                "seconds": self.seconds, "notes": list(self.notes),
                "candidates": [c.to_dict() for c in self.candidates]}

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **({"indent": 1} | kw))
