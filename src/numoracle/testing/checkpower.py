"""What a ``check_*_close`` can detect: its threshold next to the typical error of other accumulators.

A worst-case bound over "any" order grows like ``(K - 1) u``; at large K it can exceed the error a
kernel makes when it accumulates in a narrower format (BF16, FP16, TF32) than it claims, and then
the check passes such a kernel. :func:`detection_power` says so with numbers measured on the
check's own inputs: it simulates (``numoracle.simulate``, bit-exact) the accumulation of a few
sampled output elements in the claimed accumulator and in each narrower one, in the claimed order
(for "any": sequential and pairwise, the deepest and the shallowest common trees), rounds the
results to the output format, and reports the typical (median) error of each next to the check's
threshold, the bound coefficient ``c`` (relative to ``sum|t|``). Where a narrower accumulator's
typical error stays within the bound it says plainly that the check cannot tell the two apart, and
which stricter check (``kind='probabilistic'``, a named order) would, with that check's ``c``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..bounds.boundmath import sci
from ..bounds.expected import expected_error_bound
from ..core.engine.convert import cast, decode
from ..core.formats.format import BF16, FP16, FP32, TF32, AnyFormat, Format, format_of

__all__ = ["DetectionPower", "AccuracyRow", "detection_power", "NARROWER"]

NARROWER = (FP32, TF32, FP16, BF16)  # the accumulators a kernel may use in place of the claimed one
_SAMPLE = 8


@dataclass(frozen=True)
class AccuracyRow:
    """Typical (median over the sampled elements) error of one accumulator, per simulated order."""

    acc: AnyFormat
    claimed: bool
    rel: dict[str, float]  # order label -> median |error| / sum|t|
    ratio: dict[str, float]  # order label -> median |error| / the check's tolerance
    note: str = ""

    @property
    def passes(self) -> list[str]:
        """The orders in which this accumulator's typical error stays within the check's bound."""
        return [o for o, r in self.ratio.items() if r <= 1]


@dataclass(frozen=True)
class DetectionPower:
    """The detection statement of one check (see the module docstring); ``str()`` gives its lines."""

    acc: AnyFormat
    K: int
    order: str
    kind: str
    coefficient: float
    median_tolerance: float
    sampled: int
    elements: int
    rows: tuple[AccuracyRow, ...]
    stricter: tuple[tuple[str, float, tuple[str, ...]], ...] = field(default=())  # (check, c, "ACC (orders)" it flags)

    @property
    def cannot_tell(self) -> list[str]:
        """Names of narrower accumulators whose typical error this check accepts."""
        return [r.acc.name.upper() for r in self.rows if not r.claimed and r.passes]

    def __str__(self) -> str:
        lines = [f"detection power (K = {self.K}, order {self.order}, kind {self.kind}; {self.sampled} of "
                 f"{self.elements} elements simulated):",
                 f"  smallest error it catches: {sci(self.coefficient, 3)} x sum|t| (the bound's c; median element "
                 f"tolerance {self.median_tolerance:.3g})",
                 "  typical error (median) / sum|t|, and / the tolerance, when accumulating in:"]
        for r in self.rows:
            what = ", ".join(f"{o} {r.rel[o]:.2g} ({r.ratio[o]:.2g} x bound)" for o in r.rel) or r.note
            lines.append(f"    {r.acc.name.upper()}{' (claimed)' if r.claimed else ''}: {what}")
        if self.cannot_tell:
            rows = [r for r in self.rows if not r.claimed and r.passes]
            how = "; ".join(f"{r.acc.name.upper()} ({', '.join(r.passes)})" for r in rows)
            lines.append(f"  this check cannot tell {self.acc.name.upper()} from {', '.join(self.cannot_tell)} "
                         f"accumulation here: their typical error stays within the bound ({how})")
            for check, c, flags in self.stricter:
                said = (f"would flag {', '.join(flags)} here" if flags else "would not flag them either")
                lines.append(f"  stricter: {check} (c = {sci(c, 3)}) {said}")
        return "\n".join(lines)


def _orders(order: Any, dtype: Any = None) -> dict[str, Any]:
    """The orders to simulate: an Order or the text of one as it names it; "any" and the bound-only forms
    ("pairwise:<base>") -> sequential and pairwise as stand-ins."""
    from ..models.orders.basic import Pairwise, Sequential
    from ..models.orders.text import as_order, order_label

    if order is None or order == "any":
        return {"sequential": Sequential(), "pairwise": Pairwise()}
    try:
        o = as_order(order, dtype)
    except ValueError:   # a bound over many orders: no single evaluation to run
        name = str(order).strip().lower()
        return {f"sequential (stand-in for {name})": Sequential(), f"pairwise (stand-in for {name})": Pairwise()}
    return {order_label(o): o}


def _sampled_vectors(op: str, inputs: tuple, work_shape: tuple, K: int, flat: np.ndarray) -> tuple:
    """Per sampled output element its term vectors: (x,) for sum, (a, b) rows for dot / matmul."""
    if op == "sum":
        return (np.asarray(inputs[0]).reshape(-1, K)[flat],)
    if op == "dot":
        return tuple(np.broadcast_to(x, tuple(work_shape) + (K,)).reshape(-1, K)[flat] for x in inputs)
    a2, b2 = inputs
    batch = tuple(work_shape[:-2])
    ab = np.broadcast_to(a2, batch + a2.shape[-2:]).reshape((-1,) + a2.shape[-2:])
    bb = np.broadcast_to(b2, batch + b2.shape[-2:]).reshape((-1,) + b2.shape[-2:])
    m, n = work_shape[-2], work_shape[-1]
    g, i, j = flat // (m * n), (flat // n) % m, flat % n
    return ab[g, i, :], np.swapaxes(bb, -1, -2)[g, j, :]


def _simulate(op: str, vecs: tuple, acc: AnyFormat, order: Any, fma: bool, rounding: Any) -> np.ndarray:
    from ..models.engine.simulation import simulate

    if op == "sum":
        return np.asarray(simulate("sum", vecs[0], acc=acc, order=order, rounding=rounding), np.float64)
    a, b = vecs  # the diagonal of (sampled rows) @ (sampled columns): one simulation for all samples
    return np.diagonal(np.asarray(simulate("matmul", a, b.T, acc=acc, order=order, fma=fma, rounding=rounding),
                                  np.float64)).copy()


def detection_power(op: str, inputs: tuple, work_shape: tuple, K: int, exact: np.ndarray, tol: np.ndarray,
                    ofmt: AnyFormat, *, acc: Any, order: Any, kind: str, fma: bool, rounding: Any, confidence: float,
                    dtype: AnyFormat, bound_c: float, sample: int = _SAMPLE) -> DetectionPower:
    """The detection statement of a check on these inputs (``exact``, ``tol``: flat over ``work_shape``)."""
    acc = format_of(acc)
    size = int(exact.size)
    flat = np.unique(np.linspace(0, size - 1, min(sample, size)).round().astype(np.int64))
    vecs = _sampled_vectors(op, inputs, work_shape, K, flat)
    with np.errstate(all="ignore"):
        s_abs = np.abs(vecs[0].astype(np.float64)) if op == "sum" else \
            np.abs(vecs[0].astype(np.float64)) * np.abs(vecs[1].astype(np.float64))
        s_abs = s_abs.sum(axis=-1)
    cands = [acc] + [f for f in NARROWER if isinstance(acc, Format) and f.precision < acc.precision]
    rows, sims = [], {}
    for f in cands:
        rel, ratio, note = {}, {}, ""
        for label, o in _orders(order, dtype).items():
            try:
                v = _simulate(op, vecs, f, o, fma, rounding if f == acc else "rne")
            except (ValueError, TypeError) as e:  # an order with its own accumulator, an integer acc ...
                note = f"not simulated ({e})"
                continue
            if isinstance(ofmt, Format):
                with np.errstate(all="ignore"):
                    v = np.asarray(decode(cast(v, ofmt), ofmt), np.float64)
            with np.errstate(all="ignore"):
                err = np.abs(v - exact[flat])
                err = np.where(np.isnan(err), np.inf, err)
                rel[label] = float(np.median(err / np.where(s_abs > 0, s_abs, np.inf)))
                ratio[label] = float(np.median(err / tol[flat]))
            sims[(f.name, label)] = err
        rows.append(AccuracyRow(f, f == acc, rel, ratio, note))
    named = _orders(order, dtype)
    label = "any" if order is None else (next(iter(named)) if len(named) == 1 else str(order))
    power = DetectionPower(acc, K, label, kind, bound_c,
                           float(np.median(tol)) if tol.size else 0.0, int(flat.size), size, tuple(rows))
    if power.cannot_tell:
        power = _with_stricter(power, op, dtype, K, acc, order, fma, rounding, confidence, work_shape, ofmt,
                               vecs, exact[flat], sims)
    return power


def _sampled_tolerance(b, op: str, vecs: tuple, exact_s: np.ndarray) -> np.ndarray:
    """Bound ``b``'s elementwise tolerance at the sampled elements (the diagonal for dot / matmul)."""
    if op == "sum":
        return np.asarray(b.tolerance(vecs[0], reference=exact_s), np.float64)
    ref = np.diag(exact_s)
    return np.diagonal(np.asarray(b.tolerance(vecs[0], vecs[1].T, reference=ref), np.float64)).copy()


