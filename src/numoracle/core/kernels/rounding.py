"""The compiled kernels' one rounding step (numba): float bits and float64 values rounded to a format's grid.

Every kernel that rounds (models/kernels/chain.py, models/kernels/block.py and jitblockrun.py, exact/kernels/ozaki.py)
rounds here, with one parameter layout: a ``Grid`` (the format's grid in its normal range, as words of
the float type the kernel holds values in) and, for whole values, ``Limits`` (the subnormal grid, the
overflow policy, NaN). Imported by the kernel modules only (it imports numba and llvmlite).

* ``round_bits(b, mode, g)``: the float bits b (sign and magnitude) rounded at bit g.d, exact for
  min_normal <= |x| <= max_finite, where the format's quantum is the float's quantum times 2^d: one
  addition below the kept bits and a mask (RNE adds half - 1 + lsb, RNA half, RU / RD the mask on their
  side, RTZ nothing, RTO ORs "a dropped bit is set" into the last kept bit); a carry out of the kept bits
  moves into the exponent field, again the right value; max_finite is on the grid, so nothing rounds
  past it. Words of any integer type (uint32 / uint64 float bits, int64 integer windows).
* ``round_shift(x, sh, neg, mode, P, r, full)``: an unsigned word rounded at a bit position of its own per element
  (the casts' step: core/kernels/cast.py, jitcastint.py), the increments of core/fast/wordround.py, stochastic rounding
  included (mode SR, with the element's random bits).
* ``outside(b, g)``: |x| - min_normal on the bits, above g.span exactly where x lies outside the normal
  range (the unsigned difference wraps around below min_normal; inf and NaN lie above max_finite).
* ``round_value(v, mode, g, lim)``: the accumulator value of the exact float64 v, as the conversion
  engine gives it (docs/semantics.md): NaN, infinities and overflow by the policy, decided after
  rounding; below min_normal the multiples of the quantum Q (k = v / Q rounded to an integer by the
  mode); the normal range by ``round_bits``. A kernel whose rounding differs says so in ``lim``: the block
  FMA's results reaching ``inf_at`` = 2^(emax + 1) are infinite in every mode (Khattak & Mikaitis).

The word operations keep the width of their operands: numba widens uint32 arithmetic to 64 bits, which
would halve the SIMD lanes of a float32 kernel. The engine (core/engine/softfloat.py) is not written in terms of
these: tests/core/test_jitround.py holds the two to each other in every mode and overflow policy.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import types
from numba.core import config
from numba.extending import intrinsic

from .. import jit
from ..formats.format import Format
from ..formats.policy import Overflow

__all__ = ["Grid", "Limits", "grid", "int_grid", "limits", "round_bits", "round_shift", "outside", "round_value",
           "SR",
           "add", "sub", "and_", "or_", "xor", "shl", "shr", "ashr", "above", "sabove", "umax", "umin", "smax", "smin",
           "signed_value", "widen", "zero_or", "k", "sign",
           "magnitude",
           "as_bits", "as_value", "nonzero", "like", "half_bits", "wide_vectors", "cpu_has"]

RNE, RNA, RTZ, UP, DOWN, ODD = jit.RNE, jit.RNA, jit.RTZ, jit.UP, jit.DOWN, jit.ODD
SR = max(jit.MODE_CODES.values()) + 1   # round_shift's own: stochastic rounding, random bits per element
IEEE, SATURATE, NAN = range(3)      # Limits.overflow


# ======================================================================================================
# Word operations (LLVM intrinsics of the operands' own width)
# ======================================================================================================

def _binop(name: str):
    def typer(typingctx, a, b):
        if isinstance(a, types.Integer) and a == b:
            return a(a, b), lambda context, builder, sig, args: getattr(builder, name)(*args)
        return None
    typer.__name__ = name.strip("_")
    return intrinsic(typer)


add, sub, and_, or_, xor, shl, shr = (_binop(n) for n in ("add", "sub", "and_", "or_", "xor", "shl", "lshr"))
ashr = _binop("ashr")    # the word read as signed, shifted right (its sign bit copied in)


def _compare(pred: str, signed: bool, pick: bool):
    """An intrinsic on two words of one integer type, compared by pred (as unsigned or signed integers): with
    ``pick`` the one the comparison picks, a where a pred b else b (a vector max / min), else 1 where a pred b
    and 0 elsewhere (a word of their width)."""
    def typer(typingctx, a, b):
        if isinstance(a, types.Integer) and a == b:
            def codegen(context, builder, sig, args):
                cmp = (builder.icmp_signed if signed else builder.icmp_unsigned)(pred, *args)
                return builder.select(cmp, *args) if pick else builder.zext(cmp, args[0].type)
            return a(a, b), codegen
        return None
    typer.__name__ = ("s" if signed else "u") + {(">", True): "max", ("<", True): "min", (">", False): "above"}[
        (pred, pick)]
    return intrinsic(typer)


# above: 1 where a > b, else 0; umax / umin: the larger / the smaller (unsigned words); sabove, smax, smin: signed
above, umax, umin = _compare(">", False, False), _compare(">", False, True), _compare("<", False, True)
sabove, smax, smin = _compare(">", True, False), _compare(">", True, True), _compare("<", True, True)


@intrinsic
def signed_value(typingctx, w):
    """The word read as a signed integer, converted to the float of its width (exact below 2^24 / 2^53)."""
    if w in _RECAST and isinstance(w, types.Integer):
        return _RECAST[w][0](w), lambda c, bld, sig, args: bld.sitofp(args[0], _RECAST[w][1])
    return None


@intrinsic
def widen(typingctx, proto, v):
    """The unsigned word v zero-extended to proto's integer type (uint16 codes read as uint32 words)."""
    if isinstance(proto, types.Integer) and isinstance(v, types.Integer) and v.bitwidth <= proto.bitwidth:
        def codegen(c, bld, sig, args):
            t = args[0].type
            return args[1] if args[1].type == t else bld.zext(args[1], t)
        return proto(proto, v), codegen
    return None


