"""CompensatedTree: Kahan / Neumaier chains inside a TreeOrder, against plain numpy loops written step by step."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle.core.formats.format import FP64

F = np.float32


def kahan(x: np.ndarray, flush: bool = False, wide: bool = False) -> F:
    """s = x0, c = 0; y = x - c, t = s + y, c = (t - s) - y (in float64 when wide), s = t."""
    s, c = x[0], (0.0 if wide else F(0))
    for v in x[1:]:
        y = F(np.float64(v) - c) if wide else v - c
        t = s + y
        c = (np.float64(t) - np.float64(s)) - np.float64(y) if wide else (t - s) - y
        s = t
    return F(s - F(c)) if flush and not wide else s


def neumaier(x: np.ndarray) -> F:
    s, c = x[0], F(0)
    for v in x[1:]:
        t = s + v
        c += (s - t) + v if abs(s) >= abs(v) else (v - t) + s
        s = t
    return s + c


def lanes_then_kahan(x: np.ndarray, lanes: int = 4) -> F:
    """Lane l adds terms l, l + lanes, ... in order (a plain chain); the lanes' sums are added by Kahan's method."""
    sums = [x[lane::lanes][0] for lane in range(lanes)]
    for lane in range(lanes):
        for v in x[lane::lanes][1:]:
            sums[lane] = sums[lane] + v
    return kahan(np.array(sums, F))


def _chain_tree(n: int) -> O.TreeOrder:
    return O.TreeOrder(n, tuple([(0, 1)] + [(n + i, i + 2) for i in range(n - 2)]), steps=(("fp32", "rne"),))


def _lanes_tree(n: int, lanes: int) -> tuple[O.TreeOrder, tuple]:
    nodes: list = []
    tops = []
    for lane in range(lanes):
        terms = list(range(lane, n, lanes))
        s = terms[0]
        for t in terms[1:]:
            nodes.append((s, t))
            s = n + len(nodes) - 1
        tops.append(s)
    chain = []
    s = tops[0]
    for t in tops[1:]:
        nodes.append((s, t))
        s = n + len(nodes) - 1
        chain.append(len(nodes) - 1)
    return O.TreeOrder(n, tuple(nodes), steps=(("fp32", "rne"),)), (tuple(chain),)


def _data(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for kind in ("normal", "mixed", "cancelling"):
        for _ in range(40):
            x = rng.standard_normal(n)
            if kind == "mixed":
                x = x * np.exp2(rng.integers(-12, 13, n))
            if kind == "cancelling":
                x[n // 2:] = -x[:n - n // 2][::-1] * (1 + 2.0**-20)
            out.append(x.astype(F))
    return out


@pytest.mark.parametrize(("method", "flush", "err", "ref"), [
    ("kahan", False, None, kahan), ("kahan", True, None, lambda x: kahan(x, flush=True)),
    ("kahan", False, "fp64", lambda x: kahan(x, wide=True)), ("neumaier", True, None, neumaier)])
def test_a_compensated_chain_is_the_loop(method, flush, err, ref):
    n = 33
    tree = _chain_tree(n)
    o = O.CompensatedTree(tree, (tuple(range(n - 1)),), method, flush, err)
    xs = _data(n, np.random.default_rng(7))
    got = no.simulate("sum", np.stack(xs), order=o)
    want = np.array([ref(x) for x in xs])
    assert np.array_equal(got, want)
    plain = no.simulate("sum", np.stack(xs), order=tree)
    assert (plain != want).sum() > 10          # the compensation shows on this data: the test can fail


def test_a_compensated_top_level_over_plain_lanes():
    n, lanes = 40, 4
    tree, chains = _lanes_tree(n, lanes)
    o = O.CompensatedTree(tree, chains)
    xs = _data(n, np.random.default_rng(8))
    assert np.array_equal(no.simulate("sum", np.stack(xs), order=o), [lanes_then_kahan(x, lanes) for x in xs])
    assert O.parse(str(o)) == o


def test_the_bound_holds_for_compensated_chains():
    n = 33
    o = O.CompensatedTree(_chain_tree(n), (tuple(range(n - 1)),), "neumaier", True, FP64)
    x = np.stack(_data(n, np.random.default_rng(9)))
    y = no.simulate("sum", x, order=o)
    assert no.check_sum_close(y, x, order=o, out="fp32").passed


@pytest.mark.parametrize(("kw", "msg"), [
    ({"chains": ((0, 2),)}, "does not read node 0"), ({"chains": ((0, 1), (1,))}, "in two chains"),
    ({"chains": ((0,),), "method": "neumaier"}, "flush=True"), ({"chains": ((99,),)}, "not a node"),
    ({"chains": ((0,),), "method": "pairwise"}, "method must be one of"),
])
def test_bad_fields_say_what_to_give(kw, msg):
    with pytest.raises((ValueError, no.NumoracleError), match=msg):
        O.CompensatedTree(_chain_tree(5), **kw)
    with pytest.raises(TypeError, match="must be a TreeOrder"):
        O.CompensatedTree(O.Sequential(), ())
    with pytest.raises(ValueError, match="sums n = 5 terms"):
        no.simulate("sum", np.ones(6, F), order=O.CompensatedTree(_chain_tree(5), ((0, 1),)))
