"""Trees written out by hand from the orders' docstrings (independent of reveal): for the TreeOrder tests."""

from __future__ import annotations

from numoracle.orders import TreeOrder


class _B:
    def __init__(self, n: int):
        self.n, self.nodes = n, []

    def add(self, a: int, b: int) -> int:
        self.nodes.append((a, b))
        return self.n + len(self.nodes) - 1

    def round(self, a: int) -> int:
        self.nodes.append((a,))
        return self.n + len(self.nodes) - 1

    def chain(self, refs: list[int]) -> int:
        s = refs[0]
        for r in refs[1:]:
            s = self.add(s, r)
        return s


def sequential_tree(n: int, **kw) -> TreeOrder:
    b = _B(n)
    b.chain(list(range(n)))
    return TreeOrder(n, tuple(b.nodes), **kw)


def pairwise_tree(n: int, **kw) -> TreeOrder:
    b = _B(n)

    def pw(lo: int, hi: int) -> int:
        if hi - lo == 1:
            return lo
        mid = lo + (hi - lo + 1) // 2
        return b.add(pw(lo, mid), pw(mid, hi))

    pw(0, n)
    return TreeOrder(n, tuple(b.nodes), **kw)


def numpy_tree(n: int, **kw) -> TreeOrder:
    """numpy's pairwise_sum (NumpyPairwise's docstring), without its +0 / -0 starts (signed zeros aside)."""
    b = _B(n)

    def pw(lo: int, m: int) -> int:
        if m < 8:   # r = -0.0; r = fl(r + t_i): the first term rounded alone
            return b.chain([b.round(lo)] + list(range(lo + 1, lo + m)))
        if m <= 128:   # r_j = fl(t_j), then r_j = fl(r_j + t_{8i+j})
            r = [b.chain([b.round(lo + j)] + [lo + j + 8 * i for i in range(1, (m - m % 8) // 8)]) for j in range(8)]
            res = b.add(b.add(b.add(r[0], r[1]), b.add(r[2], r[3])), b.add(b.add(r[4], r[5]), b.add(r[6], r[7])))
            return b.chain([res] + list(range(lo + m - m % 8, lo + m)))
        n2 = m // 2
        n2 -= n2 % 8
        return b.add(pw(lo, n2), pw(lo + n2, m - n2))

    pw(0, n)
    return TreeOrder(n, tuple(b.nodes), **kw)


def sequential_from_zero(n: int, **kw) -> TreeOrder:
    """Sequential(): s = +0; s = fl(s + t_k): the first term is rounded alone ({0}), then the chain."""
    b = _B(n)
    b.nodes.append((0,))
    b.chain([n] + list(range(1, n)))
    return TreeOrder(n, tuple(b.nodes), **kw)
