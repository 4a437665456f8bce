"""simulate's input reading (models/simsources.py): float32 values where exact, the same statistics and labels."""

import ml_dtypes
import numpy as np
import pytest

from numoracle.core.formats import format_of
from numoracle.models import simsources as ss

_DTYPES = (np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.float32)


def _mixed(dt, rng, n=4096):
    """Values of dt over its whole range: normal, subnormal and zero, both signs."""
    f = format_of(dt)
    e = rng.uniform(np.log2(float(f.min_subnormal)) - 1, np.log2(float(f.max_finite)), n)
    x = (np.exp2(e) * rng.choice([-1.0, 1.0], n)).astype(dt)
    x[::97] = 0
    return x


@pytest.mark.parametrize("dt", _DTYPES, ids=lambda d: np.dtype(d).name)
def test_float32_reading_gives_float64s_stats_and_labels(dt):
    rng = np.random.default_rng(7)
    f = format_of(dt)
    for x in (_mixed(dt, rng), _mixed(dt, rng)[:1], np.zeros(5, dt), np.abs(_mixed(dt, rng))):
        v64, v32 = x.astype(np.float64), x.astype(np.float32)
        assert ss._stats(v32, f) == ss._stats(v64, f)
        assert np.array_equal(ss._labels(v32, f), ss._labels(v64, f))


def test_read_sources_keeps_float32_only_for_finite_inputs_that_fit():
    rng = np.random.default_rng(8)
    a, b = _mixed(np.float16, rng, 64).reshape(8, 8), _mixed(ml_dtypes.bfloat16, rng, 64).reshape(8, 8)
    src = ss.read_sources("matmul", (a, b))[0]
    assert src._a.held.dtype == np.float32 and src._b.held.dtype == np.float32
    assert np.array_equal(src.at, a.T.astype(np.float64)) and src.at.dtype == np.float64
    assert src.a32 is src._a.held and np.array_equal(src.a, a.astype(np.float64))   # the kernels': A as given
    assert src.at32.flags.c_contiguous and np.array_equal(src.at32, a.T.astype(np.float32))   # the numpy steps'
    a[3, 3] = np.nan                             # NaN: read as float64 (its payload as exact_float64 reads it)
    src = ss.read_sources("matmul", (a, b))[0]
    assert src._a.held.dtype == np.float64 and not src.finite
    x = rng.standard_normal((3, 9))                # float64 inputs stay float64
    assert ss.read_sources("sum", (x,))[0]._x.held.dtype == np.float64
