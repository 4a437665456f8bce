"""Invariance of composite kernels (softmax, log_softmax, rms_norm, layer_norm: ``fn(X[M, K]) -> [M, K]``): the
watched row's K outputs compared bit for bit across configurations on seeded rows (normal, wide, near-tie logits,
offset rows), each class of configurations named by the composite model that reproduces it where one does
(:func:`numoracle.composite.identify_composite`), thresholds found by the same bisection as the orders', and every
difference a confirmed counterexample.

Evidence per configuration is "matched": the watched row's outputs on the check rows equal a class's, bit for bit.
Nothing is revealed (there is no probe for an exp or a normalisation): no difference on N rows is a check on those
rows, never a proof, and the report says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..composite.identify.models import as_models
from ..composite.identify.search import identify_composite
from ..core.errors import NumoracleError
from ..core.formats.interop import native_dtype
from .counter import ulp_gap
from .kernel import KernelAt, KernelCallError, RowData, same_bits
from .report import Counterexample, OrderClass, Point, Threshold
from .search import Sweep
from .space import Config

__all__ = ["COMPOSITE_OPS", "CompositeSweep", "OutputClass", "composite_counterexamples", "composite_notes",
           "draw_composite_row", "check_composite_args", "COMPOSITE_KINDS"]

COMPOSITE_OPS = ("softmax", "log_softmax", "rms_norm", "layer_norm")
COMPOSITE_KINDS = ("normal", "wide", "near_tie", "offset")


def draw_composite_row(rng: np.random.Generator, K: int, kind: str, dt: np.dtype) -> RowData:
    """One check row: normal (3 N(0, 1)), wide (N(0, 1) times 2^-6..2^6), near_tie (a third of the terms at the
    max, the rest a few units of 2^-20 below it or N(0, 1)), offset (50 + 0.01 N(0, 1))."""
    x = rng.standard_normal(K)
    if kind == "normal":
        x = 3 * x
    elif kind == "wide":
        x = x * np.exp2(rng.integers(-6, 7, K))
    elif kind == "near_tie":
        top, near = rng.random(K) < 1 / 3, rng.random(K) < 0.5
        x = np.where(top, 1.0, np.where(near, 1.0 - rng.integers(1, 9, K) * 2.0**-20, x))
    else:
        x = 50 + 0.01 * x
    return RowData(x.astype(dt), None, kind)


@dataclass
class OutputClass(OrderClass):
    """Configurations whose watched outputs are the same bits on every check row; ``order`` holds the name of the
    composite model that reproduces them (None when no candidate does), ``model_verdict`` identify_composite's
    verdict on them."""

    order: Any
    model_verdict: str = ""

    @property
    def found(self) -> str:
        return f"first seen at {self.revealed_at} (models scored in {self.reveal_seconds:.1f} s)"

    @property
    def description(self) -> str:
        if self.order is None:
            if self.model_verdict.startswith("reproduced"):
                return f"outputs {self.model_verdict}"
            return f"outputs not named by a model: {self.model_verdict}"
        return f"the outputs of model {self.order}"


class CompositeSweep(Sweep):
    """A Sweep whose classes are the watched row's output bits on the check rows (no orders to reveal)."""

    def __init__(self, *args: Any, models: Any, model_kw: dict, **kw: Any):
        super().__init__(*args, **kw)
        self.models, self.model_kw = models, model_kw
        self.signatures: dict[str, list[np.ndarray]] = {}

    def rows(self, k: KernelAt) -> list[RowData]:
        key = (k.K, 1)
        if key not in self._rows:
            rng = np.random.default_rng([self.seed, 7, k.K])
            kinds = [c for c in COMPOSITE_KINDS if c != "offset" or self.op in ("rms_norm", "layer_norm")]
            self._rows[key] = [draw_composite_row(rng, k.K, kinds[i % len(kinds)], k.dt) for i in range(self.draws)]
        return self._rows[key]

    def _try(self, c: Config, k: KernelAt) -> Point:
        outs, odd = self._observe(c, k)
        if odd is not None:
            return odd
        rows = self.rows(k)
        n = sum(o.size for o in outs)
        for x in self.classes:
            if self.group_of[x.name] == (k.K, 1) and all(same_bits(s, o).all()
                                                         for s, o in zip(self.signatures[x.name], outs)):
                self.matches += 1
                x.members.append(c)
                return Point(c, x.name, "matched", f"the watched row's {n} outputs on {len(rows)} check rows are "
                             f"class {x.name}'s bits")
        return self._new_class(c, k, rows, outs)

    def _new_class(self, c: Config, k: KernelAt, rows: list[RowData], outs: list[np.ndarray]) -> Point:
        t0 = time.perf_counter()
        name, verdict = None, "models not tried"
        if self.models is not None:
            X = np.stack([d.x for d in rows])
            rep = identify_composite(np.stack(outs), self.op, X, candidates=self.models, prune_rows=len(rows),
                                     **self.model_kw)
            name = rep.name
            if rep.verdict == "AMBIGUOUS":
                name, verdict = self._settle(k, rep)
            elif rep.verdict == "NOT REPRODUCED" and rep.best is not None:
                verdict = (f"no candidate model reproduces them (the closest, {rep.best.name}, "
                           f"{100 * rep.best.fraction:.1f} %)")
            else:
                verdict = rep.verdict
        cls = OutputClass(_name(len(self.classes)), name, c, 0, time.perf_counter() - t0, [c], verdict)
        self.classes.append(cls)
        self.group_of[cls.name] = (k.K, 1)
        self.signatures[cls.name] = outs
        self.matches += 1
        what = f"model {name}" if name else "no candidate model"
        return Point(c, cls.name, "matched", f"new outputs on the {len(rows)} check rows ({what} reproduces them)")


    def _settle(self, k: KernelAt, rep: Any) -> tuple[str | None, str]:
        """An AMBIGUOUS naming settled by the kernel itself: each separating row put in the watched row here, the
        watched outputs compared with each class's model (a name only when exactly one class gives them)."""
        names = " | ".join(cls[0].name for cls in rep.classes)
        sep = rep.separating
        before = k.calls
        try:
            got = np.stack([k.watched(RowData(r, None, "separating")) for r in sep.inputs])
        except KernelCallError:
            return None, f"reproduced by models that differ on other rows: {names}"
        finally:
            self.calls += k.calls - before
        which = sep.which(got)
        if len(which) == 1:
            return which[0], (f"REPRODUCED after {len(sep.inputs)} separating row(s) given to the kernel (the check "
                              f"rows alone also fit: {names})")
        return None, f"reproduced by models that differ on other rows: {names}; the separating rows fit {which}"


