"""Compiled table lookup: the values of codes of <= 16 bits from their format's value table.

``core.inputs._lookup``'s twin (table[codes]), taken where ``jit.kernel_for`` picks it: inside an entry point
whose work repays kernels (``simulate`` reads its inputs so). numpy's ``take`` first widens the codes to intp
indices (8 bytes a code, in chunks there); the loop reads each code as it is. Same values, bit for bit: a copy of
table entries. Contract (core/jit.py): ``covers``, ``run``, ``calls``.

FP16 and BF16 codes to float32 (``widen16``) compute the table's entry instead of reading it (a 256 KiB table
read at random costs more than a few vector operations a code): the same bits, every NaN the table's one.
"""

from __future__ import annotations

import numpy as np

from .. import jit
from . import rounding as jr

__all__ = ["covers", "run", "calls", "widen16"]

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


_NAN32 = 0x7FC00000      # every NaN's entry in the float32 value tables of FP16 and BF16 (inputs._table32)


@jit.njit
def _widen(codes, out, bf16):
    """out = the float32 bits of the FP16 (bf16 False) or BF16 codes, as their float32 value table holds them:
    the value (exact: FP16's by the hardware's widening, BF16's its bits shifted up), a NaN as _NAN32."""
    jr.wide_vectors()
    for i in range(codes.size):
        h = jr.widen(np.uint32(0), codes[i])
        w = jr.shl(h, jr.k(h, 16)) if bf16 else jr.half_bits(h)
        out[i] = jr.zero_or(jr.above(jr.magnitude(w), jr.k(h, 0x7F800000)), w, jr.k(h, _NAN32))


@calls.counting
def widen16(codes: np.ndarray, bf16: bool) -> np.ndarray:
    """The FP16 / BF16 codes' values as float32 (``inputs._table32(fmt)[codes]``, bit for bit; codes of any shape)."""
    out = np.empty(codes.shape, np.float32)
    if out.size:
        _widen(np.ascontiguousarray(codes, np.uint16).reshape(-1), out.reshape(-1).view(np.uint32), bool(bf16))
    return out
