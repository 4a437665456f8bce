"""InvarianceReport: the verdict of an invariance check, its classes of configurations, thresholds, gaps (points
not claimed) and counterexamples; text and JSON forms."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.errors import NumoracleAssertionError, failure_message
from ..models.orders.basic import Order
from ..models.orders.text import order_text
from ..models.orders.tree import PerPosition, TreeOrder
from .space import Config

__all__ = ["InvarianceReport", "OrderClass", "Point", "Threshold", "Gap", "Counterexample", "VERDICTS",
           "describe_order"]

VERDICTS = ("INVARIANT", "VARIANT", "UNDETERMINED", "NOT DETERMINISTIC")


def describe_order(o: Any) -> str:
    """A short structural name of an order: its kind, size, depth, formats and a digest of its full text."""
    if o is None:
        return "no order"
    digest = hashlib.sha1(order_text(o).encode()).hexdigest()[:10]
    if isinstance(o, TreeOrder):
        out = f" -> {o.out.name}" if o.out is not None else ""
        acc = getattr(o.acc, "name", o.acc)
        return f"TreeOrder over {o.n} terms, depth {o.depth}, {_shape(o)}, acc {acc}{out} [{digest}]"
    if isinstance(o, PerPosition):
        return f"PerPosition: {len(o.orders)} trees over the {len(o.index)} watched outputs [{digest}]"
    return f"{o!r:.80} [{digest}]"


def _shape(o: TreeOrder) -> str:
    """The tree's shape in words: a chain (one running sum), or the term counts of the root's subtrees."""
    n = o.n
    leaves = [1] * n + [0] * len(o.nodes)
    for i, ch in enumerate(o.nodes):
        leaves[n + i] = sum(leaves[c] for c in ch)
    if all(sum(leaves[c] > 1 for c in ch) <= 1 for ch in o.nodes):
        return "one chain (a running sum)"
    root = n + len(o.nodes) - 1
    while len(o.nodes[root - n]) == 1 and o.nodes[root - n][0] >= n:      # through rounding-only nodes
        root = o.nodes[root - n][0]
    sizes = [leaves[c] for c in o.nodes[root - n]]
    text = " + ".join(str(x) for x in sizes[:8]) + (f" + ... ({len(sizes)} subtrees)" if len(sizes) > 8 else "")
    return f"root adds subtrees of {text} terms"


@dataclass
class OrderClass:
    """Configurations that share one order of the watched output; ``order`` was revealed at ``revealed_at``."""

    name: str
    order: Order
    revealed_at: Config
    reveal_calls: int
    reveal_seconds: float
    members: list[Config] = field(default_factory=list)

    @property
    def description(self) -> str:
        return describe_order(self.order)

    @property
    def found(self) -> str:
        """Where and how the class was found."""
        return f"revealed at {self.revealed_at} ({self.reveal_calls} calls, {self.reveal_seconds:.1f} s)"


@dataclass
class Point:
    """One configuration tried: its class (None when undetermined) and the evidence: "revealed" (reveal_order found
    the order), "matched" (a class's order reproduced the kernel bit for bit on every check input), "undetermined"
    or "not deterministic"."""

    config: Config
    cls: str | None
    evidence: str
    detail: str = ""


@dataclass
class Threshold:
    """Along ``axis``: ``below`` in class ``below_class``, ``above`` (the next value when ``exact``) in
    ``above_class``. Exact means both configurations were tried and no value lies between them."""

    axis: str
    below: Config
    above: Config
    below_class: str
    above_class: str
    exact: bool

    def __str__(self) -> str:
        lo, hi = self.below.get(self.axis), self.above.get(self.axis)
        rest = ", ".join(f"{n}={v}" for n, v in zip(self.below.names, self.below.values) if n != self.axis)
        how = "" if self.exact else " (untried values between: the threshold is somewhere in that interval)"
        return f"{self.axis}: {lo} -> {hi} ({rest}): class {self.below_class} -> {self.above_class}{how}"


@dataclass
class Gap:
    """Untried values of ``axis`` between two tried configurations; ``claim`` says what is claimed about them."""

    axis: str
    lo: Config
    hi: Config
    count: int
    claim: str


@dataclass
class Counterexample:
    """Inputs on which the watched output's bits differ between configurations ``a`` and ``b``: the watched row
    (``row_a`` / ``row_b``) holds the same inputs in both batches. ``ulps``: the largest distance between the
    kernel's two outputs in ULPs of its output type (the search maximised the simulated one); ``confirmed``: the
    kernel itself gave different bits at a and b."""

    a: Config
    b: Config
    class_a: str
    class_b: str
    inputs_a: tuple
    inputs_b: tuple
    row_a: int
    row_b: int
    out_a: np.ndarray
    out_b: np.ndarray
    ulps: int
    confirmed: bool
    model_agrees: bool
    tried: int
    how: str

    def text(self) -> str:
        j = int(np.argmax(self.out_a != self.out_b)) if self.confirmed else 0
        col = f" column {j}" if self.out_a.size > 1 else ""
        ok = ("CONFIRMED: the kernel gives different bits" if self.confirmed else
              "NOT confirmed: the kernel gave the same bits at both")
        agree = "" if self.model_agrees else " (the kernel's outputs are not the simulated ones)"
        return (f"counterexample {self.a} (class {self.class_a}) vs {self.b} (class {self.class_b}): {ok}; watched"
                f"{col}: {float(self.out_a[j])!r} vs {float(self.out_b[j])!r}, {self.ulps} ULPs apart at most{agree}; "
                f"{self.how}, {self.tried} inputs tried")


@dataclass
class InvarianceReport:
    """What :func:`check_invariance` found (see its docstring for the method)."""

    verdict: str
    op: str
    dtype: str
    axes: dict[str, list]
    varying: tuple[str, ...]
    classes: list[OrderClass]
    points: list[Point]
    thresholds: list[Threshold]
    gaps: list[Gap]
    counterexamples: list[Counterexample]
    undetermined: list[Point]
    nondeterminism: str | None
    configurations: int
    reveals: int
    matches: int
    calls: int
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """The verdict is INVARIANT."""
        return self.verdict == "INVARIANT"

    def failure(self, msg: Any = None, verbose: bool = False) -> Exception:
        """The exception a failing assertion raises: the classes, thresholds and the counterexample."""
        return NumoracleAssertionError(failure_message(f"not batch invariant: {self}", msg), self)

    @property
    def revealed(self) -> list[Config]:
        return [p.config for p in self.points if p.evidence == "revealed"]

    @property
    def not_claimed(self) -> int:
        """Configurations of the space neither revealed nor matched."""
        return self.configurations - sum(p.evidence in ("revealed", "matched") for p in self.points)

    def summary(self) -> str:
        v = self.verdict
        tried = (f"{len(self.points)} of {self.configurations} configurations tried ({self.reveals} revealed, "
                 f"{self.matches} matched), {self.not_claimed} not claimed")
        if v == "INVARIANT":
            one = "one order" if self.op in ("sum", "dot", "matmul") else "the same outputs"
            return f"INVARIANT: {one} at every configuration tried; {tried}"
        if v == "VARIANT":
            what = "orders" if self.op in ("sum", "dot", "matmul") else "classes of outputs"
            return (f"VARIANT: {len(self.classes)} {what}, {len(self.thresholds)} threshold(s), "
                    f"{sum(c.confirmed for c in self.counterexamples)} counterexample(s) confirmed; {tried}")
        if v == "NOT DETERMINISTIC":
            return "NOT DETERMINISTIC: two calls on the same inputs gave different bits; " + tried
        return f"UNDETERMINED: {len(self.undetermined)} configuration(s) could not be decided; {tried}"

    def __str__(self) -> str:
        axes = ", ".join(f"{n}={_span(v)}" for n, v in self.axes.items())
        lines = [self.summary(), f"  {self.op} {self.dtype}; axes {axes}; varying {', '.join(self.varying)}",
                 f"  {self.calls} kernel calls, {self.seconds:.1f} s"]
        if self.nondeterminism:
            lines += ["  not deterministic:"] + ["    " + s for s in self.nondeterminism.splitlines()]
        for c in self.classes:
            lines.append(f"  class {c.name}: {c.description}; {c.found}; {len(c.members)} configuration(s): "
                         f"{_members(c.members)}")
        lines += [f"  threshold {t}" for t in self.thresholds]
        lines += ["  " + c.text() for c in self.counterexamples]
        lines += [f"  undetermined at {p.config}: {p.detail}" for p in self.undetermined]
        if self.gaps:
            lines.append(f"  not claimed ({sum(g.count for g in self.gaps)} untried values between tried ones; "
                         "an order could change and change back between two tried points of one class):")
            lines += ["    " + _gap_line(g) for g in self.gaps[:12]]
            if len(self.gaps) > 12:
                lines.append(f"    ... {len(self.gaps) - 12} more intervals")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (orders as descriptions and, when short, their full text)."""
        def cfg(c: Config) -> dict:
            return c.as_dict()

        def order(o: Any) -> str | None:
            t = order_text(o)
            return t if len(t) <= 4000 else None
        return {
            "verdict": self.verdict, "summary": self.summary(), "op": self.op, "dtype": self.dtype,
            "axes": {n: _span(v) for n, v in self.axes.items()}, "varying": list(self.varying),
            "configurations": self.configurations, "reveals": self.reveals, "matches": self.matches,
            "not_claimed": self.not_claimed, "calls": self.calls, "seconds": round(self.seconds, 3),
            "classes": [{"name": c.name, "order": c.description, "order_text": order(c.order),
                         "revealed_at": cfg(c.revealed_at), "members": [cfg(m) for m in c.members]}
                        for c in self.classes],
            "points": [{"config": cfg(p.config), "class": p.cls, "evidence": p.evidence, "detail": p.detail}
                       for p in self.points],
            "thresholds": [{"axis": t.axis, "below": cfg(t.below), "above": cfg(t.above), "below_class":
                            t.below_class, "above_class": t.above_class, "exact": t.exact} for t in self.thresholds],
            "gaps": [{"axis": g.axis, "lo": cfg(g.lo), "hi": cfg(g.hi), "count": g.count, "claim": g.claim}
                     for g in self.gaps],
            "counterexamples": [{"a": cfg(c.a), "b": cfg(c.b), "class_a": c.class_a, "class_b": c.class_b,
                                 "out_a": c.out_a.tolist(), "out_b": c.out_b.tolist(), "ulps": c.ulps,
                                 "confirmed": c.confirmed, "model_agrees": c.model_agrees, "how": c.how}
                                for c in self.counterexamples],
            "undetermined": [{"config": cfg(p.config), "why": p.detail} for p in self.undetermined],
            "nondeterminism": self.nondeterminism, "notes": self.notes}


def _span(v: list) -> str:
    if len(v) > 2 and all(isinstance(x, int) for x in v) and v == list(range(v[0], v[-1] + 1)):
        return f"{v[0]}:{v[-1]}"
    return ",".join(str(x) for x in v) if len(v) <= 8 else f"{','.join(str(x) for x in v[:6])},...({len(v)})"


def _rest(c: Config, axis: str) -> str:
    return ", ".join(f"{n}={v}" for n, v in zip(c.names, c.values) if n != axis)


def _gap_line(g: Gap) -> str:
    lo, hi = g.lo.get(g.axis), g.hi.get(g.axis)
    ends = g.claim.split("(")[1].split(";")[0].rstrip(")") if "(" in g.claim else g.claim
    return f"{g.axis} strictly between {lo} and {hi} ({g.count} values; {_rest(g.lo, g.axis)}): {ends}"


def _members(ms: list[Config]) -> str:
    text = "; ".join(str(m) for m in ms[:6])
    return text + (f"; ... ({len(ms) - 6} more)" if len(ms) > 6 else "")
