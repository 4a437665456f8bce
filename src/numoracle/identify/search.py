"""Which accumulation order did a kernel use? Rank models by how many of its outputs they reproduce bit for bit.

``identify_order(actual, op, *inputs)`` simulates candidate orders (:mod:`numoracle.orders`,
:mod:`numoracle.orders`) on the kernel's inputs and compares every output element's bits with the
kernel's. A model that reproduces every element is the kernel's order as far as these inputs can tell;
when none does, the report says so and shows how close each came (fraction of identical elements, the
ULP distances of the rest).

The automatic search is guided, not exhaustive (docs/gpu.md):

* matmul / dot: (1) the *unit*: the block FMAs of the GPU presets that take the input format, the H100
  one promoted to FP32 every 32, 64 or 128 terms, sequential and pairwise accumulation, over all of K
  (up to K = 512 also block FMAs of other block sizes, kept fraction bits, sticky bit and carry bit:
  a small-K recording fixes the unit, which ``units=`` then hands to the search at large K);
  (2) the *split* of K, for each unit in the order of how closely its errors lean like the kernel's
  (toward zero or not): even ``SplitK(s)`` and ``TiledSplitK(s, tile)`` (slices on K-steps of 16..256
  terms), s = 2..16 (and 24, 32, 48, 64 for the ``keep`` likeliest units), each slicing's partials
  simulated once; (3) the *combine* of those partials: in slice order, a tree, the reverse order, or
  rounded to a narrower output format and added in it.
* sum: torch's CUDA reduction trees (:func:`numoracle.orders.torch_sum_order`, both kernels) and its
  cumsum's last element (:func:`numoracle.orders.torch_cumsum_order`), then sequential, pairwise, numpy's,
  blocked, then a grid of :class:`numoracle.orders.GpuReduce` and ``ChunkedScan`` shapes.

Every candidate is scored on a subset of rows first (``prune_rows``); the best few, and any that
reproduce the subset, are confirmed on every row. The search stops at the first confirmed model.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..core.codekeys import is_nan, to_key
from ..core.convert import cast, decode
from ..core.formats import FP32, Format, format_of
from ..core.interop import to_codes
from ..core.progress import progress
from ..models.gpuorders import ChunkedScan, GpuReduce, TiledSplitK, cutlass_slices, torch_cumsum_order, torch_sum_order
from ..models.orders import Blocked, BlockFMA, NumpyPairwise, Order, Pairwise, Sequential, SplitK
from ..models.ordertext import as_order
from ..models.presets import GPU_PRESETS, preset
from ..models.simulation import simulate
from .report import Candidate, IdentifyReport, ulp_histogram

__all__ = ["identify_order", "IdentifyReport", "Candidate"]

# The GPUs of the preset table (aliases are the same tensor cores), tried in this order of likelihood; a GPU
# added to the table is tried after these.
_LIKELY = ("h100", "a100", "b200", "v100")
_GPUS = tuple(sorted(dict.fromkeys(p.gpu for p in GPU_PRESETS if p.promotion is None),
                     key=lambda g: _LIKELY.index(g) if g in _LIKELY else len(_LIKELY)))


class _Problem:
    """The kernel's inputs and outputs, cut to rows on demand, and the scoring of one order."""

    def __init__(self, actual: Any, op: str, inputs: tuple, acc: Any, out: Any, rows: Any):
        self.op = str(op).lower()
        if self.op not in ("sum", "dot", "matmul"):
            raise ValueError(f"unknown op {op!r}; identify_order supports sum, dot, matmul")
        need = 1 if self.op == "sum" else 2
        if len(inputs) != need:
            raise TypeError(f"identify_order({self.op!r}) takes {need} input array(s), got {len(inputs)}")
        self.inputs = tuple(_native(x, f"input {i}") for i, x in enumerate(inputs))
        codes, fmt = to_codes(actual, "actual")
        if not isinstance(fmt, Format):
            raise TypeError(f"actual holds {fmt.name} codes; pass the kernel's floating-point outputs")
        self.acc = format_of(acc)
        self.out = format_of(out) if out is not None else fmt
        if fmt != self.out:   # outputs stored wider than they were rounded to (e.g. fp16 sums kept as float32)
            wide, codes = codes, cast(codes, self.out, src=fmt)
            back = decode(codes, self.out)
            lost = ~((back == decode(wide, fmt)) | np.isnan(back))
            if lost.any():
                raise ValueError(f"out={self.out.name}: {int(lost.sum())} of actual's {fmt.name} values are not "
                                 f"{self.out.name} values (e.g. {decode(wide, fmt)[lost].ravel()[0]!r}); give the "
                                 "format the kernel rounded its outputs to")
        shape = self._shape()
        if codes.shape != shape:
            raise ValueError(f"actual has shape {codes.shape}, but {self.op} of inputs of shapes "
                             f"{[x.shape for x in self.inputs]} gives {shape}")
        self.n_outputs = int(np.prod(shape)) if shape else 1   # before any row subset: the kernel's launch
        if rows is not None:
            if self.op == "dot":
                raise ValueError("rows= selects output rows; a dot product has a single output")
            idx = np.asarray(rows).ravel()
            idx = np.arange(shape[0])[idx] if idx.dtype != bool else np.flatnonzero(idx)
            self.inputs = (self.inputs[0][idx],) + self.inputs[1:]
            codes = codes[idx]
        self.codes = np.asarray(codes)
        self.n_rows = 1 if self.op == "dot" else self.codes.shape[0]
        self.K = self.inputs[0].shape[-1]
        self.evaluated = 0
        self._exact: dict = {}

    def _shape(self) -> tuple:
        x = self.inputs[0]
        if self.op == "sum":
            if x.ndim < 1 or x.shape[-1] < 1:
                raise ValueError("identify_order('sum') reduces the last axis of a non-empty array")
            return x.shape[:-1]
        b = self.inputs[1]
        if self.op == "dot":
            return ()
        if x.ndim != 2 or b.ndim != 2 or x.shape[1] != b.shape[0]:
            raise ValueError(f"matmul takes A (m, K) and B (K, n); got shapes {x.shape} and {b.shape}")
        return (x.shape[0], b.shape[1])

    @property
    def in_fmt(self) -> Format:
        return format_of(self.inputs[0].dtype)

    def cut(self, rows: np.ndarray | None, lo: int = 0, hi: int | None = None) -> tuple:
        """The inputs of the given rows, and of terms lo..hi-1 only."""
        ins = self.inputs
        if rows is not None and self.op != "dot":
            ins = (ins[0][rows],) + ins[1:]
        if lo == 0 and hi is None:
            return ins
        if self.op == "sum":
            return (np.ascontiguousarray(ins[0][..., lo:hi]),)
        return np.ascontiguousarray(ins[0][..., lo:hi]), np.ascontiguousarray(ins[1][lo:hi])

    def score(self, order: Order, rows: np.ndarray | None, stage: str) -> Candidate:
        acc = self.acc if order.acc is None else order.acc    # an order that fixes its accumulator keeps it
        got = simulate(self.op, *self.cut(rows), acc=acc, order=order, out=self.out, codes=True)
        self.evaluated += 1
        return self.compare(order, got, rows, stage)

    def compare(self, order: Order, got: np.ndarray, rows: np.ndarray | None, stage: str,
                simulated: bool = True) -> Candidate:
        """Score a model's output codes (of the given rows) against the kernel's; simulated=False marks codes
        computed by a shortcut (a guide for the search: such a score never confirms an order)."""
        ref = self.codes if rows is None or self.op == "dot" else self.codes[rows]
        bias = self.bias(got, rows)
        got, ref = np.asarray(got).ravel(), np.asarray(ref).ravel()
        nan_g, nan_r = is_nan(got, self.out), is_nan(ref, self.out)
        same = (got.astype(np.uint64) == ref.astype(np.uint64)) | (nan_g & nan_r)
        known = ~nan_g & ~nan_r
        d = _ulps(to_key(np.where(known, got, 0), self.out), to_key(np.where(known, ref, 0), self.out), self.out)
        return Candidate(order, stage, int(same.sum()), int(same.size), ulp_histogram(d[~same & known],
                                                                                       int((~same & ~known).sum())),
                         float(np.median(np.abs(d[known]))) if known.any() else float("nan"),
                         rows is None and simulated, bias, simulated)

    def bias(self, codes: np.ndarray, rows: np.ndarray | None) -> float:
        """Mean direction of the outputs' errors: -1 all toward zero (truncation), 0 unbiased, +1 away.

        Measured against the float64 evaluation of the inputs (a guide for the search, not a verdict):
        a truncating block FMA and a round-to-nearest order differ here even when few bits agree."""
        key = (None if rows is None else rows.tobytes())
        if key not in self._exact:
            ins = [x.astype(np.float64) for x in self.inputs]
            if rows is not None and self.op != "dot":
                ins[0] = ins[0][rows]
            self._exact[key] = ins[0].sum(axis=-1) if self.op == "sum" else ins[0] @ ins[1]
        ex = np.asarray(self._exact[key]).ravel()
        v = decode(np.asarray(codes).ravel(), self.out)
        ok = np.isfinite(v) & (ex != 0) & (v != ex)
        return float(np.mean(np.sign(v[ok] - ex[ok]) * np.sign(ex[ok]))) if ok.any() else 0.0


