"""Dequantise-then-accumulate GEMV / GEMM: the exact reference and its error bound (weight-only int4 kernels).

The kernel modelled is the common weight-only one (the GPTQ / AWQ / Marlin-style GEMV of an FP16 model): each
weight is dequantised into ``w~ = dequantize_int4(...)`` (FP16; every rounding of the convention modelled, so
``w~`` is exactly what the kernel multiplies), then ``y = x @ w~`` is accumulated in ``acc`` (FP16 or FP32) along
``order`` and stored in ``out``. With W the original weights:

    |y_kernel - x @ W| <= tol_kernel(x, w~)  +  |x| @ |w~ - W|

``tol_kernel`` is ``expected_error_bound("matmul", FP16, K, acc=acc, order=order, out=out).tolerance(x, w~)``
(the accumulation of FP16 products, docs/theory.md §2), and the second term is the weights' quantisation
error, computed exactly (float64, rounded upward). :func:`dequant_matmul_check` compares a kernel's output with
the bound and names the worst element.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...bounds.boundmath import add_up, margin, mul_up
from ...bounds.expected import ErrorBound, expected_error_bound
from ...core.args import check_array, check_choice
from ...core.errors import ArgumentTypeError
from ...core.formats.format import FP16, AnyFormat, format_of
from ...core.inputs import values_in
from ...exact.reference import exact_matmul
from ..schemes.int4 import Int4Weights

__all__ = ["DequantMatmul", "dequant_matmul", "dequant_matmul_check"]


@dataclass(frozen=True, eq=False)
class DequantMatmul:
    """The exact reference of ``x @ w~`` rounded once into ``out``, and the bound's parts (float64, upward)."""

    reference: np.ndarray  # fl_out(x @ w~), exact then rounded once (values, float64)
    exact: np.ndarray  # x @ w~ correctly rounded to float64
    kernel: np.ndarray  # accumulation bound: |y - x @ w~|
    quantization: np.ndarray  # |x| @ |w~ - W| (zeros when W is not given)
    total: np.ndarray  # bound on |y - x @ W|
    bound: ErrorBound
    weights: np.ndarray  # w~ (K, N)
    exact_w: np.ndarray | None = None  # x @ W correctly rounded to float64 (when W is given)

    def __repr__(self) -> str:
        return (f"DequantMatmul(shape={self.reference.shape}, acc={self.bound.acc.name}, order={self.bound.order}, "
                f"max total bound {float(np.max(self.total)) if self.total.size else 0.0:.4g})")


def _fp16_values(x: Any, what: str) -> np.ndarray:
    return values_in(x, FP16, what, "the kernel reads FP16 activations: round it first")


def dequant_matmul(x: Any, w: Int4Weights | Any, *, acc: Any = "fp32", order: Any = None, out: Any = "fp16",
                   W: Any = None) -> DequantMatmul:
    """Reference and bound of ``x (M, K) or (K,) @ w~ (K, N)``; ``w``: Int4Weights (dequantised here to FP16)
    or the FP16 values a kernel multiplies. ``W``: the original weights, for the quantisation term."""
    xv = _fp16_values(x, "x")
    x2 = xv.reshape(1, -1) if xv.ndim == 1 else xv
    wt = w.dequantize("fp16") if isinstance(w, Int4Weights) else _fp16_values(w, "w")
    if x2.ndim != 2 or wt.ndim != 2 or x2.shape[1] != wt.shape[0]:
        raise ValueError(f"x @ w needs x (M, K) or (K,) and w (K, N); got {xv.shape} and {wt.shape}")
    K = wt.shape[0]
    o: AnyFormat = format_of(out)
    b = expected_error_bound("matmul", FP16, K, acc=acc, order=order, out=o)
    kern = np.asarray(b.tolerance(x2, wt), dtype=np.float64)
    quant = np.zeros_like(kern)
    if W is not None:
        Wv = check_array(W, "W", np.float64)
        if Wv.shape != wt.shape:
            raise ValueError(f"W has shape {Wv.shape}, the dequantised weights {wt.shape}")
        err = np.abs(wt - Wv)  # not exact in float64 everywhere: add half an ulp of each difference
        err = add_up(err, mul_up(err, 2.0**-52))
        quant = mul_up(np.matmul(np.abs(x2), err), margin(K))
        # the float64 rounding of x @ W (half an ulp) is covered by comparing with a margin below
    ex = np.asarray(exact_matmul(x2, wt), dtype=np.float64)
    ref = np.asarray(exact_matmul(x2, wt, out=o))
    from ...core.engine.convert import decode

    ref = np.asarray(decode(ref, o), dtype=np.float64) if ref.dtype != np.float64 else ref
    shape = (wt.shape[1],) if xv.ndim == 1 else (x2.shape[0], wt.shape[1])
    r = [a.reshape(shape) for a in (ref, ex, kern, quant, add_up(kern, quant))]
    ew = None if W is None else np.asarray(exact_matmul(x2, Wv), np.float64).reshape(shape)
    return DequantMatmul(*r, b, wt, ew)


def dequant_matmul_check(actual: Any, dm: DequantMatmul, *, against: str = "dequantized") -> None:
    """Raise AssertionError if ``actual`` (the kernel's output) lies outside the bound.

    ``against="dequantized"``: |actual - x @ w~| <= kernel (the accumulation alone: the kernel multiplies w~);
    ``"weights"``: |actual - x @ W| <= total (needs W given to :func:`dequant_matmul`).
    """
    if not isinstance(dm, DequantMatmul):
        raise ArgumentTypeError(f"dm must be what dequant_matmul returns (a DequantMatmul), got {type(dm).__name__} "
                                f"{dm!r:.40}")
    against = check_choice(against, "against", ("dequantized", "weights"))
    a = check_array(actual, "actual", np.float64)
    if a.shape != dm.exact.shape:
        raise ValueError(f"actual has shape {a.shape}; the reference x @ w~ has shape {dm.exact.shape}")
    if against == "dequantized":
        ref, tol = dm.exact, dm.kernel
    else:
        if dm.exact_w is None:
            raise ValueError("against='weights' needs the original weights: dequant_matmul(..., W=W)")
        ref, tol = dm.exact_w, dm.total
    err = np.abs(a - ref)
    tol = add_up(tol, mul_up(np.abs(ref), 2.0**-52))  # ref is x @ w~ (or x @ W) rounded to float64
    bad = ~(err <= tol)
    if bad.any():
        i = np.unravel_index(int(np.argmax(np.where(bad, err / np.maximum(tol, 1e-300), -1))), a.shape)
        raise AssertionError(f"{int(bad.sum())} of {a.size} outputs outside the dequantise-then-accumulate bound "
                             f"(acc {dm.bound.acc.name}, order {dm.bound.order}, against {against}); worst at "
                             f"{tuple(int(k) for k in i)}: got {a[i]!r}, reference {ref[i]!r}, |error| "
                             f"{err[i]:.6g} > bound {tol[i]:.6g}")