@intrinsic
def zero_or(typingctx, m, when_zero, other):
    """when_zero where the word m is 0, else other (one vector compare and blend)."""
    if isinstance(m, types.Integer) and m == when_zero == other:
        def codegen(c, bld, sig, args):
            return bld.select(bld.icmp_unsigned("==", args[0], ir.Constant(args[0].type, 0)), args[1], args[2])
        return m(m, m, m), codegen
    return None


@intrinsic
def k(typingctx, proto, value):
    """The integer literal ``value`` as a word of proto's type (an immediate operand, not a register)."""
    if isinstance(proto, types.Integer) and isinstance(value, types.IntegerLiteral):
        return proto(proto, value), lambda c, bld, sig, args: ir.Constant(args[0].type, value.literal_value)
    return None


@intrinsic
def sign(typingctx, b):
    """The sign bit of the float bits b, as 0 or 1 (a shift by the word width - 1)."""
    if isinstance(b, types.Integer):
        return b(b), lambda c, bld, sig, args: bld.lshr(args[0], ir.Constant(args[0].type, b.bitwidth - 1))
    return None


@intrinsic
def magnitude(typingctx, b):
    """The float bits b with the sign bit cleared."""
    if isinstance(b, types.Integer):
        return b(b), lambda c, bld, sig, args: bld.and_(args[0], ir.Constant(args[0].type, (1 << (b.bitwidth - 1)) - 1))
    return None


@cache
def cpu_has(feature: str) -> bool:
    """Does the CPU numba compiles for have ``feature`` (LLVM's name: "avx512fp16", "fma", ...)? From numba's
    target features (NUMBA_CPU_FEATURES where set, else the host's). A route that is fast only where the CPU
    does an operation in hardware asks here; LLVM computes the same operation everywhere (as a library call
    where the instruction is missing)."""
    features = config.CPU_FEATURES or llvm.get_host_cpu_features().flatten()
    return f"+{feature}" in features.split(",")


