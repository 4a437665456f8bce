"""Accumulation orders of BLAS dot kernels on CPUs: vector accumulators, their reduction, and a scalar tail that
may run in another format.

* ``OpenBlasDot(vec, accumulators, wide, fma, tail_acc)``: OpenBLAS's x86-64 ``sdot`` (``kernel/x86_64/sdot.c``
  with its ``sdot_microk_skylakex-2.c`` vector kernel). Over n terms, ``main = n - n % (vec * accumulators)``:

  1. with ``wide`` lanes (AVX-512: 16; 0: none), the first ``n_w`` terms (a multiple of ``wide * accumulators``)
     go to ``accumulators`` wide registers from +0: term ``i`` to register ``(i % (wide*accumulators)) // wide``,
     lane ``i % wide``; each lane a chain over the blocks; each register then folded to ``vec`` lanes (lane j +
     lane j + vec);
  2. the next ``main - n_w`` terms go the same way to ``accumulators`` registers of ``vec`` lanes, each
     continuing from step 1's folded register (from +0 without one); ``fma=False``: every product is rounded
     to the accumulator before it is added, ``fma=True``: fused multiply-adds;
  3. the registers are added in order, lane by lane: ``((a_0 + a_1) + a_2) + ...`` (``registers="pairwise"``:
     ``(a_0 + a_1) + (a_2 + a_3)``, as the Haswell and Sandybridge micro-kernels do);
  4. the register's lanes: while more than 4 remain, lane j + lane j + w/2; then the horizontal adds of
     neighbours, ``(v_0 + v_1) + (v_2 + v_3)``;
  5. the other ``n % (vec * accumulators)`` terms: each product rounded to the accumulator (a float product),
     added one by one to a ``tail_acc`` sum from +0 (``double dot`` in sdot.c; None: the accumulator); the
     result is that sum plus step 4's value, in ``tail_acc``; simulate rounds it to its output format.

* ``MklDot(vec, accumulators)``: the float32 dot of Intel MKL as torch's CPU ``torch.dot`` calls it (closed
  source: the mechanism read off ``reveal_order``'s trees and checked on random data; torch 2.13.0+cpu on this
  machine, AVX-512). ``accumulators`` registers of ``vec`` lanes, from +0, fused multiply-adds: blocks of
  ``vec * accumulators`` terms spread over all registers (term i to register ``(i % block) // vec``, lane
  ``i % vec``); the rest in blocks of half as many registers, a quarter, ... one register; the last
  ``n % vec`` terms into register 0's first lanes (a masked load). The registers are then added pairwise
  (``(a_0 + a_1) + (a_2 + a_3)``) and the lanes reduced as OpenBlasDot's step 4. The same kernel family under
  ``MKL_ENABLE_INSTRUCTIONS=AVX2`` on an AMD EPYC (Zen 5), torch 2.13.0+cpu (also without the override there):
  ``MklDot(4, 4, fma=False, registers="order", lanes="halves", rest="lane0")``: four registers of 4 lanes,
  products rounded before they are added, registers added in order, lanes by halves (``(v_0 + v_2) + (v_1 +
  v_3)``), the last ``n % 4`` terms added one by one to register 0's lane 0 (read off ``reveal_order``'s trees
  at n = 5 .. 40, fitted on seed 5 at n = 1 .. 69 and 8 sizes to 4099, confirmed on seeds 6 and 7).

``OpenBlasDot()`` (FMA, AVX-512 and AVX2 registers) reproduces ``np.dot`` of float32 vectors on this machine
(numpy 2.4.6 and its bundled OpenBLAS; n = 5 .. 4099, checked by ``tests/identify/test_cpu_recordings.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.args import check_bool, check_int
from ...core.formats.format import FP64
from .basic import float_format, positive_int
from .cpu import ScheduleOrder
from .schedule import WaveBuilder

__all__ = ["OpenBlasDot", "MklDot"]


def _lane_reduce(b: WaveBuilder, lanes: np.ndarray) -> np.ndarray:
    """Step 3: a register's lanes (ids, shape (w,)) to one value: halves while w > 4, then neighbours."""
    while lanes.size > 4:
        h = lanes.size // 2
        lanes = b.add(lanes[:h], lanes[h:])
    while lanes.size > 1:
        pairs = lanes.size // 2
        summed = b.add(lanes[0:2 * pairs:2], lanes[1:2 * pairs:2])
        lanes = np.concatenate([summed, lanes[2 * pairs:]])
    return lanes


