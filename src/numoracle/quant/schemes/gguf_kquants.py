"""The K-quants' quantisers (Q2_K .. Q6_K): llama.cpp's ``quantize_row_q*_K_ref``, byte for byte.

The definition is ggml's C reference (``ggml/src/ggml-quants.c``; compared with the library built from
llama.cpp commit 0c1e570, ggml 0.25.3, the one vendored by llama-cpp-python 0.3.36, through
``ggml_quantize_chunk`` without an importance matrix: docs/conformance.md). Each super-block of 256 values is
cut into sub-blocks (16 values: Q2_K, Q3_K, Q6_K; 32: Q4_K, Q5_K) whose scale (and min) is searched:

* Q2_K, Q4_K, Q5_K: ``make_qkx2_quants`` (an affine fit ``x ~ scale * L - min``; the grid of trial inverse
  scales ``(rmin + rdelta * is + nmax) / (max - min)``, a weighted least-squares fit per trial, kept where its
  weighted error is smaller): Q2_K weights ``|x|``, nmax 3, rmin -0.5, 15 steps, absolute error; Q4_K weights
  ``sqrt(sum x^2 / 32) + |x|``, nmax 15, rmin -1, 20 steps, squared error; Q5_K as Q4_K with nmax 31, rmin -0.5,
  15 steps. The sub-block scales and mins are then quantised to 4 bits (Q2_K: by ``15 / max``) or 6 bits
  (Q4_K, Q5_K: by ``63 / max``) against FP16 super-block factors ``d = fp16(max / 15)`` (``/ 63``), and every
  element is rounded again as ``nearest_int((x + dm) / d)`` with the stored factors.
* Q3_K: ``make_q3_quants`` (symmetric, nmax 4, weights x^2, up to five passes of one-element moves that raise
  ``sumlx^2 / suml2``); the sixteen scales to 6 bits by ``-32 / max_scale``; ``nearest_int(x / d)``.
* Q6_K: ``make_qx_quants`` (symmetric, nmax 32, weights x^2, 18 trial scales ``-(nmax + 0.1 is) / max``); the
  scales to int8 by ``-128 / max_scale``; ``nearest_int(x / d)``.

Every step is one FP32 operation in the C code's order (numpy float32 arithmetic is IEEE single precision with
round to nearest even, as SSE2 is; sums are sequential, as C's loops are without -ffast-math); ``nearest_int`` is
ggml's magic-number rounding ``bits(x + 12582912f) & 0x7fffff - 0x400000`` (round half to even within
+-2^22, and its exact garbage beyond, as the release build computes it with assertions off). Integer results go
through the C types they are stored in (``uint8_t`` / ``int8_t`` truncation). A build that contracts
``a * b + c`` into an FMA (GCC's default ``-ffp-contract=fast`` on a target with FMA in the base flags, e.g.
aarch64) can produce other bytes; x86-64 builds of ggml-base (no ``-mfma``) do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .gguf_kblocks import scale_min_k4

__all__ = ["KQuantReference", "quantize_k", "K_QUANTISERS"]

K_QUANTISERS = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
_F = np.float32
_EPS = _F(1e-15)  # GROUP_MAX_EPS


@dataclass(frozen=True)
class KQuantReference:
    """A K-quant reference: the bytes (n_blocks, bytes per block), the element codes as stored (n_blocks, 256:
    Q2_K 0..3, Q3_K 0..7, Q4_K 0..15, Q5_K 0..31, Q6_K 0..63), and the FP32 value each code rounded in the final
    pass (``(x + dm) / d`` or ``x / d``, as float64; NaN where that sub-block's d is 0 and the search's codes
    stand)."""

    data: np.ndarray
    codes: np.ndarray
    t: np.ndarray


def nearest_int(v: np.ndarray) -> np.ndarray:
    """ggml's ``nearest_int`` on FP32 values, exactly (int64)."""
    with np.errstate(all="ignore"):
        s = (v.astype(_F) + _F(12582912.0)).astype(_F)
    return (s.view(np.int32).astype(np.int64) & 0x7FFFFF) - 0x400000


def _seq(a: np.ndarray, *, from_first: bool = False) -> np.ndarray:
    """Sequential FP32 sum along axis 1, as a C loop (``s = 0; s += a[i]``, or ``s = a[0]; s += a[i>0]``)."""
    s = a[:, 0].copy() if from_first else np.zeros(a.shape[0], _F)
    for i in range(1 if from_first else 0, a.shape[1]):
        s = (s + a[:, i]).astype(_F)
    return s


