"""Poison fills: output buffers holding a distinctive code, to tell which elements a kernel never wrote.

``poison_like(x)`` gives an output buffer filled with a distinctive NaN (or bit pattern) for
kernels to overwrite; ``poison_mask`` says where a result still holds it, and ``ranges_text``
lists those places as index rectangles (``compare_runs`` reports them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.args import check_int
from ..core.formats.format import AnyFormat, Format, format_of
from ..core.formats.interop import is_torch, to_codes, torch_dtype_format

__all__ = ["poison_code", "poison_like", "poison_mask", "ranges_text"]

_A5 = 0xA5A5A5A5A5A5A5A5


def poison_code(fmt: Any) -> int:
    """The poison code of a format: a NaN with payload 0xA5.. where the format has NaNs, else 0xA5 repeated.

    FP32 0x7FA5A5A5, FP16 0x7DA5, BF16 0x7FA5, FP64 0x7FF5A5A5A5A5A5A5 (signalling NaNs), FP8 E4M3FN 0x7F,
    E5M2 0x7D, FNUZ formats 0x80 (their only NaN); integers and formats without NaN: 0xA5 in every byte.
    """
    fmt = format_of(fmt)
    if isinstance(fmt, Format) and fmt.has_nan:
        if fmt.nan == "fn":
            return fmt.mag_mask
        if fmt.nan == "fnuz":
            return fmt.sign_bit
        m = fmt.man_bits
        payload = _A5 & ((1 << m) - 1) & ~(1 << (m - 1))  # quiet bit clear: a signalling NaN
        return (((1 << fmt.exp_bits) - 1) << m) | (payload or 1)
    return _A5 & ((1 << fmt.bits) - 1)


def _fmt_of(x: Any) -> AnyFormat:
    if is_torch(x):
        f = torch_dtype_format(x.dtype)
        if f is None:
            raise TypeError(f"torch dtype {x.dtype} has no numoracle format")
        return f
    return to_codes(x)[1]


def poison_like(array: Any, pattern: int | None = None) -> Any:
    """A new array of ``array``'s shape and dtype (and device, for torch) holding the poison code everywhere.

    Fill output buffers with it before a kernel runs; elements still holding it afterwards were never
    written (``poison_mask``, ``compare_runs``). ``pattern``: another code (an unsigned int of the
    dtype's width). numpy and ml_dtypes arrays, and torch tensors (torch is imported only for those).
    """
    fmt = _fmt_of(array)
    code = poison_code(fmt) if pattern is None else check_int(pattern, "pattern")
    if not 0 <= code < (1 << fmt.bits):
        raise ValueError(f"pattern {pattern!r} does not fit the {fmt.bits} bits of {fmt.name}")
    if is_torch(array):
        import torch

        width = array.element_size() * 8
        ints = {8: torch.uint8, 16: torch.int16, 32: torch.int32, 64: torch.int64}[width]
        signed = code - (1 << width) if width > 8 and code >= 1 << (width - 1) else code
        return torch.full(tuple(array.shape), signed, dtype=ints, device=array.device).view(array.dtype)
    a = np.asarray(array)
    codes = np.full(a.shape, code, dtype=np.dtype(f"u{a.dtype.itemsize}"))
    return codes.view(a.dtype)


def poison_mask(array: Any, pattern: int | None = None) -> np.ndarray:
    """Where ``array`` holds the poison code (bitwise), as a numpy bool array."""
    codes, fmt = to_codes(array)
    code = poison_code(fmt) if pattern is None else check_int(pattern, "pattern", 0, (1 << fmt.bits) - 1)
    return np.asarray(codes).astype(np.uint64) == np.uint64(code)


def _runs(idx: np.ndarray) -> list[tuple[int, int]]:
    """Sorted ints -> [(start, stop)] of consecutive runs."""
    if idx.size == 0:
        return []
    cut = np.flatnonzero(np.diff(idx) != 1) + 1
    return [(int(s[0]), int(s[-1]) + 1) for s in np.split(idx, cut)]


def ranges_text(mask: np.ndarray) -> list[str]:
    """Rectangles covering ``mask``: rows with equal column runs merged, as index-slice text (<= ~1000)."""
    if mask.ndim == 0:
        return ["()"] if bool(mask) else []
    if mask.ndim == 1:
        return [f"[{a}:{b}]" for a, b in _runs(np.flatnonzero(mask))]
    out: list[str] = []
    lead = mask.shape[:-2]
    for bi in np.ndindex(*lead):
        m = mask[bi]
        pre = "".join(f"{i}, " for i in bi)
        cur: tuple | None = None
        start = 0
        for r in range(m.shape[0] + 1):
            cols = tuple(_runs(np.flatnonzero(m[r]))) if r < m.shape[0] else ()
            if cols != cur:
                if cur:
                    out += [f"[{pre}{start}:{r}, {a}:{b}]" for a, b in cur]
                cur, start = cols, r
        if len(out) > 1000:
            break
    return out
