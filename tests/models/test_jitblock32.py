"""jitblock32's route (steps 2 and 4-5 of truncating FP32 blocks in 32-bit words) against the float64 route and the
numpy reference: the same bits, the route taken where it should be, and every output it leaves undecided redone.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from numoracle import orders as O
from numoracle.core import jit
from numoracle.models.simulation import simulate

pytest.importorskip("numba")
from numoracle.models import jitblockrun  # noqa: E402  (needs numba)


@pytest.fixture(autouse=True)
def _kernels_at_every_size():
    with jit.forced():
        yield


class _Spy:
    """Counts the calls of jitblockrun's kernels and keeps the last call's arguments."""

    def __init__(self, monkeypatch):
        self.args: dict[str, tuple] = {}
        self.count = {"words_kernel": 0, "run_kernel": 0}
        for name in self.count:
            real = getattr(jitblockrun, name)

            def spy(*args, _real=real, _name=name):
                self.count[_name] += 1
                self.args[_name] = args
                return _real(*args)
            monkeypatch.setattr(jitblockrun, name, spy)


def _boundary_fp16(rng, shape) -> np.ndarray:
    """FP16 values weighted to the block step's edges: subnormals, the top binade, significands just below 2
    (carries), powers of two, +-0, ordinary values."""
    n = int(np.prod(shape))
    kind = rng.integers(0, 6, n)
    x = rng.standard_normal(n) * 4
    x = np.where(kind == 1, rng.integers(1, 1024, n) * 2.0**-24, x)                      # subnormal
    x = np.where(kind == 2, 65504 * rng.uniform(0.5, 1, n), x)                           # top binade
    x = np.where(kind == 3, (2 - rng.integers(0, 3, n) * 2.0**-10) * np.exp2(rng.integers(-3, 4, n)), x)
    x = np.where(kind == 4, np.exp2(rng.integers(-24, 16, n)), x)
    x = np.where(kind == 5, 0.0, x)
    x = np.where(rng.random(n) < 0.5, -x, x)
    return x.astype(np.float16).reshape(shape)


def _same_as_numpy(a, b, order) -> np.ndarray:
    got = simulate("matmul", a, b, order=order)
    with jit.disabled():
        want = simulate("matmul", a, b, order=order)
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
    return got


@pytest.mark.parametrize("preset", [("v100", "fp16"), ("a100", "fp16"), ("a100", "bf16")])
def test_route_taken_and_bits_as_numpy(preset, monkeypatch):
    spy = _Spy(monkeypatch)
    order = O.preset(*preset)
    rng = np.random.default_rng(32)
    dt = np.float16 if preset[1] == "fp16" else ml_dtypes.bfloat16
    for m, K, n in ((37, 301, 261), (3, 7, 5)):                 # tiles ragged at both ends; K not a multiple of n
        a = (rng.standard_normal((m, K)) * 4).astype(dt)
        b = (rng.standard_normal((K, n)) * 4).astype(dt)
        _same_as_numpy(a, b, order)
        if dt == np.float16:                                    # keys stay in float32's range for every fp16
            a, b = _boundary_fp16(rng, (m, K)), _boundary_fp16(rng, (K, n))
            a[: m // 2, 1::2] = a[: m // 2, ::2][:, : K // 2]   # exact cancellations: zero sums, +0 results
            b[1::2, : n // 2] = -b[::2, : n // 2][: K // 2]
            _same_as_numpy(a, b, order)
    assert spy.count["words_kernel"] > 0 and spy.count["run_kernel"] == 0


def test_route_not_taken_outside_it(monkeypatch):
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(33)
    a, b = (rng.standard_normal((5, 64)) * 4).astype(np.float16), (rng.standard_normal((64, 6)) * 4).astype(np.float16)
    _same_as_numpy(a, b, O.BlockFMA(4, 23, out_rounding="rne", acc=O.preset("v100", "fp16").acc))   # RNE output
    _same_as_numpy(a, b, O.preset("v100", "fp16", out="fp16"))                                        # FP16 output
    assert spy.count["words_kernel"] == 0 and spy.count["run_kernel"] > 0


def _fp32_edges(rng, n: int) -> np.ndarray:
    """c values that the words route must leave to the float64 route, among ordinary ones: +-inf, the largest
    finite values, huge values whose sums overflow, subnormals, +-0."""
    fi = np.finfo(np.float32)
    edge = np.array([np.inf, -np.inf, fi.max, -fi.max, fi.max * 0.75, 2.0**127, 2.0**-126, 2.0**-140, 1e-45, 0.0,
                     -0.0, 1.0, -3.5], np.float32)
    c = (rng.standard_normal(n) * 100).astype(np.float32)
    idx = rng.choice(n, n // 2, replace=False)
    c[idx] = edge[rng.integers(0, edge.size, idx.size)]
    return c.astype(np.float64)


def test_undecided_outputs_redone_on_the_float64_route(monkeypatch):
    """The kernel itself, with c of every kind (simulate starts from 0): words_kernel gives run_kernel's bits."""
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(34)
    a = (rng.standard_normal((40, 64)) * 4).astype(np.float16)
    b = (rng.standard_normal((64, 270)) * 4).astype(np.float16)
    a[::3], a[1::7, :30] = 0, 0                                 # blocks of zero products: E = c's exponent only
    order = O.preset("v100", "fp16")
    simulate("matmul", a, b, order=order)
    (a32, b32, kb, kf, i0, i1, j0, j1, tids, cnt, c, out, F, carry, clamp, mode, g, lim) = spy.args["words_kernel"]
    S = np.empty(jitblockrun._TILE)
    Si = np.empty(jitblockrun._TILE, np.int32)
    e32 = np.empty((0, 0), np.float32)
    for short in (False, True):                                 # the whole run, and its first block alone
        t, k = (tids[:1], cnt[:1]) if short else (tids, cnt)
        c = _fp32_edges(rng, c.size)
        got, want = np.empty_like(out), np.empty_like(out)
        jitblockrun.words_kernel(a32, b32, kb, kf, i0, i1, j0, j1, t, k, c, got, F, carry, clamp, mode, g, lim)
        jitblockrun.run_kernel(a32, e32, b32, e32, kb, kf, i0, i1, j0, j1, t, k, c, want, S, Si, F, 0, bool(carry),
                               False, True, clamp, mode, g, lim)
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
        assert np.isinf(want).any() and (np.abs(want) == np.finfo(np.float32).max).any()
        tiny = (want != 0) & (np.abs(want) < 2.0**-126)        # subnormal results: c alone, below 2^-126
        assert tiny.any()
