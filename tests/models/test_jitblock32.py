"""jitblock32's route (steps 2 and 4-5 of truncating FP32 blocks in 32-bit words) against the float64 route and the
numpy reference: the same bits, the route taken where it should be, and every output it leaves undecided redone.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from numoracle import orders as O
from numoracle.core import jit
from numoracle.models.engine.simulation import simulate
from optional import kernels

kernels()  # numba installed and the kernels on (NUMORACLE_JIT is not 0)
from numoracle.models.kernels import blockrun as jitblockrun  # noqa: E402  (needs numba)


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


_NO_CARRY = O.BlockFMA(4, 23, truncate=True, out_rounding="rtz", carry_bit=False, acc=O.preset("v100", "fp16").acc)


@pytest.mark.parametrize("preset", [("v100", "fp16"), ("a100", "fp16"), ("a100", "bf16"), ("h100", "tf32"),
                                    ("no carry bit", "fp16")])
def test_route_taken_and_bits_as_numpy(preset, monkeypatch):
    spy = _Spy(monkeypatch)
    order = _NO_CARRY if preset[0] == "no carry bit" else O.preset(*preset)
    rng = np.random.default_rng(32)
    dt = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32}[preset[1]]   # tf32: float64 terms
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


def _fp32_edges(rng, n: int, kinds: str) -> np.ndarray:
    """c values at the words route's edges among ordinary ones: "big" (the largest finite values, huge values
    whose sums overflow), "tiny" (subnormals, the smallest normal), "zero" (+-0), "inf" (+-inf). A tile step with
    any output the route leaves undecided is redone whole, so each case mixes only the kinds it is about."""
    fi = np.finfo(np.float32)
    pool = {"big": [fi.max, -fi.max, fi.max * 0.75, 2.0**127], "tiny": [2.0**-126, 2.0**-140, 1e-45],
            "zero": [0.0, -0.0], "inf": [np.inf, -np.inf]}
    edge = np.array([1.0, -3.5] + [v for k in kinds.split(",") for v in pool[k]], np.float32)
    c = (rng.standard_normal(n) * 100).astype(np.float32)
    idx = rng.choice(n, n // 2, replace=False)
    c[idx] = edge[rng.integers(0, edge.size, idx.size)]
    return c.astype(np.float64)


# (inputs, their scale, rows of zero products, c's edge kinds, what the route leaves undecided)
_CASES = {
    "fp16-extremes": (np.float16, 4.0, True, "big,tiny,zero", "s > 126 where a block's products are all 0"),
    "fp16-inf-c": (np.float16, 4.0, False, "big,zero,inf", "an infinite c"),
    "fp32-near-c": (np.float32, 2.0**63, True, "big,tiny,zero", "float64 terms near c's largest values"),
    "fp32-beyond": (np.float32, 2.0**100, False, "big,zero", "float64 terms beyond FP32: s < -126"),
    "fp32-inf-c": (np.float32, 2.0**63, False, "big,zero,inf", "an infinite c against products as large"),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_undecided_outputs_redone_on_the_float64_route(case, monkeypatch):
    """The kernel itself, from c of every kind (simulate starts from 0): words_kernel gives run_kernel's bits, for
    a whole run and for its first block alone."""
    dt, scale, zero_rows, kinds, _ = _CASES[case]
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(34)
    a = (rng.standard_normal((40, 64)) * scale).astype(dt)
    b = (rng.standard_normal((64, 270)) * scale).astype(dt)
    if zero_rows:
        a[::3], a[1::7, :30] = 0, 0                             # blocks of zero products: E = c's exponent only
    order = O.preset("v100", "fp16") if dt == np.float16 else O.preset("h100", "tf32")
    simulate("matmul", a, b, order=order)
    (a_, b_, kb, kf, i0, i1, j0, j1, tids, cnt, c, out, F, carry, clamp, mode, g, lim) = spy.args["words_kernel"]
    assert a_.dtype == (np.float32 if dt == np.float16 else np.float64)   # fp32 inputs: float64 terms
    S = np.empty(jitblockrun._TILE)
    Si = np.empty(jitblockrun._TILE, np.int32)
    e32 = np.empty((0, 0), np.float32)
    for t, k in ((tids, cnt), (tids[:1], cnt[:1])):
        c = _fp32_edges(rng, c.size, kinds)
        got, want = np.empty_like(out), np.empty_like(out)
        jitblockrun.words_kernel(a_, b_, kb, kf, i0, i1, j0, j1, t, k, c, got, F, carry, clamp, mode, g, lim)
        jitblockrun.run_kernel(a_, e32, b_, e32, kb, kf, i0, i1, j0, j1, t, k, c, want, S, Si, F, 0, bool(carry),
                               False, True, clamp, mode, g, lim)
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), case
        assert (np.abs(want) == np.finfo(np.float32).max).any() or np.isinf(want).any()
        if "tiny" in kinds and zero_rows:
            assert ((want != 0) & (np.abs(want) < 2.0**-126)).any()       # subnormal results: c alone


def test_c_scale_below_normal_float32_is_undecided(monkeypatch):
    """s = -127 (float64 terms whose largest product is 2^152 exactly, cancelled by its negative): 2^s, which c is
    scaled by, is no normal float32, so join leaves the outputs to the float64 route, and c = +-2^127 or FP32's
    largest value (trunc(c 2^-127) = +-1) gives the same bits as run_kernel."""
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(35)
    a = rng.standard_normal((33, 16)).astype(np.float32)
    b = rng.standard_normal((16, 260)).astype(np.float32)
    a[:, [0, 8]], b[[0, 8]] = 2.0**76, 2.0**76           # in each block of 8: 2^152 and -2^152, the rest near 1
    b[[1, 9]], a[:, [1, 9]] = -(2.0**76), 2.0**76
    simulate("matmul", a, b, order=O.preset("h100", "tf32"))
    (a_, b_, kb, kf, i0, i1, j0, j1, tids, cnt, c, out, F, carry, clamp, mode, g, lim) = spy.args["words_kernel"]
    fi = np.finfo(np.float32)
    c = rng.choice(np.array([2.0**127, -(2.0**127), fi.max, -fi.max, 1.0, 0.0], np.float32), c.size).astype(np.float64)
    got, want = np.empty_like(out), np.empty_like(out)
    S, Si, e32 = np.empty(jitblockrun._TILE), np.empty(jitblockrun._TILE, np.int32), np.empty((0, 0), np.float32)
    jitblockrun.words_kernel(a_, b_, kb, kf, i0, i1, j0, j1, tids[:1], cnt[:1], c, got, F, carry, clamp, mode, g, lim)
    jitblockrun.run_kernel(a_, e32, b_, e32, kb, kf, i0, i1, j0, j1, tids[:1], cnt[:1], c, want, S, Si, F, 0,
                           bool(carry), False, True, clamp, mode, g, lim)
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
    assert (np.abs(want) == 2.0**127).any()              # c's own +-1 after the scaling: the case is exercised


@pytest.mark.parametrize("terms", [np.float32, np.float64], ids=["float32 keys", "float64 keys"])
@pytest.mark.parametrize("carry", [0, 1])
def test_scales_give_the_float64_routes_shift(terms, carry):
    """jitblock32.scales against jitblock.block_scales (keyed) on every pairing of key maxima (none, tiny, ordinary,
    with and without a carry, huge) and c (+-0, subnormal, the smallest normal, ordinary, FP32's largest): the
    same shift s, and scw = 2^s (float32: clamped at 2^127)."""
    from numoracle.models.kernels import block as jitblock
    from numoracle.models.kernels import block32 as jitblock32
    big = 200 if terms == np.float64 else 30                 # key products: exponent 2 raw + carry, normal
    raws = [-big, -70 if terms == np.float64 else -60, -3, 0, 5, big]
    keys = [0.0] + [m * 2.0 ** (2 * r) for r in raws for m in (1.0, 2.5)]
    cs = [0.0, -0.0, 1e-45, -3e-40, 2.0**-126, 1.5, -300.0, 2.0**100, float(np.finfo(np.float32).max)]
    kmax = np.array([k for k in keys for _ in cs], terms)
    cur = np.array(cs * len(keys), np.float32)
    F = 23
    sh, scw = np.empty(kmax.size, np.uint32), np.empty(kmax.size, terms)
    jitblock32.scales(kmax, cur, sh, scw, np.uint32(F), np.uint32(carry))
    c64 = cur.astype(np.float64)
    scale_b, inv_b, scw64 = np.empty(kmax.size, np.int64), np.empty(kmax.size, np.int64), np.empty(kmax.size, terms)
    clamp = 2.0**127 if terms == np.float32 else np.inf
    jitblock.block_scales(kmax, kmax, c64.view(np.int64), 0, scale_b, inv_b, scw64, clamp, F, 0, carry, False, True)
    want = np.frexp(scale_b.view(np.float64))[1] - 1
    assert np.array_equal(sh.view(np.int32), want), np.flatnonzero(sh.view(np.int32) != want)[:5]
    assert np.array_equal(scw, scw64)
