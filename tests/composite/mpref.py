"""Independent high-precision references for the composite tests: mpmath at 320 bits, rounded by plain integers.

Shares nothing with numoracle.composite: values are mpmath floats (not intervals), the rounding to a format is the
few lines of round_fraction below (round to nearest even, subnormals, overflow to inf), not the engine.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np

PREC = 320
# (precision, emin, max finite) of the formats the tests use
FORMATS = {"fp32": (24, -126, float(np.finfo(np.float32).max)), "bf16": (8, -126, 3.3895313892515355e38),
           "fp16": (11, -14, 65504.0), "fp64": (53, -1022, float(np.finfo(np.float64).max))}


def to_fraction(x) -> Fraction:
    if isinstance(x, Fraction):
        return x
    sign, man, exp, _ = mpmath.mpf(x)._mpf_
    if not man:
        return Fraction(0)
    s = -1 if sign else 1
    if not -1200 < exp + man.bit_length() < 1200:  # past every format: a stand-in rounding the same way
        return s * (Fraction(1, 2**1200) if exp < 0 else Fraction(2**1200))
    return s * Fraction(man) * Fraction(2) ** exp


def round_fraction(x: Fraction, fmt: str) -> float:
    """x rounded to nearest even into the format (the value, as a float64)."""
    p, emin, mx = FORMATS[fmt]
    if x == 0:
        return 0.0
    sign, a = (-1 if x < 0 else 1), abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = Fraction(2) ** (max(e, emin) - p + 1)  # the quantum at x's binade (subnormal grid below emin)
    k, r = divmod(a, q)
    k = int(k)
    if r * 2 > q or (r * 2 == q and k % 2 == 1):
        k += 1
    v = k * q
    if v > mx:
        return sign * math.inf
    return sign * float(v)


def mp(x: float):
    return mpmath.mpf(float(x))


def softmax_row(row, keep):
    """(m, T, L): the row max, T = sum exp(x_j - m) less one term exp(0), L = log1p(T) (tiny T kept relative)."""
    with mpmath.workprec(PREC):
        xs = [mp(x) for x, k in zip(row, keep) if k]
        m = max(xs)
        i = xs.index(m)
        T = mpmath.fsum(mpmath.exp(x - m) for j, x in enumerate(xs) if j != i)
        return m, T, mpmath.log1p(T)


def lse_value(row, keep) -> Fraction:
    """log sum exp, as an exact sum of the max and L's 320-bit value (so a tiny L still moves a midpoint)."""
    m, _, L = softmax_row(row, keep)
    return to_fraction(m) + to_fraction(L)
