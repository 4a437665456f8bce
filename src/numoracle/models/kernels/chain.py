"""simulate's chains compiled (numba): s = fl(s + t_j) along each row, bit-identical to the numpy path.

Imported only when ``core.jit.kernel_for`` picks it (core/jit.py's contract): ``covers(step)`` says, before
anything runs, whether a ``Chain`` step (models/engine/steps.py) can run here; ``run`` then computes what the numpy
reference (``numpysteps.run_chain``) does, and ``calls`` counts the steps run. A chain's addends must be
terms (inputs, or exact products); the accumulator any format simulate takes except FP64. Every plan
("direct", "odd") computes the same function, the correctly rounded sum (accumulate.Arith), so one exact
method serves them all:

1. the float sum and its error: s = fl(x + y), e = (x + y) - s exactly (TwoSum; Knuth, TAOCP 4.2.2);
2. s rounded to odd at the float's precision P from s and e: truncate toward zero, set the last bit when
   e != 0. Rounding that once more to p <= P - 2 bits is one correct rounding, in every mode (Boldo &
   Melquiond 2008), as in ``Arith.add_exact``;
3. where s lies outside the format's normal range [min_normal, max_finite] (zeros, subnormals, overflow,
   inf, NaN) the element is redone by the scalar route (``_exact_add``, then the kernels' one rounding step
   ``core/jitround.round_value``: the subnormal grid, ftz, the overflow policy, the NaN the engine gives);
4. otherwise the rounding is done on the bits: the format's quantum at s is the float's quantum times 2^d
   (``core/jitround.round_bits``: one case per mode).

5. an FP16 accumulator in RNE (no ftz) whose terms are exact products (or inputs) of FP16 values and whose
   starting sums are FP16 values is IEEE binary16's fused multiply-add, s = fma(a, b, s): one RNE rounding of
   the exact s + a b, gradual underflow as the format's. Where the CPU has it in hardware (AVX512-FP16's
   vfmadd231ph, 32 lanes; ``jr.cpu_has``) the chain runs on FP16 bits (``chain_schedule16``); a result that is
   inf or NaN (overflow: the policy decides) sends the whole step back to steps 1-4.
6. a BF16 accumulator in RNE (no ftz) on the same conditions with BF16 values: r = fma(a, b, s) in float32,
   then step 4 on r (mode _B16), about a third fewer operations than steps 1-2. Rounding z = s + a b to 24 bits
   and then to 8 is one correct rounding unless r is a midpoint M of BF16's grid and z is not: z - M is a
   multiple of the smallest of the operands' lowest bits and M's, so |z - M| <= 2^(e - 24) (e: z's exponent)
   needs an operand whose lowest bit is at most 2^(e - 24). If that is a b (<= 16 significant bits, a
   significand at most 255^2 < 2^16 - 2^9), |a b| is more than 511 ulps of 2^(e - 24) away from the nearest
   odd multiple of 2^(e - 8) that s would have to cancel; if it is s (8 bits: |s| < 2^(e - 16)), a b must be
   within 2^(e - 16) of M, and a b, with its top bit at e and at most 16 bits, is then M itself: r == a b with
   s != 0, which the loop flags; flagged and out-of-range elements are redone by steps 1-3.

Two word sizes: float64/uint64, and float32/uint32 (twice the SIMD lanes) for formats with p <= 22 inside
FP32's normal range whose terms are exact in float32 (simulate's "low32" chains: FP16, BF16, FP8, TF32
accumulators). simulate's "f32" chains (FP32 accumulator, RNE, terms exact or FP32-rounded products) are
plain float32 additions here as in numpy (mode _HW). A chain with an FP32 accumulator in RNE (no ftz) whose
terms are exact products of FP32 inputs and whose starting sums are FP32 numbers is IEEE binary32's fused
multiply-add, s = fma(a, b, s): one RNE rounding of the exact s + a b, subnormals and overflow as the
format's (mode _FMA; float32 words, however wide the products are). The loops: tiles of output rows (their running sums
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
from numba.core import cgutils
from numba.extending import intrinsic

from ...core import jit
from ...core.formats.format import BF16, FP16
from ...core.formats.policy import Rounding
from ...core.kernels import rounding as jr
from ..engine.accumulate import Arith, native_fp32_ok, triple
from ..engine.sources import FP32_TRIPLE, MatSource, triple_fits
from ..engine.steps import Chain

__all__ = ["covers", "run", "calls"]

calls = jit.Calls()  # chain steps run by the kernel (the tests read calls.count)

_TILE = 2048         # running sums held per block of output rows: two buffers of them stay in L1

# mode codes
_RNE, _DOWN = jit.RNE, jit.DOWN
_HW = max(jit.MODE_CODES.values()) + 1   # this kernel's own: plain float32 addition (FP32 accumulator, RNE)
_FMA = _HW + 1                           # and IEEE binary32 fused multiply-add (FP32 accumulator, RNE, exact terms)
_B16 = _FMA + 1                          # and BF16 in RNE through a float32 fma (step 6)
_MODES = jit.MODE_CODES
# the rounding parameters (core/kernels/rounding.py): P a Grid of the lanes' words (uint32 or uint64), P64 the Grid
# of float64 words, lim the Limits of the scalar route


# ======================================================================================================
# The vector steps
# ======================================================================================================

@intrinsic
def _fma(typingctx, a, b, c):
    """a b + c rounded once (LLVM's fma: one instruction where the CPU has FMA, a correct fmaf call elsewhere)."""
    if a == b == c and isinstance(a, types.Float):
        def codegen(context, builder, sig, args):
            t = args[0].type
            name = "llvm.fma.f32" if a == types.float32 else "llvm.fma.f64"
            return builder.call(cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t, t, t]), name),
                                args)
        return a(a, b, c), codegen
    return None


