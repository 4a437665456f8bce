"""simulate's chains compiled (numba): s = fl(s + t_j) along each row, bit-identical to the numpy path.

Imported only when ``core.jit.kernel_for`` picks it (core/jit.py's contract): ``covers(step)`` says, before
anything runs, whether a ``Chain`` step (models/steps.py) can run here; ``run`` then computes what the numpy
reference (``numpysteps.run_chain``) does, and ``calls`` counts the steps run. A chain's addends must be
terms (inputs, or exact products); the accumulator any format simulate takes except FP64. Every plan
("direct", "odd") computes the same function, the correctly rounded sum (accumulate.Arith), so one exact
method serves them all:

1. the float sum and its error: s = fl(x + y), e = (x + y) - s exactly (TwoSum; Knuth, TAOCP 4.2.2);
2. s rounded to odd at the float's precision P from s and e: truncate toward zero, set the last bit when
   e != 0. Rounding that once more to p <= P - 2 bits is one correct rounding, in every mode (Boldo &
   Melquiond 2008), as in ``Arith.add_exact``;
3. where s lies outside the format's normal range [min_normal, max_finite] (zeros, subnormals, overflow,
   inf, NaN) the element is redone by the scalar route (``_exact_add``, a one-value restatement of
   ``Arith.round``: the subnormal grid, ftz, the overflow policy, the NaN the engine gives);
4. otherwise the rounding is done on the bits: the format's quantum at s is the float's quantum times 2^d
   (``_round_bits``: one case per mode).

Two word sizes: float64/uint64, and float32/uint32 (twice the SIMD lanes) for formats with p <= 22 inside
FP32's normal range whose terms are exact in float32 (simulate's "low32" chains: FP16, BF16, FP8, TF32
accumulators). simulate's "f32" chains (FP32 accumulator, RNE, terms exact or FP32-rounded products) are
plain float32 additions here as in numpy (mode _HW). The loops: tiles of output rows (their running sums
stay in L1), then the terms k, then the rows i of the tile, then the output columns j: the innermost loop
is contiguous and branch-free, so LLVM vectorises it; a tile whose elements all stay in the normal range
is never revisited (``_tile_fix`` redoes the others). NaN operands: x's NaN wins over y's, as in numpy's
loops (``_first_nan``).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..core import jit
from ..core.formats import Format
from ..core.policy import Overflow, Rounding
from .accumulate import Arith, native_fp32_ok
from .simsources import _MatSource
from .steps import Chain

__all__ = ["covers", "run", "calls"]

calls = jit.Calls()  # chain steps run by the kernel (the tests read calls.count)

_TILE = 2048         # running sums held per block of output rows: two buffers of them stay in L1

# mode codes
_RNE, _RNA, _RTZ, _UP, _DOWN, _ODD = jit.RNE, jit.RNA, jit.RTZ, jit.UP, jit.DOWN, jit.ODD
_HW = max(jit.MODE_CODES.values()) + 1   # this kernel's own: plain float32 addition (FP32 accumulator, RNE)
_MODES = jit.MODE_CODES
# word parameters (tuple P of uint32 or uint64): bits dropped, masks, the normal range as bit patterns
_D, _MASK, _NMASK, _HALF1, _HALF, _LO, _SPAN, _ZERO_OK = range(8)
# float parameters (F) and flags (C) of the scalar route
_FMIN, _FQ, _FINVQ, _FMAX, _FNAN = range(5)
_CNATIVE, _CFTZ, _CNEGZ, _COVF = range(4)
_IEEE, _SAT, _NAN = range(3)


# ======================================================================================================
# Word operations that keep the width of their operands (numba widens uint32 arithmetic to 64 bits,
# which would halve the SIMD lanes of the float32 kernel)
# ======================================================================================================

def _binop(name: str):
    def typer(typingctx, a, b):
        if isinstance(a, types.Integer) and not a.signed and a == b:
            return a(a, b), lambda context, builder, sig, args: getattr(builder, name)(*args)
        return None
    typer.__name__ = f"_{name.strip('_')}"
    return intrinsic(typer)


_add, _sub, _and, _or, _xor, _shl, _shr = (_binop(n) for n in ("add", "sub", "and_", "or_", "xor", "shl", "lshr"))


@intrinsic
def _above(typingctx, a, b):
    """1 where a > b as unsigned words, else 0 (a word of their width)."""
    if isinstance(a, types.Integer) and a == b:
        return a(a, b), lambda c, bld, sig, args: bld.zext(bld.icmp_unsigned(">", *args), args[0].type)
    return None


@intrinsic
def _umax(typingctx, a, b):
    """The larger of two unsigned words (one vector max instruction)."""
    if isinstance(a, types.Integer) and a == b:
        return a(a, b), lambda c, bld, sig, args: bld.select(bld.icmp_unsigned(">", *args), *args)
    return None


@intrinsic
def _zero_or(typingctx, m, when_zero, other):
    """when_zero where the word m is 0, else other (one vector compare and blend)."""
    if isinstance(m, types.Integer) and m == when_zero == other:
        def codegen(c, bld, sig, args):
            return bld.select(bld.icmp_unsigned("==", args[0], ir.Constant(args[0].type, 0)), args[1], args[2])
        return m(m, m, m), codegen
    return None


@intrinsic
def _k(typingctx, proto, value):
    """The integer literal ``value`` as a word of proto's type (an immediate operand, not a register)."""
    if isinstance(proto, types.Integer) and isinstance(value, types.IntegerLiteral):
        return proto(proto, value), lambda c, bld, sig, args: ir.Constant(args[0].type, value.literal_value)
    return None


