"""GPU library orders (numoracle.models.orders.gpu): bit-exact against a step-by-step Fraction reference, covered by
expected_error_bound, and reproducing the recorded H200 results (tests/data/h200/) bit for bit.

The references below are written from the documented steps (GpuReduce's and TiledSplitK's docstrings), with
simref's exact arithmetic (one ``exact.round_value`` per addition); they never call the orders' schedules.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_simulate import IN_FMTS, MODES, arrays

import numoracle as no
from numoracle import orders as O
from numoracle.formats import BF16, FP16, FP32
from numoracle.models.orders.gpu import (
    ChunkedScan,
    GpuReduce,
    TiledSplitK,
    cutlass_slices,
    torch_cumsum_order,
    torch_sum_order,
)
from simref import Ctx, assert_same, exact_mul, ref_bfma_chain, ref_order, terms_of

DATA = Path(__file__).resolve().parents[1] / "data" / "h200"
SETTINGS = settings(max_examples=120, deadline=None, derandomize=True)
DT = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "fp16": np.float16,
      "bf16": ml_dtypes.bfloat16, "fp8_e4m3fn": ml_dtypes.float8_e4m3fn}


# ---- references ----------------------------------------------------------------------------------------------

def ref_gpu_reduce(ts, o: GpuReduce, c: Ctx):
    """GpuReduce's steps 1-5 over exact terms ts, one rounded addition at a time."""
    n, V = len(ts), o.vec
    T = o.lanes * o.warps * o.blocks
    acc = [[Fraction(0)] * V for _ in range(T)]
    if o.layout == "vector":
        for v in range(n // V):                       # vector v -> thread v mod T, slot i -> accumulator i
            for i in range(V):
                acc[v % T][i] = c.add(acc[v % T][i], ts[V * v + i])
        for i, k in enumerate(range(n - n % V, n)):    # the tail: accumulator 0 of threads 0, 1, ...
            acc[i % T][0] = c.add(acc[i % T][0], ts[k])
    else:
        for k in range(n):                             # thread k mod T, its m-th term -> accumulator m mod V
            acc[k % T][(k // T) % V] = c.add(acc[k % T][(k // T) % V], ts[k])
    thread = []
    for a in acc:                                      # ((a0 + a1) + a2) + ...
        s = a[0]
        for x in a[1:]:
            s = c.add(s, x)
        thread.append(s)

    def halve(vals):
        while len(vals) > 1:
            h = len(vals) // 2
            vals = [c.add(vals[i], vals[i + h]) for i in range(h)]
        return vals[0]

    def block(vals):                                   # lanes first, then warps
        lanes = [halve(vals[w * o.lanes:(w + 1) * o.lanes]) for w in range(o.warps)]
        return halve(lanes)

    G = o.lanes * o.warps
    parts = [block(thread[b * G:(b + 1) * G]) for b in range(o.blocks)]
    if o.blocks == 1:
        return parts[0]
    g_acc = [Fraction(0)] * G
    for b, p in enumerate(parts):
        g_acc[b % G] = c.add(g_acc[b % G], p)
    return block(g_acc)


def ref_tiled_splitk(prods, o: TiledSplitK, acc, c: Ctx):
    n = len(prods)
    per = (n + o.s - 1) // o.s
    size = (per + o.tile - 1) // o.tile * o.tile     # round_up(ceil(n / s), tile)
    parts = []
    for lo in range(0, n, size):
        chunk = prods[lo:lo + size]
        if isinstance(o.inner, O.BlockFMA):
            parts.append(ref_bfma_chain(chunk, o.inner, o.inner.acc or acc))
        else:
            ts = [exact_mul(a, b) for a, b, _, _ in chunk]
            r = ref_order(o.inner, ts, c)
            parts.append(r)
    s = Fraction(0)
    for p in parts:
        s = c.add(s, p, o.combine_acc)
    return s


def ref_chunked_scan(ts, o: ChunkedScan, c: Ctx, fmt):
    """The last element of the chunked scan: the carry into each chunk's first term, Sklansky's tree inside."""
    carry = Fraction(0)
    for lo in range(0, len(ts), o.width):
        buf = list(ts[lo:lo + o.width]) + [Fraction(0)] * max(0, lo + o.width - len(ts))
        buf[0] = c.add(buf[0], carry, fmt)
        s = 1
        while s < o.width:          # level s: every upper half-block adds the last element of its lower half
            for blk in range(0, o.width, 2 * s):
                for i in range(blk + s, blk + 2 * s):
                    buf[i] = c.add(buf[i], buf[blk + s - 1], fmt)
            s *= 2
        carry = buf[-1]
    return carry


@SETTINGS
@given(st.data())
def test_chunked_scan_bit_exact(data):
    acc = data.draw(st.sampled_from([FP32, FP16, BF16]))
    fin = data.draw(st.sampled_from(["fp16", "bf16", "e4m3"]))
    mode = data.draw(st.sampled_from(MODES))
    order = ChunkedScan(data.draw(st.sampled_from([1, 2, 4, 8, 16])), data.draw(st.sampled_from([None, acc])))
    rows, K = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 60))
    x = data.draw(arrays((rows, K), IN_FMTS[fin]))
    if order.acc is not None and fin != "e4m3" and no.formats.format_of(IN_FMTS[fin]) != acc:
        x = x.astype(np.float32).astype(IN_FMTS["e4m3"])      # a sum's inputs must fit the accumulator
    got = no.simulate("sum", x, acc=None if order.acc else acc, order=order, rounding=mode, codes=True)
    ref = [ref_chunked_scan([t for t, _, _, _ in row], order, Ctx(acc, mode), acc) for row in terms_of("sum", [x])]
    assert_same(got, ref, acc)


@st.composite
def gpu_reduces(draw):
    return GpuReduce(draw(st.sampled_from([1, 2, 3, 4])), draw(st.sampled_from([1, 2, 4])),
                     draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2, 3, 5])),
                     draw(st.sampled_from(["vector", "unroll"])))


