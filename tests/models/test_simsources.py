"""simulate's input reading (models/engine/sources.py): float32 values where exact, the same statistics and labels."""

import ml_dtypes
import numpy as np
import pytest

from numoracle import orders
from numoracle.core.formats.format import format_of
from numoracle.models.engine import sources as ss
from simref import cut_fields

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
        s32, s64 = ss._stats(v32, f), ss._stats(v64, f)
        assert s32._replace(p=0, q=0) == s64._replace(p=0, q=0)
        assert s32.p <= s64.p == f.precision and s32.q >= s64.q   # (float32 words: the data's precision, below)
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


@pytest.mark.parametrize("cut, p", [(13, 11), (16, 8), (22, 2), (23, 1), (0, 24)])
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_float32_stats_read_the_datas_precision(cut, p, backend):
    """FP32 arrays of TF32 / BF16 values: p is the most significant bits any value has (their products then fit
    FP32), and q follows it; a NaN's payload and an infinity do not count. The numpy scan and the compiled one."""
    from numoracle.core import jit
    if backend == "numba":
        pytest.importorskip("numba", reason="the compiled scan needs numba")
    with jit.backend(backend):
        _check_precision(cut, p)


def _check_precision(cut, p):
    rng = np.random.default_rng(9)
    x = cut_fields(rng.standard_normal(5000) * 2.0 ** rng.integers(-30, 30, 5000), cut)
    st = ss._stats(x, format_of(np.float32))
    assert st.p == p
    assert st.q == int(np.frexp(np.abs(x[x != 0]).min())[1]) - p
    y = x.copy()
    y[7], y[8] = np.inf, np.uint32(0x7FC00001).view(np.float32)     # a NaN with the lowest payload bit set
    assert ss._stats(y, format_of(np.float32)).p == p
    y[9] = np.uint32(0x00000001).view(np.float32)    # the smallest subnormal: one bit, its field's lowest
    assert ss._stats(y, format_of(np.float32)).p == 24  # (read from the field: an upper bound, 24)


def test_products_of_tf32_values_held_in_float32_are_fp32_terms():
    """FP32 inputs holding TF32 values: 22-bit products, exact in float32 (``terms_fp32``); FP32 values do not."""
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal((4, 64)), rng.standard_normal((64, 3))
    src = ss.read_sources("matmul", (cut_fields(a, 13), cut_fields(b, 13)))[0]
    assert src.p == 22 and src.terms_fp32()
    src = ss.read_sources("matmul", (a.astype(np.float32), b.astype(np.float32)))[0]
    assert src.p == 48 and not src.terms_fp32()


_TF32_ORDERS = {"h100/tf32": orders.preset("h100", "tf32"), "a100/tf32": orders.preset("a100", "tf32"),
                "h100/tf32 split-K": orders.TiledSplitK(4, 32, orders.preset("h100", "tf32")),
                "sequential fp32": orders.Sequential(), "pairwise fp32": orders.Pairwise()}


@pytest.mark.parametrize("name", list(_TF32_ORDERS))
@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("cut", [13, 0], ids=["tf32 values", "fp32 values"])
def test_simulate_on_tf32_values_is_the_same_with_the_formats_precision(name, backend, cut, monkeypatch):
    """simulate on FP32 inputs holding TF32 values (float32 terms by the data's precision) gives the bits of the
    same call told only the format's precision (float64 terms), with and without the compiled kernels, on data
    that reaches FP32's subnormal and huge ranges; on FP32 values (24 bits) both are the float64 terms' route."""
    from numoracle.core import jit
    from numoracle.models.engine.simulation import simulate
    if backend == "numba":
        pytest.importorskip("numba", reason="the compiled kernels need numba")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((6, 300)) * 2.0 ** rng.integers(-60, 60, (6, 300))
    b = rng.standard_normal((300, 5)) * 2.0 ** rng.integers(-60, 60, (300, 5))
    a[0, ::3] = -a[0, 1::3]                        # cancellation
    a, b = cut_fields(a, cut), cut_fields(b, cut)
    assert ss.read_sources("matmul", (a, b))[0].p == (22 if cut else 48)
    order = _TF32_ORDERS[name]
    kw = {} if "tf32" in name else {"acc": "fp32"}
    with jit.backend(backend):
        got = simulate("matmul", a, b, order=order, **kw)
        stats = ss._stats
        monkeypatch.setattr(ss, "_stats", lambda v, f: stats(v, f)._replace(p=f.precision))
        assert ss.read_sources("matmul", (a, b))[0].p == 48
        want = simulate("matmul", a, b, order=order, **kw)
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))


def test_stats_labels_are_the_keys_labels():
    """_Stats.labels: the least and greatest label of the nonzero values (floor(log2 |x|) clamped at the format's
    emin), as jitblock's own pass over A reads them."""
    pytest.importorskip("numba", reason="jitblock's pass needs numba")
    from numoracle.models.kernels import block as jitblock
    rng = np.random.default_rng(13)
    for dt in _DTYPES:
        f = format_of(dt)
        for x in (_mixed(dt, rng), np.abs(_mixed(dt, rng))[:3], np.zeros(4, dt)):
            v = x.astype(np.float32)
            lo, hi = jitblock._keys_into(v, *jitblock._with_out(jitblock.key_fields(v, f), np.empty(0, np.float32)))
            st = ss._stats(v, f)
            assert st.labels == ((lo, hi) if lo <= hi else (1, 0))


def test_stats_precision_of_a_narrower_format_held_in_float32():
    """A format of 13 bits' precision held in float32 (every float32 field ends in at least 11 zeros): p is at most
    the format's 13 and at least the values' own bits (24 - the float32 field's trailing zeros), never that less
    the format's own zeros."""
    from numoracle.core.formats.format import Format
    f = Format("e3m12_test", 3, 12, 3)
    rng = np.random.default_rng(14)
    x = cut_fields(rng.uniform(1, 2, 4000), 11)          # 13 significant bits, the last one set somewhere
    assert ss._stats(x, f).p == 13
    assert ss._stats(cut_fields(x, 15), f).p == 9
