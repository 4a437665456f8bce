"""Bit helpers on numpy integer arrays shared by the engine and the specials: bit lengths and masked selects."""

from __future__ import annotations

import numpy as np


def bit_length(a: np.ndarray) -> np.ndarray:
    """Exact bit length of each element of an unsigned array (0 for 0), as int32."""
    a64 = a.astype(np.uint64, copy=False)
    _, e = np.frexp(a64.astype(np.float64))
    e = np.minimum(e, 64).astype(np.int32)
    if a64.size and a.dtype.itemsize == 8:
        big = a64 >= np.uint64(1 << 53)
        if big.any():  # float64 may have rounded up to the next power of two
            eb = e[big]
            e[big] = eb - ((a64[big] >> (eb - 1).astype(np.uint64)) == 0)
    return e


def blend(a: np.ndarray, b, mask: np.ndarray) -> np.ndarray:
    """``np.where(mask, b, a)`` for unsigned ints, branch-free (np.where is slow on random masks)."""
    mk = np.negative(mask.astype(a.dtype))
    return a ^ ((a ^ (a.dtype.type(b) if np.isscalar(b) else b)) & mk)


def assign(a: np.ndarray, mask: np.ndarray, value) -> np.ndarray:
    """``a[mask] = value`` choosing the faster way: an index list when few, a blend when many."""
    idx = np.flatnonzero(mask)
    if idx.size * 8 < mask.size:
        a.ravel()[idx] = value
        return a
    return blend(a, value, mask)
