"""The report's worst-element order: a partition then a sort of the candidates gives the full sort's order."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from numoracle.testing import judge


def full_sort(j, k):
    return np.lexsort((-j.ratio, np.where(j.ok, 0.0, -1.0)))[:k]  # failing first, then by ratio, then index


def test_order_worst_matches_a_full_sort_with_ties_nan_and_inf():
    rng = np.random.default_rng(0)
    for it in range(2000):
        n = int(rng.integers(1, 60))
        ratio = rng.choice([0.0, -0.0, 0.5, 1.0, 2.0, np.inf, np.nan], n) if it % 2 else rng.random(n)
        j = SimpleNamespace(ok=rng.random(n) < rng.random(), ratio=ratio)
        for k in (0, 1, 3, 10, n, n + 5):
            assert np.array_equal(judge.worst_first(j, k), full_sort(j, k)), (it, k)
