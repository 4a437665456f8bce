"""The compiled table lookup (core/kernels/lookup.py) against numpy's (core/inputs._lookup on the numpy path): the same
values, bit for bit, for every code of 8- and 16-bit formats, float32 and float64 tables; and simulate reads its
inputs with it where the call takes kernels."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from numoracle.core import inputs, jit
from numoracle.core.formats.format import format_of
from optional import kernels

kernels()  # numba installed and the kernels on (NUMORACLE_JIT is not 0)
from numoracle.core.kernels import lookup as jitlookup  # noqa: E402  (needs numba)


@pytest.mark.parametrize("dt", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu,
                                ml_dtypes.float4_e2m1fn, np.float16, ml_dtypes.bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_every_code_as_numpy(dt):
    f = format_of(dt)
    n = 1 << f.bits
    word = np.uint8 if f.bits <= 8 else np.uint16
    rng = np.random.default_rng(3)
    full = np.concatenate([np.arange(n), rng.integers(0, n, 5000)]).astype(word)     # every code, and more
    wide = np.zeros((full.size, 2), word)
    wide[:, 1] = full
    codes = wide[:, 1]                          # (a strided view)
    for table in (inputs.value_table(f), inputs.value_table(f).astype(np.float32)):
        before = jitlookup.calls.count
        with jit.forced():
            got = inputs._lookup(table, codes)
        assert jitlookup.calls.count == before + 1, "the kernel ran"
        with jit.disabled():
            want = inputs._lookup(table, codes)
        assert got.shape == want.shape == codes.shape and got.dtype == want.dtype
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (dt, table.dtype)


def test_simulate_reads_its_inputs_with_the_kernel_when_the_call_takes_kernels():
    from numoracle.models.engine.simulation import simulate

    rng = np.random.default_rng(4)
    a = rng.standard_normal((8, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((64, 8)).astype(ml_dtypes.float8_e4m3fn)
    before = jitlookup.calls.count
    with jit.forced():
        got = simulate("matmul", a, b)
    assert jitlookup.calls.count == before + 2
    before = jitlookup.calls.count
    want = simulate("matmul", a, b)             # small: the numpy path throughout
    assert jitlookup.calls.count == before
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_16_bit_floats_widened_by_the_lookup_as_by_their_cast(dt):
    """exact_float32 of FP16 / BF16 arrays: the lookup (kernels on) gives the dtype's own cast's values (kernels
    off) for every code; NaN as NaN."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt).reshape(256, 256)[:, ::-1]   # strided
    before = jitlookup.calls.count
    with jit.forced():
        got, f = inputs.exact_float32(x, "x")
    assert jitlookup.calls.count == before + 1, "the kernel ran"
    with jit.disabled():
        want, f2 = inputs.exact_float32(x, "x")
    assert jitlookup.calls.count == before + 1 and f == f2 and got.dtype == want.dtype == np.float32
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan) and nan.sum() > 0
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_16_bit_widening_is_the_value_table(dt):
    """jitlookup.widen16 computes the float32 value table's entry of every FP16 / BF16 code, bit for bit: the
    value, and the table's one NaN for every NaN code (signalling, quiet, either sign, any payload)."""
    f = format_of(dt)
    codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    table = inputs._table32(f)
    got = jitlookup.widen16(codes.reshape(256, 256)[:, ::-1], f.name == "bf16")     # strided, 2-D
    assert got.shape == (256, 256) and got.dtype == np.float32
    assert np.array_equal(got[:, ::-1].reshape(-1).view(np.uint32), table.view(np.uint32))
    assert jitlookup.widen16(codes[:0], False).shape == (0,)
