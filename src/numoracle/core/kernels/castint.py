"""cast compiled (numba) to integers: IEEE float sources (FP64, FP32, BF16, FP16) to INT2..INT64, UINT2..UINT64.

Part of core/kernels/cast.py's kernel (its ``covers`` and ``run`` call here). Every element takes the same
branch-free steps on words of w bits (the engine's integer steps, softfloat._round_pack_int, docs/semantics.md):
uint32 for sources and destinations of at most 32 bits (twice the vector lanes), else uint64.

1. a = the source magnitude's bits (daz: a source subnormal reads as a zero), e its exponent field, e' =
   max(e, 1); the significand sig = mantissa | 2^sman where e >= 1; |x| = sig * 2^(e' - bias - sman);
2. the integer: where e' - bias - sman >= 0 it is sig shifted up (exact; the low w bits, which is what
   ``wrap`` keeps of a larger one: 0 once the shift reaches w), else sig rounded at sh = bias + sman - e'
   (jitround.round_shift, the shift >= 1, capped at sman + 2 except for stochastic rounding);
3. out of range: |x| >= 2^w, or the integer above max (positive) or above -min (negative);
4. the code: the integer's two's complement in the format's bits; ``saturate`` clamps out-of-range values to
   min / max, ``wrap`` keeps the low bits;
5. the source's infinities (``saturate``: min / max; ``wrap``: the nan_to value) and NaNs (the nan_to value);
6. flags: INEXACT where a discarded bit is set and the value is in range, INVALID out of range and for
   infinities and NaNs.

FP32 and FP64 sources under ``saturate`` without flags or daz take the floats' own steps instead (``float_kernel``):
the value rounded to an integer by the mode (one vector instruction: roundeven, round, trunc, ceil, floor), clamped
to [min, max] (exact floats: at most 24 / 53 bits; for INT32 from FP32 and INT64 from FP64, whose max is not a
float, to the largest float below it, and a value above that is max), converted, and the nan_to value for NaNs: the
same integers, infinities at min / max. To odd and stochastic rounding round the magnitude, capped at 2^bits, as an
integer word (``_magnitude_round``: the truncating conversion and its inexact bit; floor(|x| * 2^R) + r shifted down
by R), then clamp it to max or -min and sign it; stochastic rounding with bits + R past the word adds the carry of
the fraction's top R bits to the truncated float. FP16 and BF16 sources take them too, their codes widened to FP32
in the loop (exact: the hardware's widening, and BF16's 16 bits shifted up). Stochastic rounding's random bits are
read in their own dtype, and checked in the loop where asked (core/jitcast.random_words).
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import jit
from ..formats.format import BF16, FP16, FP32, FP64
from ..formats.policy import Flags, NanTo, Overflow, Rounding
from . import rounding as jr

__all__ = ["IntCast", "int_word", "int_params", "int_kernel", "int_covers", "float_ok", "float_mag", "float_kernel"]

_INVALID = int(Flags.INVALID)


class IntCast(NamedTuple):
    """The constants of one (source, integer destination, policy) as words: the source's sman, top (its sign's
    shift), magmask, inf (its infinity's magnitude), submax (largest subnormal magnitude: daz), bs (bias + sman);
    the destination's maxv, negmax (-min), mask (its bits), sat (all ones under saturate), minc (min's code),
    nanc (the nan_to value's code), daz (all ones); big (|x| >= 2^w where the shift up exceeds it: w - 1 -
    sman); round_shift's shcap, r, wmax (w - 1)."""

    sman: int
    top: int
    magmask: int
    inf: int
    submax: int
    bs: int
    maxv: int
    negmax: int
    mask: int
    sat: int
    minc: int
    nanc: int
    daz: int
    big: int
    shcap: int
    r: int
    wmax: int


def int_word(src, dst) -> type:
    """The words of (src, dst): uint32 where both have at most 32 bits, else uint64."""
    return np.uint32 if src.bits <= 32 and dst.bits <= 32 else np.uint64


@lru_cache(maxsize=1024)
def int_params(src, dst, pol) -> IntCast:
    """The IntCast constants of (src, dst, pol) (kept: a cast's call reads them)."""
    word = int_word(src, dst)
    w = 8 * np.dtype(word).itemsize
    ones = (1 << w) - 1
    mask = (1 << dst.bits) - 1
    nan_val = {NanTo.ZERO: 0, NanTo.MAX: dst.max_value, NanTo.MIN: dst.min_value}[pol.nan_to]
    vals = (src.man_bits, src.bits - 1, src.mag_mask, src.max_mag_code + 1, (1 << src.man_bits) - 1,
            src.bias + src.man_bits, dst.max_value, -dst.min_value, mask,
            ones if pol.overflow is Overflow.SATURATE else 0, dst.min_value & mask, nan_val & mask,
            ones if pol.daz else 0, w - 1 - src.man_bits, src.man_bits + 2, pol.sr_bits or 0, w - 1)
    return IntCast(*(word(v) for v in vals))


