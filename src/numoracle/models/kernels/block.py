"""Compiled block FMA: simulate's BlockFMA steps as one numba kernel per step, bit-identical to block_fma.

``accumulate.block_fma`` is the reference (its steps are orders.BlockFMA's, docs/theory.md §4); this
module computes the same bits without materialising the (rows, n, batch) term arrays: the kernel
multiplies the inputs itself, two passes over each block (maximum, then truncated sum), the batch
innermost so that every pass is a contiguous, branch-free loop. Imported lazily when ``core.jit.kernel_for``
picks it (core/jit.py's contract): ``covers(step)`` decides up front (from the terms' exponent range and
the step's formats) which ``BlockStep``s it runs, the rest stay on the numpy path; ``run``, ``calls``.

One output ``d`` of one block, per (row r, batch element): the terms are t_k = a[i, k] * b[k, j]
(exact in float64: p_a + p_b <= 53) for the block's k, with raw labels la[i, k] + lb[k, j] (input
exponents clamped at emin; zeros -16000, see simsources._labels). A sum is the matmul of a row
of ones (label 0) with the inputs.

1. Pass 1: amax = max |t_k|, raw = max label. With inf/NaN among the inputs the pass also keeps the
   IEEE sum of the terms, in order; a block whose terms or c are not all finite gives that sum + c.
2. Ep = floor(log2 amax) from amax's exponent field (amax is a normal float64: ``covers``), raised to
   raw for subnormal inputs; Ec = c's exponent clamped at -126 (an FP32 register), -1 for c = 0.
   spc (K&M's carry flag) and E = the largest label, exactly as block_fma; the scale 2^(F + spc - E)
   and its inverse are built from their exponent fields (``block_scales``, branch-free).
3. Pass 2: Y = t_k * scale (exact: a power of two, no underflow by ``covers``), S += trunc(Y); with
   a sticky bit, S += 2 trunc(Y) + sign(Y - trunc Y), i.e. sign(Y) when bits were shifted out. The
   integers stay below 2^53 (2^24 for a float32 S), so they add exactly in any order.
4. c joins the same way, in float64; v = S / scale (a power-of-two scaling, exact).
5. Every v is rounded as if in the output format's normal range (core/jitround.round_bits, the kernels'
   one rounding step: one integer addition and mask, as Arith._round_bits), and the others are counted.
6. Those others, one by one (``block_others``): inf / NaN give their IEEE sum, S = 0 gives +0, the rest the
   same step for a whole value (core/jitround.round_value: the subnormal grid as Arith._slow, overflow as
   the engine, with K&M's rule that a result reaching 2^(emax+1) is +-inf, as block_fma).

The terms are float32 (twice the SIMD lanes) where the products and scaled terms are exact in
float32, and the block sums too where simulate's own float32 condition (``_block32``) holds.

Chained blocks (every BlockFMA order over K > n: a ``BlockRun`` of the program) run many steps per call
through jitblockrun.py, which reuses these steps.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...core import jit
from ...core.kernels import rounding as jr
from ..engine.accumulate import Arith
from ..engine.sources import ZERO_LABEL, MatSource
from ..engine.steps import BlockStep

__all__ = ["covers", "run", "calls", "terms32", "Inputs"]

_MODES = jit.MODE_CODES
_MAG = 0x7FFF_FFFF_FFFF_FFFF
_EXP_LIMIT = 1000        # every scale, scaled term and v stays a normal float64 within 2^+-1000
calls = jit.Calls()      # block FMA steps the kernels have run (jitblockrun's too; the tests read calls.count)


# ======================================================================================================
# The kernel
# ======================================================================================================

@jit.njit
def _exponent(bits):
    """floor(log2 |x|) of a normal float64 from its bits: the biased exponent field minus 1023."""
    return ((bits >> 52) & 0x7FF) - 1023


@jit.njit
def _pow2(e):
    """The bits of 2^e, -1022 <= e <= 1023: exponent field e + 1023, fraction 0."""
    return (e + 1023) << 52


@jit.njit
def block_scales(amax, lmax, cb, c0, scale_b, inv_b, scw, clamp, frac, sticky, carry, sub_inputs, keyed):
    """Step 2 for one row of outputs, branch-free (selects): E, K&M's carry flag, the scale 2^(F + spc - E)
    and its inverse (halved with a sticky bit: S then counts half units), and the scale the terms are
    multiplied by, scw = min(scale, clamp) in the terms' type. As block_fma: has_p = some product != 0;
    Ep = floor(log2 amax) (amax in the terms' type, read as float64 bits), raised to the max raw label for
    subnormal inputs; Ec = c's exponent clamped at -126 (-1 for c = 0); spc = carry & has_p & Ep == raw + 1 &
    (c = 0 | raw >= Ec); E = max(Ep, Ec) with both, else the one present. ``keyed``: amax is the largest key
    product (``keys_of``) and lmax is not read: its exponent is 2 raw + (Ep - raw)."""
    jr.wide_vectors()
    for j in range(amax.size):
        ab, cbits = np.int64(jr.as_bits(np.float64(amax[j]))), cb[c0 + j]
        has_p = ab != 0                                       # amax >= 0: +0 has all bits 0
        ev = _exponent(ab)
        raw = ev >> 1 if keyed else np.int64(lmax[j])         # (floor(ev / 2): an arithmetic shift)
        ep = raw + (ev & 1) if keyed else ev
        ep = max(ep, raw) if sub_inputs else ep
        has_c = (cbits & _MAG) != 0
        ec = max(_exponent(cbits), -126) if has_c else -1
        spc = carry & has_p & (ep == raw + 1) & (~has_c | (raw >= ec))
        e = (max(ep, ec) if has_c else ep) if has_p else ec
        sh = frac + np.int64(spc) - e
        scale_b[j] = _pow2(sh)
        inv_b[j] = _pow2(-sh - sticky)
        scw[j] = min(jr.as_value(np.uint64(_pow2(sh))), clamp)


@jit.njit
def block_pass1(a, la, b, lb, i, ks, j0, j1, amax, lmax, fsum, finite):
    """Step 1 for output row i: max |t| and the max raw label over the block's terms ks (+ the IEEE sum of
    the terms, in order, when the inputs hold inf / NaN)."""
    jr.wide_vectors()
    amax[:] = 0.0
    lmax[:] = -(1 << 30)
    fsum[:] = -0.0
    for kk in range(ks.size):
        k = ks[kk]
        ak, lak = a[i, k], la[i, k]
        bk, lbk = b[k, j0:j1], lb[k, j0:j1]
        for j in range(j1 - j0):
            amax[j] = max(np.abs(ak * bk[j]), amax[j])
            lmax[j] = max(lak + lbk[j], lmax[j])
        if not finite:
            for j in range(j1 - j0):
                fsum[j] += ak * bk[j]


@jit.njit
def block_pass2(a, b, i, ks, j0, j1, scw, S, sticky):
    """Step 3 for output row i: S = the sum of trunc(t * scale) (exact: integers below 2^53, or below 2^24
    for a float32 S). With a sticky bit, 2 trunc(Y) + sign(Y) when bits were shifted out: Y - trunc(Y)
    is exact and has Y's sign then, 0 otherwise."""
    jr.wide_vectors()
    S[:] = 0.0
    for kk in range(ks.size):
        k = ks[kk]
        ak, bk = a[i, k], b[k, j0:j1]
        if sticky:
            for j in range(j1 - j0):
                y = ak * bk[j] * scw[j]
                ty = np.trunc(y)
                td = np.float64(ty)               # 2 trunc(Y) +- 1 may need a 25th bit
                S[j] += td + td + np.float64(np.sign(y - ty))
        else:
            for j in range(j1 - j0):
                S[j] += np.trunc(ak * bk[j] * scw[j])


