"""reveal/replay.py: an order simulated on many inputs as sums of their exact terms gives simulate(op)'s bits; the
batched verification still catches a wrong tree."""

from __future__ import annotations

import numpy as np
import pytest
from reveal_trees import numpy_tree, pairwise_tree, sequential_tree

from numoracle import reveal_order, simulate
from numoracle.core.formats.format import FP32
from numoracle.models.orders.tree import PerPosition, TreeOrder
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


# ---- the level replay (reveal/levels.py): simulate's bits on lane trees, odd data and other step formats ----------

def _lanes_tree(n: int, lanes: int, segments: int, **kw):
    """A CPU kernel's tree: ``segments`` blocks of the terms, each summed in ``lanes`` interleaved chains started
    from a rounded first term (fl(0 + t)), the lanes combined pairwise, the blocks added one after the other."""
    from reveal_trees import _B
    b = _B(n)
    cuts = np.linspace(0, n, segments + 1).astype(int)
    total = None
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        accs = [b.chain([b.round(lo + j)] + list(range(lo + j + lanes, hi, lanes))) for j in range(lanes)
                if lo + j < hi]
        while len(accs) > 1:
            accs = [b.add(accs[i], accs[i + 1]) if i + 1 < len(accs) else accs[i] for i in range(0, len(accs), 2)]
        total = accs[0] if total is None else b.add(total, accs[0])
    return TreeOrder(n, tuple(b.nodes), **kw)


def _odd_draws(rng, shapes, k):
    """Inputs whose sums land on FP32 midpoints, below FP32's normal range and near its overflow threshold."""
    out = []
    for i in range(k):
        scale = [2.0**-75, 2.0**-60, 1.0, 2.0**60][i % 4]
        out.append(tuple((rng.standard_normal(s) * np.exp2(rng.integers(-20, 21, s)) * scale).astype(np.float32)
                         for s in shapes))
    return out


@pytest.mark.parametrize("make", [lambda n: _lanes_tree(n, 4, 3), lambda n: _lanes_tree(n, 2, 5), numpy_tree])
@pytest.mark.parametrize("kw", [{}, {"steps": (("bf16", "rtz"),)}, {"out": "bf16"}, {"leaf": "fp32"},
                                {"steps": (("fp16", "rne"),), "acc": "fp32"}])
def test_level_replay_is_simulate_bits(make, kw):
    """Every op's outputs through the level replay equal simulate(op)'s bits, on ordinary data and on data whose
    sums fall on midpoints, into FP32's subnormal range and beyond its largest value (inf)."""
    from numoracle.reveal.levels import Levels
    rng = np.random.default_rng(11)
    o = make(96)
    o = TreeOrder(o.n, o.nodes, **kw) if kw else o
    assert Levels.of(o) is not None
    for op, shapes in (("sum", [(7, 96)]), ("dot", [(96,), (96,)]), ("matmul", [(5, 96), (96, 3)])):
        for ins in (_draws(rng, shapes, 2), _odd_draws(rng, shapes, 4)):
            got = replay(op, ins, o, FP32)
            for g, i in zip(got, ins):
                want = np.asarray(simulate(op, *i, order=o), np.float64).reshape(-1)
                assert np.array_equal(g.view(np.uint64), want.view(np.uint64)) or \
                    np.array_equal(g, want, equal_nan=True), (op, kw)


def test_level_replay_positions_per_input():
    """Positions given per input: each input's outputs at its own positions, NaN elsewhere; the same bits."""
    rng = np.random.default_rng(12)
    A, B = _lanes_tree(64, 4, 2), _lanes_tree(64, 2, 3)
    o = PerPosition((A, B), tuple(rng.integers(0, 2, 20).tolist()), (4, 5))
    ins = _draws(rng, [(4, 64), (64, 5)], 3)
    at = [None, np.array([0, 6, 12, 18]), [3, 4]]
    for g, i, p in zip(replay("matmul", ins, o, FP32, at=at), ins, at):
        want = np.asarray(simulate("matmul", *i, order=o), np.float64).reshape(-1)
        p = np.arange(20) if p is None else np.asarray(p)
        assert np.array_equal(g[p], want[p]) and np.isnan(np.delete(g, p)).all()


@pytest.mark.parametrize("make", [pairwise_tree, sequential_tree])
def test_verification_catches_a_wrong_matmul_tree(make, monkeypatch):
    """numpy's matmul with a wrong tree at every position is not REPRODUCED under the spread comparison (the first
    kind at every position, the others at a spread); a clearly wrong tree (pairwise) is caught by every kind."""
    real = report._order_of

    def wrong(p, found, data, notes, top):
        real(p, found, data, notes, top)
        return make(p.n)
    monkeypatch.setattr(report, "_order_of", wrong)
    rep = reveal_order(lambda a, b: a @ b, "matmul", shape=(12, 256, 12))
    assert rep.verdict == "differs" and not rep.verified
    assert rep.mismatches["normal"][1] == 144 and rep.mismatches["positive"][1] < 144
    n = rep.mismatches["positive"][1]  # one draw a kind: the outputs compared are the spread's
    assert any(f"the other kinds at {n} of the 144 (every row and column of the output, every tree)" in x
               for x in rep.notes), rep.notes
    if make is pairwise_tree:
        assert all(bad > 0 for bad, _ in rep.mismatches.values())


def test_verification_spread_covers_every_row_column_and_tree():
    from numoracle.reveal.probe import Prober
    p = Prober(lambda a, b: a @ b, "matmul", 32, (12, 32, 9), FP32, 10, 10.0)
    idx = np.zeros(108, np.int64)
    idx[[5, 50]] = 1
    o = PerPosition((pairwise_tree(32), sequential_tree(32)), tuple(idx.tolist()), (12, 9))
    s = report._spread(p, o)
    r, c = np.divmod(s, 9)
    assert set(r.tolist()) == set(range(12)) and set(c.tolist()) == set(range(9))
    assert {5, 50} <= set(s.tolist())
    assert report._spread(Prober(lambda a, b: a @ b, "matmul", 32, (8, 32, 8), FP32, 10, 10.0), o) is None