def _last_acc(order: Order, acc: Format) -> Format:
    """The format of an order's last rounding before the output (its combine's, outer's, or own accumulator)."""
    last = next((getattr(order, f) for f in ("combine_acc", "outer_acc", "carry") if getattr(order, f, None)), None)
    return last or order.acc or acc


def _native(x: Any, what: str) -> np.ndarray:
    if isinstance(x, np.ndarray) and x.dtype.kind not in "OUSVb":
        return x
    from ..core.interop import as_native
    codes, fmt = to_codes(x, what)
    return as_native(codes, fmt)


def _ulps(ka: np.ndarray, kb: np.ndarray, fmt: Format) -> np.ndarray:
    """Signed ULP distances of ordered keys (-0 and +0 are one point)."""
    d = ka.astype(np.int64) - kb.astype(np.int64)
    if fmt.has_negative_zero:
        d = np.where((ka < 0) & (kb >= 0), d + 1, np.where((ka >= 0) & (kb < 0), d - 1, d))
    return d


# ---- candidate families ----------------------------------------------------------------------------------

def _units(fmt: Format, out: Format) -> list[Order]:
    """Stage 1 for matmul/dot: block FMAs of the presets that take this input format, plain orders."""
    name = {"fp8_e4m3fn": "fp8", "fp8_e5m2": "fp8", "fp8_e4m3": "fp8", "fp32": "tf32"}.get(fmt.name, fmt.name)
    units: list[Order] = []
    for gpu in _GPUS:
        try:
            units.append(preset(gpu, name))
        except ValueError:
            continue
        if name == "fp16" and out.name == "fp16":
            try:
                units.append(preset(gpu, name, out="fp16"))
            except ValueError:
                pass
    if name in ("fp8", "fp16", "bf16", "tf32"):   # tensor-core partials promoted to FP32 every N terms
        units += [preset("h100", name, promote=p) for p in (128, 64, 32)]
    units += [Sequential(), Pairwise()]
    return list(dict.fromkeys(units))


