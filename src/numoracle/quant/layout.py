"""Layouts and parameters of :func:`numoracle.quantize`: how an array is tiled into blocks, and every keyword
resolved into one :class:`QuantParams`.

A :class:`Layout` tiles an array into blocks (``block[k]`` elements along axis ``k``): per-tensor, per-channel,
per-group and 2-D blocks are all such tilings. ``x.reshape(split)`` interleaves (blocks, block length) per axis,
so block reductions are numpy reductions over the odd axes, and :meth:`Layout.chunks` walks the array in
cache-sized C-order pieces together with the index of their scales.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.formats.format import Format
from ..core.formats.policy import Rounding

__all__ = ["Layout", "QuantParams", "parse_granularity", "CHUNK"]

CHUNK = 1 << 15  # elements per pass of the element loop


# ---- layouts ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """A tiling of an array of ``shape`` into blocks of ``block[k]`` elements along axis ``k``.

    ``block[k] == shape[k]`` means one block spans the axis (``shape[k] == 0`` gives one empty
    block); otherwise ``block[k]`` divides ``shape[k]``.
    """

    shape: tuple[int, ...]
    block: tuple[int, ...]

    @property
    def grid(self) -> tuple[int, ...]:
        """Blocks per axis: the shape of the scale arrays."""
        return tuple(n // b if b else 1 for n, b in zip(self.shape, self.block))

    @property
    def split(self) -> tuple[int, ...]:
        """(grid_0, block_0, grid_1, block_1, ...): ``x.reshape(split)`` exposes the blocks."""
        return tuple(d for gb in zip(self.grid, self.block) for d in gb)

    def _grid_split(self, g: np.ndarray) -> np.ndarray:
        return np.asarray(g).reshape(tuple(d for n in self.grid for d in (n, 1)))

    def reduce(self, a: np.ndarray, func: Any, **kw: Any) -> np.ndarray:
        """``func`` (np.max, np.min, np.any ...) over each block: an array of the grid's shape."""
        return func(a.reshape(self.split), axis=tuple(range(1, 2 * len(self.shape), 2)), **kw)

    def expand(self, g: np.ndarray) -> np.ndarray:
        """A grid array repeated over its blocks: an array of ``shape`` (a copy)."""
        return np.broadcast_to(self._grid_split(g), self.split).reshape(self.shape)

    def chunks(self, g: np.ndarray, target: int = CHUNK) -> Iterator[tuple[int, int, np.ndarray]]:
        """(lo, hi, per-element values of ``g``) for C-order pieces of about ``target`` elements.

        ``g`` has the grid's shape; the third item is ``g`` repeated over ``x.ravel()[lo:hi]``.
        """
        split = self.split
        G = self._grid_split(g)
        scalar = G.size == 1
        tail, k = 1, len(split)
        while k > 0 and tail * split[k - 1] <= target:
            tail *= split[k - 1]
            k -= 1
        if k == 0:
            total = tail
            if total:
                yield 0, total, (G.ravel() if scalar else np.broadcast_to(G, split).ravel())
            return
        d = k - 1
        m = max(1, target // tail)
        for outer in np.ndindex(*split[:d]):
            base = (int(np.ravel_multi_index(outer, split[:d])) * split[d]) if d else 0
            gsel = tuple(i if j % 2 == 0 else 0 for j, i in enumerate(outer))
            for start in range(0, split[d], m):
                stop = min(start + m, split[d])
                lo, hi = (base + start) * tail, (base + stop) * tail
                if scalar:
                    yield lo, hi, G.ravel()
                    continue
                sel = gsel + ((slice(start, stop),) if d % 2 == 0 else (slice(None),))
                yield lo, hi, np.broadcast_to(G[sel], (stop - start, *split[d + 1:])).ravel()


# ---- parameters and granularity ----------------------------------------------------------
@dataclass(frozen=True)
class QuantParams:
    """Every keyword of :func:`numoracle.quantize`, resolved (formats as objects, modes as ``Rounding`` members).

    ``block_shape[k]`` is the number of elements a block spans along axis ``k``; ``qmin`` / ``qmax``
    the element range after ``clip`` (integers) or +-max finite (floats); ``global_scale`` the NVFP4
    per-tensor scale once computed, as ``global_scale_convention`` states it (None otherwise).
    """

    granularity: str | tuple  # "tensor" | "channel" | ("group", g) | ("block", n) | ("block", (r, c))
    axis: int | tuple[int, int] | None  # non-negative; None for "tensor"
    block_shape: tuple[int, ...]  # elements per block along each axis of x
    symmetric: bool
    scale_fmt: Format
    scale_rule: str  # one of RULES, or "given"
    rounding: Rounding
    clip: str  # "narrow" | "full"
    reciprocal: bool
    compute: Format
    overflow: str
    nan: str
    scale_rounding: Rounding = Rounding.NEAREST_EVEN
    compute_rounding: Rounding = Rounding.NEAREST_EVEN
    scale_range: str = "raise"
    sr_bits: int | None = None
    qmin: float = 0.0  # smallest / largest value of the element range (after clip)
    qmax: float = 0.0
    global_scale: float | None = None  # NVFP4's per-tensor scale in global_scale_convention, once computed
    global_scale_convention: str = "decode"  # "decode" (S_dec, a multiplier) or "encode" (G, a divisor)

    def layout(self, shape: tuple[int, ...]) -> Layout:
        return Layout(tuple(shape), self.block_shape)


def _axis(axis: Any, ndim: int) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for an array with {ndim} dimensions")
    return int(axis) % ndim


def parse_granularity(gran: Any, axis: Any, shape: tuple[int, ...]) -> tuple[Any, Any, tuple[int, ...]]:
    """(normalised granularity, axis, block lengths per axis)."""
    nd = len(shape)
    valid = '"tensor", "channel", ("group", g), ("block", n) or ("block", (r, c))'
    if not isinstance(gran, (str, tuple)):
        raise TypeError(f"granularity must be one of {valid}, got {type(gran).__name__} {gran!r:.40}")
    if gran == "tensor":
        return "tensor", None, tuple(shape)
    if gran == "channel":
        if nd == 0:
            raise ValueError("per-channel quantisation needs an array with at least one axis")
        ax = _axis(axis, nd)
        return "channel", ax, tuple(1 if k == ax else n for k, n in enumerate(shape))
    if not (isinstance(gran, tuple) and len(gran) == 2 and gran[0] in ("group", "block")):
        raise ValueError(f"unknown granularity {gran!r}; valid: {valid}")
    kind, size = gran
    if kind == "block" and isinstance(size, tuple):
        if len(size) != 2 or nd < 2:
            raise ValueError(f"2-D blocks need (r, c) and an array of 2 or more axes; got {size!r} for shape {shape}")
        if not isinstance(axis, tuple) and _axis(axis, nd) == 0:
            raise ValueError("2-D blocks tile the axes (axis - 1, axis); axis 0 has none before it: pass "
                             "axis=(a0, a1) to name the two axes")
        axes = tuple(_axis(a, nd) for a in (axis if isinstance(axis, tuple) else (_axis(axis, nd) - 1, axis)))
        if len(axes) != 2 or axes[0] == axes[1]:
            raise ValueError(f"2-D blocks tile two different axes; got axis={axis!r}")
        sizes = tuple(size)
    else:
        if nd == 0:
            raise ValueError(f"{kind} quantisation needs an array with at least one axis")
        axes, sizes = (_axis(axis, nd),), (size,)
    for a, g in zip(axes, sizes):
        if not isinstance(g, (int, np.integer)) or isinstance(g, bool) or g < 1:
            raise ValueError(f"{kind} size must be a positive int, got {g!r}")
        if shape[a] % g:
            raise ValueError(f"{kind} size {g} does not divide axis {a} of length {shape[a]} (shape {shape}); "
                             f"pad x along axis {a} to a multiple of {g} (e.g. np.pad with zeros), or choose a "
                             f"{kind} size that divides {shape[a]}")
    block = [1] * nd
    for a, g in zip(axes, sizes):
        block[a] = int(g)
    norm = (kind, tuple(int(g) for g in sizes) if len(sizes) == 2 else int(sizes[0]))
    return norm, (axes if len(axes) == 2 else axes[0]), tuple(block)


# ---- scale rules -------------------------------------------------------------------------
