"""ErrorBound, the value expected_error_bound returns, and its forms on data: a tolerance, (rtol, atol), text.

``tolerance(bound, *inputs, reference=None)`` turns an :class:`~numoracle.bounds.expected.ErrorBound` into an
elementwise absolute bound for concrete inputs, computed in float64 *rounded upward*: every
float64 operation on non-negative values errs by at most half an ulp, so each product or sum is
followed by ``nextafter(+inf)``, and sums of K non-negative terms computed by numpy/BLAS in any
order (each term passes at most K roundings, no Strassen) are multiplied by the margin
``1 + (K+2) 2^-52 >= (1 - 2^-53)^-(K+1)``. So the tolerance is never smaller than the exact
bound evaluated on the exact inputs.

``rtol_atol`` gives (rtol, atol) for ``assert_close``-style checks (|actual - expected| <= atol +
rtol |expected|), with the assumptions that make it valid in ``.assumptions``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.engine.convert import cast, decode
from ..core.formats.format import AnyFormat, format_of
from ..core.parse import read_exact
from .boundmath import (
    TINY,
    Component,
    Site,
    add_up,
    check_member,
    f64_products_exact,
    finite_values,
    fup,
    margin,
    mul_up,
    pow2_text,
    sci,
)

__all__ = ["ErrorBound", "tolerance", "rtol_atol", "Tolerance", "sci", "describe_bound", "bound_dict"]


# ---- the bound ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ErrorBound:
    """An error bound for one output element; see the module docstring for the inequality."""

    op: str
    dtype: AnyFormat
    acc: AnyFormat
    K: int
    order: str
    kind: str
    rounding: str
    fma: bool
    out: AnyFormat | None
    inputs_rounded_from: AnyFormat | None
    shape: tuple[int, ...] | None
    confidence: float | None
    components: tuple[Component, ...]
    coefficient: Fraction  # c (includes the (1 + u_out) factor when there is an output rounding)
    exact: bool  # coefficient is the exact rational (else an upper bound)
    worst_coefficient: Fraction
    depth: int  # roundings at the accumulator(s) on the deepest leaf's path (h_max)
    method: str
    u_out: Fraction | None
    atol_const: Fraction  # absolute underflow term of the accumulation and output, per element
    input_underflow: tuple[Fraction, Fraction, Fraction] | None  # (eta_in, u_in, amplification)
    sites: tuple[Site, ...] = ()
    lambda_: Fraction | None = None
    probability: float | None = None
    events: int | None = None
    notes: tuple[str, ...] = ()
    needs_no_product_underflow: bool = False
    sigma: Fraction = field(default=Fraction(0))  # sum of count*u (gamma form)
    block_label: tuple[Fraction, Fraction] | None = None  # ((N+1) 2^-F * amplification, dtype min normal)

    # -- numbers
    @property
    def coefficient_float(self) -> float:  # rounded upward
        return fup(self.coefficient)

    @property
    def vacuous(self) -> bool:
        """c >= 1: the bound allows 100% error relative to sum|t_i| and says nothing useful."""
        return self.coefficient >= 1

    def gamma(self) -> Fraction:
        """The gamma form (1+u_out) * s/(1-s), s = sum_j count_j u_j (= gamma_h for one precision).

        Never smaller than the master-rule coefficient; raises ValueError when s >= 1.
        """
        if self.sigma >= 1:
            raise ValueError(f"gamma form undefined: n*u = {sci(self.sigma)} >= 1 (gamma_n = nu/(1-nu) needs "
                             f"nu < 1); the master-rule coefficient prod(1+u_j) - 1 = {sci(self.worst_coefficient)} "
                             "needs no such condition" + (" (and is vacuous: >= 1)" if self.vacuous else ""))
        g = self.sigma / (1 - self.sigma)
        return g * (1 + self.u_out) if self.u_out else g

    # -- data-dependent forms (tolerance.py)
    def tolerance(self, *inputs: Any, reference: Any = None) -> Any:
        """Elementwise absolute bound for these inputs (see :func:`numoracle.bounds.errorbound.tolerance`)."""
        return tolerance(self, *inputs, reference=reference)

    def rtol_atol(self, *inputs: Any, max_abs: Any = None, kappa: float | None = None) -> Any:
        """(rtol, atol) for assert_close, with ``.assumptions`` (see :func:`numoracle.bounds.errorbound.rtol_atol`)."""
        return rtol_atol(self, *inputs, max_abs=max_abs, kappa=kappa)

    # -- text
    def _head(self) -> str:
        acc = f"{self.acc.name} ({self.rounding})"
        extra = [f"out={self.out.name}"] if self.out else []
        extra += [f"inputs rounded from {self.inputs_rounded_from.name}"] if self.inputs_rounded_from else []
        extra += [f"shape={self.shape}"] if self.shape else []
        return (f"{self.op}: inputs {self.dtype.name}, accumulator {acc}, K = {self.K}, order {self.order}, "
                f"fma={self.fma}, kind={self.kind}" + "".join(", " + e for e in extra))

    def __repr__(self) -> str:
        return f"<ErrorBound {self._head()}: c = {sci(self.coefficient)}{' (vacuous)' if self.vacuous else ''}>"

    def __str__(self) -> str:
        return describe_bound(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (Fractions as exact strings where short, decimals rounded up)."""
        return bound_dict(self)

