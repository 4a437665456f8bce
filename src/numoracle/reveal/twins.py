"""Repeated subtrees confirmed instead of searched: a group whose leaves are a translate of a revealed subtree's.

Kernels repeat their structure (numpy's blocks of 128 terms in 8 lanes, the lanes of a vectorised loop, the
halves of a pairwise tree). When a group of FPRev's recursion has the leaf set of a subtree already revealed,
shifted (the same sorted offsets), the shifted shape is a hypothesis, checked with one masking probe per internal
node: a leaf of its left child against a leaf of its right child must meet in a subtree of exactly the node's
size. That certifies the hypothesis (bottom-up, each node's two children are subtrees of the kernel's tree, so a
subtree holding a leaf of each and of their combined size is their union; a binary hypothesis then leaves the
kernel no other tree over those leaves). A group of n leaves costs n - 1 probes instead of about (n/2) log2 n;
a hypothesis that fails any probe (or has a fused node) is searched as usual.
"""

from __future__ import annotations

from typing import Any

__all__ = ["twin_key", "shifted", "translated", "certificate"]

MIN_LEAVES = 4        # smaller groups cost no more to search than to confirm


def twin_key(G: list[int]) -> tuple | None:
    """The leaf set's sorted offsets from its first leaf (groups with equal keys are translates), or None."""
    if len(G) < MIN_LEAVES:
        return None
    s = sorted(G)
    return tuple(g - s[0] for g in s)


def shifted(tree: Any, src: list[int], dst: list[int]) -> Any:
    """The nested tree over leaves src with every leaf replaced by its counterpart in dst (sorted order)."""
    return _map_leaves(tree, dict(zip(sorted(src), sorted(dst))).__getitem__)


def translated(tree: Any, d: int) -> Any:
    """The nested tree with every leaf moved by d: :func:`shifted` between two leaf sets of equal :func:`twin_key`
    (a translate: the sorted leaves pair off at one offset)."""
    try:
        return _moved(tree, d)
    except RecursionError:                        # a deep chain: the explicit stack
        return _map_leaves(tree, lambda t: t + d)


def _moved(t: Any, d: int) -> Any:
    if type(t) is not tuple:        # (leaves moved in the parent: one call per node, not per ref)
        return t + d
    if len(t) == 2:
        a, b = t
        return (a + d if type(a) is not tuple else _moved(a, d), b + d if type(b) is not tuple else _moved(b, d))
    return tuple([c + d if type(c) is not tuple else _moved(c, d) for c in t])


def _map_leaves(tree: Any, f: Any) -> Any:
    """The nested tree with every leaf t replaced by f(t), walked with an explicit stack (any depth)."""
    stack: list[tuple[Any, bool]] = [(tree, False)]
    done: list[Any] = []
    while stack:
        t, expanded = stack.pop()
        if not isinstance(t, tuple):
            done.append(f(t))
        elif expanded:
            k = len(t)
            node = tuple(done[len(done) - k:])
            del done[len(done) - k:]
            done.append(node)
        else:
            stack.append((t, True))
            stack.extend((c, False) for c in reversed(t))
    return done[0]


def certificate(tree: Any) -> list[tuple[int, int, int]] | None:
    """[(x, y, size)]: per internal node, a leaf of its left child, one of its right child, and its leaf count;
    None where a node has more (or fewer) than two children (only binary hypotheses are certified)."""
    out: list[tuple[int, int, int]] = []
    try:
        return out if _cert(tree, out)[1] else None
    except RecursionError:                        # a deep chain: the explicit stack
        out = []
    stack: list[tuple[Any, bool]] = [(tree, False)]
    info: list[tuple[int, int]] = []     # (first leaf, leaf count) of finished subtrees
    while stack:
        t, expanded = stack.pop()
        if not isinstance(t, tuple):
            info.append((t, 1))
        elif len(t) != 2:
            return None
        elif expanded:
            (x, nx), (y, ny) = info[-2], info[-1]
            del info[-2:]
            out.append((x, y, nx + ny))
            info.append((x, nx + ny))
        else:
            stack.append((t, True))
            stack.extend((c, False) for c in reversed(t))
    return out


def _cert(t: Any, out: list) -> tuple[int, int]:
    """(first leaf, leaf count) of t, its nodes' certificate entries appended to out in post-order; count 0 where
    some node is not binary (the caller answers None). (Leaf children read here: one call per node.)"""
    if type(t) is not tuple:
        return t, 1
    if len(t) != 2:
        return t, 0
    a, b = t
    x, nx = (a, 1) if type(a) is not tuple else _cert(a, out)
    if not nx:
        return x, 0
    y, ny = (b, 1) if type(b) is not tuple else _cert(b, out)
    if not ny:
        return x, 0
    out.append((x, y, nx + ny))
    return x, nx + ny
