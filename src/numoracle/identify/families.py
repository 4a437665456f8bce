"""The candidate families identify_order tries, as trials ``(order, acc, operands)``: acc None means the order's
own accumulator (else identify's ``acc``), operands None means the inputs as given, else ``(format, rounding)``.

* matmul / dot units: the GPU presets' block FMAs that take the input format (for FP32 inputs the TF32 ones, on
  the inputs rounded to TF32 by rne, rtz or rna: a tensor core never reads FP32), promoted variants, and the
  plain orders (sequential, pairwise, numpy's) in each accumulator format; block FMA variants at small K.
* splits of K (even and CUTLASS-tiled) and the ways their partials meet.
* sums: torch's CUDA heuristics, the plain orders, CPU kernels' orders (torch's cascade, XLA's chunks and lanes,
  interleaved accumulators, split by thread count), the plain orders in each accumulator format, a grid of reduction
  trees and chunked scans.
* CPU matmul / dot units: interleaved lane accumulators (OpenBLAS, XLA) with and without FMA, XLA's chunks.
"""

from __future__ import annotations

from ..core.formats.format import BF16, FP16, FP32, FP64, Format
from ..models.orders.basic import Blocked, BlockFMA, NumpyPairwise, Order, Pairwise, Sequential, SplitK
from ..models.orders.blasdot import MklDot, OpenBlasDot
from ..models.orders.cpu import GotoBlocks, Interleaved, ThreadSplit, VectorCascade, XlaChunks, XlaScan, XlaVector
from ..models.orders.gpu import ChunkedScan, GpuReduce, TiledSplitK, cutlass_slices, torch_cumsum_order, torch_sum_order
from ..models.orders.mklgemm import MklSmallGemm
from ..models.orders.presets import GPU_PRESETS, preset
from ..models.orders.ynnpack import YnnSum, ynn_split
from .cpuvariants import variant_orders

__all__ = ["units", "variants", "splits", "combines", "sum_stages", "acc_formats", "slice_sizes", "SMALL_K",
           "Sequential", "cpu_sums", "cpu_units", "is_cpu", "THREADS", "preset_inputs", "tensor_core_units"]

THREADS = (2, 4, 8, 16)   # thread counts a CPU kernel may split one long reduction over (at::parallel_for)

# The GPUs of the preset table (aliases are the same tensor cores), tried in this order of likelihood; a GPU
# added to the table is tried after these.
_LIKELY = ("h100", "a100", "b200", "v100")
_GPUS = tuple(sorted(dict.fromkeys(p.gpu for p in GPU_PRESETS if p.promotion is None),
                     key=lambda g: _LIKELY.index(g) if g in _LIKELY else len(_LIKELY)))

SMALL_K = 512   # up to here the unit stage also tries block FMA variants (a small-K recording fixes the unit)

Trial = tuple   # (order, acc or None, operands or None)


def acc_formats(in_fmt: Format, acc: Format, out: Format) -> list[Format]:
    """Accumulator formats a kernel may use at some level: the given one first, then FP32, FP64, the input's and
    the output's format, FP16 and BF16 (each once)."""
    return list(dict.fromkeys([acc, FP32, FP64, in_fmt, out, FP16, BF16]))


def preset_inputs(fmt: Format) -> str:
    """The preset table's name for what a tensor core reads from ``fmt`` inputs (FP32 inputs: TF32)."""
    return {"fp8_e4m3fn": "fp8", "fp8_e5m2": "fp8", "fp8_e4m3": "fp8", "fp32": "tf32"}.get(fmt.name, fmt.name)


def tensor_core_units(fmt: Format) -> list[Order]:
    """The block FMA of every GPU of the preset table that takes ``fmt`` inputs, likeliest GPU first."""
    found: list[Order] = []
    for gpu in _GPUS:
        try:
            found.append(preset(gpu, preset_inputs(fmt)))
        except ValueError:
            continue
    return list(dict.fromkeys(found))


