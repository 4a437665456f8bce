"""Issue 40, item 3: reveal recognises compensated levels (Kahan) and nodes wider than the output, and claims neither
where a kernel has none. Every reproduced order is checked again here on fresh seeded data (with cancellation)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle import reveal_order
from optional import needs

F = np.float32


# ---- kernels, written in plain numpy ------------------------------------------------------------------------

def kahan_loop(x):
    s, c = x[0], F(0)
    for v in x[1:]:
        y = v - c
        t = s + y
        c = (t - s) - y
        s = t
    return s


def kahan_flushed(x):
    """Kahan, then the error term folded in: s - c."""
    s, c = x[0], F(0)
    for v in x[1:]:
        y = v - c
        t = s + y
        c = (t - s) - y
        s = t
    return s - c


def kahan_wide_error(x):
    """float32 sums, the error term kept in float64."""
    s, c = x[0], 0.0
    for v in x[1:]:
        y = F(np.float64(v) - c)
        t = s + y
        c = (np.float64(t) - np.float64(s)) - np.float64(y)
        s = t
    return s


def lanes_kahan(x, lanes=8):
    """Vectorised over 8 lanes (a plain chain each), the lanes and the tail added by Kahan's method."""
    m = x.size // lanes * lanes
    acc = x[:lanes].copy()
    for r in x[lanes:m].reshape(-1, lanes):
        acc = acc + r
    return kahan_loop(np.concatenate([acc, x[m:]]))


def blocks_kahan(x):
    """numpy's sum of each block of 16 (a tree), the blocks' sums added by Kahan's method."""
    return kahan_loop(np.add.reduce(x.reshape(-1, 16), axis=1))


def neumaier(x):
    s, c = x[0], F(0)
    for v in x[1:]:
        t = s + v
        c += (s - t) + v if abs(s) >= abs(v) else (v - t) + s
        s = t
    return s + c


def sequential(x):
    s = F(0)
    for v in x:
        s = F(s + v)
    return s


def sign_branch(x):
    """A plain tree whichever branch: numpy's pairwise sum when x[0] >= 0, else a sequential sum (data-dependent)."""
    return np.sum(x) if x[0] >= 0 else sequential(x)


def _fresh(n, rng):
    """Fresh data of three kinds: normal, mixed magnitudes, and cancelling (the second half the negated first, off
    by a little)."""
    for kind in ("normal", "mixed", "cancelling"):
        for _ in range(4):
            x = rng.standard_normal(n)
            if kind == "mixed":
                x = x * np.exp2(rng.integers(-10, 11, n))
            if kind == "cancelling":
                x[n // 2:] = -x[:n - n // 2][::-1] * (1 + 2.0**-18)
            yield kind, x.astype(F)


def reproduces(order, kernel, n, seed=4040):
    for _, x in _fresh(n, np.random.default_rng(seed)):
        got = np.asarray(no.simulate("sum", x, order=order), np.float64).reshape(-1)
        with np.errstate(all="ignore"):
            want = np.asarray(kernel(x), np.float64).reshape(-1)     # float32 values: exact in float64
        if got.tobytes() != want.tobytes():
            return False
    return True


def _reveal(kernel, n, **kw):
    with np.errstate(all="ignore"):
        return reveal_order(kernel, "sum", n=n, **kw)


# ---- compensated levels: reproduced --------------------------------------------------------------------------

@pytest.mark.parametrize(("kernel", "n", "flush", "err", "chain"), [
    (kahan_loop, 64, False, None, 63), (kahan_flushed, 48, True, None, 47), (kahan_wide_error, 40, False, "fp64", 39),
    (lanes_kahan, 100, False, None, 11), (blocks_kahan, 256, False, None, 15),
])
def test_kahan_kernels_are_reproduced(kernel, n, flush, err, chain):
    rep = _reveal(kernel, n)
    assert rep.verdict == "reproduced", str(rep)
    o = rep.order
    assert isinstance(o, O.CompensatedTree) and o.method == "kahan" and o.flush == flush, str(rep)
    assert (o.err.name if o.err else None) == err
    assert [len(c) for c in o.chains] == [chain]               # the compensated level, and only it
    assert any("a compensated (Kahan) level" in x for x in rep.notes), rep.notes
    assert rep.carry_calls > 0 and rep.calls >= rep.carry_calls
    assert reproduces(o, kernel, n)
    assert not reproduces(o.tree, kernel, n)                    # the plain tree alone would not do


def test_the_chains_are_where_the_kernel_compensates():
    """blocks_kahan: the Kahan chain reads the 16 blocks' sums; the blocks' own additions are plain."""
    rep = _reveal(blocks_kahan, 256)
    o = rep.order
    (chain,) = o.chains
    t = o.tree
    leaves = np.ones(t.n + len(t.nodes), np.int64)
    for i, ch in enumerate(t.nodes):
        leaves[t.n + i] = sum(leaves[c] for c in ch)
    inputs = [t.nodes[chain[0]][0], t.nodes[chain[0]][1]] + [
        next(r for r in t.nodes[chain[k]] if r != t.n + chain[k - 1]) for k in range(1, len(chain))]
    assert [int(leaves[r]) for r in inputs] == [16] * 16


# ---- never a wrong claim -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("kernel", "n"), [(np.sum, 256), (sequential, 64),
                                           (lambda x: F(np.sum(x.astype(np.float64))), 300)])
