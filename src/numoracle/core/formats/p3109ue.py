"""IEEE P3109's unsigned extended-domain 8-bit formats binary8p{P}ue (P = 1..8): decoding and p3109_cast.

binary8p{P}ue has the layout of the unsigned finite format binary8p{P}uf (K - P + 1 exponent bits, bias
``2^(K-P)``, subnormals, one zero) except at its top: 0xFD is the largest finite value, 0xFE is +inf and 0xFF
is NaN (gfloat 0.5.2 ``format_info_p3109(8, P, Unsigned, Extended)``). numoracle's engine has no unsigned format
with an infinity, so these are not ``Format``s (``numoracle.cast`` does not take them); :class:`P3109UnsignedExtended`
carries one on its finite sibling (``core/formats/p3109.py`` builds them: ``p3109_unsigned_extended``), and p3109_cast
rounds into it:

1. round as into the finite sibling (P3109's rounding, saturating at the sibling's max 0xFE); the grid of the
   two formats is the same up to 0xFE, whose value is the first step past binary8p{P}ue's max;
2. a finite value whose rounding lands on 0xFE (or beyond) overflows binary8p{P}ue, in every mode (for ToOdd too:
   the max, 0xFD, is odd, so a value below 0xFE's value stays at it); TowardZero / TowardNegative give the max
   (0xFD), the others follow the saturation mode: SatFinite / SatPropagate the max, OvfInf +inf (0xFE)
   (``"nan"`` is refused, as for the signed extended formats);
3. +inf: +inf under OvfInf and SatPropagate, the max under SatFinite; NaN and negative values (no
   representation): NaN, as in the finite sibling.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .format import Format

__all__ = ["P3109UnsignedExtended", "decode_unsigned_extended", "overflow_unsigned_extended"]

_MAX, _INF, _NAN = 0xFD, 0xFE, 0xFF


@dataclass(frozen=True)
class P3109UnsignedExtended:
    """binary8p{precision}ue: the finite sibling's codes and values, 0xFE = +inf, 0xFF = NaN."""

    name: str
    precision: int
    finite: Format  # binary8p{precision}uf: the same values below 0xFE

    signed = False
    has_inf = True
    bits = 8

    @property
    def max_finite(self) -> Fraction:
        from ..engine.convert import decode

        return Fraction(float(np.asarray(decode(np.array([_MAX], np.uint8), self.finite))[0]))

    @property
    def min_subnormal(self) -> Fraction:
        return self.finite.min_subnormal

    def __str__(self) -> str:
        return self.name


def decode_unsigned_extended(codes: Any, f: P3109UnsignedExtended) -> np.ndarray:
    """Values (float64) of binary8p{P}ue codes: the finite sibling's, with 0xFE = +inf."""
    from ..engine.convert import decode

    c = np.asarray(codes)
    v = np.asarray(decode(c.astype(np.uint8), f.finite), dtype=np.float64)
    return np.where(c == _INF, np.inf, v)


def overflow_unsigned_extended(v: np.ndarray, sibling: np.ndarray, mode: str, policy: str) -> np.ndarray:
    """Steps 2 and 3 of the module docstring: the finite sibling's codes ``sibling`` (saturated at 0xFE) of the
    values ``v``, rounded in ``mode``, -> binary8p{P}ue codes under ``policy`` (numoracle's name)."""
    codes = sibling.astype(np.int64)
    # step 2: a finite value whose rounding reached 0xFE's value overflows
    with np.errstate(invalid="ignore"):
        over = np.isfinite(v) & (v > 0) & (codes == _INF)
    top = _MAX if mode in ("rtz", "rd") or policy != "ieee" else _INF
    codes = np.where(over, top, codes)
    # step 3: +inf (the sibling saturated it to 0xFE): kept, but under SatFinite
    codes = np.where(np.isposinf(v), _MAX if policy == "saturate" else _INF, codes)
    return codes.astype(np.uint8)