@intrinsic
def _sign(typingctx, b):
    """The sign bit of the float bits b, as 0 or 1 (a shift by the word width - 1)."""
    if isinstance(b, types.Integer):
        return b(b), lambda c, bld, sig, args: bld.lshr(args[0], ir.Constant(args[0].type, b.bitwidth - 1))
    return None


@intrinsic
def _magnitude(typingctx, b):
    """The float bits b with the sign bit cleared."""
    if isinstance(b, types.Integer):
        return b(b), lambda c, bld, sig, args: bld.and_(args[0], ir.Constant(args[0].type, (1 << (b.bitwidth - 1)) - 1))
    return None


_WORD = {types.float32: (types.uint32, ir.IntType(32)), types.float64: (types.uint64, ir.IntType(64))}
_RECAST = {**_WORD, types.uint32: (types.float32, ir.FloatType()), types.uint64: (types.float64, ir.DoubleType())}


@intrinsic
def _recast(typingctx, x):
    """The same bits as the other type: float32 <-> uint32, float64 <-> uint64."""
    if x in _RECAST:
        t, lt = _RECAST[x]
        return t(x), lambda c, bld, sig, args: bld.bitcast(args[0], lt)
    return None


_bits = _recast  # a float's bit pattern
_value = _recast  # the float with a bit pattern


@intrinsic
def _nonzero(typingctx, x):
    """1 (a word of x's width) where x != 0 or x is NaN, else 0."""
    if x in _WORD:
        w, lt = _WORD[x]
        return w(x), lambda c, bld, sig, args: bld.zext(
            bld.fcmp_unordered("!=", args[0], ir.Constant(args[0].type, 0.0)), lt)
    return None


@intrinsic
def _like(typingctx, proto, v):
    """The float64 v as a float of proto's type (exact here: v is a value of the accumulator format)."""
    if proto in _WORD and v == types.float64:
        def codegen(c, bld, sig, args):
            return args[1] if proto == types.float64 else bld.fptrunc(args[1], ir.FloatType())
        return proto(proto, v), codegen
    return None


# ======================================================================================================
# The vector steps
# ======================================================================================================