@SETTINGS
@given(st.data())
def test_gpu_reduce_bit_exact(data):
    acc = data.draw(st.sampled_from([FP32, FP16, BF16]))
    fin = data.draw(st.sampled_from(["fp16", "bf16", "e4m3"] + (["fp32"] if acc == FP32 else [])))
    mode = data.draw(st.sampled_from(MODES))
    order = data.draw(gpu_reduces())
    rows, K = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 70))
    x = data.draw(arrays((rows, K), IN_FMTS[fin]))
    got = no.simulate("sum", x, acc=acc, order=order, rounding=mode, codes=True)
    ref = [ref_gpu_reduce([t for t, _, _, _ in row], order, Ctx(acc, mode)) for row in terms_of("sum", [x])]
    assert_same(got, ref, acc)


@SETTINGS
@given(st.data())
def test_tiled_splitk_bit_exact(data):
    fin = data.draw(st.sampled_from(["fp16", "bf16"]))
    inner = data.draw(st.sampled_from([O.Sequential(), O.Pairwise(), O.preset("h100", fin), O.preset("a100", fin)]))
    mode = data.draw(st.sampled_from(["rne", "rtz", "ru"]))
    s, tile = data.draw(st.integers(1, 5)), data.draw(st.sampled_from([1, 4, 16]))
    cacc = data.draw(st.sampled_from([None, FP16]))
    order = TiledSplitK(s, tile, inner, combine_acc=cacc)
    m, n, K = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 80))
    a, b = data.draw(arrays((m, K), IN_FMTS[fin])), data.draw(arrays((K, n), IN_FMTS[fin]))
    got = no.simulate("matmul", a, b, acc=FP32, order=order, rounding=mode, codes=True)
    ref = [ref_tiled_splitk(p, order, FP32, Ctx(FP32, mode)) for p in terms_of("matmul", [a, b])]
    assert_same(got, ref, cacc or FP32)


def test_cutlass_slices_rule():
    assert cutlass_slices(4096, 3, 64) == [1408, 1408, 1280]
    assert cutlass_slices(100, 4, 16) == [32, 32, 32, 4]
    assert cutlass_slices(10, 8, 8) == [8, 2]          # the rounding can leave fewer slices than s
    assert cutlass_slices(7, 1, 1) == [7]


