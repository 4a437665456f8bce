"""The problem a closeness check solves: normalised inputs of one reduction, its result shape, the exact reference."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..bounds.boundmath import nested
from ..core.formats.format import AnyFormat
from ..core.formats.interop import as_native, to_codes
from ..exact.reference import exact_dot, exact_matmul, exact_sum

__all__ = ["Problem", "exact_value"]

class Problem:
    """Normalised inputs of one reduction, its result shape and exact reference."""

    def __init__(self, op: str, inputs: tuple[Any, ...], axis: int) -> None:
        self.op = op
        nat = [self._native(x) for x in inputs]
        fmts = [f for _, f in nat]
        arrs = [a for a, _ in nat]
        if op == "sum":
            x = arrs[0]
            if x.ndim == 0:
                raise ValueError("check_sum_close needs an array of >= 1 dimension to reduce")
            x = np.moveaxis(x, axis, -1)
            self.inputs, self.shape, self.work_shape = (x,), x.shape[:-1], x.shape[:-1]
            self.K = x.shape[-1]
        elif op == "dot":
            a, b = arrs
            if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[-1]:
                raise ValueError(f"dot: a has shape {a.shape} and b has shape {b.shape}; both need a last axis of "
                                 "the same length K")
            try:
                self.shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
            except ValueError:
                raise ValueError(f"dot: the leading axes of a {a.shape} and b {b.shape} do not broadcast") from None
            self.inputs, self.work_shape, self.K = (a, b), self.shape, a.shape[-1]
        else:
            a, b = arrs
            if a.ndim == 0 or b.ndim == 0:
                raise ValueError(f"matmul needs arrays of >= 1 dimension, got shapes {a.shape} and {b.shape}")
            a2 = a[None, :] if a.ndim == 1 else a
            b2 = b[:, None] if b.ndim == 1 else b
            if a2.shape[-1] != b2.shape[-2]:
                raise ValueError(f"matmul: A has shape {a.shape} and B has shape {b.shape}; A @ B needs "
                                 f"A.shape[-1] == B.shape[-2] ({a2.shape[-1]} != {b2.shape[-2]})")
            try:
                batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
            except ValueError:
                raise ValueError(f"matmul: the batch axes of A {a.shape} and B {b.shape} do not broadcast") from None
            self.work_shape = batch + (a2.shape[-2], b2.shape[-1])
            shape = self.work_shape
            if b.ndim == 1:
                shape = shape[:-1]
            if a.ndim == 1:
                shape = shape[:-2] + shape[-1:] if b.ndim > 1 else shape[:-1]
            self.shape, self.inputs, self.K = shape, (a2, b2), a2.shape[-1]
        if self.K < 1:
            raise ValueError(f"{op}: the reduction length K is 0; nothing to check")
        self.dtype = fmts[0]
        if len(fmts) == 2 and fmts[0] != fmts[1]:
            if nested(fmts[0], fmts[1]):
                self.dtype = fmts[1]
            elif not nested(fmts[1], fmts[0]):
                raise ValueError(f"the inputs are {fmts[0].name} and {fmts[1].name}, and neither holds every value "
                                 "of the other; the bound needs one input format: cast one of them (exactly)")

    @staticmethod
    def _native(x: Any) -> tuple[np.ndarray, AnyFormat]:
        if isinstance(x, np.ndarray):
            return x, to_codes(x, "an input")[1]
        codes, fmt = to_codes(x, "an input")
        return as_native(codes, fmt), fmt

    def expected(self, *ofmts: AnyFormat) -> list[np.ndarray]:  # one exact result, rounded once to each
        fn = {"sum": lambda *v, **k: exact_sum(v[0], axis=-1, **k), "dot": exact_dot, "matmul": exact_matmul}[self.op]
        return [np.asarray(r, np.float64).reshape(-1) for r in fn(*self.inputs, out=ofmts)]

    def exact_at(self, flat: int) -> Fraction:
        """The exact rational result at one flat index of ``work_shape`` (Fractions; for a few elements)."""
        idx = np.unravel_index(flat, self.work_shape) if self.work_shape else ()
        if self.op == "sum":
            terms = [exact_value(t) for t in self.inputs[0][idx]]
        elif self.op == "dot":
            a, b = np.broadcast_arrays(*[x.reshape((1,) * (len(self.work_shape) + 1 - x.ndim) + x.shape)
                                         for x in self.inputs])
            terms = [exact_value(p) * exact_value(q) for p, q in zip(a[idx], b[idx])]
        else:
            a2, b2 = self.inputs
            batch, i, j = idx[:-2], idx[-2], idx[-1]
            ra = a2[tuple(min(k, n - 1) for k, n in zip(batch[len(batch) - (a2.ndim - 2):], a2.shape[:-2]))]
            rb = b2[tuple(min(k, n - 1) for k, n in zip(batch[len(batch) - (b2.ndim - 2):], b2.shape[:-2]))]
            terms = [exact_value(p) * exact_value(q) for p, q in zip(ra[i, :], rb[:, j])]
        return sum(terms, Fraction(0))

    def actual(self, actual: Any, name: str = "actual") -> tuple[np.ndarray, AnyFormat]:
        codes, fmt = to_codes(actual, name)
        codes = np.asarray(codes)
        if codes.shape != tuple(self.shape):
            raise ValueError(f"{name} has shape {codes.shape}, but the {self.op} of the inputs has shape "
                             f"{tuple(self.shape)}")
        return codes.reshape(-1), fmt


def exact_value(x: Any) -> Fraction:
    """A numpy / ml_dtypes scalar's exact value (integers as ints, floats through float64, which holds them)."""
    return Fraction(int(x)) if np.asarray(x).dtype.kind in "iu" else Fraction(float(x))
