"""Accumulation orders of GPU library kernels: cuBLAS split-K slices and torch's CUDA reduction trees.

Both are :class:`numoracle.orders.Order` objects that :func:`numoracle.simulate.simulate` evaluates bit for
bit; docs/gpu.md shows them reproducing recorded H200 results.

* ``TiledSplitK(s, tile, inner, combine, combine_acc)``: K cut into slices of ``round_up(ceil(K/s), tile)``
  terms (the last one shorter, and fewer than s slices when the rounding leaves none), the CUTLASS
  split-K rule (``gemm_k_size``): slice boundaries fall on multiples of the kernel's K-step ``tile``.
  Each slice is reduced by ``inner`` from zero; the partials by ``combine`` in slice order.
* ``GpuReduce(vec, lanes, warps, blocks, layout)``: the thread-level reduction of torch's ``Reduce.cuh``:

  1. Threads ``t = lane + lanes * (warp + warps * block)``, T = lanes * warps * blocks of them per output;
     each keeps ``vec`` accumulators, all starting at +0.
  2. ``layout="vector"`` (vectorised loads along a contiguous row): vector v holds terms
     ``vec*v .. vec*v + vec-1``; thread t reads vectors ``t, t + T, t + 2T, ...`` and adds term
     ``vec*v + i`` to its accumulator i. The ``K % vec`` tail terms go, one each, to accumulator 0 of
     threads 0, 1, ... after their loops (rows assumed to start on a vector boundary: true when
     ``K % vec == 0``). ``layout="unroll"`` (strided inputs): thread t reads terms ``t, t + T, ...`` and
     adds its m-th one to accumulator ``m % vec``.
  3. Each thread adds its accumulators in order: ``((a_0 + a_1) + a_2) + ...``.
  4. Inside a block: a halving tree over the lanes (value of lane i + lanes/2 added to lane i, then
     + lanes/4, ...: a warp shuffle with offsets 16, 8, 4, 2, 1), then the same halving tree over the
     warps (shared memory).
  5. ``blocks > 1``: every block's result is a partial; threads ``g < lanes * warps`` of the last block
     add partials ``g, g + G, g + 2G, ...`` (G = lanes * warps) sequentially from +0, then reduce as in 4.

  :func:`torch_sum_order` picks the parameters as torch's launch heuristic does for ``sum``.
* ``ChunkedScan(width, acc)``: the last element of torch's CUDA ``cumsum`` along a row (an inclusive scan in
  chunks of ``width`` elements, Sklansky's tree inside each): ``c = +0``; for each chunk of ``width`` terms
  (the last one padded with +0): its first term becomes ``fl(t_0 + c)``, then the chunk is summed by a
  halving tree of adjacent blocks (``fl(upper + lower)`` at every level), and that sum is ``c`` for the next
  chunk. Every step rounds to ``acc`` (torch scans in the input dtype). :func:`torch_cumsum_order` picks
  ``width`` as torch does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .basic import Order, Schedule, Sequential, check_suborders, float_format, positive_int, slices_then
from .schedule import WaveBuilder
from .spec import OrderSpec

__all__ = ["TiledSplitK", "GpuReduce", "ChunkedScan", "torch_sum_order", "torch_cumsum_order", "cutlass_slices"]


def cutlass_slices(n: int, s: int, tile: int) -> list[int]:
    """Slice sizes of ``TiledSplitK(s, tile)`` over n terms: round_up(ceil(n/s), tile) each, the last the rest."""
    per = -(-n // s)                      # ceil(n / s)
    size = -(-per // tile) * tile         # rounded up to a multiple of tile
    return [min(size, n - lo) for lo in range(0, n, size)] or [0]


@dataclass(frozen=True)
class TiledSplitK(Order):
    """Split-K with slices of ``round_up(ceil(K/s), tile)`` terms, each reduced by ``inner`` from zero,
    the partials reduced by ``combine`` (in ``combine_acc``, default the accumulator) in slice order."""

    s: int
    tile: int = 1
    inner: Order = Sequential()
    combine: Order = Sequential()
    combine_acc: Any = None

    def __post_init__(self):
        object.__setattr__(self, "s", positive_int(self.s, "TiledSplitK slice count s"))
        object.__setattr__(self, "tile", positive_int(self.tile, "TiledSplitK tile (the K-step slices are aligned to)"))
        object.__setattr__(self, "combine_acc", float_format(self.combine_acc, "combine_acc"))
        check_suborders("TiledSplitK", "combine", inner=self.inner, combine=self.combine)

    @property
    def acc(self):
        return None

    def spec(self) -> OrderSpec:
        return OrderSpec("splitk", self.s, self.inner.spec(), self.combine.spec(), self.combine_acc, tile=self.tile)

    def _schedule(self, n, key):
        ckey = (self.combine_acc, key[1]) if self.combine_acc is not None else key
        return slices_then(cutlass_slices(n, self.s, self.tile), self.inner, key, self.combine, ckey)


def _pow2(x: Any, what: str) -> int:
    v = positive_int(x, what)
    if v & (v - 1):
        raise ValueError(f"{what} must be a power of two (GPU block dimensions are), got {v}")
    return v


@dataclass(frozen=True)
class GpuReduce(Order):
    """torch's CUDA reduction (``Reduce.cuh``) for one output: see the module docstring for the steps."""

    vec: int = 4
    lanes: int = 32
    warps: int = 1
    blocks: int = 1
    layout: str = "vector"

    def __post_init__(self):
        object.__setattr__(self, "vec", positive_int(self.vec, "GpuReduce vec (accumulators per thread)"))
        object.__setattr__(self, "lanes", _pow2(self.lanes, "GpuReduce lanes"))
        object.__setattr__(self, "warps", _pow2(self.warps, "GpuReduce warps"))
        object.__setattr__(self, "blocks", positive_int(self.blocks, "GpuReduce blocks"))
        if self.layout not in ("vector", "unroll"):
            raise ValueError(f"GpuReduce layout must be 'vector' (vectorised row loads) or 'unroll' (strided "
                             f"inputs), got {self.layout!r}")

    @property
    def threads(self) -> int:
        return self.lanes * self.warps * self.blocks

    def slots(self) -> int:
        return self.threads * self.vec

    def assignment(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Steps 1-2: ``(ids, lengths)``; accumulator i of thread t adds terms ``ids[t, i, :lengths[t, i]]``
        in that order (the rest of ``ids`` is -1)."""
        T, V = self.threads, self.vec
        if self.layout == "vector":
            nv, tail = n // V, n % V
            steps = -(-nv // T) + -(-tail // T)                 # loop steps, and room for the tail terms
            v = T * np.arange(steps)[None, :] + np.arange(T)[:, None]          # vector index (t, j)
            ok = v < nv
            ids = np.where(ok[:, None, :], V * v[:, None, :] + np.arange(V)[None, :, None], -1)
            lengths = np.broadcast_to(ok.sum(axis=1)[:, None], (T, V)).copy()
            for i in range(tail):                               # accumulator 0 of threads 0, 1, ...
                t = i % T
                ids[t, 0, lengths[t, 0]] = nv * V + i
                lengths[t, 0] += 1
            return ids, lengths
        k = np.arange(n)
        t, m = k % T, k // T
        per_thread = -(-n // T)
        steps = -(-per_thread // V)
        ids = np.full((T, V, max(steps, 1)), -1, np.int64)
        ids[t, m % V, m // V] = k
        return ids, (ids >= 0).sum(axis=2)

    def spec(self) -> OrderSpec:
        return OrderSpec("gpureduce", self.vec, params=(self.vec, self.lanes, self.warps, self.blocks, self.layout))

    def _schedule(self, n, key):
        T, V = self.threads, self.vec
        ids, lengths = self.assignment(n)
        b = WaveBuilder(key)
        cur = b.zeros(T * V).reshape(T, V).copy()   # a copy: the wave keeps its own ids
        for length in sorted(set(lengths.ravel().tolist()) - {0}):
            ti, ai = np.nonzero(lengths == length)
            cur[ti, ai] = b.chain(cur[ti, ai], -1 - ids[ti, ai, :length])
        acc0 = cur[:, 0]
        for i in range(1, V):                                     # step 3
            acc0 = b.add(acc0, cur[:, i])
        part = self._block_tree(b, acc0.reshape(self.blocks, self.warps * self.lanes))
        if self.blocks > 1:                                       # step 5
            G = self.lanes * self.warps
            per = -(-self.blocks // G)
            slots = np.full((G, per), -1, np.int64)
            for c in range(self.blocks):
                slots[c % G, c // G] = part[c]
            g_acc = b.zeros(G).copy()
            for length in sorted(set((slots >= 0).sum(axis=1)) - {0}):
                rows = np.flatnonzero((slots >= 0).sum(axis=1) == length)
                g_acc[rows] = b.chain(g_acc[rows], slots[rows, :length])
            part = self._block_tree(b, g_acc.reshape(1, G))
        return Schedule(n, b.nv, b.waves, int(part[0]))

    def _block_tree(self, b: WaveBuilder, vals: np.ndarray) -> np.ndarray:
        """Step 4 for every block: vals (blocks, warps * lanes) -> (blocks,) value ids."""
        v = vals.reshape(vals.shape[0], self.warps, self.lanes)
        while v.shape[2] > 1:
            h = v.shape[2] // 2
            v = b.add(v[:, :, :h].ravel(), v[:, :, h:].ravel()).reshape(v.shape[0], v.shape[1], h)
        w = v[:, :, 0]
        while w.shape[1] > 1:
            h = w.shape[1] // 2
            w = b.add(w[:, :h].ravel(), w[:, h:].ravel()).reshape(w.shape[0], h)
        return w[:, 0]


# ---- torch's launch heuristic (ReduceConfig / setReduceConfig in Reduce.cuh) for sum ----------------------

def _last_pow2(n: int) -> int:
    return 1 << (max(int(n), 1).bit_length() - 1)


def _block_dims(dim0: int, dim1: int, max_threads: int, warp: int) -> tuple[int, int]:
    d0 = _last_pow2(dim0) if dim0 < max_threads else max_threads
    d1 = _last_pow2(dim1) if dim1 < max_threads else max_threads
    width = min(d0, warp)
    height = min(d1, max_threads // width)
    return min(d0, max_threads // height), height


def torch_sum_order(n: int, outputs: int, itemsize: int, *, contiguous: bool = True, sms: int = 132,
                    threads_per_sm: int = 2048, warp: int = 32) -> GpuReduce:
    """The :class:`GpuReduce` torch's CUDA ``sum`` uses for ``outputs`` sums of ``n`` elements each.

    ``contiguous=True``: the reduced axis is the contiguous one (``X.sum(dim=-1)``, one row per output);
    ``False``: the outputs are contiguous and the reduced axis strided (``X.sum(dim=0)`` of a C-ordered X).
    ``itemsize``: bytes per input element (4 for float32, 2 for float16/bfloat16: vectors of 16 bytes).
    ``sms`` / ``threads_per_sm``: the GPU's multiprocessors and resident threads per multiprocessor
    (H100/H200: 132 and 2048). Checked bit for bit on an H200 (torch 2.11) for 4- and 2-byte types,
    rows of 1000, 4096, 16384 and 256 or 64 outputs (docs/gpu.md); other shapes follow the same rules.
    """
    n, outputs = positive_int(n, "n (elements per sum)"), positive_int(outputs, "outputs (number of sums)")
    itemsize = positive_int(itemsize, "itemsize (bytes per element)")
    vt0 = 4
    if contiguous:
        vectorize = n > 128
        vec = max(16 // itemsize, vt0) if vectorize else vt0
        width, height = _block_dims(n // vec if vectorize else n, outputs, 512, warp)
        out_step, step = 1, width
    else:
        ovec = 4 if outputs % 4 == 0 else 1
        vec, vectorize = vt0, False
        width, height = _block_dims(outputs // ovec, n, 512 // ovec, warp)
        out_step, step = width * ovec, 1
    lanes = width if contiguous else 1
    vpt = -(-n // step)
    warps = 1
    if vpt >= height * 16 or vpt >= 256:
        warps, step = height, step * height
    else:
        out_step *= height
    vpt = -(-n // step)
    blocks = 1
    grid = -(-outputs // out_step)
    target = sms * (threads_per_sm // (width * height))
    if warps > 1 and vpt >= 256 and grid <= target:
        blocks = max(min(-(-target // grid), -(-vpt // 16)), -(-vpt // 256))
    return GpuReduce(vec, lanes, warps, blocks, "vector" if vectorize else "unroll")


@dataclass(frozen=True)
class ChunkedScan(Order):
    """The last element of a chunked inclusive scan (torch's CUDA ``cumsum`` of a row): module docstring."""

    width: int = 64
    acc: Any = None

    def __post_init__(self):
        object.__setattr__(self, "width", _pow2(self.width, "ChunkedScan width"))
        object.__setattr__(self, "acc", float_format(self.acc, "ChunkedScan acc"))

    def spec(self) -> OrderSpec:
        return OrderSpec("gpureduce", self.width, acc=self.acc, params=(self.width,))

    def slots(self) -> int:
        return self.width

    def _schedule(self, n, key):
        b = WaveBuilder((self.acc or key[0], key[1]))
        carry = b.zeros(1)
        W = self.width
        for lo in range(0, n, W):
            hi = min(lo + W, n)
            first = b.add(np.array([-1 - lo]), carry)                       # fl(t_0 + c)
            vals = np.concatenate([first, -1 - np.arange(lo + 1, hi, dtype=np.int64)])
            if hi - lo < W:                                                 # padding: +0 (init)
                vals = np.concatenate([vals, b.zeros(W - (hi - lo))])
            while vals.size > 1:                                            # Sklansky: upper + lower
                vals = b.add(vals[1::2], vals[0::2])
            carry = vals
        return Schedule(n, b.nv, b.waves, int(carry[0]))


def torch_cumsum_order(n: int, rows: int, acc: Any = None) -> ChunkedScan:
    """The :class:`ChunkedScan` of torch's CUDA ``X.cumsum(dim=-1)`` for ``rows`` rows of ``n`` elements:
    ``2 * num_threads_x`` with ``log2 num_threads_x = clamp((9 + ceil_log2 n - ceil_log2 rows) / 2, 4, 9)``
    (unsigned arithmetic: a negative numerator clamps to 9). ``acc``: the input dtype (torch scans in it).
    Checked bit for bit on an H200 (torch 2.11) for float32, float16, bfloat16 and the shapes of docs/gpu.md."""
    n, rows = positive_int(n, "n (row length)"), positive_int(rows, "rows")
    lx, ly = (n - 1).bit_length(), (rows - 1).bit_length()
    num = 9 + lx - ly
    log_x = 9 if num < 0 else min(max(num // 2, 4), 9)
    return ChunkedScan(2 << log_x, acc)
