"""TreeOrder and PerPosition: text, validation, simulate against the orders they write out, bounds, pictures."""

from __future__ import annotations

import numpy as np
import pytest
from reveal_trees import numpy_tree, pairwise_tree, sequential_from_zero, sequential_tree

import numoracle as no
from numoracle import orders as O
from numoracle.formats import FP16, FP32

RNG = np.random.default_rng(5)


def _data(shape, dtype=np.float32):
    e = 12 if dtype == np.float32 else 3
    x = RNG.standard_normal(shape) * np.exp2(RNG.integers(-e, e, shape))
    return x.astype(dtype)


@pytest.mark.parametrize(("tree", "order"), [
    (sequential_from_zero, O.Sequential()), (pairwise_tree, O.Pairwise()), (numpy_tree, O.NumpyPairwise())])
@pytest.mark.parametrize("n", [2, 3, 7, 8, 9, 100, 129, 1000])
def test_written_out_trees_give_the_orders_bits(tree, order, n):
    x = _data((40, n))
    t = tree(n)
    assert np.array_equal(no.simulate("sum", x, order=t), no.simulate("sum", x, order=order), equal_nan=True)
    a, b = _data((6, n), np.float16), _data((n, 5), np.float16)
    assert np.array_equal(no.simulate("matmul", a, b, order=t, acc="fp16"),
                          no.simulate("matmul", a, b, order=order, acc="fp16"), equal_nan=True)


def test_leaf_rounding_is_multiply_then_add():
    n = 50
    a, b = _data((3, n)), _data((n, 4))
    t = sequential_tree(n, leaf=FP32)
    assert np.array_equal(no.simulate("matmul", a, b, order=t), no.simulate("matmul", a, b, fma=False), equal_nan=True)
    assert not np.array_equal(no.simulate("matmul", a, b, order=t), no.simulate("matmul", a, b), equal_nan=True)


def test_node_formats_and_output_rounding():
    n = 300
    x = _data((20, n), np.float16)
    t = numpy_tree(n, steps=((FP32, "rne"),), out=FP16)
    ref = no.simulate("sum", x, order=O.NumpyPairwise(8192, FP32, FP16))
    assert np.array_equal(no.simulate("sum", x, order=t), ref, equal_nan=True)
    assert np.array_equal(no.simulate("sum", x.astype(np.float32), order=t), ref, equal_nan=True)


def test_fused_nodes_are_block_fmas():
    bf = O.preset("h100", "fp16")
    k = bf.n
    nodes = [tuple(range(k))] + [(3 * k + j,) + tuple(range(k * (j + 1), k * (j + 2))) for j in range(2)]
    t = O.TreeOrder(3 * k, tuple(nodes), steps=(bf,))
    a, b = _data((5, 3 * k), np.float16), _data((3 * k, 4), np.float16)
    assert np.array_equal(no.simulate("matmul", a, b, order=t), no.simulate("matmul", a, b, order=bf), equal_nan=True)
    assert t.text() .startswith("[[[0 1")
    assert O.parse(str(t)) == t


def test_text_round_trip_and_depths():
    t = O.TreeOrder.from_text("(((0+1)+2)+(3+4))")
    assert t.text() == "(((0+1)+2)+(3+4))"
    assert t.depths().tolist() == [3, 3, 2, 2, 2]
    assert O.parse(str(t)) == t and O.parse(O.order_text(t)) == t
    big = sequential_tree(5000)
    assert "too large" in big.text()


@pytest.mark.parametrize(("args", "msg"), [
    ((3, ((0, 1),)), "term 2 is used 0 times"),
    ((3, ((0, 1), (3, 1))), "term 1 is used 2 times"),
    ((3, ((0, 1, 2),)), "two children"),
    ((3, ((0, 4), (1, 2))), "earlier nodes"),
    ((2, ()), "needs nodes"),
])
def test_bad_trees_are_refused(args, msg):
    with pytest.raises(ValueError, match=msg):
        O.TreeOrder(*args)


