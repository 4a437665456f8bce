"""The K-quants' super-blocks (256 values) of llama.cpp's GGUF: byte layout and dequantisation (Q2_K .. Q6_K).

Layouts (ggml-common.h ``block_q*_K``; offsets in bytes), element e of the super-block:

* Q2_K (84): scales[16] (low nibble scale, high nibble min of the 16-value sub-block e // 16), qs[64]
  (2 bits: byte ``(e // 128) * 32 + e % 32``, shift ``2 * ((e % 128) // 32)``), d, dmin (FP16);
  ``y = d * sc * q - dmin * m``.
* Q3_K (110): hmask[32] (bit ``e // 32`` of byte ``e % 32``), qs[64] (as Q2_K), scales[12] (sixteen 6-bit
  values: low 4 bits in bytes 0..7, nibble ``e // 16 // 8``; high 2 bits in bytes 8..11), d; the scale is
  ``s - 32``; ``q = q2 - 4`` where the hmask bit is 0 (``q2`` where it is 1); ``y = d * (s - 32) * q``.
* Q4_K (144): d, dmin, scales[12] (eight 6-bit scales and mins, ggml's get_scale_min_k4 packing), qs[128]
  (byte ``(e // 64) * 32 + e % 32``, high nibble where ``(e // 32)`` is odd); ``y = d * sc * q - dmin * m``
  per 32-value sub-block.
* Q5_K (176): as Q4_K with qh[32] between scales and qs: bit ``e // 32`` of byte ``e % 32`` is q's bit 4.
* Q6_K (210): ql[128] (byte ``(e // 128) * 64 + e % 64``, high nibble where ``(e % 128) // 64`` is 1),
  qh[64] (byte ``(e // 128) * 32 + e % 32``, shift ``2 * ((e % 128) // 32)``), scales[16] (int8), d;
  ``y = d * s * (q - 32)``.

Each product is exact in FP32 (an FP16 d times integers of at most 13 bits); only the final subtraction of the
min term rounds, once, as in ggml (``dequantize_row_q*_K``) and gguf-py 0.19.0 (``gguf/quants.py``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["dequantize_k", "scale_min_k4", "k_codes", "k_values"]

_F = np.float32


def _f16(b: np.ndarray, at: int) -> np.ndarray:
    return b[:, at:at + 2].copy().view(np.float16).astype(_F)


def _e() -> np.ndarray:
    return np.arange(256)


def _two_bits(qs: np.ndarray) -> np.ndarray:
    e = _e()
    byte = (e // 128) * 32 + e % 32
    return (qs[:, byte] >> (2 * ((e % 128) // 32))) & 3


def _bit(mask: np.ndarray) -> np.ndarray:
    e = _e()
    return (mask[:, e % 32] >> (e // 32)) & 1


def _nibble4(qs: np.ndarray) -> np.ndarray:
    e = _e()
    return (qs[:, (e // 64) * 32 + e % 32] >> (4 * ((e // 32) % 2))) & 0xF


def scale_min_k4(sc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K / Q5_K: 12 bytes -> eight 6-bit scales and eight 6-bit mins (ggml get_scale_min_k4)."""
    s = sc.astype(np.int64)
    lo_s, lo_m, hi = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    scales = np.concatenate([lo_s & 63, (hi & 0xF) | ((lo_s >> 6) << 4)], axis=1)
    mins = np.concatenate([lo_m & 63, (hi >> 4) | ((lo_m >> 6) << 4)], axis=1)
    return scales, mins


