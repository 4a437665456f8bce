"""The engine's exact intermediate: a chunk of values as (sign, significand, exponent) with sparse specials.

``unpack`` (core/engine/softfloat.py) makes it from codes and ``round_pack`` turns it into codes of another format; the
special classes below say what an element that is not finite and nonzero is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Unpacked", "ZERO", "FINITE", "INF", "NAN", "SNAN"]

ZERO, FINITE, INF, NAN, SNAN = 0, 1, 2, 3, 4  # SNAN: a signalling NaN (Format.quiet_bit clear)


@dataclass
class Unpacked:
    """Exact triple of a chunk; the special elements are listed sparsely.

    ``spec_idx`` are flat indices of zeros, infinities and NaNs and ``spec_cls`` their
    classes; at those positions ``sig`` and ``E`` are 0.
    """

    sign: np.ndarray  # bool
    sig: np.ndarray  # uintW, top bit set for finite nonzero elements
    E: np.ndarray  # int32
    spec_idx: np.ndarray  # intp
    spec_cls: np.ndarray  # uint8
    W: int
