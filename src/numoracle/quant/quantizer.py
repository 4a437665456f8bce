"""Quantisation references: ``quantize`` / ``dequantize`` with every rounding step modelled exactly.

A kernel quantises in four steps, each rounding on its own; ``quantize`` reproduces each:

1. ``amax`` of each block (exact; ``rmin = min(x, 0)``, ``rmax = max(x, 0)`` when asymmetric);
2. the scale from ``scale_rule``, rounded **once** into ``scale_fmt``:

   * ``"absmax"``: ``s = scale_fmt(amax / M)``, ``M`` = 127 (INT8; ``2^(b-1) - 1`` for a signed
     b-bit integer, ``2^b - 1`` unsigned) or the element format's max finite (448 for E4M3).
     The promise that amax maps inside the range is kept after every rounding: where that scale
     would make ``+-amax`` clip (after step 3's compute rounding and step 4's element rounding) it
     moves up to the smallest value of ``scale_fmt`` at which neither clips, found by a binary
     search over ``scale_fmt``'s codes (``quant/scalefit.py``): with E8M0 the power of two above
     (RCEIL), with FP8 the next value toward +inf; FP32 scales stay ``fl32(amax / M)`` (as numpy /
     PyTorch / ONNX compute it) in the default modes for elements of up to 16 bits. Where even
     ``scale_fmt``'s largest value clips, ``scale_range='raise'`` raises ValueError. Symmetric only: the
     asymmetric scale below stays ONNX's, whose zero-point rounding may clip an end element by one code.
     Asymmetric integers (``symmetric=False``, ONNX DynamicQuantizeLinear): ``s =
     scale_fmt((rmax - rmin) / (qmax - qmin))``, ``zp = saturate(round_half_even(qmin - t_min))``
     with ``t_min = rmin / s`` rounded in ``compute``.
   * ``"pow2"``: ``s = 2^ceil(log2(amax / M))``, the smallest power of two with ``amax / s <= M``,
     so nothing overflows (shift-only hardware, DeepSeek-style activations).
   * ``"rceil"``: the same power of two with MX's defaults (blocks of 32, E8M0, ``scale_range=
     'clamp'``): NVIDIA's RCEIL rule for MXFP8 (``2^ceil(log2(amax / M))``); nothing clips.
   * ``"mx"`` (alias ``"floor"``; OCP MX v1.0): ``X = 2^(floor(log2 amax) - emax_elem)`` in E8M0, ``emax_elem`` the
     element format's emax (E4M3 8, E5M2 15, E3M2 4, E2M3 2, E2M1 2; ``floor(log2 qmax)`` for
     integers, e.g. MXINT8's implicit 2^-6 folded into the scale). The exponent is clamped to the
     scale format's range (E8M0: [-127, 127]) by default (``scale_range='clamp'``, as gfloat).
   * ``"nvfp4"``: NVIDIA TransformerEngine's reference recipe (``NVFP4QuantizerRef.
     _quantize_blockwise_reference``), every operation rounded in ``compute`` (FP32):
     ``S_enc = 448 * 6 / amax_tensor`` (``min(S_enc, FP32 max)``; amax 0 or inf gives 1, as TE's
     kernel), ``global_scale = S_dec = 1 / S_enc``; per block of 16 ``d = e4m3(clamp(fl(fl(amax_b / 6)
     * S_enc), 448))`` (may round to 0); the divisor is ``fl(d * S_dec)`` and TE multiplies by
     ``min(fl(1 / fl(d * S_dec)), FP32 max)``: pass ``reciprocal=True`` for TE's exact codes.
     (448 and 6 are ``scale_fmt``'s and ``fmt``'s max finite.)
   * ``scale=`` given (``scale_rule`` resolves to ``"given"``): the scales are used as they are
     (they must be values of ``scale_fmt``), with ``zero_point=`` (default 0), as ONNX QuantizeLinear.

3. ``t = x / s`` correctly rounded in ``compute`` (FP32 by default, mode ``compute_rounding``),
   or with ``reciprocal=True`` ``t = compute(x * compute(1 / s))``: two roundings, which differ
   from one at some ties (and everywhere when ``1 / s`` overflows ``compute``: a subnormal scale).
4. The element cast: integers ``q = saturate(round(t) + zp)`` (ONNX QuantizeLinear and TFLite:
   round first, then add the zero point), ``clip='narrow'`` = ``[-(2^(b-1) - 1), 2^(b-1) - 1]``
   (TFLite symmetric weights), ``'full'`` = the whole range (``overflow='wrap'`` wraps instead);
   floats ``numoracle.cast(t, fmt, rounding, overflow='saturate')`` (overridable with ``overflow``).

Special values and bad input (the policy, also in docs/quantization.md):

* ``nan="propagate"`` (default): a block holding a NaN or an infinity gets a NaN scale (E8M0
  0xFF, FP32 NaN ...; the OCP MX reading of a NaN block, microxcaling's scale-overflow rule),
  so every element of it dequantises to NaN; its element codes are those of ``t = NaN`` (NaN for
  FP8, ``nan_to`` for FP4/FP6, ``zp`` for integers). NVFP4: a NaN or inf anywhere makes the
  global scale NaN. ``"ignore"``: amax over the finite elements only; a NaN element gets the
  NaN code (integers: ``zp``, i.e. the value 0), +-inf saturates. ``"raise"``: ValueError.
  Given scales (``scale=``) are used as given: a NaN element's t is NaN, an infinite one saturates.
* All-zero block: ``absmax`` / ``pow2`` scale 1 (every code 0, or ``zp`` = ``qmin`` when
  asymmetric); ``mx`` the smallest power of two of ``scale_fmt`` (E8M0 2^-127, gfloat's choice);
  ``nvfp4`` ``d = 0`` (TE), and a zero divisor makes ``x / 0 = +-inf`` (saturating) and ``0 / 0 = 0``.
* A scale ``scale_fmt`` cannot hold (``amax / M`` above its max or rounding to 0; a power of two
  outside its range) raises ValueError under ``scale_range='raise'`` (the default but for MX);
  ``'clamp'`` clamps into ``[smallest positive, max finite]``.
* Zero-size arrays give empty codes (an empty block is scaled as an all-zero one). A group or
  block size that does not divide its axis, an unknown granularity / rule / policy,
  ``symmetric=False`` with a float element format, given scales that ``scale_fmt`` does not hold
  and zero points outside the format raise ValueError saying what to pass instead.
* ``x`` may be a numpy, ml_dtypes or torch array (read exactly through ``interop.to_codes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from ..core.engine.convert import cast, decode
from ..core.formats.format import FP32, FP64, INT64, AnyFormat, IntFormat, format_of
from ..core.formats.interop import as_native, native_dtype, to_codes
from ..core.formats.p3109 import refuse_p1_ties, refuse_to_odd_overflow
from ..core.formats.policy import Flags, Rounding
from .layout import Layout, QuantParams
from .params import GLOBAL_SCALE_CONVENTIONS, NAN_POLICIES, RULES, resolve_params
from .recipe import takes_recipe
from .scale import (
    Scales,
    compute_scales,
    div_round,
    div_values,
    mul_round,
)

__all__ = ["quantize", "dequantize", "Quantized", "QuantParams", "Layout", "RULES", "NAN_POLICIES",
           "GLOBAL_SCALE_CONVENTIONS"]



@dataclass(frozen=True, eq=False)
class Quantized:
    """The result of :func:`quantize`: codes, scales and every intermediate a test needs.

    ``scales`` / ``scale_codes`` / ``zero_points`` / ``amax`` / ``divisors`` have the block grid's
    shape (x's shape with each axis divided by its block length; it broadcasts after
    :meth:`Layout.expand`). ``divisors`` is what step 3 divides by (the scales, but for NVFP4
    ``fl(d * S_dec)``), ``reciprocals`` its rounded reciprocal when ``reciprocal=True``.
    """

    codes: np.ndarray
    fmt: AnyFormat
    scales: np.ndarray
    scale_codes: np.ndarray
    zero_points: np.ndarray | None
    global_scale: float | None
    params: QuantParams
    shape: tuple[int, ...]
    amax: np.ndarray
    divisors: np.ndarray
    reciprocals: np.ndarray | None
    _t: np.ndarray = field(repr=False)
    _random_bits: np.ndarray | None = field(default=None, repr=False)

    @property
    def scaled(self) -> np.ndarray:
        """Exact float64 values of ``t`` (x / s as rounded in ``compute``), x's shape."""
        return self._t.astype(np.float64).reshape(self.shape)

    @property
    def layout(self) -> Layout:
        return self.params.layout(self.shape)

    def values(self) -> np.ndarray:
        """Decoded element values (float64; integers as integers, before the zero point)."""
        return _element_values(self.codes, self.fmt)

    def scale_per_element(self) -> np.ndarray:
        """The dequantisation scale of each element (scale * global_scale; NVFP4 in the encode convention
        ``fl(scale / G)``, the divisor, as compressed-tensors multiplies by it), x's shape."""
        if self.params.global_scale_convention == "encode":
            return self.layout.expand(self.divisors)
        s = self.layout.expand(self.scales)
        return s * self.global_scale if self.global_scale is not None else s

    def dequantize(self, out: Any = None) -> np.ndarray:
        return dequantize(self, out)

    @cached_property
    def clipped(self) -> np.ndarray:
        """Where the final cast saturated: the rounded t (+ zp) lies beyond the element range."""
        p, t = self.params, self._t.ravel()
        if self.fmt.is_integer:
            r = _round_int(t, p.rounding, self._random_bits, p.sr_bits).astype(np.float64)
            if self.zero_points is not None:
                r = r + self._zp_elements()
            out = (r < p.qmin) | (r > p.qmax)
        else:
            _, fl = cast(t, self.fmt, rounding=p.rounding, overflow="saturate", flags=True,
                         random_bits=None if self._random_bits is None else self._random_bits.ravel(),
                         sr_bits=p.sr_bits)
            out = ((fl & Flags.OVERFLOW) != 0) | np.isinf(t)
        return out.reshape(self.shape)

    @cached_property
    def ties(self) -> np.ndarray:
        """Where t lies exactly halfway between two adjacent element values (unbounded exponent)."""
        t = np.abs(self._t.ravel().astype(np.float64))
        fin = np.isfinite(t)
        t = np.where(fin, t, 0.0)
        if self.fmt.is_integer:
            frac = t - np.floor(t)
        else:
            _, e = np.frexp(t)
            quantum_exp = np.maximum(e - 1, self.fmt.emin) - self.fmt.man_bits
            u = np.ldexp(t, -quantum_exp)  # t in quanta: exact (a power-of-two scaling in range)
            frac = u - np.floor(u)
        return ((frac == 0.5) & fin).reshape(self.shape)

    def _zp_elements(self) -> np.ndarray:
        return self.layout.expand(self.zero_points).ravel().astype(np.float64)

    def __repr__(self) -> str:
        p = self.params
        g = p.granularity if isinstance(p.granularity, str) else f"{p.granularity[0]} {p.granularity[1]}"
        extra = f", axis={p.axis}" if p.axis is not None else ""
        zp = ", asymmetric" if self.zero_points is not None else ""
        glob = f", global={self.global_scale!r}" if self.global_scale is not None else ""
        return (f"Quantized({self.fmt.name}, shape={self.shape}, {g}{extra}, {p.scale_rule} {p.scale_fmt.name} "
                f"scales {self.scales.shape}{zp}{glob}, {p.rounding}, clip={p.clip})")


