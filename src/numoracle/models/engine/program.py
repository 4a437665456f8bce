"""simulate's program: an order's schedule compiled to typed steps over value slots, then fitted to the data.

``structure`` (cached per order, K and arithmetic; independent of the data) turns the schedule's waves into
steps (models/engine/steps.py) with their operands and arithmetic, allocates value slots and finds the runs of
chained block FMA steps. ``prepare`` (per call) fills in what the inputs decide: each addition's exact
method (``_plan``), each chain's word size, each block's float32 choice.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from ...core.formats.format import FP64, Format
from ...core.formats.policy import Rounding
from ..orders.basic import BlockFMA, Order, build
from .accumulate import ZERO_SOURCE, Arith, block_format, native_fp32_ok
from .sources import FP32_TRIPLE, as_index, triple_fits
from .steps import Add, BlockRun, BlockStep, Chain, Const, Load, Operand, Program

__all__ = ["prepare", "structure"]


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
def structure(order, K, acc, mode, fma, ftz, native) -> Program:
    """The program of (order, K) with its operands and arithmetic, independent of the data. Add and Chain
    steps carry, instead of their plan, the ranges their value operands come from and whether they read
    terms; ``prepare`` turns that into a plan once the terms' range is known."""
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
            steps.append(BlockStep(dst=slot[w.dst], c=Operand(w.a, slot), tids=-1 - w.b, order=bo, ar=ar_out))
            continue
        ar = arith(*w.key)
        dst = as_index(slot[w.dst])
        if w.kind == "const":
            vsrc[w.dst] = 0
            steps.append(Const(dst=dst, value=w.const))
            continue
        rnd = None if fma or ar.is64 else ar
        a = Operand(w.a, slot)
        ops = () if w.kind == "load" else value_sources(w.a, w.b)   # (before this wave's values exist)
        produced(w.dst, ar.triple, ar.fmt)
        if w.kind == "load":
            steps.append(Load(dst=dst, a=a, ar=ar))
        elif w.kind in ("add", "sub", "subz"):
            b = Operand(w.b, slot)
            steps.append(Add(dst=dst, a=a, b=b, ar=ar, rnd=rnd, sources=ops, terms=a.t is not None or b.t is not None,
                             neg=w.kind != "add", finite=w.kind == "subz"))
        else:   # chain: the running sums are in ar's format; the addends are terms, values, or both
            steps.append(chain_schedule(dst, a, w.b, slot, ar, rnd, ops))
    return Program(_block_runs(steps), int(slot[s.result]), nslots, containers[vsrc[s.result]])


def chain_schedule(dst, a: Operand, b: np.ndarray, slot: np.ndarray, ar: Arith, rnd, sources: tuple) -> Chain:
    isv = b >= 0
    if not isv.any():
        kind, ids = "t", -1 - b
    elif isv.all():
        kind, ids = "v", slot[b]
    else:
        kind, ids = "m", [Operand(b[:, j], slot) for j in range(b.shape[1])]
    return Chain(dst=dst, a=a, ar=ar, rnd=rnd, sources=sources + (ar.triple,), terms=not isv.all(), addends=kind,
                 ids=ids)


def _slots(v) -> np.ndarray:
    """An operand's value slots (simsources.as_index gives a slice where they are consecutive)."""
    return np.arange(v.start, v.stop) if isinstance(v, slice) else np.asarray(v)


def _block_runs(steps: list) -> tuple:
    """The steps with each run of chained block FMA steps as one BlockRun: consecutive steps of one
    BlockFMA, output arithmetic and width, each later one taking its c from the previous one's value slots
    (and no term), which it overwrites, so that no other step can read the intermediate blocks."""
    out: list = []
    run: list[BlockStep] = []

    def close():
        out.extend(run if len(run) < 2 else [BlockRun(dst=run[-1].dst, steps=tuple(run))])
        run.clear()

    for st in steps:
        if isinstance(st, BlockStep):
            prev = run[-1] if run else None
            if not (prev is not None and st.order == prev.order and st.ar == prev.ar
                    and st.tids.shape[0] == prev.tids.shape[0] and st.c.t is None
                    and np.array_equal(_slots(st.c.v), prev.dst) and np.array_equal(st.dst, prev.dst)):
                close()
            run.append(st)
            continue
        close()
        out.append(st)
    close()
    return tuple(out)