def test_tree_length_must_match_k():
    with pytest.raises(ValueError, match="n = 4 terms"):
        no.simulate("sum", np.ones(5, np.float32), order=O.TreeOrder.from_text("((0+1)+(2+3))"))


@pytest.mark.parametrize("n", [10, 64, 1000])
def test_bounds_read_the_tree_depth(n):
    for tree, text in ((sequential_tree, "sequential"), (pairwise_tree, "pairwise")):
        mine = no.expected_error_bound("sum", "fp32", n, order=tree(n))
        ref = no.expected_error_bound("sum", "fp32", n, order=text)
        assert mine.depth == ref.depth and mine.coefficient == ref.coefficient


def test_bound_counts_each_node_format():
    t = numpy_tree(300, steps=((FP32, "rne"),), out=FP16)
    b = no.expected_error_bound("sum", "fp16", 300, order=t, acc="fp32")
    names = [c.name for c in b.components]
    assert "output rounding" in names and b.depth == t.depth + 1


def test_per_position_takes_each_output_from_its_order():
    t0, t1 = O.TreeOrder.from_text("(((0+1)+2)+3)"), O.TreeOrder.from_text("(0+(1+(2+3)))")
    idx = np.array([[0, 1, 1], [1, 0, 0]])
    pp = O.PerPosition((t0, t1), idx)
    a, b = _data((2, 4)), _data((4, 3))
    got = no.simulate("matmul", a, b, order=pp)
    want = np.where(idx == 0, no.simulate("matmul", a, b, order=t0), no.simulate("matmul", a, b, order=t1))
    assert np.array_equal(got, want, equal_nan=True)
    assert pp.order_at(0, 1) == t1 and O.parse(str(pp)) == pp
    with pytest.raises(ValueError, match="shape"):
        no.simulate("matmul", _data((3, 4)), b, order=pp)


def test_draw_tree_and_histogram():
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    assert pairwise_tree(16).draw() is not None
    ax = numpy_tree(4096).draw()
    assert "histogram" in ax.get_title()


def test_rounding_nodes_in_text():
    t = O.TreeOrder.from_text("(({0}+1)+{(2+3)})")
    assert t.text() == "(({0}+1)+{(2+3)})" and O.parse(str(t)) == t
    assert t.depths().tolist() == [3, 2, 3, 3]


def _random_tree(n, rng):
    """A random binary tree over shuffled terms, with rounding nodes here and there."""
    refs = list(rng.permutation(n))
    nodes = []
    while len(refs) > 1:
        i, j = sorted(rng.choice(len(refs), 2, replace=False))
        b = refs.pop(j)
        a = refs.pop(i)
        nodes.append((int(a), int(b)))
        r = n + len(nodes) - 1
        if rng.random() < 0.1:
            nodes.append((r,))
            r += 1
        refs.insert(int(rng.integers(len(refs) + 1)), r)
    return O.TreeOrder(n, tuple(nodes))


def _evaluate(t, x):
    """The tree in plain float32 arithmetic, node by node."""
    v = [np.float32(a) for a in x]
    for ch in t.nodes:
        v.append(np.float32(v[ch[0]]) if len(ch) == 1 else np.float32(v[ch[0]] + v[ch[1]]))
    return v[-1]


@pytest.mark.parametrize("seed", range(12))
def test_random_trees_against_plain_float32(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    t = _random_tree(n, rng)
    x = _data((4, n))
    got = no.simulate("sum", x, order=t)
    assert [float(g) for g in got] == [float(_evaluate(t, row)) for row in x]


@pytest.mark.parametrize("kw", [{"nodes": ((0, 1.9), (3, 2))}, {"nodes": ((0, 1), (3, 2)), "kinds": (0.5, 0.2)}])
def test_float_refs_are_refused_not_truncated(kw):
    # (0, 1.9) was read as (0, 1) and kinds (0.5, 0.2) as (0, 0): a different tree, silently
    with pytest.raises(TypeError, match="must be an int"):
        O.TreeOrder(3, **kw)
