"""Accumulation orders of CPU library kernels: torch's cascade sum, XLA's reductions, interleaved BLAS accumulators
and a split by thread count. Each models the mechanism (vector lanes, accumulators, cascade levels, loop blocks),
parameterised by it, for any n; tests/identify/test_cpu_recordings.py checks them on recorded kernels.

* ``VectorCascade(lanes, accumulators, levels, min_power, load)``: torch's CPU ``sum`` (ATen ``SumKernel.cpp``,
  ``cascade_sum``). ``row_sum(items, A)``: A accumulators, accumulator a takes items ``a, a + A, a + 2A, ...``
  (the first ``A * (m // A)`` items), each a *cascade* (below); the ``m % A`` remaining items are added to
  accumulator 0 one by one; then ``acc_0 + acc_1``, ``+ acc_2``, ... in order.
  The cascade of S items (``multi_row_sum``): ``levels`` accumulators from +0, ``p = max(min_power,
  ceil_log2(S) // levels)``; level 0 adds items ``2^p`` at a time; after each block of ``2^p`` the level-j sum is
  added to level j + 1 and reset (j = 0 always; j >= 1 when 2^(j p) divides the items done), the last level
  keeps everything it gets; the last ``S % 2^p`` items go to level 0; then ``lvl_0 + lvl_1 + ...`` in order.
  n >= ``lanes * load`` (the vector path): vector v holds terms ``[lanes*load*v, lanes*load*(v+1))``; with
  ``load = 2`` (fp16 / bf16 read as two float vectors) its lane l is ``fl(t[2Lv + l] + t[2Lv + L + l])``;
  ``row_sum`` over the vectors, lane by lane; then ``r = +0``, the ``n % (lanes*load)`` tail terms added to r in
  order, then lanes 0..lanes-1 added to r in order. n < ``lanes * load``: ``row_sum`` over the terms (the scalar
  path). ``VectorCascade(1, 1)`` is the plain cascade of one column (torch's ``X.sum(dim=0)``: columns in
  groups of 32); ``VectorCascade(1, 4)`` its scalar path.
* ``ThreadSplit(threads, grain, inner, combine)``: ``at::parallel_for``: T = min(threads, ceil(n / grain)) chunks
  of ceil(n / T) terms (the last the rest), each reduced by ``inner``; the T partials by ``combine`` (torch's
  two-pass reduction of one output: the partials reduced by the same kernel). T = 1 is ``inner`` itself.
* ``GotoBlocks(q, inner)``: a GotoBLAS GEMM's K loop: blocks of q (the last two balanced when fewer than 2q remain),
  each reduced by ``inner`` from +0 and added to the result in order (torch's CPU ``mm``: q = 384).
* ``Interleaved(k, combine, tail, fma)``: k lane accumulators from +0, lane l adds terms ``l, l + k, ...`` in
  order (OpenBLAS sgemm: 16 lanes; XLA's CPU matmul: 4); ``tail="lanes"``: every term goes to its lane;
  ``"after"``: the last ``n % k`` terms are added one by one to the combined lanes. The lanes are combined by
  ``combine``: ``"sequential"`` (lane 0 + lane 1 + ...), ``"pairwise"`` (the first ceil(k/2) lanes against the
  rest, recursively) or ``"halving"`` (lane i + lane i + k/2, then i + k/4, ...). Empty lanes are +0 and left
  out (adding +0 is exact). ``fma=False``: every term is rounded to the accumulator before it is added (products
  of a kernel without FMA).
* ``XlaChunks(chunk, fma)``: XLA's CPU ``jnp.sum`` of small arrays (its reduce-window rewrite: windows of
  ``chunk`` with the padding split low / high, then a reduce) and ``jnp.dot``: n <= chunk: one chain from +0;
  else ``k = (n - chunk - 1) // chunk`` middle chunks of ``chunk`` terms, the ``r = n - k*chunk`` others split
  into a first chunk of ceil(r/2) and a last of floor(r/2); each chunk a chain from +0; more than ``chunk``
  chunk sums are chunked again by the same rule (the reduce-window applied to its output); the last at most
  ``chunk`` sums added in order.
* ``XlaVector(lanes, unroll)``: XLA's CPU vectorised ``jnp.sum`` (long rows): lane l holds terms ``l + lanes*i``.
  Blocks of ``lanes * unroll`` terms: per lane a chain of its ``unroll`` items; a level-k chunk (unroll^k
  blocks) is the chain of its ``unroll`` level-(k-1) chunks. The blocks are consumed by the largest chunks
  first: ``d_k`` chunks of level k where d_k are the base-``unroll`` digits of the number of blocks, and each
  lane adds its chunk sums in order; the terms after the last block (lane by lane, from +0) are added to it;
  then a halving tree over the lanes (lane i + lane i + lanes/2, ...). Below 1024 terms ``XlaVector(16, 4)`` is the
  tree of YNNPACK's sum (``ynnorders.YnnSum("k1")``, jax 0.10.2's ``__ynn_fusion``), whose top level is a Kahan sum.
* ``XlaScan(block, levels)``: the last element of XLA's CPU ``jnp.cumsum`` (its reduce-window rewrite: the row
  in tiles of ``block``, a scan in each, the scan of the tiles' sums one level up, added back): a cascade of
  ``block``-term chains (the class docstring) whose rest at each level is 1..block items, its levels added from
  the top down.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.args import check_bool, check_int
from .basic import Order, Sequential, build, check_suborders, positive_int, slices_then
from .schedule import WaveBuilder
from .spec import OrderSpec

__all__ = ["VectorCascade", "ThreadSplit", "GotoBlocks", "Interleaved", "XlaChunks", "XlaVector", "XlaScan",
           "schedule_depth", "goto_blocks", "xla_chunk_sizes", "COMBINES"]

COMBINES = ("sequential", "pairwise", "halving")


def _ceil_log2(x: int) -> int:
    """c10::utils::CeilLog2: 1 for x <= 2, else ceil(log2 x)."""
    return 1 if x <= 2 else int(x - 1).bit_length()


class ScheduleOrder(Order):
    """These orders' bounds read their schedule's depth (bounds/boundpath.py, kind "schedule")."""

    def spec(self) -> OrderSpec:
        return OrderSpec("schedule", params=(self,))


def _combine(b: WaveBuilder, lanes: list, how: str) -> np.ndarray | None:
    """Lane values (each (W,) ids or None for +0) combined sequentially, pairwise or by halving."""
    if how == "sequential" or len(lanes) <= 1:
        res = None
        for v in lanes:
            res = b.add_opt(res, v)
        return res
    if how == "pairwise":
        h = len(lanes) - len(lanes) // 2
        return b.add_opt(_combine(b, lanes[:h], how), _combine(b, lanes[h:], how))
    vals = list(lanes)
    while len(vals) > 1:          # halving: lane i + lane i + len/2 (an odd count keeps its last lane)
        h = len(vals) // 2
        vals = [b.add_opt(vals[i], vals[i + h]) for i in range(h)] + vals[2 * h:]
    return vals[0]


# ---- torch: the cascade sum -------------------------------------------------------------------------------

def _cascade(b: WaveBuilder, items: np.ndarray, levels: int, min_power: int, fixed: bool = False,
             top_down: bool = False, keep_last: bool = False) -> np.ndarray | None:
    """``multi_row_sum`` over items (S, W), every column independent: (W,) ids, None when S = 0 (+0). fixed: the
    step is 2^min_power whatever S; top_down: the levels are added from the last one down to level 0; keep_last:
    a level whose count is a multiple of the step keeps its last block as its own chain (XLA's scan)."""
    S = items.shape[0]
    if S == 0:
        return None
    if levels == 1:
        return b.chain_from(None, items.T)
    step = 1 << (min_power if fixed else max(min_power, _ceil_log2(S) // levels))
    nb = S // step
    nb -= 1 if keep_last and nb and S % step == 0 else 0
    accs: list = [None] * levels
    if S > nb * step:
        accs[0] = b.chain_from(None, items[nb * step:].T)
    vals = None                                                # (count, W): the sums level j receives
    if nb:
        blocks = items[:nb * step].reshape(nb, step, -1).transpose(0, 2, 1)        # (nb, W, step)
        w = blocks.shape[1]
        vals = b.chain_from(None, blocks.reshape(nb * w, step)).reshape(nb, w)
    for j in range(1, levels):
        if vals is None or vals.shape[0] == 0:
            break
        c = vals.shape[0]
        full = 0 if j == levels - 1 else c // step * step       # the last level keeps everything it gets
        full -= step if keep_last and full and full == c else 0
        if c > full:
            accs[j] = b.chain_from(None, vals[full:].T)
        if full:
            g = full // step
            grp = vals[:full].reshape(g, step, -1).transpose(0, 2, 1)
            vals = b.chain_from(None, grp.reshape(-1, step)).reshape(g, -1)
        else:
            vals = None
    res = None
    for a in (accs[::-1] if top_down else accs):
        res = b.add_opt(res, a)
    return res


def _row_sum(b: WaveBuilder, items: np.ndarray, accumulators: int, levels: int, min_power: int) -> np.ndarray | None:
    """torch's ``row_sum`` over items (m, W): ``accumulators`` interleaved cascades, the rest into the first."""
    m, A = items.shape[0], accumulators
    S = m // A
    w = items.shape[1]
    cols = items[:S * A].reshape(S, A * w)                       # column a*W + w: accumulator a, lane w
    acc = _cascade(b, cols, levels, min_power)
    parts: list = [None] * A if acc is None else list(acc.reshape(A, -1))
    if m > S * A:
        parts[0] = b.chain_from(parts[0], items[S * A:].T)
    res = parts[0]
    for p in parts[1:]:
        res = b.add_opt(res, p)
    return res


@dataclass(frozen=True)
class VectorCascade(ScheduleOrder):
    """torch's CPU ``sum`` (``cascade_sum``): vectors of ``lanes`` into ``accumulators`` cascades (module docstring)."""

    lanes: int = 8
    accumulators: int = 4
    levels: int = 4
    min_power: int = 4
    load: int = 1

    def __post_init__(self):
        for f in ("lanes", "accumulators", "levels", "load"):
            object.__setattr__(self, f, positive_int(getattr(self, f), f"VectorCascade {f}"))
        if self.load > 2:
            raise ValueError(f"VectorCascade load must be 1 (one vector per load) or 2 (a narrow type read as two "
                             f"float vectors and added), got {self.load}")
        object.__setattr__(self, "min_power", check_int(self.min_power, "VectorCascade min_power", 0, 30))

    def slots(self) -> int:
        return self.lanes * self.load * self.accumulators + self.levels

    def _schedule(self, n, key):
        b = WaveBuilder(key)
        t = -1 - np.arange(n, dtype=np.int64)
        L, per = self.lanes, self.lanes * self.load
        if n < per:                                            # the scalar path
            res = _row_sum(b, t[:, None], self.accumulators, self.levels, self.min_power)
        else:
            nv = n // per
            vec = t[:nv * per].reshape(nv, self.load, L)
            items = vec[:, 0, :] if self.load == 1 else b.add(vec[:, 0, :].ravel(), vec[:, 1, :].ravel()).reshape(nv, L)
            lanes = _row_sum(b, items, self.accumulators, self.levels, self.min_power)
            assert lanes is not None
            res = b.chain_from(None, np.concatenate([t[nv * per:], lanes])[None, :])
        return b.result(n, res)


# ---- a split by thread count ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ThreadSplit(ScheduleOrder):
    """``at::parallel_for``'s split of one reduction over ``threads`` threads (module docstring)."""

    threads: int = 2
    grain: int = 32768
    inner: Order = VectorCascade()
    combine: Order = VectorCascade()

    def __post_init__(self):
        object.__setattr__(self, "threads", positive_int(self.threads, "ThreadSplit threads"))
        object.__setattr__(self, "grain", positive_int(self.grain, "ThreadSplit grain"))
        check_suborders("ThreadSplit", inner=self.inner, combine=self.combine)

    def chunks(self, n: int) -> list[int]:
        T = max(1, min(self.threads, -(-n // self.grain)))
        size = -(-n // T)
        return [min(size, n - lo) for lo in range(0, n, size)] or [0]

    def _schedule(self, n, key):
        sizes = self.chunks(n)
        if len(sizes) == 1:
            return build(self.inner, n, key)
        return slices_then(sizes, self.inner, key, self.combine, key)


def goto_blocks(n: int, q: int, unroll: int = 0) -> list[int]:
    """The K blocks of ``GotoBlocks(q, unroll=unroll)`` over n terms."""
    sizes, left = [], n
    while left > 0:
        half = left - left // 2 if not unroll else min(left, -(-(left // 2) // unroll) * unroll)
        size = q if left >= 2 * q else (half if left > q else left)
        sizes.append(size)
        left -= size
    return sizes or [0]


@dataclass(frozen=True)
class GotoBlocks(ScheduleOrder):
    """The K loop of a GotoBLAS-style GEMM (OpenBLAS ``level3.c``; torch's CPU ``mm`` here with q = 384): blocks of
    ``q`` terms while at least 2q remain, a rest between q and 2q split into ceil(r/2) and floor(r/2) (``unroll``
    u > 0: OpenBLAS's rule, the first part floor(r/2) rounded up to a multiple of its GEMM_UNROLL_M = u); each block
    reduced by ``inner`` from +0 and added to the running result (C += A_blk B_blk) in order."""

    q: int = 384
    inner: Order = Sequential()
    unroll: int = 0

    def __post_init__(self):
        object.__setattr__(self, "q", positive_int(self.q, "GotoBlocks q (the K block)"))
        if isinstance(self.unroll, bool) or not isinstance(self.unroll, int) or not 0 <= self.unroll <= 1 << 16:
            raise ValueError(f"GotoBlocks unroll must be an int in 0..65536 (0: halves), got {self.unroll!r}")
        if not isinstance(self.inner, Order):
            raise TypeError(f"GotoBlocks inner must be an Order, got {self.inner!r}")

    def _schedule(self, n, key):
        sizes = goto_blocks(n, self.q, self.unroll)
        if len(sizes) == 1:
            return build(self.inner, n, key)
        return slices_then(sizes, self.inner, key, Sequential(), key)


# ---- interleaved lane accumulators ------------------------------------------------------------------------

def _lane_chains(b: WaveBuilder, t: np.ndarray, k: int) -> list:
    """Lane j: chain from +0 over t[j], t[j + k], ...; lanes of equal length in one wave. None for empty lanes."""
    n = t.size
    out: list = [None] * k
    lengths = [len(range(j, n, k)) for j in range(k)]
    for length in sorted(set(lengths) - {0}):
        js = [j for j in range(k) if lengths[j] == length]
        ids = b.chain_from(None, np.array([t[j::k] for j in js], np.int64))
        for j, v in zip(js, ids):
            out[j] = np.array([v])
    return out


@dataclass(frozen=True)
class Interleaved(ScheduleOrder):
    """k interleaved lane accumulators, combined sequentially, pairwise or by halving (module docstring)."""

    k: int = 2
    combine: str = "sequential"
    tail: str = "lanes"
    fma: bool = True

    def __post_init__(self):
        object.__setattr__(self, "k", positive_int(self.k, "Interleaved k (lanes)"))
        if self.combine not in COMBINES:
            raise ValueError(f"Interleaved combine must be one of {COMBINES}, got {self.combine!r}")
        if self.tail not in ("lanes", "after"):
            raise ValueError(f"Interleaved tail must be 'lanes' (each term in its lane) or 'after' (the n % k last "
                             f"terms added after the lanes), got {self.tail!r}")
        object.__setattr__(self, "fma", check_bool(self.fma, f"{type(self).__name__} fma"))

    def slots(self) -> int:
        return self.k

    def _schedule(self, n, key):
        b = WaveBuilder(key)
        t = b.terms(n, self.fma)
        main = n if self.tail == "lanes" else n - n % self.k
        res = _combine(b, _lane_chains(b, t[:main], self.k), self.combine)
        if main < n:
            res = b.chain_from(res, t[main:][None, :])
        return b.result(n, res)


# ---- XLA ---------------------------------------------------------------------------------------------------

def xla_chunk_sizes(n: int, chunk: int) -> list[int]:
    """The chunks of ``XlaChunks(chunk)`` over n terms."""
    if n <= chunk:
        return [n]
    k = (n - chunk - 1) // chunk
    r = n - k * chunk
    return [r - r // 2] + [chunk] * k + [r // 2]


@dataclass(frozen=True)
class XlaChunks(ScheduleOrder):
    """XLA's CPU sum of short rows: chunks of ``chunk`` terms, the rest split between the first and the last."""

    chunk: int = 32
    fma: bool = True

    def __post_init__(self):
        object.__setattr__(self, "chunk", positive_int(self.chunk, "XlaChunks chunk"))
        object.__setattr__(self, "fma", check_bool(self.fma, f"{type(self).__name__} fma"))

    def _schedule(self, n, key):
        b = WaveBuilder(key)
        return b.result(n, _xla_chunks(b, b.terms(n, self.fma), self.chunk) if n else None)


def _xla_chunks(b: WaveBuilder, t: np.ndarray, chunk: int) -> np.ndarray:
    """XlaChunks over the refs t (at least one): the chunk sums, and those by the same rule while more than
    ``chunk`` remain (XLA's reduce-window of ``chunk`` applied again to its own output), then in order."""
    sizes = xla_chunk_sizes(t.size, chunk)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    sums = np.empty(len(sizes), np.int64)
    for size in sorted(set(sizes)):
        idx = [i for i, s in enumerate(sizes) if s == size]
        sums[idx] = b.chain_from(None, np.array([t[starts[i]:starts[i] + size] for i in idx], np.int64))
    if len(sums) > chunk:
        return _xla_chunks(b, sums, chunk)
    return b.chain_from(sums[:1], sums[None, 1:])


@dataclass(frozen=True)
class XlaVector(ScheduleOrder):
    """XLA's CPU vectorised sum: ``lanes`` strided lanes, nested chunks of ``unroll`` (module docstring)."""

    lanes: int = 16
    unroll: int = 4

    def __post_init__(self):
        object.__setattr__(self, "lanes", positive_int(self.lanes, "XlaVector lanes"))
        object.__setattr__(self, "unroll", positive_int(self.unroll, "XlaVector unroll"))
        if self.unroll < 2:
            raise ValueError("XlaVector unroll must be >= 2")

    def slots(self) -> int:
        return self.lanes

    def _schedule(self, n, key):
        b = WaveBuilder(key)
        L, U = self.lanes, self.unroll
        t = -1 - np.arange(n, dtype=np.int64)
        nb = n // (L * U)
        lane_sums: list = [None] * L
        if nb:
            blk = t[:nb * L * U].reshape(nb, U, L).transpose(0, 2, 1)            # (block, lane, item)
            level = b.chain_from(None, blk.reshape(nb * L, U)).reshape(nb, L)  # level-1 chunks
            levels = [level]
            while levels[-1].shape[0] >= U:
                g = levels[-1].shape[0] // U
                grp = levels[-1][:g * U].reshape(g, U, L).transpose(0, 2, 1).reshape(g * L, U)
                levels.append(b.chain(grp[:, 0], grp[:, 1:]).reshape(g, L))
            picks, done = [], 0                                  # largest chunks first
            for k in range(len(levels) - 1, -1, -1):
                size = U ** k
                d = (nb - done) // size
                picks += [levels[k][done // size + i] for i in range(d)]
                done += d * size
            main = picks[0] if len(picks) == 1 else b.chain(picks[0], np.stack(picks[1:], axis=1))
            lane_sums = [np.array([v]) for v in main]
        rest = t[nb * L * U:]
        if rest.size:
            rem = _lane_chains(b, rest, L)
            lane_sums = [b.add_opt(m, r) for m, r in zip(lane_sums, rem)]
        res = _combine(b, lane_sums, "halving")
        return b.result(n, res)


@dataclass(frozen=True)
class XlaScan(ScheduleOrder):
    """The last element of XLA's CPU ``jnp.cumsum`` of a row: blocks of ``block`` terms (chains from +0), the block
    sums in groups of ``block`` (chains), and so on up ``levels`` levels (the last keeps all it gets); the rest of
    each level is its own chain, and it is never empty: a level whose count is a multiple of ``block`` keeps its
    last block as its rest (XLA's scan tiles the row, and the tile of the last element is its own chain, the
    earlier tiles' sums going up); the levels are then added from the top down to the terms after the last
    block."""

    block: int = 16
    levels: int = 8

    def __post_init__(self):
        object.__setattr__(self, "block", positive_int(self.block, "XlaScan block"))
        object.__setattr__(self, "levels", positive_int(self.levels, "XlaScan levels"))
        if self.block < 2 or self.block & (self.block - 1):
            raise ValueError(f"XlaScan block must be a power of two >= 2, got {self.block}")

    def slots(self) -> int:
        return self.levels

    def _schedule(self, n, key):
        b = WaveBuilder(key)
        t = -1 - np.arange(n, dtype=np.int64)
        res = _cascade(b, t[:, None], self.levels, self.block.bit_length() - 1, fixed=True, top_down=True,
                       keep_last=True)
        return b.result(n, res)


# ---- the bounds ----------------------------------------------------------------------------------------------

def schedule_depth(order: Order, n: int) -> int:
    """Roundings on the deepest term's path to the result of ``order`` over n terms (from its schedule; a +0
    start counts as a rounding, which makes the count an upper bound)."""
    s = build(order, n)
    d = np.zeros(s.n_vals, np.int64)

    def dep(r: np.ndarray) -> np.ndarray:
        r = np.asarray(r, np.int64)
        return np.where(r >= 0, d[np.where(r >= 0, r, 0)], 0)

    for w in s.waves:
        if w.kind == "const":
            d[w.dst] = 0
        elif w.kind == "load":
            d[w.dst] = 1 + dep(w.a)
        elif w.kind in ("add", "sub", "subz"):
            d[w.dst] = 1 + np.maximum(dep(w.a), dep(w.b))
        elif w.kind == "chain":
            L = w.b.shape[1]
            d[w.dst] = np.maximum(dep(w.a) + L, (dep(w.b) + (L - np.arange(L))[None, :]).max(axis=1))
        else:                                                  # a fused block: one rounding of all its inputs
            d[w.dst] = 1 + np.maximum(dep(w.a), dep(w.b).max(axis=1))
    return int(d[s.result]) if s.result >= 0 else 0

