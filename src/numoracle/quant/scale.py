"""The exact arithmetic, block layouts and scale rules behind :func:`numoracle.quantize`.

Exact arithmetic. :func:`div_round` and :func:`mul_round` return the codes of ``a / b`` and
``a * b`` correctly rounded **once** into any format, in any non-stochastic mode, for float64
operands (every value of every format up to FP64). Neither rounds twice:

* ``a / b``: the mantissas ``ma, mb`` (from ``frexp``, in [0.5, 1)) give ``q = fl64(ma / mb)``
  (IEEE division is correctly rounded); the residual ``ma - q * mb`` is exact by Dekker's
  TwoProduct (Veltkamp split; no underflow on mantissas) and Sterbenz, so its sign says on
  which side of ``q`` the quotient lies. A quotient of two 53-bit numbers is never a 54-bit
  midpoint, so the quotient lies strictly inside ``(q - ulp/2, q)`` or ``(q, q + ulp/2)`` (and
  inside ``(q - ulp/4, q)`` when ``q`` is a power of two). The 56-bit word ``8 M + sign`` (``M``
  the 53-bit significand of ``q``) lies in the same open interval, which holds no rounding
  point of any format of precision <= 53: rounding the word is rounding the quotient.
* ``a * b``: TwoProduct gives ``p + e`` exactly; the word is ``p``'s significand with 8 more
  bits of ``e`` and a sticky bit, again an exact stand-in for every precision <= 53.

The word, its exponent and the sign go straight into the rounding engine's ``round_pack`` as an
exact triple (no float64 range limit: subnormal and overflowing results round correctly).

Scale rules. :func:`compute_scales`, steps 1-2 of ``quantize`` (amax per block, then the scale by rule,
rounded once); ``numoracle.quantize``'s docstring states the rules. The parameters and block layouts they
read are in :mod:`numoracle.quant.layout`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.eft import two_sum
from ..core.engine.convert import cast, decode, encode
from ..core.formats.format import AnyFormat, Format
from ..core.formats.policy import Flags
from ..core.scalar import round_value
from .arith import div_round, div_values, mul_round, mul_values
from .layout import Layout, QuantParams
from .scalefit import fit_absmax_scales

__all__ = ["div_round", "mul_round", "div_values", "mul_values", "Scales",
           "compute_scales", "pow2_range", "power_of_two_scales", "absmax_scales"]


def pow2_range(fmt: Format) -> tuple[int, int]:
    """(lo, hi): 2^e is a value of ``fmt`` exactly for lo <= e <= hi."""
    m = fmt.min_subnormal
    lo = -(m.denominator.bit_length() - 1) if m < 1 else m.numerator.bit_length() - 1
    return lo, fmt.emax


def _range_fail(what: str, bad: np.ndarray, amax: np.ndarray, scale_fmt: Format, detail: str) -> ValueError:
    i = int(np.flatnonzero(bad.ravel())[0])
    idx = np.unravel_index(i, bad.shape) if bad.ndim else ()
    return ValueError(
        f"the scale of block {tuple(int(v) for v in idx)} (amax {float(amax.ravel()[i])!r}) {what} {scale_fmt.name} "
        f"({detail}); pass scale_range='clamp' to clamp it into {scale_fmt.name}'s range, or choose a wider "
        "scale_fmt")


def power_of_two_scales(e: np.ndarray, amax: np.ndarray, scale_fmt: Format, scale_range: str) -> np.ndarray:
    """2^e as float64, with e outside scale_fmt's powers of two clamped or refused."""
    lo, hi = pow2_range(scale_fmt)
    finite = np.isfinite(amax) & (amax > 0)
    if scale_range == "raise":
        if np.any(finite & (e > hi)):
            raise _range_fail("overflows", finite & (e > hi), amax, scale_fmt, f"2^{int(e[finite].max())} > 2^{hi}")
        if np.any(finite & (e < lo)):
            raise _range_fail("underflows", finite & (e < lo), amax, scale_fmt,
                              f"2^{int(e[finite].min())} < 2^{lo}")
    return np.ldexp(1.0, np.clip(e, lo, hi).astype(np.int64))