def test_errors():
    with pytest.raises(ValueError, match="power of two"):
        GpuReduce(4, 24)
    with pytest.raises(ValueError, match="layout"):
        GpuReduce(4, 32, layout="rows")
    with pytest.raises(ValueError, match="tile"):
        TiledSplitK(3, 0)
    with pytest.raises(ValueError, match="combine"):
        TiledSplitK(3, 64, combine=O.preset("h100", "fp16"))
    with pytest.raises(ValueError, match="outputs"):
        torch_sum_order(1000, 0, 4)


# ---- bounds ------------------------------------------------------------------------------------------------

def _adversarial(kind, shape, dtype, rng):
    if kind == "positive":        # every partial grows: errors add up
        return rng.uniform(0.5, 1.0, shape).astype(dtype)
    if kind == "cancelling":      # large alternating terms around a small result
        return (rng.uniform(0.9, 1.1, shape) * np.where(np.arange(shape[-1]) % 2, 1.0, -1.0) * 64).astype(dtype)
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-8, 9, shape))).astype(dtype)


@pytest.mark.parametrize("kind", ["positive", "cancelling", "spread"])
@pytest.mark.parametrize("order,acc", [
    (GpuReduce(4, 32, 4, 3), FP16), (GpuReduce(8, 32, 1, 1), FP16), (GpuReduce(4, 1, 8, 16, "unroll"), FP16),
    (torch_sum_order(4096, 64, 2), FP32)], ids=["vector-blocks", "vector", "unroll-blocks", "torch"])
def test_bound_holds_for_gpu_reduce(order, acc, kind):
    rng = np.random.default_rng(7)
    x = _adversarial(kind, (16, 4096), np.float16, rng)
    got = no.simulate("sum", x, acc=acc, order=order)
    bound = no.expected_error_bound("sum", "fp16", 4096, acc=acc, order=order)
    assert bound.depth < 4095                          # the tree is shallower than a sequential sum
    ratio = float(np.max(np.abs(got - no.exact_sum(x, axis=-1)) / bound.tolerance(x)))
    assert ratio <= 1.0, f"{order} ({kind}): error/bound {ratio}\n{bound}"


