"""models/kernels/sources.py: simulate's input scan in one compiled pass, the same words as simsources._scan."""

import numpy as np
import pytest

from numoracle.models.engine import sources as ss
from simref import cut_fields

pytest.importorskip("numba", reason="the compiled scan needs numba")
from numoracle.models.kernels import sources as jitsources  # noqa: E402  (needs numba)


def test_scan_kernel_is_the_numpy_scan():
    """models/kernels/sources.py's one-pass scan against simsources._scan: the same words on values of every kind
    (zeros, subnormals, infinities, NaNs with payloads, none finite, empty), float32 and float64."""
    rng = np.random.default_rng(12)
    for dt in (np.float32, np.float64):
        x = (rng.standard_normal(70001) * 2.0 ** rng.integers(-140, 120, 70001)).astype(dt)
        x[::11] = 0
        nan = np.array([0x7FC00001 if dt == np.float32 else 0x7FF8000000000001], np.uint64).astype(
            np.uint32 if dt == np.float32 else np.uint64).view(dt)[0]
        cases = [x, np.abs(x), x[:1], np.zeros(9, dt), np.array([], dt), np.full(5, np.inf, dt),
                 np.where(np.arange(x.size) % 7 == 0, np.inf, x), np.where(np.arange(x.size) % 5 == 0, nan, x),
                 np.full(33, nan, dt), cut_fields(x, 13).astype(dt)]
        for v in cases:
            for fields in (0, (1 << 23) - 1):
                assert jitsources.run(v, fields)[::2] == ss._scan(v, fields)[::2]   # top, OR
                kt, kl, _, kf = jitsources.run(v, fields)
                nt, nl, _, nf = ss._scan(v, fields)
                inf = 0x7F800000 if dt == np.float32 else 0x7FF0000000000000
                assert kf == nf and (kl == nl or min(kl, nl) >= inf)  # (none finite and nonzero: any word above)


def test_covers_float32_and_float64_only():
    assert jitsources.covers(np.dtype(np.float32)) and jitsources.covers(np.dtype(np.float64))
    assert not jitsources.covers(np.dtype(np.float16))