@jit.njit
def block_others(out, c, fsum, vbuf, vb, base, finite, mode, g, lim):
    """Step 6: the outputs step 5 does not cover, one by one: inf / NaN give their IEEE sum (the terms in
    order, then c), a zero sum +0, the rest the kernels' rounding of a whole value (core/jitround.round_value:
    the subnormal grid, the overflow policy, K&M's infinities; inputs with inf / NaN: every output of the
    row, as only their sum tells)."""
    jr.wide_vectors()
    for j in range(vb.size):
        o = base + j
        if finite and jr.outside(vb[j], g) <= g.span:
            continue
        ieee = fsum[j] + c[o]
        if not np.isfinite(ieee):
            out[o] = ieee
        elif vbuf[j] == 0:
            out[o] = 0.0
        else:
            out[o] = jr.round_value(vbuf[j], mode, g, lim)


@jit.njit
def _block_kernel(a, la, b, lb, i0, i1, j0, j1, tids, c, out, S, frac, sticky, carry, sub_inputs, finite, clamp,
                  mode, g, lim):
    """One BlockFMA step: out[r * B + (i - i0) * nj + (j - j0)] = BFMA(c[same]; a[i, k] * b[k, j] for k in
    tids[r]) for i in i0..i1-1, j in j0..j1-1 (B = (i1 - i0) * nj), rounded by (mode, g, lim).

    Every inner loop runs over j (contiguous rows of b, lb and the per-output buffers) without branches.
    a, b: float64, or float32 where the products and scaled terms are exact in float32 (twice the
    lanes; the scale is then clamped at ``clamp`` = 2^127 as block_fma does); S (nj,): the block sums'
    buffer, float32 only where simulate's _block32 holds (the block sums are exact in float32 too).
    """
    jr.wide_vectors()
    w = tids.shape[0]
    nj = j1 - j0
    B = (i1 - i0) * nj
    amax, scw = np.empty(nj, b.dtype), np.empty(nj, b.dtype)    # the terms' type
    fsum, scale, inv, vbuf = np.empty(nj), np.empty(nj), np.empty(nj), np.empty(nj)
    lmax = np.empty(nj, np.int32)
    scale_b, inv_b, vb = scale.view(np.int64), inv.view(np.int64), vbuf.view(np.uint64)
    ob, cb = out.view(np.uint64), c.view(np.int64)
    for r in range(w):
        ks = tids[r]
        for i in range(i0, i1):
            base = r * B + (i - i0) * nj
            block_pass1(a, la, b, lb, i, ks, j0, j1, amax, lmax, fsum, finite)            # 1.
            block_scales(amax, lmax, cb, base, scale_b, inv_b, scw, clamp, frac, sticky, carry, sub_inputs,
                         False)                                                                  # 2.
            block_pass2(a, b, i, ks, j0, j1, scw, S, sticky)                                    # 3.
            for j in range(nj):                   # 4. c joins the same way, in float64; v = S / scale
                yc = c[base + j] * scale[j]
                tc = np.trunc(yc)
                vbuf[j] = (np.float64(S[j]) + (tc + tc + np.sign(yc - tc) if sticky else tc)) * inv[j]
            odd = 0                               # 5. round every v as if in the normal range; count the
            for j in range(nj):                   # others (zero, tiny, huge, inf, NaN)
                bits = vb[j]
                odd += jr.outside(bits, g) > g.span
                ob[base + j] = jr.round_bits(bits, mode, g)
            if odd or not finite:                 # 6.
                block_others(out, c, fsum, vbuf, vb, base, finite, mode, g, lim)