def test_plain_trees_are_not_called_compensated(kernel, n):
    rep = _reveal(kernel, n)
    assert rep.verdict == "reproduced" and isinstance(rep.order, O.TreeOrder), str(rep)
    assert not any("compensated" in x or "carry" in x for x in rep.notes)


def test_a_data_dependent_tree_is_not_called_compensated():
    rep = _reveal(sign_branch, 64)
    assert rep.verdict == "differs" and isinstance(rep.order, O.TreeOrder), str(rep)
    assert rep.carry_calls > 0
    assert any("none carries its rounding error" in x for x in rep.notes), rep.notes
    assert not any("Kahan" in x for x in rep.notes)


def test_carry_probes_read_a_kahan_model_and_not_its_plain_tree():
    """The carry probe itself: every chain node of a simulated Kahan chain shows the signature; the same tree
    without compensation shows it nowhere."""
    from numoracle.core.formats.format import FP32
    from numoracle.reveal.compensation import carry_probes
    from numoracle.reveal.probe import Prober

    n = 24
    tree = O.TreeOrder(n, tuple([(0, 1)] + [(n + i, i + 2) for i in range(n - 2)]), steps=((FP32, "rne"),))
    for order, want in ((O.CompensatedTree(tree, (tuple(range(n - 1)),)), n - 2), (tree, 0)):
        p = Prober(lambda x, o=order: no.simulate("sum", x, order=o), "sum", n, None, FP32, 10**6, 60)
        p.terms(np.ones(n))
        c = carry_probes(p, tree, 0, 100)
        assert c.flagged == want
        assert c.chains == ([tuple(range(n - 1))] if want else [])


def test_neumaier_is_not_called_kahan_and_exact_sums_are_told_apart():
    rep = _reveal(neumaier, 64)
    assert rep.verdict == "not a tree" and rep.order is None
    assert any("counts all 62 units" in x and "Neumaier" in x for x in rep.notes), rep.notes
    assert not any("Kahan level" in x or "exact accumulation (" in x for x in rep.notes)
    rep = _reveal(lambda x: F(math.fsum(x.astype(np.float64))), 64)
    assert rep.verdict == "not a tree"
    assert any("exact accumulation (" in x for x in rep.notes) and not any("Neumaier" in x for x in rep.notes)
    # the distinction matters: a Kahan model of the same chain does not give the Neumaier kernel's bits
    kahan = _reveal(kahan_loop, 64).order
    assert not reproduces(kahan, neumaier, 64)
    assert reproduces(O.CompensatedTree(kahan.tree, kahan.chains, "neumaier", True), neumaier, 64)


# ---- nodes wider than the output -----------------------------------------------------------------------------

def _float64_blocks(x):
    """Blocks of 64 summed in float64 (numpy's pairwise), each rounded to float32, then a float32 chain."""
    return sequential(x.reshape(-1, 64).astype(np.float64).sum(axis=1).astype(F))


