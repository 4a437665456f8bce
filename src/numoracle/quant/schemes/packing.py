"""Packed 4-bit codes as the quantisation libraries store them: nibbles in int32 words or in bytes.

Each convention is the layout its defining library writes (sources and versions in docs/quantization.md,
"Packed int4"); shapes are those of the library's tensors:

=========  ======================================  ===============================  ================================
name       weight codes -> packed                  nibble order                     zero points -> packed
=========  ======================================  ===============================  ================================
gptq       (K, N) uint4 -> qweight (K/8, N) int32  sequential: row 8w+i at bits 4i  (G, N) -> qzeros (G, N/8) int32,
                                                                                    stored z - 1 ("zeros minus one")
gptq_v2    as gptq                                 as gptq                          as gptq, stored z
awq        (K, N) uint4 -> qweight (K, N/8) int32  interleaved: column 8w+[0,2,4,6,  (G, N) -> qzeros (G, N/8) int32,
                                                   1,3,5,7][i] at bits 4i           same interleave, stored z
ct         (N, K) int4 -> weight_packed (N, K/8)   sequential: column 8w+i at bits  (N, G) int4 -> (ceil(N/8), G)
           int32, stored q + 8                     4i                               int32, packed along N, z + 8
hqq        (R, C) uint4 -> (R/2, C) uint8          row r (r < R/2) high nibble,     not packed (HQQ's zero points are
                                                   row r + R/2 low nibble           floating-point values)
bnb        flat codes -> (ceil(n/2), 1) uint8      element 2i high nibble, 2i+1 low  (absmax, not zero points)
=========  ======================================  ===============================  ================================

``pack(codes, convention)`` / ``unpack(packed, convention, shape)`` and ``pack_zeros`` / ``unpack_zeros``.
Bad input raises ValueError naming the convention: a packed array of the wrong dtype or shape, codes or zero
points outside the convention's range (GPTQ's stored ``z - 1`` cannot hold z = 0), an unknown convention.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["PACKINGS", "pack", "unpack", "pack_zeros", "unpack_zeros", "AWQ_ORDER"]

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # AutoAWQ 0.2.9 awq/modules/linear/gemm.py: nibble i holds column order[i]
_SEQ = tuple(range(8))
PACKINGS = {
    "gptq": "auto-gptq 0.7.1 auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py QuantLinear.pack",
    "gptq_v2": "GPTQModel's format 'gptq_v2': the gptq layout with zero points stored as they are",
    "awq": "AutoAWQ 0.2.9 awq/modules/linear/gemm.py WQLinear_GEMM.from_linear",
    "ct": "compressed-tensors 0.20.0 compressors/pack_quantized/helpers.py pack_to_int32 (num_bits=4)",
    "hqq": "hqq 0.2.8.post1 hqq/core/bitpack.py BitPack.pack_4bit_u8",
    "bnb": "bitsandbytes 0.50.2 backends/default/ops.py quantize_4bit (packed = q[::2] << 4 | q[1::2])",
}


def _conv(convention: Any) -> str:
    if convention not in PACKINGS:
        raise ValueError(f"unknown packing convention {convention!r}; valid: {', '.join(PACKINGS)}")
    return str(convention)


def _range(convention: str) -> tuple[int, int]:
    return (-8, 7) if convention == "ct" else (0, 15)


def _check_codes(c: np.ndarray, convention: str, what: str) -> np.ndarray:
    if c.dtype.kind not in "ui":
        raise TypeError(f"{convention}: {what} must be integers, got {c.dtype}")
    lo, hi = _range(convention)
    if c.size and (int(c.min()) < lo or int(c.max()) > hi):
        bad = int(np.count_nonzero((c < lo) | (c > hi)))
        raise ValueError(f"{convention}: {what} must lie in {lo}..{hi} ({'signed int4, stored + 8' if lo else 'uint4'})"
                         f"; {bad} value(s) outside, range given {int(c.min())}..{int(c.max())}")
    return c.astype(np.int64) - lo


def _words(u: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    """Nibbles (..., 8*W) -> int32 words (..., W): nibble i of word w is element 8w + order[i]."""
    g = u.reshape(*u.shape[:-1], -1, 8).astype(np.uint32)
    w = np.zeros(g.shape[:-1], dtype=np.uint32)
    for i, j in enumerate(order):
        w |= g[..., j] << np.uint32(4 * i)
    return w.view(np.int32)


def _nibbles(w: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    u = np.ascontiguousarray(w).view(np.uint32)
    out = np.empty((*u.shape, 8), dtype=np.int64)
    for i, j in enumerate(order):
        out[..., j] = (u >> np.uint32(4 * i)) & np.uint32(0xF)
    return out.reshape(*u.shape[:-1], -1)


def _need(shape: tuple[int, ...], axis: int, mult: int, convention: str, what: str) -> None:
    if len(shape) != 2:
        raise ValueError(f"{convention}: {what} is a 2-D matrix, got shape {shape}")
    if shape[axis] % mult:
        raise ValueError(f"{convention}: packs {mult} nibbles along axis {axis}; {what} of shape {shape} has "
                         f"{shape[axis]} there, not a multiple of {mult}")


def pack(codes: Any, convention: str) -> np.ndarray:
    """Weight codes (the library's orientation, see the module table) -> the packed tensor, as numpy."""
    conv = _conv(convention)
    c = np.asarray(codes)
    u = _check_codes(c, conv, "weight codes")
    if conv == "bnb":
        f = u.ravel()
        if f.size % 2:
            raise ValueError("bnb: an odd number of codes; bitsandbytes pads with the code of 0 (codebook.encode(0))"
                             ": append it before packing")
        return ((f[0::2] << 4) | f[1::2]).astype(np.uint8).reshape(-1, 1)
    if conv == "hqq":
        _need(c.shape, 0, 2, conv, "the codes")
        h = c.shape[0] // 2
        return ((u[:h] << 4) | u[h:]).astype(np.uint8)
    if conv in ("gptq", "gptq_v2"):
        _need(c.shape, 0, 8, conv, "the codes (K, N)")
        return _words(u.T, _SEQ).T.copy()
    _need(c.shape, 1, 8, conv, "the codes (K, N)" if conv == "awq" else "the codes (N, K)")
    return _words(u, AWQ_ORDER if conv == "awq" else _SEQ)


def _expect(p: np.ndarray, dtype: Any, shape: tuple[int, ...], convention: str, what: str) -> None:
    if p.dtype != np.dtype(dtype):
        hint = " (one byte holds 2 nibbles; an int32 word 8)" if p.dtype.itemsize != np.dtype(dtype).itemsize else ""
        raise ValueError(f"{convention}: {what} is {np.dtype(dtype).name}, got {p.dtype}{hint}")
    if tuple(p.shape) != tuple(shape):
        raise ValueError(f"{convention}: {what} for {PACKINGS[convention].split(' ')[0]}'s layout must have shape "
                         f"{tuple(shape)}, got {tuple(p.shape)} (wrong length, or packed along the other axis)")


def unpack(packed: Any, convention: str, shape: tuple[int, int] | tuple[int]) -> np.ndarray:
    """The packed tensor -> weight codes of ``shape`` (int64; ct's signed values, the others' 0..15)."""
    conv = _conv(convention)
    p = np.asarray(packed)
    shape = tuple(int(d) for d in shape)
    if conv == "bnb":
        n = int(np.prod(shape, dtype=np.int64))
        _expect(p, np.uint8, (-(-n // 2), 1), conv, "the packed tensor")
        f = p.ravel().astype(np.int64)
        return np.stack([f >> 4, f & 0xF], axis=-1).ravel()[:n].reshape(shape)
    if conv == "hqq":
        _need(shape, 0, 2, conv, "the shape")
        _expect(p, np.uint8, (shape[0] // 2, shape[1]), conv, "the packed tensor")
        q = p.astype(np.int64)
        return np.concatenate([q >> 4, q & 0xF], axis=0)
    if conv in ("gptq", "gptq_v2"):
        _need(shape, 0, 8, conv, "the shape (K, N)")
        _expect(p, np.int32, (shape[0] // 8, shape[1]), conv, "qweight")
        return _nibbles(p.T, _SEQ).T.copy()
    _need(shape, 1, 8, conv, "the shape")
    _expect(p, np.int32, (shape[0], shape[1] // 8), conv, "qweight" if conv == "awq" else "weight_packed")
    u = _nibbles(p, AWQ_ORDER if conv == "awq" else _SEQ)
    return u - 8 if conv == "ct" else u


def pack_zeros(zeros: Any, convention: str) -> np.ndarray:
    """Integer zero points -> the packed tensor: gptq / gptq_v2 / awq (G, N) -> (G, N/8); ct (N, G) -> (N/8, G)."""
    conv = _conv(convention)
    z = np.asarray(zeros)
    if conv in ("hqq", "bnb"):
        raise ValueError(f"{conv}: zero points are not packed in this convention ({PACKINGS[conv]})")
    if conv == "gptq":
        if z.dtype.kind in "ui" and z.size and (int(z.min()) < 1 or int(z.max()) > 16):
            raise ValueError(f"gptq: the stored nibble is z - 1 (GPTQ's 'zeros minus one'), so zero points must "
                             f"lie in 1..16; got {int(z.min())}..{int(z.max())} (z = 0 would store -1 and "
                             "overwrite the 7 other nibbles of its word: use gptq_v2, which stores z)")
        z = np.asarray(z) - 1 if z.dtype.kind in "ui" else z
    u = _check_codes(np.asarray(z), conv, "zero points")
    if conv == "ct":
        _need(z.shape, 0, 1, conv, "the zero points (N, G)")
        n = z.shape[0]
        padded = np.zeros((-(-n // 8) * 8, z.shape[1]), dtype=np.int64)
        padded[:n] = u
        return _words(padded.T, _SEQ).T.copy()
    _need(z.shape, 1, 8, conv, "the zero points (G, N)")
    return _words(u, AWQ_ORDER if conv == "awq" else _SEQ)


def unpack_zeros(packed: Any, convention: str, shape: tuple[int, int]) -> np.ndarray:
    """The packed zero points -> integer zero points of ``shape`` (gptq adds back the 1 it subtracted)."""
    conv = _conv(convention)
    if conv in ("hqq", "bnb"):
        raise ValueError(f"{conv}: zero points are not packed in this convention ({PACKINGS[conv]})")
    p = np.asarray(packed)
    shape = (int(shape[0]), int(shape[1]))
    if conv == "ct":
        _expect(p, np.int32, (-(-shape[0] // 8), shape[1]), conv, "the packed zero points")
        return _nibbles(p.T, _SEQ).T[: shape[0]] - 8
    _need(shape, 1, 8, conv, "the zero points (G, N)")
    _expect(p, np.int32, (shape[0], shape[1] // 8), conv, "qzeros")
    u = _nibbles(p, AWQ_ORDER if conv == "awq" else _SEQ)
    return u + 1 if conv == "gptq" else u