@intrinsic
def wide_vectors(typingctx):
    """Ask LLVM for 512-bit vectors in the calling kernel: the function attribute "prefer-vector-width"="512"
    on the function being compiled (called first in a kernel whose loops should vectorise at full width).
    LLVM's default tuning for AVX-512 CPUs keeps 256-bit vectors; the attribute changes only the functions
    that carry it, not numba's other code in the process, and does nothing on CPUs without AVX-512. A
    kernel's non-inlined callees vectorise in their own functions, so each loop's function calls this."""
    def codegen(context, builder, sig, args):
        # llvmlite's AttributeSet takes only enum attributes; a string attribute is written out verbatim
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()
    return types.none(), codegen


_WORD = {types.float32: (types.uint32, ir.IntType(32)), types.float64: (types.uint64, ir.IntType(64))}
_RECAST = {**_WORD, types.uint32: (types.float32, ir.FloatType()), types.uint64: (types.float64, ir.DoubleType())}


@intrinsic
def _recast(typingctx, x):
    """The same bits as the other type: float32 <-> uint32, float64 <-> uint64."""
    if x in _RECAST:
        t, lt = _RECAST[x]
        return t(x), lambda c, bld, sig, args: bld.bitcast(args[0], lt)
    return None


as_bits = _recast   # a float's bit pattern
as_value = _recast  # the float with a bit pattern


@intrinsic
def nonzero(typingctx, x):
    """1 (a word of x's width) where x != 0 or x is NaN, else 0."""
    if x in _WORD:
        w, lt = _WORD[x]
        return w(x), lambda c, bld, sig, args: bld.zext(
            bld.fcmp_unordered("!=", args[0], ir.Constant(args[0].type, 0.0)), lt)
    return None


@intrinsic
def half_bits(typingctx, h):
    """FP16 bits (the low half of a uint32 word) -> the FP32 bits of the same value (exact; F16C's vcvtph2ps; a
    NaN stays a NaN, its payload as the hardware widens it)."""
    if h == types.uint32:
        def codegen(c, bld, sig, args):
            f = bld.fpext(bld.bitcast(bld.trunc(args[0], ir.IntType(16)), ir.HalfType()), ir.FloatType())
            return bld.bitcast(f, ir.IntType(32))
        return h(h), codegen
    return None


@intrinsic
def like(typingctx, proto, v):
    """The float64 v as a float of proto's type (exact where v is a value of the accumulator format)."""
    if proto in _WORD and v == types.float64:
        def codegen(c, bld, sig, args):
            return args[1] if proto == types.float64 else bld.fptrunc(args[1], ir.FloatType())
        return proto(proto, v), codegen
    return None


# ======================================================================================================
# The parameters
# ======================================================================================================

class Grid(NamedTuple):
    """A format's grid in the normal range, on float bits (all fields words of one integer type): d bits
    dropped, their mask and its complement keep, half and half - 1 of the dropped bits' range, the normal
    range as [lo, lo + span] of magnitudes' bits, and zero_ok (0 where a zero's bits need no change in an
    addition's result, all ones where the caller must redo zeros: DOWN, formats without -0)."""

    d: int
    mask: int
    keep: int
    half: int
    half1: int
    lo: int
    span: int
    zero_ok: int


class Limits(NamedTuple):
    """What rounding a whole float64 value reads besides the grid: the smallest normal, the subnormal quantum
    q and 1 / q, the largest finite value, the value of a NaN result (max_finite without NaN), whether the
    IEEE float32 conversion is the rounding (FP32 with RNE), ftz, whether -0 exists, the overflow policy
    (IEEE, SATURATE, NAN) and inf_at (results of this magnitude and above are infinite: block FMA; else inf)."""

    min_normal: float
    q: float
    inv_q: float
    max_finite: float
    nan: float
    native: bool
    ftz: bool
    neg_zero: bool
    overflow: int
    inf_at: float


