"""The configurations of an invariance question: axes, their values, the likely breakpoints, one configuration.

Axes: ``M`` (batch size), ``row`` (the watched row's position; negative counts from the end), ``K`` (terms per
output), ``N`` (matmul columns) and any user parameter handed to a factory ``make_fn(**params)``. K and N are
*shape* axes: orders are compared only between configurations of one (K, N), since a tree over K terms is never the
tree over another K. M, row and user parameters are *invariance* axes: the question is whether the order of the
watched output changes along them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import ArgumentTypeError, NumoracleError

__all__ = ["Config", "Space", "SHAPE_AXES", "breakpoints", "parse_range"]

SHAPE_AXES = ("K", "N")
BUILTIN = ("M", "row", "K", "N")
SMALL = 16          # an axis with at most this many values is tried at every value
MULTIPLES = (8, 16, 32, 64, 128)


@dataclass(frozen=True)
class Config:
    """One configuration: a value per axis, in the space's axis order."""

    names: tuple[str, ...]
    values: tuple[Any, ...]

    def get(self, name: str) -> Any:
        return self.values[self.names.index(name)]

    def replace(self, name: str, value: Any) -> Config:
        i = self.names.index(name)
        return Config(self.names, self.values[:i] + (value,) + self.values[i + 1:])

    @property
    def params(self) -> dict[str, Any]:
        """The user parameters (everything but M, row, K, N), for ``make_fn(**params)``."""
        return {n: v for n, v in zip(self.names, self.values) if n not in BUILTIN}

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(self.names, self.values))

    def __str__(self) -> str:
        return ", ".join(f"{n}={v}" for n, v in zip(self.names, self.values))


def parse_range(text: str) -> list[int]:
    """CLI ranges: ``1:256`` (both ends included), ``1:256:2`` (a step), ``3`` or ``1,2,4,8`` (a list)."""
    t = text.strip()
    try:
        if ":" in t:
            parts = [int(p) for p in t.split(":")]
            if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] < 1):
                raise ValueError
            step = parts[2] if len(parts) == 3 else 1
            return list(range(parts[0], parts[1] + 1, step))
        return [int(p) for p in t.split(",")]
    except ValueError:
        raise NumoracleError(f"a range is LO:HI (both included), LO:HI:STEP or a list 1,2,4; got {text!r}") from None


def _is_pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def breakpoints(values: list) -> list:
    """The likely thresholds among sorted integer ``values``: the ends, powers of two and their neighbours,
    multiples of 8/16/32/64/128 and their neighbours. Non-integer values are all kept."""
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return list(values)
    keep = {values[0], values[-1]}
    for v in values:
        if any(_is_pow2(v + d) for d in (-1, 0, 1)) or any((v + d) % m == 0 for m in MULTIPLES for d in (-1, 0, 1)):
            keep.add(v)
    return sorted(keep)


def _values(name: str, vals: Any) -> list:
    if isinstance(vals, (int, str)) or not isinstance(vals, Iterable):
        vals = [vals]
    out = sorted(set(vals), key=lambda v: (not isinstance(v, int), v if isinstance(v, int) else str(v)))
    if not out:
        raise NumoracleError(f"axis {name} has no values")
    if name in BUILTIN and not all(isinstance(v, int) and not isinstance(v, bool) for v in out):
        raise ArgumentTypeError(f"axis {name} takes integers, got {out[:4]!r}")
    if name in ("M", "K", "N") and out[0] < 1:
        raise NumoracleError(f"axis {name} must be >= 1, got {out[0]}")
    return out


@dataclass
class Space:
    """The axes (name -> sorted values) of a question and the invariance axes among them."""

    axes: dict[str, list]
    varying: tuple[str, ...]

    @classmethod
    def build(cls, op: str, vary: Mapping[str, Any], at: Mapping[str, Any], factory: bool) -> Space:
        if not isinstance(vary, Mapping) or not vary:
            raise ArgumentTypeError("vary must be a non-empty dict of axis -> values, e.g. {'M': range(1, 257)}")
        at = dict(at or {})
        both = set(vary) & set(at)
        if both:
            raise NumoracleError(f"axis {sorted(both)} is given both in vary and in at; give each axis once")
        merged = {"M": 1, "row": 0, **at, **vary}
        if "K" not in merged:
            raise NumoracleError("give K (terms per output) in at= or vary=")
        if op == "matmul" and "N" not in merged:
            raise NumoracleError("matmul needs N (columns of B) in at= or vary=")
        if op != "matmul" and "N" in merged:
            raise NumoracleError(f"N is matmul's; {op} has no N")
        user = [n for n in merged if n not in BUILTIN]
        if user and not factory:
            raise NumoracleError(f"axis {user} is a user parameter: pass make_fn=... (a factory make_fn(**params) "
                                 "-> fn)")
        names = [n for n in ("M", "row", "K", "N") if n in merged] + sorted(user)
        axes = {n: _values(n, merged[n]) for n in names}
        varying = tuple(n for n in names if n in vary and n not in SHAPE_AXES)
        return cls(axes, varying)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.axes)

    def config(self, values: Mapping[str, Any]) -> Config:
        return Config(self.names, tuple(values[n] for n in self.names))

    def valid(self, c: Config) -> bool:
        """A watched row inside the batch: -M <= row < M."""
        m, r = c.get("M"), c.get("row")
        return -m <= r < m

    def size(self) -> int:
        n = 1
        for v in self.axes.values():
            n *= len(v)
        return n

    def candidates(self, exhaustive: bool) -> dict[str, list]:
        """Per axis, the values tried before bisection: every value (exhaustive, a small axis, a shape axis or a
        fixed one), else the likely breakpoints."""
        out = {}
        for n, v in self.axes.items():
            out[n] = v if exhaustive or len(v) <= SMALL or n not in self.varying else breakpoints(v)
        return out