def _q3_scales(sc: np.ndarray) -> np.ndarray:
    s = sc.astype(np.int64)
    j = np.arange(16)
    low = (s[:, j % 8] >> (4 * (j // 8))) & 0xF
    high = (s[:, 8 + j % 4] >> (2 * (j // 4))) & 3
    return (low | (high << 4)) - 32


def _with_min(d: np.ndarray, sc: np.ndarray, q: np.ndarray, dmin: np.ndarray, m: np.ndarray) -> np.ndarray:
    rep = 256 // sc.shape[1]                                                  # values per sub-block
    a = (d * np.repeat(sc, rep, axis=1).astype(_F)).astype(_F) * q.astype(_F)  # exact
    b = (dmin * np.repeat(m, rep, axis=1).astype(_F)).astype(_F)  # exact
    return (a - b).astype(_F)  # the one rounding


def dequantize_k(b: np.ndarray, name: str) -> np.ndarray:
    """(n_blocks, bytes) uint8 super-blocks of ``name`` -> (n_blocks, 256) float32 values."""
    b = b.astype(np.uint8)
    if name == "Q2_K":
        sc = b[:, 0:16].astype(np.int64)
        return _with_min(_f16(b, 80), sc & 0xF, _two_bits(b[:, 16:80].astype(np.int64)), _f16(b, 82), sc >> 4)
    if name == "Q3_K":
        q = _two_bits(b[:, 32:96].astype(np.int64)) - 4 * (1 - _bit(b[:, 0:32].astype(np.int64)))
        s = np.repeat(_q3_scales(b[:, 96:108]), 16, axis=1).astype(_F)
        return ((_f16(b, 108) * s).astype(_F) * q.astype(_F)).astype(_F)
    if name in ("Q4_K", "Q5_K"):
        sc, m = scale_min_k4(b[:, 4:16])
        if name == "Q4_K":
            q = _nibble4(b[:, 16:144].astype(np.int64))
        else:
            q = _nibble4(b[:, 48:176].astype(np.int64)) | (_bit(b[:, 16:48].astype(np.int64)) << 4)
        return _with_min(_f16(b, 0), sc, q, _f16(b, 2), m)
    if name == "Q6_K":
        e = _e()
        ql = b[:, 0:128].astype(np.int64)
        low = (ql[:, (e // 128) * 64 + e % 64] >> (4 * ((e % 128) // 64))) & 0xF
        q = low | (_two_bits(b[:, 128:192].astype(np.int64)) << 4)
        s = np.repeat(b[:, 192:208].view(np.int8).astype(_F), 16, axis=1)
        return ((_f16(b, 208) * s).astype(_F) * (q - 32).astype(_F)).astype(_F)
    raise ValueError(f"{name} is not a K-quant (Q2_K .. Q6_K)")


def k_codes(b: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(n, bytes) super-blocks -> (codes q (n, 256) as stored, each element's FP32 factor ``d * sc`` (n, 256), its
    ``dmin * m`` (n, 256) or None): the fields :func:`k_values` turns into values (exact products, as ggml's)."""
    b = b.astype(np.uint8)
    if name == "Q2_K":
        sc = b[:, 0:16].astype(np.int64)
        q, (d, dm), subs = _two_bits(b[:, 16:80].astype(np.int64)), (_f16(b, 80), _f16(b, 82)), (sc & 0xF, sc >> 4)
    elif name == "Q3_K":
        q = _two_bits(b[:, 32:96].astype(np.int64)) | (_bit(b[:, 0:32].astype(np.int64)) << 2)
        return q, np.repeat((_f16(b, 108) * _q3_scales(b[:, 96:108]).astype(_F)).astype(_F), 16, axis=1), None
    elif name in ("Q4_K", "Q5_K"):
        q = (_nibble4(b[:, 16:144].astype(np.int64)) if name == "Q4_K" else
             _nibble4(b[:, 48:176].astype(np.int64)) | (_bit(b[:, 16:48].astype(np.int64)) << 4))
        (d, dm), subs = (_f16(b, 0), _f16(b, 2)), scale_min_k4(b[:, 4:16])
    elif name == "Q6_K":
        e = _e()
        ql = b[:, 0:128].astype(np.int64)
        q = ((ql[:, (e // 128) * 64 + e % 64] >> (4 * ((e % 128) // 64))) & 0xF) | (
            _two_bits(b[:, 128:192].astype(np.int64)) << 4)
        return q, np.repeat((_f16(b, 208) * b[:, 192:208].view(np.int8).astype(_F)).astype(_F), 16, axis=1), None
    else:
        raise ValueError(f"{name} is not a K-quant (Q2_K .. Q6_K)")
    rep = 256 // subs[0].shape[1]
    return (q, np.repeat((d * subs[0].astype(_F)).astype(_F), rep, axis=1),
            np.repeat((dm * subs[1].astype(_F)).astype(_F), rep, axis=1))


def k_values(q: np.ndarray, d: np.ndarray, m: np.ndarray | None, name: str) -> np.ndarray:
    """ggml's value of codes q (as stored; any q, e.g. a neighbour) with the per-element fields of :func:`k_codes`."""
    off = {"Q3_K": 4, "Q6_K": 32}.get(name, 0)
    y = (d * (q - off).astype(_F)).astype(_F)  # exact
    return y if m is None else (y - m).astype(_F)  # the one rounding