def units(fmt: Format, out: Format, acc: Format, operand_variants: list) -> list[Trial]:
    """matmul/dot unit stage: block FMAs of the presets that take this input format (on rounded operands where
    the tensor core reads a narrower format), promoted block FMAs, then the plain orders in each accumulator."""
    name = preset_inputs(fmt)
    tc: list[Order] = []
    for gpu in _GPUS:
        try:
            tc.append(preset(gpu, name))
        except ValueError:
            continue
        if name == "fp16" and out.name == "fp16":
            try:
                tc.append(preset(gpu, name, out="fp16"))
            except ValueError:
                pass
    if name in ("fp8", "fp16", "bf16", "tf32"):   # tensor-core partials promoted to FP32 every N terms
        tc += [preset("h100", name, promote=p) for p in (128, 64, 32)]
    # a TF32 tensor core reads FP32 inputs rounded (when they are TF32 values already, as they are)
    reads = ([v for v in operand_variants if v is not None] or [None]) if fmt.name == "fp32" else [None]
    trials: list[Trial] = [(o, None, v) for v in reads for o in dict.fromkeys(tc)]
    plain = [Sequential(), Pairwise()]
    trials += [(o, None, None) for o in plain]
    trials += [(o, a, None) for a in acc_formats(fmt, acc, out)[1:] for o in plain]
    # CPU BLAS kernels: fp32 / fp64 inputs (fp16 / bf16 / fp8 inputs: tensor cores, their budget); half inputs
    # with a wider output (jax's preferred_element_type=float32) also XLA's CPU dot and matmul units (their
    # products are exact in fp32: fma or not is the same arithmetic)
    if fmt.name in ("fp32", "fp64"):
        trials += [(o, None, None) for o in cpu_units()]
    elif fmt.bits <= 16 and out.precision > fmt.precision:
        trials += [(o, None, None) for o in (XlaChunks(32, fma=False), Interleaved(4, "pairwise"))]
    return list(dict.fromkeys(trials))


def cpu_units() -> list[Order]:
    """CPU BLAS units: k interleaved lanes (with FMA and without: products rounded first), combined pairwise or by
    halving, the n % k tail in the lanes or after them; XLA's chunks; a sequential chain without FMA; a GotoBLAS K loop
    (blocks of q = 256, 384 or 512, each a sequential chain with FMA); OpenBLAS's x86-64 sdot; MKL's dot; every
    instruction set's kernel variant (cpuvariants.VARIANTS: OpenBLAS's sgemm per core type)."""
    found: list[Order] = [Interleaved(1, fma=False), XlaChunks(32, fma=False), XlaChunks(32), OpenBlasDot(), MklDot()]
    found += [GotoBlocks(q) for q in (384, 256, 512)] + variant_orders()
    found += [Interleaved(k, how, tail, fma) for fma in (True, False) for k in (4, 8, 16)
              for how in ("pairwise", "halving") for tail in ("lanes", "after")]
    return found


def is_cpu(order: Order) -> bool:
    return isinstance(order, (Interleaved, XlaChunks, XlaVector, XlaScan, VectorCascade, ThreadSplit, GotoBlocks,
                              OpenBlasDot, MklDot, YnnSum, MklSmallGemm))


def cpu_sums(in_fmt: Format, n: int, nout: int) -> list[Order]:
    """CPU kernels' sums: torch's cascade (8 or 16 lanes, AVX2 or AVX-512; 16-bit inputs read as two float vectors,
    or cast to float first as ``sum(dtype=torch.float32)`` may; one column's
    cascade and its 4-accumulator path for sums over a strided axis), split over THREADS threads where one long
    sum is computed; XLA's chunks, vector lanes and cumsum's cascade; YNNPACK's Kahan-topped tree (jax's
    ``__ynn_fusion``, bf16 read two inputs a lane, with the partial reduction its tiling picks); interleaved
    accumulators."""
    narrow = in_fmt.bits <= 16
    torch: list[Order] = [VectorCascade(8, load=2 if narrow else 1), VectorCascade(16, load=2 if narrow else 1),
             VectorCascade(1, 1), VectorCascade(1, 4)]
    if narrow:   # sum(dtype=float32) of fp16 / bf16: the input cast to float first, then the float cascade
        torch += [VectorCascade(8), VectorCascade(16)]
    if nout == 1 and n > 32768:
        torch = [ThreadSplit(t, 32768, o, o) for o in torch[:2] for t in THREADS] + torch
    # YNNPACK (jax's __ynn_fusion): YnnSum("k1") is XlaVector(16, 4) below 1024 terms (no Kahan step yet)
    ynn: list[Order] = [YnnSum("k1", pack=2 if in_fmt == BF16 else 1, split=ynn_split("k1", n, nout)),
                        YnnSum("kn", split=ynn_split("kn", n, nout))]
    xla: list[Order] = [XlaChunks(32), ynn[0], XlaScan(16), XlaChunks(64), XlaVector(8, 4), ynn[1]]
    lanes: list[Order] = [Interleaved(k, how) for k in (2, 4, 8, 16) for how in ("sequential", "pairwise", "halving")]
    return list(dict.fromkeys(torch + xla + lanes))


