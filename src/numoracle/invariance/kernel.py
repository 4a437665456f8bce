"""The kernel at one configuration: the batch built around the watched row, calls within a time limit, the watched
outputs read exactly, the watched row's order simulated, and the one-row view that reveal_order probes.

Ops (the kernel's signature at a configuration):

* ``"sum"``: ``fn(X[M, K]) -> [M]``, the sum over the last axis;
* ``"dot"``: ``fn(A[M, K], B[M, K]) -> [M]``, one dot product per row;
* ``"matmul"``: ``fn(A[M, K], B[K, N]) -> [M, N]``; the watched output is row ``row`` of the result (N values);
* a composite op (``"softmax"``, ``"log_softmax"``, ``"rms_norm"``, ``"layer_norm"``: ``composite.py``):
  ``fn(X[M, K]) -> [M, K]``; the watched outputs are row ``row``'s K values.

The rows other than the watched one hold seeded random filler (the same for every call at a configuration).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import NumoracleError
from ..core.formats.format import AnyFormat
from ..core.inputs import exact_float64
from ..core.timed import CallTimedOut, call_within
from ..models.engine.simulation import simulate
from ..models.orders.basic import Order
from ..models.orders.tree import TreeOrder
from .space import Config

__all__ = ["KernelAt", "RowData", "KernelCallError", "draw_row", "make_filler", "kernel_factory", "KINDS",
           "same_bits"]

KINDS = ("normal", "wide", "cancelling")


class KernelCallError(NumoracleError):
    """The kernel raised, hung past its time limit or returned an unusable output at a configuration."""


@dataclass
class RowData:
    """The watched row's inputs for one draw: ``x`` (the sum's row, or the row of A) and ``y`` (dot: the row of B;
    matmul: all of B; sum: None)."""

    x: np.ndarray
    y: np.ndarray | None
    kind: str
    perm: np.ndarray | None = None


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the two float64 arrays hold the same value (NaN equals NaN; -0 differs from +0)."""
    return (a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))


def draw_row(rng: np.random.Generator, op: str, K: int, N: int, kind: str, dt: np.dtype,
             like: RowData | None = None) -> RowData:
    """Random inputs of the watched row: normal, wide (exponents spread over 2^-10..2^10, where orders show) or
    cancelling (terms in pairs of nearly opposite values, so the output is small and every rounding shows).
    ``like``: another row of the same kind whose y (and pairing) this one shares, so rows can be simulated at once."""
    h = K // 2
    perm = rng.permutation(K) if like is None or like.perm is None else like.perm
    y = None
    if kind == "cancelling" and h > 0:
        u = rng.standard_normal(h) * np.exp2(rng.integers(-6, 7, h))
        x = np.concatenate([u, -u * (1 + rng.standard_normal(h) * 2.0 ** -10), rng.standard_normal(K - 2 * h)])
        x = x[perm]
        if like is None and op == "dot":
            w = rng.standard_normal(h)
            y = np.concatenate([w, w, rng.standard_normal(K - 2 * h)])[perm]
        elif like is None and op == "matmul":
            w = rng.standard_normal((h, N))
            y = np.concatenate([w, w, rng.standard_normal((K - 2 * h, N))])[perm]
    else:
        scale = np.exp2(rng.integers(-10, 11, K)) if kind == "wide" else np.ones(K)
        x = rng.standard_normal(K) * scale
        if like is None and op != "sum":
            y = rng.standard_normal(K if op == "dot" else (K, N))
    if like is not None:
        return RowData(x.astype(dt), like.y, kind, perm)
    return RowData(x.astype(dt), None if y is None else y.astype(dt), kind, perm)


def _call_limited(fn: Callable, args: tuple, seconds: float, where: str) -> Any:
    """fn(*args) in a thread, waiting at most ``seconds``: a kernel that hangs is reported, never waited for."""
    try:
        return call_within(fn, args, seconds)
    except CallTimedOut:
        raise KernelCallError(f"the kernel did not return within {seconds} s at {where} (call_seconds)") from None
    except Exception as e:
        raise KernelCallError(f"the kernel raised {type(e).__name__}: {e} at {where}") from e


def make_filler(op: str, M: int, K: int, N: int, dt: np.dtype, seed: int) -> tuple:
    """Seeded random rows around the watched one: A[M, K] and (dot) B[M, K] or (matmul) the default B[K, N]."""
    rng = np.random.default_rng([seed, K, N])
    a = rng.standard_normal((M, K)).astype(dt)
    b = (rng.standard_normal((M, K)).astype(dt) if op == "dot" else
         rng.standard_normal((K, N)).astype(dt) if op == "matmul" else None)
    return a, b


