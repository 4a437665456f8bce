"""llama.cpp's GGUF block quantisations: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants Q2_K .. Q6_K (quantise:
``quant/schemes/gguf_kquants.py``; dequantise: ``quant/schemes/gguf_kblocks.py``), byte for byte in GGUF's block layout.

The definition is ggml's C reference (``ggml/src/ggml-quants.c``, ``quantize_row_q*_ref`` /
``dequantize_row_q*``), mirrored in numpy by the ``gguf`` package (``gguf/quants.py``, 0.19.0). Every step is one
FP32 operation (numpy float32 arithmetic is IEEE single precision, rounded to nearest even, with subnormals):

* Q8_0 (32 values, 34 bytes: d FP16, 32 int8): ``d = amax / 127``, ``id = d ? 1 / d : 0``,
  ``q = roundf(x * id)`` (half away from zero); ``y = q * d``.
* Q4_0 (32, 18: d, 16 bytes): ``max`` = the element of largest magnitude (the first one on ties; +0 in an all-zero
  block, so its d is -0.0), ``d = max / -8``,
  ``q = min(15, (int)(x * id + 8.5))``; byte j holds q[j] (low nibble) and q[j + 16] (high); ``y = (q - 8) d``.
* Q4_1 (32, 20: d, m FP16, 16 bytes): ``min``, ``max`` the first minimum and maximum (a zero keeps its sign),
  ``d = (max - min) / 15``, ``q = min(15, (int)((x - min) * id + 0.5))``,
  ``m = min``; ``y = q d + m``.
* Q5_0 (32, 22: d, qh 4 bytes, 16 bytes): ``d = max / -16``, ``q = min(31, (int)(x * id + 16.5))``; the low
  nibbles as Q4_0, bit j of the little-endian uint32 qh is bit 4 of q[j]; ``y = (q - 16) d``.
* Q5_1 (32, 24: d, m, qh, 16 bytes): as Q4_1 with 31 steps and Q5_0's qh.

The FP16 fields are the FP32 values rounded to nearest even (``(ggml_fp16_t)``, numpy ``astype(float16)``); the
quantiser divides by the FP32 ``d``, not by its FP16 rounding. Products in the dequantisers are exact in FP32
(FP16 scale times a small integer): only a final ``+ m`` (or ``- dmin * m``) rounds. NaN / inf inputs raise
ValueError (ggml has no rule for them); a scale beyond FP16's range is stored as inf, as ggml does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.args import check_array, check_int
from ...core.errors import ArgumentTypeError

__all__ = ["GGUF_TYPES", "gguf_quantize", "gguf_dequantize", "gguf_blocks", "gguf_reference", "gguf_codes",
           "GGUF_QUANTISERS", "gguf_type_name"]

# name: (elements per block, bytes per block)  (gguf/constants.py GGML_QUANT_SIZES)
GGUF_TYPES = {"Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24),
              "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210)}
GGUF_QUANTISERS = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
_F = np.float32


def gguf_type_name(qtype: Any) -> str:
    """A GGUF type as its name (\"Q4_K\"): a str in any case, or gguf's GGMLQuantizationType; refuses others."""
    name = getattr(qtype, "name", qtype)  # a str, or gguf's GGMLQuantizationType (an enum with a name)
    if not isinstance(name, str) or name.upper() not in GGUF_TYPES:
        got = repr(qtype) if isinstance(qtype, str) else f"{type(qtype).__name__} {qtype!r:.40}"
        raise (ValueError if isinstance(name, str) else ArgumentTypeError)(
            f"unknown GGUF type {got}; qtype must be one of {', '.join(GGUF_TYPES)}")
    return name.upper()


def _raw(data: Any) -> np.ndarray:
    """GGUF data as bytes: bytes-like objects, or a numeric numpy array (read as its memory)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(data, np.uint8)
    try:
        a = np.asarray(data)
    except (ValueError, TypeError) as e:
        raise ValueError(f"data must be GGUF bytes (bytes or a uint8 array), got {type(data).__name__} ({e})") from None
    if a.dtype.kind not in "iufV":
        raise ArgumentTypeError(f"data must be GGUF bytes (bytes or a uint8 array), got {type(data).__name__} of "
                                f"dtype {a.dtype}")
    return np.ascontiguousarray(a).view(np.uint8).ravel()


def gguf_blocks(data: Any, qtype: Any) -> np.ndarray:
    """Raw bytes -> (n_blocks, bytes per block) uint8; a length that is not whole blocks raises ValueError."""
    name = gguf_type_name(qtype)
    b = _raw(data)
    n, size = GGUF_TYPES[name]
    if b.size % size:
        raise ValueError(f"data: {name} has {size} bytes per block of {n} values; got {b.size} bytes, not a whole "
                         f"number of blocks ({b.size / size:.3f}): a truncated tensor, or another type's data")
    return b.reshape(-1, size)


def _f16(d: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # beyond FP16's range: inf, as ggml's conversion gives
        return d.astype(np.float16).view(np.uint8).reshape(d.shape[0], 2)


def _nibbles(q: np.ndarray) -> np.ndarray:
    """(n, 32) codes -> (n, 16) bytes: q[j] low nibble, q[j + 16] high nibble."""
    return ((q[:, :16] & 0xF) | ((q[:, 16:] & 0xF) << 4)).astype(np.uint8)


def _qh(q: np.ndarray) -> np.ndarray:
    bits = ((q >> 4) & 1).astype(np.uint32) << np.arange(32, dtype=np.uint32)
    return np.bitwise_or.reduce(bits, axis=1).astype("<u4").view(np.uint8).reshape(-1, 4)


def _recip(d: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(d == 0, _F(0), _F(1) / np.where(d == 0, _F(1), d)).astype(_F)


def _roundf(v: np.ndarray) -> np.ndarray:
    """C roundf: halves away from zero (exact: floor of |v| + 0.5 computed without rounding in float64)."""
    a = np.abs(v.astype(np.float64))
    return np.copysign(np.floor(a + 0.5), v)


def _codes(v: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Integer codes; 0 where t is not finite (1 / d overflowed: a block of values below about 2^-125). ggml
    converts that inf / NaN to an integer (undefined in C); x86's conversion gives INT_MIN, whose low byte is 0
    (ggml 0.25.3 built for x86-64 writes 0; gguf-py 0.19.0's numpy casts to uint8 give 0 too). d is FP16 0 there,
    so every value dequantises to +-0 whatever the codes."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(t), v, 0).astype(np.int64)


def _reference(x: np.ndarray, name: str) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """(the block's byte fields in order, codes q (n, 32), the scaled values t before rounding, float64)."""
    if name == "Q8_0":
        d = (np.abs(x).max(axis=1, keepdims=True) / _F(127)).astype(_F)
        t = (x * _recip(d)).astype(_F)
        q = _codes(_roundf(t), t)
        return [_f16(d), q.astype(np.int8).view(np.uint8)], q, t.astype(np.float64)
    if name in ("Q4_0", "Q5_0"):
        steps = _F(8) if name == "Q4_0" else _F(16)
        # ggml: the first element of largest magnitude, or max = +0.0 (its initial value) in an all-zero block,
        # so that block's d is +0 / -steps = -0.0 whatever the sign of its zeros
        i = np.abs(x).argmax(axis=1)[:, None]
        big = np.take_along_axis(x, i, axis=1)
        d = (np.where(big == 0, _F(0), big) / -steps).astype(_F)
        t = (x * _recip(d)).astype(_F)
        q = _codes(np.minimum(np.trunc((t + (steps + _F(0.5))).astype(_F)), 2 * steps - 1), t)
        return [_f16(d)] + ([_qh(q)] if name == "Q5_0" else []) + [_nibbles(q)], q, t.astype(np.float64)
    top = _F(15) if name == "Q4_1" else _F(31)
    # ggml: the first minimum and maximum (strict < / >), so zeros keep the sign of the first one (m = -0.0 for a
    # block of zeros that starts with -0.0); numpy's min / max may return either zero
    lo = np.take_along_axis(x, x.argmin(axis=1)[:, None], axis=1)
    hi = np.take_along_axis(x, x.argmax(axis=1)[:, None], axis=1)
    d = ((hi - lo).astype(_F) / top).astype(_F)
    t = (((x - lo).astype(_F)) * _recip(d)).astype(_F)
    q = _codes(np.minimum(np.trunc((t + _F(0.5)).astype(_F)), top), t)
    return [_f16(d), _f16(lo)] + ([_qh(q)] if name == "Q5_1" else []) + [_nibbles(q)], q, t.astype(np.float64)


def _fp32_blocks(x: Any, name: str) -> np.ndarray:
    v = check_array(x, "x")
    if v.dtype != np.float32:
        f = v.astype(np.float64)
        if not np.array_equal(f.astype(np.float32).astype(np.float64), f, equal_nan=True):
            raise ValueError(f"{name}: ggml quantises FP32 values; x holds values FP32 cannot hold: cast it first")
        v = f.astype(np.float32)
    n = GGUF_TYPES[name][0]
    if v.size % n:
        raise ValueError(f"{name}: blocks of {n} values; x has {v.size}, not a multiple of {n}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name}: x holds NaN/inf; ggml's quantisers have no rule for them")
    return v.reshape(-1, n)


def gguf_reference(x: Any, qtype: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The quantiser's bytes (n_blocks, bytes per block), codes q (n_blocks, values per block) as stored (Q4_0:
    0..15, Q8_0: -128..127, Q6_K: 0..63) and the scaled values t it rounded last (``x * id``, Q4_1 / Q5_1
    ``(x - min) * id``, K-quants ``(x + dm) / d`` or ``x / d``, NaN where a sub-block's d is 0; FP32, as float64)."""
    name = gguf_type_name(qtype)
    if name.endswith("_K"):
        from .gguf_kquants import quantize_k

        k = quantize_k(_fp32_blocks(x, name), name)
        return k.data, k.codes, k.t
    parts, q, t = _reference(_fp32_blocks(x, name), name)
    return np.concatenate(parts, axis=1), q, t


def gguf_quantize(x: Any, qtype: Any) -> np.ndarray:
    """FP32 values (flattened, C order; a whole number of blocks) -> GGUF bytes (uint8, n_blocks * bytes)."""
    return gguf_reference(x, qtype)[0].ravel()


def gguf_codes(b: np.ndarray, qtype: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Blocks (n, bytes) -> (codes q (n, 32) as stored, d (n, 1) FP32, m (n, 1) FP32 or None); K-quants: codes
    (n, 256) and each element's factors ``d * sc`` and ``dmin * m`` (n, 256) (``quant/ggufk.k_codes``)."""
    name = gguf_type_name(qtype)
    if name.endswith("_K"):
        from .gguf_kblocks import k_codes

        return k_codes(b, name)
    d = b[:, 0:2].copy().view(np.float16).astype(_F)
    if name == "Q8_0":
        return b[:, 2:].copy().view(np.int8).astype(np.int64), d, None
    has_m = name in ("Q4_1", "Q5_1")
    k = 4 if has_m else 2
    m = b[:, 2:4].copy().view(np.float16).astype(_F) if has_m else None
    qh = None
    if name in ("Q5_0", "Q5_1"):
        word = b[:, k:k + 4].copy().view("<u4").astype(np.uint32)
        qh = ((word >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int64)
        k += 4
    qs = b[:, k:].astype(np.int64)
    q = np.concatenate([qs & 0xF, qs >> 4], axis=1)
    return (q | (qh << 4) if qh is not None else q), d, m


def _legacy(b: np.ndarray, name: str) -> np.ndarray:
    return gguf_values(*gguf_codes(b, name), name)


def gguf_values(q: np.ndarray, d: np.ndarray, m: np.ndarray | None, name: str) -> np.ndarray:
    """ggml's dequantisation of codes q (as stored) with FP32 d (and m), as float32 (any q, e.g. a neighbour)."""
    if name.endswith("_K"):
        from .gguf_kblocks import k_values

        return k_values(q, d, m, name)
    if name == "Q8_0":
        return (q.astype(_F) * d).astype(_F)
    if m is not None:
        return ((q.astype(_F) * d).astype(_F) + m).astype(_F)  # q d exact; one rounding
    off = 8 if name == "Q4_0" else 16
    return ((q - off).astype(_F) * d).astype(_F)


def gguf_dequantize(data: Any, qtype: Any, shape: Any = None) -> np.ndarray:
    """GGUF bytes -> FP32 values (float32 array, ``shape`` or flat)."""
    name = gguf_type_name(qtype)
    b = gguf_blocks(data, name)
    if name.endswith("_K"):
        from .gguf_kblocks import dequantize_k

        y = dequantize_k(b, name)
    else:
        y = _legacy(b, name)
    y = y.ravel()
    if shape is not None:
        dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
        if not isinstance(dims, (tuple, list)):
            raise ArgumentTypeError(f"shape must be an int or a tuple of ints, got {type(shape).__name__} "
                                    f"{shape!r:.40}")
        dims = tuple(check_int(s, "shape", 0) for s in dims)
        if math.prod(dims) != y.size:
            raise ValueError(f"data holds {b.shape[0]} {name} blocks of {y.size} values, not shape {shape}")
        y = y.reshape(dims)
    return y