def _running_max(v: np.ndarray) -> np.ndarray:
    """``m = 0; if (v[j] > m) m = v[j];`` along axis 1."""
    m = np.zeros(v.shape[0], _F)
    for j in range(v.shape[1]):
        m = np.where(v[:, j] > m, v[:, j], m)
    return m


def _first_absmax(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(amax, max): the first element of largest magnitude and its magnitude (``if (ax > amax)``)."""
    i = np.abs(x).argmax(axis=1)[:, None]
    mx = np.take_along_axis(x, i, axis=1)[:, 0]
    return np.abs(mx), mx


def _max_scale(sc: np.ndarray) -> np.ndarray:
    """Q3_K / Q6_K's super-block scale: the first sub-block scale of largest magnitude, from ``amax = 0``
    (``if (fabsf(scale) > amax)``), so a NaN scale (a sub-block whose ``x * x`` overflowed FP32, |x| above
    about 1.8e19) never wins and a super-block of NaN and zero scales keeps max_scale = 0 (numpy's argmax
    would pick the NaN)."""
    a = np.abs(sc)
    i = np.where(np.isnan(a), _F(-1), a).argmax(axis=1)[:, None]
    best = np.take_along_axis(sc, i, axis=1)[:, 0]
    return np.where(np.take_along_axis(a, i, axis=1)[:, 0] > 0, best, _F(0)).astype(_F)


def _clip(v: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.minimum(np.maximum(v, lo), hi)


def _col(v: np.ndarray) -> np.ndarray:
    return v[:, None]


def _qkx2(x: np.ndarray, w: np.ndarray, nmax: int, rmin: float, rdelta: float, nstep: int,
          mad: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """make_qkx2_quants over rows: (scale, the_min, L)."""
    fn = _F(nmax)
    mn, mx = x.min(axis=1), x.max(axis=1)
    sum_w, sum_x = _seq(w, from_first=True), _seq((w * x).astype(_F), from_first=True)
    mn = np.where(mn > 0, _F(0), mn)
    flat = mx == mn

    def err(scale, lev, m):
        diff = (((_col(scale) * lev.astype(_F)).astype(_F) + _col(m)).astype(_F) - x).astype(_F)
        diff = np.abs(diff) if mad else (diff * diff).astype(_F)
        return _seq((w * diff).astype(_F))

    iscale = (fn / (mx - mn).astype(_F)).astype(_F)
    scale = (_F(1) / iscale).astype(_F)
    lev = _clip(nearest_int(_col(iscale) * (x - _col(mn)).astype(_F)), 0, nmax)
    best = err(scale, lev, mn)
    for step in range(nstep + 1):
        isc = (((_F(rmin) + (_F(rdelta) * _F(step)).astype(_F)).astype(_F) + fn).astype(_F)
               / (mx - mn).astype(_F)).astype(_F)
        laux = _clip(nearest_int((_col(isc) * (x - _col(mn)).astype(_F)).astype(_F)), 0, nmax)
        wl = (w * laux.astype(_F)).astype(_F)
        sum_l, sum_l2 = _seq(wl), _seq((wl * laux.astype(_F)).astype(_F))
        sum_xl = _seq((wl * x).astype(_F))
        d = ((sum_w * sum_l2).astype(_F) - (sum_l * sum_l).astype(_F)).astype(_F)
        this_scale = (((sum_w * sum_xl).astype(_F) - (sum_x * sum_l).astype(_F)).astype(_F) / d).astype(_F)
        this_min = (((sum_l2 * sum_x).astype(_F) - (sum_l * sum_xl).astype(_F)).astype(_F) / d).astype(_F)
        pos = this_min > 0
        this_min = np.where(pos, _F(0), this_min)
        this_scale = np.where(pos, (sum_xl / sum_l2).astype(_F), this_scale)
        cur = err(this_scale, laux, this_min)
        take = (d > 0) & (cur < best) & ~flat
        lev = np.where(_col(take), laux, lev)
        best, scale, mn = np.where(take, cur, best), np.where(take, this_scale, scale), np.where(take, this_min, mn)
    lev = np.where(_col(flat), 0, lev)
    return np.where(flat, _F(0), scale), (-mn).astype(_F), lev


def _qx(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """make_qx_quants(n, nmax, x, L, rmse_type=1, qw=NULL) over rows: (scale, L = l + nmax)."""
    amax, mx = _first_absmax(x)
    zero = amax < _EPS
    w = (x * x).astype(_F)
    wx = (w * x).astype(_F)

    def trial(iscale):
        lv = _clip(nearest_int((_col(iscale) * x).astype(_F)), -nmax, nmax - 1)
        lf = lv.astype(_F)
        return lv, _seq((wx * lf).astype(_F)), _seq(((w * lf).astype(_F) * lf).astype(_F))

    lv, sumlx, suml2 = trial((_F(-nmax) / mx).astype(_F))
    lev = lv + nmax
    scale = np.where(suml2 != 0, (sumlx / suml2).astype(_F), _F(0))
    best = (scale * sumlx).astype(_F)
    for step in range(-9, 10):
        if step == 0:
            continue
        lv, sumlx, suml2 = trial((-((_F(nmax) + (_F(0.1) * _F(step)).astype(_F)).astype(_F)) / mx).astype(_F))
        take = (suml2 > 0) & ((sumlx * sumlx).astype(_F) > (best * suml2).astype(_F))
        lev = np.where(_col(take), lv + nmax, lev)
        scale = np.where(take, (sumlx / suml2).astype(_F), scale)
        best = np.where(take, (scale * sumlx).astype(_F), best)
    return np.where(zero, _F(0), scale), np.where(_col(zero), 0, lev)


def _q3(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """make_q3_quants(n, nmax, x, L, do_rmse=true) over rows: (scale, L = l + nmax)."""
    amax, mx = _first_absmax(x)
    zero = amax < _EPS
    lev = _clip(nearest_int((_col((_F(-nmax) / mx).astype(_F)) * x).astype(_F)), -nmax, nmax - 1)
    w = (x * x).astype(_F)
    wx = (w * x).astype(_F)
    sumlx = _seq((wx * lev.astype(_F)).astype(_F))
    suml2 = _seq(((w * lev.astype(_F)).astype(_F) * lev.astype(_F)).astype(_F))
    for _ in range(5):  # a pass that changes nothing changes nothing again: C's early break is implied
        for i in range(x.shape[1]):
            xi, wi, wxi, li = x[:, i], w[:, i], wx[:, i], lev[:, i]
            lf = li.astype(_F)
            slx = (sumlx - (wxi * lf).astype(_F)).astype(_F)
            sl2 = (suml2 - ((wi * lf).astype(_F) * lf).astype(_F)).astype(_F)
            new = _clip(nearest_int(((xi * sl2).astype(_F) / slx).astype(_F)), -nmax, nmax - 1)
            nf = new.astype(_F)
            slx2 = (slx + (wxi * nf).astype(_F)).astype(_F)
            sl22 = (sl2 + ((wi * nf).astype(_F) * nf).astype(_F)).astype(_F)
            take = ((slx > 0) & (new != li) & (sl22 > 0)
                    & (((slx2 * slx2).astype(_F) * suml2).astype(_F) > ((sumlx * sumlx).astype(_F) * sl22).astype(_F)))
            lev[:, i] = np.where(take, new, li)
            sumlx, suml2 = np.where(take, slx2, sumlx), np.where(take, sl22, suml2)
    scale = np.where(suml2 > 0, (sumlx / suml2).astype(_F), _F(0))
    return np.where(zero, _F(0), scale), np.where(_col(zero), 0, lev + nmax)


def _fp16(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GGML_FP32_TO_FP16 (round to nearest even, overflow to inf): (the 2 bytes per row, the value in FP32)."""
    with np.errstate(over="ignore"):
        h = v.astype(np.float16)
    return h.view(np.uint8).reshape(-1, 2), h.astype(_F)


def _requant(x: np.ndarray, lev: np.ndarray, d: np.ndarray, dm: np.ndarray | None, lo: int, hi: int,
             off: int) -> tuple[np.ndarray, np.ndarray]:
    """The final pass: where ``d`` is not 0, ``nearest_int((x + dm) / d)`` (or ``x / d``) clamped, plus off."""
    with np.errstate(all="ignore"):
        num = x if dm is None else (x + _col(dm)).astype(_F)
        t = (num / _col(d)).astype(_F)
    redo = _col(d != 0)
    return np.where(redo, _clip(nearest_int(t), lo, hi) + off, lev), np.where(redo, t.astype(np.float64), np.nan)


def _two_bit_planes(q: np.ndarray) -> np.ndarray:
    """(n, 256) codes 0..3 -> (n, 64): byte ``(e // 128) * 32 + e % 32`` holds e at bit ``2 * ((e % 128) // 32)``."""
    q = q.reshape(-1, 2, 4, 32)
    return (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)).reshape(-1, 64).astype(np.uint8)