def _plan(ar: Arith, ops: tuple, terms: bool, rnd, term_src: tuple) -> str:
    """How to compute fl(x + y) exactly for operands drawn from ``ops`` (and the terms)."""
    if ar.is64:
        return "f64"
    if terms:
        ops = ops + ((ar.triple if rnd is not None else term_src),)
    if max(o[2] for o in ops) + 1 - min(o[1] for o in ops) <= 53:
        return "direct"   # both operands are multiples of 2^q below 2^h: their sum fits 53 bits, exactly
    if (ar.mode is Rounding.NEAREST_EVEN and ar.fmt.precision <= 25 and ar.fmt.nan == "ieee"
            and all(triple_fits(o, ar.triple) for o in ops)):
        # both operands are in the p-bit format and 53 >= 2p + 2: rounding fl64(x+y) to nearest once
        # more is innocuous (Figueroa 1995; Roux 2014 covers subnormals and overflow)
        return "direct"
    return "odd"


def _block32(st: BlockStep, term_src: tuple, terms_fp32: bool) -> bool:
    """Can this block FMA run on float32 terms? When the products are exact FP32 numbers (float32
    multiplication then is exact), the truncated block sum, < (n + 1) * 2^(F + 4) with the carry and
    sticky bits, stays below 2^24, and the scale 2^(F + 1 - E) <= 2^(F + 1 - q) is a float32 number (q: the
    terms' quantum exponent, E >= q): every step of block_fma is then as exact in float32 as in float64."""
    bo = st.order
    return (terms_fp32
            and (bo.n + 1) << (bo.frac_bits + 4) <= 1 << 24 and bo.frac_bits + 1 - term_src[1] <= 127)


def prepare(order, K, acc, mode, fma, ftz, src) -> Program:
    """The program for these inputs: the plans, chain variants and block facts the data decide."""
    # float32 paths are used only while the FP environment has gradual underflow (checked per call)
    native = native_fp32_ok()
    prog = structure(order, K, acc, mode, fma, ftz, native)
    return _fitted(prog, src.info(), src.terms_fp32(), src.inputs_fit_fp32, fma, native)


@lru_cache(maxsize=256)
def _fitted(prog: Program, term_src: tuple, terms_fp32: bool, inputs_fit_fp32: bool, fma: bool,
            native: bool) -> Program:
    """``prog`` (one of ``structure``'s) fitted to the facts of the data that decide it (kept: the facts repeat
    from call to call, and fitting a program of many steps takes a millisecond)."""
    memo: dict = {}
    # Terms as float32 are exact when the inputs are FP32 numbers and their products fit FP32; with
    # fma=False, float32 multiplication also gives the FP32-rounded product (IEEE binary32, RNE).
    t32_exact = native and terms_fp32
    t32_fp32_rounded = native and inputs_fit_fp32 and not fma
    block_facts = dict(info=term_src, terms_fp32=terms_fp32)

    def fitted(st):
        if isinstance(st, BlockStep):
            return replace(st, b32=_block32(st, term_src, terms_fp32), **block_facts)
        if isinstance(st, BlockRun):
            return replace(st, steps=tuple(fitted(s) for s in st.steps))
        if not isinstance(st, (Add, Chain)):
            return st
        k = (st.ar, st.sources, st.terms, st.rnd is None)
        if k not in memo:
            memo[k] = _plan(st.ar, st.sources, st.terms, st.rnd, term_src)
        if isinstance(st, Add):
            return replace(st, plan=memo[k])
        return replace(st, plan=memo[k], variant=_variant(st, memo[k], t32_exact, t32_fp32_rounded))

    return replace(prog, steps=tuple(fitted(st) for st in prog.steps))


def _variant(st: Chain, plan: str, t32_exact: bool, t32_fp32_rounded: bool) -> str:
    in32 = all(triple_fits(o, FP32_TRIPLE) for o in st.sources) and st.addends != "m"
    if in32 and st.ar.native and plan == "direct" and (not st.terms or t32_exact or t32_fp32_rounded):
        # s = fl32(s + t) is IEEE binary32 addition: one RNE rounding of the exact sum of two FP32
        # numbers (the plan certifies that rounding fl64(s + t) once more would be innocuous too)
        return "f32"
    if in32 and st.ar.low32 and (not st.terms or t32_exact):
        return "low32"     # Arith.add32
    return "f64"