@intrinsic
def _fma16(typingctx, a, b, c):
    """IEEE binary16's a b + c rounded once (RNE), on FP16 bits in uint16 words (LLVM's fma.f16: AVX512-FP16's
    vfmadd231ph where the CPU has it, a correct library call elsewhere)."""
    if a == b == c == types.uint16:
        def codegen(context, builder, sig, args):
            h = ir.HalfType()
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(h, [h, h, h]), "llvm.fma.f16")
            r = builder.call(fn, [builder.bitcast(v, h) for v in args])
            return builder.bitcast(r, ir.IntType(16))
        return types.uint16(a, b, c), codegen
    return None


@jit.njit(inline="always")
def _first_nan(x, r):
    """r = x op y, except that x's NaN (quieted) wins when x is NaN: the operand order numpy's loops and x86 keep
    (both NaN: the first source's), which LLVM may swap in a commutative add or multiply."""
    return x + x if x != x else r


@jit.njit(inline="always")
def _offset(b, P):
    """|x| - min_normal on the bits of x (step 3): above P.span exactly where x lies outside [min_normal,
    max_finite] (the unsigned difference wraps around below min_normal; inf and NaN lie above max_finite).
    A zero takes P.zero_ok: 0 where its bits need no change (the float sum of x and y already has the
    IEEE sign of an exact zero sum, and rounding keeps it), all ones under DOWN (-0 unless both operands are
    +0) and in formats without -0."""
    m = jr.magnitude(b)
    return jr.zero_or(m, P.zero_ok, jr.sub(m, P.lo))


@jit.njit(inline="always")
def _step(x, y, mode, P):
    """Steps 1-4 of fl(x + y): (bits of the result, its ``_offset``: the scalar route redoes it when above span)."""
    s = x + y                                   # 1. TwoSum: s + e == x + y exactly (NaN e: flagged below)
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    b = jr.as_bits(s)                           # 2. round to odd where e != 0 (NaN e too): one ulp toward zero
    odd = jr.or_(jr.sub(b, jr.sign(jr.xor(b, jr.as_bits(e)))), jr.k(b, 1))   # where e points there (the sign
    b = odd if e != 0 else b                    #    bits of s and e differ), then the last bit set (a select)
    return jr.round_bits(b, mode, P), _offset(b, P)


