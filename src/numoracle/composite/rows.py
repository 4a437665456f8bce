"""The rows a row-wise composite reference works on: exact values, the kept (unmasked) entries, the output format.

Inputs are native arrays (numpy, ml_dtypes, torch; the dtype names the format) read exactly as float64. The
reduction axis is moved last and the array seen as (R, n) rows. An entry takes part when it is not -inf and
``mask`` (a boolean array broadcastable to ``x``, True = take part, as torch's boolean ``attn_mask``) keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.engine.convert import decode
from ..core.formats.format import AnyFormat, format_of
from ..core.inputs import exact_float64

__all__ = ["Rows", "to_rows", "output_format", "EMPTY_ROWS", "values_of", "check_empty", "masked"]

EMPTY_ROWS = ("nan", "zero")  # what a fully masked row gives (torch: NaN; FlashAttention: 0)


@dataclass(frozen=True)
class Rows:
    """(R, n) exact values, which entries take part, rows that hold NaN or +inf, and how to give the shape back."""

    v: np.ndarray  # float64 (R, n), exact values of the input
    keep: np.ndarray  # bool (R, n): finite-or-+inf entries the mask keeps
    bad: np.ndarray  # bool (R,): a kept NaN or +inf (the result is NaN, as x - max gives NaN in IEEE arithmetic)
    fmt: AnyFormat
    shape: tuple[int, ...]  # the input's shape with the reduction axis last
    axis: int

    @property
    def n_kept(self) -> np.ndarray:
        return self.keep.sum(axis=1)


def masked(keep: np.ndarray, mask: Any, what: str) -> np.ndarray:
    """``keep`` and a user's boolean mask (True = the entry takes part), broadcast to ``keep``'s shape."""
    if mask is None:
        return keep
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise TypeError(f"mask must be a boolean array (True = the entry takes part), got dtype {m.dtype}")
    try:
        return keep & np.broadcast_to(m, keep.shape)
    except ValueError:
        raise ValueError(f"mask of shape {m.shape} does not broadcast to {what} {keep.shape}") from None


def to_rows(x: Any, axis: int, mask: Any, name: str = "x") -> Rows:
    """The rows of ``x`` along ``axis`` (an int), with ``mask`` applied."""
    v, fmt = exact_float64(x, name)
    if fmt.is_integer:
        raise TypeError(f"{name} must hold floating-point values, got {fmt.name}")
    if v.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -v.ndim <= axis < v.ndim:
        raise ValueError(f"axis {axis!r} is not an axis of an array with {v.ndim} dimensions")
    axis = int(axis) % v.ndim
    keep = ~np.isneginf(v)
    keep = masked(keep, mask, f"{name}'s shape")
    v, keep = np.moveaxis(v, axis, -1), np.moveaxis(keep, axis, -1)
    shape = v.shape
    v2, k2 = v.reshape(-1, shape[-1]), keep.reshape(-1, shape[-1])
    bad = (k2 & (np.isnan(v2) | np.isposinf(v2))).any(axis=1)
    return Rows(v2, k2, bad, fmt, shape, axis)


def output_format(out: Any, fmt: AnyFormat) -> AnyFormat:
    """The output format: ``out`` (any format name or dtype), default the input's format."""
    dst = fmt if out is None else format_of(out)
    if dst.is_integer:
        raise ValueError(f"out must be a floating-point format, got {dst.name}")
    return dst


def check_empty(empty: Any) -> str:
    if empty not in EMPTY_ROWS:
        raise ValueError(f"empty_rows must be one of {EMPTY_ROWS} (what a fully masked row gives), got {empty!r}")
    return str(empty)


def values_of(codes: np.ndarray, dst: AnyFormat) -> np.ndarray:
    """The float64 values of output codes (exact: every output format's values are float64 values)."""
    return np.asarray(decode(codes, dst), np.float64)
