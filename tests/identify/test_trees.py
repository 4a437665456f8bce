"""Split partials combined by any binary tree (identify/trees.py) and compare_runs' exact explanation with them
(issue 40, defect 1): a chain combine against a tree combine of the same partials is a reordering, not a corrupted
element."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from numoracle.core.formats.format import FP16, FP32
from numoracle.identify.trees import tree_programs, tree_search
from numoracle.models.engine.simulation import simulate
from numoracle.models.orders.basic import Blocked, Pairwise, Sequential, SplitK
from numoracle.testing.runs import compare_runs


def _tree_of(prog: np.ndarray, s: int) -> frozenset:
    """A program's tree as nested frozensets (children unordered: addition is commutative)."""
    node: dict = {i: i for i in range(s)}
    for j, (a, b) in enumerate(prog.tolist()):
        node[s + j] = frozenset([node[a], node[b]])
    return node[2 * s - 2]


@pytest.mark.parametrize("s", [2, 3, 4, 5, 6, 7])
def test_tree_programs_are_every_tree_once(s):
    progs = tree_programs(s)
    double_factorial = int(np.prod(np.arange(2 * s - 3, 0, -2)))      # (2s - 3)!! unordered labelled trees
    assert len(progs) == double_factorial
    assert len({_tree_of(p, s) for p in progs}) == len(progs)
    used = np.sort(progs.reshape(len(progs), -1), axis=1)
    assert (used == np.arange(2 * s - 2)).all()          # every leaf and merge but the root used exactly once
    assert (progs.max(axis=(1, 2)) < 2 * s - 2).all()


def test_tree_programs_of_eight_partials():
    assert len(tree_programs(8)) == 135135


def test_tree_search_finds_tree_combines_in_float32_and_float16():
    p = np.array([[1.0, 2.0**-24, 2.0**-24, -1.0]], np.float32)
    tree = (p[0, 0] + p[0, 1]) + (p[0, 2] + p[0, 3])                     # float32: 1 + (2^-24 - 1) = 2^-24
    pair = (p[0, 1] + p[0, 2]) + (p[0, 0] + p[0, 3])                     # 2^-23 + 0
    assert tree != pair
    P = p.astype(np.float64)
    for want in (tree, pair):
        assert tree_search(P, np.array([want], np.float64), np.array([0]), FP32, FP32).all()
    assert not tree_search(P, np.array([3.0]), np.array([0]), FP32, FP32).any()
    h = np.array([[1.0, 2.0**-11, 2.0**-11, 2.0**-11]])                    # fp16 nodes (the exact route)
    want = float(np.float16(np.float16(1.0 + 2.0**-11) + np.float16(2.0**-10)))   # (p0 + p1) + (p2 + p3)
    assert tree_search(h, np.array([want]), np.array([0]), FP16, FP16).all()


def _runs(orders, m=32, k=512, n=32, seed=0):
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((m, k)) * np.exp2(rng.integers(-8, 8, (m, k)))).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    return A, B, [simulate("matmul", A, B, acc="fp32", order=o).astype(np.float32) for o in orders]


@pytest.mark.parametrize("identify", [False, "given"])
def test_chain_against_tree_combine_is_a_reordering(identify):
    """The adversarial round's case: SplitK(4) with its partials added in slice order against the same four added
    as ((p0 + p1) + (p2 + p3)): 26 of 304 differing elements were declared corrupt."""
    oa, ob = SplitK(4), SplitK(4, combine=Pairwise())
    A, B, (ra, rb) = _runs([oa, ob])
    c = compare_runs(ra, rb, "matmul", A, B, orders=[oa, ob], identify=[oa, ob] if identify else False)
    assert c.n_differ > 100
    assert c.verdict == "REORDERING" and c.exact.complete, str(c)


def _sweep(orders, seed):
    A, B, runs = _runs(orders, m=16, k=480, n=16, seed=seed)
    bad = []
    for (oa, ra), (ob, rb) in itertools.combinations(zip(orders, runs), 2):
        c = compare_runs(ra, rb, "matmul", A, B, orders=[oa, ob], identify=[oa, ob])
        if c.verdict == "UNEXPLAINED":
            bad.append((oa, ob, c.summary()))
    return bad


def test_pairs_of_legitimate_orders_are_never_unexplained():
    orders = [Sequential(), Pairwise(), Blocked(64), SplitK(2)]
    for s in (3, 4, 5):
        orders += [SplitK(s), SplitK(s, combine=Pairwise()), SplitK(s, permutation=tuple(range(s))[::-1])]
    assert _sweep(orders, seed=1) == []


@pytest.mark.slow
def test_pairs_of_legitimate_orders_with_eight_partials_are_never_unexplained():
    orders = [Sequential(), Pairwise(), Blocked(64), SplitK(4), SplitK(4, combine=Pairwise())]
    for s in (6, 8):
        orders += [SplitK(s), SplitK(s, combine=Pairwise()), SplitK(s, permutation=tuple(range(s))[::-1]),
                   SplitK(s, inner=Pairwise(), combine=Pairwise())]
    for seed in (1, 2):
        assert _sweep(orders, seed) == []