def _name(i: int) -> str:
    return chr(ord("A") + i % 26) + (str(i // 26) if i >= 26 else "")


def composite_counterexamples(sweep: Any, thresholds: list[Threshold],
                              limit: int) -> list[Counterexample]:
    """One per pair of classes (the first threshold between them): the first check row on which the two
    configurations' watched outputs differ, given to the kernel again at both."""
    out: list[Counterexample] = []
    done: set[frozenset] = set()
    for t in thresholds:
        pair = frozenset((t.below_class, t.above_class))
        if pair in done or len(out) >= limit:
            continue
        done.add(pair)
        sa, sb = sweep.signatures[t.below_class], sweep.signatures[t.above_class]
        diff = [i for i, (a, b) in enumerate(zip(sa, sb)) if not same_bits(a, b).all()]
        ka, kb = sweep.kernel(t.below), sweep.kernel(t.above)
        rows = sweep.rows(ka)
        if not diff:
            continue
        d = rows[diff[0]]
        try:
            oa, ob = ka.watched(d), kb.watched(d)
        except KernelCallError:
            continue
        dt = native_dtype(ka.out_fmt) if ka.out_fmt is not None else None
        confirmed = not same_bits(oa, ob).all()
        agrees = bool(same_bits(oa, sa[diff[0]]).all() and same_bits(ob, sb[diff[0]]).all())
        out.append(Counterexample(ka.config, kb.config, t.below_class, t.above_class, ka.batch(d), kb.batch(d),
                                  ka.row, kb.row, oa, ob, ulp_gap(oa, ob, dt) if confirmed else 0, confirmed, agrees,
                                  diff[0] + 1, f"check row {diff[0]} ({d.kind}) of the seeded check rows"))
    return out


def composite_notes(sweep: Any, complete: bool, ces: list[Counterexample], elapsed: float,
                    limit: float) -> list[str]:
    notes = []
    if not complete:
        notes.append(f"the time budget (max_seconds={limit}) ran out after {elapsed:.1f} s: the configurations not "
                     "tried are not claimed")
    kinds = sorted({d.kind for rs in sweep._rows.values() for d in rs})
    notes.append(f"'matched': the watched row's outputs were compared bit for bit on {sweep.draws} seeded check rows "
                 f"({', '.join(kinds)}) at every configuration tried; equal bits on those rows are a check on a "
                 "sample, not a proof that the kernel computes the same at other inputs")
    named = [x for x in sweep.classes if x.order is not None]
    if named:
        notes.append("classes named by a model: " + "; ".join(f"{x.name} = {x.order}" for x in named))
    notes += [f"class {x.name}: {x.model_verdict}" for x in sweep.classes
              if x.order is None or x.model_verdict.startswith("REPRODUCED after")]
    return notes


def check_composite_args(op: str, evidence: str, workers: int, executor: Any, models: Any) -> Any:
    """The composite path's refusals; returns ``models`` checked ("auto", None or a list of CompositeModel)."""
    if evidence != "match":
        raise NumoracleError(f"{op}: composite ops are compared by their outputs; evidence='reveal' is for sum, dot "
                             "and matmul (leave evidence='match')")
    if workers or executor is not None:
        raise NumoracleError(f"{op}: workers / executor are not supported for composite ops yet; leave them unset")
    if models is None or (isinstance(models, str) and models == "auto"):
        return models
    return as_models(models, "models")