# ======================================================================================================
# The caller's side
# ======================================================================================================

def _lowest(fmt) -> int:
    """An exponent below every nonzero value a register of fmt's exponent range can hold (<= 51 bits)."""
    return fmt.emin - 60


@lru_cache(maxsize=1024)
def _covered(bo, ar: Arith, n: int, info: tuple) -> bool:
    _, qt, ht = info
    qc, hc = _lowest(ar.fmt), ar.fmt.emax + 1
    lo_e, hi_e = min(qt, qc, -126) - 2, max(ht, hc) + 2
    F = bo.frac_bits + 1
    lim = _EXP_LIMIT
    return (ar.mode in _MODES and not ar.is64 and F + 2 - lo_e <= lim and lo_e - F - 2 >= -lim
            and min(qt, qc) + F - hi_e >= -lim and hi_e + int(n + 1).bit_length() + 2 <= lim)


def covers(step: BlockStep) -> bool:
    """Does the kernel run this step? Every scale, scaled term and sum stays a normal float64 (far inside
    float64's range: true for every format simulate takes except the widest exponent ranges), and the
    output mode is one the kernel rounds in (decided from the formats and the terms' range ``step.info``)."""
    return _covered(step.order, step.ar, step.tids.shape[1], step.info)


def terms32(step: BlockStep) -> bool:
    """float32 terms with float64 block sums: the inputs are FP32 numbers and their products too (float32
    multiplication is then exact), and every scale 2^(F + spc - E) and nonzero scaled term is a normal
    float32 (the scaled terms are then exact, and so are their truncations). A truncating block (no sticky
    bit) needs the scaled terms exact only where |Y| >= 1: those are normal float32 numbers of at most 24
    bits, so exact; a smaller one may round (even to a subnormal or 0) but stays below 1 in magnitude, and
    its truncation is +-0 either way, as the exact Y's: so there the large accumulators (E up to c's
    exponent, far above the terms') need no bound."""
    _, qt, ht = step.info
    hi_e = max(ht, step.ar.fmt.emax + 1) + 2
    F = step.order.frac_bits
    small_ok = step.order.truncate or qt + F - hi_e >= -126    # the smallest scaled term
    return step.terms_fp32 and F + 2 - qt <= 127 and F - hi_e >= -126 and small_ok


