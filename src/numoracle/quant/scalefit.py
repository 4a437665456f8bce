"""The absmax promise, kept after every rounding: no element with ``|x| <= amax`` clips.

``scale_rule="absmax"`` rounds ``amax / M`` once into ``scale_fmt`` (``scale_rounding``, RNE by
default, which is ``fl32(amax / M)`` for the default FP32 scale: numpy, PyTorch and ONNX compute
the same). A coarse scale format (E8M0, FP8) can round that quotient *down* by a lot: E8M0 holds
powers of two only, so ``amax / s`` can reach ``1.5 M``, and the elements near amax clip. This
module checks the two elements ``+-amax`` exactly as quantize's element loop treats them (step 3:
``t = compute(x / s)`` or ``compute(x * compute(1 / s))``; step 4: the element rounding) and moves
every scale whose ``+-amax`` would clip one value up in ``scale_fmt``, until none clips. For E8M0
that is the power of two above (NVIDIA's RCEIL: ``2^ceil(log2(amax / M))``) wherever the one below
lets amax clip; for FP8 and other scale formats, the next value toward +inf.

"Clips" means what ``Quantized.clipped`` reports: the element's rounded value lies beyond the
range (a float element cast that overflows under ``saturate``; an integer ``round(t)`` outside
``[qmin, qmax]``); under stochastic rounding, which may round any inexact ``t`` up, ``|t| > qmax``.
Division by a positive scale and every deterministic rounding are monotone, so ``+-amax`` not
clipping means no element of the block clips.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..core.convert import cast, decode
from ..core.formats import INT64, AnyFormat
from ..core.policy import Flags, Rounding
from .arith import div_values, mul_values

if TYPE_CHECKING:
    from .scale import QuantParams

__all__ = ["amax_t", "clips", "fit_absmax_scales"]

_MAX_STEPS = 8  # one step suffices unless 1/s rounds up (reciprocal=True); each step is checked again


def amax_t(x: np.ndarray, s: np.ndarray, p: QuantParams) -> np.ndarray:
    """Step 3 of quantize for elements ``x`` and their scales ``s`` (float64 values, same shape)."""
    with np.errstate(all="ignore"):
        if p.reciprocal:
            r = div_values(1.0, s, p.compute, p.compute_rounding)
            return mul_values(x, r, p.compute, p.compute_rounding)
        return div_values(x, s, p.compute, p.compute_rounding)


def clips(t: np.ndarray, fmt: AnyFormat, p: QuantParams) -> np.ndarray:
    """Where step 4 (the element rounding, no zero point) would take ``t`` beyond the element range."""
    t = np.asarray(t, np.float64)
    if p.rounding is Rounding.STOCHASTIC:
        return np.abs(t) > p.qmax
    if fmt.is_integer:
        r = cast(t, INT64, rounding=p.rounding, overflow="saturate", nan_to="zero").view(np.int64)
        return (r > p.qmax) | (r < p.qmin)
    _, fl = cast(t, fmt, rounding=p.rounding, overflow="saturate", flags=True)
    return (fl & Flags.OVERFLOW) != 0


def fit_absmax_scales(codes: np.ndarray, amax: np.ndarray, pos: np.ndarray, fmt: AnyFormat,
                      p: QuantParams) -> np.ndarray:
    """Scale codes moved up in ``p.scale_fmt`` until neither ``+amax`` nor ``-amax`` clips (``pos``: blocks
    with a positive finite amax; the others are left alone). A scale already at ``scale_fmt``'s largest
    value stays there (its block clips: ``scale_range='raise'`` has refused such an amax already)."""
    sfmt = p.scale_fmt
    codes = np.array(codes)
    top = sfmt.max_mag_code
    todo = np.flatnonzero(pos.ravel())
    for _ in range(_MAX_STEPS):
        if not todo.size:
            break
        c = codes.ravel()[todo]
        s = decode(c, sfmt).astype(np.float64)
        a = amax.ravel()[todo]
        both = amax_t(np.concatenate([a, -a]), np.concatenate([s, s]), p)
        bad = clips(both, fmt, p).reshape(2, -1).any(axis=0) & (c < top)
        todo = todo[bad]
        codes.ravel()[todo] = c[bad] + 1  # positive codes: +1 is the next value up
    return codes