# ---- input ---------------------------------------------------------------------------------
def _fits_fp32(f: AnyFormat) -> bool:
    if f.is_integer:
        return f.bits - int(f.signed) <= 24
    return f.precision <= 24 and f.emax <= 127 and f.emin - f.man_bits >= -149


def _input_values(x: Any) -> tuple[np.ndarray, bool]:
    """x as a C-contiguous float32 array (exact) when every value is an FP32 value, else float64."""
    codes, src = to_codes(x)
    if src.is_integer:
        v = decode(codes, src)
        if not _fits_fp32(src) and v.size and int(np.abs(v).max()) > 1 << 53:
            raise ValueError(f"integer inputs beyond 2^53 are not exact in float64 ({src.name}); "
                             "convert them to a float format first")
        dt = np.float32 if _fits_fp32(src) else np.float64
        return np.ascontiguousarray(v.astype(dt)), dt is np.float32
    if src == FP32:
        return np.ascontiguousarray(codes.view(np.float32)), True
    if src == FP64:
        a = np.ascontiguousarray(codes.view(np.float64))
        with np.errstate(over="ignore"):
            exact = bool(np.array_equal(a.astype(np.float32).astype(np.float64), a, equal_nan=True))
        return a, exact
    if native_dtype(src) is not None:
        a = as_native(codes, src)
        return np.ascontiguousarray(a.astype(np.float32 if _fits_fp32(src) else np.float64)), _fits_fp32(src)
    v = decode(codes, src)
    return np.ascontiguousarray(v), False