@pytest.mark.parametrize("kind", ["positive", "cancelling", "spread"])
@pytest.mark.parametrize("width", [16, 512])
def test_bound_holds_for_chunked_scan(width, kind):
    rng = np.random.default_rng(3)
    x = _adversarial(kind, (16, 4096), np.float16, rng)
    order = ChunkedScan(width, FP16)
    got = no.simulate("sum", x, order=order)
    bound = no.expected_error_bound("sum", "fp16", 4096, order=order)
    assert bound.acc == FP16 and bound.depth == min(4096 // width * (1 + width.bit_length() - 1), 4095)
    ratio = float(np.max(np.abs(got - no.exact_sum(x, axis=-1)) / bound.tolerance(x)))
    assert ratio <= 1.0, f"{order} ({kind}): error/bound {ratio}\n{bound}"


@pytest.mark.parametrize("kind", ["positive", "cancelling", "spread"])
@pytest.mark.parametrize("order", [TiledSplitK(3, 64, O.preset("h200", "fp16")), TiledSplitK(5, 16, O.Sequential()),
                                   TiledSplitK(2, 128, O.preset("h200", "fp16"), combine_acc=FP16)])
def test_bound_holds_for_tiled_splitk(order, kind):
    rng = np.random.default_rng(11)
    a, b = _adversarial(kind, (8, 1000), np.float16, rng), _adversarial("positive", (1000, 8), np.float16, rng)
    got = no.simulate("matmul", a, b, acc=FP32, order=order)
    bound = no.expected_error_bound("matmul", "fp16", 1000, acc=FP32, order=order)
    ratio = float(np.max(np.abs(got - no.exact_matmul(a, b)) / bound.tolerance(a, b)))
    assert ratio <= 1.0, f"{order} ({kind}): error/bound {ratio}\n{bound}"


def test_tiled_splitk_bound_uses_the_longest_slice():
    """Slices round up to the tile: 3 slices of K = 4096 on 64-term steps are 1408 long, not ceil(4096/3)."""
    b = no.expected_error_bound("sum", "fp32", 4096, order=TiledSplitK(3, 64))
    assert b.depth == 1407 + 2
    assert no.expected_error_bound("sum", "fp32", 4096, order=O.SplitK(3)).depth == 1365 + 2


# ---- recorded H200 results ------------------------------------------------------------------------------------

def _codes_of(arr, dt):
    return arr.view({4: np.float32, 2: np.uint16}[arr.dtype.itemsize]).view(DT[dt])


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_torch_sums_reproduced(dt):
    """torch.sum on CUDA (both kernels): the launch heuristic's GpuReduce reproduces every recorded sum."""
    d = np.load(DATA / f"red_3_{dt}_subset.npz")
    itemsize = np.dtype(DT[dt]).itemsize
    for tag, rows in (("256x1000", 256), ("64x16384", 64)):
        x = _codes_of(d[f"{tag}__X"], dt)
        n = x.shape[1]
        for contiguous, key in ((True, "sum_rows_fp32"), (False, "sum_cols_fp32")):
            got = no.simulate("sum", x, acc="fp32", order=torch_sum_order(n, rows, itemsize, contiguous=contiguous))
            want = d[f"{tag}__{key}"].view(np.uint32)
            assert np.array_equal(got.astype(np.float32).view(np.uint32), want), (tag, key)
        native = no.simulate("sum", x, acc="fp32", order=torch_sum_order(n, rows, itemsize), out=dt)
        assert np.array_equal(native.astype(np.float32), d[f"{tag}__sum_native"])
        scan = no.simulate("sum", x, order=torch_cumsum_order(n, rows, dt))     # scanned in the input dtype
        assert np.array_equal(scan.astype(np.float32), d[f"{tag}__cumsum_last"])


def test_torch_sum_order_configs():
    """The launch parameters behind the recorded runs (H200: 132 SMs, 2048 threads each)."""
    assert torch_sum_order(1000, 256, 4) == GpuReduce(4, 32, 1, 1, "vector")
    assert torch_sum_order(16384, 64, 2) == GpuReduce(8, 32, 16, 1, "vector")
    assert torch_sum_order(4096, 256, 2, contiguous=False) == GpuReduce(4, 1, 4, 64, "unroll")
    assert torch_sum_order(16384, 64, 4, contiguous=False) == GpuReduce(4, 1, 8, 128, "unroll")
    # short rows: no vector loads, and a block 64 threads wide (the heuristic; not recorded on hardware)
    assert torch_sum_order(100, 8, 4) == GpuReduce(4, 64, 1, 1, "unroll")
    assert [torch_cumsum_order(n, r).width for n, r in ((1000, 256), (4096, 256), (16384, 64))] == [64, 128, 512]
    assert torch_cumsum_order(10, 1 << 20).width == 1024     # unsigned wrap-around in torch: clamps to 2^9 threads
    assert torch_cumsum_order(10, 64).width == 32            # at least 2^4 threads


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_cublas_splitk_reproduced(fmt):
    """cuBLAS torch.mm at M = N = 128, K = 4096: three slices on 64-term K-steps, block FMA inside, FP32 combine."""
    d = np.load(DATA / "mm_2_subset.npz")
    tag = f"{fmt}_128x4096x128_cancel"
    a, b = d[f"{tag}__A"].view(DT[fmt]), d[f"{tag}__B"].view(DT[fmt])
    order = TiledSplitK(3, 64, O.preset("h200", fmt))
    got = no.simulate("matmul", a, b, order=order)
    assert np.array_equal(got.astype(np.float32).view(np.uint32), d[f"{tag}__torch_mm_out_fp32"].view(np.uint32))
    native = no.simulate("matmul", a, b, order=order, out=fmt, codes=True)
    assert np.array_equal(native.astype(np.uint16), d[f"{tag}__torch_mm_native"])
    assert not np.array_equal(no.simulate("matmul", a, b, order=O.SplitK(3, O.preset("h200", fmt))).astype(np.float32),
                              d[f"{tag}__torch_mm_out_fp32"])       # even slices do not