def _inputs(b: ErrorBound, inputs: tuple[Any, ...]) -> list[np.ndarray]:
    need = 1 if b.op == "sum" else 2
    if len(inputs) != need:
        names = "x" if need == 1 else ("x, y" if b.op == "dot" else "A, B")
        raise ValueError(f"{b.op} takes {need} input array(s) ({names}), got {len(inputs)}")
    vs = [finite_values(x, n) for x, n in zip(inputs, ("A", "B") if b.op == "matmul" else ("x", "y"))]
    if b.op == "matmul":
        if any(v.ndim < 2 for v in vs):
            raise ValueError("matmul inputs need at least 2 dimensions (A: ..., M, K and B: ..., K, N); use op='dot' "
                             "for vectors")
        k = (vs[0].shape[-1], vs[1].shape[-2])
    else:
        if any(v.ndim < 1 for v in vs):
            raise ValueError(f"{b.op} inputs need at least 1 dimension (the reduction runs over the last axis)")
        k = tuple(v.shape[-1] for v in vs)
    if any(kk != b.K for kk in k):
        raise ValueError(f"the reduction length of the inputs is {k[0] if len(set(k)) == 1 else k}, but the bound "
                         f"is for K = {b.K}")
    fmt = b.inputs_rounded_from or b.dtype
    hint = ("pass the values before rounding (the reference is computed from them)" if b.inputs_rounded_from else
            "round them first, or describe the rounding with inputs_rounded_from=...")
    for x, v, n in zip(inputs, vs, ("A", "B") if b.op == "matmul" else ("x", "y")):
        if not _native(x, fmt):  # an array of fmt's own dtype holds only fmt values
            check_member(v, fmt, n, hint)
    return vs


def _native(x: Any, fmt: Any) -> bool:
    """Is x a numpy array whose dtype is the format fmt itself (float32 for FP32, bfloat16 for BF16, ...)?"""
    if not isinstance(x, np.ndarray) or x.dtype.kind not in "fiuV":
        return False
    try:
        return format_of(x.dtype) == fmt
    except (TypeError, ValueError):
        return False


def _contract(op: str, x: np.ndarray, y: np.ndarray | None) -> np.ndarray:
    if op == "sum":
        return np.sum(x, axis=-1)
    if op == "dot":
        return np.sum(x * y, axis=-1)
    return np.matmul(x, y)


def _abs_sum_up(b: ErrorBound, vs: list[np.ndarray]) -> np.ndarray:
    """An upper bound of sum_k |t_k| per output element."""
    y = None if b.op == "sum" else np.abs(vs[1])
    s = mul_up(_contract(b.op, np.abs(vs[0]), y), margin(b.K))
    fmt = b.inputs_rounded_from or b.dtype
    if b.op != "sum" and not f64_products_exact(fmt):
        s = add_up(s, b.K * TINY)  # products that underflow float64
    return s


def _input_underflow_up(b: ErrorBound, vs: list[np.ndarray]) -> np.ndarray:
    """sum_k of the absolute input-rounding underflow terms (docs/theory.md §1.2: fl(x) = x(1+d) + e, d*e = 0)."""
    eta, u_in, _ = b.input_underflow
    e, one_u = float(eta), fup(1 + u_in)
    small = [np.where((np.abs(v) < float(b.dtype.min_normal)) & (v != 0), e, 0.0) for v in vs]
    if b.op == "sum":
        return mul_up(np.sum(small[0], axis=-1), margin(b.K))
    ax, ay = (mul_up(np.abs(v), one_u) for v in vs)
    # |x^y^ - xy(1+d)(1+d')| <= e_x (|y|(1+u) + e_y) + |x|(1+u) e_y
    t = add_up(_contract(b.op, small[0], add_up(ay, small[1])), _contract(b.op, ax, small[1]))
    return mul_up(t, margin(b.K))