@jit.njit(inline="always")
def _first_nan(x, r):
    """r = x op y, except that x's NaN (quieted) wins when x is NaN: the operand order numpy's loops and x86 keep
    (both NaN: the first source's), which LLVM may swap in a commutative add or multiply."""
    return x + x if x != x else r


@jit.njit(inline="always")
def _round_bits(b, mode, P):
    """Round the sign-magnitude float bits b at bit d = P[_D] (step 4). Exact for min_normal <= |x| <= max_finite:
    the format's quantum there is the float's quantum times 2^d; a carry out of the kept bits moves into the
    exponent field, which is again the right value; max_finite is on the grid, so nothing rounds past it."""
    if mode == _RNE:
        # add half - 1 plus the last kept bit: above half always carries, a tie only when that bit is odd
        return _and(_add(_add(b, P[_HALF1]), _and(_shr(b, P[_D]), _k(b, 1))), P[_NMASK])
    if mode == _RNA:
        return _and(_add(b, P[_HALF]), P[_NMASK])     # add half: a tie carries (away from zero)
    if mode == _RTZ:
        return _and(b, P[_NMASK])                      # drop the bits: the magnitude truncated
    if mode == _UP or mode == _DOWN:
        # away from zero on the mode's side: add mask (any dropped bit carries) where the sign bit says so
        neg = _sign(b)
        away = neg if mode == _DOWN else _xor(neg, _k(b, 1))
        return _and(_add(b, _and(P[_MASK], _sub(_k(b, 0), away))), P[_NMASK])
    # _ODD: truncate, then set the last kept bit where a dropped bit was set
    return _or(_and(b, P[_NMASK]), _shl(_above(_and(b, P[_MASK]), _k(b, 0)), P[_D]))


@jit.njit(inline="always")
def _offset(b, P):
    """|x| - min_normal on the bits of x (step 3): above P[_SPAN] exactly where x lies outside [min_normal,
    max_finite] (the unsigned difference wraps around below min_normal; inf and NaN lie above max_finite).
    A zero takes P[_ZERO_OK]: 0 where its bits need no change (the float sum of x and y already has the
    IEEE sign of an exact zero sum, and rounding keeps it), all ones under DOWN (-0 unless both operands are
    +0) and in formats without -0."""
    m = _magnitude(b)
    return _zero_or(m, P[_ZERO_OK], _sub(m, P[_LO]))


@jit.njit(inline="always")
def _step(x, y, mode, P):
    """Steps 1-4 of fl(x + y): (bits of the result, its ``_offset``: the scalar route redoes it when above span)."""
    s = x + y                                   # 1. TwoSum: s + e == x + y exactly (NaN e: flagged below)
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    b = _bits(s)                                # 2. round to odd: one ulp toward zero where e points there
    inexact = _nonzero(e)                       #    (sign bits of s and e differ), then the last bit set
    b = _or(_sub(b, _and(inexact, _sign(_xor(b, _bits(e))))), inexact)
    return _round_bits(b, mode, P), _offset(b, P)


@jit.njit(inline="always")
def _tile_loop(buf, cur, ni, at, k, i0, brow, mode, rterm, P):
    """buf[1 - cur, i, j] = fl(buf[cur, i, j] + at[k, i0 + i] * brow[j]) (the term rounded first when rterm) for
    i < ni and every j; True when some element left the normal range (``_tile_fix`` then redoes the tile:
    buf[cur] is kept). Inlined with a constant mode and rterm: the inner loop has no branch and vectorises."""
    worst = _k(P[_LO], 0)                       # the largest offset (one unsigned max per element)
    for i in range(ni):
        a = at[k, i0 + i]                       # (not NaN: _chain sends such tiles to _tile_fix)
        sc, sn = buf[cur, i], buf[1 - cur, i]
        for j in range(sc.size):
            y = a * brow[j]
            if rterm:                           # fma=False: the term is rounded to the accumulator first
                yb = _bits(y)
                worst = _umax(worst, _offset(yb, P))
                y = _value(_round_bits(yb, mode, P))
            if mode == _HW:
                sn[j] = _first_nan(sc[j], sc[j] + y)  # IEEE binary32 addition, as numpy's float32 chain
            else:
                r, off = _step(sc[j], y, mode, P)
                worst = _umax(worst, off)
                sn[j] = _value(r)
    return worst > P[_SPAN]


