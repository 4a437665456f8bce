"""CompositeBound, the bound of a composite operation, and the pieces every composite bound shares.

A composite bound holds its roundings as :class:`~numoracle.bounds.boundmath.Component` s (name, unit roundoff,
count, formula, source) and an a priori relative coefficient; ``tolerance(...)`` evaluates the per-element bound on
given inputs (the data decide |x_i - max|, the softmax weights, the variance...). Evaluation is in float64: every
quantity is a sum or product of non-negative float64 values computed with relative error below 2^-40, and the
result is multiplied by the margin 1 + 2^-20, so it is never below the bound's exact value on the exact inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..bounds.boundmath import Component, hm2019, nested, sci, underflow_eta
from ..bounds.boundpath import leaf_path
from ..core.formats.format import AnyFormat, format_of
from ..models.orders.text import parse_order
from .ulps import ElementwiseError, elementwise_error

__all__ = ["CompositeBound", "Setting", "setting", "MARGIN", "gamma", "sum_components", "summation_gamma"]

MARGIN = 1 + 2.0**-20
_BHH = "Blanchard, Higham & Higham, IMA J. Numer. Anal. 41(4), 2021"


@dataclass(frozen=True)
class CompositeBound:
    """The error bound of one composite operation: its roundings, an a priori coefficient, a per-element form."""

    op: str
    dtype: AnyFormat
    acc: AnyFormat
    K: int
    out: AnyFormat | None
    kind: str
    confidence: float | None
    components: tuple[Component, ...]
    coefficient: Fraction  # a priori: relative error bound at the reference point the op's docstring names
    method: str
    notes: tuple[str, ...] = ()
    settings: dict = field(default_factory=dict)
    evaluate: Callable[..., np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def coefficient_float(self) -> float:
        return float(self.coefficient) * MARGIN

    def tolerance(self, *inputs: Any, **data: Any) -> np.ndarray:
        """Per-element absolute bounds |kernel - exact| for these inputs (see the op's docstring for the arguments)."""
        if self.evaluate is None:
            raise ValueError(f"{self.op}: this bound has no per-element form")
        return self.evaluate(self, *inputs, **data)

    def __str__(self) -> str:
        head = (f"{self.op}: inputs {self.dtype.name}, computed in {self.acc.name}, K = {self.K}, kind={self.kind}"
                + (f", out={self.out.name}" if self.out else ""))
        lines = [head, f"  a priori coefficient {sci(self.coefficient)} ({self.method})"]
        lines += ["  - " + c.describe() for c in self.components]
        lines += ["  note: " + n for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<CompositeBound {self.op} {self.dtype.name}/{self.acc.name} K={self.K}: c = {sci(self.coefficient)}>"


@dataclass(frozen=True)
class Setting:
    """The resolved arguments of a composite bound."""

    op: str
    dtype: AnyFormat
    acc: AnyFormat
    out: AnyFormat | None
    K: int
    kind: str
    confidence: float
    order: Any  # OrderSpec of the op's main reduction
    u: Fraction  # acc's unit roundoff (round to nearest)
    u_out: Fraction  # 0 when storing in out is exact
    exp: ElementwiseError
    log: ElementwiseError
    rsqrt: ElementwiseError
    div: ElementwiseError
    shape: Any
    extra: dict


def setting(op: str, dtype: Any, K: int, kw: dict, extra_names: tuple[str, ...]) -> Setting:
    """Read expected_error_bound's keywords for a composite op (refusing what it does not model)."""
    dt = format_of(dtype)
    acc = format_of(kw.get("acc") or ("fp32" if dt.precision <= 24 else dt))
    out = kw.get("out")
    out = None if out is None else format_of(out)
    if dt.is_integer or acc.is_integer:
        raise ValueError(f"{op}: inputs and accumulator must be floating-point formats")
    if not nested(dt, acc):
        raise ValueError(f"{op}: inputs {dt.name} do not fit the accumulator {acc.name} (every input must be exact "
                         "there); pass acc= at least as wide as dtype")
    for name in ("rounding", "out_rounding"):
        r = kw.get(name)
        if r not in (None, "rne"):
            raise ValueError(f"{op}: only round-to-nearest-even arithmetic is modelled ({name}={r!r})")
    if kw.get("fma") is False or kw.get("tight_rn") or kw.get("inputs_rounded_from") is not None:
        raise ValueError(f"{op}: fma=False, tight_rn and inputs_rounded_from are not modelled for composite ops")
    known = {"acc", "order", "fma", "kind", "confidence", "out", "shape", "inputs_rounded_from", "rounding",
             "out_rounding", "tight_rn", "exp", "log", "rsqrt", "div"}
    unknown = set(kw) - known - set(extra_names)
    if unknown:
        raise TypeError(f"expected_error_bound({op!r}) got unexpected keyword(s) {', '.join(sorted(unknown))}; "
                        f"it takes {', '.join(sorted(known | set(extra_names)))}")
    u = acc.unit_roundoff("rne")
    u_out = Fraction(0) if out is None or nested(acc, out) else out.unit_roundoff("rne")
    ew = {n: elementwise_error(kw.get(n) or "correctly_rounded") for n in ("exp", "log", "rsqrt", "div")}
    return Setting(op, dt, acc, out, K, kw.get("kind", "worst"), kw.get("confidence", 0.999),
                   parse_order(kw.get("order")), u, u_out, ew["exp"], ew["log"], ew["rsqrt"], ew["div"],
                   kw.get("shape"), {n: kw[n] for n in extra_names if n in kw})


def sum_components(st: Setting, n: int, what: str, order: Any = None) -> list[Component]:
    """The roundings on the deepest path of summing n terms in acc along the order (numoracle.bounds.boundpath)."""
    comps, _ = leaf_path(st.order if order is None else parse_order(order), max(n, 1), st.acc, "rne", f" ({what})")
    return comps


def gamma(comps: list[Component]) -> float:
    """prod (1 + u)^count - 1 of components, as a float rounded up (worst case)."""
    s = sum(c.count * math.log1p(float(c.u)) for c in comps)
    return math.expm1(s) * MARGIN


def summation_gamma(st: Setting, comps: list[Component], events: int) -> float:
    """The summation's relative error factor: worst case, or Higham & Mary 2019's probabilistic form."""
    if st.kind == "probabilistic":  # the smaller of the two: the worst case holds always
        g, _, _ = hm2019(comps, max(events, 1), st.confidence)
        return min(float(g) * MARGIN, gamma(comps))
    return gamma(comps)


def component(name: str, u: Fraction, count: int, formula: str, source: str = _BHH) -> Component:
    return Component(name, u, count, formula, source)


def out_terms(st: Setting) -> tuple[float, float, float]:
    """(u_out, eta_out, eta_acc): the output rounding's relative and absolute (underflow) errors, acc's underflow."""
    eta_out = float(underflow_eta(st.out, "rne")) if st.out is not None and st.u_out else 0.0
    return float(st.u_out), eta_out, float(underflow_eta(st.acc, "rne"))
