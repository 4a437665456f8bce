"""Casts that are one step per element (compiled, numba): the hardware's conversions and FP32 -> BF16's integer RNE.

Part of core/kernels/cast.py's kernel (its ``run`` asks ``one_step_kind`` first; core/kernels/castodd.py ends its
FP64 route
through FP32 words here): RNE under the IEEE policy, without daz, ftz or flags, where the cast is
- the CPU's conversion: FP32 -> FP16 (HW: F16C's vcvtps2ph), FP64 -> FP32 (HW: cvtpd2ps), FP64 -> FP16 where the
  CPU has AVX512-FP16 (HW_HALF: vcvtpd2ph; elsewhere LLVM makes it a library call per element);
- one integer rounding (BF16_RNE): FP32 -> BF16, the top half of the word rounded at bit 16 (``one_step``).
Every NaN then gives the destination's canonical NaN (the engine's code, Cast.nanc). tests/core/test_jitcast.py
(every FP32 code whose low half is a rounding case) and tests/core/test_jitcast_odd.py hold them to the engine.
"""

from __future__ import annotations

from functools import cache

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .. import jit
from ..formats.format import BF16, FP16, FP32, FP64, Format
from ..formats.policy import Overflow, Rounding
from . import rounding as jr

__all__ = ["HW", "HW_HALF", "BF16_RNE", "one_step", "one_step_kind", "one_step_loop"]

HW, HW_HALF, BF16_RNE = 1, 2, 3   # one_step's casts: the hardware's conversions, FP32 -> BF16's integer RNE


@intrinsic
def _fptrunc(typingctx, b):
    """The IEEE conversion's bits (RNE, gradual underflow, inf past the range): FP32 bits -> FP16 bits, FP64 bits
    -> FP32 bits, widened to the source's word (one vector instruction: F16C's vcvtps2ph, cvtpd2ps)."""
    if b in (types.uint32, types.uint64):
        def codegen(c, bld, sig, args):
            if b == types.uint32:
                h = bld.fptrunc(bld.bitcast(args[0], ir.FloatType()), ir.HalfType())
                return bld.zext(bld.bitcast(h, ir.IntType(16)), ir.IntType(32))
            f = bld.fptrunc(bld.bitcast(args[0], ir.DoubleType()), ir.FloatType())
            return bld.zext(bld.bitcast(f, ir.IntType(32)), ir.IntType(64))
        return b(b), codegen
    return None


@intrinsic
def _fptrunc_half(typingctx, b):
    """FP64 bits -> the FP16 bits of IEEE's conversion (one rounding: RNE, gradual underflow, inf past the range),
    widened to a uint64 word (AVX512-FP16's vcvtpd2ph where ``jr.cpu_has("avx512fp16")``)."""
    if b == types.uint64:
        def codegen(c, bld, sig, args):
            h = bld.fptrunc(bld.bitcast(args[0], ir.DoubleType()), ir.HalfType())
            return bld.zext(bld.bitcast(h, ir.IntType(16)), ir.IntType(64))
        return b(b), codegen
    return None


@jit.njit(inline="always")
def one_step(u, P, how):
    """The code of the source word u where the cast is one step (``one_step_kind``): HW, the hardware's conversion
    (FP32 -> FP16, FP64 -> FP32); HW_HALF, FP64 -> FP16 in one instruction; BF16_RNE, FP32 -> BF16 by one integer
    rounding: u + 0x7FFF + (bit 16 of u), shifted down by 16, is RNE at bit 16 (ties to the even code, a carry
    running into the exponent field, up to the infinity's code past the range; subnormals alike, on the same grid
    as FP32's). Every NaN then gives the canonical one (P.nanc), the engine's code without flags."""
    if how == HW:
        c = _fptrunc(u)
    elif how == HW_HALF:
        c = _fptrunc_half(u)
    else:
        c = jr.shr(jr.add(jr.add(u, jr.k(u, 0x7FFF)), jr.and_(jr.shr(u, jr.k(u, 16)), jr.k(u, 1))), jr.k(u, 16))
    return jr.zero_or(jr.above(jr.and_(u, P.magmask), P.inf), c, P.nanc)


@cache
def one_step_loop(how: int):
    """The loop of ``one_step`` of kind ``how`` (``one_step_kind``), in 512-bit vectors: ``loop(source words, out,
    P)`` with P jitcast's Cast constants of the pair."""
    @jit.njit
    def loop(src, out, P):
        jr.wide_vectors()
        for i in range(src.size):
            out[i] = one_step(src[i], P, how)
    return loop


def one_step_kind(src: Format, dst: Format, pol) -> int:
    """HW where the hardware's conversion is the cast (RNE with infinities past the range: FP32 -> FP16, FP64 ->
    FP32), HW_HALF for FP64 -> FP16 where the CPU has that instruction (elsewhere LLVM makes it a library call per
    element), BF16_RNE for FP32 -> BF16 under the same policy (one integer rounding: ``one_step``), else 0. Without
    daz, ftz or flags (the caller asks)."""
    if pol.rounding is not Rounding.NEAREST_EVEN or pol.overflow is not Overflow.IEEE:
        return 0
    if (src, dst) in ((FP32, FP16), (FP64, FP32)):
        return HW
    if (src, dst) == (FP64, FP16) and jr.cpu_has("avx512fp16"):
        return HW_HALF
    return BF16_RNE if (src, dst) == (FP32, BF16) else 0
