"""Special results, in one place (SoftFloat's specialize).

Overflow by policy, the canonical NaN, infinities, invalid operations and the codes of special inputs.
"""

from __future__ import annotations

import numpy as np

from ..formats.format import Format
from ..formats.policy import Flags, NanTo, Overflow, Policy, Rounding
from .bits import blend
from .unpacked import INF, NAN, SNAN, ZERO, Unpacked


def _overflow(dst: Format, pol: Policy, mag, ovf, sign, udt):
    """Step 8: magnitudes of overflowed elements, and where they became NaN (or None)."""
    to_max = _overflow_to_max(pol, sign)
    max_mag = udt(dst.max_mag_code)
    if to_max is True:
        return np.minimum(mag, max_mag), None
    if to_max is False and dst.nan != "fnuz":
        # the code right above max finite is inf (IEEE) or the NaN (FN): a clamp does it
        return np.minimum(mag, udt(dst.max_mag_code + 1)), None
    big = udt(_inf_mag(dst) if dst.has_inf else 0)
    if to_max is False:
        mag = blend(mag, big, ovf)
        return mag, (ovf if pol.overflow is Overflow.NAN else None)
    mag = blend(mag, blend(np.full_like(mag, big), max_mag, to_max), ovf)
    return mag, (ovf & ~to_max if pol.overflow is Overflow.NAN else None)


def _overflow_to_max(pol: Policy, sign: np.ndarray) -> np.ndarray | bool:
    """Where an overflow gives +-max finite (else +-inf or NaN), by policy and mode.

    A bool when the answer is the same for every element, else a mask over ``sign``.
    """
    mode = pol.rounding
    if pol.overflow is Overflow.SATURATE or mode in (Rounding.TOWARD_ZERO, Rounding.TO_ODD):
        return True
    if mode is Rounding.UP:
        return sign
    if mode is Rounding.DOWN:
        return ~sign
    return False


def canonical_nan(dst: Format) -> int:
    """The NaN code numoracle produces: positive, quiet (top mantissa bit set)."""
    if dst.nan == "ieee":
        return (((1 << dst.exp_bits) - 1) << dst.man_bits) | (1 << (dst.man_bits - 1))
    if dst.nan == "fn":
        return dst.mag_mask
    return dst.sign_bit  # fnuz


def _inf_mag(dst: Format) -> int:
    return ((1 << dst.exp_bits) - 1) << dst.man_bits if dst.nan == "ieee" else dst.mag_mask


def _invalid_code(dst: Format, pol: Policy) -> int:
    """Code of a NaN result: the canonical NaN, or by nan_to where the format has no NaN."""
    if dst.has_nan:
        return canonical_nan(dst)
    if pol.nan_to is NanTo.RAISE:
        raise ValueError(f"NaN has no representation in {dst.name} and nan_to='raise'; "
                         "pass nan_to='max', 'zero' or 'min', or remove the NaNs")
    if pol.nan_to is NanTo.ZERO:
        return 0
    if pol.nan_to is NanTo.MIN:
        return dst.max_mag_code | dst.sign_bit
    return dst.max_mag_code


def _special_codes(u: Unpacked, dst: Format, pol: Policy) -> tuple[np.ndarray, np.ndarray]:
    """Step 12: codes and flags of the source's zeros, infinities and NaNs (sparse)."""
    cls, neg = u.spec_cls, u.sign.ravel()[u.spec_idx]
    snan = cls == SNAN
    cls = np.where(snan, np.uint8(NAN), cls)
    codes = np.zeros(cls.size, np.uint64)
    flags = np.zeros(cls.size, np.uint8)
    sbit = np.uint64(dst.sign_bit)
    invalid = (cls == NAN) | (neg & ~np.bool_(dst.signed)) & (cls != ZERO)
    if not dst.has_zero:
        invalid |= cls == ZERO
    zero = (cls == ZERO) & ~invalid
    if dst.has_negative_zero:
        codes[zero & neg] = sbit
    inf = (cls == INF) & ~invalid
    if pol.overflow is Overflow.IEEE:
        codes[inf] = _inf_mag(dst)
    elif pol.overflow is Overflow.SATURATE:
        codes[inf] = dst.max_mag_code
        # an inf the format could hold, saturated, overflows; one it cannot hold is invalid
        flags[inf] = (Flags.OVERFLOW | Flags.INEXACT) if dst.has_inf else Flags.INVALID
    else:  # NAN policy: inf becomes NaN
        invalid |= inf
        inf = np.zeros_like(inf)
    codes[inf & neg] |= sbit
    if invalid.any():
        codes[invalid] = _invalid_code(dst, pol)
        if not dst.has_nan or (cls[invalid] != NAN).any():
            flags[invalid & ((cls != NAN) | (not dst.has_nan))] = Flags.INVALID
    flags[snan] = Flags.INVALID  # IEEE 754-2019 §7.2: every operation on a signalling NaN is invalid
    return codes, flags