class KernelAt:
    """``fn`` at configuration ``config``: the batch around the watched row, calls and the watched outputs."""

    def __init__(self, fn: Callable, op: str, config: Config, dt: np.dtype, call_seconds: float, seed: int,
                 filler: tuple | None = None):
        self.fn, self.op, self.config, self.dt, self.call_seconds = fn, op, config, dt, call_seconds
        self.M, self.K = config.get("M"), config.get("K")
        self.N = config.get("N") if op == "matmul" else 1
        r = config.get("row")
        self.row = r + self.M if r < 0 else r
        self.calls = 0
        self.out_fmt: AnyFormat | None = None
        if filler is None or filler[0].shape[0] < self.M:
            filler = make_filler(op, self.M, self.K, self.N, dt, seed)
        self._a = filler[0][:self.M]
        self._b = None if filler[1] is None else filler[1][:self.M] if op == "dot" else filler[1]

    @property
    def out_shape(self) -> tuple[int, ...]:
        if self.op == "matmul":
            return (self.M, self.N)
        return (self.M,) if self.op in ("sum", "dot") else (self.M, self.K)     # a composite op: [M, K]

    def batch(self, d: RowData) -> tuple[np.ndarray, ...]:
        """The kernel's inputs: the filler batch with the watched row's inputs put in (copies)."""
        a = self._a.copy()
        a[self.row] = d.x
        if self.op not in ("dot", "matmul"):        # sum, or a composite op
            return (a,)
        if self.op == "dot":
            b = self._b.copy()
            b[self.row] = d.y
            return a, b
        return a, d.y

    def _invoke(self, args: tuple, limited: bool = False) -> Any:
        """One call; under the time limit when ``limited`` or the first at this configuration (reveal's many
        probing calls run unlimited: a thread per call would cost more than the kernel)."""
        where = str(self.config)
        if limited or self.calls == 0:
            out = _call_limited(self.fn, args, self.call_seconds, where)
        else:
            try:
                out = self.fn(*args)
            except Exception as e:
                raise KernelCallError(f"the kernel raised {type(e).__name__}: {e} at {where}") from e
        self.calls += 1
        shape = tuple(getattr(out, "shape", np.shape(out)))
        if shape != self.out_shape:
            raise KernelCallError(f"the kernel returned shape {shape} at {where}; {self.op} of these inputs gives "
                                  f"{self.out_shape}")
        return out

    def outputs(self, *args: np.ndarray) -> np.ndarray:
        """All the kernel's outputs on the given batch, exact, as float64 of shape out_shape."""
        out = self._invoke(args, limited=True)
        try:
            vals, fmt = exact_float64(out, "the kernel's output")
        except (TypeError, ValueError) as e:
            raise KernelCallError(f"the kernel returned {type(out).__name__} at {self.config}: {e}") from None
        if self.out_fmt is None:
            self.out_fmt = fmt
        return np.asarray(vals, np.float64).reshape(self.out_shape)

    def watched(self, d: RowData) -> np.ndarray:
        """The watched outputs (1 value, or N for matmul) when the watched row holds ``d``."""
        return self.outputs(*self.batch(d))[self.row].reshape(-1)

    def simulate_rows(self, order: Order, ds: list[RowData]) -> list[np.ndarray]:
        """simulate for several rows; at once when they share y and one tree serves every output."""
        if isinstance(order, TreeOrder) and self.op != "dot" and all(d.y is ds[0].y for d in ds):
            X = np.stack([d.x for d in ds])
            v = simulate(self.op, X, *(() if self.op == "sum" else (ds[0].y,)), order=order)
            return [np.asarray(r, np.float64).reshape(-1) for r in np.asarray(v)]
        return [self.simulate(order, d) for d in ds]

    def simulate(self, order: Order, d: RowData) -> np.ndarray:
        """The watched outputs that ``order`` (revealed for the one-row view) gives on ``d``."""
        if self.op == "sum":
            v = simulate("sum", d.x, order=order)
        elif self.op == "dot":
            v = simulate("dot", d.x, d.y, order=order)
        else:
            v = simulate("matmul", d.x[None, :], d.y, order=order)
        return np.asarray(v, np.float64).reshape(-1)

    def one_row(self) -> Callable:
        """The one-row view reveal_order probes: sum ``g(x[K])``, dot ``g(a[K], b[K])``, matmul ``g(a[1, K],
        B[K, N]) -> [1, N]``, each the watched row of the kernel's output with the filler around it."""
        a = self._a.copy()
        b = None if self._b is None else self._b.copy()
        i = self.row

        def g(*args: np.ndarray) -> Any:
            if self.op == "matmul":
                a[i] = args[0][0]
                return self._invoke((a, args[1]))[i:i + 1]
            a[i] = args[0]
            if self.op == "dot":
                b[i] = args[1]  # type: ignore[index]
                return self._invoke((a, b))[i]
            return self._invoke((a,))[i]
        return g


def kernel_factory(fn: Any, make_fn: Any, op: str, dt: np.dtype, call_seconds: float, seed: int,
                    max_m: int) -> Callable[[Config], KernelAt]:
    """config -> KernelAt; with a factory, ``make_fn(**params)`` once per distinct parameters; the filler rows
    drawn once per (K, N) for the largest M."""
    made: dict[tuple, Any] = {}
    fillers: dict[tuple, tuple] = {}

    def kernel_at(c: Config) -> KernelAt:
        f = fn
        if make_fn is not None:
            key = tuple(sorted(c.params.items()))
            if key not in made:
                try:
                    made[key] = make_fn(**c.params)
                except Exception as e:
                    raise KernelCallError(f"make_fn raised {type(e).__name__}: {e} at {c}") from e
                if not callable(made[key]):
                    raise KernelCallError(f"make_fn returned {type(made[key]).__name__}, not a kernel, at {c}")
            f = made[key]
        key = (c.get("K"), c.get("N") if op == "matmul" else 1)
        if key not in fillers:
            fillers[key] = make_filler(op, max_m, key[0], key[1], dt, seed)
        return KernelAt(f, op, c, dt, call_seconds, seed, fillers[key])
    return kernel_at
