"""first_true: the ways-ary search finds the same first key as plain bisection, over 64-bit spans too."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.chains.pieces import first_true, midpoint


def _bisect(lo: np.ndarray, hi: np.ndarray, pred) -> tuple[np.ndarray, np.ndarray]:
    found = pred(hi, np.arange(hi.size))
    left, right = lo.copy(), hi.copy()
    act = np.flatnonzero(found & (left < right))
    while act.size:
        mid = midpoint(left[act], right[act])
        p = pred(mid, act)
        right[act] = np.where(p, mid, right[act])
        left[act] = np.where(p, left[act], mid + 1)
        act = act[left[act] < right[act]]
    return left, found


@pytest.mark.parametrize("ways", [2, 3, 16, 64])
def test_first_true_equals_bisection(ways):
    rng = np.random.default_rng(ways)
    i64 = np.iinfo(np.int64)
    for scale in (10, 1 << 20, 1 << 40, None):  # None: spans up to the whole int64 range
        n = 300
        if scale is None:
            a = rng.integers(i64.min, i64.max, n, dtype=np.int64, endpoint=True)
            b = rng.integers(i64.min, i64.max, n, dtype=np.int64, endpoint=True)
        else:
            a = rng.integers(-scale, scale, n, dtype=np.int64)
            b = a + rng.integers(0, scale, n, dtype=np.int64)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        lo[:3], hi[:3] = i64.min, i64.max
        # thresholds inside, at the ends and outside each interval (never found)
        t = np.where(rng.random(n) < 0.1, hi + (hi < i64.max), lo + ((hi - lo).astype(np.uint64)
                     * rng.random(n)).astype(np.uint64).astype(np.int64))
        t[3], t[4] = lo[3], hi[4]
        calls = []

        def pred(x, idx, t=t, calls=calls):
            calls.append(x.size)
            return x >= t[idx]

        got = first_true(lo, hi, pred, ways=ways)
        want = _bisect(lo, hi, lambda x, idx, t=t: x >= t[idx])
        assert np.array_equal(got[1], want[1])
        assert np.array_equal(got[0][got[1]], want[0][want[1]])
        assert np.all(got[0][got[1]] == np.maximum(t, lo)[got[1]])
        if ways >= 16:  # log_16(2^64) = 16 rounds at most, plus the first call
            assert len(calls) <= 17