@jit.njit
def _labels_into(v, emin, out, shift, field, bias):
    """simsources._labels of the float32 or float64 values v (C-contiguous) into out (int32 or float32), in one
    pass: max(the exponent field - bias, emin) (a subnormal's field 0 lies below every emin held), ZERO_LABEL
    for a zero, 0 for inf / NaN. shift, field, bias: the exponent field of v's words."""
    jr.wide_vectors()
    x, o = v.reshape(-1), out.reshape(-1)
    for j in range(x.size):
        b = jr.as_bits(x[j])
        e = np.int32((b >> shift) & field)
        lab = max(e - bias, emin)
        lab = ZERO_LABEL if jr.magnitude(b) == 0 else lab
        o[j] = 0 if e == field else lab


_FIELDS = {np.dtype(np.float32): (23, 0xFF, 127), np.dtype(np.float64): (52, 0x7FF, 1023)}


@jit.njit(inline="always")
def key_of(x, emin, shift, field, bias):
    """(key, label, x != 0) of one finite value x of a format with that emin, in a float type whose exponent
    field is (shift, field, bias): the key max(|x|, 2^lab) 2^lab (``keys_of``), 0 for a zero, as float64;
    lab = x's label, as _labels_into."""
    b = jr.as_bits(x)
    lab = max(np.int32((b >> shift) & field) - bias, emin)
    nz = jr.magnitude(b) != 0
    p = jr.as_value(np.uint64(_pow2(lab)))
    return (max(np.abs(np.float64(x)), p) * p if nz else 0.0), lab, nz


@jit.njit
def _keys_into(v, emin, out, shift, field, bias):
    """out = the keys of the finite values v (``key_of``; none written where out is empty), in one pass;
    returns the least and the greatest label of the nonzero v."""
    jr.wide_vectors()
    x, o = v.reshape(-1), out.reshape(-1)
    lo, hi = np.int32(1 << 30), np.int32(-(1 << 30))
    write = o.size > 0
    for j in range(x.size):
        k, lab, nz = key_of(x[j], emin, shift, field, bias)
        lo = min(lo, lab) if nz else lo
        hi = max(hi, lab) if nz else hi
        if write:
            o[j] = k
    return lo, hi


_NORMAL = {np.dtype(np.float32): (-126, 127), np.dtype(np.float64): (-1022, 1023)}


def key_fields(v: np.ndarray, fmt) -> tuple[int, int, int, int]:
    """``key_of``'s (emin, shift, field, bias) for values of fmt held in v's float type."""
    return (int(fmt.emin),) + _FIELDS[v.dtype]