@jit.njit(inline="always")
def _one(u, r, mode, P, want):
    """The code and flags (words) of the source code u (module docstring, steps 1-6)."""
    zero, one = jr.k(u, 0), jr.k(u, 1)
    # 1. the magnitude, its exponent and significand
    a, neg, e = jr.source_parts(u, P, True)
    e1 = jr.umax(e, one)
    sig = jr.or_(jr.and_(a, P.submax), jr.zero_or(e, zero, jr.shl(one, P.sman)))
    # 2. the integer: shifted up (exact, low 64 bits) or rounded at sh
    up = jr.xor(jr.above(P.bs, e1), one)                        # e' - bias - sman >= 0: no fraction
    left = jr.sub(e1, P.bs)
    shifted = jr.zero_or(jr.above(left, P.wmax), jr.shl(sig, jr.umin(left, P.wmax)), zero)
    full = jr.sub(P.bs, e1)
    sh = jr.umin(full, P.shcap)
    rounded = jr.round_shift(sig, sh, neg, mode, P, r, full)
    t = jr.zero_or(up, rounded, shifted)
    # 3. out of range: |x| >= 2^w (e' - bias >= w), or past max / -min
    big = jr.and_(jr.above(left, P.big), up)
    over = jr.or_(big, jr.above(t, jr.zero_or(neg, P.maxv, P.negmax)))
    # 4. the code: two's complement, clamped under saturate
    code = jr.and_(jr.zero_or(neg, t, jr.sub(zero, t)), P.mask)
    clamp = jr.zero_or(neg, P.maxv, P.minc)
    code = jr.zero_or(jr.and_(over, jr.and_(P.sat, one)), code, clamp)
    # 5. infinities and NaNs
    isnan = jr.above(a, P.inf)
    isinf = jr.xor(jr.above(a, jr.sub(P.inf, one)), isnan)
    code = jr.zero_or(isinf, code, jr.zero_or(jr.and_(P.sat, one), P.nanc, clamp))
    code = jr.zero_or(isnan, code, P.nanc)
    if not want:
        return code, zero
    # 6. flags
    frac = jr.and_(sig, jr.sub(jr.shl(one, sh), one))
    inexact = jr.and_(jr.and_(jr.above(frac, zero), jr.xor(up, one)), jr.xor(over, one))
    bad = jr.or_(over, jr.or_(isinf, isnan))
    return code, jr.zero_or(bad, inexact, jr.k(u, _INVALID))


@jit.njit(inline="always")
def _loop(src, rnd, out, fl, P, mode, want, check, cs):
    bad = jr.k(P.sman, 0)
    for i in range(src.size):
        u = jr.widen(P.sman, src[i])
        r = jr.k(u, 0)
        if mode == jr.SR:
            r = jr.widen(u, rnd[i])               # the random bits in their own (unsigned) dtype
            if check:
                bad = jr.or_(bad, jr.shr(r, cs))
        c, f = _one(u, r, mode, P, want)
        out[i] = c
        if want:
            fl[i] = f
    return bad


@cache
def int_kernel(mode: int, want: bool, check: bool = False):
    """The loop of one (mode, flags asked, random bits checked), compiled when first used (as jitcast._kernel; it
    returns the OR of the random bits shifted down by cs)."""
    @jit.njit
    def kernel(src, rnd, out, fl, P, cs):
        jr.wide_vectors()
        return _loop(src, rnd, out, fl, P, mode, want, check, cs)
    return kernel


def int_covers(src, dst, pol) -> bool:
    """Every mode (stochastic rounding with sr_bits below the word's width), both overflow policies; nan_to='raise'
    raises: the engine's."""
    w = 8 * np.dtype(int_word(src, dst)).itemsize
    return pol.nan_to is not NanTo.RAISE and (pol.rounding is not Rounding.STOCHASTIC or pol.sr_bits < w)


# ======================================================================================================
# FP32 / FP64 under saturate: the floats' own rounding (module docstring)
# ======================================================================================================

