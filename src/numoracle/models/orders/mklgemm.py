"""MKL's small float32 GEMM as torch 2.13.0+cpu calls it (``torch.mm``) on an AMD EPYC (Zen 5): one order per output
position, chosen by where the output element lies in memory.

Measured (bit for bit against ``torch.mm`` on scaled random data, every output classified, several seeds; MKL runs the
same code whether ``MKL_ENABLE_INSTRUCTIONS`` is AVX2, AVX512 or unset there): the outputs of a row of C (M x N,
row-major, the row starting at element ``i * N`` of a 16-byte aligned buffer) are computed four at a time on aligned
addresses, each a plain chain over K with products rounded to fp32 before they are added (no FMA); the ``peel``
elements before the first aligned address (``(-i * N) % 4`` of them) take another order, ``ChainApart()``: in blocks
of 8 terms, four added one by one to the result, then the next four summed apart and that sum added; the ``K % 8``
rest added one by one. A row with fewer than four elements after its peel is all plain chains.

Where it holds (measured): N = 2 .. 11 for M = 1 .. 16, and M = 1 .. 3 for N up to 16 (K = 40); K = 1 .. 69, 100,
255 .. 4096 (M = 5, 8; N = 6, 7). Not this kernel: N = 1 (a matrix-vector product) for M >= 2, and N >= 12 for
M >= 4 (another MKL path, not modelled: at K = 40 .. 100 one FMA chain per output, ``Sequential()``, on one
seed; at K = 256 and 300 something else).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.args import check_bool
from .basic import Order
from .cpu import Interleaved, ScheduleOrder
from .schedule import WaveBuilder
from .spec import OrderSpec

__all__ = ["ChainApart", "MklSmallGemm"]


@dataclass(frozen=True)
class ChainApart(ScheduleOrder):
    """Blocks of ``chained + apart`` terms: ``chained`` terms added one by one to the result, then the next ``apart``
    summed from the first of them (a chain of their own) and that sum added; the rest after the last whole block added
    one by one. ``fma=False``: each product rounded before it is added."""

    chained: int = 4
    apart: int = 4
    fma: bool = False

    def __post_init__(self):
        for name in ("chained", "apart"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1 << 16:
                raise ValueError(f"ChainApart {name} must be an int in 1..65536, got {v!r}")
        object.__setattr__(self, "fma", check_bool(self.fma, "ChainApart fma"))

    def _schedule(self, n, key):
        b = WaveBuilder(key)
        t = b.terms(n, self.fma)
        blk = self.chained + self.apart
        res = None
        k = 0
        while k + blk <= n:
            res = b.chain_from(res, t[None, k:k + self.chained])
            part = b.chain(t[k + self.chained:k + self.chained + 1], t[None, k + self.chained + 1:k + blk])
            res = b.add(res, part)
            k += blk
        if k < n:
            res = b.chain_from(res, t[None, k:])
        return b.result(n, res)


@dataclass(frozen=True)
class MklSmallGemm(Order):
    """Output (i, j) of an M x N result: ``edge`` for the ``(-i * N) % align`` first elements of row i when at least
    ``align`` elements follow them, else ``bulk`` (the module docstring: MKL's small sgemm as torch.mm calls it)."""

    bulk: Order = Interleaved(1, fma=False)
    edge: Order = ChainApart()
    align: int = 4

    per_position = True

    def __post_init__(self):
        if not isinstance(self.bulk, Order) or not isinstance(self.edge, Order):
            raise TypeError("MklSmallGemm bulk and edge must be Orders")
        if isinstance(self.align, bool) or not isinstance(self.align, int) or not 1 <= self.align <= 64:
            raise ValueError(f"MklSmallGemm align must be an int in 1..64 (elements), got {self.align!r}")

    @property
    def acc(self):
        return self.bulk.acc

    def edge_mask(self, shape: tuple) -> np.ndarray:
        """True where the output of this shape (the last axis the row; () is one output) takes ``edge``."""
        rows, n = (int(np.prod(shape[:-1], dtype=np.int64)), shape[-1]) if shape else (1, 1)
        mask = np.zeros((rows, n), bool)
        for i in range(rows):
            peel = (-i * n) % self.align
            if n - peel >= self.align:
                mask[i, :peel] = True
        return mask.reshape(shape)

    def spec(self) -> OrderSpec:
        return OrderSpec("any")

    def _schedule(self, n, key):
        raise ValueError("MklSmallGemm has one schedule per output position; simulate runs it through "
                         "simulate_positions")

    def simulate_positions(self, run: Any, op: str, inputs: tuple, **kw: Any) -> np.ndarray:
        """simulate of ``bulk``, with the edge positions taken from ``edge``'s result."""
        res = run(op, *inputs, order=self.bulk, **kw)
        mask = self.edge_mask(res.shape)
        if mask.any():
            res = res.copy()
            res[mask] = run(op, *inputs, order=self.edge, **kw)[mask]
        return res