@dataclass(frozen=True)
class OpenBlasDot(ScheduleOrder):
    """OpenBLAS's x86-64 sdot: wide and narrow vector accumulators, lanes reduced, a tail summed in ``tail_acc``
    (module docstring)."""

    vec: int = 8
    accumulators: int = 4
    wide: int = 16
    fma: bool = True
    tail_acc: Any = FP64
    registers: str = "order"

    def __post_init__(self):
        if self.registers not in ("order", "pairwise"):
            raise ValueError(f"OpenBlasDot registers must be 'order' or 'pairwise' (how the accumulator registers "
                             f"are added), got {self.registers!r}")
        object.__setattr__(self, "vec", positive_int(self.vec, "OpenBlasDot vec (lanes per register)"))
        object.__setattr__(self, "accumulators", positive_int(self.accumulators, "OpenBlasDot accumulators"))
        object.__setattr__(self, "wide", check_int(self.wide, "OpenBlasDot wide (lanes of the wide registers)", 0))
        for name in ("vec", "wide"):
            v = getattr(self, name)
            if v & (v - 1):
                raise ValueError(f"OpenBlasDot {name} must be a power of two (a register's lanes), got {v}")
        if self.wide and self.wide <= self.vec:
            raise ValueError(f"OpenBlasDot wide must be 0 (none) or more than vec={self.vec}, got {self.wide}")
        object.__setattr__(self, "fma", check_bool(self.fma, "OpenBlasDot fma"))
        if self.tail_acc is not None:
            object.__setattr__(self, "tail_acc", float_format(self.tail_acc, "OpenBlasDot tail_acc"))

    def _schedule(self, n, key):
        b = WaveBuilder(key)
        A, V, W = self.accumulators, self.vec, self.wide
        main = n - n % (V * A)
        n_w = main - main % (W * A) if W else 0
        t = b.terms(main, self.fma)
        acc = None
        if n_w:
            # 1. wide registers: row k * W + l holds terms blk * W * A + k * W + l over the blocks, in order
            blk = t[:n_w].reshape(n_w // (W * A), A, W).transpose(1, 2, 0).reshape(A * W, -1)
            regs = b.chain_from(None, blk).reshape(A, W)
            while regs.shape[1] > V:                 # folded: lane j + lane j + half
                h = regs.shape[1] // 2
                regs = b.add(regs[:, :h].ravel(), regs[:, h:].ravel()).reshape(A, h)
            acc = regs.ravel()
        if main > n_w:
            # 2. narrow registers, continuing from the folded ones
            blk = t[n_w:main].reshape(-1, A, V).transpose(1, 2, 0).reshape(A * V, -1)
            acc = b.chain_from(acc, blk)
        res = None
        if acc is not None:
            # 3. the registers added in order; 4. the lanes reduced
            regs = [acc[k * V:(k + 1) * V] for k in range(A)]
            while len(regs) > 1 and self.registers == "pairwise":
                regs = [b.add(regs[i], regs[i + 1]) if i + 1 < len(regs) else regs[i] for i in range(0, len(regs), 2)]
            res = regs[0]
            for r in regs[1:]:
                res = b.add(res, r)
            res = _lane_reduce(b, res)
        if main == n:
            return b.result(n, res)
        # 5. the tail: products rounded to the accumulator, summed from +0 in tail_acc, plus the vector part
        tail = b.load(-1 - np.arange(main, n, dtype=np.int64))
        b.key = key if self.tail_acc is None else (self.tail_acc, key[1])
        s = b.chain_from(None, tail[None, :])
        if res is not None:
            s = b.add(s, res)
        b.key = key
        return b.result(n, s)


@dataclass(frozen=True)
class MklDot(ScheduleOrder):
    """MKL's float32 dot (torch's CPU ``torch.dot``): registers filled by halving blocks, added pairwise (or in
    order), lanes reduced, the rest masked into register 0's lanes (or added one by one to lane 0); module
    docstring."""

    vec: int = 16
    accumulators: int = 4
    fma: bool = True
    registers: str = "pairwise"
    lanes: str = "neighbours"
    rest: str = "lanes"

    def __post_init__(self):
        object.__setattr__(self, "vec", positive_int(self.vec, "MklDot vec (lanes per register)"))
        object.__setattr__(self, "accumulators", positive_int(self.accumulators, "MklDot accumulators"))
        for name in ("vec", "accumulators"):
            v = getattr(self, name)
            if v & (v - 1):
                raise ValueError(f"MklDot {name} must be a power of two, got {v}")
        object.__setattr__(self, "fma", check_bool(self.fma, "MklDot fma"))
        for name, allowed in (("registers", ("pairwise", "order")), ("lanes", ("neighbours", "halves")),
                              ("rest", ("lanes", "lane0"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"MklDot {name} must be one of {allowed}, got {getattr(self, name)!r}")

    def slots(self) -> int:
        return self.accumulators * self.vec

    def _schedule(self, n, key):
        b = WaveBuilder(key)
        A, V = self.accumulators, self.vec
        slots: list[list[int]] = [[] for _ in range(A * V)]      # register k, lane l: slot k * V + l
        pos = 0
        k = A
        while k >= 1:                 # 1. blocks over all registers, then half as many, ..., one
            while n - pos >= k * V:
                for s in range(k * V):
                    slots[s].append(pos + s)
                pos += k * V
                if k < A:
                    break
            k //= 2
        for s in range(n - pos):      # 2. the rest: masked into register 0's lanes, or one by one into lane 0
            slots[0 if self.rest == "lane0" else s].append(pos + s)
        # 3. each slot a chain from +0 (fused multiply-adds, or products rounded first; equal lengths in one wave)
        t = b.terms(n, self.fma)
        ids = np.empty(A * V, np.int64)
        for length in sorted({len(s) for s in slots}):
            which = [i for i, s in enumerate(slots) if len(s) == length]
            terms = np.array([[t[j] for j in slots[i]] for i in which], np.int64).reshape(len(which), length)
            ids[which] = b.chain_from(None, terms)
        regs = [ids[k * V:(k + 1) * V] for k in range(A)]
        # 4. the registers added pairwise (or in order), lane by lane; 5. the lanes reduced
        while len(regs) > 1 and self.registers == "pairwise":
            regs = [b.add(regs[i], regs[i + 1]) for i in range(0, len(regs), 2)]
        res = regs[0]
        for r in regs[1:]:
            res = b.add(res, r)
        if n and self.lanes == "halves":
            while res.size > 1:
                res = b.add(res[:res.size // 2], res[res.size // 2:])
        return b.result(n, (res if self.lanes == "halves" else _lane_reduce(b, res)) if n else None)
