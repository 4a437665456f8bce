"""YNNPACK's float sums (XNNPACK's ``ynnpack/``): jax 0.10.2's CPU runs ``jnp.sum`` of arrays of 4096 elements or
more (measured) as a ``__ynn_fusion`` (``jax.jit(f).lower(x).compile().as_text()`` shows it; smaller ones are XLA's
own reduce-window rewrite, ``XlaChunks``), and YNNPACK's reduce kernels sum floats by a three-level tree of
accumulators whose last level is a Kahan (compensated) sum, after a partial reduction that slinky's tiling picks.

``YnnSum(layout, lanes, pack, split)`` models ``ynnpack/kernels/reduce/sum.h`` (the version with ``tree_degree =
16`` and three levels; on this AVX-512 CPU ``sum_k1_fp32_avx512`` / ``sum_kn_fp32_avx512``, the fp16 kernels, which
convert each input to fp32, and ``sum_k1_bf16_fp32_avx512bf16``, whose ``vdpbf16ps`` adds two inputs per lane), the
Kahan step of ``ynnpack/base/simd/x86_avx512.h`` and the partial reduction of ``ynn_define_reduce``
(``ynnpack/subgraph/reduce.cc``). Every addition is an fp32 rounding (simulate's accumulator); +0 starts are left
out (adding +0 is exact).

1. A *partial* is a chain from +0. ``layout="kn"`` (the reduced axis is not the contiguous one: ``jnp.sum(X,
   axis=0)``, ``sum_float_kn_tile``): one output's partial is 4 consecutive rows (``partial_sum_kn``), the
   ``k % 4`` last rows one shorter partial; the clock counts rows (+4 per partial, none for the last one).
   ``layout="k1"`` (the reduced axis is contiguous: ``jnp.sum(X, axis=-1)``, ``sum_float_k1``): a block of
   ``4 * lanes * pack`` terms is four vectors of ``lanes * pack``; lane l's partial is the chain over the four
   vectors of its ``pack`` inputs (``pack = 2``: the second before the first, as ``vdpbf16ps`` adds them; the
   last block is loaded zero-padded, so a lane's partial has only its terms); blocks are taken four at a time
   while four remain (the clock += ``4 * lanes`` after the four), then one at a time (clock += ``lanes``),
   then the rest (no clock).
2. Each partial is added to the level-0 accumulator ``acc0`` (per lane).
3. ``accumulate(clock)``: when ``clock % 16 == 0``, ``acc1 += acc0`` and ``acc0 = 0``; when also ``clock %
   256 == 0``, ``kahan_sum(acc1, acc2, err)`` and ``acc1 = 0``. It runs after every clock step, and once more
   at the end with clock 0 (both levels flush).
4. ``kahan_sum(a, acc, err)``: ``y = a - err``, ``t = acc + y``, ``err = (t - acc) - y`` (+0 where that is not
   finite), ``acc = t``. The error term is never added to the result: it only corrects the next ``a``.
5. ``k1``: the lanes' ``acc2`` are added by a halving tree (lane i + lane i + lanes/2, ..., the horizontal sum);
   ``kn``: ``acc2`` is the output. ``kn`` with at most 4 rows is one chain (``sum_float_kn``'s short path).
6. ``split > 0`` (and < n): a partial reduction: the terms in pieces of ``split`` (the last shorter), each
   summed by 1-5, then the pieces' results summed by 1-5 in the same layout with ``pack = 1`` (the partials are
   fp32). ``ynn_split`` gives the split ``make_split_factors`` picks (tiles of 32768 elements, the innermost
   dimension first; 32768 for fp16 and bf16 inputs too, measured): ``kn`` over nout columns: ``32768 // nout``
   rows; ``k1``: 32768 terms when there are at most 3 outputs (measured: from 4 outputs on, the scheduler does
   not split the reduction).

Checked bit for bit against jax 0.10.2 on this machine (Xeon with AVX-512, AVX512-BF16; tests/identify/
test_ynnorders.py, docs/gpu.md) on data with cancelling +-2^14 terms: ``kn`` on 300 .. 40000 rows of 2 .. 1024
columns with ``ynn_split``, ``k1`` on rows of 1000 .. 70000 terms (1 .. 16 rows), bf16 ``k1`` with ``pack=2``.
Not modelled: subnormal bf16 inputs of ``vdpbf16ps`` (it treats them as zero) and the sign of a zero result
(+0 starts are left out). The error bounds read the schedule's depth (``schedule_depth``), where the Kahan
step's subtractions count as roundings on the path like additions: a bound of the plain tree's form, looser than
the compensated sum needs. Why it is still a bound (the depth argument alone is a proof for trees, and the Kahan
step makes a DAG): the plain accumulators give each flushed acc1 value an error of at most gamma_h' (h' its
tree's depth), and Kahan summation of m such values errs by at most (2u + 16 m u^2) times the sum of their
magnitudes (Higham 2002, Thm. 4.8), so c <= gamma_h' (1 + 2u + 16 m u^2) + (2u + 16 m u^2)(1 + gamma_h'); each
Kahan step adds at least two roundings to the schedule's depth h >= h' + 2m, and gamma_h exceeds that sum for
m >= 1 and h' >= 4. Measured: the worst error is 0.11 of the bound on random, positive, cancelling, 2^20-spiked
and low-bit data (kn and k1, 600 .. 20000 terms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.args import check_int
from .cpu import ScheduleOrder
from .schedule import WaveBuilder

__all__ = ["YnnSum", "LAYOUTS", "ynn_split"]

LAYOUTS = ("k1", "kn")
LEVEL1, LEVEL2 = 15, 255          # level_mask(1), level_mask(2) of a degree-16 tree


def _tree(events: list) -> tuple[list, list, list]:
    """The accumulator tree of steps 2-3 from the partials' clock events (``events[j]``: the clock after
    partial j, None when it does not tick). Returns (acc0 groups: lists of partials, acc1 groups: lists of
    acc0 groups, Kahan inputs: acc1 group indices in order)."""
    g0: list = []
    g1: list = []
    kahan: list = []
    cur0: list = []
    cur1: list = []

    def flush(clock):
        nonlocal cur0, cur1
        if clock & LEVEL1 == 0:
            if cur0:
                g0.append(cur0)
                cur1.append(len(g0) - 1)
            cur0 = []
            if clock & LEVEL2 == 0:
                g1.append(cur1)
                kahan.append(len(g1) - 1)
                cur1 = []

    for j, clock in enumerate(events):
        cur0.append(j)
        if clock is not None:
            flush(clock)
    flush(0)
    return g0, g1, kahan


def _sums(b: WaveBuilder, items: np.ndarray, groups: list) -> list:
    """Per group (a list of rows of items (m, w)): the chain of its rows from the first, (w,) ids; groups of one
    length share one wave."""
    out: list = [None] * len(groups)
    w = items.shape[1]
    for length in sorted({len(g) for g in groups}):
        idx = [i for i, g in enumerate(groups) if len(g) == length]
        rows = np.array([groups[i] for i in idx], np.int64)                  # (G, length)
        start = items[rows[:, 0]].reshape(-1)
        if length == 1:
            res = start.reshape(len(idx), w)
        else:
            add = items[rows[:, 1:]].transpose(0, 2, 1).reshape(len(idx) * w, length - 1)
            res = b.chain(start, add).reshape(len(idx), w)
        for i, r in zip(idx, res):
            out[i] = r
    return out


def _levels(b: WaveBuilder, partials: np.ndarray, events: list) -> np.ndarray | None:
    """Steps 2-4 over partials (m, w) (w lanes with the same structure): acc2 per lane, (w,) ids or None."""
    g0, g1, kahan = _tree(events)
    s0 = np.array(_sums(b, partials, g0)) if g0 else np.empty((0, partials.shape[1]), np.int64)
    s1 = _sums(b, s0, [g for g in g1 if g])
    sums1 = iter(s1)
    acc = err = None
    for i in kahan:
        a = next(sums1) if g1[i] else None
        if err is None:                              # err = +0: y = a, exact
            if a is None:
                continue
            if acc is None:                          # t = 0 + a: exact, and err = (a - 0) - a = 0
                acc = a
                continue
            t = b.add(acc, a)
            err = b.sub(b.sub(t, acc), a, finite=True)
            acc = t
            continue
        y = b.sub(b.zeros(err.size) if a is None else a, err)    # (err is set only once acc is)
        t = b.add(acc, y)
        err = b.sub(b.sub(t, acc), y, finite=True)
        acc = t
    return acc


def _kn(b: WaveBuilder, t: np.ndarray) -> np.ndarray | None:
    n = t.size
    if n == 0:
        return None
    if n <= 4:
        return b.chain_from(None, t[None, :])
    full = n // 4
    parts = [b.chain_from(None, t[:4 * full].reshape(full, 4))]
    events: list = [4 * (j + 1) for j in range(full)]
    if n % 4:
        parts.append(b.chain_from(None, t[4 * full:][None, :]))
        events.append(None)
    return _levels(b, np.concatenate(parts)[:, None], events)


def _k1(b: WaveBuilder, t: np.ndarray, lanes: int, pack: int) -> np.ndarray | None:
    n, blk = t.size, 4 * lanes * pack
    if n == 0:
        return None
    nb = n // blk
    unrolled = nb // 4
    events: list = []
    for j in range(nb):
        if j < 4 * unrolled:
            events.append(4 * lanes * (j // 4 + 1) if j % 4 == 3 else None)
        else:
            events.append(4 * lanes * unrolled + lanes * (j - 4 * unrolled + 1))
    order = np.arange(pack)[::-1]                      # a lane's packed inputs: the last one first (vdpbf16ps)
    full = None
    if nb:
        items = t[:nb * blk].reshape(nb, 4, lanes, pack)[..., order]           # (block, quarter, lane, packed)
        full = b.chain_from(None, items.transpose(0, 2, 1, 3).reshape(nb * lanes, 4 * pack)).reshape(nb, lanes)
    rest = t[nb * blk:]
    pad = np.zeros(blk, np.int64)
    pad[:rest.size] = rest
    has = (np.arange(blk) < rest.size).reshape(4, lanes, pack)[..., order]   # the rest is loaded zero-padded
    pad = pad.reshape(4, lanes, pack)[..., order]
    tail = [[int(r) for r in pad[:, j][has[:, j]]] for j in range(lanes)]
    lane_acc: list = [None] * lanes
    for c in sorted({len(x) for x in tail}):
        js = [j for j in range(lanes) if len(tail[j]) == c]
        parts = [full[:, js]] if full is not None else []
        ev = list(events)
        if c:
            parts.append(b.chain_from(None, np.array([tail[j] for j in js], np.int64))[None, :])
            ev.append(None)
        if not parts:
            continue
        res = _levels(b, np.concatenate(parts), ev)
        if res is not None:
            for j, v in zip(js, res):
                lane_acc[j] = np.array([v])
    return _halving(b, lane_acc)


def _halving(b: WaveBuilder, lanes: list) -> np.ndarray | None:
    """lane i + lane i + k/2, then i + k/4, ... (None: +0, left out)."""
    cur = list(lanes)
    while len(cur) > 1:
        h = len(cur) // 2
        cur = [b.add_opt(cur[i], cur[i + h]) for i in range(h)] + cur[2 * h:]
    return cur[0]


@dataclass(frozen=True)
class YnnSum(ScheduleOrder):
    """YNNPACK's float sum: partials of 4 rows (``kn``) or of 4 * lanes * pack-term blocks (``k1``) in a degree-16
    tree of three accumulators, the last a Kahan sum; a partial reduction in pieces of ``split`` terms whose
    results the same kernel sums (module docstring)."""

    layout: str = "k1"
    lanes: int = 16
    pack: int = 1
    split: int = 0

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"YnnSum layout must be 'k1' (the reduced axis contiguous: sum along the last "
                             f"axis) or 'kn' (a strided reduced axis: sum along axis 0), got {self.layout!r}")
        object.__setattr__(self, "lanes", check_int(self.lanes, "YnnSum lanes", lo=1))
        if self.lanes & (self.lanes - 1):
            raise ValueError(f"YnnSum lanes must be a power of two (the lanes of a SIMD vector), got {self.lanes}")
        object.__setattr__(self, "pack", check_int(self.pack, "YnnSum pack (inputs per lane and vector)", lo=1))
        if self.layout == "kn" and self.pack != 1:
            raise ValueError("YnnSum pack applies to the k1 layout (kn adds whole rows), so kn needs pack=1")
        object.__setattr__(self, "split", check_int(self.split, "YnnSum split", lo=0))

    def slots(self) -> int:
        return 4 * self.lanes * self.pack

    def _sum(self, b: WaveBuilder, t: np.ndarray, pack: int) -> np.ndarray | None:
        return _kn(b, t) if self.layout == "kn" else _k1(b, t, self.lanes, pack)

    def _schedule(self, n, key):
        b = WaveBuilder(key)
        t = -1 - np.arange(n, dtype=np.int64)
        if not self.split or self.split >= n:
            return b.result(n, self._sum(b, t, self.pack))
        parts = [self._sum(b, t[s:s + self.split], self.pack) for s in range(0, n, self.split)]
        res = self._sum(b, np.concatenate(parts), 1)          # the partials are fp32: the fp32 kernel
        return b.result(n, res)


def ynn_split(layout: str, n: int, nout: int) -> int:
    """The partial reduction ``make_split_factors`` picks (ynnpack/subgraph/slinky.cc: tiles of 32768 * 4 /
    element_cost elements, the innermost dimension first; measured: 32768 for fp16 and bf16 inputs too): ``kn``
    (nout contiguous outputs, n rows): rows in pieces of 32768 // nout when that is fewer than n; ``k1`` (the
    reduced axis innermost): pieces of 32768 terms when nout <= 3 (measured: from 4 outputs on the reduction is
    not split). 0: no split."""
    area = 32768
    if layout == "kn":
        s = max(1, area // max(nout, 1))
        return s if s < n else 0
    return area if nout <= 3 and area < n else 0
