"""cast compiled (numba): IEEE float sources (FP64, FP32, BF16, FP16) to float formats, one pass per element.

Imported only when ``core.jit.kernel_for`` picks it (core/jit.py's contract): ``covers(step)`` says from the
formats and the policy whether a ``CastStep`` (core/fast/lanes.py) runs here, ``run`` gives the engine's codes
and flags (core/engine/softfloat.py, docs/semantics.md), ``calls`` counts the casts run. Every element takes the same
branch-free steps on words of the source's width (uint32 for FP32/BF16/FP16, uint64 for FP64), so LLVM
vectorises the loop; the rounding mode is a constant of each loop (one loop per mode):

1. a = the source magnitude's bits, e its exponent field (daz: a source subnormal reads as a zero);
2. the word and its shift, as fastwide.py's lane: c = min(max(e, 1), e0) with e0 the source field of the
   destination's smallest normal (>= 1: covers() asks), x = a - (c - 1) * 2^sman (the re-biased magnitude of
   a normal result; the significand of a subnormal one), sh = sman - m + e0 - c, capped at sman + 2, where
   x < 2^(sman + 1) is below half a quantum whatever the shift, so every mode decides as at the true shift;
3. t = x rounded at sh by the mode (the increments of core/fast/wordround.py, at one shift per element): the
   destination's magnitude code, a carry running into the exponent field. Stochastic rounding adds
   floor(f * 2^R) + rand at bit R (f the fraction at the true shift: docs/semantics.md), R below the word's
   width;
4. ftz flushes 0 < t < 2^m (as rounded); t > max_mag overflows: +-max where the policy saturates or the mode
   rounds toward zero on the element's side, else the 'over' code (inf, or the NaN: FN's positive,
   FNUZ's 0x80);
5. the sign (formats without -0 give +0; an unsigned format's negative nonzero values give its NaN);
6. the source's infinities and NaNs by the policy (specialize.py's codes), selected last;
7. flags, where asked: INEXACT (a dropped bit), UNDERFLOW (tiny, before or after rounding, and inexact; ftz),
   OVERFLOW | INEXACT, INVALID (signalling NaN, NaN or inf the format cannot hold, unsigned negatives).

RNE from FP32 to FP16 and from FP64 to FP32 under the IEEE policy without daz, ftz or flags is the hardware's
conversion, and from FP32 to BF16 one integer rounding (core/kernels/onestep.py). Zero-less formats (E8M0) take
``_zeroless``'s steps, integer destinations core/kernels/castint.py's; FP64 sources without flags, daz or ftz are
narrowed to FP32 by round to odd first where the destination has a precision of at most 22 (core/kernels/castodd.py).
FP16 sources whose destination's normals start below FP16's (BF16, E8M0, FNUZ E5M2) are widened to FP32 in the loop
first (exactly: ``_from_half``), and BF16 sources to a wider significand (FP16, TF32) too (the code shifted up).
tests/core/test_jitcast.py holds every step to the engine.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache, lru_cache
from typing import NamedTuple

import numpy as np

from .. import jit
from ..engine.specialize import canonical_nan
from ..formats.format import BF16, FP16, FP32, FP64, Format
from ..formats.policy import Flags, Overflow, Rounding, Tininess
from . import rounding as jr
from .castint import (
    float_kernel,
    float_mag,
    float_ok,
    float_params,
    int_covers,
    int_kernel,
    int_params,
    int_word,
)
from .onestep import one_step_kind, one_step_loop

__all__ = ["covers", "run", "calls", "params"]

calls = jit.Calls()  # casts run by the kernel (the tests read calls.count)

RNE, RNA, RTZ, UP, DOWN, ODD = jit.RNE, jit.RNA, jit.RTZ, jit.UP, jit.DOWN, jit.ODD
SR = jr.SR
GENERAL, FIXED, ZEROLESS = range(3)  # _one's kinds
HALF, HALF_DAZ = 1, 2                # FP16 codes widened to FP32 in the loop (_from_half), without or with daz
BF16_WORDS = 3                       # BF16 codes widened to FP32 in the loop (their daz is FP32's)
_SOURCES = (FP64, FP32, BF16, FP16)
_OVF, _INV = int(Flags.OVERFLOW | Flags.INEXACT), int(Flags.INVALID)


class Cast(NamedTuple):
    """The constants of one (source, destination, policy), as words of the source's width (module docstring).

    Source: sman mantissa bits, top (its sign's shift), magmask, inf (its infinity's magnitude), quiet (the quiet
    bit), submax (its largest subnormal magnitude: daz). Destination: e0, s = sman - m, shcap, m, max_mag,
    sign (its sign bit, 0 when unsigned), neg0 (all ones where -0 exists), unsigned (all ones for unsigned),
    ovc / ovs (the 'over' code and the sign bit it takes, or 0), tmp / tmn (all ones where an overflow of a
    positive / negative value gives max), infc / infs / inff (an infinity's code, sign bit, flags), nanc /
    nanf (a NaN's code and flags; a signalling one adds INVALID), ftz, daz, after (tininess after rounding,
    all ones), edge (the field of the binade under 2^emin: tininess after; zero-less formats: all ones where
    e0 = 0), bits (dst bits - 1: the sign's
    shift), r (stochastic rounding's random bits per element, else 0), wmax (the word's width - 1)."""

    sman: int
    top: int
    magmask: int
    inf: int
    quiet: int
    submax: int
    e0: int
    s: int
    shcap: int
    m: int
    max_mag: int
    sign: int
    neg0: int
    unsigned: int
    ovc: int
    ovs: int
    tmp: int
    tmn: int
    infc: int
    infs: int
    inff: int
    nanc: int
    nanf: int
    ftz: int
    daz: int
    after: int
    edge: int
    bits: int
    r: int
    wmax: int


def _source_e0(src: Format, dst: Format) -> int:
    return dst.emin + src.bias


def covers(step) -> bool:
    """Does the kernel run this CastStep (src, dst, pol)? IEEE float sources; float destinations with subnormals
    whose smallest normal lies in the source's normal range, and integers; every mode (stochastic rounding with
    sr_bits below the word's width) and overflow policy; nan_to='raise' stays with the engine (it raises)."""
    src, dst, pol = step.src, step.dst, step.pol
    if src not in _SOURCES:
        return False
    if dst.is_integer:
        return int_covers(src, dst, pol)
    if src == dst:
        return False
    if pol.nan_to is not None and pol.nan_to.value == "raise":
        return False
    if pol.rounding is Rounding.STOCHASTIC and pol.sr_bits >= (64 if src.bits == 64 else 32):
        return False                          # (the random bits and the fraction's top bits share a word)
    return _route(src, dst) is not None


def _route(src: Format, dst: Format) -> Format | None:
    """The source whose words the float kernel rounds: src itself where the destination's smallest normal lies in
    its normal range (e0 >= 1; zero-less formats: e0 >= 0, _zeroless) and m >= 1 with subnormals (a 1-bit
    significand's parity is not its code's); else FP32 for FP16 and BF16 sources (widened exactly in the loop);
    else None."""
    def direct(s: Format) -> bool:
        e0 = _source_e0(s, dst)
        return dst.man_bits < s.man_bits and (e0 >= 1 and dst.man_bits >= 1 if dst.has_subnormals else e0 >= 0)
    return src if direct(src) else FP32 if src in (FP16, BF16) and direct(FP32) else None


@lru_cache(maxsize=1024)
def params(src: Format, dst: Format, pol) -> Cast:
    """The Cast constants of (src, dst, pol) as words of the source's width (kept: a cast's call reads them)."""
    from ..engine.specialize import _inf_mag, _invalid_code

    word = np.uint64 if src.bits == 64 else np.uint32
    ones = (1 << (64 if src.bits == 64 else 32)) - 1
    sman, m = src.man_bits, dst.man_bits
    mode = pol.rounding
    sat = pol.overflow is Overflow.SATURATE or mode in (Rounding.TOWARD_ZERO, Rounding.TO_ODD)
    tmp = sat or mode is Rounding.DOWN        # a positive overflow gives +max
    tmn = sat or mode is Rounding.UP          # a negative one -max
    sb = dst.sign_bit
    if pol.overflow is Overflow.IEEE or (dst.nan == "fnuz" and dst.has_inf):
        ovc, ovs = dst.max_mag_code + 1, sb   # inf, signed
    elif dst.nan == "fnuz":
        ovc, ovs = canonical_nan(dst), 0      # 0x80
    else:
        ovc, ovs = dst.max_mag_code + 1, 0    # the FN NaN, positive (only SATURATE is left: never used)
    nan_code = _invalid_code(dst, pol)
    if pol.overflow is Overflow.IEEE:
        infc, infs, inff = _inf_mag(dst), sb, 0
    elif pol.overflow is Overflow.SATURATE:
        infc, infs = dst.max_mag_code, sb
        inff = int(Flags.OVERFLOW | Flags.INEXACT) if dst.has_inf else int(Flags.INVALID)
    else:
        infc, infs, inff = nan_code, 0, int(Flags.INVALID)
    e0 = _source_e0(src, dst)
    edge = (ones if e0 == 0 else 0) if not dst.has_subnormals else e0 - 1
    vals = (sman, src.bits - 1, src.mag_mask, src.max_mag_code + 1, src.quiet_bit, (1 << sman) - 1,
            e0, sman - m, sman + 2, m, dst.max_mag_code, sb, ones if dst.has_negative_zero else 0,
            0 if dst.signed else ones, ovc, ovs, ones if tmp else 0, ones if tmn else 0, infc, infs, inff,
            nan_code, 0 if dst.has_nan else int(Flags.INVALID), ones if pol.ftz else 0, ones if pol.daz else 0,
            ones if pol.tininess is Tininess.AFTER else 0, edge, dst.bits - 1, pol.sr_bits or 0,
            63 if src.bits == 64 else 31)
    return Cast(*(word(v) for v in vals))


# ======================================================================================================
# The kernel
# ======================================================================================================

@jit.njit(inline="always")
def _one(u, r, mode, P, want, plain, kind):
    """The code and flags (words) of the source code u (module docstring, steps 1-7); ``plain``: no daz, no ftz,
    a signed destination (those steps compiled out); kind FIXED: e0 = 1, every shift is s (BF16 from FP32);
    ZEROLESS: _zeroless's steps."""
    if kind == ZEROLESS:
        return _zeroless(u, r, mode, P, want)
    zero, one = jr.k(u, 0), jr.k(u, 1)
    ones = jr.sub(zero, one)
    # 1. the magnitude and its exponent field; daz reads a subnormal source as zero
    a, neg, e = jr.source_parts(u, P, not plain)
    # 2. the word and its shift
    if kind == FIXED:                                           # c = 1
        x, sh, full = a, P.s, P.s
    else:
        c = jr.umin(jr.umax(e, one), P.e0)
        x = jr.sub(a, jr.shl(jr.sub(c, one), P.sman))
        full = jr.sub(jr.add(P.s, P.e0), c)
        sh = jr.umin(full, P.shcap)
    # 3. the rounding
    t = jr.round_shift(x, sh, neg, mode, P, r, full)
    # 4. ftz, overflow
    flush = zero
    if not plain:
        small = jr.above(jr.shl(one, P.m), t)                   # t < 2^m
        flush = jr.and_(P.ftz, jr.sub(zero, jr.and_(small, jr.above(t, zero))))
        t = jr.and_(t, jr.xor(flush, ones))
    ovf = jr.above(t, P.max_mag)
    sbit = jr.and_(P.sign, jr.sub(zero, neg))
    # 5. the sign: formats without -0 give +0
    keep_sign = jr.or_(P.neg0, jr.sub(zero, jr.above(t, zero)))
    code = jr.or_(t, jr.and_(sbit, keep_sign))
    to_max = jr.zero_or(neg, P.tmp, P.tmn)
    over = jr.zero_or(to_max, jr.or_(P.ovc, jr.and_(sbit, P.ovs)), jr.or_(P.max_mag, sbit))
    code = jr.zero_or(ovf, code, over)
    # an unsigned format: negative nonzero values are invalid (its NaN)
    bad = zero
    if not plain:
        bad = jr.and_(P.unsigned, jr.sub(zero, jr.and_(neg, jr.above(a, zero))))
        code = jr.zero_or(bad, code, P.nanc)
    # 6. the source's infinities and NaNs
    isnan = jr.above(a, P.inf)
    isinf = jr.xor(jr.above(a, jr.sub(P.inf, one)), isnan)
    infcode = jr.zero_or(jr.and_(bad, isinf), jr.or_(P.infc, jr.and_(sbit, P.infs)), P.nanc)
    code = jr.zero_or(isinf, code, infcode)
    code = jr.zero_or(isnan, code, P.nanc)
    if not want:
        return code, zero
    # 7. flags
    inexact = jr.above(jr.and_(x, jr.sub(jr.shl(one, sh), one)), zero)
    tiny = jr.above(P.e0, e)
    tiny = jr.and_(tiny, jr.xor(jr.and_(P.after, jr.sub(zero, _carries(a, e, neg, mode, P))), ones))
    f = jr.or_(inexact, jr.shl(jr.and_(tiny, inexact), one))    # INEXACT = 1, UNDERFLOW = 2
    f = jr.or_(f, jr.and_(jr.k(u, 3), jr.sub(zero, jr.and_(flush, one))))
    f = jr.zero_or(ovf, f, jr.k(u, _OVF))
    f = jr.zero_or(bad, f, jr.k(u, _INV))
    inf_f = jr.zero_or(jr.and_(bad, isinf), P.inff, jr.k(u, _INV))
    f = jr.zero_or(isinf, f, inf_f)
    signalling = jr.zero_or(jr.and_(a, P.quiet), jr.k(u, _INV), zero)
    f = jr.zero_or(isnan, f, jr.or_(P.nanf, signalling))
    return code, f


@jit.njit(inline="always")
def _zeroless(u, r, mode, P, want):
    """A format without subnormals and zero (unsigned: E8M0), its smallest value 2^emin at code 0: the field is
    E - emin, so x = a - e0 * 2^sman for e >= e0 (e0 >= 1), and where e0 = 0 (FP32 and BF16 sources) a source
    subnormal of exponent emin has its top bit moved up; rounded at s. Values below 2^emin give code 0 in every
    mode (UNDERFLOW | INEXACT); zeros, negative values and NaNs the NaN (INVALID, but for a quiet NaN)."""
    zero, one = jr.k(u, 0), jr.k(u, 1)
    a, neg, e = jr.source_parts(u, P, True)
    mant = jr.and_(a, P.submax)
    x = jr.zero_or(e, jr.and_(jr.shl(mant, one), P.submax), jr.sub(a, jr.shl(P.e0, P.sman)))
    under = jr.above(P.e0, e)
    half = jr.shl(one, jr.sub(P.sman, one))
    low_sub = jr.and_(jr.zero_or(e, one, zero), jr.above(half, mant))            # e = 0, mant < 2^(sman - 1)
    under = jr.or_(under, jr.and_(jr.and_(P.edge, one), low_sub))              # (edge: all ones where e0 = 0)
    t = jr.round_shift(x, P.s, neg, mode, P, r, P.s)
    t = jr.zero_or(under, t, zero)
    ovf = jr.above(t, P.max_mag)
    code = jr.zero_or(ovf, t, jr.zero_or(jr.zero_or(neg, P.tmp, P.tmn), P.ovc, P.max_mag))
    bad = jr.or_(neg, jr.zero_or(a, one, zero))                                  # negative, or a zero
    code = jr.zero_or(bad, code, P.nanc)
    isnan = jr.above(a, P.inf)
    isinf = jr.xor(jr.above(a, jr.sub(P.inf, one)), isnan)
    code = jr.zero_or(isinf, code, jr.zero_or(neg, P.infc, P.nanc))
    code = jr.zero_or(isnan, code, P.nanc)
    if not want:
        return code, zero
    inexact = jr.above(jr.and_(x, jr.sub(jr.shl(one, P.s), one)), zero)
    f = jr.zero_or(under, inexact, jr.k(u, 3))                                  # UNDERFLOW | INEXACT
    f = jr.zero_or(ovf, f, jr.k(u, _OVF))
    f = jr.zero_or(bad, f, jr.k(u, _INV))
    f = jr.zero_or(isinf, f, jr.zero_or(neg, P.inff, jr.k(u, _INV)))
    signalling = jr.zero_or(jr.and_(a, P.quiet), jr.k(u, _INV), zero)
    return code, jr.zero_or(isnan, f, jr.or_(P.nanf, signalling))


@jit.njit(inline="always")
def _carries(a, e, neg, mode, P):
    """Tininess after rounding: 1 where the value lies in the binade under 2^emin and its significand, rounded
    to the destination's precision with an unbounded exponent, carries to 2^emin (then it is not tiny)."""
    zero, one = jr.k(a, 0), jr.k(a, 1)
    mant = jr.and_(a, P.submax)
    lead = jr.shl(one, P.sman)
    if_normal = jr.or_(mant, lead)                              # e >= 1
    sig = jr.zero_or(e, jr.shl(mant, one), if_normal)           # e == 0: a subnormal's top bit moves up
    on_edge = jr.zero_or(jr.xor(e, P.edge), one, zero)
    # e0 == 1: the edge binade is the source's subnormals with their top bit set
    on_edge = jr.and_(on_edge, jr.above(jr.or_(e, jr.shr(mant, jr.sub(P.sman, one))), zero))
    r = jr.round_shift(sig, P.s, neg, mode, P, zero, P.s)
    return jr.and_(on_edge, jr.shr(r, jr.add(P.m, one)))


@jit.njit(inline="always")
def _loop(src, rnd, out, fl, P, mode, want, plain, kind, half, check, cs):
    bad = jr.k(P.sman, 0)
    for i in range(src.size):
        if half == BF16_WORDS:            # BF16 is FP32's top half
            u = jr.shl(jr.widen(P.sman, src[i]), jr.k(P.sman, 16))
        elif half:
            u = _from_half(src[i], P.sman, half == HALF_DAZ)
        else:
            u = jr.widen(P.sman, src[i])
        r = jr.k(u, 0)
        if mode == SR:
            r = jr.widen(u, rnd[i])       # the random bits in their own (unsigned) dtype
            if check:
                bad = jr.or_(bad, jr.shr(r, cs))
        c, f = _one(u, r, mode, P, want, plain, kind)
        out[i] = c
        if want:
            fl[i] = f
    return bad


@cache
def _kernel(mode: int, want: bool, plain: bool, kind: int, half: int = 0, wide: bool = True, check: bool = False):
    """The loop of one (mode, flags asked, plain, kind: _one; half: FP16 codes widened to FP32 first, with or
    without daz; wide: 512-bit vectors, jr.wide_vectors; check: stochastic rounding's random bits checked in the
    loop, random_words), its variant a constant inside (numba freezes the closure's values and prunes the
    branch on them; its disk cache keys on them): each compiled when first used. It returns the OR of the
    random bits shifted down by cs (nonzero: some lie out of range)."""
    @jit.njit
    def kernel(src, rnd, out, fl, P, cs):
        if wide:
            jr.wide_vectors()
        return _loop(src, rnd, out, fl, P, mode, want, plain, kind, half, check, cs)
    return kernel


def random_words(rand: np.ndarray | None, word: type, sr_bits: int | None, rand_check) -> tuple[np.ndarray, int]:
    """Stochastic rounding's random bits as a kernel reads them, and the shift its loop checks them with (0: no
    check). Bits of a dtype no wider than the word are read in their own dtype (an unsigned view: no copy);
    where ``rand_check`` is given (cast's range check, convert._check_random_bits) the loop ORs each value
    shifted down by c = sr_bits (by bits - 1 for a signed dtype, where that is smaller: a negative value has
    its top bit set), so one pass reads them for both. Wider bits are checked here and converted."""
    if rand is None:
        return np.zeros(0, word), 0
    r = np.ascontiguousarray(rand)
    b = 8 * r.dtype.itemsize
    if b > 8 * np.dtype(word).itemsize:
        if rand_check is not None:
            rand_check(r)
        return r.astype(word), 0
    c = min(int(sr_bits), b - 1 if r.dtype.kind == "i" else b)
    return r.view(f"u{r.dtype.itemsize}"), (c if rand_check is not None and c < b else 0)


@jit.njit(inline="always")
def _from_half(c, proto, daz):
    """The FP32 bits of the FP16 code c (exact): the hardware's widening, but NaNs rebuilt from their bits (sign,
    payload, the quiet bit: a signalling NaN stays signalling) and, under daz, subnormals read as zeros."""
    h = jr.widen(proto, c)
    mag = jr.and_(h, jr.k(h, 0x7FFF))
    sign = jr.shl(jr.and_(h, jr.k(h, 0x8000)), jr.k(h, 16))
    nan = jr.or_(jr.or_(sign, jr.k(h, 0x7F800000)), jr.shl(jr.and_(h, jr.k(h, 0x3FF)), jr.k(h, 13)))
    bits = jr.zero_or(jr.above(mag, jr.k(h, 0x7C00)), jr.half_bits(h), nan)
    if daz:
        bits = jr.zero_or(jr.above(jr.k(h, 0x400), mag), bits, sign)
    return bits


@calls.counting
def run(step, flat: np.ndarray, want_flags: bool, rand: np.ndarray | None = None,
        rand_check=None) -> tuple[np.ndarray, np.ndarray | None]:
    """The codes (and flags) of the flat source codes ``flat``: the engine's; ``rand``: stochastic rounding's random
    bits, one per element; ``rand_check``: cast's range check of them (convert._check_random_bits), run in the
    kernel's loop (random_words) and called here where a value lies out of range (it raises). Without it the
    caller has checked them (each below 2^sr_bits)."""
    src, dst, pol = step.src, step.dst, step.pol
    words = flat.view(np.dtype(src.code_dtype))
    word = int_word(src, dst) if dst.is_integer else np.uint64 if src.bits == 64 else np.uint32
    rnd, cs = random_words(rand, word, pol.sr_bits, rand_check)
    out = np.empty(flat.size, np.dtype(dst.code_dtype))
    fl = np.empty(flat.size if want_flags else 0, np.uint8)
    mode = SR if pol.rounding is Rounding.STOCHASTIC else jit.MODE_CODES[pol.rounding]
    if dst.is_integer:
        if float_ok(src, dst, pol, want_flags):
            kern = float_kernel(mode, src, cs > 0, float_mag(src, dst, pol))
            bad = kern(words, rnd, out, float_params(src, dst, pol), word(cs))
            return _checked(bad, rand, rand_check, out, None)
        bad = int_kernel(mode, bool(want_flags), cs > 0)(words, rnd, out, fl, int_params(src, dst, pol), word(cs))
        return _checked(bad, rand, rand_check, out, fl if want_flags else None)
    plain = not (pol.daz or pol.ftz) and dst.signed
    half = 0
    if _route(src, dst) != src and src == BF16:   # BF16 through FP32 words (the same subnormals: daz as FP32's)
        src, half = FP32, BF16_WORDS
    elif _route(src, dst) != src:                 # FP16 through FP32 words: daz is the widening's
        src, half, pol = FP32, HALF_DAZ if pol.daz else HALF, replace(pol, daz=False)
    P = params(src, dst, pol)
    how = one_step_kind(src, dst, pol) if not want_flags and plain and not half else 0
    if how:
        one_step_loop(how)(words, out, P)
        return out, None
    kind = _kind(src, dst)
    if kind == ZEROLESS and dst.man_bits == 0:  # the kept significand is always 1, odd: ties go up, odd is kept
        mode = {RNE: RNA, ODD: RTZ}.get(mode, mode)
    wide = step.src.bits >= 32 or mode == SR    # (measured: 16-bit sources' other loops run faster at 256 bits)
    bad = _kernel(mode, bool(want_flags), plain, kind, half, wide, cs > 0)(words, rnd, out, fl, P, word(cs))
    return _checked(bad, rand, rand_check, out, fl if want_flags else None)


def _kind(src: Format, dst: Format) -> int:
    """_one's kind of (src, dst)."""
    return ZEROLESS if not dst.has_subnormals else FIXED if _source_e0(src, dst) == 1 else GENERAL


def _checked(bad, rand, rand_check, out, fl) -> tuple[np.ndarray, np.ndarray | None]:
    """(out, fl), after the kernel's check of the random bits: where it found one out of range, cast's check
    raises its error (with the range it found)."""
    if bad:
        rand_check(rand)
        raise ValueError("random_bits out of range")  # (rand_check raises first)
    return out, fl
