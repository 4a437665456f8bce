"""A sweep's random inputs: seeded, boundary-weighted codes (levels, midpoints and near-ties of the destination)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.engine.codekeys import from_key, is_nan, key_bounds, to_key
from ..core.engine.convert import cast_codes, decode
from ..core.formats.format import BF16, FP16, FP32, FP64, TF32, AnyFormat, Format, format_of
from ..core.formats.policy import resolve_policy

BLOCK = 1 << 16  # random inputs are drawn in blocks of this many codes, each seeded by (seed, block index)


# ---- random, boundary-weighted inputs ------------------------------------------------------------
def _magnitude_bits(fmt: AnyFormat) -> int:
    return fmt.precision if isinstance(fmt, Format) else fmt.bits - int(fmt.signed)


def _levels(src: AnyFormat, dst: AnyFormat) -> np.ndarray:
    """log2 of the offsets (in source ULPs) drawn around destination midpoints."""
    ps = _magnitude_bits(src)
    if src.is_integer:
        return np.array([v for v in (0, 1, 2, 4, 8, 16) if v < ps], np.int64)
    pd = _magnitude_bits(dst)
    lv = {0}
    for inter in (FP32, TF32, BF16, FP16):  # a few ULPs of each plausible intermediate format
        if pd < inter.precision < ps:
            lv.add(ps - inter.precision + 2)
    if dst.is_integer:
        lv |= {2, max(0, ps - 8)}
    elif ps > pd + 1:
        lv.add(ps - pd - 1)  # anywhere in the rounding interval
    return np.array(sorted(lv), np.int64)


def _midpoints(rng: np.random.Generator, dst: AnyFormat, m: int) -> np.ndarray:
    """Signed float64 rounding ties of ``dst``: midpoints of neighbouring values (and the overflow threshold)."""
    if isinstance(dst, Format):
        top = dst.max_mag_code
        c = rng.integers(0, top + 1, m, dtype=np.int64)
        edge = rng.random(m) < 1 / 16  # the ends of the range: underflow and overflow ties
        c[edge] = np.clip(rng.choice(np.array([0, 1, top - 1, top]), int(edge.sum())), 0, top)
        lo = decode(c.astype(dst.code_dtype), dst).astype(np.float64)
        nxt = decode(np.minimum(c + 1, top).astype(dst.code_dtype), dst).astype(np.float64)
        beyond = float(dst.max_finite) + 2.0 ** (dst.emax - dst.man_bits)
        hi = np.where(c == top, beyond, nxt)
        with np.errstate(over="ignore"):
            mid = lo / 2 + hi / 2
    else:
        k = np.floor(np.exp2(rng.random(m) * dst.precision)) - rng.integers(0, 2, m)  # log-uniform magnitudes
        mid = k + 0.5
        edge = rng.random(m) < 1 / 16
        mid[edge] = rng.choice(np.array([float(dst.max_value) + 0.5, float(dst.min_value) - 0.5, 0.5]),
                               int(edge.sum()))
    return np.where(rng.random(m) < 0.5, -mid, mid)


def _near_ties(rng: np.random.Generator, src: AnyFormat, dst: AnyFormat, m: int) -> np.ndarray:
    mid = _midpoints(rng, dst, m)
    if not src.signed:
        mid = np.abs(mid)
    codes = cast_codes(mid.view(np.uint64), FP64, src, resolve_policy(src))
    lo, hi = key_bounds(src)
    nan = is_nan(codes, src)
    keys = to_key(np.where(nan, 0, codes).astype(codes.dtype), src)
    keys = np.where(nan, np.where(mid < 0, lo, hi), keys)
    lv = rng.choice(_levels(src, dst), m)
    delta = rng.integers(-(1 << lv), 1 << lv, endpoint=True)
    with np.errstate(over="ignore"):
        k = keys + delta
    k = np.where((delta > 0) & (k < keys), hi, np.where((delta < 0) & (k > keys), lo, k))
    return from_key(np.clip(k, lo, hi), src).astype(src.code_dtype)


def _random_block(src: AnyFormat, dst: AnyFormat, seed: int, block: int) -> np.ndarray:
    rng = np.random.default_rng([seed, block])
    top = (1 << src.bits) - 1
    uni = rng.integers(0, top, BLOCK // 2, dtype=np.uint64, endpoint=True).astype(src.code_dtype)
    out = np.empty(BLOCK, src.code_dtype)
    out[0::2] = uni
    out[1::2] = _near_ties(rng, src, dst, BLOCK - BLOCK // 2)
    return out


def random_codes(src: Any, dst: Any, n: int, seed: int = 0, start: int = 0) -> np.ndarray:
    """Codes ``start .. start + n`` of the seeded random input sequence that ``sweep(inputs=N)`` uses.

    Every other code is uniform over all codes of ``src``; the others lie near rounding ties of
    ``dst`` (midpoints of neighbouring ``dst`` values, its overflow and underflow thresholds,
    ``k + 1/2`` for integer destinations), offset by a random number of source ULPs up to a few
    ULPs of each intermediate format between the two (FP32, TF32, BF16, FP16), so conversions
    that round twice are caught. Block ``b`` of ``BLOCK`` codes depends only on ``(seed, b)``.
    """
    src, dst = format_of(src), format_of(dst)
    b0, b1 = start // BLOCK, -(-(start + n) // BLOCK)
    blocks = [_random_block(src, dst, seed, b) for b in range(b0, b1)]
    allc = np.concatenate(blocks) if blocks else np.zeros(0, src.code_dtype)
    return allc[start - b0 * BLOCK: start - b0 * BLOCK + n]