def absmax_scales(amax: np.ndarray, M: float, scale_fmt: Format, rounding: str, scale_range: str,
                  exact: dict[int, Fraction] | None = None) -> np.ndarray:
    """Codes of scale_fmt(amax / M) rounded once; out-of-range scales clamped or refused (amax > 0 finite).

    ``exact``: flat index -> the exact quotient, for blocks whose ``amax`` float64 cannot hold (an
    asymmetric span rmax - rmin that needs more than 53 bits or overflows float64). A scale underflows
    when the exact quotient lies below scale_fmt's smallest positive value (whatever it rounds to: 0, or
    that value itself in a format without zero such as E8M0) and overflows when its rounding with an
    unbounded exponent exceeds the largest finite value.
    """
    tiny = float(scale_fmt.min_subnormal)
    with np.errstate(all="ignore"):
        codes, fl = div_round(amax, M, scale_fmt, rounding, overflow="saturate", flags=True)
        under = np.asarray(amax < M * tiny)  # exact: M is an integer below 2^53 and tiny a power of two
    codes, over = np.array(codes), (np.asarray(fl) & Flags.OVERFLOW) != 0
    for i, q in (exact or {}).items():
        c, f = round_value(q, scale_fmt, rounding=rounding, overflow="saturate", flags=True)
        codes.flat[i], over.flat[i], under.flat[i] = c, bool(f & Flags.OVERFLOW), q < scale_fmt.min_subnormal
    if scale_range == "raise":
        if over.any():
            raise _range_fail("overflows", over, amax, scale_fmt, f"amax / {M:g} > {float(scale_fmt.max_finite):g}")
        if under.any():
            raise _range_fail("underflows", under, amax, scale_fmt, f"amax / {M:g} is below the smallest positive "
                              f"value {tiny:g}")
    elif under.any():
        codes[under] = cast(np.float64(tiny), scale_fmt)
    return codes


@dataclass
class Scales:
    """The grid-shaped results of the scale step (``divisors``: what step 3 divides by)."""

    codes: np.ndarray
    values: np.ndarray
    zp: np.ndarray | None
    glob: float | None
    divisors: np.ndarray
    amax: np.ndarray


def _with_nan(codes: np.ndarray, bad: np.ndarray, sfmt: Format) -> np.ndarray:
    """Scale codes with the blocks in ``bad`` (a NaN or inf under nan='propagate') set to scale_fmt's NaN."""
    if not bad.any():
        return np.asarray(codes)
    if not sfmt.has_nan:
        raise ValueError(f"a block holds NaN or inf and nan='propagate' gives it a NaN scale, which {sfmt.name} "
                         "cannot hold; pass nan='ignore' or nan='raise'")
    return np.where(bad, cast(np.float64(np.nan), sfmt), codes)


def _broadcast_given(a: Any, p: QuantParams, grid: tuple[int, ...], name: str) -> np.ndarray:
    g = np.asarray(a)
    if g.ndim == 1 and p.granularity == "channel" and g.size == grid[p.axis] and len(grid) > 1:
        g = g.reshape(tuple(grid[p.axis] if k == p.axis else 1 for k in range(len(grid))))
    try:
        return np.array(np.broadcast_to(g, grid))
    except ValueError:
        raise ValueError(f"{name} of shape {g.shape} does not broadcast to the block grid {grid} "
                         f"(granularity {p.granularity!r}, axis {p.axis})") from None