@jit.njit(inline="always")
def _tile_loop(buf, cur, ni, am, k, i0, brow, mode, rterm, P):
    """buf[1 - cur, i, j] = fl(buf[cur, i, j] + am[i0 + i, k] * brow[j]) (the term rounded first when rterm) for
    i < ni and every j; True when some element left the normal range (``_tile_fix`` then redoes the tile:
    buf[cur] is kept). Inlined with a constant mode and rterm: the inner loop has no branch and vectorises."""
    worst = jr.k(P.lo, 0)                       # the largest offset (one unsigned max per element)
    for i in range(ni):
        a = am[i0 + i, k]                       # (not NaN: chain_schedule sends such tiles to _tile_fix)
        sc, sn = buf[cur, i], buf[1 - cur, i]
        for j in range(sc.size):
            if mode == _FMA:                    # IEEE binary32: s = fma(a, b, s) (no range check needed)
                sn[j] = _first_nan(sc[j], _fma(a, brow[j], sc[j]))
                continue
            y = a * brow[j]
            if mode == _B16:                    # step 6: fma, then step 4; r == a b with s != 0 is redone
                r = _fma(a, brow[j], sc[j])
                b = jr.as_bits(r)
                lost = jr.k(b, 0) if r != y or sc[j] == 0 else jr.k(b, 0xFFFFFFFF)
                worst = jr.umax(worst, jr.umax(_offset(b, P), lost))
                sn[j] = jr.as_value(jr.round_bits(b, _RNE, P))
                continue
            if rterm:                           # fma=False: the term is rounded to the accumulator first
                yb = jr.as_bits(y)
                worst = jr.umax(worst, _offset(yb, P))
                y = jr.as_value(jr.round_bits(yb, mode, P))
            if mode == _HW:
                sn[j] = _first_nan(sc[j], sc[j] + y)  # IEEE binary32 addition, as numpy's float32 chain
            else:
                r, off = _step(sc[j], y, mode, P)
                worst = jr.umax(worst, off)
                sn[j] = jr.as_value(r)
    return worst > P.span


@jit.njit
def _tile_any(buf, cur, ni, am, k, i0, brow, mode, rterm, P):
    jr.wide_vectors()
    return _tile_loop(buf, cur, ni, am, k, i0, brow, mode, rterm, P)


@jit.njit
def _tile(buf, cur, ni, am, k, i0, brow, mode, rterm, P):
    """``_tile_loop`` with a constant mode for RNE and the plain float32 add (branch-free loops that vectorise);
    the other modes and fma=False (rterm) share one loop that branches on them, so that numba compiles
    three loops instead of fourteen (the compile time is the first call's)."""
    jr.wide_vectors()
    if rterm or (mode != _RNE and mode != _HW and mode != _FMA and mode != _B16):
        return _tile_any(buf, cur, ni, am, k, i0, brow, mode, rterm, P)
    if mode == _RNE:
        return _tile_loop(buf, cur, ni, am, k, i0, brow, _RNE, False, P)
    if mode == _FMA:
        return _tile_loop(buf, cur, ni, am, k, i0, brow, _FMA, False, P)
    if mode == _B16:
        return _tile_loop(buf, cur, ni, am, k, i0, brow, _B16, False, P)
    return _tile_loop(buf, cur, ni, am, k, i0, brow, _HW, False, P)