@jit.njit
def _tile_any(buf, cur, ni, at, k, i0, brow, mode, rterm, P):
    return _tile_loop(buf, cur, ni, at, k, i0, brow, mode, rterm, P)


@jit.njit
def _tile(buf, cur, ni, at, k, i0, brow, mode, rterm, P):
    """``_tile_loop`` with a constant mode for RNE and the plain float32 add (branch-free loops that vectorise);
    the other modes and fma=False (rterm) share one loop that branches on them, so that numba compiles
    three loops instead of fourteen (the compile time is the first call's)."""
    if rterm or (mode != _RNE and mode != _HW):
        return _tile_any(buf, cur, ni, at, k, i0, brow, mode, rterm, P)
    if mode == _RNE:
        return _tile_loop(buf, cur, ni, at, k, i0, brow, _RNE, False, P)
    return _tile_loop(buf, cur, ni, at, k, i0, brow, _HW, False, P)


@jit.njit(inline="always")
def _row_redo(sc, sn, offs, a, brow, mode, rterm, P):
    """One row of ``_tile_loop`` (any a, NaN included; the mode a variable) that keeps each element's offset."""
    for j in range(sc.size):
        y = _first_nan(a, a * brow[j])
        off = _k(P[_LO], 0)
        if rterm:
            yb = _bits(y)
            off = _offset(yb, P)
            y = _value(_round_bits(yb, mode, P))
        if mode == _HW:
            sn[j] = _first_nan(sc[j], sc[j] + y)
        else:
            r, o = _step(sc[j], y, mode, P)
            sn[j] = _value(r)
            off = _umax(off, o)
        offs[j] = off


@jit.njit
def _tile_fix(buf, cur, ni, at, k, i0, brow, offs, mode, rterm, P, P64, F, C):
    """``_tile`` again, row by row, then the scalar route for the elements outside the normal range."""
    for i in range(ni):
        a = at[k, i0 + i]
        sc, sn = buf[cur, i], buf[1 - cur, i]
        _row_redo(sc, sn, offs, a, brow, mode, rterm, P)
        for j in range(sc.size):
            if offs[j] > P[_SPAN]:
                y = np.float64(_first_nan(a, a * brow[j]))
                if rterm:
                    y = _round_exact(y, mode, P64, F, C)
                sn[j] = _like(sc[j], _exact_add(np.float64(sc[j]), y, mode, P64, F, C))


