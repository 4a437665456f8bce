"""The absmax promise, kept after every rounding: no element with ``|x| <= amax`` clips.

``scale_rule="absmax"`` rounds ``amax / M`` once into ``scale_fmt`` (``scale_rounding``, RNE by
default, which is ``fl32(amax / M)`` for the default FP32 scale: numpy, PyTorch and ONNX compute
the same). A coarse scale format (E8M0, FP8) can round that quotient *down* by a lot: E8M0 holds
powers of two only, so ``amax / s`` can reach ``1.5 M``, and the elements near amax clip. This
module checks the two elements ``+-amax`` exactly as quantize's element loop treats them (step 3:
``t = compute(x / s)`` or ``compute(x * compute(1 / s))``; step 4: the element rounding) and moves
every scale whose ``+-amax`` would clip up to the smallest value of ``scale_fmt`` at which neither
clips. For E8M0 that is the power of two above (NVIDIA's RCEIL: ``2^ceil(log2(amax / M))``)
wherever the one below lets amax clip; for FP8, one or a few values toward +inf.

The smallest such scale is found directly, not by stepping: ``s -> t(+-amax / s)`` and the element
rounding are monotone, so "clips at s" holds for every scale below some threshold and for none at
or above it. A binary search over ``scale_fmt``'s positive codes (which are ordered like their
values) between the rounded ``amax / M`` and the largest finite scale finds that threshold in at
most ``log2`` of the code count steps (<= 63), however far it lies: an FP32 or FP64 scale with a
compute format much coarser than the element spacing (INT16 with FP16 compute, INT32 with an FP64
scale) needs millions of one-value steps. Where even the largest finite scale clips, no scale of
``scale_fmt`` keeps the promise: ``scale_range="raise"`` (the default) says so and what to pass
instead; ``scale_range="clamp"`` keeps the largest scale (the block clips, as clamped scales do).

"Clips" means what ``Quantized.clipped`` reports: the element's rounded value lies beyond the
range (a float element cast that overflows under ``saturate``; an integer ``round(t)`` outside
``[qmin, qmax]``); under stochastic rounding, which may round any inexact ``t`` up, ``|t| > qmax``.
A ``t`` that overflows ``compute`` to NaN (formats without infinities) counts as clipping: its element
would be the NaN code's, not amax's. Division by a positive scale and every deterministic rounding
are monotone, so ``+-amax`` not clipping means no element of the block clips.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..core.engine.convert import cast, decode
from ..core.formats.format import INT64, AnyFormat
from ..core.formats.policy import Flags, Rounding
from .arith import div_values, mul_values

if TYPE_CHECKING:
    from .layout import QuantParams

__all__ = ["amax_t", "clips", "fit_absmax_scales"]


def amax_t(x: np.ndarray, s: np.ndarray, p: QuantParams) -> np.ndarray:
    """Step 3 of quantize for elements ``x`` and their scales ``s`` (float64 values, same shape)."""
    with np.errstate(all="ignore"):
        if p.reciprocal:
            r = div_values(1.0, s, p.compute, p.compute_rounding)
            return mul_values(x, r, p.compute, p.compute_rounding)
        return div_values(x, s, p.compute, p.compute_rounding)


def clips(t: np.ndarray, fmt: AnyFormat, p: QuantParams) -> np.ndarray:
    """Where step 4 (the element rounding, no zero point) would take ``t`` beyond the element range, or
    where ``t`` is NaN (step 3 overflowed a compute format without infinities)."""
    t = np.asarray(t, np.float64)
    nan = np.isnan(t)
    if p.rounding is Rounding.STOCHASTIC:
        return (np.abs(t) > p.qmax) | nan
    if fmt.is_integer:
        r = cast(t, INT64, rounding=p.rounding, overflow="saturate", nan_to="zero").view(np.int64)
        return (r > p.qmax) | (r < p.qmin) | nan
    _, fl = cast(t, fmt, rounding=p.rounding, overflow="saturate", flags=True)
    return ((fl & Flags.OVERFLOW) != 0) | nan


def _clips_at(c: np.ndarray, a: np.ndarray, fmt: AnyFormat, p: QuantParams) -> np.ndarray:
    """Whether ``+a`` or ``-a`` clips with the scale of code ``c`` (both arrays of one length)."""
    s = decode(c.astype(np.dtype(p.scale_fmt.code_dtype)), p.scale_fmt).astype(np.float64)
    both = amax_t(np.concatenate([a, -a]), np.concatenate([s, s]), p)
    return np.asarray(clips(both, fmt, p).reshape(2, -1).any(axis=0))


def _no_scale_error(i: int, a: float, amax: np.ndarray, fmt: AnyFormat, p: QuantParams) -> ValueError:
    sfmt = p.scale_fmt
    top = float(sfmt.max_finite)
    t = float(amax_t(np.array([a]), np.array([top]), p)[0])
    idx = tuple(int(v) for v in np.unravel_index(i, amax.shape)) if amax.ndim else ()
    how = "amax * fl(1 / s)" if p.reciprocal else "amax / s"
    c = p.compute
    qmax_c = float(decode(cast(np.float64(p.qmax), c, rounding="rtz", overflow="saturate"), c))
    coarse = (f"; compute={c.name} cannot hold {p.qmax:g} (its largest value below it is {qmax_c:g}), which "
              f"asks for a scale above amax / {p.qmax:g}: a compute format that holds {p.qmax:g} (e.g. "
              "compute='fp32') avoids that") if qmax_c != p.qmax else ""
    return ValueError(
        f"absmax: no scale of scale_fmt={sfmt.name} keeps amax {a!r} of block {idx} inside {fmt.name}'s range "
        f"[{p.qmin:g}, {p.qmax:g}]: even its largest value {top:g} gives t = {how} = {t!r} in compute={c.name}, "
        f"which rounds ({p.rounding.value}) beyond the range{coarse}; choose a scale_fmt with a wider range (e.g. "
        "scale_fmt='fp32'), or pass scale_range='clamp' to keep the largest scale and let the block clip")


def fit_absmax_scales(codes: np.ndarray, amax: np.ndarray, pos: np.ndarray, fmt: AnyFormat,
                      p: QuantParams) -> np.ndarray:
    """Scale codes moved up to the smallest value of ``p.scale_fmt`` (at or above the given one) at which
    neither ``+amax`` nor ``-amax`` clips (``pos``: blocks with a positive finite amax; the others are left
    alone). A binary search over the positive codes (module doc): exact, at most ~log2(code count) passes.
    Where even the largest finite scale clips, ``scale_range='raise'`` raises ValueError and ``'clamp'``
    keeps the largest scale."""
    shape = np.shape(codes)
    flat = np.array(codes).ravel()
    idx = np.flatnonzero(pos.ravel())
    a = amax.ravel()[idx].astype(np.float64)
    c0 = flat[idx].astype(np.int64)
    bad = _clips_at(c0, a, fmt, p)
    idx, a, c0 = idx[bad], a[bad], c0[bad]
    top_code = p.scale_fmt.max_mag_code
    if idx.size:  # one value up is the answer for almost every block (E8M0, FP8 scales): tried first
        up = np.minimum(c0 + 1, top_code)
        fits = ~_clips_at(up, a, fmt, p) & (c0 < top_code)
        flat[idx[fits]] = up[fits]
        idx, a, c0 = idx[~fits], a[~fits], c0[~fits]
    if not idx.size:
        return flat.reshape(shape)
    top = np.full(idx.size, top_code, np.int64)
    stuck = _clips_at(top, a, fmt, p)
    if stuck.any():
        if p.scale_range == "raise":
            j = int(np.flatnonzero(stuck)[0])
            raise _no_scale_error(int(idx[j]), float(a[j]), amax, fmt, p)
        flat[idx[stuck]] = top_code  # clamped into scale_fmt's range: the block clips
        idx, a, c0, top = idx[~stuck], a[~stuck], c0[~stuck], top[~stuck]
    lo, hi = np.minimum(c0 + 2, top), top  # invariant: code lo - 1 clips (c0 + 1 was tried), code hi does not
    while True:
        live = np.flatnonzero(lo < hi)
        if not live.size:
            break
        mid = lo[live] + (hi[live] - lo[live]) // 2  # no int64 overflow: FP64 codes reach 2^63 - 2^52
        ok = ~_clips_at(mid, a[live], fmt, p)
        hi[live] = np.where(ok, mid, hi[live])
        lo[live] = np.where(ok, lo[live], mid + 1)
    flat[idx] = hi
    return flat.reshape(shape)