@jit.njit(inline="always")
def _row_redo(sc, sn, offs, a, brow, mode, rterm, P):
    """One row of ``_tile_loop`` (any a, NaN included; the mode a variable) that keeps each element's offset."""
    for j in range(sc.size):
        if mode == _FMA:
            sn[j] = _first_nan(sc[j], _fma(a, brow[j], sc[j]))
            offs[j] = jr.k(P.lo, 0)
            continue
        y = _first_nan(a, a * brow[j])
        off = jr.k(P.lo, 0)
        if rterm:
            yb = jr.as_bits(y)
            off = _offset(yb, P)
            y = jr.as_value(jr.round_bits(yb, mode, P))
        if mode == _HW:
            sn[j] = _first_nan(sc[j], sc[j] + y)
        else:
            r, o = _step(sc[j], y, mode, P)
            sn[j] = jr.as_value(r)
            off = jr.umax(off, o)
        offs[j] = off


@jit.njit
def _tile_fix(buf, cur, ni, am, k, i0, brow, offs, mode, rterm, P, P64, lim):
    """``_tile`` again, row by row, then the scalar route for the elements outside the normal range."""
    for i in range(ni):
        a = am[i0 + i, k]
        sc, sn = buf[cur, i], buf[1 - cur, i]
        _row_redo(sc, sn, offs, a, brow, mode, rterm, P)
        for j in range(sc.size):
            if offs[j] > P.span:
                y = np.float64(_first_nan(a, a * brow[j]))
                if rterm:
                    y = jr.round_value(y, mode, P64, lim)
                sn[j] = jr.like(sc[j], _exact_add(np.float64(sc[j]), y, mode, P64, lim))


