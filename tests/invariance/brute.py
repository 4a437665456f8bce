"""Brute force for the live invariance checks (tests/invariance/test_live.py, benches/bench_invariance.py): the
watched row's bits at every batch size, grouped into classes."""

from __future__ import annotations

import numpy as np


def brute(op: str, fn, K: int, N: int, ms, draws: int, seed: int = 1) -> dict[int, int]:
    """M -> class index: row 0's bits on ``draws`` random rows (exponents spread 2^-10..2^10) at every M in ms."""
    rng = np.random.default_rng(seed)
    rows = [((rng.standard_normal(K) * np.exp2(rng.integers(-10, 11, K))).astype(np.float32),
             rng.standard_normal((K, N)).astype(np.float32)) for _ in range(draws)]
    fill = np.random.default_rng(seed + 1).standard_normal((max(ms), K)).astype(np.float32)
    seen: dict[bytes, int] = {}
    out = {}
    for M in ms:
        A = fill[:M].copy()
        key = b""
        for x, b in rows:
            A[0] = x
            key += np.asarray(fn(A) if op == "sum" else fn(A, b))[0].tobytes()
        out[M] = seen.setdefault(key, len(seen))
    return out