# ---- the element loop ------------------------------------------------------------------------
def _round_int(t: np.ndarray, rounding: Rounding, rb: np.ndarray | None, sr_bits: int | None) -> np.ndarray:
    """round(t) to integers (as int64; NaN -> 0, +-inf -> +-2^62), exactly, in the given mode."""
    if rounding is Rounding.NEAREST_EVEN:
        v = np.rint(t.astype(np.float64))
        v = np.where(np.isnan(v), 0.0, np.clip(v, -2.0 ** 62, 2.0 ** 62))
        return v.astype(np.int64)
    kw = {"random_bits": rb.ravel(), "sr_bits": sr_bits} if rounding is Rounding.STOCHASTIC else {}
    codes = cast(np.asarray(t), INT64, rounding=rounding, overflow="saturate", nan_to="zero", **kw)
    return np.clip(codes.view(np.int64), -(2 ** 62), 2 ** 62)


def _inner_bounds(lo: int, hi: int, dt: np.dtype) -> tuple[np.floating, np.floating]:
    """The smallest value of the float dtype ``dt`` at or above ``lo`` and the largest at or below ``hi``.

    ``dt(hi)`` rounds to nearest and may land above ``hi`` (float32(2^31 - 1) = 2^31); it then steps one
    value down. For an integral float v: ``v > hi_f`` exactly when ``v > hi`` (no value of ``dt`` lies in
    ``(hi_f, hi]``), so comparing with these bounds is comparing with the exact integers.
    """
    dt = np.dtype(dt)
    lo_f, hi_f = dt.type(lo), dt.type(hi)
    if int(hi_f) > hi:
        hi_f = np.nextafter(hi_f, dt.type(-np.inf))
    if int(lo_f) < lo:
        lo_f = np.nextafter(lo_f, dt.type(np.inf))
    return lo_f, hi_f