def _label_term_up(b: ErrorBound, vs: list[np.ndarray]) -> np.ndarray:
    """Block FMA with subnormal inputs: their exponent label is clamped at emin, so 2^E can exceed max|t|;
    2^label <= mn (|other factor| + mn) for a product with a subnormal factor (mn for a subnormal sum term)."""
    mn = float(b.block_label[1])
    if b.inputs_rounded_from is not None:  # the kernel reads the rounded values
        vs = [decode(cast(v, b.dtype), b.dtype) for v in vs]
    sub = [np.where((np.abs(v) < mn) & (v != 0), mn, 0.0) for v in vs]
    if b.op == "sum":
        return mul_up(np.sum(sub[0], axis=-1), margin(b.K))
    a0, a1 = (add_up(np.abs(v), mn) for v in vs)
    return mul_up(add_up(_contract(b.op, sub[0], a1), _contract(b.op, a0, sub[1])), margin(b.K))


def _tolerance_parts(b: ErrorBound, vs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(the bound without the u_out |y| term, sum|t| upper bound)."""
    S = _abs_sum_up(b, vs)
    if b.acc.is_integer and S.size and float(S.max()) > float(b.acc.max_value):
        raise ValueError(f"sum|t| reaches {float(S.max()):.6g} > {b.acc.name} max {b.acc.max_value}: the integer "
                         "accumulator may overflow (wrap), and the exactness the bound assumes is lost")
    if b.needs_no_product_underflow:
        mins = [np.abs(v[v != 0]).min() if np.any(v != 0) else np.inf for v in vs]
        if Fraction(float(mins[0])) * Fraction(float(mins[1])) < b.acc.min_normal:
            raise ValueError(f"tight_rn assumes no product underflows in {b.acc.name}, but min|a| * min|b| = "
                             f"{mins[0] * mins[1]:.3g} < {float(b.acc.min_normal):.3g}; use the default bound")
    t = mul_up(S, fup(b.coefficient))
    if b.atol_const:
        t = add_up(t, fup(b.atol_const))
    if b.input_underflow is not None:
        t = add_up(t, mul_up(_input_underflow_up(b, vs), fup(b.input_underflow[2])))
    if b.block_label is not None:
        t = add_up(t, mul_up(_label_term_up(b, vs), fup(b.block_label[0])))
    return t, S


def tolerance(b: ErrorBound, *inputs: Any, reference: Any = None) -> np.ndarray | float:
    """Elementwise absolute bound on |kernel result - exact result| for these inputs (float64, rounded up).

    sum: x (..., K) reduced over the last axis; dot: x, y (..., K); matmul: A (..., M, K), B (..., K, N).
    The inputs are the values the kernel reads (of ``dtype``), or with ``inputs_rounded_from`` the
    values before that rounding. With an output rounding the term u_out |y| needs |y|: from
    ``reference`` (the exact result or its correctly rounded float64 value, e.g. from
    numoracle's exact references; |y| <= |ref| (1 + 2^-52)) or, when omitted, derived as
    |fl64(y)| + (K+2) 2^-52 sum|t| (float64 evaluation in any order).
    """
    vs = _inputs(b, inputs)
    t, S = _tolerance_parts(b, vs)
    if b.u_out:
        if reference is not None:
            r = finite_values(reference, "reference")
            Y = mul_up(np.abs(r), 1 + 2.0**-52)
            if Y.shape != t.shape:
                Y = np.broadcast_to(Y, t.shape)
        else:
            Y = add_up(np.abs(_contract(b.op, vs[0], vs[1] if len(vs) > 1 else None)),
                        mul_up(S, (b.K + 2) * 2.0**-52))
            if b.op != "sum" and not f64_products_exact(b.inputs_rounded_from or b.dtype):
                Y = add_up(Y, b.K * TINY)
        t = add_up(t, mul_up(Y, fup(b.u_out)))
    return float(t) if t.ndim == 0 else t


# ---- rtol / atol -----------------------------------------------------------------------------
class Tolerance(tuple):
    """``(rtol, atol)`` (unpacks as a pair) with ``.assumptions``: the text that makes them valid."""

    assumptions: str

    def __new__(cls, rtol: float, atol: float, assumptions: str) -> Tolerance:
        self = super().__new__(cls, (float(rtol), float(atol)))
        self.assumptions = assumptions
        return self

    @property
    def rtol(self) -> float:
        return self[0]

    @property
    def atol(self) -> float:
        return self[1]

    @property
    def kwargs(self) -> dict[str, float]:
        """``{"rtol": ..., "atol": ...}`` for ``assert_close(actual, expected, **tol.kwargs)``."""
        return {"rtol": self[0], "atol": self[1]}

    def __str__(self) -> str:
        return f"rtol = {self[0]!r}\natol = {self[1]!r}\nassumptions:\n" + "\n".join(
            f"  - {line}" for line in self.assumptions.splitlines())


def rtol_atol(b: ErrorBound, *inputs: Any, max_abs: Any = None, kappa: float | None = None) -> Tolerance:
    """(rtol, atol) such that |actual - expected| <= atol + rtol |expected| holds under the bound's model.

    ``expected`` must be the exact result or its correctly rounded float64 value. One of:

    * ``inputs`` (the arrays .tolerance takes): atol = the largest elementwise bound without the
      output term, rtol = u_out (1 + 2^-52). Guaranteed for these inputs.
    * ``max_abs`` (max|x| for sum; (max|a|, max|b|) or one number for both, for dot/matmul):
      sum|t| <= K max|a| max|b|. Guaranteed for every input within those magnitudes.
    * ``kappa`` (default 1 when nothing is given): ASSUMES sum|t| <= kappa |y| (kappa = 1: every
      term of one sign, no cancellation); rtol = (c kappa + u_out)(1 + 2^-52), atol = the underflow
      terms. NOT a guarantee under cancellation: pass inputs or max_abs there.
    """
    given = sum(x is not None for x in (max_abs, kappa)) + bool(inputs)
    if given > 1:
        raise ValueError("give the inputs, max_abs or kappa, not several")
    one = 1 + 2.0**-52
    r_out = fup(b.u_out) * one if b.u_out else 0.0
    common = [f"the bound's model: {b._head()}", *b.notes,
              "expected = the exact result or its correctly rounded float64 value (not a low-precision reference)"]
    if inputs:
        vs = _inputs(b, inputs)
        t, _ = _tolerance_parts(b, vs)
        atol = float(np.max(t)) if t.size else 0.0
        return Tolerance(math.nextafter(r_out, math.inf) if r_out else 0.0, atol, "\n".join(
            [f"valid for the given inputs only (atol = the largest elementwise bound c*sum|t| + a over "
             f"{t.size} elements; rtol = u_out)", *common]))
    if max_abs is not None:
        ms = [max_abs] if np.ndim(max_abs) == 0 else list(max_abs)
        if b.op != "sum" and len(ms) == 1:
            ms = ms * 2
        fm = [read_exact(m, "max_abs") for m in ms]
        if len(ms) != (1 if b.op == "sum" else 2) or any(m < 0 for m in fm):
            raise ValueError(f"max_abs must be {'one' if b.op == 'sum' else 'one or two'} finite non-negative "
                             f"number(s), got {max_abs!r}")
        S = b.K * math.prod(fm)
        a = math.inf if math.inf in (b.coefficient, b.atol_const) else b.coefficient * S + b.atol_const
        if b.input_underflow is not None:
            eta, u_in, amp = b.input_underflow
            per = eta if b.op == "sum" else eta * (1 + u_in) * (fm[0] + fm[1]) + eta**2
            a += b.K * per * amp
        if b.block_label is not None:
            lc, mn = b.block_label
            a += b.K * lc * (mn if b.op == "sum" else mn * (fm[0] + fm[1] + 2 * mn))
        return Tolerance(math.nextafter(r_out, math.inf) if r_out else 0.0, fup(a), "\n".join(
            [f"every input element has |value| <= {', '.join(map(str, ms))}, so sum|t| <= K * "
             f"{' * '.join(map(str, ms))} = {float(S):.6g} (the worst case: no cancellation assumed or needed)",
             *common]))
    kap = Fraction(1) if kappa is None else read_exact(kappa, "kappa")
    if kap < 1:
        raise ValueError(f"kappa = sum|t| / |y| is >= 1 by the triangle inequality, got {kappa}")
    if b.input_underflow is not None or b.block_label is not None:
        raise ValueError("subnormal inputs (input rounding, or block-FMA exponent labels) add an absolute error "
                         "that kappa cannot bound; pass the inputs or max_abs")
    u_out = b.u_out or Fraction(0)
    rtol = fup((b.coefficient * kap + u_out) * (1 + Fraction(1, 2**52)))
    return Tolerance(rtol, fup(b.atol_const), "\n".join(
        [f"ASSUMED, not checked: sum|t| <= kappa*|y| with kappa = {kappa if kappa is not None else 1} "
         "(kappa = 1: all terms of one sign). Under cancellation this rtol is NOT a guarantee: near-zero "
         "results can fail; pass the inputs or max_abs instead", *common]))


# ---- text -------------------------------------------------------------------------------------
def describe_bound(b: ErrorBound) -> str:
    """The text of ``str(bound)``: formula, coefficient, components with numbers and sources, assumptions."""
    t = "a_k b_k" if b.op != "sum" else "x_k"
    lines = [f"ErrorBound  {b._head()}",
             f"  |y_hat - y| <= c * sum_k |{t}|" + (" + u_out*|y|" if b.u_out else "")
             + (" + a" if b.atol_const or b.input_underflow or b.block_label else "")
             + "   (per output element; y exact)",
             f"  c = {sci(b.coefficient, 8)} ({'exact rational' if b.exact else 'rounded up'}; "
             f"{b.method})"]
    if b.vacuous:
        lines.append(f"  VACUOUS: c >= 1 allows 100% error relative to sum|{t}|; this bound says nothing. "
                     "Use a wider accumulator, a shallower order"
                     + (", or a smaller K." if b.kind == "probabilistic" else ", or kind='probabilistic'."))
    lines.append(f"  deepest leaf: {b.depth} roundings (and block alignments) after the inputs (h_max)")
    lines.append("  components (per leaf: factor = prod(1+u_j) - 1 over the roundings on its path):")
    lines += [f"    - {c.describe()}" for c in b.components]
    if b.u_out:
        lines.append(f"    - output rounding to {b.out.name}: + u_out*|y| with u_out = {pow2_text(b.u_out)}, and "
                     f"(1+u_out) times the rest [docs/theory.md §2.5]")
    if b.kind == "probabilistic":
        lines.append(f"  probabilistic: lambda = {sci(b.lambda_, 10)}, holds with probability >= "
                     f"{b.probability:.6g} (union bound over {b.events} error products); worst case "
                     f"c = {sci(b.worst_coefficient)}")
    try:
        lines.append(f"  gamma form: (sum n_j u_j)/(1 - sum n_j u_j) = {sci(b.gamma())} "
                     f"(n*u = {sci(b.sigma)})")
    except ValueError:
        lines.append(f"  gamma form: undefined (n*u = {sci(b.sigma)} >= 1); the master rule above needs no "
                     "such condition")
    a = [f"{s.sites} x {pow2_text(s.eta)} ({s.label})" for s in b.sites]
    if b.input_underflow:
        a.append(f"inputs below {b.dtype.name}'s min normal: {pow2_text(b.input_underflow[0])} each, times the "
                 "other factor")
    if b.block_label:
        a.append(f"block-FMA labels of subnormal inputs: (N+1) 2^-F * {pow2_text(b.block_label[1])} * (|other factor| "
                 "+ min normal) per such product")
    if a:
        lines.append("  underflow (absolute, amplified by later roundings): " + "; ".join(a))
    lines += [f"  assumes: {n}" for n in b.notes]
    return "\n".join(lines)


def bound_dict(b: ErrorBound) -> dict[str, Any]:
    """``bound.to_dict()``: JSON-ready (Fractions as exact strings where short, decimals rounded up)."""

    def frac(x: Fraction | None) -> str | None:
        if x is None or x.numerator.bit_length() + x.denominator.bit_length() > 256:
            return None
        return str(x)

    try:
        g: str | None = sci(b.gamma(), 17)
    except ValueError:
        g = None
    return {
        "op": b.op, "dtype": b.dtype.name, "acc": b.acc.name, "K": b.K, "order": b.order,
        "kind": b.kind, "rounding": b.rounding, "fma": b.fma,
        "out": b.out.name if b.out else None,
        "inputs_rounded_from": b.inputs_rounded_from.name if b.inputs_rounded_from else None,
        "shape": list(b.shape) if b.shape else None, "confidence": b.confidence,
        "coefficient": sci(b.coefficient, 17), "coefficient_fraction": frac(b.coefficient) if b.exact
        else None, "coefficient_exact": b.exact, "worst_coefficient": sci(b.worst_coefficient, 17),
        "vacuous": b.vacuous, "depth": b.depth, "method": b.method, "gamma_form": g,
        "u_out": frac(b.u_out), "atol_const": sci(b.atol_const, 17),
        "lambda": sci(b.lambda_, 12) if b.lambda_ is not None else None, "probability": b.probability,
        "events": b.events,
        "components": [{"name": c.name, "u": frac(c.u), "count": c.count, "factor": sci(c.factor, 17),
                        "formula": c.formula, "source": c.source} for c in b.components],
        "assumptions": list(b.notes),
    }