def _high_bits(q: np.ndarray, shift: int) -> np.ndarray:
    """(n, 256) -> (n, 32): bit ``e // 32`` of byte ``e % 32`` is bit ``shift`` of code e."""
    bits = ((q >> shift) & 1).reshape(-1, 8, 32) << np.arange(8)[None, :, None]
    return bits.sum(axis=1).astype(np.uint8)


def _q2_k(x: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    nb = x.shape[0]
    sub = x.reshape(-1, 16)
    sc, mins, lev = _qkx2(sub, np.abs(sub), 3, -0.5, 0.1, 15, True)
    sc, mins, lev = sc.reshape(nb, 16), mins.reshape(nb, 16), lev.reshape(nb, 16, 16)
    max_scale, max_min = _running_max(sc), _running_max(mins)
    with np.errstate(all="ignore"):
        ls = np.where(_col(max_scale > 0), nearest_int(_col((_F(15) / max_scale).astype(_F)) * sc) & 0xFF, 0)
        lm = np.where(_col(max_min > 0), nearest_int(_col((_F(15) / max_min).astype(_F)) * mins), 0)
        d16, d = _fp16(np.where(max_scale > 0, (max_scale / _F(15)).astype(_F), _F(0)))
        m16, dmin = _fp16(np.where(max_min > 0, (max_min / _F(15)).astype(_F), _F(0)))
    scales = (ls | ((lm << 4) & 0xFF)) & 0xFF
    ds = (_col(d) * (scales & 0xF).astype(_F)).astype(_F).reshape(-1)
    dms = (_col(dmin) * (scales >> 4).astype(_F)).astype(_F).reshape(-1)
    q, t = _requant(sub, lev.reshape(-1, 16), ds, dms, 0, 3, 0)
    q = q.reshape(nb, 256)
    return [scales.astype(np.uint8), _two_bit_planes(q), d16, m16], q, t.reshape(nb, 256)


def _signed_sub_scales(x: np.ndarray, quantiser: Any, nmax: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Q3_K / Q6_K's first step: the 16 sub-blocks of 16 of each super-block quantised by ``quantiser`` (levels up
    to ``nmax``): (super-blocks, their (nb, 16) sub-block scales, the levels, each super-block's max_scale)."""
    nb = x.shape[0]
    sc, lev = quantiser(x.reshape(-1, 16), nmax)
    sc = sc.reshape(nb, 16)
    return nb, sc, lev, _max_scale(sc)


def _q3_k(x: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    nb, sc, lev, max_scale = _signed_sub_scales(x, _q3, 4)
    on = max_scale != 0
    with np.errstate(all="ignore"):
        iscale = (_F(-32) / max_scale).astype(_F)
        l8 = ((nearest_int(_col(iscale) * sc) + 128) & 0xFF) - 128  # int8_t l = nearest_int(...)
        d16, d = _fp16(np.where(on, (_F(1) / iscale).astype(_F), _F(0)))
    lv = np.where(_col(on), _clip(l8, -32, 31) + 32, 0)
    j = np.arange(16)
    packed = np.zeros((nb, 12), np.int64)
    for k in range(16):
        packed[:, k % 8] |= (lv[:, k] & 0xF) << (4 * (k // 8))
        packed[:, 8 + k % 4] |= (lv[:, k] >> 4) << (2 * (k // 4))
    sc_read = lv[:, j] - 32
    ds = (_col(d) * sc_read.astype(_F)).astype(_F).reshape(-1)
    q, t = _requant(x.reshape(-1, 16), lev, ds, None, -4, 3, 4)
    q = q.reshape(nb, 256)
    return [_high_bits(q, 2), _two_bit_planes(q & 3), packed.astype(np.uint8), d16], q, t.reshape(nb, 256)


def _q45_k(x: np.ndarray, five: bool) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    nb = x.shape[0]
    sub = x.reshape(-1, 32)
    av = np.sqrt((_seq((sub * sub).astype(_F)) / _F(32)).astype(_F)).astype(_F)
    w = (_col(av) + np.abs(sub)).astype(_F)
    nmax = 31 if five else 15
    sc, mins, lev = _qkx2(sub, w, nmax, -0.5 if five else -1.0, 0.1, 15 if five else 20, False)
    sc, mins = sc.reshape(nb, 8), mins.reshape(nb, 8)
    max_scale, max_min = _running_max(sc), _running_max(mins)
    with np.errstate(all="ignore"):
        inv_s = np.where(max_scale > 0, (_F(63) / max_scale).astype(_F), _F(0))
        inv_m = np.where(max_min > 0, (_F(63) / max_min).astype(_F), _F(0))
        ls = np.minimum(63, nearest_int((_col(inv_s) * sc).astype(_F)) & 0xFF)
        lm = np.minimum(63, nearest_int((_col(inv_m) * mins).astype(_F)) & 0xFF)
        d16, d = _fp16((max_scale / _F(63)).astype(_F))
        m16, dmin = _fp16((max_min / _F(63)).astype(_F))
    packed = np.zeros((nb, 12), np.int64)
    packed[:, 0:4], packed[:, 4:8] = ls[:, :4], lm[:, :4]
    packed[:, 8:12] = (ls[:, 4:] & 0xF) | ((lm[:, 4:] & 0xF) << 4)
    packed[:, 0:4] |= (ls[:, 4:] >> 4) << 6
    packed[:, 4:8] |= (lm[:, 4:] >> 4) << 6
    s_read, m_read = scale_min_k4(packed.astype(np.uint8))
    ds = (_col(d) * s_read.astype(_F)).astype(_F).reshape(-1)
    dms = (_col(dmin) * m_read.astype(_F)).astype(_F).reshape(-1)
    q, t = _requant(sub, lev, ds, dms, 0, nmax, 0)
    q = q.reshape(nb, 256)
    low = (q & 0xF).reshape(nb, 4, 2, 32)
    qs = (low[:, :, 0] | (low[:, :, 1] << 4)).reshape(nb, 128).astype(np.uint8)
    parts = [d16, m16, packed.astype(np.uint8)] + ([_high_bits(q, 4)] if five else []) + [qs]
    return parts, q, t.reshape(nb, 256)


def _q6_k(x: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    nb, sc, lev, max_scale = _signed_sub_scales(x, _qx, 32)
    zero = np.abs(max_scale) < _EPS
    with np.errstate(all="ignore"):
        iscale = (_F(-128) / max_scale).astype(_F)
        d16, d = _fp16(np.where(zero, _F(0), (_F(1) / iscale).astype(_F)))
        s8 = ((np.minimum(127, nearest_int((_col(iscale) * sc).astype(_F))) + 128) & 0xFF) - 128
    s8 = np.where(_col(zero), 0, s8)
    ds = np.where(_col(zero), _F(0), (_col(d) * s8.astype(_F)).astype(_F)).reshape(-1)
    q, t = _requant(x.reshape(-1, 16), lev, ds, None, -32, 31, 32)
    q = np.where(_col(zero), 0, q.reshape(nb, 256))
    t = np.where(_col(zero), np.nan, t.reshape(nb, 256))
    c = q.reshape(nb, 2, 4, 32)
    ql = np.concatenate([(c[:, :, 0] & 0xF) | ((c[:, :, 2] & 0xF) << 4),
                         (c[:, :, 1] & 0xF) | ((c[:, :, 3] & 0xF) << 4)], axis=2).reshape(nb, 128)
    qh = ((c[:, :, 0] >> 4) | ((c[:, :, 1] >> 4) << 2) | ((c[:, :, 2] >> 4) << 4)
          | ((c[:, :, 3] >> 4) << 6)).reshape(nb, 64)
    return [ql.astype(np.uint8), qh.astype(np.uint8), s8.astype(np.int8).view(np.uint8), d16], q, t


def quantize_k(x: np.ndarray, name: str) -> KQuantReference:
    """(n_blocks, 256) finite FP32 values -> the K-quant reference of ``name`` (bytes, codes, final t)."""
    x = np.ascontiguousarray(x, dtype=_F)
    if name not in K_QUANTISERS:
        raise ValueError(f"{name} is not a K-quant ({', '.join(K_QUANTISERS)})")
    with np.errstate(all="ignore"):  # ggml's arithmetic overflows and divides by 0 where its results are unused
        if name in ("Q4_K", "Q5_K"):
            parts, q, t = _q45_k(x, name == "Q5_K")
        else:
            parts, q, t = {"Q2_K": _q2_k, "Q3_K": _q3_k, "Q6_K": _q6_k}[name](x)
    return KQuantReference(np.concatenate(parts, axis=1).astype(np.uint8), q.astype(np.int64), t)
