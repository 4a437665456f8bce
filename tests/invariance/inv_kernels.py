"""Kernels with known batch behaviour, written through simulate, and a brute-force oracle of their classes."""

from __future__ import annotations

import numpy as np

from numoracle import orders as O
from numoracle.models.engine.simulation import simulate


def _mm(A, B, order):
    return simulate("matmul", A, B, order=order).astype(np.float32)


def invariant(A, B):
    """One tree for every M: pairwise over K."""
    return _mm(A, B, O.Pairwise())


def split_k(A, B):
    """Split-K chosen from M: 4 splits below M = 64, none from 64 on."""
    return _mm(A, B, O.SplitK(4) if A.shape[0] < 64 else O.Sequential())


def tile_from_mn(A, B):
    """A K tile chosen from M*N: blocks of 16 while M*N <= 100, of 32 above."""
    return _mm(A, B, O.Blocked(16 if A.shape[0] * B.shape[1] <= 100 else 32))


def edge_tile(A, B):
    """A microkernel of 8-row tiles: rows of the last partial tile (M % 8 of them) are summed sequentially, the full
    tiles pairwise."""
    M = A.shape[0]
    full = M - M % 8
    out = np.empty((M, B.shape[1]), np.float32)
    if full:
        out[:full] = _mm(A[:full], B, O.Pairwise())
    if full < M:
        out[full:] = _mm(A[full:], B, O.Sequential())
    return out


def pow2_k(A, B):
    """Batch invariant except at power-of-two K, where M >= 8 splits K in two."""
    M, K = A.shape
    return _mm(A, B, O.SplitK(2) if K & (K - 1) == 0 and M >= 8 else O.Pairwise())


def nondeterministic():
    """A kernel that picks one of two orders at random on every call (atomics-like), seeded."""
    rng = np.random.default_rng(5)

    def fn(A, B):
        return _mm(A, B, O.SplitK(4, permutation=tuple(rng.permutation(4))))
    return fn


def brute_classes(fn, M_values, K, N, row=0, draws=4, seed=1):
    """The watched row's bits at each M on ``draws`` random inputs, grouped: M -> class index (first seen first)."""
    rng = np.random.default_rng(seed)
    rows = [(rng.standard_normal(K) * np.exp2(rng.integers(-10, 11, K)), rng.standard_normal((K, N)))
            for _ in range(draws)]
    rows = [(x.astype(np.float32), b.astype(np.float32)) for x, b in rows]
    seen: dict[bytes, int] = {}
    out = {}
    for M in M_values:
        A = np.ones((M, K), np.float32)
        key = b""
        for x, b in rows:
            A[row] = x
            key += np.asarray(fn(A, b))[row].tobytes()
        out[M] = seen.setdefault(key, len(seen))
    return out


def brute_thresholds(classes: dict) -> list[tuple[int, int]]:
    ms = sorted(classes)
    return [(a, b) for a, b in zip(ms, ms[1:]) if classes[a] != classes[b]]