def _saturate_integral(v: np.ndarray, lo: int, hi: int, fmt: IntFormat) -> np.ndarray:
    """Codes of ``fmt`` (two's complement) for the integral floats ``v`` saturated to ``[lo, hi]``; NaN -> 0.

    Exact for every integer format up to INT64 / UINT64 and any float dtype of ``v``: the comparison is
    with the bounds' exact float neighbours (:func:`_inner_bounds`), and the saturated elements get the
    codes of ``lo`` / ``hi`` computed from the Python integers, never from a float rounding of them.
    """
    v = np.asarray(v)
    mask = (1 << fmt.bits) - 1
    lo_f, hi_f = _inner_bounds(lo, hi, v.dtype)
    over, under = v > hi_f, v < lo_f
    inside = np.where(over | under | np.isnan(v), 0, v)  # |inside| <= max(|lo_f|, hi_f): fits the integer dtype
    iv = inside.astype(np.int64).view(np.uint64) if lo < 0 else inside.astype(np.uint64)
    iv = np.where(over, np.uint64(hi & mask), np.where(under, np.uint64(lo & mask), iv))
    return (iv & np.uint64(mask)).astype(fmt.code_dtype)


def _int_codes(t: np.ndarray, zp: np.ndarray | None, fmt: IntFormat, p: QuantParams,
               rb: np.ndarray | None) -> np.ndarray:
    """Step 4 for integers: saturate(round(t) + zp) (or wrap), as two's complement codes.

    Saturation is decided against the exact integer bounds: ``np.clip`` in float32 would round
    INT32's 2^31 - 1 up to 2^31, which the code mask then wraps to -2^31.
    """
    mask = (1 << fmt.bits) - 1
    if p.rounding is Rounding.NEAREST_EVEN and p.overflow == "saturate" and zp is None:
        return _saturate_integral(np.rint(t), int(p.qmin), int(p.qmax), fmt)  # rint is exact in t's own dtype
    v = _round_int(t, p.rounding, rb, p.sr_bits)  # int64, within +-2^62: the int64 clamp below is exact
    if zp is not None:
        v = v + zp.astype(np.int64)
    if p.overflow == "wrap":
        return (v & mask).astype(fmt.code_dtype)
    return (np.clip(v, int(p.qmin), int(p.qmax)) & mask).astype(fmt.code_dtype)


