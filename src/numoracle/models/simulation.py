"""Bit-exact simulation of order-controlled reductions: sum, dot, matmul (docs/architecture.md).

``simulate(op, *inputs, acc=FP32, order=Sequential(), rounding="rne", fma=True, out=None)`` returns
what a kernel that accumulates in ``acc`` along ``order`` computes, as exact float64 values (or
codes). The inputs are decoded exactly; products of inputs are exact in float64 (p_a + p_b <= 53);
every rounding step is exact (numoracle.models.accumulate). The order is compiled once per (order, K) into
waves of independent steps (numoracle.orders), each run as one numpy operation across all outputs.

Each addition gets the cheapest exact method (``_plan``): "direct" when fl64(x + y) is exact or a
second rounding to nearest is innocuous, "odd" (round-to-odd at 53 bits where s lands on a critical
point) otherwise, "f64" for an FP64 accumulator. Runs of ``s = fl(s + t)`` (sequential chains, also
the blocks of Blocked and numpy's eight accumulators) run in float32 when every operand is an FP32
number: plain IEEE float32 addition for an FP32 accumulator with RNE, ``Arith.add32`` for formats of
at most 23 bits. Wide waves and large batches are cut into cache-sized pieces. With numba installed,
chains over terms run compiled instead (models/jitchain.py: the same bits, tested against this path).

>>> import numpy as np
>>> float(simulate("sum", np.ones(4096, np.float16), acc="fp16"))
2048.0
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ..core import jit
from ..core.convert import cast, decode
from ..core.formats import FP32, FP64, Format, format_of
from ..core.policy import Rounding
from .accumulate import ZERO_SOURCE, Arith, block_fma, block_format, native_fp32_ok
from .arithmetic import Arithmetic, takes_arithmetic
from .orders import BlockFMA, Order, Sequential, build
from .ordertext import as_order
from .simsources import _FP32, _as_index, _fits, _sources

__all__ = ["simulate"]

_BUDGET = 96 << 20       # bytes of the value buffer (all live slots) per batch chunk
_PASS = 1 << 18          # elements of the widest operand of one numpy pass (2 MiB: stays in cache)
_MAX_CHUNK = 1 << 17     # outputs per chunk


# ======================================================================================================
# Inputs: exact float64 values, and the terms (inputs or exact products) computed on demand
# ======================================================================================================

@lru_cache(maxsize=256)
def _compiled(order: Order, K: int):
    """(schedule, slot of every value, slot count): linear-scan allocation over the waves.

    A value's slot is released after the last wave that reads it; a wave reads all its operands
    before it writes its results, so its results may take slots its own operands release.
    """
    s = build(order, K)
    nw = len(s.waves)
    last = np.full(s.n_vals, -1, np.int64)
    born = np.zeros(s.n_vals, np.int64)
    for i, w in enumerate(s.waves):
        born[w.dst] = i
        for r in (w.a, w.b if w.kind != "bfma" else None):
            if r is not None:
                last[r[r >= 0]] = i
    last[s.result] = nw
    last = np.maximum(last, born)
    order_ = np.argsort(last, kind="stable")
    cuts = np.searchsorted(last[order_], np.arange(nw + 2))
    slot = np.empty(s.n_vals, np.int64)
    free = np.empty(0, np.int64)
    nslots = 0
    for i, w in enumerate(s.waves):
        dying = order_[cuts[i]:cuts[i + 1]]
        early = dying[born[dying] < i]
        free = np.concatenate([free, slot[early]])
        k = w.dst.size
        take = free[len(free) - min(k, len(free)):]
        free = free[:len(free) - len(take)]
        fresh = np.arange(nslots, nslots + k - len(take), dtype=np.int64)
        nslots += fresh.size
        slot[w.dst] = np.concatenate([take, fresh])
        dead = dying[born[dying] == i]
        free = np.concatenate([free, slot[dead]])
    return s, slot, max(nslots, 1)


class _Operand:
    """A wave operand: value slots, terms, or a mix (rows of each kind)."""

    def __init__(self, refs: np.ndarray, slot: np.ndarray):
        refs = np.asarray(refs, np.int64)
        self.refs, self.slot, self.parts = refs, slot, {}
        self.width = refs.size
        isv = refs >= 0
        self.vrows, self.trows = np.flatnonzero(isv), np.flatnonzero(~isv)
        self.vals = refs[isv]
        self.v = _as_index(slot[self.vals]) if self.vals.size else None
        self.t = _as_index(-1 - refs[~isv]) if self.trows.size else None

    def part(self, r0: int, r1: int) -> _Operand:
        """The operand of rows r0..r1-1 (cached)."""
        if r0 == 0 and r1 == self.width:
            return self
        if (r0, r1) not in self.parts:
            self.parts[(r0, r1)] = _Operand(self.refs[r0:r1], self.slot)
        return self.parts[(r0, r1)]

    def fetch(self, V, src, rnd: Arith | None):
        if self.t is None:
            return V[self.v]
        t = src.terms(self.t)
        if rnd is not None:
            t = rnd.round(t)        # fma=False: a term is rounded to the accumulator first
        if self.v is None:
            return t
        out = np.empty((self.width, V.shape[1]))
        out[self.vrows] = V[self.v]
        out[self.trows] = t
        return out


def _check_acc(fmt: Format) -> None:
    if fmt == FP64:
        return
    if fmt.precision > 51:
        raise ValueError(f"accumulator {fmt.name} has p = {fmt.precision}; the exact step (round to odd at "
                         "53 bits, then round once) needs p <= 51 (FP64 itself is supported directly)")
    # the quantum 2^(emin - m) and its reciprocal must be float64 numbers (the exact steps scale by both)
    if fmt.emax > 1000 or fmt.emin - fmt.man_bits < -1022 or not fmt.has_subnormals or not fmt.signed:
        raise ValueError(f"accumulator {fmt.name}: simulate supports signed formats with subnormals whose "
                         f"range lies well inside float64's (emax <= 1000 and emin - man_bits >= -1022; "
                         f"this one has emax = {fmt.emax}, emin - man_bits = {fmt.emin - fmt.man_bits})")


@lru_cache(maxsize=64)
def _arith(fmt: Format, mode: Rounding, ftz: bool, native: bool) -> Arith:
    _check_acc(fmt)
    if fmt == FP64 and mode in (Rounding.NEAREST_AWAY, Rounding.STOCHASTIC):
        raise ValueError(f"FP64 accumulation supports rne, rtz, ru, rd and rto, not {mode.value!r}")
    return Arith(fmt, mode, ftz, native)


@lru_cache(maxsize=256)
def _structure(order, K, acc, mode, fma, ftz, native):
    """Steps of the compiled schedule with their operands and arithmetic (independent of the data).

    An add or chain step carries, instead of its plan, the formats its value operands can come from
    and whether it reads terms; ``_plan`` turns that into a plan once the terms' range is known.
    """
    s, slot, nslots = _compiled(order, K)

    def arith(fmt, m):
        return _arith(acc if fmt is None else fmt, mode if m is None else Rounding.of(m), ftz, native)

    vsrc = np.zeros(s.n_vals, np.int64)     # per value: index into `sources` (the format it is in)
    sources: list[tuple] = [ZERO_SOURCE]
    containers: list[Format] = [acc]         # per source: the format whose codes hold such values
    steps = []

    def produced(dst, triple_, fmt):
        sources.append(triple_)
        containers.append(fmt)
        vsrc[dst] = len(sources) - 1

    def value_sources(*refs):
        vals = np.concatenate([np.asarray(r).ravel() for r in refs])
        return tuple(sources[i] for i in np.unique(vsrc[vals[vals >= 0]]))

    for w in s.waves:
        if w.kind == "bfma":
            bo: BlockFMA = w.key[0]
            cfmt = acc if w.key[1] is None else w.key[1]
            if cfmt == FP64:
                raise ValueError("BlockFMA needs an accumulator with p <= 51 (FP32 or FP16), not FP64")
            ar_out = arith(block_format(cfmt, bo.out_frac_bits), bo.out_rounding)
            produced(w.dst, ar_out.triple, cfmt)
            steps.append(("bfma", slot[w.dst], _Operand(w.a, slot), -1 - w.b, bo, ar_out))
            continue
        ar = arith(*w.key)
        dst = _as_index(slot[w.dst])
        if w.kind == "const":
            vsrc[w.dst] = 0
            steps.append(("const", dst, w.const))
            continue
        rnd = None if fma or ar.is64 else ar
        a = _Operand(w.a, slot)
        if w.kind == "load":
            produced(w.dst, ar.triple, ar.fmt)
            steps.append(("load", dst, a, ar))
            continue
        if w.kind == "add":
            b = _Operand(w.b, slot)
            ops = value_sources(w.a, w.b)
            produced(w.dst, ar.triple, ar.fmt)
            steps.append(("add", dst, a, b, ar, rnd, (ops, a.t is not None or b.t is not None)))
            continue
        # chain: the running sums are in ar's format; the addends are terms, values, or both
        isv = w.b >= 0
        cols = ("t", -1 - w.b) if not isv.any() else ("v", slot[w.b]) if isv.all() else \
            ("m", [_Operand(w.b[:, j], slot) for j in range(w.b.shape[1])])
        ops = value_sources(w.a, w.b) + (ar.triple,)
        produced(w.dst, ar.triple, ar.fmt)
        steps.append(("chain", dst, a, ar, rnd, (ops, not isv.all()), cols))
    return steps, int(slot[s.result]), nslots, containers[vsrc[s.result]]


def _plan(ar: Arith, ops: tuple, terms: bool, rnd, term_src: tuple) -> str:
    """How to compute fl(x + y) exactly for operands drawn from ``ops`` (and the terms)."""
    if ar.is64:
        return "f64"
    if terms:
        ops = ops + ((ar.triple if rnd is not None else term_src),)
    if max(o[2] for o in ops) + 1 - min(o[1] for o in ops) <= 53:
        return "direct"   # both operands are multiples of 2^q below 2^h: their sum fits 53 bits, exactly
    if (ar.mode is Rounding.NEAREST_EVEN and ar.fmt.precision <= 25 and ar.fmt.nan == "ieee"
            and all(_fits(o, ar.triple) for o in ops)):
        # both operands are in the p-bit format and 53 >= 2p + 2: rounding fl64(x+y) to nearest once
        # more is innocuous (Figueroa 1995; Roux 2014 covers subnormals and overflow)
        return "direct"
    return "odd"


def _prepare(order, K, acc, mode, fma, ftz, src):
    # float32 paths are used only while the FP environment has gradual underflow (checked per call)
    native = native_fp32_ok()
    steps, res_slot, nslots, res_fmt = _structure(order, K, acc, mode, fma, ftz, native)
    term_src, memo, out = src.info(), {}, []
    # Terms as float32 are exact when the inputs are FP32 numbers and their products fit FP32; with
    # fma=False, float32 multiplication also gives the FP32-rounded product (IEEE binary32, RNE).
    t32_exact = native and src.terms_fp32()
    t32_fp32_rounded = native and src.inputs_fit_fp32 and not fma
    for st in steps:
        if st[0] not in ("add", "chain"):
            out.append(st)
            continue
        ar, rnd, (ops, terms) = st[4:7] if st[0] == "add" else st[3:6]
        k = (ar, ops, terms, rnd is None)
        if k not in memo:
            memo[k] = _plan(ar, ops, terms, rnd, term_src)
        plan = memo[k]
        if st[0] == "add":
            out.append(st[:-1] + (plan,))
            continue
        _, dst, a, ar, rnd, _, cols = st
        in32 = all(_fits(o, _FP32) for o in ops) and cols[0] != "m"
        if in32 and ar.native and plan == "direct" and (not terms or t32_exact or t32_fp32_rounded):
            # s = fl32(s + t) is IEEE binary32 addition: one RNE rounding of the exact sum of two FP32
            # numbers (the plan certifies that rounding fl64(s + t) once more would be innocuous too)
            variant = "f32"
        elif in32 and ar.low32 and (not terms or t32_exact):
            variant = "low32"     # Arith.add32
        else:
            variant = "f64"
        out.append(("chain", variant, dst, a, ar, rnd, plan, cols))
    return out, res_slot, nslots, res_fmt


def _rows(step) -> tuple[int, int]:
    """(rows, elements per row and output) of the arrays one step makes."""
    if step[0] == "bfma":
        return step[3].shape
    if step[0] == "const":
        return 1, 1
    if step[0] == "chain":
        return step[3].width, 2
    return step[2].width, 1


def _pieces(rows: int, per_row: int, B: int) -> list[tuple[int, int]]:
    """Row ranges of a wave so that each numpy pass touches about _PASS elements (a wave's rows are
    independent, so they may run in pieces; results are stored after all pieces have read)."""
    step = max(1, _PASS // max(1, per_row * B))
    return [(r, min(r + step, rows)) for r in range(0, rows, step)]


def _run_chain(st, V, sub, r0: int, r1: int) -> np.ndarray:
    """Rows r0..r1-1 of a chain step: s = a; s = fl(s + b[:, j]) for every column j."""
    if jit.enabled():
        from . import jitchain  # numba: imported on first use
        if jitchain.covers(st):
            return jitchain.run(st, V, sub, r0, r1)
    _, variant, _, a, ar, rnd, plan, (kind, data) = st
    f32 = variant != "f64"
    one = r1 - r0 == 1

    def addend(j):
        if kind == "t":
            ids = slice(int(data[r0, j]), int(data[r0, j]) + 1) if one else _as_index(data[r0:r1, j])
            t = sub.terms32(ids) if f32 else sub.terms(ids)
            if rnd is not None and variant != "f32":   # fma=False: the term is rounded to acc first
                t = rnd.round32(t) if f32 else rnd.round(t)
            return t
        if kind == "v":
            ids = slice(int(data[r0, j]), int(data[r0, j]) + 1) if one else _as_index(data[r0:r1, j])
            return V[ids].astype(np.float32) if f32 else V[ids]
        return data[j].part(r0, r1).fetch(V, sub, rnd)

    n = data.shape[1] if kind != "m" else len(data)
    s = a.part(r0, r1).fetch(V, sub, None)
    if variant == "f32":
        s = s.astype(np.float32)          # exact: the chain's values are FP32 numbers
        lanes = s.size
        if lanes > 64 or kind == "m":
            for j in range(n):
                s += addend(j)
            return s
        # few lanes (a single dot product or sum): many steps per numpy call. np.add.accumulate along
        # the last axis is the same sequence of IEEE binary32 additions, out[i] = out[i-1] + in[i]
        # (accumulate is never reassociated)
        block = max(1, _PASS // lanes)
        for j0 in range(0, n, block):
            j1 = min(j0 + block, n)
            ids = _as_index(data[r0:r1, j0:j1].T.ravel())
            t = sub.terms32(ids) if kind == "t" else V[ids].astype(np.float32)
            run = np.concatenate([s.reshape(lanes, 1), t.reshape(j1 - j0, lanes).T], axis=1)
            s = np.add.accumulate(run, axis=1)[:, -1].reshape(s.shape)
        return s
    if variant == "low32":
        s = s.astype(np.float32)
        for j in range(n):
            s = ar.add32(s, addend(j))
        return s
    for j in range(n):
        s = ar.add(s, addend(j), plan)
    return s


def _block32(st, src) -> bool:
    """Can this block FMA run on float32 terms? When the products are exact FP32 numbers (float32
    multiplication then is exact), the truncated block sum, < (n + 1) * 2^(F + 4) with the carry and
    sticky bits, stays below 2^24, and the scale 2^(F + 1 - E) <= 2^(F + 1 - q) is a float32 number (q: the
    terms' quantum exponent, E >= q): every step of block_fma is then as exact in float32 as in float64."""
    bo = st[4]
    info = src.info()
    return (src.terms_fp32()
            and (bo.n + 1) << (bo.frac_bits + 4) <= 1 << 24 and bo.frac_bits + 1 - info[1] <= 127)


def _jit_blocks(steps, src, sub_inputs):
    """The compiled block FMA (models/jitblock.py; numpy's block_fma is its reference), or None."""
    if not jit.enabled() or not any(st[0] == "bfma" for st in steps):
        return None
    from . import jitblock
    return jitblock.BlockKernel(src, sub_inputs)


def _run(steps, res_slot, nslots, src, sub_inputs) -> np.ndarray:
    if any(st[0] == "bfma" for st in steps):
        src.prepare_labels()
    jb = _jit_blocks(steps, src, sub_inputs)
    b32 = {id(st): _block32(st, src) for st in steps if st[0] == "bfma"}
    if any(st[0] == "chain" and st[1] != "f64" for st in steps) or any(b32.values()):
        src.prepare_f32()
    fused = jb.fusable(steps, b32) if jb is not None else {}
    shapes = [_rows(st) for st in steps] or [(1, 1)]
    per_row = max(n for _, n in shapes)
    width = max(w for w, _ in shapes)
    per_chunk = min(_MAX_CHUNK, _BUDGET // (8 * (nslots + 2 * width)), max(_PASS // per_row, 1))
    chunk = max(1, per_chunk // src.unit)
    out = np.empty(src.units * src.unit)
    for lo in range(0, src.units, chunk):
        hi = min(lo + chunk, src.units)
        sub = src.view(lo, hi)
        B = (hi - lo) * src.unit
        V = np.empty((nslots, B))
        skip = 0
        for n_st, st in enumerate(steps):
            kind = st[0]
            if skip:
                skip -= 1
                continue
            if n_st in fused:               # a run of chained block FMA steps, compiled in one call
                from . import jitblockrun
                V[st[1]] = jitblockrun.run_chain(jb, fused[n_st], V, sub, b32[id(st)])
                skip = len(fused[n_st]) - 1
                continue
            if kind == "add":
                _, dst, a, b, ar, rnd, plan = st
                pieces = _pieces(a.width, 1, B)
                if len(pieces) == 1:
                    V[dst] = ar.add(a.fetch(V, sub, rnd), b.fetch(V, sub, rnd), plan)
                    continue
                res = np.empty((a.width, B))
                for r0, r1 in pieces:
                    res[r0:r1] = ar.add(a.part(r0, r1).fetch(V, sub, rnd), b.part(r0, r1).fetch(V, sub, rnd), plan)
                V[dst] = res
            elif kind == "chain":
                rows = st[3].width
                pieces = _pieces(rows, 2, B)
                if len(pieces) == 1:
                    V[st[2]] = _run_chain(st, V, sub, 0, rows)
                    continue
                res = np.empty((rows, B))
                for r0, r1 in pieces:
                    res[r0:r1] = _run_chain(st, V, sub, r0, r1)
                V[st[2]] = res
            elif kind == "load":
                _, dst, a, ar = st
                V[dst] = ar.round(a.fetch(V, sub, None))
            elif kind == "const":
                V[st[1]] = st[2]
            elif jb is not None and jb.covers(st):
                V[st[1]] = jb.run(st, V, sub, b32[id(st)])
            else:
                _, dst, c, tids, bo, ar_out = st
                res = np.empty((tids.shape[0], B))
                for r0, r1 in _pieces(tids.shape[0], tids.shape[1], B):
                    flat = _as_index(tids[r0:r1].ravel())
                    T = (sub.terms32_copy(flat) if b32[id(st)] else sub.terms_copy(flat)).reshape(
                        r1 - r0, tids.shape[1], B)
                    X = sub.labels(flat).reshape(r1 - r0, tids.shape[1], B)
                    res[r0:r1] = block_fma(T, X, c.part(r0, r1).fetch(V, sub, None), bo, ar_out, sub_inputs)
                V[dst] = res
        out[lo * src.unit:hi * src.unit] = V[res_slot]
    return out


# ======================================================================================================
# Public entry point
# ======================================================================================================

@takes_arithmetic
def simulate(op: str, *inputs: Any, arith: Arithmetic | None = None, acc: Any = None,
             order: Order | str | None = None, rounding: Any = "rne", fma: bool = True, out: Any = None,
             out_rounding: Any = None, ftz: bool = False, codes: bool = False) -> np.ndarray:
    """Bit-exact result of a reduction under an accumulation model.

    op: "sum" (one array, reduce its last axis), "dot" (two 1-D arrays), "matmul" (A (m, K) @ B (K, n)).
    inputs: numpy float16/32/64, ml_dtypes (bfloat16, float8_*, ...) or torch arrays; values are exact.
    arith: a numoracle.Arithmetic (e.g. an identify_order report's ``.arithmetic``) in place of the keywords
      acc, order, rounding, fma, out, out_rounding, ftz (and its operands: inputs rounded as the kernel reads them).
    acc: accumulator format (FP32 default, or the order's own, e.g. a preset's); any float format with
      p <= 51 (FP32, TF32, FP16, BF16, FP8 ...) or FP64.
    order: numoracle.orders Order or its text (numoracle.orders.parse: 'pairwise', 'blocked:64',
      'preset:h100/fp8', str(order)); default Sequential().
    rounding: mode of every accumulation step (the order's own steps, e.g. BlockFMA's output, keep theirs).
    fma: True: a term (input, or exact product) enters its first addition exact: for a sequential dot
      product that is an FMA chain; in a tree two terms meet as fl(t_i + t_j), one rounding. False: a
      term is first rounded to the accumulator (multiply, round, add). BlockFMA ignores it.
    out: round the accumulated result once more to this format (with ``out_rounding``, default
      ``rounding``), e.g. acc=FP32, out=BF16 for a kernel that stores bf16.
    ftz: flush subnormal results of every rounding step to zero (sign kept).
    codes: return codes of ``out`` (or of the result's format) instead of float64 values.

    NaN and inf propagate as in IEEE 754 (inf - inf = NaN). Returns a float64 array (or codes) of
    the output shape: op "sum": x.shape[:-1]; "dot": (); "matmul": (m, n).

    >>> import ml_dtypes
    >>> from numoracle import orders
    >>> a = np.array([1, 2**-12, 2**-12, 2**-12], np.float16)
    >>> float(simulate("dot", a, a, order=orders.preset("v100", "fp16")))   # 2^-24 terms truncate away
    1.0
    >>> float(simulate("dot", a, a, acc="fp32", rounding="ru"))
    1.0000003576278687
    """
    if not isinstance(op, str):
        raise TypeError(f"op must be 'sum', 'dot' or 'matmul', got {type(op).__name__}")
    src, shape, K, fmts, sub_inputs = _sources(op, inputs)
    order = as_order(order, fmts[0] if fmts else None, default=Sequential())
    if getattr(order, "per_position", False):   # a PerPosition order: one simulate per distinct order
        return order.simulate_positions(simulate, op, inputs, acc=acc, rounding=rounding, fma=fma, out=out,
                                        out_rounding=out_rounding, ftz=ftz, codes=codes)
    if acc is not None:
        acc = format_of(acc)
        if not isinstance(acc, Format):
            raise ValueError(f"acc must be a float format; {acc.name} is an integer format")
        if order.acc is not None and order.acc != acc:
            raise ValueError(f"acc={acc.name} conflicts with the order's own accumulator {order.acc.name}")
    acc = acc or order.acc or FP32
    mode = Rounding.of(rounding)
    if mode is Rounding.STOCHASTIC:
        raise ValueError("rounding='sr' is not modelled (each step would need its own random bits)")
    steps, res_slot, nslots, res_fmt = _prepare(order, K, acc, mode, bool(fma), bool(ftz), src)
    with np.errstate(all="ignore"), jit.for_work(int(np.prod(shape, dtype=np.int64)) * max(K, 1)):
        vals = _run(steps, res_slot, nslots, src, sub_inputs).reshape(shape)
    if out is not None:
        out = format_of(out)
        c = cast(vals.view(np.uint64), out, src=FP64, rounding=out_rounding or rounding, ftz=ftz)
        return c if codes else decode(c, out)
    if codes:
        return cast(vals.view(np.uint64), res_fmt, src=FP64)
    return vals