def grid(fmt: Format, dtype, zero_ok: bool = True) -> Grid:
    """The Grid of ``fmt`` on the bits of floats of ``dtype`` (float32: uint32 words, float64: uint64 words)."""
    fb = np.finfo(dtype).nmant                  # 23 or 52 fraction bits
    top = np.dtype(dtype).itemsize * 8 - 1
    d = fb - fmt.man_bits
    word = np.uint32 if top == 31 else np.uint64
    lo = int(np.asarray(float(fmt.min_normal), dtype).view(word))
    hi = int(np.asarray(float(fmt.max_finite), dtype).view(word))
    mask, half = (1 << d) - 1, (1 << d) >> 1     # d = 0 (FP32 on float32 words): nothing dropped
    ones = (1 << (top + 1)) - 1
    vals = (d, mask, ones ^ mask, half, max(half - 1, 0), lo, hi - lo, 0 if zero_ok else ones)
    return Grid(*(word(v) for v in vals))       # a tuple: numba holds it in registers (no aliasing with buffers)


def int_grid(d: int) -> Grid:
    """The Grid of a non-negative int64 rounded at bit d (an integer with its guard and sticky bits below)."""
    mask = (1 << d) - 1
    return Grid(*(np.int64(v) for v in (d, mask, ~mask, (1 << d) >> 1, max(((1 << d) >> 1) - 1, 0), 0, 0, 0)))


def limits(fmt: Format, overflow: Overflow, ftz: bool, native: bool, inf_at: float = np.inf) -> Limits:
    """The Limits of rounding to ``fmt`` under an overflow policy (NaN decodes to +qNaN; without NaN, to max).
    ``native``: the IEEE float32 conversion is the rounding (FP32, RNE, no ftz; IEEE overflow only)."""
    ovf = {Overflow.IEEE: IEEE, Overflow.SATURATE: SATURATE, Overflow.NAN: NAN}[overflow]
    nan = np.nan if fmt.has_nan else float(fmt.max_finite)
    native = bool(native) and ovf == IEEE
    return Limits(float(fmt.min_normal), 2.0 ** (fmt.emin - fmt.man_bits), 2.0 ** (fmt.man_bits - fmt.emin),
                  float(fmt.max_finite), nan, native, bool(ftz), bool(fmt.has_negative_zero), ovf, float(inf_at))


# ======================================================================================================
# The step
# ======================================================================================================

@jit.njit(inline="always")
def round_bits(b, mode, g):
    """The float bits b rounded at bit g.d by mode (module docstring); words of b's type."""
    if mode == RNE:
        # add half - 1 plus the last kept bit: above half always carries, a tie only when that bit is odd
        return and_(add(add(b, g.half1), and_(shr(b, g.d), k(b, 1))), g.keep)
    if mode == RNA:
        return and_(add(b, g.half), g.keep)        # add half: a tie carries (away from zero)
    if mode == RTZ:
        return and_(b, g.keep)                     # drop the bits: the magnitude truncated
    if mode == UP or mode == DOWN:
        # away from zero on the mode's side: add mask (any dropped bit carries) where the sign bit says so
        neg = sign(b)
        away = neg if mode == DOWN else xor(neg, k(b, 1))
        return and_(add(b, and_(g.mask, sub(k(b, 0), away))), g.keep)
    # ODD: truncate, then set the last kept bit where a dropped bit was set
    return or_(and_(b, g.keep), shl(above(and_(b, g.mask), k(b, 0)), g.d))


@jit.njit(inline="always")
def source_parts(u, P, daz):
    """Step 1 of the casts (core/kernels/cast.py, jitcastint.py): the source word u's magnitude a, sign bit neg and
    exponent field e; where ``daz`` (compiled in) and P.daz (all ones), a subnormal source reads as zero."""
    zero, one = k(u, 0), k(u, 1)
    a = and_(u, P.magmask)
    neg = shr(u, P.top)
    if daz:
        a = and_(a, xor(sub(zero, one), and_(P.daz, sub(zero, above(add(P.submax, one), a)))))
    return a, neg, shr(a, P.sman)


