"""Calling a black-box kernel on crafted terms: inputs built from exact term values, outputs checked and read exactly.

A :class:`Prober` owns the kernel ``fn`` and its budgets. ``terms(t)`` calls it once with inputs whose terms
(the inputs of a sum, the products a_k * b_k of a dot product or of every matmul output) are the exact values
``t`` (every output position sees the same terms: rows of A and columns of B repeat) and returns every output
position's exact value. ``inputs(...)`` calls it on given inputs (the verification's random data).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.errors import NumoracleError
from ..core.formats.format import AnyFormat, Format, format_of
from ..core.formats.interop import native_dtype
from ..core.inputs import exact_float64

__all__ = ["Prober", "RevealError", "BudgetExhausted"]

_FAST = {np.dtype(np.float64): format_of("fp64"), np.dtype(np.float32): format_of("fp32"),
         np.dtype(np.float16): format_of("fp16")}


class RevealError(NumoracleError):
    """The kernel cannot be revealed: it raised, returned something unusable, or is not a summation tree."""


class BudgetExhausted(RevealError):
    """The call budget or the time budget ran out."""


class Prober:
    """Calls of ``fn`` for op ``"sum"`` / ``"dot"`` / ``"matmul"`` over n terms, within budgets."""

    def __init__(self, fn: Callable, op: str, n: int, shape: tuple[int, int, int] | None, fmt: AnyFormat,
                 max_calls: int, max_seconds: float):
        if not isinstance(fmt, Format):
            raise ValueError(f"reveal_order needs a float input format, got {fmt.name}")
        dt = native_dtype(fmt)
        if dt is None:
            raise ValueError(f"{fmt.name} has no numpy / ml_dtypes dtype to hand to fn")
        self.fn, self.op, self.n, self.shape, self.fmt, self.dtype = fn, op, n, shape, fmt, dt
        self.max_calls, self.max_seconds = max_calls, max_seconds
        self.calls, self.t0 = 0, time.perf_counter()
        self.out_shape: tuple[int, ...] = (shape[0], shape[2]) if op == "matmul" and shape else ()
        self.out_fmt: AnyFormat | None = None

    # ---- budgets and one call ---------------------------------------------------------------------------
    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def _check_budget(self) -> None:
        if self.calls >= self.max_calls:
            raise BudgetExhausted(f"call budget exhausted: {self.calls} calls (max_calls={self.max_calls})")
        if self.elapsed > self.max_seconds:
            raise BudgetExhausted(f"time budget exhausted: {self.elapsed:.1f} s (max_seconds={self.max_seconds})")

    def _invoke(self, args: tuple) -> Any:
        if self.calls == 0:
            return self._first_call(args)
        try:
            return self.fn(*args)
        except Exception as e:
            raise RevealError(f"fn raised {type(e).__name__}: {e} (call {self.calls})") from e

    def _first_call(self, args: tuple) -> Any:
        """The first call runs in a thread with the time budget as its limit, so a kernel that hangs is reported."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["out"] = self.fn(*args)
            except Exception as e:  # reported below
                box["err"] = e

        th = threading.Thread(target=run, daemon=True)
        th.start()
        th.join(max(self.max_seconds - self.elapsed, 0.001))
        if th.is_alive():
            raise BudgetExhausted(f"fn did not return within the time budget ({self.max_seconds} s) on its first call")
        if "err" in box:
            e = box["err"]
            raise RevealError(f"fn raised {type(e).__name__}: {e} (first call)") from e
        return box["out"]

    def call(self, *args: np.ndarray) -> np.ndarray:
        """One call of fn; its output as exact float64 values, flattened over output positions."""
        self._check_budget()
        out = self._invoke(args)
        self.calls += 1
        dt = getattr(out, "dtype", None)
        if isinstance(out, (np.ndarray, np.generic)) and dt in _FAST:
            vals, fmt = np.asarray(out, np.float64), _FAST[dt]
        else:
            try:
                vals, fmt = exact_float64(out, "fn's output")
            except (TypeError, ValueError) as e:
                raise RevealError(f"fn returned {type(out).__name__}, not an array of numbers: {e}") from None
        if vals.shape != self.out_shape and not (self.out_shape == () and vals.size == 1):
            raise RevealError(f"fn returned shape {vals.shape}; {self.op} over these inputs gives shape "
                              f"{self.out_shape}")
        if self.out_fmt is None:
            self.out_fmt = fmt
        elif fmt != self.out_fmt:
            raise RevealError(f"fn returned {fmt.name} after returning {self.out_fmt.name}: its output type changes")
        return vals.reshape(-1)

    # ---- inputs -----------------------------------------------------------------------------------------
    def native(self, v: np.ndarray, what: str) -> np.ndarray:
        """float64 values -> the input dtype, refusing any that the format cannot hold exactly."""
        a = np.asarray(v, np.float64).astype(self.dtype)
        back = a.astype(np.float64)
        if not np.array_equal(back, v):
            bad = np.flatnonzero(back != v)[:3]
            raise RevealError(f"{what}: {v.ravel()[bad].tolist()} are not {self.fmt.name} values")
        return a

    def _split(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each term t_k as a_k * b_k with a_k, b_k exact in the input format (b_k a power of two)."""
        with np.errstate(all="ignore"):
            a = t.astype(self.dtype).astype(np.float64)
        b = np.ones_like(t)
        bad = np.flatnonzero(a != t)
        for k in bad:
            e = math.frexp(float(t[k]))[1]
            for eb in (e // 2, e - 1, e, -((-e) // 2)):
                ak, bk = np.array([t[k] / 2.0**eb]), np.array([2.0**eb])
                if (ak.astype(self.dtype).astype(np.float64) == ak).all() and \
                        (bk.astype(self.dtype).astype(np.float64) == bk).all():
                    a[k], b[k] = ak[0], bk[0]
                    break
            else:
                raise RevealError(f"term {t[k]!r} is not a product of two {self.fmt.name} values")
        return a, b

    def terms(self, t: np.ndarray) -> np.ndarray:
        """fn on inputs whose terms are ``t`` (n exact values), at every output position."""
        t = np.asarray(t, np.float64)
        if self.op == "sum":
            return self.call(self.native(t, "sum probe"))
        return self.factors(*self._split(t))

    def factors(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """fn on inputs whose terms are a_k * b_k (dot / matmul), at every output position."""
        an, bn = self.native(a, "probe"), self.native(b, "probe")
        if self.op == "dot":
            return self.call(an, bn)
        M, _, N = self.shape  # type: ignore[misc]
        A = np.ascontiguousarray(np.broadcast_to(an[None, :], (M, self.n)))
        B = np.ascontiguousarray(np.broadcast_to(bn[:, None], (self.n, N)))
        return self.call(A, B)

    def set_masking(self, u: float, M: float) -> None:
        """Native inputs with the unit u at every term, and the splits of +-M, for :meth:`pair`."""
        a, b = self._split(np.array([u, M, -M]))
        an, bn = self.native(a, "unit"), self.native(b, "unit")
        self._pair = (an, bn)
        if self.op == "sum":
            self._base = [np.full(self.n, an[0])]
        elif self.op == "dot":
            self._base = [np.full(self.n, an[0]), np.full(self.n, bn[0])]
        else:
            M_, _, N = self.shape  # type: ignore[misc]
            self._base = [np.full((M_, self.n), an[0]), np.full((self.n, N), bn[0])]

    def pair(self, i: int, j: int) -> np.ndarray:
        """fn with +M at term i, -M at term j and the unit elsewhere (every output position)."""
        an, bn = self._pair
        base = self._base
        x = base[0]
        if self.op == "matmul":
            A, B = base
            A[:, i], A[:, j], B[i, :], B[j, :] = an[1], an[2], bn[1], bn[2]
            try:
                return self.call(A, B)
            finally:
                A[:, i] = A[:, j] = an[0]
                B[i, :] = B[j, :] = bn[0]
        x[i], x[j] = an[1], an[2]
        if self.op == "dot":
            base[1][i], base[1][j] = bn[1], bn[2]
        try:
            return self.call(*base)
        finally:
            x[i] = x[j] = an[0]
            if self.op == "dot":
                base[1][i] = base[1][j] = bn[0]

    def set_row_masking(self, u: float, M: float) -> bool:
        """matmul: B of ones and A holding u, +-M itself, so that every row of A can carry its own probe pair.
        False when u or M is not a value of the input format (then every row carries the same probe)."""
        if self.op != "matmul":
            return False
        v = np.array([u, M, -M])
        if not np.array_equal(v.astype(self.dtype).astype(np.float64), v):
            return False
        M_, _, N = self.shape  # type: ignore[misc]
        self._rows = (v.astype(self.dtype), np.full((M_, self.n), v[0]).astype(self.dtype),
                      np.ones((self.n, N), self.dtype))
        return True

    def pair_rows(self, i: int, js: list[int]) -> np.ndarray:
        """matmul: row r of A holds +M at term i and -M at term js[r] (rows past len(js) only units); outputs
        (M, N)."""
        v, A, B = self._rows
        r = np.arange(len(js))
        A[r, i], A[r, js] = v[1], v[2]
        try:
            return self.call(A, B).reshape(self.out_shape)
        finally:
            A[r, i] = A[r, js] = v[0]

    def inputs_of(self, rng: np.random.Generator, kind: str) -> tuple[np.ndarray, ...]:
        """Random inputs of one kind: normal, positive, mixed magnitudes, cancelling."""
        shapes: list[tuple[int, ...]]
        if self.op == "matmul":
            M, K, N = self.shape  # type: ignore[misc]
            shapes = [(M, K), (K, N)]
        else:
            shapes = [(self.n,)] * (1 if self.op == "sum" else 2)
        fmt = self.fmt
        span = max(1, min(8, (fmt.emax - 2) // 4))
        out = []
        for s in shapes:
            x = rng.standard_normal(s)
            if kind == "positive":
                x = np.abs(x)
            elif kind == "mixed":
                x = x * np.exp2(rng.integers(-span, span + 1, s))
            elif kind == "cancelling":
                x = np.where(rng.random(s) < 0.5, x, -x) * np.exp2(rng.integers(-2, 3, s))
            out.append(self.native(np.asarray(x, np.float64).astype(self.dtype).astype(np.float64), kind))
        if kind == "cancelling" and self.op == "sum":
            out[0][len(out[0]) // 2:] = -out[0][:len(out[0]) - len(out[0]) // 2][::-1]
        return tuple(out)


def input_format(dtype: Any) -> Format:
    f = format_of(dtype)
    if not isinstance(f, Format):
        raise ValueError(f"dtype must be a float format, got {f.name}")
    return f
