"""numpy / ml_dtypes / torch dtypes <-> numoracle formats. torch is imported only when asked."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .format import TF32, AnyFormat, format_of, torch_dtype_format

__all__ = ["to_codes", "as_native", "native_dtype", "torch_dtype_format", "is_torch", "unpack_fp4x2", "pack_fp4x2"]

_ML_NAMES = {
    "bf16": "bfloat16",
    "fp8_e4m3fn": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "fp8_e4m3": "float8_e4m3",
    "fp8_e3m4": "float8_e3m4",
    "fp8_e4m3fnuz": "float8_e4m3fnuz",
    "fp8_e5m2fnuz": "float8_e5m2fnuz",
    "fp8_e4m3b11fnuz": "float8_e4m3b11fnuz",
    "fp6_e3m2fn": "float6_e3m2fn",
    "fp6_e2m3fn": "float6_e2m3fn",
    "fp4_e2m1fn": "float4_e2m1fn",
    "e8m0fnu": "float8_e8m0fnu",
    "fp8_e5m3fnu": "float8_e5m3fnu",  # ml_dtypes >= 0.7
}
_NP_NAMES = {"fp64": "float64", "fp32": "float32", "fp16": "float16"}
def is_torch(x: Any) -> bool:
    return "torch" in sys.modules and type(x).__module__.startswith("torch")


def native_dtype(fmt: AnyFormat) -> np.dtype | None:
    """The numpy or ml_dtypes dtype holding values of ``fmt`` (None when there is none)."""
    if fmt.is_integer:
        return np.dtype(fmt.name) if fmt.bits in (8, 16, 32, 64) else None
    if fmt.name in _NP_NAMES:
        return np.dtype(_NP_NAMES[fmt.name])
    if fmt.name in _ML_NAMES:
        import ml_dtypes

        t = getattr(ml_dtypes, _ML_NAMES[fmt.name], None)  # None: the installed ml_dtypes predates the type
        return None if t is None else np.dtype(t)
    return None


def as_array(x: Any, what: str) -> np.ndarray:
    """np.asarray(x), refusing ragged nestings with the argument's name."""
    try:
        return np.asarray(x)
    except ValueError as e:
        raise ValueError(f"{what} is not a rectangular array of numbers ({str(e).split('.')[0]})") from None


def to_codes(x: Any, what: str = "the array") -> tuple[np.ndarray, AnyFormat]:
    """A native array (numpy, ml_dtypes, torch, Python scalars/lists) -> (codes, its format); ``what`` names it
    in errors."""
    if is_torch(x):
        import torch

        fmt = torch_dtype_format(x.dtype)
        if fmt is None:
            raise TypeError(f"torch dtype {x.dtype} has no numoracle format")
        t = x.detach().cpu().contiguous()
        if str(t.dtype) == "torch.float4_e2m1fn_x2":
            return unpack_fp4x2(t.view(torch.uint8).numpy()), fmt
        if fmt.is_integer:
            return t.numpy().view(fmt.code_dtype), fmt
        ibits = {8: torch.uint8, 16: torch.int16, 32: torch.int32, 64: torch.int64}[t.element_size() * 8]
        return t.view(ibits).numpy().view(fmt.code_dtype), fmt
    a = as_array(x, what)
    if a.dtype == np.bool_ or a.dtype.kind in "OUSc" or (a.dtype.kind == "V" and a.dtype.names is not None):
        raise TypeError(f"{what}: cannot convert an array of dtype {a.dtype}; give a numeric array "
                        "(or codes with src=FORMAT)")
    if not a.dtype.isnative:  # big-endian data: the codes are the values' bits in this machine's order
        a = a.astype(a.dtype.newbyteorder("="))
    fmt = format_of(a.dtype)
    if fmt.bits < 8 * a.dtype.itemsize and fmt.bits < 8:
        # sub-byte formats (fp6, fp4, int4, uint4) in a byte: ml_dtypes ignores the padding bits; so do we
        codes = a.view(np.uint8) & np.uint8((1 << fmt.bits) - 1)
        return codes, fmt
    return a.view(fmt.code_dtype), fmt


def unpack_fp4x2(packed: np.ndarray) -> np.ndarray:
    """Bytes holding two FP4 codes each -> the codes, two per byte along the last axis, low nibble first.

    torch's ``float4_e2m1fn_x2`` stores element ``2i`` of a row in bits 0-3 of byte ``i`` and element
    ``2i + 1`` in bits 4-7 (the order of CUDA's ``__nv_fp4x2_e2m1``), so a ``(m, n)`` tensor holds
    ``(m, 2n)`` FP4 values; :func:`pack_fp4x2` is the inverse.
    """
    b = np.asarray(packed, np.uint8)
    if b.ndim == 0:
        b = b.reshape(1)
    pair = np.stack([b & np.uint8(0x0F), b >> np.uint8(4)], axis=-1)
    return pair.reshape(b.shape[:-1] + (2 * b.shape[-1],))


def pack_fp4x2(codes: Any) -> np.ndarray:
    """FP4 codes (an even count along the last axis) -> bytes of two, low nibble first (see :func:`unpack_fp4x2`)."""
    c = np.asarray(codes, np.uint8)
    if c.ndim == 0 or c.shape[-1] % 2:
        raise ValueError(f"packing FP4 pairs needs an even length along the last axis, got shape {c.shape}")
    if c.size and int(c.max()) > 0x0F:
        raise ValueError(f"FP4 codes are 4-bit (0..0xf), got {int(c.max()):#x}")
    return (c[..., 0::2] | (c[..., 1::2] << np.uint8(4))).astype(np.uint8)


def as_native(codes: Any, fmt: Any) -> np.ndarray:
    """Codes of ``fmt`` as a numpy / ml_dtypes array (TF32 in its float32 container)."""
    fmt = format_of(fmt)
    c = as_array(codes, "codes")
    if c.dtype.kind not in "iu":
        raise TypeError(f"as_native takes integer codes (bit patterns) of {fmt.name}, got dtype {c.dtype}; "
                        "for values use cast() or np.asarray(values, dtype)")
    if c.size and (int(c.min()) < 0 or int(c.max()) >= (1 << fmt.bits)):
        bad = int(c.min()) if int(c.min()) < 0 else int(c.max())
        raise ValueError(f"as_native: code {bad} is out of range for {fmt.name} ({fmt.bits} bits: "
                         f"0..{(1 << fmt.bits) - 1:#x})")
    if fmt == TF32:
        return (c.astype(np.uint32) << np.uint32(13)).view(np.float32)
    dt = native_dtype(fmt)
    if dt is None:
        raise ValueError(f"{fmt.name} has no numpy or ml_dtypes dtype; use decode() for its exact values")
    return c.astype(fmt.code_dtype, copy=False).view(dt)