@jit.njit(inline="always")
def _buffers(am, bm, units, W):
    """(out, buf, tile): the outputs, two buffers of running sums for a tile of output rows (read one, write the
    other; they stay in cache while the terms' rows stream through), and the tile's rows."""
    n = bm.shape[1]
    tile = max(1, _TILE // n)
    return np.empty((W, units * n), am.dtype), np.empty((2, tile, n), am.dtype), tile


@jit.njit(inline="always")
def _load(buf, s0, r, t0, ni):
    """buf[0] = the tile's starting sums (row r of s0, output rows t0 .. t0 + ni - 1)."""
    n = buf.shape[2]
    for i in range(ni):
        buf[0, i] = s0[r, (t0 + i) * n:(t0 + i + 1) * n]


@jit.njit(inline="always")
def _store(out, buf, cur, r, t0, ni):
    n = buf.shape[2]
    for i in range(ni):
        out[r, (t0 + i) * n:(t0 + i + 1) * n] = buf[cur, i]


@jit.njit
def chain_schedule(am, bm, ids, s0, lo, units, offs, mode, rterm, P, P64, lim):
    """out[r, i*n + j] = the chain s = s0[r, i*n + j]; s = fl(s + am[lo + i, k] * bm[k, j]) for k = ids[r, :], in
    tiles of output rows (``_buffers``)."""
    W, L = ids.shape
    out, buf, tile = _buffers(am, bm, units, W)
    fix = _RNE if mode == _B16 else mode
    for r in range(W):
        for t0 in range(0, units, tile):
            ni = min(tile, units - t0)
            _load(buf, s0, r, t0, ni)
            for step in range(L):
                k, cur = ids[r, step], step & 1
                nan_a = False
                for i in range(ni):
                    nan_a |= am[lo + t0 + i, k] != am[lo + t0 + i, k]
                if nan_a or _tile(buf, cur, ni, am, k, lo + t0, bm[k], mode, rterm, P):
                    _tile_fix(buf, cur, ni, am, k, lo + t0, bm[k], offs, fix, rterm, P, P64, lim)
            _store(out, buf, L & 1, r, t0, ni)
    return out


@jit.njit
def _tile16(buf, cur, ni, am, k, i0, brow):
    """Step 5 on FP16 bits: buf[1 - cur, i, j] = fma(am[i0 + i, k], brow[j], buf[cur, i, j]) for i < ni and every
    j; True when some result is inf or NaN (its magnitude bits above the largest finite's, 0x7BFF)."""
    jr.wide_vectors()
    worst = np.uint16(0)
    for i in range(ni):
        a = am[i0 + i, k]
        sc, sn = buf[cur, i], buf[1 - cur, i]
        for j in range(sc.size):
            r = _fma16(a, brow[j], sc[j])
            sn[j] = r
            worst = jr.umax(worst, jr.and_(r, jr.k(r, 0x7FFF)))
    return worst > np.uint16(0x7BFF)


@jit.njit
def chain_schedule16(am, bm, ids, s0, lo, units):
    """``chain_schedule`` for step 5, on FP16 bits (uint16 words: inputs and starting sums FP16 values): (out,
    True), or (_, False) as soon as a result is inf or NaN (the step is then run by ``chain_schedule``)."""
    W, L = ids.shape
    out, buf, tile = _buffers(am, bm, units, W)
    for r in range(W):
        for t0 in range(0, units, tile):
            ni = min(tile, units - t0)
            _load(buf, s0, r, t0, ni)
            for step in range(L):
                if _tile16(buf, step & 1, ni, am, ids[r, step], lo + t0, bm[ids[r, step]]):
                    return out, False
            _store(out, buf, L & 1, r, t0, ni)
    return out, True


# ======================================================================================================
# The scalar route (float64): Arith.add_exact and Arith.round (core/jitround.round_value), one value at a time
# ======================================================================================================

@jit.njit
def _exact_add(x, y, mode, P64, lim):
    """fl(x + y) for every x, y: the float64 sum (-0 for an exact zero under DOWN unless both are +0, IEEE 754
    6.3), rounded to odd at 53 bits with its TwoSum error, then rounded once (core/jitround.round_value)."""
    s = _first_nan(x, x + y)
    if mode == _DOWN and s == 0.0 and not (x == 0.0 and y == 0.0 and not np.signbit(x) and not np.signbit(y)):
        s = -0.0
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    if abs(e) > 0.0:                            # (NaN e, from an infinite s, changes nothing)
        b = jr.as_bits(s)
        b = b - np.uint64((b ^ jr.as_bits(e)) >> np.uint64(63)) | np.uint64(1)
        s = jr.as_value(b)
    return jr.round_value(s, mode, P64, lim)


# ======================================================================================================
# Dispatch
# ======================================================================================================

@lru_cache(maxsize=64)
def _params(ar: Arith, wide: bool) -> tuple:
    """(mode code, P, P64, lim) of an accumulator; wide: float64 words, else float32 words."""
    fmt = ar.fmt
    zero_ok = fmt.has_negative_zero and ar.mode is not Rounding.DOWN
    P64 = jr.grid(fmt, np.float64, zero_ok)
    lim = jr.limits(fmt, ar.pol.overflow, ar.ftz, ar.native)
    return _MODES[ar.mode], (P64 if wide else jr.grid(fmt, np.float32, zero_ok)), P64, lim


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


def _fma32(step: Chain, sub) -> bool:
    """Is the chain IEEE binary32's fused multiply-add (mode _FMA)? An FP32 accumulator in RNE without ftz
    (Arith.native), terms that are exact products (fma=True) of FP32 inputs, starting sums that are FP32
    numbers (values, not raw terms, from sources that fit FP32); the float environment's gradual underflow
    is ``covers``' check."""
    return (step.variant != "f32" and step.rnd is None and step.ar.native and bool(sub.inputs_fit_fp32)
            and step.a.t is None and all(triple_fits(o, FP32_TRIPLE) for o in step.sources))


_FP16_TRIPLE, _BF16_TRIPLE = triple(FP16), triple(BF16)


def _fp16_fma(step: Chain, sub) -> bool:
    """Does the chain take step 5? FP16 itself in RNE without ftz; terms that are exact products (fma=True) of
    finite inputs whose formats' values are FP16 values; starting sums that are FP16 values (values, not raw
    terms, from sources that fit FP16); the CPU's FP16 arithmetic."""
    ar = step.ar
    return (ar.fmt == FP16 and ar.mode is Rounding.NEAREST_EVEN and not ar.ftz and step.variant == "low32"
            and step.rnd is None and step.a.t is None and bool(sub.finite) and sub.inputs_fit(_FP16_TRIPLE)
            and all(triple_fits(o, _FP16_TRIPLE) for o in step.sources) and jr.cpu_has("avx512fp16"))


def _bf16_fma(step: Chain, sub) -> bool:
    """Does the chain take step 6? BF16 itself in RNE without ftz, a float32 chain whose terms are exact products
    (fma=True) of inputs whose formats' values are BF16 values, starting sums that are BF16 values."""
    ar = step.ar
    return (ar.fmt == BF16 and ar.mode is Rounding.NEAREST_EVEN and not ar.ftz and step.variant == "low32"
            and step.rnd is None and step.a.t is None and sub.inputs_fit(_BF16_TRIPLE)
            and all(triple_fits(o, _BF16_TRIPLE) for o in step.sources))


def _inputs16(sub, ctx) -> tuple:
    """The call's inputs as FP16 bits (uint16 words; exact: FP16 values), made once per call."""
    if "jitchain16" not in ctx.kernels:
        am, bm = _inputs32(sub)
        ctx.kernels["jitchain16"] = tuple(x.astype(np.float16).view(np.uint16) for x in (am, bm))
    return ctx.kernels["jitchain16"]


def _inputs32(sub) -> tuple:
    """The call's inputs as float32 (exact: FP32 numbers; the source's own, made once and shared by its views)."""
    return (sub.a32, sub.b32) if isinstance(sub, MatSource) else (sub.xt32,)


def run(step: Chain, V, sub, ctx) -> np.ndarray:
    """The step's rows for the chunk ``sub`` (``covers`` is true): what numpysteps.run_chain returns."""
    variant, ar, rnd = step.variant, step.ar, step.rnd
    fma = _fma32(step, sub)
    f32 = fma or variant == "f32" or (variant == "low32" and _low32(ar))
    dt = np.float32 if f32 else np.float64
    mode, P, P64, lim = _params(ar, not f32)
    if variant == "f32":
        mode = _HW
    if fma:
        mode = _FMA
    elif _bf16_fma(step, sub):
        mode = _B16
    ids = np.ascontiguousarray(step.ids, np.int64)
    s0 = np.ascontiguousarray(step.a.fetch(V, sub, None), dt)
    if isinstance(sub, MatSource):
        am, bm = _inputs32(sub) if f32 else (sub.a, sub.b)
        lo, units = sub.lo, sub.hi - sub.lo
    else:
        xt = _inputs32(sub)[0] if f32 else sub.xt
        bm = np.ascontiguousarray(xt[:, sub.lo:sub.hi])
        am, lo, units = np.ones((1, xt.shape[0]), dt), 0, 1
    rterm = rnd is not None and variant != "f32" and not fma
    calls.add()
    if _fp16_fma(step, sub):
        am16, bm16 = _inputs16(sub, ctx) if isinstance(sub, MatSource) else (
            np.full((1, bm.shape[0]), 0x3C00, np.uint16), bm.astype(np.float16).view(np.uint16))  # (1.0: 0x3C00)
        s16 = s0.astype(np.float16).view(np.uint16).reshape(ids.shape[0], -1)
        out, ok = chain_schedule16(am16, bm16, ids, s16, lo, units)
        if ok:
            return out.view(np.float16)
    offs = np.empty(bm.shape[1], np.uint32 if f32 else np.uint64)     # _tile_fix's scratch
    return chain_schedule(am, bm, ids, s0.reshape(ids.shape[0], -1), lo, units, offs, mode, rterm, P, P64, lim)