def _with_stricter(power: DetectionPower, op, dtype, K, acc, order, fma, rounding, confidence, work_shape, ofmt,
                   vecs, exact_s, sims) -> DetectionPower:
    """Stricter checks and the narrower accumulators each would flag (typical error above its tolerance)."""
    out = ofmt if isinstance(ofmt, Format) else None
    tries = []
    if power.kind != "probabilistic":
        tries.append(("kind='probabilistic'", dict(kind="probabilistic", order=order, confidence=confidence,
                                                   shape=tuple(work_shape) or None)))
    if order is None or order == "any":
        tries.append(("order='pairwise' (if the kernel sums pairwise)", dict(order="pairwise")))
    found = []
    for label, kw in tries:
        try:
            b = expected_error_bound(op, dtype, K, acc=acc, fma=fma, rounding=rounding, out=out, **kw)
        except ValueError:  # e.g. probabilistic bounds of biased roundings
            continue
        t = _sampled_tolerance(b, op, vecs, exact_s)
        flags = []
        for r in power.rows:
            caught = [o for o in r.passes if not r.claimed and np.median(sims[(r.acc.name, o)] / t) > 1]
            if caught:
                flags.append(f"{r.acc.name.upper()} ({', '.join(caught)})")
        found.append((label, float(b.coefficient), tuple(flags)))
    return replace(power, stricter=tuple(found))