_SMALL_K = 512   # up to here the unit stage also tries block FMA variants (a small-K recording fixes the unit)


def _variants(fmt: Format) -> list[Order]:
    """Block FMAs beyond the presets: block size, kept fraction bits, sticky bit or truncation, carry bit."""
    fbits = (12, 13, 14, 22, 23, 24, 25, 26) if fmt.bits <= 8 else (22, 23, 24, 25, 26)
    return [BlockFMA(n, f, truncate=t, carry_bit=c, acc=FP32) for n in (4, 8, 16, 32) for f in fbits
            for t in (True, False) for c in (True, False)]


def _splits(unit: Order, K: int, many: bool = True) -> list[Order]:
    """Stage 2: even slices and slices on K-steps (the CUTLASS rule), one model per distinct slicing (the
    plainer model first: SplitK(s) where a tiled split cuts the same slices). many: also 24..64 slices."""
    seen, found = set(), []
    for s in (*range(2, 17), *((24, 32, 48, 64) if many else ())):   # small outputs get many slices
        sizes = tuple((j + 1) * K // s - j * K // s for j in range(s))
        if s <= K and sizes not in seen:
            seen.add(sizes)
            found.append(SplitK(s, unit))
        for tile in (16, 32, 64, 128, 256):
            sizes = tuple(cutlass_slices(K, s, tile))
            if len(sizes) > 1 and sizes not in seen:
                seen.add(sizes)
                found.append(TiledSplitK(s, tile, unit))
    return found


def _combines(split: Order, K: int, out: Format, acc: Format) -> list[tuple[str, Order]]:
    """Stage 3: the ways the partials of a split meet (sequential in slice order, a tree, the reverse order;
    in the accumulator, or rounded to a narrower output format and added there), without the ones that
    are the same arithmetic (a tree of 2 or 3 partials is sequential; so is the reverse of 2)."""
    if isinstance(split, TiledSplitK):
        k = len(cutlass_slices(K, split.s, split.tile))
        alt = [("tree", TiledSplitK(split.s, split.tile, split.inner, Pairwise())),
               ("out", TiledSplitK(split.s, split.tile, split.inner, combine_acc=out))]
    else:
        k = min(split.s, K)
        alt = [("tree", SplitK(split.s, split.inner, Pairwise())),
               ("rev", SplitK(split.s, split.inner, permutation=range(split.s)[::-1])),
               ("out", SplitK(split.s, split.inner, combine_acc=out))]
    keep = {"tree": k > 3, "rev": k > 2, "out": out.precision < acc.precision}
    return [("seq", split)] + [(how, o) for how, o in alt if keep[how]]


def _meet(parts: list[np.ndarray], how: str) -> np.ndarray:
    """FP32 partials combined in IEEE binary32 arithmetic (round to nearest even), as SplitK's combines."""
    if how == "tree":
        if len(parts) == 1:
            return parts[0]
        h = len(parts) - len(parts) // 2
        return _meet(parts[:h], "tree") + _meet(parts[h:], "tree")
    s = np.zeros_like(parts[0])
    for q in (parts[::-1] if how == "rev" else parts):
        s = s + q
    return s


def _split_stage(search: _Search, unit: Order, many: bool) -> Candidate | None:
    """Stages 2 and 3 for one unit: every slicing's partials are simulated once, slice by slice, and the
    combines applied to them in float32 arithmetic (exact for an FP32 accumulator rounding to nearest:
    what SplitK's combine does then); a model that reproduces the pruning rows is confirmed by simulating
    it whole on every row. Other accumulators, and partials added in the output format, score each
    combined order by simulation."""
    p, sub = search.p, search.sub
    unit_acc = p.acc if unit.acc is None else unit.acc   # partials are FP32 numbers only in an FP32 accumulator
    fast = p.acc == FP32 and unit_acc == FP32 and p.op != "sum"
    known = {c.order for c in search.scored}
    for split in _splits(unit, p.K, many):
        combos = [(how, o) for how, o in _combines(split, p.K, p.out, p.acc) if o not in known]
        if not combos:
            continue
        if fast:
            sizes = cutlass_slices(p.K, split.s, split.tile) if isinstance(split, TiledSplitK) else \
                [(j + 1) * p.K // split.s - j * p.K // split.s for j in range(split.s)]
            bounds = np.concatenate([[0], np.cumsum(sizes)])
            acc = p.acc if unit.acc is None else unit.acc
            parts = [simulate(p.op, *p.cut(sub, int(lo), int(hi)), acc=acc, order=unit).astype(np.float32)
                     for lo, hi in zip(bounds[:-1], bounds[1:])]
            p.evaluated += len(parts)
        for how, o in combos:
            if fast and how != "out":
                y = _meet(parts, how)
                got = y.view(np.uint32) if p.out == FP32 else cast(y, p.out)
                c = p.compare(o, got, sub, "split", simulated=False)
            else:
                c = p.score(o, sub, "split")
            win = search.add(c)
            if win is not None:
                return win
    return None


def _sum_stages(p: _Problem, outputs: int | None) -> list[tuple[str, list[Order]]]:
    fmt, n = p.in_fmt, p.K
    itemsize = max(1, -(-fmt.bits // 8))
    nout = outputs or p.n_outputs
    torch_like = list(dict.fromkeys([*(torch_sum_order(n, nout, itemsize, contiguous=c) for c in (True, False)),
                                     torch_cumsum_order(n, nout, fmt)]))
    plain = [Sequential(), Pairwise(), NumpyPairwise(), *(Blocked(b) for b in (8, 32, 128, 512) if b < n)]
    grid = [GpuReduce(v, lanes, w, 1, lay) for lay, lanes in (("vector", 32), ("unroll", 1), ("unroll", 32))
            for v in (1, 2, 4, 8) for w in ((1, 2, 4, 8, 16) if lanes == 32 else (2, 4, 8, 16, 32))]
    grid += [ChunkedScan(w, a) for w in (32, 64, 128, 256, 512, 1024) for a in dict.fromkeys((fmt, p.acc))]
    return [("torch heuristic", torch_like), ("plain orders", plain), ("reduction trees", grid)]


# ---- the search ------------------------------------------------------------------------------------------

class _Search:
    """The candidates scored so far, those confirmed on every row, and the notes of one identification."""

    def __init__(self, p: _Problem, sub: np.ndarray | None):
        self.p, self.sub = p, sub
        self.bar = progress(desc="identify: orders scored", unit="order")  # on a terminal only
        self.scored: list[Candidate] = []
        self.confirmed: dict[Order, Candidate] = {}
        self.notes: list[str] = []

    def run(self, stage: str, orders: list[Order]) -> Candidate | None:
        """Score the orders not scored yet; the first one confirmed on every row wins."""
        seen = {c.order for c in self.scored}
        for o in orders:
            if o not in seen:
                win = self.add(self.p.score(o, self.sub, stage))
                if win is not None:
                    return win
        return None

    def add(self, c: Candidate) -> Candidate | None:
        self.scored.append(c)
        self.bar.update(1)
        return self.confirm(c) if c.matched == c.total else None

    def confirm(self, c: Candidate) -> Candidate | None:
        """c scored on every row through simulate (cached); returned when it reproduces them all. A score
        taken on a row subset or by a shortcut is never the confirmation: the order is simulated whole."""
        if c.order not in self.confirmed:
            self.confirmed[c.order] = c if c.confirmed else self.p.score(c.order, None, c.stage)
        full = self.confirmed[c.order]
        return full if full.matched == full.total else None

    def best(self, stages: tuple, n: int, by_bias: bool = False) -> list[Candidate]:
        pool = [c for c in self.scored if c.stage in stages]
        if by_bias:   # the units whose errors lean like the kernel's (truncation vs rounding to nearest)
            p, sub = self.p, self.sub
            target = p.bias(p.codes if sub is None else p.codes[sub], sub)
            return sorted(pool, key=lambda c: (c.fraction < 0.5, abs(c.bias - target)))[:n]
        return sorted(pool, key=lambda c: (-c.fraction, c.median_ulps))[:n]

    def auto(self, outputs: int | None, units: list[Order], keep: int) -> Candidate | None:
        """The guided search of the module docstring."""
        p = self.p
        if p.op == "sum":
            for stage, orders in _sum_stages(p, outputs):
                win = self.run(stage, orders)
                if win:
                    return win
            return None
        win = self.run("unit", [*units, *_units(p.in_fmt, p.out)])
        if win:
            return win
        if p.K <= _SMALL_K:
            win = self.run("unit", _variants(p.in_fmt))
            if win:
                return win
        self.notes.append("no block FMA or plain order alone reproduces the outputs: trying splits of K and the "
                          "ways their partials meet")
        for i, c in enumerate(self.best(("unit",), len(self.scored), by_bias=True)):
            win = _split_stage(self, c.order, many=i < keep)   # 24..64 slices for the `keep` likeliest units
            if win:
                return win
        return None


def identify_order(actual: Any, op: str, *inputs: Any, candidates: Any = "auto", acc: Any = FP32, out: Any = None,
                   rows: Any = None, prune_rows: int = 8, keep: int = 3, outputs: int | None = None,
                   units: Any = (), seed: int = 0) -> IdentifyReport:
    """Rank accumulation orders by the fraction of the kernel's outputs they reproduce bit for bit.

    actual: the kernel's outputs (numpy or torch, a float dtype): (m, n) for matmul, the input's leading
    shape for sum (the last axis is reduced), a scalar for dot. inputs: what the kernel read (as it read
    them: e.g. FP32 inputs rounded to TF32 first). candidates: "auto" (the guided search of the module
    docstring) or a list of orders to score. acc: the accumulator simulate uses where an order does not
    fix one. out: the format the kernel rounded its outputs to (default: actual's format; e.g. "fp16"
    for fp16 sums stored as float32). rows: a subset of output rows (index array or mask) to use for
    everything. prune_rows: rows each candidate is first scored on (a seeded random subset); keep: how
    many of the best are confirmed on every row when none reproduces the outputs (and how many units,
    those whose errors lean most like the kernel's, are also split into 24..64 slices). outputs: for sum, how
    many sums the kernel's launch computed (torch's launch heuristic depends on it; default: the
    number of outputs given). units: matmul/dot, orders to try first as the unit that splits of K are
    built of (e.g. the block FMA identified on a small-K recording of the same kernel: up to K = 512
    the search also tries block FMAs beyond the presets).
    """
    t0 = time.perf_counter()
    p = _Problem(actual, op, inputs, acc, out, rows)
    if int(prune_rows) < 1 or int(keep) < 1:
        raise ValueError(f"prune_rows and keep must be >= 1, got {prune_rows} and {keep}")
    rng = np.random.default_rng(seed)
    sub = None if p.n_rows <= prune_rows or p.op == "dot" else np.sort(rng.choice(p.n_rows, prune_rows, replace=False))
    search = _Search(p, sub)
    if isinstance(candidates, str) and candidates == "auto":
        units = list(units) if isinstance(units, (list, tuple)) else [units]
        units = [as_order(u, p.in_fmt) for u in units]          # Orders or their texts, as everywhere
        win = search.auto(outputs, units, int(keep))
    else:
        orders = list(candidates) if isinstance(candidates, (list, tuple)) else [candidates]
        win = search.run("given", [as_order(o, p.in_fmt) for o in orders])
    search.bar.close()
    if win is None:
        for c in search.best(tuple({c.stage for c in search.scored}), keep):
            search.confirm(c)
    elif p.out.precision < _last_acc(win.order, p.acc).precision:
        search.notes.append(f"the outputs keep {p.out.precision} significant bits of the "
                            f"{_last_acc(win.order, p.acc).precision}-bit accumulator: other orders may reproduce "
                            "them too; the first one the search reached is named (record FP32 outputs to tell orders "
                            "apart)")
    final = [search.confirmed.get(c.order, c) for c in search.scored]
    final.sort(key=lambda c: (c.order is not (win.order if win else None), not c.confirmed, -c.fraction,
                              c.median_ulps))
    return IdentifyReport(p.op, tuple(p.codes.shape), p.out, p.in_fmt, p.acc, final, win,
                          None if sub is None else len(sub), p.n_rows, p.evaluated, time.perf_counter() - t0,
                          search.notes)


def identify_runs(identify: Any, runs: dict, op: str, inputs: tuple, acc: Any, out: Any, axis: int,
                  max_rows: int = 64) -> dict:
    """compare_runs' ``identify``: each run's order (or None), judged on its first ``max_rows`` output rows
    (a bounded cost however large the runs). identify: True ("auto"), candidate orders, or False (nothing);
    axis: the reduced axis of a sum."""
    if identify is False or identify is None:
        return {}
    cands = "auto" if identify is True else identify
    ins = inputs
    if op == "sum":
        ins = (np.moveaxis(_native(inputs[0], "input 0"), axis, -1),)
    n_rows = 1 if op == "dot" else _native(ins[0], "input 0").shape[0]
    rows = None if op == "dot" or n_rows <= max_rows else np.arange(max_rows)
    return {name: identify_order(run, op, *ins, candidates=cands, acc=acc, out=out, rows=rows).order
            for name, run in runs.items()}
