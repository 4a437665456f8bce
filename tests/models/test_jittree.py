"""simulate's compiled trees (models/kernels/tree.py) against the numpy path: the same bits on the same data.

Every test runs simulate with the kernels forced and under ``jit.disabled()`` (the numpy reference) and compares the
float64 bit patterns (signs of zeros included; NaN by position, as tests/models/test_jitchain.py does);
``jittree.calls.count`` shows the tree kernel ran. The data are test_jitchain's boundary-weighted values: results
near the accumulator's overflow and in its subnormal range, ties, exact cancellation, +-0, inf and NaN.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from numoracle import orders as O
from numoracle.core import jit
from numoracle.models.engine.simulation import simulate
from numoracle.models.orders.cpu import GotoBlocks, Interleaved, VectorCascade
from numoracle.models.orders.gpu import GpuReduce
from numoracle.models.orders.tree import TreeOrder
from numoracle.models.orders.ynnpack import YnnSum
from simref import same_with_and_without

pytest.importorskip("numba")
from test_jitchain import boundary  # noqa: E402  (needs numba)

from numoracle.formats import BF16, FP8_E4M3FN, FP8_E4M3FNUZ, FP8_E5M2, FP16, FP32
from numoracle.models.kernels import tree as jittree  # noqa: E402  (needs numba)

MODES = ["rne", "rna", "rtz", "ru", "rd", "rto"]
TREES = [O.Pairwise(), GpuReduce(vec=2, lanes=4, warps=2), VectorCascade(lanes=4, accumulators=2),
         Interleaved(4, combine="pairwise"), Interleaved(3, fma=False, tail="after"), O.Blocked(8, O.Pairwise()),
         GotoBlocks(16, O.Pairwise()), GotoBlocks(8), YnnSum(lanes=4)]


@pytest.fixture(autouse=True)
def _kernels_at_every_size(monkeypatch):
    """These tests' data are small, and simulate keeps small calls on numpy: use the kernels anyway."""
    monkeypatch.delenv("NUMORACLE_JIT", raising=False)
    with jit.forced():
        yield


def same(op, inputs, **kw) -> int:
    """simulate with the kernels and without; both results' bits equal. Returns how many steps jittree ran."""
    return same_with_and_without(jittree, op, inputs, **kw)


def _data(acc, dtype, seed):
    rng = np.random.default_rng(seed)
    a = boundary(rng, (5, 37), acc, 2, dtype)
    b = boundary(rng, (37, 4), acc, 2, dtype, along=1)
    x = boundary(rng, (6, 41), acc, 1, dtype)
    return a, b, x


@pytest.mark.parametrize("order", TREES, ids=repr)
@pytest.mark.parametrize("acc, dtype", [(FP32, np.float16), (FP32, np.float32), (BF16, ml_dtypes.bfloat16),
                                        (FP16, np.float32), (FP8_E4M3FN, ml_dtypes.float8_e4m3fn)],
                         ids=["fp32-hw", "fp32-f64", "bf16-f32", "fp16-f64", "e4m3-f32"])
def test_trees_boundary_data(order, acc, dtype):
    """Each order class on boundary data, the three word paths (IEEE binary32; float32 words; float64 words)."""
    a, b, x = _data(acc, dtype, TREES.index(order))
    for mode, fma, ftz in (("rne", True, False), ("rd", False, False), ("rto", True, True)):
        kw = dict(acc=acc, order=order, rounding=mode, fma=fma, ftz=ftz)
        assert same("matmul", (a, b), **kw) + same("sum", (x,), **kw) + same("dot", (a[0], b[:, 0]), **kw) == 3


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("acc", [FP16, BF16, FP8_E5M2, FP8_E4M3FNUZ], ids=lambda f: f.name)
def test_pairwise_every_mode(acc, mode):
    dtype = ml_dtypes.bfloat16 if acc == BF16 else np.float16 if acc == FP16 else ml_dtypes.float8_e4m3fn
    a, b, x = _data(acc, dtype, MODES.index(mode))
    for fma in (True, False):
        kw = dict(acc=acc, order=O.Pairwise(), rounding=mode, fma=fma)
        assert same("matmul", (a, b), **kw) + same("sum", (x,), **kw) == 2


