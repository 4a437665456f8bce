"""Compiled block FMA steps in 32-bit words: a truncating block with an FP32 output rounded toward zero.

jitblock's steps 2 and 4-5 (the scale; c's join, the rounding) run on float64 and int64 lanes, 8 to a 512-bit
vector, and for blocks of 4-8 terms they cost more than the terms. Where the route below holds, the same bits
come from 32-bit words, 16 to a vector: ``scales`` (step 2) and ``join`` (steps 4-5), which jitblockrun's
``words_kernel`` runs around its term passes, c held as float32. The route (jitblockrun.run decides it): step 1
by keys (finite inputs: jitblock.keys_of, keys in the terms' type, float32 or float64), int32 block sums, no
sticky bit (truncating blocks), an FP32 output in RTZ under IEEE overflow, every c an FP32 value, F <= 25 and
(n + 1) 2^(F + 2) <= 2^31. Per output, from the key maximum's bits kb and c's bits cb:

2. ``scales``: the shift s = F + spc - E of jitblock.block_scales, from exponent fields. The largest key
   product's field is f = 2 raw + carry + bias (keys_of; the keys' products are normal), so raw =
   floor((f + 1) / 2) - half, half = (bias + 1) / 2, carry = (f + 1) mod 2 and Ep = raw + carry; Ec = c's
   field - 127 clamped at -126 (a subnormal c's field 0 reads -126, as the float64 route's clamp of its
   exponent). block_scales: E = max(Ep, Ec) (the one present where only one is; -1 where neither is) and, with
   K&M's carry bit, spc = [carry and (c = 0 or raw >= Ec)]. With the carry bit, s = F - max(raw, Ec): carry 0
   gives E = max(raw, Ec) and spc 0; carry 1 and raw >= Ec gives E = raw + 1 and spc 1; carry 1 and raw < Ec
   gives E = Ec (raw + 1 <= Ec) and spc 0. Without it, s = F - max(Ep, Ec). So s = F - x with x = the larger
   of raw (+ carry without the carry bit) and Ec, either absent ("none", below both) where there is no product
   or c = 0, and x = -1 where neither is. With float32 terms (and keys) x <= 127 (raw <= 63, Ec <= 127), so
   s >= F - 127 >= -126 and scw = 2^min(s, 127), block_scales' clamp, is a normal float32; with float64 terms
   (FP32 inputs: the TF32 presets) the keys are float64 (half = 512 in place of 64), scw = 2^s in float64, and x
   may exceed 127. (tests/models/test_jitblock32.py holds scales to block_scales on every kind of key and c.)
4. ``join``: trunc(c 2^s) by a float32 multiplication and a conversion. |c| 2^s < 2^(F + 2) <= 2^27 (|c| <
   2^(Ec + 1) <= 2^(E + 1)); 2^s is a normal float32 (the outputs decided here have -126 <= s <= 126), so c 2^s is
   exact wherever it is at least 2^-126 (c's at most 24 bits, scaled by a power of two, stay a normal float32),
   and below 2^-126 it is below 1: whatever it rounds to (a subnormal, 0) truncates to 0, as the exact product
   does. The conversion to int32 truncates toward zero (fptosi): sign(c) trunc(|c| 2^s). T = S + that: |T| <
   (n + 1) 2^(F + 2) <= 2^31, exact in int32, and T 2^-s is the float64 route's v, exactly.
5. v rounded toward zero to 24 bits: |T| converted to float32 rounds to nearest even (exact below 2^24), giving
   RTZ(|T|) or the float32 above it; converted back (fptoui: at most 2^31, in range) and compared with |T| it says
   which, and the bit pattern less one is then the float32 below it (a positive float's predecessor, also below
   a power of two). T's sign bit goes in, and the product with 2^-s (s <= 126: a normal float32) is exact where
   it is a normal float32. T = 0 gives +0, as the float64 route's zero sum (+0 in every mode).

Overflow needs no step of its own (the route takes FP32's IEEE overflow policy, the one simulate's arithmetic
has): a truncated result below 2^128 has 24 bits and an exponent <= 127, so it is at most max_finite, as RTZ gives;
one of 2^128 or more overflows the float32 multiplication to +-inf, as K&M's rule gives. ``join`` counts the
outputs it does not decide: an infinite c (its sum with the block's terms is the IEEE sum, step 6); s > 126 (E
near c's smallest exponents, all products 0 or tiny: 2^-s is then no normal float32; with s <= 126 and |T| >= 1
a nonzero result is at least 2^-126, normal); and, with float64 terms, s < -126 (products of 2^127 and more:
2^s, c's scale, is then no normal float32). A tile step with any is redone on the float64 route
(jitblockrun._words_fallback), whose int32 sums and scw are the same.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ...core import jit
from ...core.kernels import rounding as jr

__all__ = ["scales", "join"]


@intrinsic
def _raw_and_carry(typingctx, x):
    """(f + 1, half) as uint32 words for a float32 / float64 x >= 0 of exponent field f: raw = floor((f + 1) / 2)
    - half and the carry (f + 1) mod 2 of a key product (keys_of), half = (bias + 1) / 2."""
    if x in (types.float32, types.float64):
        width, man, half = (32, 23, 64) if x == types.float32 else (64, 52, 512)

        def codegen(c, bld, sig, args):
            i32 = ir.IntType(32)
            f = bld.lshr(bld.bitcast(args[0], ir.IntType(width)), ir.Constant(ir.IntType(width), man))
            f = bld.trunc(f, i32) if width == 64 else f
            return c.make_tuple(bld, sig.return_type, [bld.add(f, ir.Constant(i32, 1)), ir.Constant(i32, half)])
        return types.UniTuple(types.uint32, 2)(x), codegen
    return None


@intrinsic
def _scale_like(typingctx, proto, s):
    """2^s (s a uint32 word holding an int32) as a float of proto's type: float32 clamped at 2^127 (block_scales'
    clamp; s >= -126 here), float64 exact (|s| < 1000 here)."""
    if proto in (types.float32, types.float64) and s == types.uint32:
        def codegen(c, bld, sig, args):
            if proto == types.float32:
                i32 = ir.IntType(32)
                e = bld.select(bld.icmp_signed("<", args[1], ir.Constant(i32, 127)), args[1], ir.Constant(i32, 127))
                return bld.bitcast(bld.shl(bld.add(e, ir.Constant(i32, 127)), ir.Constant(i32, 23)), ir.FloatType())
            i64 = ir.IntType(64)
            e = bld.add(bld.sext(args[1], i64), ir.Constant(i64, 1023))
            return bld.bitcast(bld.shl(e, ir.Constant(i64, 52)), ir.DoubleType())
        return proto(proto, s), codegen
    return None


_NONE = 0xFFFE7960   # -100000 as a uint32 word: below every exponent a key maximum or c has (scales)


@jit.njit
def scales(kmax, cur, sh, scw, frac, carry):
    """Step 2 in 32-bit words (module docstring): sh = s (uint32 words holding int32), scw = 2^s in the terms'
    type (float32: clamped at 2^127), from the key maxima kmax (the terms' type, >= 0) and c (float32). frac: F,
    carry: 1 with K&M's carry bit, else 0 (uint32 words)."""
    jr.wide_vectors()
    keep_odd = jr.xor(carry, jr.k(carry, 1))       # without the carry bit Ep = raw + its carry; with it, raw
    none = jr.k(frac, _NONE)
    for j in range(kmax.size):
        f1, half = _raw_and_carry(kmax[j])                                # (the key maximum's field + 1)
        cb = jr.as_bits(cur[j])
        ep = jr.add(jr.sub(jr.shr(f1, jr.k(f1, 1)), half), jr.and_(f1, keep_odd))
        ep = jr.zero_or(jr.above(f1, jr.k(f1, 1)), none, ep)              # no product: none
        cf = jr.and_(jr.shr(cb, jr.k(cb, 23)), jr.k(cb, 0xFF))
        ec = jr.smax(jr.sub(cf, jr.k(cf, 127)), jr.k(cf, 0xFFFFFF82))   # field - 127, at least -126
        ec = jr.zero_or(jr.magnitude(cb), none, ec)                      # c = 0: none
        x = jr.smax(ep, ec)
        x = jr.zero_or(jr.xor(x, none), jr.k(x, 0xFFFFFFFF), x)          # neither: -1
        s = jr.sub(frac, x)
        sh[j] = s
        scw[j] = _scale_like(kmax[j], s)                                 # (kmax: the terms' type)


@intrinsic
def _truncate(typingctx, x, signed):
    """The float32 x truncated to an integer (toward zero) as a uint32 word: fptosi (signed, |x| < 2^31) or fptoui
    (0 <= x < 2^32), one conversion instruction. Out of that range LLVM leaves the word undefined (a lane whose
    result ``join`` marks undecided and the float64 route writes again)."""
    if x == types.float32 and isinstance(signed, types.BooleanLiteral):
        def codegen(c, bld, sig, args):
            return (bld.fptosi if signed.literal_value else bld.fptoui)(args[0], ir.IntType(32))
        return types.uint32(x, signed), codegen
    return None


@jit.njit(inline="always")
def _pow2(e):
    """2^e as a float32, for a uint32 word e holding an int32 in [-126, 127] (a normal float32: its exponent field
    e + 127, fraction 0)."""
    return jr.as_value(jr.shl(jr.add(e, jr.k(e, 127)), jr.k(e, 23)))


@jit.njit
def join(S, cur, sh, nxt):
    """Steps 4-5 in 32-bit words (module docstring): nxt = the outputs (float32) from the int32 block sums S and
    the shifts sh (both as uint32 words) and c; returns how many it leaves undecided."""
    jr.wide_vectors()
    bad = np.uint32(0)
    for j in range(S.size):
        c = cur[j]
        cb = jr.as_bits(c)
        s = sh[j]
        T = jr.add(S[j], _truncate(c * _pow2(s), True))                     # S + trunc(c 2^s): |T| < 2^31
        sg = jr.ashr(T, jr.k(T, 31))
        a = jr.sub(jr.xor(T, sg), sg)                                       # |T|
        f = jr.signed_value(a)                                              # |T| to 24 bits, to nearest even ...
        up = jr.above(_truncate(f, False), a)                               # ... 1 where that rounded up
        keep = jr.sub(jr.as_bits(f), up)                                    # ... so RTZ: the float below it
        signed = jr.as_value(jr.or_(keep, jr.and_(T, jr.k(T, 0x80000000))))  # T's sign over RTZ(|T|)
        v = signed * _pow2(jr.sub(jr.k(s, 0), jr.smin(s, jr.k(s, 126))))    # times 2^-s
        inf_c = jr.above(jr.magnitude(cb), jr.k(cb, 0x7F7FFFFF))            # c = +-inf (c is never NaN here)
        bad = jr.add(bad, jr.or_(inf_c, jr.or_(jr.sabove(s, jr.k(s, 126)), jr.sabove(jr.k(s, 0xFFFFFF82), s))))
        nxt[j] = v
    return bad
