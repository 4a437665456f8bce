"""The fast probing paths give the plain path's answers: in-place probes equal fresh inputs per probe, several
probes per call (a sum's rows, a matmul's rows / columns) find the trees one probe per call finds."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle import reveal_order
from numoracle.core.formats.format import format_of
from numoracle.reveal.lanes import Lanes
from numoracle.reveal.probe import Prober
from numoracle.reveal.tree import Masking, search_tree, to_nodes


def _prober(fn, op, n, shape=None, dtype="fp32"):
    p = Prober(fn, op, n, shape, format_of(dtype), 10**7, 120.0)
    p.terms(np.ones(n))
    return p, Masking(p)


def _fresh(p, mask, a, j):
    """The probe (+M at a, -M at j, units elsewhere) on inputs built afresh: the plain path, one call."""
    t = np.full(p.n, mask.u)
    t[a], t[j] = mask.M, -mask.M
    return p.terms(t)


@pytest.mark.parametrize(("op", "fn", "n"), [
    ("sum", np.sum, 100), ("sum", lambda x: no.simulate("sum", x, order=O.GpuReduce(4, 8, 2, 2)), 64),
    ("dot", np.dot, 90), ("dot", lambda a, b: no.simulate("dot", a, b, order=O.SplitK(3)), 48),
])
def test_in_place_probes_equal_fresh_inputs(op, fn, n):
    p, mask = _prober(fn, op, n)
    rng = np.random.default_rng(1)
    a = rng.integers(0, n, 40)
    j = (a + 1 + rng.integers(0, n - 1, 40)) % n
    got = Lanes(p, mask.u, mask.M).run(a, j)
    want = np.stack([_fresh(p, mask, int(x), int(y)) for x, y in zip(a, j)])
    assert np.array_equal(got, want)


def _rows_sum(order, **kw):
    return lambda x: no.simulate("sum", x, order=order, **kw)


@pytest.mark.parametrize(("op", "fn", "n", "shape"), [
    ("sum", _rows_sum(O.Pairwise()), 64, (8, 64)),
    ("sum", _rows_sum(O.NumpyPairwise()), 300, (16, 300)),
    ("sum", _rows_sum(O.Pairwise(), rounding="rtz"), 48, (8, 48)),
    ("sum", lambda x: np.sum(x, axis=-1), 200, (12, 200)),
    ("matmul", lambda A, B: no.simulate("matmul", A, B, order=O.preset("a100", "bf16")), 32, (3, 32, 2)),
    ("matmul", lambda A, B: no.simulate("matmul", A, B, order=O.SplitK(4, combine=O.Pairwise())), 40, (5, 40, 4)),
])
def test_packed_search_finds_the_plain_trees(op, fn, n, shape):
    dtype = "bf16" if op == "matmul" and shape[1] == 32 else "fp32"
    p, mask = _prober(fn, op, n, shape, dtype)
    packed = search_tree(p, mask, packed=True)
    c0 = p.calls
    plain = search_tree(p, mask, packed=False)
    assert packed.mode != "all" and packed.per_call > 1, packed
    assert packed.calls < p.calls - c0                     # fewer calls than one probe per call
    key = sorted((repr(t), tuple(pos)) for t, pos in packed.found)
    assert key == sorted((repr(t), tuple(pos)) for t, pos in plain.found)


def test_sum_over_rows_reports_probes_per_call_and_the_scalar_tree():
    rep = reveal_order(lambda x: np.sum(x, axis=-1), "sum", n=200, rows=16)
    assert rep.verdict == "reproduced", str(rep)
    assert rep.probes_per_call > 4 and "probes per tree-search call" in str(rep)
    one = reveal_order(np.sum, "sum", n=200)
    assert rep.order.nodes == one.order.nodes and rep.tree_calls < one.tree_calls
    x = np.random.default_rng(7).standard_normal((5, 200)).astype(np.float32)
    assert np.array_equal(no.simulate("sum", x, order=rep.order), np.sum(x, axis=-1))


def test_rows_argument_is_checked():
    with pytest.raises(ValueError, match="rows"):
        reveal_order(np.matmul, "matmul", shape=(2, 4, 2), rows=3)
    with pytest.raises(ValueError, match="rows"):
        reveal_order(np.dot, "dot", n=8, rows=3)


def test_torch_and_jax_outputs_are_read_exactly_without_the_engine():
    torch = pytest.importorskip("torch", reason="torch reads its float tensors through the fast reader")
    from numoracle.reveal.probe import fast_reader

    outs = [torch.tensor(v, dtype=d) for v, d in ((1.5, torch.bfloat16), (2.0**-20, torch.float32))]
    for o in outs:
        hold, read = fast_reader(o)
        assert read([hold(o)]).tolist() == [[float(o)]]
    hold, read = fast_reader(outs[0])
    assert read([outs[1]]) is None                          # another dtype: read one by one (names the change)
    rep = reveal_order(lambda x: torch.from_numpy(x).sum(-1), "sum", n=128, rows=8)
    assert rep.verdict == "reproduced" and rep.probes_per_call > 4


@pytest.mark.parametrize(("op", "fn", "n"), [
    ("sum", np.sum, 1000), ("sum", lambda x: no.simulate("sum", x, order=O.Pairwise()), 300),
    ("sum", lambda x: no.simulate("sum", x, order=O.GpuReduce(4, 8, 2, 2)), 256),
    ("sum", lambda x: no.simulate("sum", x, order=O.Blocked(16, O.Pairwise(), O.Sequential())), 200),
    ("sum", lambda x: no.simulate("sum", x, order=O.Sequential()), 100), ("dot", np.dot, 1000),
])
def test_confirmed_twins_give_the_searched_trees_in_fewer_calls(op, fn, n):
    """Groups that repeat a revealed subtree are confirmed (one probe per node, reveal/twins.py), not searched."""
    p, mask = _prober(fn, op, n)
    c0 = p.calls
    fast = search_tree(p, mask, twins=True)
    c1 = p.calls
    plain = search_tree(p, mask, twins=False)
    assert [repr(t) for t, _ in fast.found] == [repr(t) for t, _ in plain.found]
    assert c1 - c0 <= p.calls - c1
    if n >= 256:
        assert c1 - c0 < 0.8 * (p.calls - c1)


def test_a_twin_that_differs_is_searched():
    """Two halves of the same size, one pairwise and one sequential: the second is no twin of the first (its
    confirmation fails and it is searched)."""
    n, nodes = 64, []

    def add(x, y):
        nodes.append((x, y))
        return n + len(nodes) - 1

    def pairwise(lo, hi):
        return lo if hi - lo == 1 else add(pairwise(lo, (lo + hi) // 2), pairwise((lo + hi) // 2, hi))

    left = pairwise(0, 32)
    right = 32
    for k in range(33, 64):
        right = add(right, k)
    add(left, right)
    t = O.TreeOrder(n, tuple(nodes))
    p, mask = _prober(lambda x: no.simulate("sum", x, order=t), "sum", n)
    fast, plain = search_tree(p, mask, twins=True), search_tree(p, mask, twins=False)
    assert [repr(x) for x, _ in fast.found] == [repr(x) for x, _ in plain.found]
    assert tuple(to_nodes(fast.found[0][0], n)) == t.nodes


@pytest.mark.parametrize(("fn", "n"), [
    (np.dot, 1000),                                                   # OpenBLAS: some products rounded first
    (lambda a, b: no.simulate("dot", a, b, order=O.Pairwise(), fma=False), 64),   # every product rounded
    (lambda a, b: no.simulate("dot", a, b, order=O.SplitK(4)), 64),  # every product exact (FMA)
])
def test_products_probed_several_per_call_as_one_by_one(fn, n):
    from numoracle.reveal.nodes import NodeProbe

    p, mask = _prober(fn, "dot", n)
    tree = search_tree(p, mask).found[0][0]
    probe = NodeProbe(p, to_nodes(tree, n), 0, mask.eM)
    cands = [k for k in range(n) if len(probe.nodes[probe.parent[k] - n]) == 2]
    c0 = p.calls
    many = probe.leaves_rounded(cands, 24, 24)
    c1 = p.calls
    assert many == {k: probe.leaf_rounded(k, 24) for k in cands}
    assert c1 - c0 < len(cands) / 3


# ---- lane classes (reveal/classes.py) ------------------------------------------------------------------------

def _tiled(M, K, N):
    """A matmul whose output (r, c) adds sequentially where r + c is even, pairwise where odd: rows (and columns)
    fall in two classes, each holding both trees at alternate positions."""
    idx = (np.arange(M)[:, None] + np.arange(N)[None, :]) % 2
    per = O.PerPosition((O.Sequential(), O.Pairwise()), idx)
    return lambda A, B: no.simulate("matmul", A, B, order=per), idx


def test_lane_classes_group_rows_by_tree():
    fn, idx = _tiled(8, 32, 8)
    rep = reveal_order(fn, "matmul", shape=(8, 32, 8), dtype="fp32")
    assert rep.verdict == "reproduced" and rep.trees == 2, str(rep)
    assert sorted(map(sorted, rep.lane_classes)) == [[0, 2, 4, 6], [1, 3, 5, 7]], rep.lane_classes
    assert rep.probes_per_call > 2 and any(x.startswith("lane classes: ") for x in rep.notes)
    got = np.asarray(rep.order.index).reshape(8, 8)
    assert ((got == got[0, 0]) == (idx == 0)).all() and got[0, 0] != got[0, 1]


def test_a_class_that_hides_two_trees_is_caught(monkeypatch):
    """One fingerprint (terms 0 and 1 meet first in both trees) cannot tell the rows apart: the packed search over
    the merged class gives a tree the verification refutes (or answers no tree gives), and reveal searches again
    with every output seeing every probe."""
    from numoracle.reveal import classes
    monkeypatch.setattr(classes, "FINGERPRINTS", 1)
    fn, _ = _tiled(8, 32, 8)
    rep = reveal_order(fn, "matmul", shape=(8, 32, 8), dtype="fp32")
    assert rep.verdict == "reproduced" and rep.trees == 2, str(rep)
    assert rep.lane_classes == () or any("random data says otherwise" in x for x in rep.notes)


def test_a_class_whose_tree_is_new_is_searched_not_certified():
    """Rows 0, 2, 4, 6 sequential, 1, 3, 5, 7 pairwise, one column: the second class fails the first class's
    certificate (a sequential tree) and is searched."""
    per = O.PerPosition((O.Sequential(), O.Pairwise()), (np.arange(8) % 2)[:, None])
    rep = reveal_order(lambda A, B: no.simulate("matmul", A, B, order=per), "matmul", shape=(8, 32, 1))
    assert rep.verdict == "reproduced" and rep.trees == 2, str(rep)
    assert sorted(map(sorted, rep.lane_classes)) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    got = np.asarray(rep.order.index)
    assert (got[0::2] == got[0]).all() and (got[1::2] == got[1]).all() and got[0] != got[1]
    assert rep.order.orders[got[0]].depth == 32 and rep.order.orders[got[1]].depth <= 6   # (+0 start: {0})