def keys_of(a: np.ndarray, fa, b: np.ndarray, fb, labels_a: tuple[int, int] | None = None) -> np.ndarray | None:
    """Pass 1's keys of B for finite inputs a, b (formats fa, fb; float32 or float64), or None where the keys of
    either leave the normal range of that type. The key of a value x of label lab is max(|x|, 2^lab) 2^lab, 0
    for x = 0 (``key_of``); the kernels make A's own (a scalar per term and row: no array).

    A product of nonzero keys is m 2^(2 (la + lb)), m = the product of the two significands max(|a|, 2^la) /
    2^la, in [1, 4), and m >= 2 exactly where the true product's significand |a b| / 2^(la + lb) is >= 2 (a
    subnormal factor's significand is < 1, so the true one is < 2 there, and so is m's). The key's exponent
    is 2 (la + lb) + [m >= 2]: keys order as (raw label, carry), and the largest key's exponent is 2 raw + c,
    c = [some product of label raw has a significand >= 2]. Step 1 needs raw and max(Ep, raw), Ep =
    floor(log2 max |t|); a product of label raw has floor(log2 |t|) = raw + 1 if its significand is >= 2,
    else at most raw, and one of a smaller label at most raw, so max(Ep, raw) = raw + c: one multiply and
    one maximum a term give both. The keys are exact (power-of-two scalings) and so are their products
    (as the terms are, in the terms' type: ``terms32``) where all lie in the normal range, which is checked.
    ``labels_a``: A's least and greatest label of its nonzero values where the caller knows them (simsources'
    _Stats.labels), else read here in a pass over a."""
    emin, emax = _NORMAL[a.dtype]
    kb = np.empty(b.shape, b.dtype)
    lo_a, hi_a = labels_a if labels_a is not None else _keys_into(
        np.ascontiguousarray(a), *_with_out(key_fields(a, fa), np.empty(0, a.dtype)))
    lo_b, hi_b = _keys_into(np.ascontiguousarray(b), *_with_out(key_fields(b, fb), kb))
    if lo_a > hi_a or lo_b > hi_b:                 # all zeros on one side: the label route
        return None
    ok = 2 * min(lo_a, lo_b, lo_a + lo_b) >= emin and 2 * max(hi_a, hi_b, hi_a + hi_b) + 1 <= emax
    return kb if ok else None


def _with_out(fields: tuple, out: np.ndarray) -> tuple:
    """_keys_into's arguments after v: (emin, out, shift, field, bias)."""
    return (np.int32(fields[0]), out) + fields[1:]


def labels_of(v: np.ndarray, fmt, dtype) -> np.ndarray:
    """simsources._labels(v, fmt) as ``dtype`` (int32 or float32), by ``_labels_into``."""
    out = np.empty(v.shape, dtype)
    _labels_into(np.ascontiguousarray(v), np.int32(fmt.emin), out, *_FIELDS[v.dtype])
    return out


