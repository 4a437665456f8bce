"""Compiled table lookup: the values of codes of <= 16 bits from their format's value table.

``core.inputs._lookup``'s twin (table[codes]), taken where ``jit.kernel_for`` picks it: inside an entry point
whose work repays kernels (``simulate`` reads its inputs so). numpy's ``take`` first widens the codes to intp
indices (8 bytes a code, in chunks there); the loop reads each code as it is. Same values, bit for bit: a copy of
table entries. Contract (core/jit.py): ``covers``, ``run``, ``calls``.
"""

from __future__ import annotations

import numpy as np

from . import jit

__all__ = ["covers", "run", "calls"]

calls = jit.Calls()     # lookups the kernel has run (the tests read calls.count)


def covers(step: tuple) -> bool:
    """step: (the table's dtype, the codes' dtype). float32 / float64 tables, uint8 / uint16 codes."""
    table, codes = step
    return table in (np.float32, np.float64) and codes in (np.uint8, np.uint16)


@jit.njit
def _take(table, codes, out):
    for i in range(codes.size):
        out[i] = table[codes[i]]


@calls.counting
def run(table: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """table[codes] (codes of any shape; the result has their shape)."""
    out = np.empty(codes.shape, table.dtype)
    _take(table, np.ascontiguousarray(codes).reshape(-1), out.reshape(-1))
    return out