def test_tiles_rows_and_columns():
    """Outputs that fill several tiles: a matmul whose rows share a tile (a partial last one), a sum over a batch
    wider than a tile (column tiles), plain random data with the IEEE binary32 path and the float64 words."""
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((70, 300)) * np.exp2(rng.integers(-6, 6, (70, 300)))).astype(np.float16)
    b = rng.standard_normal((300, 37)).astype(np.float16)
    x = rng.standard_normal((3000, 45)).astype(np.float32)
    for kw in (dict(acc="fp32"), dict(acc="bf16", rounding="ru")):
        assert same("matmul", (a, b), order=O.Pairwise(), **kw) == 1
        assert same("sum", (x,), order=GpuReduce(vec=4, lanes=8), **kw) == 1


def test_revealed_tree_and_written_tree():
    """A TreeOrder written out (the form reveal_order returns) and one read from its text: both on the kernel."""
    rng = np.random.default_rng(11)
    x = boundary(rng, (4, 6), FP16, 1, np.float16)
    t = TreeOrder.from_text("(((0+1)+2)+((3+4)+5))")
    assert same("sum", (x,), acc="fp16", order=t) == 1
    n = 64
    nodes, refs = [], list(range(n))
    while len(refs) > 1:                       # an irregular tree: the first and the last ref, then the middle
        i = max(1, len(refs) // 3)
        nodes.append((refs[0], refs[i]))
        refs = refs[1:i] + refs[i + 1:] + [n + len(nodes) - 1]
    tree = TreeOrder(n, tuple(nodes))
    a = boundary(rng, (3, n), BF16, 2, ml_dtypes.bfloat16)
    b = boundary(rng, (n, 5), BF16, 2, ml_dtypes.bfloat16, along=1)
    for mode in ("rne", "rtz"):
        assert same("matmul", (a, b), acc="bf16", order=tree, rounding=mode) == 1


def test_declined_programs_stay_step_by_step():
    """Sequential chains (no Add), block FMA presets and FP64 accumulators are not the tree kernel's."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 64)).astype(np.float16)
    b = rng.standard_normal((64, 3)).astype(np.float16)
    for kw in (dict(acc="fp32"), dict(order=O.preset("h100", "fp16")), dict(acc="fp64", order=O.Pairwise())):
        assert same("matmul", (a, b), **kw) == 0


def test_programs_beyond_the_node_limit_stay_step_by_step(monkeypatch):
    """A program of more additions than _MAX_NODES is declined (its tape's memory), and gives the same bits."""
    x = np.random.default_rng(2).standard_normal((3, 64)).astype(np.float16)
    assert same("sum", (x,), acc="fp32", order=O.Pairwise()) == 1
    monkeypatch.setattr(jittree, "_MAX_NODES", 62)
    assert same("sum", (x,), acc="fp32", order=O.Pairwise()) == 0


def test_the_log_says_the_tree_kernel_ran_the_program(caplog):
    x = np.arange(1, 65, dtype=np.float16).reshape(2, 32)
    with caplog.at_level("DEBUG", logger="numoracle.models"):
        simulate("sum", x, acc="fp16", order=O.Pairwise())
    assert any(r.getMessage().startswith("simulate: TreeRun numba x1") for r in caplog.records)


def test_tape_rows_are_few():
    """A pairwise tree of K terms runs in about log2(K) buffer rows (the depth-first order), not K / 2."""
    from numoracle.core.formats.format import FP32
    from numoracle.core.formats.policy import Rounding
    from numoracle.models.engine.accumulate import native_fp32_ok
    from numoracle.models.engine.program import structure

    prog = structure(O.Pairwise(), 4096, FP32, Rounding.NEAREST_EVEN, True, False, native_fp32_ok())
    tape = jittree.tape_of(prog.steps, prog.result, prog.nslots)
    assert prog.nslots == 2048 and tape.nrows <= 14 and tape.ops.shape[0] == 4095
    assert sorted(tape.perm.tolist()) == list(range(4096))


def test_fp32_accumulator_on_float64_words_rounds_once():
    """FP32 in RNE over products of FP32 inputs (float64 words, the kernel's mode _N64): each leaf adds two exact
    products whose float64 sum is an FP32 midpoint, (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24, plus 2^-80. Rounded once,
    the leaf is 1 + 2^-11 + 2^-23; rounded through float64 first (the double rounding the round-to-odd step
    prevents), 1 + 2^-11."""
    u, t = 1 + 2.0**-12, 2.0**-40
    a = np.array([[u, t] * 8, [-u, t] * 8], np.float32)
    b = np.array([[u, t] * 8], np.float32).T
    kw = dict(acc=FP32, order=O.Pairwise())
    assert same("matmul", (a, b), **kw) == 1
    r = simulate("matmul", a, b, **kw)
    up = 8 * (1 + 2.0**-11 + 2.0**-23)
    assert r[0, 0] == up and r[1, 0] == -8 * (1 + 2.0**-11)     # -M + 2^-80 rounds toward zero


def test_fp32_accumulator_on_float64_words_rounds_once_below_min_normal():
    """The same in FP32's subnormal range, where a midpoint's float64 bits have no fixed pattern: 5 * 2^-150 (a
    midpoint of the subnormal grid) + 2^-210 rounds once to 3 * 2^-149; through float64 first, to 2 * 2^-149."""
    a = np.array([[5 * 2.0**-75, 2.0**-105] * 8], np.float32)
    b = np.array([[2.0**-75, 2.0**-105] * 8], np.float32).T
    kw = dict(acc=FP32, order=O.Pairwise())
    assert same("matmul", (a, b), **kw) == 1
    assert simulate("matmul", a, b, **kw)[0, 0] == 24 * 2.0**-149


def test_bf16_accumulator_on_float32_words_redoes_inexact_midpoints():
    """RNE to BF16 over products of BF16 inputs (float32 words, mode _FIG): a term of up to 16 bits plus a tiny one
    whose float32 sum is a BF16 midpoint though the exact sum is not. (9/8)(29/32) = 1 + 5 * 2^-8, a midpoint
    (between 1 + 2^-6 and 1 + 3 * 2^-7), plus +-2^-30: the exact sums round to 1 + 3 * 2^-7 and 1 + 2^-6; the float32
    sum is the midpoint both times, and rounding it again (ties to even) would give 1 + 2^-6 for both. A leaf of two
    terms (K = 2), the same with the term after a row (K = 3: the tiny one first), a leaf and its parent in one loop
    (K = 4, ``_fig_quad``), and a matmul's tiles of them; exact midpoints (no tiny term: a tie) round to even."""
    m, tiny = (1.125, 0.90625), 2.0**-15
    up, down = 1 + 3 * 2.0**-7, 1 + 2.0**-6
    kw = dict(acc=BF16, order=O.Pairwise())
    for s, want in ((1, up), (-1, down), (0, down)):
        for av, bv in (([m[0], s * tiny], [m[1], tiny]), ([s * tiny, 0.0, m[0]], [tiny, 0.0, m[1]]),
                       ([0.0, 0.0, m[0], s * tiny], [0.0, 0.0, m[1], tiny])):
            a, b = (np.array(v, ml_dtypes.bfloat16) for v in (av, bv))
            assert same("dot", (a, b), **kw) == 1
            assert float(simulate("dot", a, b, **kw)) == want, (av, s)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((9, 64)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((64, 300)).astype(ml_dtypes.bfloat16)
    a[:, 10], a[:, 11], b[10], b[11] = m[0], tiny, m[1], rng.choice([-tiny, tiny], 300)
    assert same("matmul", (a, b), **kw) == 1