def _unary(name: str):
    """The LLVM intrinsic ``name`` on a float32 / float64 (vectorised by LLVM like any instruction)."""
    def typer(typingctx, x):
        if x in (types.float32, types.float64):
            def codegen(c, bld, sig, args):
                lt = args[0].type
                suffix = "f32" if x == types.float32 else "f64"
                fn = cgutils.get_or_insert_function(bld.module, ir.FunctionType(lt, [lt]), f"{name}.{suffix}")
                return bld.call(fn, [args[0]])
            return x(x), codegen
        return None
    typer.__name__ = name.replace(".", "_")
    return intrinsic(typer)


_roundeven, _round, _trunc, _ceil, _floor = (_unary("llvm." + n) for n in ("roundeven", "round", "trunc", "ceil",
                                                                            "floor"))


@intrinsic
def _to_word(typingctx, proto, t):
    """The float t, an integer value in the word's signed range, as a two's complement word of proto's type."""
    if isinstance(proto, types.Integer) and t in (types.float32, types.float64):
        return proto(proto, t), lambda c, bld, sig, args: bld.fptosi(args[1], args[0].type)
    return None


@intrinsic
def _ufloat(typingctx, proto, x):
    """The unsigned word x as a float of proto's type (exact for the small integers used here)."""
    if proto in (types.float32, types.float64) and isinstance(x, types.Integer):
        return proto(proto, x), lambda c, bld, sig, args: bld.uitofp(args[1], args[0].type)
    return None


class FloatInt(NamedTuple):
    """float_kernel's constants: min and the largest float at most max, as floats of the source's type (max itself
    but for INT32 from FP32 and INT64 from FP64, whose max is no such float), cap (2^bits of the destination:
    every magnitude from there up saturates), scale (2^R, stochastic rounding's R random bits); as words of the
    source's width: the destination's bit mask, the nan_to value's code, R, max and -min; and zero, a word 0 that
    the compiler cannot see is 0: FP16 values are widened with it ORed in (_float_loop), so that LLVM does not narrow
    the rounding of a widened FP16 value to a rounding in FP16 (llvm.roundeven.f16, valid), which CPUs without
    AVX512-FP16 run one element at a time (measured on an AMD Zen 5: FP16 -> INT8 0.44 ns an element, 0.1 with it)."""

    lo: float
    hi: float
    cap: float
    scale: float
    mask: int
    nanc: int
    r: int
    maxv: int
    negmax: int
    zero: int


_WIDENED = {FP16: 1, BF16: 2}      # float_kernel's 16-bit sources (their codes widened to FP32 in the loop)


def float_ok(src, dst, pol, want: bool) -> bool:
    """Does (src, dst, pol) take float_kernel? FP32, FP16 or BF16 to integers of at most 24 bits, FP64 to at most
    53 (min and max are floats of the source's type), and to signed integers as wide as the word (INT32; INT64
    from FP64) where the value itself is rounded (not float_mag): saturate, no flags, no daz; every mode."""
    p, w = (53, 64) if src == FP64 else (24, 32)
    wide = dst.bits == w and dst.signed and not float_mag(src, dst, pol)
    return (src in (FP32, FP64) or src in _WIDENED) and (dst.bits <= p or wide) \
        and not want and not pol.daz and pol.overflow is Overflow.SATURATE


def float_mag(src, dst, pol) -> bool:
    """Does float_kernel round (src, dst, pol) on the magnitude as an integer word (_magnitude_round)? To odd, and
    stochastic rounding where floor(|x| * 2^R) of a magnitude below 2^bits fits the signed word (bits + R below
    the word's width)."""
    w = 64 if src == FP64 else 32
    return pol.rounding is Rounding.TO_ODD or (pol.rounding is Rounding.STOCHASTIC and dst.bits + pol.sr_bits < w)


@lru_cache(maxsize=1024)
def float_params(src, dst, pol) -> FloatInt:
    """The FloatInt constants of (src, dst, pol) (kept: a cast's call reads them)."""
    ftype, word = (np.float64, np.uint64) if src == FP64 else (np.float32, np.uint32)
    nan_val = {NanTo.ZERO: 0, NanTo.MAX: dst.max_value, NanTo.MIN: dst.min_value}[pol.nan_to]
    mask = (1 << dst.bits) - 1
    r = pol.sr_bits or 0
    hi = ftype(dst.max_value)  # max rounded to nearest: 2^(bits - 1) for INT32 (FP32) and INT64 (FP64)
    hi = np.nextafter(hi, ftype(0)) if int(hi) > dst.max_value else hi  # the largest float at most max
    return FloatInt(ftype(dst.min_value), hi, ftype(2.0 ** dst.bits), ftype(2.0 ** r), word(mask),
                    word(nan_val & mask), word(r), word(dst.max_value), word(-dst.min_value), word(0))