def compute_scales(xv: np.ndarray, fmt: AnyFormat, p: QuantParams, lay: Layout, scale: Any, zero_point: Any,
                   global_scale: float | None, global_amax: float | None) -> Scales:
    """Steps 1-2 of quantize: amax per block and the scales by ``p.scale_rule`` (see numoracle.quantize)."""
    fin = np.isfinite(xv) if p.nan == "ignore" else None
    ax = np.abs(xv) if fin is None else np.where(fin, np.abs(xv), 0)
    amax = lay.reduce(ax, np.max, initial=0).astype(np.float64)
    bad = ~np.isfinite(amax)
    pos = (amax > 0) & ~bad
    sfmt, zp, glob = p.scale_fmt, None, None
    M = float(2 ** (fmt.bits - 1) - 1 if fmt.is_integer and fmt.signed else
              2 ** fmt.bits - 1 if fmt.is_integer else fmt.max_finite)
    if p.scale_rule == "given":
        s = _broadcast_given(scale, p, lay.grid, "scale").astype(np.float64)
        if not np.all(s > 0) or not np.all(np.isfinite(s)):
            raise ValueError("given scales must be positive and finite")
        try:
            codes = encode(s, sfmt)
        except ValueError as e:
            raise ValueError(f"a given scale is not a value of scale_fmt={sfmt.name} ({e}); round the scales to "
                             f"{sfmt.name} first, or pass a scale_fmt that holds them (e.g. 'fp64')") from None
        if zero_point is not None:
            z = _broadcast_given(zero_point, p, lay.grid, "zero_point")
            integral = z.dtype.kind in "iu" or (z.dtype.kind == "f" and np.all(z == np.round(z)))
            if not fmt.is_integer or not integral:
                raise ValueError("zero points are integers, for integer element formats")
            if np.any(z < fmt.min_value) or np.any(z > fmt.max_value):
                raise ValueError(f"zero points must lie in {fmt.name}'s range [{fmt.min_value}, {fmt.max_value}]")
            if p.symmetric and np.any(z != 0):
                raise ValueError("a nonzero zero_point needs symmetric=False")
            zp = z.astype(np.int64)
        elif not p.symmetric:
            zp = np.zeros(lay.grid, np.int64)
    elif p.scale_rule == "absmax" and p.symmetric:
        codes = absmax_scales(np.where(pos, amax, M), M, sfmt, p.scale_rounding, p.scale_range)
        codes = fit_absmax_scales(codes, amax, pos, fmt, p)  # no element with |x| <= amax clips
        codes = _with_nan(np.where(pos, codes, encode(np.float64(1.0), sfmt)), bad, sfmt)
    elif p.scale_rule == "absmax":
        codes, zp = _asymmetric(xv, fin, fmt, p, lay, amax, bad)
    elif p.scale_rule in ("pow2", "rceil", "mx"):
        m, e = np.frexp(np.where(pos, amax, 1.0))
        if p.scale_rule != "mx":  # the power of two at or above amax / M
            mM, eM = np.frexp(M)
            ex = e.astype(np.int64) - eM + (m > mM)
        else:
            emax_elem = (int(fmt.max_value).bit_length() - 1) if fmt.is_integer else fmt.emax
            ex = e.astype(np.int64) - 1 - emax_elem
        v = power_of_two_scales(ex, np.where(pos, amax, 0.0), sfmt, p.scale_range)
        zero_value = 1.0 if p.scale_rule == "pow2" else float(np.ldexp(1.0, pow2_range(sfmt)[0]))  # mx, rceil
        codes = _with_nan(encode(np.where(pos, v, zero_value), sfmt), bad, sfmt)
    else:
        return _nvfp4(fmt, p, amax, bad, global_scale, global_amax)
    values = decode(codes, sfmt)
    return Scales(np.asarray(codes), values, zp, glob, values, amax)


