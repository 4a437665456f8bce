"""The thread's floating-point mode: numoracle's float64 steps need IEEE subnormals.

A CPU can flush subnormal results to zero (FTZ) and read subnormal operands as zero (DAZ): a mode of each thread
(x86's MXCSR, Arm's FPCR) that libraries set for speed (``torch.set_flush_denormal(True)``, startup code of
programs built with ``-ffast-math``). numpy and the compiled kernels then compute in that mode too, and the
steps numoracle proves exact (TwoSum, products exact in float64, float64 GEMMs with an error bound, sums of
subnormal accumulators) are not: results would be wrong without a sign. ``require_ieee`` asks the thread, with
two one-value operations, before an entry point computes, and raises an error that names the fix.
"""

from __future__ import annotations

import numpy as np

from .errors import FlushToZeroError

__all__ = ["subnormals_flushed", "require_ieee"]

_TINY = np.array([2.0**-1022])       # the smallest normal float64: half of it is a subnormal (FTZ flushes it)
_SUB = np.array([2.0**-1074])        # the smallest subnormal: as an operand (DAZ reads it as zero)


def subnormals_flushed() -> bool:
    """Does this thread's float64 arithmetic flush subnormal results (FTZ) or read subnormal operands as zero
    (DAZ)? Asked at each call: the mode is the thread's and may change between calls."""
    with np.errstate(all="ignore"):
        return bool((_TINY * 0.5)[0] == 0 or (_SUB + _SUB)[0] == 0)


def require_ieee(what: str) -> None:
    """Raise :class:`FlushToZeroError` (naming ``what`` and the fix) where this thread flushes subnormals."""
    if subnormals_flushed():
        raise FlushToZeroError(
            f"{what} needs IEEE subnormals, but this thread flushes them to zero (FTZ/DAZ mode, e.g. "
            "torch.set_flush_denormal(True)): its exact steps would give wrong results. Turn the mode off for "
            "the call (torch.set_flush_denormal(False)); simulate's ftz=True models a kernel that flushes")
