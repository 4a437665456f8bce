"""Ziv's strategy: a float64 approximation with an error bound rounds by the engine, hard elements retry exactly.

Step 1 (:func:`decide`): the caller gives ``approx`` and a rigorous bound ``err`` on |approx - exact|. The interval
[approx - err, approx + err] is widened outward by one float64 step and both ends are rounded to the output format
by the engine (``core.convert.cast``, round to nearest even). Rounding is monotone, so where both ends give the same
code the exact value (inside the interval) rounds to that code too: the element is decided.

A second tier may repeat step 1 in numpy's long double (64-bit significands on x86) for the undecided elements.

Step 2 (:func:`settle`): each undecided element is evaluated again, at a working precision that doubles from
``START_BITS``, by a callable that returns either an exact rational (a :class:`fractions.Fraction`, for the cases
where the result is rational: all-equal softmax rows, perfect-square variances...) or an mpmath ``iv`` interval
that contains the exact value (mpmath's interval arithmetic rounds outward). Both ends are rounded by
``core.scalar.round_value`` (Fractions); equal codes decide. Irrational results are never midpoints, so the
loop ends; it stops with an error after ``MAX_BITS`` (a value that close to a midpoint was never seen).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.engine.convert import cast
from ..core.errors import NumoracleError
from ..core.formats.format import AnyFormat
from ..core.scalar import round_value

__all__ = ["decide", "settle", "START_BITS", "MAX_BITS", "U64", "Undecidable", "interval_fraction"]

U64 = 2.0**-53  # float64's unit roundoff
START_BITS = 96
MAX_BITS = 1 << 14
# |values| below 2^-_FAR round to zero, above 2^_FAR overflow, in every format the engine carries (FP64's smallest
# subnormal is 2^-1074 and its max below 2^1024)
_FAR = 1200


class Undecidable(NumoracleError):
    """An element's rounding was not decided at MAX_BITS of working precision (never observed)."""


def decide(approx: np.ndarray, err: np.ndarray, dst: AnyFormat,
           sign: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """(codes, undecided): the codes of the elements whose whole error interval rounds to one code.

    ``err`` must bound |approx - exact| (NaN or inf marks an element as undecided). ``approx`` and ``err`` may be
    float64 or numpy's long double (the ends are then moved outward onto float64 values before the cast).
    ``sign``: where +1 (-1) the exact value is known to be > 0 (< 0): the interval is clipped at +0 (-0), which
    rounds as every value between it and the exact one does (a value of that sign rounding to zero gives that zero).
    """
    dt = np.longdouble if np.asarray(approx).dtype == np.longdouble else np.float64
    a = np.asarray(approx, dt)
    e = np.asarray(err, dt)
    with np.errstate(all="ignore"):
        lo = np.nextafter(a - e, dt(-np.inf))  # a - e errs by half an ulp: one step outward covers it
        hi = np.nextafter(a + e, dt(np.inf))
        if dt is np.longdouble:
            lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
            lo = np.where(lo64 > lo, np.nextafter(lo64, -np.inf), lo64)
            hi = np.where(hi64 < hi, np.nextafter(hi64, np.inf), hi64)
    lo = np.where(np.asarray(sign) > 0, np.maximum(lo, 0.0), lo)
    hi = np.where(np.asarray(sign) < 0, np.minimum(hi, -0.0), hi)
    ok = np.isfinite(lo) & np.isfinite(hi) & (e >= 0)
    lo, hi = np.where(ok, lo, 0.0), np.where(ok, hi, 0.0)
    c_lo = cast(lo, dst)
    c_hi = cast(hi, dst)
    ok &= c_lo == c_hi
    return c_hi, ~ok


def interval_fraction(end: tuple) -> Fraction | None:
    """The exact value of one end of an mpmath interval (its raw (sign, man, exp, bc) tuple); None if not finite.

    An end beyond 2^+-_FAR becomes 2^+-_FAR (with its sign): it rounds to the same code in every format.
    """
    sign, man, exp, bc = end
    if man == 0:
        return Fraction(0) if exp == 0 else None  # mpmath codes zero as (0, 0, 0, 0); the specials differ
    if not -_FAR < exp + bc < _FAR:  # beyond every format's range: a stand-in that rounds the same way
        v = Fraction(1, 1 << _FAR) if exp < 0 else Fraction(1 << _FAR)
    else:
        v = Fraction(man) * (Fraction(2) ** exp)
    return -v if sign else v


def settle(count: int, evaluate: Callable[[int, int], Any], dst: AnyFormat, sign: Any = 0) -> np.ndarray:
    """Codes of ``count`` hard elements: ``evaluate(k, bits)`` gives element k's exact Fraction or an iv interval.

    ``sign`` (a number or one per element): +1 / -1 where the exact value is known to be > 0 / < 0; the interval is
    then clipped at +-2^-_FAR (which rounds as every value of that sign nearer to zero does), so a result that
    rounds to a signed zero is decided.
    """
    signs = np.broadcast_to(np.asarray(sign), (count,))
    out = np.zeros(count, np.dtype(dst.code_dtype))
    for k in range(count):
        bits = START_BITS
        while True:
            v = evaluate(k, bits)
            if isinstance(v, Fraction):  # a rational result: rounded once, exactly
                out[k] = round_value(v, dst)
                break
            lo, hi = (interval_fraction(t) for t in v._mpi_)
            if lo is not None and hi is not None:
                if signs[k] > 0:
                    lo = max(lo, Fraction(1, 1 << _FAR))
                elif signs[k] < 0:
                    hi = min(hi, Fraction(-1, 1 << _FAR))
                c_lo, c_hi = round_value(lo, dst), round_value(hi, dst)
                if c_lo == c_hi:
                    out[k] = c_hi
                    break
            bits *= 2
            if bits > MAX_BITS:
                raise Undecidable(f"element {k}: its rounding to {dst.name} is not decided at {MAX_BITS} bits")
    return out
