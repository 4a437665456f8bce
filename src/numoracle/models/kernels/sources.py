"""Compiled twin of simulate's input scan (simsources._stats): one pass over an input's float bits.

Imported lazily when ``core.jit.kernel_for`` picks it for a float32 / float64 input (contract, core/jit.py:
``covers``, ``run``, ``calls``). simsources._stats reads the largest and the smallest nonzero |bit pattern| of the
finite values, whether any is inf / NaN, and the OR of their fraction fields, in numpy passes over cache-sized
blocks (five or six of them); ``run`` reads them in one pass, in the bits' own word type (16 float32 words to a
512-bit vector). Integer maxima, minima and ORs: the same words as the numpy passes, in any order.
"""

from __future__ import annotations

import numpy as np

from ...core import jit
from ...core.kernels import rounding as jr

__all__ = ["covers", "run", "calls"]

calls = jit.Calls()     # scans the kernel has run (the tests read calls.count)


def covers(dtype: np.dtype) -> bool:
    """step: the input's dtype. float32 and float64."""
    return dtype in (np.float32, np.float64)


@jit.njit
def _scan(bits, mag, inf, fields):
    """(the largest finite |pattern|, the least |pattern| - 1 as an unsigned word (a zero's wraps around to the top;
    at or above the infinity's - 1 where no value is finite and nonzero), the OR of the finite patterns' fields, 1
    where some value is inf / NaN) of the unsigned float bits: selects, no branches."""
    jr.wide_vectors()
    zero = jr.k(mag, 0)
    one = jr.k(mag, 1)
    top, low, ored, special = zero, jr.sub(zero, one), zero, zero
    for i in range(bits.size):
        b = jr.and_(bits[i], mag)
        finite = jr.sub(zero, jr.above(inf, b))            # all ones where b < inf
        top = jr.umax(top, jr.and_(b, finite))
        low = jr.umin(low, jr.sub(b, one))                  # (inf / NaN patterns lie above every finite one)
        ored = jr.or_(ored, jr.and_(jr.and_(b, fields), finite))
        special = jr.or_(special, jr.xor(jr.and_(finite, one), one))
    return top, low, ored, special


@calls.counting
def run(v: np.ndarray, fields: int) -> tuple[int, int, int, bool]:
    """(largest finite |pattern|, smallest finite |pattern| (an integer above the top word where none is finite and
    nonzero), OR of the finite values' ``fields`` bits, all finite) of float32 / float64 v."""
    word = np.uint32 if v.dtype == np.float32 else np.uint64
    bits = np.ascontiguousarray(v).reshape(-1).view(word)
    width = 8 * bits.itemsize
    mag, inf = word((1 << (width - 1)) - 1), word(0x7F800000 if width == 32 else 0x7FF0000000000000)
    top, low, ored, special = _scan(bits, mag, inf, word(fields))
    return int(top), int(low) + 1, int(ored), not special
