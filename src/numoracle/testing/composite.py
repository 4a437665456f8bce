"""Checks of composite kernels (softmax family, norms, attention) against exact references and their bounds.

``check_*_close(actual, inputs..., **bound keywords)`` computes the exact reference (``numoracle.composite``, rounded
once to fp32, or fp64 for wider accumulators: the tolerance adds that rounding, u_ref |ref|), the bound's
per-element tolerance for the kernel described by the keywords (``expected_error_bound``'s: acc, out, order, exp,
log, rsqrt, div, block, splits, p_format, ...), and reports the worst elements against it. ``assert_*_close`` raises
:class:`~numoracle.core.errors.NumoracleAssertionError` with that report. Non-finite reference entries (masked
entries, fully masked rows) must match exactly (NaN with NaN).

``testing/compositemutants.attention_mutants`` answers "what can this check detect?": it runs a
FlashAttention-2-style forward (online softmax over key blocks, float32 arithmetic, numpy) and six broken variants
of it, and says for each whether the numoracle check fails it and whether a plain (rtol, atol) comparison passes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bounds.expected import expected_error_bound
from ..composite import register as _register  # noqa: F401  (the bound ops)
from ..composite.attention import attention_reference
from ..composite.norms import layer_norm_reference, rms_norm_reference
from ..composite.softmax import log_softmax_reference, logsumexp_reference, softmax_reference
from ..core.asserting import asserting
from ..core.errors import NumoracleAssertionError, failure_message
from ..core.inputs import exact_float64

__all__ = ["CompositeReport", "Worst", "check_softmax_close", "assert_softmax_close", "check_norm_close",
           "assert_norm_close", "check_attention_close", "assert_attention_close"]


@dataclass(frozen=True)
class Worst:
    """One element: where, the kernel's value, the exact reference, |error| and its bound."""

    index: tuple
    actual: float
    exact: float
    error: float
    bound: float


@dataclass(frozen=True)
class CompositeReport:
    """What a composite check found: passed or not, the largest error against the bound, the worst elements."""

    op: str
    passed: bool
    elements: int
    max_ratio: float  # max |error| / bound over finite elements (<= 1 when passed)
    mismatched_specials: int  # non-finite reference entries the kernel did not reproduce
    worst: tuple[Worst, ...]
    bound: Any

    def failure(self, msg: Any = None, verbose: bool = False) -> Exception:
        """The exception a failing assertion raises (the report with its worst elements)."""
        return NumoracleAssertionError(failure_message(str(self), msg), self)

    def __str__(self) -> str:
        head = (f"{self.op}: {'PASSED' if self.passed else 'FAILED'} on {self.elements} elements; max |error|/bound "
                f"= {self.max_ratio:.3g}; special entries mismatched: {self.mismatched_specials}")
        rows = [f"  {w.index}: actual {w.actual!r}, exact {w.exact!r}, |error| {w.error:.3g} <= bound {w.bound:.3g}?"
                for w in self.worst]
        return "\n".join([head, *rows, "  bound: " + repr(self.bound)])


def _compare(op: str, actual: Any, ref: np.ndarray, tol: np.ndarray, bound: Any, top: int = 5) -> CompositeReport:
    a, _ = exact_float64(actual, "actual")
    if a.shape != ref.shape:
        raise ValueError(f"actual has shape {a.shape}; the reference has {ref.shape}")
    fin = np.isfinite(ref)
    specials = int(np.count_nonzero(~fin & ~((a == ref) | (np.isnan(a) & np.isnan(ref)))))
    with np.errstate(all="ignore"):
        err = np.where(fin, np.abs(a - ref), 0.0)
        ratio = np.where(fin, err / np.where(tol > 0, tol, np.inf), 0.0)
        ratio = np.where(fin & ~np.isfinite(a), np.inf, ratio)
    order = np.argsort(ratio, axis=None)[::-1][:top]
    worst = tuple(Worst(tuple(int(i) for i in np.unravel_index(j, ref.shape)), float(a.flat[j]), float(ref.flat[j]),
                        float(err.flat[j]), float(tol.flat[j])) for j in order if fin.flat[j])
    mx = float(ratio.max()) if ratio.size else 0.0
    return CompositeReport(op, mx <= 1 and specials == 0, int(ref.size), mx, specials, worst, bound)