@jit.njit
def _chain(at, bm, ids, s0, lo, units, offs, mode, rterm, P, P64, F, C):
    """out[r, i*n + j] = the chain s = s0[r, i*n + j]; s = fl(s + at[k, lo + i] * bm[k, j]) for k = ids[r, :].

    Rows of outputs are taken in tiles whose running sums (two buffers: read one, write the other) stay in
    cache while the terms' rows stream through."""
    W, L = ids.shape
    n = bm.shape[1]
    tile = max(1, _TILE // n)
    out = np.empty((W, units * n), at.dtype)
    buf = np.empty((2, tile, n), at.dtype)
    for r in range(W):
        for t0 in range(0, units, tile):
            ni = min(tile, units - t0)
            for i in range(ni):
                buf[0, i] = s0[r, (t0 + i) * n:(t0 + i + 1) * n]
            cur = 0
            for step in range(L):
                k = ids[r, step]
                nan_a = False
                for i in range(ni):
                    nan_a |= at[k, lo + t0 + i] != at[k, lo + t0 + i]
                if nan_a or _tile(buf, cur, ni, at, k, lo + t0, bm[k], mode, rterm, P):
                    _tile_fix(buf, cur, ni, at, k, lo + t0, bm[k], offs, mode, rterm, P, P64, F, C)
                cur = 1 - cur
            for i in range(ni):
                out[r, (t0 + i) * n:(t0 + i + 1) * n] = buf[cur, i]
    return out


# ======================================================================================================
# The scalar route (float64): Arith.add_exact and Arith.round, one value at a time
# ======================================================================================================

@jit.njit
def _exact_add(x, y, mode, P64, F, C):
    """fl(x + y) for every x, y: the float64 sum (-0 for an exact zero under DOWN unless both are +0, IEEE 754
    6.3), rounded to odd at 53 bits with its TwoSum error, then rounded once (``_round_exact``)."""
    s = _first_nan(x, x + y)
    if mode == _DOWN and s == 0.0 and not (x == 0.0 and y == 0.0 and not np.signbit(x) and not np.signbit(y)):
        s = -0.0
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    if abs(e) > 0.0:                            # (NaN e, from an infinite s, changes nothing)
        b = _bits(s)
        b = b - np.uint64((b ^ _bits(e)) >> np.uint64(63)) | np.uint64(1)
        s = _value(b)
    return _round_exact(s, mode, P64, F, C)


@jit.njit
def _round_exact(v, mode, P64, F, C):
    """The accumulator value of the exact float64 v (Arith.round): NaN, inf and overflow as the conversion
    engine gives them; below min_normal the multiples of the quantum Q (k = v / Q rounded to an integer);
    in the normal range the bits rounded at d."""
    if C[_CNATIVE]:
        return np.float64(np.float32(v))        # FP32 with RNE: the IEEE conversion (Arith.round's)
    if v != v:
        return F[_FNAN]
    av = abs(v)
    if av == np.inf:
        return v if C[_COVF] == _IEEE else np.copysign(F[_FMAX], v) if C[_COVF] == _SAT else F[_FNAN]
    if av < F[_FMIN]:
        k = v * F[_FINVQ]                       # exact: a power-of-two scaling
        if mode == _RNE:
            k = np.rint(k)
        elif mode == _RNA:
            k = np.copysign(np.floor(abs(k) + 0.5), k)
        elif mode == _RTZ:
            k = np.trunc(k)
        elif mode == _UP:
            k = np.ceil(k)
        elif mode == _DOWN:
            k = np.floor(k)
        else:
            t = np.trunc(k)
            k = t + np.copysign(1.0, k) if t != k and np.fmod(t, 2.0) == 0.0 else t
        r = k * F[_FQ]
        if C[_CFTZ] and abs(r) < F[_FMIN]:
            r = np.copysign(0.0, r)
        return 0.0 if r == 0.0 and not C[_CNEGZ] else r
    r = _value(_round_bits(_bits(v), mode, P64))
    if abs(r) <= F[_FMAX]:
        return r
    # overflow, decided after rounding with an unbounded exponent: +-max where the policy saturates or the
    # mode rounds toward zero on this side; else inf, or NaN in formats without one
    if C[_COVF] == _SAT or mode == _RTZ or mode == _ODD or (mode == _UP and v < 0) or (mode == _DOWN and v > 0):
        return np.copysign(F[_FMAX], v)
    return np.copysign(np.inf, v) if C[_COVF] == _IEEE else F[_FNAN]


# ======================================================================================================
# Dispatch
# ======================================================================================================

def _word_params(fmt: Format, dtype, zero_ok: bool) -> tuple:
    """P for rounding floats of ``dtype`` (float32 or float64) to ``fmt``'s grid on their bits."""
    fb = np.finfo(dtype).nmant                  # 23 or 52 fraction bits
    top = np.dtype(dtype).itemsize * 8 - 1
    d = fb - fmt.man_bits
    word = np.uint32 if top == 31 else np.uint64
    lo = int(np.asarray(float(fmt.min_normal), dtype).view(word))
    hi = int(np.asarray(float(fmt.max_finite), dtype).view(word))
    mask, half = (1 << d) - 1, (1 << d) >> 1     # d = 0 (FP32 on float32 words): the plain float32 add
    vals = [d, mask, ((1 << (top + 1)) - 1) ^ mask, max(half - 1, 0), half, lo, hi - lo,
            0 if zero_ok else (1 << (top + 1)) - 1]
    return tuple(word(v) for v in vals)      # a tuple: numba holds it in registers (no aliasing with the buffers)


@lru_cache(maxsize=64)
def _params(ar: Arith, wide: bool) -> tuple:
    """(mode code, P, P64, F, C) of an accumulator; wide: float64 words, else float32 words."""
    fmt = ar.fmt
    ovf = {Overflow.IEEE: _IEEE, Overflow.SATURATE: _SAT, Overflow.NAN: _NAN}[ar.pol.overflow]
    nan = np.nan if fmt.has_nan else float(fmt.max_finite)      # NaN decodes to +qNaN; no NaN: nan_to = max
    F = (float(fmt.min_normal), 2.0 ** (fmt.emin - fmt.man_bits), 2.0 ** (fmt.man_bits - fmt.emin),
         float(fmt.max_finite), nan)
    C = (int(ar.native), int(ar.ftz), int(fmt.has_negative_zero), ovf)
    zero_ok = fmt.has_negative_zero and ar.mode is not Rounding.DOWN
    P64 = _word_params(fmt, np.float64, zero_ok)
    return _MODES[ar.mode], (P64 if wide else _word_params(fmt, np.float32, zero_ok)), P64, F, C


def _low32(ar: Arith) -> bool:
    """Can this format's chain run on float32 words? p <= 22 (round to odd at 24 bits, then once more) and a
    normal range inside float32's (the bits of a float32 subnormal are not rounded by the same rule)."""
    f = ar.fmt
    return f.precision <= 22 and f.emin >= -126 and f.emax <= 127


def covers(step: Chain) -> bool:
    """Does a Chain step run here? Terms as addends, an accumulator other than FP64, and the float environment
    with gradual underflow (as simulate's float32 paths need)."""
    ar = step.ar
    return step.addends == "t" and not ar.is64 and ar.mode in _MODES and native_fp32_ok()


def run(step: Chain, V, sub, ctx) -> np.ndarray:
    """The step's rows for the chunk ``sub`` (``covers`` is true): what numpysteps.run_chain returns."""
    variant, ar, rnd = step.variant, step.ar, step.rnd
    f32 = variant == "f32" or (variant == "low32" and _low32(ar))
    dt = np.float32 if f32 else np.float64
    mode, P, P64, F, C = _params(ar, not f32)
    if variant == "f32":
        mode = _HW
    ids = np.ascontiguousarray(step.ids, np.int64)
    s0 = np.ascontiguousarray(step.a.fetch(V, sub, None), dt)
    if isinstance(sub, _MatSource):
        at, bm = (sub.at32, sub.b32) if f32 else (sub.at, sub.b)
        lo, units = sub.lo, sub.hi - sub.lo
    else:
        xt = sub.xt32 if f32 else sub.xt
        bm = np.ascontiguousarray(xt[:, sub.lo:sub.hi])
        at, lo, units = np.ones((xt.shape[0], 1), dt), 0, 1
    rterm = rnd is not None and variant != "f32"
    calls.add()
    offs = np.empty(bm.shape[1], np.uint32 if f32 else np.uint64)     # _tile_fix's scratch
    return _chain(at, bm, ids, s0.reshape(ids.shape[0], -1), lo, units, offs, mode, rterm, P, P64, F, C)
