"""Error bounds of explicit trees (TreeOrder, what reveal_order returns) read the tree's own formats (issue 40,
defects 2 and 8): nodes rounding to FP16 over FP32 terms add FP16's underflow (absolute) term, and a tensor-core
tree with its own FP32 accumulator is bounded in FP32, as tightly as the preset it reproduces."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle import orders
from numoracle.core.formats.format import FP16, FP32
from numoracle.models.engine.simulation import simulate
from numoracle.models.orders.basic import BlockFMA
from numoracle.models.orders.tree import TreeOrder
from numoracle.testing.checks import check_dot_close, check_matmul_close, check_sum_close


def _pairwise_nodes(n: int) -> tuple:
    nodes: list = []

    def rec(lo: int, hi: int) -> int:
        if hi - lo == 1:
            return lo
        mid = lo + (hi - lo + 1) // 2
        a, b = rec(lo, mid), rec(mid, hi)
        nodes.append((a, b))
        return n + len(nodes) - 1

    rec(0, n)
    return tuple(nodes)


def _chain_nodes(n: int) -> tuple:
    return ((0, 1),) + tuple((n + i, i + 2) for i in range(n - 2))


def _fp16_trees(n: int) -> list[TreeOrder]:
    pw, ch = _pairwise_nodes(n), _chain_nodes(n)
    mixed_kinds = tuple(i % 2 for i in range(len(pw)))          # FP32 and FP16 nodes alternating
    return [TreeOrder(n, pw, steps=((FP16, "rne"),), acc=FP16),  # what reveal reports for a kernel adding in FP16
            TreeOrder(n, ch, steps=((FP16, "rne"),)),
            TreeOrder(n, pw, mixed_kinds, steps=((FP32, "rne"), (FP16, "rne")))]


@pytest.mark.parametrize("scale", [1e-2, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-20, 1e-40])
def test_simulate_of_fp16_nodes_over_fp32_terms_passes_its_own_check(scale):
    n = 64
    rng = np.random.default_rng(int(-np.log10(scale)))
    x = (rng.standard_normal((64, n)) * scale).astype(np.float32)
    for T in _fp16_trees(n):
        y = simulate("sum", x, acc=None if T.acc else FP32, order=T)
        rep = check_sum_close(y, x, acc=FP32, order=T, out=FP32)
        assert rep.passed, (T.steps, scale, rep.max_ratio)


def test_fp16_nodes_over_fp16_grid_terms_need_no_underflow_term():
    """Terms on FP16's grid: sums landing in FP16's subnormal range are exact, so no absolute term is added."""
    T = TreeOrder(8, _pairwise_nodes(8), steps=((FP16, "rne"),), acc=FP16)
    assert no.expected_error_bound("sum", "fp16", 8, order=T).atol_const == 0
    b = no.expected_error_bound("sum", "fp32", 8, order=T)
    assert b.atol_const > 0 and any("subnormal" in s.label for s in b.sites)


def test_simulate_of_fp16_nodes_over_fp32_products_passes_its_own_check():
    K = 32
    T = TreeOrder(K, _pairwise_nodes(K), steps=((FP16, "rne"),), acc=FP16)
    for seed, scale in enumerate((1e-1, 1e-3, 1e-4, 1e-5)):
        rng = np.random.default_rng(seed)
        a, b = (rng.standard_normal((2, K)) * scale).astype(np.float32)
        y = simulate("dot", a, b, order=T)
        assert check_dot_close(y, a, b, acc=FP32, order=T, out=FP32).passed, scale


def _tensor_core_tree(K: int, N: int) -> TreeOrder:
    """preset("a100", "fp16") as reveal_order returns it: a chain of fused nodes of N products each, the block FMA
    without its own format (the tree's FP32 accumulator)."""
    nodes = [tuple(range(N))] + [(K + j,) + tuple(range(N * (j + 1), N * (j + 2))) for j in range(K // N - 1)]
    return TreeOrder(K, tuple(nodes), steps=(BlockFMA(N, 24, carry_bit=True),), acc=FP32)


def test_tensor_core_tree_is_bounded_in_its_own_fp32_accumulator():
    K, preset = 64, orders.preset("a100", "fp16")
    T = _tensor_core_tree(K, 8)
    rng = np.random.default_rng(3)
    A, B = (rng.standard_normal((8, K)).astype(np.float16), rng.standard_normal((K, 8)).astype(np.float16))
    np.testing.assert_array_equal(simulate("matmul", A, B, order=T), simulate("matmul", A, B, order=preset))
    bt = no.expected_error_bound("matmul", "fp16", K, order=T)        # acc: the dtype's, unless the tree fixes one
    bp = no.expected_error_bound("matmul", "fp16", K, order=preset)
    assert bt.acc == FP32 and bt.coefficient <= bp.coefficient * 1.01, (float(bt.coefficient), float(bp.coefficient))


def test_tensor_core_tree_bound_is_sound_and_tight_on_many_seeds():
    K = 256
    T = _tensor_core_tree(K, 8)
    worst = 0.0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        A = rng.uniform(0.5, 1.0, (8, K)).astype(np.float16)           # one sign: the errors add up
        B = rng.uniform(0.5, 1.0, (K, 8)).astype(np.float16)
        y = simulate("matmul", A, B, order=T)
        rep = check_matmul_close(y, A, B, acc=FP16, order=T, out=FP32)
        assert rep.passed, (seed, rep.max_ratio)
        worst = max(worst, rep.max_ratio)
    assert worst > 1 / 30, worst      # within a small factor of the observed error (it was 44-745x looser)
