"""The one reader of array inputs: exact float64 values of whatever a user passes.

numpy, ml_dtypes, torch, JAX (through ``__array__``) arrays, Python scalars and lists are read through their
codes (:func:`numoracle.core.formats.interop.to_codes`) and decoded exactly; float64/float32/float16 arrays take the
exact
widening shortcut. Integers beyond 2^53 are refused: float64 cannot hold them exactly. Bounds, checks,
quantization metrics and ``simulate`` all read their inputs here; ``values_in`` also checks that the values are
ones a given format holds (what a kernel that reads that format was given). ``exact_float32`` reads the same
values as float32 where every value of the input's format is an FP32 number (half the memory: simulate's
float32 kernels read them so).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from . import jit
from .engine.convert import cast, decode
from .formats.format import BF16, FP16, AnyFormat, format_of
from .formats.interop import to_codes

__all__ = ["exact_float64", "exact_float32", "values_in", "value_table", "fits_fp32"]


@lru_cache(maxsize=64)
def _lookup_kernels():
    from .kernels import lookup
    return lookup


def value_table(fmt: AnyFormat) -> np.ndarray:
    """Every value of a format of <= 16 bits, by code, as float64 (exact: decode's own values, read-only)."""
    if fmt.bits > 16:
        raise ValueError(f"value_table holds formats of at most 16 bits, not {fmt.name} ({fmt.bits} bits)")
    v = decode(np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype), fmt).astype(np.float64)
    v.flags.writeable = False             # integers of <= 16 bits are exact in float64
    return v


def fits_fp32(fmt: AnyFormat) -> bool:
    """Is every value of the float format fmt an FP32 number (p <= 24, its smallest subnormal at or above
    2^-149, emax <= 127)? Its values are then exact as float32."""
    return (not fmt.is_integer and fmt.precision <= 24 and fmt.emin - fmt.man_bits >= -149
            and fmt.emax <= 127)


@lru_cache(maxsize=64)
def _table32(fmt: AnyFormat) -> np.ndarray:
    v = value_table(fmt).astype(np.float32)   # exact: only for formats that fit FP32 (NaNs as float32 reads them)
    v.flags.writeable = False
    return v


def exact_float32(x: Any, name: str) -> tuple[np.ndarray | None, AnyFormat]:
    """``(values, format)`` as ``exact_float64`` reads them, but as float32: the same values in half the memory
    (a NaN is a float32 NaN; its payload may differ from the float64 reading's), for float16 / float32 arrays
    and formats of <= 16 bits that fit FP32 (``fits_fp32``); ``(None, format)`` for any other input."""
    if isinstance(x, np.ndarray) and x.dtype == np.float32:
        return x.copy(), format_of(x.dtype)
    if isinstance(x, np.ndarray) and x.dtype == np.float64:
        return None, format_of(x.dtype)
    if isinstance(x, np.ndarray) and (x.dtype == np.float16 or x.dtype.name == "bfloat16"):
        fmt = format_of(x.dtype)
        if fmt in (FP16, BF16):
            return _widen16(x, fmt), fmt
    try:
        codes, fmt = to_codes(x)
    except TypeError as e:
        raise TypeError(f"{name}: {e}") from None
    if fmt.bits <= 16 and fits_fp32(fmt):
        return _lookup(_table32(fmt), np.asarray(codes)), fmt
    return None, fmt


def _widen16(x: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """FP16 / BF16 array x as float32 (exact): the compiled widening of its codes where jit.kernel_for picks it
    (core/jitlookup.widen16: the value table's entries, computed), else the dtype's own widening cast (numpy's,
    ml_dtypes')."""
    kern = jit.kernel_for((np.dtype(np.float32), np.dtype(np.uint16)), _lookup_kernels)
    return x.astype(np.float32) if kern is None else kern.widen16(x.view(np.uint16), fmt == BF16)


_CHUNK = 1 << 16     # codes per lookup: numpy makes an intp copy of the indices, kept this size (in cache)


def _lookup(table: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """table[codes]: the compiled lookup (core/kernels/lookup.py) where jit.kernel_for picks it, else np.take in
    chunks (of all the codes at once it makes an intp copy of them: 8 bytes a code of fresh memory, whose page
    faults cost more than the lookup)."""
    kern = jit.kernel_for((table.dtype, codes.dtype), _lookup_kernels)
    if kern is not None:
        return kern.run(table, codes)
    out = np.empty(codes.shape, table.dtype)
    flat, o = codes.reshape(-1), out.reshape(-1)
    for i in range(0, flat.size, _CHUNK):
        np.take(table, flat[i:i + _CHUNK], out=o[i:i + _CHUNK])
    return out


def exact_float64(x: Any, name: str) -> tuple[np.ndarray, AnyFormat]:
    """``(values, format)``: the exact float64 values of ``x`` and the format they came in (NaN/inf kept).

    ``name`` names the argument in error messages.
    """
    if isinstance(x, np.ndarray) and x.dtype in (np.float64, np.float32, np.float16):
        return x.astype(np.float64), format_of(x.dtype)  # widening IEEE casts are exact
    try:
        codes, fmt = to_codes(x)
    except TypeError as e:
        raise TypeError(f"{name}: {e}") from None
    if fmt.bits <= 16:                    # 16-bit and narrower formats: a lookup of decode's own values
        return _lookup(value_table(fmt), np.asarray(codes)), fmt
    v = decode(codes, fmt)
    if v.dtype != np.float64:
        if v.size and np.abs(v.astype(np.float64)).max() > 2**53:
            raise ValueError(f"{name}: integers beyond 2^53 are not exact in float64; convert them to a float "
                             "format first")
        v = v.astype(np.float64)
    return v, fmt


def values_in(x: Any, fmt: AnyFormat, name: str, why: str) -> np.ndarray:
    """The exact float64 values of ``x``, refused (ValueError naming ``name``, then ``why``) unless every one is a
    value of ``fmt`` (NaN included): rounding them into ``fmt`` must give them back."""
    v, src = exact_float64(x, name)
    if src != fmt and v.size:
        with np.errstate(all="ignore"):
            back = np.asarray(decode(cast(v, fmt), fmt), dtype=np.float64)
        if not np.array_equal(back, v, equal_nan=True):
            raise ValueError(f"{name} holds values that {fmt.name} cannot hold ({src.name}); {why}")
    return v
