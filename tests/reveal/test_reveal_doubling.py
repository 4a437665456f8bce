"""The prefix doubling of the tree search (reveal/tree.py, ``_Search._double``): where a prefix subtree's translate
is its sibling, each step is certified, not searched; where it is not (a block that differs, lanes that span the
whole input), the search goes on as usual. Either way the tree is exactly the kernel's: checked against kernels
built from known nested trees (float32 additions in the tree's order), whose subtrees are compared as leaf sets."""

from __future__ import annotations

import random

import numpy as np
import pytest

from numoracle import reveal_order
from numoracle.reveal import tree as tree_mod


def _eval(t, x):
    """The tree's float32 sum of x: its nodes left to right, each addition rounded (an explicit stack)."""
    stack, done = [(t, False)], []
    while stack:
        node, seen = stack.pop()
        if not isinstance(node, tuple):
            done.append(x[node])
        elif seen:
            k = len(node)
            parts = done[-k:]
            del done[-k:]
            s = parts[0]
            for v in parts[1:]:
                s = np.float32(s + v)
            done.append(s)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(node))
    return np.float32(done[0])


def _random_tree(leaves, rng):
    if len(leaves) == 1:
        return leaves[0]
    k = rng.randint(1, len(leaves) - 1)
    return (_random_tree(leaves[:k], rng), _random_tree(leaves[k:], rng))


def _moved(t, d):
    return t + d if not isinstance(t, tuple) else tuple(_moved(c, d) for c in t)


def _pairwise(parts):
    while len(parts) > 1:
        parts = [(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def _clusters(t):
    """Every internal node's leaf set."""
    out, stack, done = set(), [(t, False)], []
    while stack:
        node, seen = stack.pop()
        if not isinstance(node, tuple):
            done.append(frozenset([node]))
        elif seen:
            k = len(node)
            s = frozenset().union(*done[-k:])
            del done[-k:]
            out.add(s)
            done.append(s)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(node))
    return out


def _revealed(order):
    n, sets = order.n, []
    for ch in order.nodes:
        sets.append(frozenset().union(*[frozenset([c]) if c < n else sets[c - n] for c in ch]))
    return {s for s in sets if len(s) > 1}


def _kernel(kind, seed):
    rng = random.Random(seed)
    B, nb = rng.choice([16, 32, 64]), rng.choice([4, 5, 8])
    block = _random_tree(list(range(B)), rng)
    blocks = [_moved(block, i * B) for i in range(nb)]
    if kind == "a block differs":
        k = rng.randrange(1, nb)
        blocks[k] = _moved(_random_tree(list(range(B)), rng), k * B)
    if kind == "lanes":               # chains of stride L over the whole input, combined pairwise
        n, L = B * nb, rng.choice([2, 4, 8])
        chains = []
        for lane in range(L):
            c = lane
            for j in range(lane + L, n, L):
                c = (c, j)
            chains.append(c)
        return _pairwise(chains), n
    if kind == "lane blocks":         # torch's shape: per lane, chains of m over every L-th leaf, chained in turn;
        n, L, m = B * nb, 8, 4        # the lanes chained, then pairwise
        lanes = []
        for lane in range(L):
            members = list(range(lane, n, L))
            t = None
            for lo in range(0, len(members), m):
                c = members[lo]
                for j in members[lo + 1:lo + m]:
                    c = (c, j)
                t = c if t is None else (t, c)
            lanes.append(t)
        return _pairwise([(lanes[i], lanes[i + 1]) for i in range(0, L, 2)]), n
    return _pairwise(blocks), B * nb


@pytest.mark.parametrize("kind", ["pairwise blocks", "a block differs", "lanes", "lane blocks"])
@pytest.mark.parametrize("seed", [3, 11])
def test_doubling_finds_the_exact_tree(kind, seed):
    tree, n = _kernel(kind, seed)
    rep = reveal_order(lambda x: _eval(tree, x), "sum", n=n, kinds=("normal",), draws=1)
    assert rep.verified and _revealed(rep.order) == _clusters(tree)


def test_doubling_takes_about_n_calls_on_pairwise_blocks():
    # blocks of 32 (a random tree, repeated), pairwise above: the block searched, then each doubling certified
    rng = random.Random(5)
    block = _random_tree(list(range(32)), rng)
    tree = _pairwise([_moved(block, 32 * i) for i in range(16)])
    rep = reveal_order(lambda x: _eval(tree, x), "sum", n=512, verify=False)
    assert _revealed(rep.order) == _clusters(tree)
    assert rep.tree_calls < 512 + 200, rep.tree_calls          # without the doubling: about 2 n


def test_numpy_sum_same_tree_in_fewer_calls(monkeypatch):
    rep = reveal_order(np.sum, "sum", n=1024, dtype="fp32", verify=False)
    monkeypatch.setattr(tree_mod, "DOUBLE_WINDOW", 1 << 20)   # no root is that large: the search without doubling
    plain = reveal_order(np.sum, "sum", n=1024, dtype="fp32", verify=False)
    assert plain.order.nodes == rep.order.nodes
    assert rep.tree_calls < 1300 < plain.tree_calls, (rep.tree_calls, plain.tree_calls)   # 1 084 and 2 025 here


def test_numpy_dot_lane_chains_doubled(monkeypatch):
    # OpenBLAS's sdot: a chain per lane over every 32nd product, the lanes joined pairwise at offsets 4, 8, 16,
    # 1, 2 (numpy 2.4.6 here): the leader's lane chain, then each doubling at the offset its answers showed
    rep = reveal_order(np.dot, "dot", n=1024, dtype="fp32", verify=False)
    monkeypatch.setattr(tree_mod, "DOUBLE_WINDOW", 1 << 20)
    plain = reveal_order(np.dot, "dot", n=1024, dtype="fp32", verify=False)
    assert plain.order.nodes == rep.order.nodes
    assert rep.tree_calls <= plain.tree_calls, (rep.tree_calls, plain.tree_calls)