@jit.njit(inline="always")
def _float_round(v, w, r, P, mode):
    """The float v rounded to an integer by mode (a float; NaN and infinities as they come, clamped after).
    Stochastic rounding (where _magnitude_round does not apply): the magnitude truncated plus the carry of
    floor(f * 2^R) + r at bit R (f its fraction; module docstring of jitcast; infinities and NaN: f = 0)."""
    if mode == jr.RNE:
        return _roundeven(v)
    if mode == jr.RNA:
        return _round(v)
    if mode == jr.RTZ:
        return _trunc(v)
    if mode == jr.UP:
        return _ceil(v)
    if mode == jr.DOWN:
        return _floor(v)
    a = abs(v)
    ta = _trunc(a)
    f = a - ta
    f = f if f < _ufloat(v, jr.k(w, 1)) else _ufloat(v, jr.k(w, 0))    # (infinities, NaN: 0)
    fs = _to_word(w, _floor(f * P.scale))                       # floor(f * 2^R) < 2^R, exact
    carry = jr.shr(jr.add(fs, r), P.r)                          # 0 or 1
    return np.copysign(ta + _ufloat(v, carry), v)


@jit.njit(inline="always")
def _magnitude_round(v, w, r, P, mode):
    """|v| rounded to an integer word by to odd or stochastic rounding (float_mag), |v| first capped at 2^bits
    (the result saturates either way; a NaN reads as the cap): to odd truncates (the conversion) and sets bit 0
    where that dropped a fraction; stochastic rounding adds r to floor(|v| * 2^R) (exact: a power-of-two
    scaling, then the conversion) and drops R bits, the carry of floor(f * 2^R) + r into the integer part."""
    a = abs(v)
    a = a if a < P.cap else P.cap
    if mode == jr.ODD:
        i = _to_word(w, a)
        return jr.or_(i, jr.k(w, 1) if _ufloat(v, i) != a else jr.k(w, 0))
    return jr.shr(jr.add(_to_word(w, a * P.scale), r), P.r)


@jit.njit(inline="always")
def _float_loop(src, rnd, out, P, mode, half, check, cs, mag):
    bad = jr.k(P.mask, 0)
    for i in range(src.size):
        w = src[i] if half == 0 else jr.widen(P.mask, src[i])      # (a 16-bit code in a uint32 word)
        if half == 1:
            v = jr.as_value(jr.or_(jr.half_bits(w), P.zero))  # FP16: the hardware's exact widening (a NaN stays
            #                                                   a NaN); P.zero: FloatInt's docstring
        elif half == 2:
            v = jr.as_value(jr.shl(w, jr.k(w, 16)))   # BF16: FP32's top half
        else:
            v = jr.as_value(w)
        r = jr.k(w, 0)
        if mode == jr.SR:
            r = jr.widen(w, rnd[i])               # the random bits in their own (unsigned) dtype
            if check:
                bad = jr.or_(bad, jr.shr(r, cs))
        if mag:                                   # the magnitude clamped to max or -min, then signed
            neg = jr.sign(jr.as_bits(v))
            t = jr.umin(_magnitude_round(v, w, r, P, mode), jr.zero_or(neg, P.maxv, P.negmax))
            code = jr.zero_or(neg, t, jr.sub(jr.k(t, 0), t))
        else:
            t = _float_round(v, w, r, P, mode)
            over = t > P.hi                       # above the largest float at most max: max (the same code where
            t = t if t > P.lo else P.lo           # max is a float); a NaN gives lo: it converts to nothing defined,
            t = t if t < P.hi else P.hi           # its code is chosen below
            code = P.maxv if over else _to_word(w, t)
        out[i] = jr.zero_or(jr.k(code, 1) if v != v else jr.k(code, 0), jr.and_(code, P.mask), P.nanc)
    return bad


@cache
def float_kernel(mode: int, src=FP32, check: bool = False, mag: bool = False):
    """The loop of one mode for FP32 / FP64 words or FP16 / BF16 codes (``src``), random bits checked or not, on
    the magnitude (float_mag) or not; compiled when first used (as int_kernel: it returns the OR of the random
    bits shifted down by cs)."""
    half = _WIDENED.get(src, 0)

    @jit.njit
    def kernel(words, rnd, out, P, cs):
        jr.wide_vectors()
        return _float_loop(words, rnd, out, P, mode, half, check, cs, mag)
    return kernel