def _ref_format(bound: Any) -> tuple[str, float]:
    return ("fp32", 2.0**-24) if bound.acc.precision <= 24 else ("fp64", 2.0**-53)


def check_softmax_close(actual: Any, x: Any, *, op: str = "softmax", axis: int = -1, mask: Any = None,
                        empty_rows: str = "nan", **bound_kw: Any) -> CompositeReport:
    """Compare a softmax / log_softmax / logsumexp kernel's output with the exact result and the bound."""
    fn = {"softmax": softmax_reference, "log_softmax": log_softmax_reference, "logsumexp": logsumexp_reference}
    if op not in fn:
        raise ValueError(f"op must be one of {', '.join(fn)}, got {op!r}")
    xv, fmt = exact_float64(x, "x")
    b = expected_error_bound(op, bound_kw.pop("dtype", fmt.name), xv.shape[axis], **bound_kw)
    rf, ur = _ref_format(b)
    kw = {} if op == "logsumexp" else {"empty_rows": empty_rows}
    ref = fn[op](x, axis, mask=mask, out=rf, **kw)
    tol = b.tolerance(x, mask=mask, axis=axis) + ur * np.abs(np.where(np.isfinite(ref), ref, 0.0))
    return _compare(op, actual, ref, tol, b)


def check_norm_close(actual: Any, x: Any, weight: Any = None, bias: Any = None, *, op: str = "layernorm",
                     eps: float = 1e-5, **bound_kw: Any) -> CompositeReport:
    """Compare a layer_norm ("layernorm") or rms_norm ("rmsnorm") kernel's output with the exact result."""
    if op not in ("layernorm", "rmsnorm"):
        raise ValueError(f"op must be 'layernorm' or 'rmsnorm', got {op!r}")
    xv, fmt = exact_float64(x, "x")
    b = expected_error_bound(op, bound_kw.pop("dtype", fmt.name), xv.shape[-1], eps=eps, **bound_kw)
    rf, ur = _ref_format(b)
    if op == "layernorm":
        ref = layer_norm_reference(x, weight, bias, eps=eps, out=rf)
        tol = b.tolerance(x, weight, bias, eps=eps)
    else:
        ref = rms_norm_reference(x, weight, eps=eps, out=rf)
        tol = b.tolerance(x, weight, eps=eps)
    return _compare(op, actual, ref, tol + ur * np.abs(np.where(np.isfinite(ref), ref, 0.0)), b)


def check_attention_close(actual: Any, q: Any, k: Any, v: Any, *, scale: Any = None, causal: bool = False,
                          mask: Any = None, empty_rows: str = "nan", **bound_kw: Any) -> CompositeReport:
    """Compare an attention forward kernel's output with the exact result and the bound of its evaluation."""
    qv, fmt = exact_float64(q, "q")
    Lk = np.shape(exact_float64(k, "k")[0])[-2]
    b = expected_error_bound("attention", bound_kw.pop("dtype", fmt.name), Lk, **bound_kw)
    rf, ur = _ref_format(b)
    ref = attention_reference(q, k, v, scale=scale, causal=causal, mask=mask, out=rf, empty_rows=empty_rows)
    tol = b.tolerance(q, k, v, scale=scale, causal=causal, mask=mask)
    return _compare("attention", actual, ref, tol + ur * np.abs(np.where(np.isfinite(ref), ref, 0.0)), b)


assert_softmax_close = asserting(check_softmax_close)
assert_norm_close = asserting(check_norm_close)
assert_attention_close = asserting(check_attention_close)

