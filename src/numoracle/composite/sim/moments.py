"""Row moments (mean, variance) by vectorised Welford with a cascade of chunk merges: the algorithm of torch's CPU
``RowwiseMoments`` (ATen ``native/cpu/moments_utils.h``), every step rounded to the compute format.

``rowwise_moments(v, fmt, lanes=16, chunk=16, contract=False)`` on rows v (R, N) of values of fmt:

* n = N // lanes vectors; lane l holds elements l, l + lanes, ...; chunks of ``chunk`` vectors. In chunk i
  (m0 <= chunk vectors) each lane runs Welford from 0: delta = x - m1, m1 += delta c_j, m2 += delta (x - m1) with
  c_j = fl(1 / (j + 1)).
* A chunk's (m0, m1, m2) merges into level 0 of a stack of depth CeilLog2(ceil(n / chunk)) (1 for up to 2) by
  AddMoments: n' = m0 + m0_add, c = fl(m0_add / n'), delta = m1_add - m1, m1 += c delta,
  m2 += m2_add + ((delta delta) c) m0 (m0 before the update). After chunk i, level j - 1 merges into level j
  and is reset while (i + 1) >> (j - 1) is even (j < depth); after the last chunk levels 1.. merge into level 0.
* The N % lanes last elements run scalar Welford from 0 (m1 += delta / k); then lane 0, 1, ... merge into that
  by AddMoments (count n each). Returns m1 and fl(m2 / N).

``fused=True`` (the default; ATen's newer form): the vector steps are explicit FMAs: m1 = fma(c_j, delta, m1),
m2 = fma(delta, x - m1, m2), and the vector merge is m1 + c delta, m2 = fma(delta m0, c delta, m2 + m2_add).
``contract=True``: the other ``a b + c`` of the merges (the scalar AddMoments; with ``fused=False`` the vector
steps too) are one FMA each, as a compiler contracting them makes it. The scalar tail's m2 += delta (x - m1)
keeps two roundings (as torch 2.13.0's build does: contracting it changed results that the build does not show).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.formats.format import Format
from .accarith import add, div, fma, mul

__all__ = ["Moments", "rowwise_moments"]


@dataclass(frozen=True)
class Moments:
    """Per-row mean and (biased) variance, float64 values of the compute format."""

    mean: np.ndarray
    var: np.ndarray


def _ceil_log2(x: int) -> int:
    return 1 if x <= 2 else int(x - 1).bit_length()


class _Ops:
    def __init__(self, f: Format, contract: bool):
        self.f, self.contract = f, contract
        self.add, self.mul, self.div, self.fma_ = add, mul, div, fma

    def a(self, x: Any, y: Any) -> np.ndarray:
        return self.add(x, y, self.f)

    def s(self, x: Any, y: Any) -> np.ndarray:
        return self.add(x, -np.asarray(y, np.float64), self.f)

    def m(self, x: Any, y: Any) -> np.ndarray:
        return self.mul(x, y, self.f)

    def d(self, x: Any, y: Any) -> np.ndarray:
        return self.div(x, y, self.f)

    def madd(self, x: Any, y: Any, z: Any) -> np.ndarray:
        """x y + z: one FMA when contracting, else two roundings."""
        return self.fma_(x, y, z, self.f) if self.contract else self.a(self.m(x, y), z)

    def merge(self, m0_add: Any, m1_add: Any, m2_add: Any, m0: Any, m1: Any, m2: Any) -> tuple:
        """AddMoments: (m0, m1, m2) with (m0_add, m1_add, m2_add) merged in."""
        n = m0 + m0_add
        c = np.where(n == 0, 0.0, self.d(m0_add, np.where(n == 0, 1, n)))
        delta = self.s(m1_add, m1)
        m1 = self.madd(c, delta, m1)
        p = self.m(self.m(delta, delta), c)
        m2 = self.a(m2, self.madd(p, m0, m2_add))
        return n, m1, m2

    def merge_fused(self, m0_add: Any, m1_add: Any, m2_add: Any, m0: Any, m1: Any, m2: Any) -> tuple:
        """AddMomentsVec with explicit FMA: m2' = fma(delta m0, c delta, m2 + m2_add), m1' = m1 + c delta."""
        n = m0 + m0_add
        c = np.where(n == 0, 0.0, self.d(m0_add, np.where(n == 0, 1, n)))
        delta = self.s(m1_add, m1)
        m2_tmp = self.a(m2, m2_add)
        cd = self.m(c, delta)
        m0d = self.m(delta, m0)
        return n, self.a(m1, cd), self.fma_(m0d, cd, m2_tmp, self.f)


def rowwise_moments(v: np.ndarray, fmt: Format, lanes: int = 16, chunk: int = 16, fused: bool = True,
                    contract: bool = False, load: int = 1) -> Moments:
    """Mean and variance of each row of v (R, N) as torch's CPU ``RowwiseMoments`` computes them (module doc).
    ``load=2``: the bf16 / fp16 form: a vector holds 2 lanes-wide float vectors (elements [2Lv, 2Lv + L) and
    [2Lv + L, 2Lv + 2L)), each run through the chunk's Welford with the same c_j and merged into level 0 one after
    the other; each lane then counts 2n elements."""
    R, N = v.shape
    op = _Ops(fmt, contract)
    vmerge = op.merge_fused if fused else op.merge
    width = lanes * load
    n = N // width
    nchunks = -(-n // chunk)
    depth = _ceil_log2(nchunks)
    vec = v[:, :n * width].reshape(R, n, load, lanes)
    zero = np.zeros((R, lanes))
    stk = [[0, zero, zero] for _ in range(depth)]
    inv = [op.d(1.0, float(j + 1)) for j in range(chunk)]
    for i in range(nchunks):
        m0 = min(chunk, n - i * chunk)
        for part in range(load):
            m1 = np.zeros((R, lanes))
            m2 = np.zeros((R, lanes))
            for j in range(m0):
                x = vec[:, i * chunk + j, part]
                delta = op.s(x, m1)
                if fused:
                    m1 = op.fma_(inv[j], delta, m1, fmt)
                    m2 = op.fma_(delta, op.s(x, m1), m2, fmt)
                else:
                    m1 = op.madd(delta, inv[j], m1)
                    m2 = op.madd(delta, op.s(x, m1), m2)
            stk[0] = list(vmerge(m0, m1, m2, *stk[0]))
        mask = i + 1
        j = 1
        while j < depth and (mask & 1) == 0:
            stk[j] = list(vmerge(*stk[j - 1], *stk[j]))
            stk[j - 1] = [0, zero, zero]
            mask >>= 1
            j += 1
    for i in range(1, depth):
        stk[0] = list(vmerge(*stk[i], *stk[0]))
    m0, m1, m2 = 0, np.zeros(R), np.zeros(R)
    for k in range(n * width, N):
        x = v[:, k]
        delta = op.s(x, m1)
        m0 += 1
        m1 = op.a(m1, op.d(delta, float(m0)))
        m2 = op.a(m2, op.m(delta, op.s(x, m1)))     # (never contracted: torch 2.13's build keeps two roundings)
    for lane in range(lanes):
        m0, m1, m2 = op.merge(n * load, stk[0][1][:, lane], stk[0][2][:, lane], m0, m1, m2)
    return Moments(m1, op.d(m2, float(N)))