class Inputs:
    """What the kernels read of one simulate call's source (kept in its Context): the labels as int32 (and
    float32 for jitblockrun), whether every input is finite, and the inputs in float64 or float32."""

    def __init__(self, src, sub_inputs: bool):
        self.src, self.sub_inputs, self.mat = src, bool(sub_inputs), isinstance(src, MatSource)
        self._ops = src.operands()     # matmul / dot: A (m, K) and B (K, n), rows i of A are the units;
        self.finite = bool(src.finite)  # sum: a row of ones (label 0) times the inputs, the batch in j
        self._as: dict = {}
        self._ab: dict[bool, tuple] = {}
        self._keys: dict[bool, tuple | None] = {}
        self._round: dict[Arith, tuple] = {}

    def _labels_as(self, dtype) -> tuple[np.ndarray, np.ndarray]:
        """The labels (of A and B, or of ones and the inputs) as ``dtype``, made on first use."""
        if dtype not in self._as:
            labels = tuple(labels_of(v, fmt, dtype) for v, fmt in self._ops)
            self._as[dtype] = labels if self.mat else (np.zeros((1, self.src.K), dtype),) + labels
        return self._as[dtype]

    @property
    def la(self) -> np.ndarray:
        return self._labels_as(np.int32)[0]     # _block_kernel's: int32 lanes, no widening

    @property
    def lb(self) -> np.ndarray:
        return self._labels_as(np.int32)[1]

    @property
    def laf(self) -> np.ndarray:
        return self._labels_as(np.float32)[0]   # jitblockrun's: float lanes (small integers: exact)

    @property
    def lbf(self) -> np.ndarray:
        return self._labels_as(np.float32)[1]

    @staticmethod
    def of(ctx) -> Inputs:
        """The call's Inputs (made on the first block step the kernels run)."""
        if "jitblock" not in ctx.kernels:
            ctx.kernels["jitblock"] = Inputs(ctx.src, ctx.sub_inputs)
        return ctx.kernels["jitblock"]

    def keys(self, f32: bool) -> tuple[np.ndarray, tuple] | None:
        """(``keys_of`` the inputs in float32 or float64 (``ab(f32)``), A's ``key_fields``); None where the inputs
        hold inf / NaN (step 1 then also sums the terms), or the keys leave the normal range."""
        if f32 not in self._keys:
            (a, b), fmts = self.ab(f32), [fmt for _, fmt in self._ops]
            fa, fb = fmts if self.mat else fmts * 2    # (a sum's row of ones: label 0 in every format)
            ra = self.src.labels_a if self.mat else (0, 0)     # (a sum's row of ones: label 0)
            kb = keys_of(a, fa, b, fb, ra) if self.finite else None
            self._keys[f32] = None if kb is None else (kb, key_fields(a, fa))
        return self._keys[f32]

    def ab(self, f32: bool) -> tuple[np.ndarray, np.ndarray]:
        """(a, b) in float64, or float32 (the source's exact float32 values: f32 only where they are)."""
        if f32 not in self._ab:
            src, dt = self.src, np.float32 if f32 else np.float64
            if self.mat:
                self._ab[f32] = (src.a32, src.b32) if f32 else (src.a, src.b)
            else:
                self._ab[f32] = (np.ones((1, src.K), dt), src.xt32 if f32 else src.xt)
        return self._ab[f32]

    def bounds(self, sub) -> tuple[int, int, int, int]:
        """(i0, i1, j0, j1): the chunk's rows of A (matmul) or its batch columns (sum)."""
        return (sub.lo, sub.hi, 0, self._ops[1][0].shape[1]) if self.mat else (0, 1, sub.lo, sub.hi)

    def rounding(self, ar: Arith) -> tuple:
        """(mode code, Grid of float64 bits, Limits): the kernels' rounding parameters of ``ar``."""
        if ar not in self._round:
            self._round[ar] = _rounding(ar)
        return self._round[ar]


def run(step: BlockStep, V, sub, ctx) -> np.ndarray:
    """The step's outputs (rows, batch) for the chunk ``sub`` (a view of the source), as numpysteps.run_block."""
    kin = Inputs.of(ctx)
    c = np.ascontiguousarray(step.c.fetch(V, sub, None), np.float64)
    w, B = c.shape
    i0, i1, j0, j1 = kin.bounds(sub)
    bo, ar, b32 = step.order, step.ar, step.b32
    f32 = b32 or terms32(step)
    a, b = kin.ab(f32)
    out, S = np.empty(w * B), np.empty(j1 - j0, np.float32 if b32 else np.float64)
    _block_kernel(a, kin.la, b, kin.lb, i0, i1, j0, j1, np.ascontiguousarray(step.tids, np.int64), c.reshape(-1),
                  out, S, int(bo.frac_bits), int(not bo.truncate), bool(bo.carry_bit), kin.sub_inputs, kin.finite,
                  2.0**127 if f32 else np.inf, *kin.rounding(ar))
    calls.add()
    return out.reshape(w, B)


def _rounding(ar: Arith) -> tuple:
    """(mode code, Grid, Limits) of the output arithmetic ``ar`` (core/kernels/rounding.py): as Arith.round, with
    K&M's rule that a result reaching 2^(emax + 1) is +-inf in every mode (formats with infinities)."""
    fmt = ar.fmt
    inf_at = 2.0 ** (fmt.emax + 1) if fmt.has_inf else np.inf
    return _MODES[ar.mode], jr.grid(fmt, np.float64), jr.limits(fmt, ar.pol.overflow, ar.ftz, ar.native, inf_at)
