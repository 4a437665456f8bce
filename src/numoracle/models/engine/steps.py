"""simulate's program: typed steps over value slots, one class per kind of step, and their operands.

An order's schedule (models/orders/schedule.py) compiles to a ``Program``: the steps in the order they run, each
writing ``dst`` (rows of value slots, one row per value; every output of the batch in the columns). A step
is data: what it reads, its arithmetic (``accumulate.Arith``) and, once ``program.prepare`` has seen the
inputs, how it is computed (an addition's plan, a chain's word size, a block's float32 choice). Which
backend runs a step is decided in one place (models/engine/dispatch.py): the numpy reference
(models/engine/numpysteps.py) or a compiled kernel whose ``covers(step)`` takes it.

Kinds: ``Const`` (dst = value), ``Load`` (dst = fl(a)), ``Add`` (a wave of dst = fl(a +- b)), ``Chain``
(runs of s = fl(s + t_j)), ``BlockStep`` (one block FMA per row), ``BlockRun`` (block FMA steps chained
through one value slot, which a kernel may run in one call), ``TreeRun`` (a whole program of additions, which a
kernel may run in one call: models/kernels/tree.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.formats.format import Format
from ..orders.basic import BlockFMA
from .accumulate import Arith
from .sources import as_index

__all__ = ["Operand", "Step", "Const", "Load", "Add", "Chain", "BlockStep", "BlockRun", "TreeRun", "Program", "Context"]


class Operand:
    """A step's operand: rows of value slots, of terms (inputs, or exact products), or a mix (rows of each)."""

    def __init__(self, refs: np.ndarray, slot: np.ndarray):
        refs = np.asarray(refs, np.int64)
        self.refs, self.slot, self.parts = refs, slot, {}
        self.width = refs.size
        isv = refs >= 0
        self.vrows, self.trows = np.flatnonzero(isv), np.flatnonzero(~isv)
        self.vals = refs[isv]
        self.v = as_index(slot[self.vals]) if self.vals.size else None
        self.t = as_index(-1 - refs[~isv]) if self.trows.size else None

    def part(self, r0: int, r1: int) -> Operand:
        """The operand of rows r0..r1-1 (cached)."""
        if r0 == 0 and r1 == self.width:
            return self
        if (r0, r1) not in self.parts:
            self.parts[(r0, r1)] = Operand(self.refs[r0:r1], self.slot)
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


@dataclass(frozen=True, eq=False, kw_only=True)
class Step:
    """One step of the program: it writes the value slots ``dst`` (a slice or an index array)."""

    dst: Any

    def shape(self) -> tuple[int, int]:
        """(rows, elements per row and output) of the arrays the step makes (sizes simulate's chunks)."""
        return 1, 1

    def float32(self) -> bool:
        """Does the step read the float32 copies of the inputs (``_Source.prepare_f32``)?"""
        return False


@dataclass(frozen=True, eq=False, kw_only=True)
class Const(Step):
    """dst = value (a starting sum)."""

    value: float


@dataclass(frozen=True, eq=False, kw_only=True)
class Load(Step):
    """dst = fl(a): values or terms rounded to the step's format."""

    a: Operand
    ar: Arith

    def shape(self) -> tuple[int, int]:
        return self.a.width, 1


@dataclass(frozen=True, eq=False, kw_only=True)
class Add(Step):
    """A wave of additions, dst[i] = fl(a[i] + b[i]). ``sources``: the (p, q, h) ranges its value operands
    come from, ``terms``: whether an operand reads terms (program._plan reads both); ``rnd``: the
    arithmetic a term is rounded with first (fma=False), or None; ``plan``: "direct", "odd" or "f64".
    ``neg``: a subtraction, fl(a[i] - b[i]) (b negated, which is exact); ``finite``: a result that is not
    finite is replaced by +0 (a compensated sum's error term, as YNNPACK's ``kahan_sum`` masks it)."""

    a: Operand
    b: Operand
    ar: Arith
    rnd: Arith | None
    sources: tuple
    terms: bool
    plan: str | None = None
    neg: bool = False
    finite: bool = False

    def shape(self) -> tuple[int, int]:
        return self.a.width, 1


@dataclass(frozen=True, eq=False, kw_only=True)
class Chain(Step):
    """Runs of sequential additions: s = a[i]; s = fl(s + addend(i, j)) for j = 0..L-1; dst[i] = s.

    ``addends``: "t" (``ids`` holds term ids, (rows, L)), "v" (value slots, (rows, L)) or "m" (a mix:
    ``ids`` a list of one ``Operand`` per column). ``variant`` (from the data): "f32" (IEEE float32
    additions: FP32 accumulator, RNE), "low32" (Arith.add32 on float32 words) or "f64"."""

    a: Operand
    ar: Arith
    rnd: Arith | None
    sources: tuple
    terms: bool
    addends: str
    ids: Any
    plan: str | None = None
    variant: str | None = None

    @property
    def length(self) -> int:
        """L: the additions along each row."""
        return len(self.ids) if self.addends == "m" else self.ids.shape[1]

    def shape(self) -> tuple[int, int]:
        return self.a.width, 2

    def float32(self) -> bool:
        return self.variant not in (None, "f64")


@dataclass(frozen=True, eq=False, kw_only=True)
class BlockStep(Step):
    """One block FMA per row r: dst[r] = BFMA(c[r]; the terms tids[r, :]) (orders.BlockFMA), rounded by
    ``ar``. From the data: ``info`` the terms' (p, q, h), ``terms_fp32`` whether inputs and terms are FP32
    numbers, ``b32`` whether every step of the block is exact in float32 (numpysteps._block32)."""

    c: Operand
    tids: np.ndarray
    order: BlockFMA
    ar: Arith
    info: tuple = ()
    terms_fp32: bool = False
    b32: bool = False

    def shape(self) -> tuple[int, int]:
        return self.tids.shape

    def float32(self) -> bool:
        return self.b32


@dataclass(frozen=True, eq=False, kw_only=True)
class BlockRun(Step):
    """Block FMA steps chained through one value slot: each takes the previous one's output as its c and
    writes the same slots, which nothing else reads in between (one BlockFMA order's blocks along K)."""

    steps: tuple[BlockStep, ...]

    def shape(self) -> tuple[int, int]:
        return max(s.tids.shape[0] for s in self.steps), max(s.tids.shape[1] for s in self.steps)

    def float32(self) -> bool:
        return self.steps[0].b32


@dataclass(frozen=True, eq=False, kw_only=True)
class TreeRun(Step):
    """A whole program of Const, Load, Add and Chain steps as one step: dst is the result's slot (``result``; the
    steps use ``nslots`` slots). models/engine/dispatch.py makes one where a kernel takes the program in one call."""

    steps: tuple[Step, ...]
    result: int
    nslots: int

    def shape(self) -> tuple[int, int]:
        return max(s.shape()[0] for s in self.steps), max(s.shape()[1] for s in self.steps)

    def float32(self) -> bool:
        return any(s.float32() for s in self.steps)


@dataclass(frozen=True, eq=False)
class Program:
    """The steps in the order they run, the slot of the result, the slots needed and the result's format."""

    steps: tuple[Step, ...]
    result: int
    nslots: int
    fmt: Format


@dataclass(eq=False)
class Context:
    """One simulate call as its steps see it: the source of the terms and per-call state of the kernels."""

    src: Any
    sub_inputs: bool
    kernels: dict = field(default_factory=dict)