@jit.njit(inline="always")
def round_shift(x, sh, neg, mode, P, r, full):
    """The word x rounded at bit sh (one per element, up to P.shcap) by mode: the kept part, a carry included;
    neg: 1 for negative values. The casts' step (core/kernels/cast.py, jitcastint.py): the increments of
    core/fast/wordround.py. Stochastic rounding (SR) reads the random bits r (< 2^P.r) and the uncapped shift
    ``full`` (its fraction's top P.r bits, docs/semantics.md); P.wmax is the word's width - 1."""
    one = k(x, 1)
    if mode == SR:
        # floor(f * 2^R): the fraction x mod 2^sh shifted down by full - R, or up by R - full (both capped to
        # shifts within the word; the other one is discarded), plus r: its carry at bit R is the increment
        frac = and_(x, sub(shl(one, sh), one))
        down = shr(frac, umin(sub(full, P.r), P.shcap))
        up = shl(frac, umin(sub(P.r, full), P.wmax))
        fl = zero_or(above(P.r, full), down, up)
        return add(shr(x, sh), shr(add(fl, r), P.r))
    mask = sub(shl(one, sh), one)
    if mode == RNE:
        half1 = shr(mask, one)                 # half - 1; a tie carries only from an odd kept part
        return shr(add(add(x, half1), and_(shr(x, sh), one)), sh)
    if mode == RNA:
        return shr(add(x, add(shr(mask, one), one)), sh)
    if mode == RTZ:
        return shr(x, sh)
    if mode == UP or mode == DOWN:
        away = neg if mode == DOWN else xor(neg, one)
        return shr(add(x, and_(mask, sub(k(x, 0), away))), sh)
    return or_(shr(x, sh), above(and_(x, mask), k(x, 0)))   # ODD


@jit.njit(inline="always")
def outside(b, g):
    """|x| - min_normal on the bits b of x: above g.span exactly where x is zero, subnormal, above max_finite,
    inf or NaN."""
    return sub(magnitude(b), g.lo)


@jit.njit
def round_value(v, mode, g, lim):
    """The value of the exact float64 v rounded to the format (module docstring); g: its float64 Grid."""
    av = abs(v)
    if lim.inf_at <= av < np.inf:
        return np.copysign(np.inf, v)           # (block FMA: K&M's infinities)
    if lim.native:
        return np.float64(np.float32(v))        # FP32 with RNE: the IEEE conversion
    if v != v:
        return lim.nan
    if av == np.inf:
        return v if lim.overflow == IEEE else np.copysign(lim.max_finite, v) if lim.overflow == SATURATE else lim.nan
    if av < lim.min_normal:
        q = v * lim.inv_q                       # exact: a power-of-two scaling
        if mode == RNE:
            q = np.rint(q)
        elif mode == RNA:
            q = np.copysign(np.floor(abs(q) + 0.5), q)
        elif mode == RTZ:
            q = np.trunc(q)
        elif mode == UP:
            q = np.ceil(q)
        elif mode == DOWN:
            q = np.floor(q)
        else:                                   # to odd: truncate, an inexact even result moves away by one
            t = np.trunc(q)
            q = t + np.copysign(1.0, q) if t != q and np.fmod(t, 2.0) == 0.0 else t
        r = q * lim.q
        if lim.ftz and abs(r) < lim.min_normal:
            r = np.copysign(0.0, r)
        return 0.0 if r == 0.0 and not lim.neg_zero else r
    r = as_value(round_bits(as_bits(v), mode, g))
    if abs(r) <= lim.max_finite:
        return r
    # overflow, decided after rounding with an unbounded exponent: +-max where the policy saturates or the
    # mode rounds toward zero on this side; else inf, or NaN in formats without one
    if lim.overflow == SATURATE or mode == RTZ or mode == ODD or (mode == UP and v < 0) or (mode == DOWN and v > 0):
        return np.copysign(lim.max_finite, v)
    return np.copysign(np.inf, v) if lim.overflow == IEEE else lim.nan