def variants(fmt: Format) -> list[Trial]:
    """Block FMAs beyond the presets: block size, kept fraction bits, sticky bit or truncation, carry bit."""
    fbits = (12, 13, 14, 22, 23, 24, 25, 26) if fmt.bits <= 8 else (22, 23, 24, 25, 26)
    return [(BlockFMA(n, f, truncate=t, carry_bit=c, acc=FP32), None, None) for n in (4, 8, 16, 32) for f in fbits
            for t in (True, False) for c in (True, False)]


def splits(unit: Order, K: int, many: bool = True) -> list[Order]:
    """Even slices and slices on K-steps (the CUTLASS rule), one model per distinct slicing (the plainer model
    first: SplitK(s) where a tiled split cuts the same slices). many: also 24..64 slices."""
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


def slice_sizes(split: Order, K: int) -> list[int]:
    if isinstance(split, TiledSplitK):
        return cutlass_slices(K, split.s, split.tile)
    return [(j + 1) * K // split.s - j * K // split.s for j in range(split.s)]


def combines(split: Order, K: int, out: Format, acc: Format) -> list[tuple[str, Order]]:
    """The ways the partials of a split meet (sequential in slice order, a tree, the reverse order; in the
    accumulator, or rounded to a narrower output format and added in it), without the ones that are the same
    arithmetic (a tree of 2 or 3 partials is sequential; so is the reverse of 2)."""
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


def sum_stages(in_fmt: Format, n: int, nout: int, acc: Format, out: Format) -> list[tuple[str, list[Trial]]]:
    """Sums: torch's CUDA heuristics; plain orders; the same in the other accumulator formats; reduction trees and
    chunked scans."""
    itemsize = max(1, -(-in_fmt.bits // 8))
    torch_like = list(dict.fromkeys([*(torch_sum_order(n, nout, itemsize, contiguous=c) for c in (True, False)),
                                     torch_cumsum_order(n, nout, in_fmt)]))
    plain = [Sequential(), Pairwise(), NumpyPairwise(), *(Blocked(b) for b in (8, 32, 128, 512) if b < n)]
    accs = acc_formats(in_fmt, acc, out)[1:]
    other_acc = [(o, a, None) for a in accs for o in (Sequential(), Pairwise(), NumpyPairwise())]
    grid = [GpuReduce(v, lanes, w, 1, lay) for lay, lanes in (("vector", 32), ("unroll", 1), ("unroll", 32))
            for v in (1, 2, 4, 8) for w in ((1, 2, 4, 8, 16) if lanes == 32 else (2, 4, 8, 16, 32))]
    grid += [ChunkedScan(w, a) for w in (32, 64, 128, 256, 512, 1024) for a in dict.fromkeys((in_fmt, acc))]
    cpu = [(o, None, None) for o in cpu_sums(in_fmt, n, nout)]
    cpu += [(XlaScan(16), in_fmt, None)] if in_fmt != acc and in_fmt.bits >= 16 else []   # XLA scans in the input type
    return [("torch heuristic", [(o, None, None) for o in torch_like]),
            ("plain orders", [(o, None, None) for o in plain]), ("cpu kernels", cpu), ("accumulator", other_acc),
            ("reduction trees", [(o, None, None) for o in grid])]
