"""Invariance from recorded outputs (no callable): each configuration's outputs matched against the classes found so
far, else identified (identify_order), and the classes of configurations that share an arithmetic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.args import check_choice
from ..core.errors import ArgumentTypeError
from ..core.inputs import exact_float64
from ..identify.search import identify_order
from ..models.engine.simulation import simulate
from .kernel import same_bits

__all__ = ["classes_of_recorded", "RecordedClasses", "RecordedClass"]


@dataclass
class RecordedClass:
    """Recorded configurations one arithmetic reproduces bit for bit (``arithmetic``: identified at ``found_at``)."""

    name: str
    arithmetic: Any
    found_at: dict
    members: list[dict] = field(default_factory=list)


@dataclass
class RecordedClasses:
    """The classes of recorded configurations. verdict: "INVARIANT" (one class), "VARIANT" (several), or
    "UNDETERMINED" (some configuration's outputs no order identify_order tried reproduces: ``undetermined``)."""

    verdict: str
    op: str
    classes: list[RecordedClass]
    undetermined: list[tuple[dict, str]]

    def summary(self) -> str:
        return (f"{self.verdict}: {len(self.classes)} class(es) over "
                f"{sum(len(c.members) for c in self.classes) + len(self.undetermined)} recorded configurations")

    def __str__(self) -> str:
        lines = [self.summary()]
        for c in self.classes:
            lines.append(f"  class {c.name}: {c.arithmetic!r:.160} (identified at {c.found_at}); members: "
                         + "; ".join(str(m) for m in c.members[:8]) + (" ..." if len(c.members) > 8 else ""))
        lines += [f"  undetermined at {cfg}: {why}" for cfg, why in self.undetermined]
        lines.append("  note: a configuration joins a class when that class's arithmetic reproduces all of its "
                     "recorded outputs bit for bit: evidence on the recorded inputs only")
        return "\n".join(lines)


def _reproduces(arith: Any, op: str, inputs: tuple, actual: np.ndarray) -> bool:
    try:
        got = np.asarray(simulate(op, *inputs, arith=arith), np.float64).reshape(-1)
    except (ValueError, TypeError):
        return False
    return got.shape == actual.shape and bool(same_bits(got, actual).all())


def classes_of_recorded(records: Sequence[tuple[Mapping[str, Any], Any, Sequence[Any]]], op: str, *,
                        candidates: Any = "auto", budget_s: float | None = 60.0) -> RecordedClasses:
    """records: ``(config, outputs, inputs)`` per configuration (config a dict such as ``{"M": 8}``; outputs and
    inputs as identify_order takes them for ``op``). Each configuration is tried against the classes found so far
    (simulate with the class's arithmetic, bit for bit); otherwise identify_order names its order
    (``candidates``, ``budget_s`` as there) and opens a class."""
    op = check_choice(op, "op", ("sum", "dot", "matmul"))
    if not isinstance(records, Sequence) or not records:
        raise ArgumentTypeError("records must be a non-empty list of (config dict, outputs, inputs)")
    classes: list[RecordedClass] = []
    undetermined: list[tuple[dict, str]] = []
    for i, rec in enumerate(records):
        if not (isinstance(rec, (tuple, list)) and len(rec) == 3 and isinstance(rec[0], Mapping)):
            raise ArgumentTypeError(f"record {i} must be (config dict, outputs, inputs), got {type(rec).__name__}")
        cfg, out, inputs = dict(rec[0]), rec[1], tuple(rec[2])
        actual = np.asarray(exact_float64(out, f"record {i}'s outputs")[0], np.float64).reshape(-1)
        hit = next((c for c in classes if _reproduces(c.arithmetic, op, inputs, actual)), None)
        if hit is not None:
            hit.members.append(cfg)
            continue
        rep = identify_order(out, op, *inputs, candidates=candidates, budget_s=budget_s)
        if rep.verdict != "REPRODUCED" or rep.arithmetic is None:
            undetermined.append((cfg, f"identify_order: {rep.summary()}"))
            continue
        classes.append(RecordedClass(chr(ord("A") + len(classes) % 26) + (str(len(classes) // 26) if len(classes)
                                                                             >= 26 else ""),
                                     rep.arithmetic, cfg, [cfg]))
    verdict = "UNDETERMINED" if undetermined else "VARIANT" if len(classes) > 1 else "INVARIANT"
    return RecordedClasses(verdict, op, classes, undetermined)