def _elements(xv: np.ndarray, fmt: AnyFormat, p: QuantParams, lay: Layout, sc: Scales, recip: np.ndarray | None,
              fast: bool, rb: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Steps 3-4 chunk by chunk: t in compute (numpy's FP64 quotient rounded to FP32 when ``fast``: exact for
    FP32 operands, Figueroa; else the exact div_round / mul_round), then the element cast. Returns (codes, t)."""
    n = xv.size
    xf = xv.reshape(-1)
    codes = np.empty(n, np.dtype(fmt.code_dtype))
    tdt = np.float32 if p.compute == FP32 else np.float64
    t_all = np.empty(n, tdt)
    zero_div = bool(np.any(sc.divisors == 0)) and not p.reciprocal
    grid = recip if p.reciprocal else sc.divisors
    zp_chunks = lay.chunks(sc.zp) if sc.zp is not None else None
    buf = np.empty(min(n, 4 * 65536), np.float64)
    for lo, hi, g in lay.chunks(grid):
        xc = xf[lo:hi]
        if fast:
            b = buf[: hi - lo]
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                (np.multiply if p.reciprocal else np.divide)(xc, g, out=b)
                t = b.astype(np.float32)  # one RNE rounding of the correctly rounded FP64 quotient: innocuous
        else:
            tc = (mul_round if p.reciprocal else div_round)(xc.astype(np.float64), g, p.compute, p.compute_rounding)
            t = tc.view(tdt) if p.compute in (FP32, FP64) else decode(tc, p.compute)
        if zero_div:
            z = (g == 0) & (xc == 0)
            if z.any():
                t = np.where(z, np.copysign(0.0, xc), t).astype(tdt)
        t_all[lo:hi] = t
        zc = next(zp_chunks)[2] if zp_chunks is not None else None
        rbc = rb.reshape(-1)[lo:hi] if rb is not None else None
        if fmt.is_integer:
            codes[lo:hi] = _int_codes(t, zc, fmt, p, rbc)
        else:
            codes[lo:hi] = cast(t, fmt, rounding=p.rounding, overflow=p.overflow, random_bits=rbc, sr_bits=p.sr_bits)
    return codes.reshape(xv.shape), t_all


# ---- the API --------------------------------------------------------------------------------
@takes_recipe("fmt")
def quantize(x: Any, fmt: Any, *, granularity: Any = None, axis: Any = -1, symmetric: bool = True,
             scale_fmt: Any = None, scale_rule: str = "absmax", rounding: Any = "rne", clip: str | None = None,
             reciprocal: bool = False, compute: Any = "fp32", overflow: Any = None, nan: str = "propagate",
             global_scale: float | None = None, scale: Any = None, zero_point: Any = None,
             scale_rounding: Any = "rne", compute_rounding: Any = "rne", scale_range: str | None = None,
             global_amax: float | None = None, random_bits: Any = None, sr_bits: int | None = None,
             global_scale_convention: str = "decode") -> Quantized:
    """Quantise ``x`` into ``fmt`` modelling each rounding step of a kernel exactly (see the module doc).

    ``granularity``: ``"tensor"`` (default; ``("block", 32)`` for ``scale_rule="mx"``, ``("block", 16)``
    for ``"nvfp4"``), ``"channel"`` (one scale per index of ``axis``), ``("group", g)`` /
    ``("block", n)`` (blocks of ``g`` consecutive elements along ``axis``; ``g`` must divide it), or
    ``("block", (r, c))`` (r x c tiles of the axes ``(axis - 1, axis)``, or of ``axis=(a0, a1)``).
    ``scale_fmt``: FP32 by default (E8M0 for MX, E4M3 for NVFP4). ``clip``: ``"narrow"`` for signed
    symmetric integers, else ``"full"``. ``overflow``: ``"saturate"`` by default (also for FP8).
    ``rounding`` (and ``random_bits``/``sr_bits`` for ``"sr"``) is the final cast's mode;
    ``compute_rounding`` the division's; ``scale_rounding`` the scale's. ``nan``: see the module doc.
    ``scale=`` / ``zero_point=`` give the scales (grid-shaped, or 1-D along ``axis`` per channel).
    ``global_scale`` / ``global_amax``: the NVFP4 per-tensor scale, or the amax it comes from;
    ``global_scale_convention``: how that scale is stored, ``"decode"`` (``amax / (448 * 6)``, TransformerEngine;
    the default) or ``"encode"`` (its reciprocal ``448 * 6 / amax``, compressed-tensors' ``global_scale``).
    """
    fmt = format_of(fmt)
    refuse_p1_ties(fmt, rounding, "quantize")  # the engine breaks P = 1 ties unlike P3109 (core/formats/p3109.py)
    refuse_to_odd_overflow(fmt, rounding, overflow, "quantize")  # and keeps +-max in rto without saturation
    xv, exact32 = _input_values(x)
    if global_scale is not None and scale_rule != "nvfp4":
        raise ValueError("global_scale is the NVFP4 per-tensor scale; it needs scale_rule='nvfp4'")
    if global_amax is not None and scale_rule != "nvfp4":
        raise ValueError("global_amax feeds the NVFP4 per-tensor scale; it needs scale_rule='nvfp4'")
    p = resolve_params(xv.shape, fmt, granularity=granularity, axis=axis, symmetric=symmetric, scale_fmt=scale_fmt,
                 scale_rule=scale_rule, rounding=rounding, clip=clip, reciprocal=reciprocal, compute=compute,
                 overflow=overflow, nan=nan, scale_rounding=scale_rounding, compute_rounding=compute_rounding,
                 scale_range=scale_range, sr_bits=sr_bits, given=scale is not None,
                 global_scale_convention=global_scale_convention)
    if zero_point is not None and scale is None:
        raise ValueError("zero_point= goes with scale=; without scales, symmetric=False computes the zero points")
    rb = None
    if p.rounding is Rounding.STOCHASTIC:
        rb = np.asarray(random_bits)
        if rb.shape != xv.shape:
            raise ValueError(f"random_bits has shape {rb.shape}; give one per element of x {xv.shape}")
    elif random_bits is not None:
        raise ValueError("random_bits are only used with rounding='sr'")
    if p.nan == "raise" and xv.size and not np.all(np.isfinite(xv)):
        i = int(np.flatnonzero(~np.isfinite(xv).ravel())[0])
        raise ValueError(f"x holds {np.count_nonzero(~np.isfinite(xv))} NaN/inf values (first at flat index {i}: "
                         f"{xv.ravel()[i]!r}) and nan='raise'; pass nan='propagate' or nan='ignore'")
    lay = p.layout(xv.shape)
    sc = compute_scales(xv, fmt, p, lay, scale, zero_point, global_scale, global_amax)
    if sc.glob is not None:
        p = replace(p, global_scale=sc.glob)
    recip = None
    if p.reciprocal:  # NVFP4 clamps the reciprocal of a zero divisor to FP32 max, as TE does
        recip = div_values(1.0, sc.divisors, p.compute, p.compute_rounding)
        if p.scale_rule == "nvfp4":
            recip = np.minimum(recip, float(p.compute.max_finite))
    grid = recip if p.reciprocal else sc.divisors
    with np.errstate(over="ignore", invalid="ignore"):
        grid_exact32 = bool(np.array_equal(grid.astype(np.float32).astype(np.float64), grid, equal_nan=True))
    fast = p.compute == FP32 and p.compute_rounding is Rounding.NEAREST_EVEN and exact32 and grid_exact32
    codes, t = _elements(xv, fmt, p, lay, sc, recip, fast, rb)
    return Quantized(codes, fmt, sc.values, sc.codes, sc.zp, sc.glob, p, tuple(xv.shape), sc.amax, sc.divisors,
                     recip, t, rb)


def _element_values(codes: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    if fmt.bits <= 16:
        table = decode(np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype), fmt).astype(np.float64)
        return table[codes]
    return decode(codes, fmt).astype(np.float64)


def dequantize(q: Quantized, out: Any = None) -> np.ndarray:
    """Exact float64 values ``(q - zp) * s [* global_scale]``; with ``out=FORMAT``, their codes rounded once.

    The product is exact in float64 whenever the element, zero-point and scale bits fit 53
    (every INT/FP8/FP4 element with an FP32 or narrower scale); otherwise the float64 result is
    the correctly rounded product (and ``out=`` rounds the exact product once).
    """
    if not isinstance(q, Quantized):
        raise TypeError(f"q must be a Quantized (from quantize), got {type(q).__name__}")
    v = q.values()
    if q.zero_points is not None:
        v = v - q.layout.expand(q.zero_points)
    s = q.scale_per_element() if q.params.global_scale_convention == "encode" else q.layout.expand(q.scales)
    elem_bits = q.fmt.bits + 1 if q.fmt.is_integer else q.fmt.precision
    glob_bits = q.params.compute.precision if q.global_scale is not None else 0
    exact = elem_bits + q.params.scale_fmt.precision + glob_bits <= 53  # NVFP4 checks this when it quantizes
    dst = FP64 if out is None else format_of(out)
    with np.errstate(invalid="ignore"):
        if exact:
            y = v * s
            if q.global_scale is not None and q.params.global_scale_convention == "decode":
                y = y * q.global_scale
            return y if out is None else cast(y, dst)
    if q.global_scale is not None:  # quantize refuses such NVFP4 precisions; never round v * s * g twice
        raise ValueError("dequantize: element, scale and global-scale precisions exceed 53 bits; the exact "
                         "product needs Fractions: use numoracle.core.scalar on q.values(), q.scales and "
                         "q.global_scale")
    y = mul_round(v, s, dst)
    return y.view(np.float64) if out is None else y