@pytest.mark.parametrize(("kernel", "n", "formats"), [
    (lambda x: F(np.sum(x.astype(np.float64))), 1000, {"fp64"}),
    (lambda x: F(np.cumsum(x.astype(np.float64))[-1]), 200, {"fp64"}),
    (_float64_blocks, 256, {"fp64", "fp32"}),
])
def test_float64_nodes_in_a_float32_kernel(kernel, n, formats):
    rep = _reveal(kernel, n)
    assert rep.verdict == "reproduced", str(rep)
    assert {s[0].name for s in rep.order.steps} == formats
    assert rep.order.out is not None and rep.order.out.name == "fp32"
    assert reproduces(rep.order, kernel, n)


# ---- jax's CPU sum (YNNPACK: its top level a Kahan sum) ------------------------------------------------------

@pytest.mark.parametrize("n", [1000, 4096])
def test_jax_cpu_sum(n):
    jax = needs("jax")
    jnp = needs("jax", "jax.numpy")
    jax.config.update("jax_platforms", "cpu")
    f = jax.jit(jnp.sum)

    def kernel(x):
        return np.asarray(f(x))
    rep = reveal_order(lambda x: f(x), "sum", n=n)
    assert rep.verdict == "reproduced", str(rep)
    assert reproduces(rep.order, kernel, n)
    if n == 4096:       # 16 lanes, each a Kahan sum of 4 level-1 accumulators of 64 terms (YnnSum's docstring)
        assert isinstance(rep.order, O.CompensatedTree) and rep.order.flush, str(rep)
        assert sorted(len(c) for c in rep.order.chains) == [3] * 16
        assert reproduces(O.YnnSum("k1"), kernel, n)     # identify's model agrees on the same data


def test_a_capped_carry_search_probes_the_top_levels_first(monkeypatch):
    from numoracle.reveal import compensation

    monkeypatch.setattr(compensation, "_ELEMENTS", 1)           # 256 probes (one batch) of the ~470 candidates
    rep = _reveal(blocks_kahan, 256)
    assert rep.verdict == "reproduced" and isinstance(rep.order, O.CompensatedTree), str(rep)
    assert any(x.startswith("carry probes at the 256 of ") for x in rep.notes), rep.notes
    assert rep.carry_calls < 350          # 256 probes and their controls (uncapped: about 500)


def test_a_wider_node_the_tree_does_not_know_is_not_a_carry():
    """An FP64 node under an FP32 one keeps the quarter and the FP32 node rounds 3/4 ulp up: the carry signature
    without any error term. Where the tree believes that node FP32 (a node format not probed), the node's own
    precision (53 bits, not 25) keeps it from being called compensated."""
    from numoracle.core.formats.format import FP32, FP64
    from numoracle.reveal.compensation import carry_probes
    from numoracle.reveal.probe import Prober

    n = 24
    chain = tuple([(0, 1)] + [(n + i, i + 2) for i in range(n - 2)])
    true = O.TreeOrder(n, chain, kinds=tuple([1] * 5 + [0] * (n - 6)), steps=((FP32, "rne"), (FP64, "rne")))
    believed = O.TreeOrder(n, chain, steps=((FP32, "rne"),))
    p = Prober(lambda x: no.simulate("sum", x, order=true), "sum", n, None, FP32, 10**6, 60)
    p.terms(np.ones(n))
    c = carry_probes(p, believed, 0, 100)
    assert c.flagged == 0 and c.chains == [] and c.other >= 1


def test_a_kahan_sum_over_rows():
    """fn(x[8, 40]) -> [8], each row a Kahan sum with the error term folded in (s - c at the end)."""
    def kahan_rows(X):
        s, c = X[:, 0].copy(), np.zeros(X.shape[0], F)
        for j in range(1, X.shape[1]):
            y = X[:, j] - c
            t = s + y
            c = (t - s) - y
            s = t
        return s - c
    rep = _reveal(kahan_rows, 40, rows=8)
    assert rep.verdict == "reproduced" and isinstance(rep.order, O.CompensatedTree) and rep.order.flush, str(rep)
    X = np.random.default_rng(77).standard_normal((8, 40)).astype(F)
    X[:, 20:] = -X[:, :20][:, ::-1] * F(1 + 2.0**-18)
    assert np.array_equal(no.simulate("sum", X, order=rep.order), kahan_rows(X))
