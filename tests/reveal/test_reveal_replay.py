"""reveal/replay.py: an order simulated on many inputs as sums of their exact terms gives simulate(op)'s bits; the
batched verification still catches a wrong tree."""

from __future__ import annotations

import numpy as np
import pytest
from reveal_trees import numpy_tree, pairwise_tree, sequential_tree

from numoracle import reveal_order, simulate
from numoracle.core.formats.format import FP32
from numoracle.models.orders.tree import PerPosition
from numoracle.reveal import report
from numoracle.reveal.replay import replay


def _draws(rng, shapes, k):
    return [tuple((rng.standard_normal(s) * np.exp2(rng.integers(-8, 9, s))).astype(np.float32) for s in shapes)
            for _ in range(k)]


@pytest.mark.parametrize("make", [pairwise_tree, numpy_tree, sequential_tree])
def test_replay_is_simulate_bits(make):
    rng = np.random.default_rng(7)
    o = make(48)
    for op, shapes in (("sum", [(5, 48)]), ("dot", [(48,), (48,)]), ("matmul", [(3, 48), (48, 4)])):
        ins = _draws(rng, shapes, 3)
        got = replay(op, ins, o, FP32)
        for g, i in zip(got, ins):
            want = np.asarray(simulate(op, *i, order=o), np.float64).reshape(-1)
            assert np.array_equal(g.view(np.uint64), want.view(np.uint64)), op


def test_replay_per_position_and_subset():
    rng = np.random.default_rng(8)
    A, B = pairwise_tree(32), sequential_tree(32)
    idx = rng.integers(0, 2, 12)
    o = PerPosition((A, B), tuple(idx.tolist()), (3, 4))
    ins = _draws(rng, [(3, 32), (32, 4)], 2)
    pos = np.array([1, 5, 6, 11])
    for g, i in zip(replay("matmul", ins, o, FP32, pos), ins):
        want = np.asarray(simulate("matmul", *i, order=o), np.float64).reshape(-1)
        assert np.array_equal(g[pos], want[pos]) and np.isnan(np.delete(g, pos)).all()


@pytest.mark.parametrize("op", ["sum", "dot"])
def test_verification_catches_a_wrong_tree(op, monkeypatch):
    """A search that returns a wrong tree (sequential for numpy's pairwise sum) is not REPRODUCED."""
    real = report._order_of

    def wrong(p, found, data, notes, top):
        real(p, found, data, notes, top)
        return sequential_tree(p.n)
    monkeypatch.setattr(report, "_order_of", wrong)
    fn = np.sum if op == "sum" else np.dot
    rep = reveal_order(fn, op, n=256)
    assert rep.verdict == "differs" and not rep.verified
    assert sum(b for b, _ in rep.mismatches.values()) > 0