def _asymmetric(xv: np.ndarray, fin: np.ndarray | None, fmt: AnyFormat, p: QuantParams, lay: Layout,
                amax: np.ndarray, bad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ONNX DynamicQuantizeLinear generalised: s = (rmax - rmin) / (qmax - qmin), zp = sat(rne(qmin - rmin/s))."""
    xs = xv if fin is None else np.where(fin, xv, 0)
    rmin = lay.reduce(xs, np.min, initial=0).astype(np.float64)
    rmax = lay.reduce(xs, np.max, initial=0).astype(np.float64)
    ok = ~bad
    with np.errstate(over="ignore", invalid="ignore"):
        span, err = two_sum(np.where(ok, rmax, 0.0), np.where(ok, -rmin, 0.0))  # err != 0: span is inexact
        err = np.where(np.isfinite(span), err, 0.0)
    pos = ok & (span > 0)
    den = float(p.qmax - p.qmin)
    # a span float64 cannot hold (more than 53 bits, or beyond its range): its exact quotient, block by block
    exact = {int(i): (Fraction(float(rmax.flat[i])) - Fraction(float(rmin.flat[i]))) / int(den)
             for i in np.flatnonzero((pos & ((err != 0) | ~np.isfinite(span))).ravel())}
    codes = np.asarray(absmax_scales(np.where(pos, np.where(np.isfinite(span), span, den), den), den, p.scale_fmt,
                                     p.scale_rounding, p.scale_range, exact))
    codes = np.where(pos, codes, encode(np.float64(1.0), p.scale_fmt))
    s = decode(codes, p.scale_fmt)
    t_min = div_values(rmin, s, p.compute, p.compute_rounding)
    # zp = rne(qmin - t_min) of the exact difference: float64 can round it onto a half-integer (a wide
    # `compute`); then the TwoSum error says which side of the tie the exact value lies
    d, e = two_sum(np.float64(p.qmin), -t_min)
    tie = (d - np.floor(d) == 0.5) & (e != 0)
    zp = np.clip(np.where(tie, np.where(e > 0, np.ceil(d), np.floor(d)), np.rint(d)), p.qmin, p.qmax)
    zp = np.where(ok, zp, np.clip(0, p.qmin, p.qmax)).astype(np.int64)
    return _with_nan(codes, bad, p.scale_fmt), zp


GLOBAL_SCALE_CONVENTIONS_TEXT = {False: "the decode scale amax / (448 * 6)", True: "the encode scale 448 * 6 / amax"}


def _nvfp4(fmt: Format, p: QuantParams, amax: np.ndarray, bad: np.ndarray, global_scale: float | None,
           global_amax: float | None) -> Scales:
    """TransformerEngine's NVFP4 reference recipe, each operation rounded in ``compute``."""
    c, sfmt = p.compute, p.scale_fmt
    cmax = float(c.max_finite)
    if sfmt.precision + c.precision + fmt.precision > 53:
        raise ValueError("NVFP4-style scaling needs element, scale and compute precisions summing to <= 53 so "
                         "dequantize is exact")
    enc = p.global_scale_convention == "encode"
    if global_amax is not None:
        ga = float(global_amax)
    elif p.nan == "propagate" and bad.any():
        ga = float("nan")
    else:
        ga = float(amax.max(initial=0.0))
    num = float(mul_values(float(sfmt.max_finite), float(fmt.max_finite), c))
    s_enc = min(float(div_values(num, ga, c)), cmax) if ga == ga else ga
    if ga == 0 or np.isinf(ga) or s_enc == 0:
        s_enc = 1.0
    s_dec = float(div_values(1.0, s_enc, c))
    if global_scale is not None:
        g = float(global_scale)
        conv = f"global_scale_convention={p.global_scale_convention!r} ({GLOBAL_SCALE_CONVENTIONS_TEXT[enc]})"
        if not (np.isfinite(g) and g > 0) or decode(cast(np.float64(g), c), c) != g:
            raise ValueError(f"global_scale must be a positive finite value of compute={c.name}, got {global_scale!r} "
                             f"under {conv}")
        if global_amax is not None and g != (s_enc if enc else s_dec):
            other = "decode" if enc else "encode"
            hint = (f"; it is the {other} scale of that amax: pass global_scale_convention={other!r}"
                    if g == (s_dec if enc else s_enc) else "")
            raise ValueError(f"global_scale={g!r} is not the scale global_amax={ga!r} gives under {conv}, which is "
                             f"{s_enc if enc else s_dec!r}{hint}")
        s_enc, s_dec = (g, float(div_values(1.0, g, c))) if enc else (float(div_values(1.0, g, c)), g)
    d_pre = mul_values(div_values(np.where(bad, 0.0, amax), float(fmt.max_finite), c), s_enc, c)
    d_pre = np.minimum(np.minimum(d_pre, cmax), float(sfmt.max_finite))
    d_pre = np.where(bad, np.nan, d_pre)
    codes = np.asarray(cast(d_pre, sfmt, rounding=p.scale_rounding, overflow="saturate"))
    d = decode(codes, sfmt)
    if s_dec != s_dec:
        divisors = np.full(d.shape, np.nan)
    else:  # compressed-tensors divides by fl(d / G); TransformerEngine by fl(d * S_dec)
        divisors = div_values(d, s_enc, c) if enc else mul_values(d, s_dec, c)
    return Scales(codes, d, None, s_enc if enc else s_dec, divisors, amax)
