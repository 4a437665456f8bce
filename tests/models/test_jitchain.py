"""simulate's compiled chains (models/kernels/chain.py) against the numpy path: the same bits on the same data.

Every test runs simulate twice, with the kernel and under ``jit.disabled()``, and compares the float64 bit
patterns (NaN payloads and signs of zeros included). ``jitchain.calls.count`` shows the kernel really ran.
The data are boundary-weighted: results near the accumulator's overflow threshold and in its subnormal
range, ties, exact cancellation, +-0, inf and NaN, mixed with plain random values.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from numoracle import orders as O
from numoracle.core import jit
from numoracle.formats import BF16, FP4_E2M1FN, FP8_E4M3FN, FP8_E4M3FNUZ, FP8_E5M2, FP16, FP32, TF32
from numoracle.models.engine.simulation import simulate
from simref import same_with_and_without

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _kernels_at_every_size(monkeypatch):
    """These tests' data are small, and simulate keeps small calls on numpy: use the kernels anyway. The tree
    kernel, which takes whole programs of chains and additions (tests/models/test_jittree.py), is kept out:
    here every chain runs step by step on this kernel."""
    from numoracle.models.kernels import tree as jittree

    monkeypatch.setattr(jittree, "covers", lambda step: False)
    with jit.forced():
        yield
from numoracle.models.kernels import chain as jitchain  # noqa: E402  (needs numba)

MODES = ["rne", "rna", "rtz", "ru", "rd", "rto"]
ACCS = [FP16, BF16, FP32, TF32, FP8_E4M3FN, FP8_E5M2, FP8_E4M3FNUZ, FP4_E2M1FN]
LOW = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8_e4m3fn": ml_dtypes.float8_e4m3fn}


@pytest.fixture(autouse=True)
def _kernels_on(monkeypatch):
    monkeypatch.delenv("NUMORACLE_JIT", raising=False)


THEMES = [[0.2, 0.7, 0.0, 0.0, 0.1, 0.0],      # kind probabilities: plain, tie, big, tiny, zero, special
          [0.1, 0.3, 0.0, 0.5, 0.1, 0.0],      # subnormal results
          [0.3, 0.2, 0.5, 0.0, 0.0, 0.0],      # near overflow
          [0.3, 0.3, 0.15, 0.1, 0.05, 0.1]]    # everything, inf and NaN included


def boundary(rng: np.random.Generator, shape, acc, factors: int, dtype, along: int = 0) -> np.ndarray:
    """Values whose products (``factors`` of them) land near acc's overflow, in its subnormal range, on
    ties (integers of as many bits as the input holds, up to acc's precision + 1, times a power of two;
    with two factors half are powers of two), or anywhere (normal random); +-0, inf, NaN, and neighbours
    that cancel exactly. Each row (``along=0``) or column (1) has one theme, so that results of the
    clean themes stay finite (a single NaN would hide every step after it)."""
    lines, per = shape[along], shape[1 - along]
    out = np.empty((lines, per))
    p_in = ml_dtypes.finfo(dtype).nmant + 1
    bits = min(p_in, acc.precision + 1)
    for r in range(lines):
        big = float(acc.max_finite) ** (1 / factors) * rng.uniform(0.6, 1.0, per)
        tiny = float(acc.min_normal) ** (1 / factors) * rng.uniform(0.05, 1.5, per)
        scale = np.exp2(rng.integers(-3, 3, per))
        tie = rng.integers(1 << (bits - 1), 1 << bits, per) * scale
        if factors == 2:
            tie = np.where(rng.random(per) < 0.5, scale, tie)
        plain = rng.standard_normal(per) * np.exp2(rng.integers(-4, 5, per))
        kind = rng.choice(6, per, p=THEMES[r % len(THEMES)])
        v = np.choose(np.minimum(kind, 4), [plain, tie, big, tiny, np.zeros(per)]) * rng.choice([-1.0, 1.0], per)
        v[kind == 5] = rng.choice([np.inf, -np.inf, np.nan, -0.0], int((kind == 5).sum()))
        v[1::7] = -v[0:-1:7][: v[1::7].size]      # exact cancellation of neighbours
        out[r] = v
    with np.errstate(over="ignore"):              # beyond the input format: inf, as intended
        return (out if along == 0 else out.T).astype(dtype)


def same(op, inputs, **kw) -> int:
    """simulate with the kernels and without; both results' bits equal. Returns how many steps jitchain ran."""
    return same_with_and_without(jitchain, op, inputs, **kw)


def boundary_runs(acc, mode, combos) -> int:
    rng = np.random.default_rng([ACCS.index(acc), MODES.index(mode)])
    low = LOW["fp16" if acc in (FP16, TF32) else "bf16" if acc == BF16 else "fp8_e4m3fn"]
    runs = 0
    for dtype in (low, np.float32):
        a = boundary(rng, (5, 37), acc, 2, dtype)
        b = boundary(rng, (37, 4), acc, 2, dtype, along=1)
        x = boundary(rng, (6, 41), acc, 1, dtype)
        for fma, ftz in combos:
            kw = dict(acc=acc, rounding=mode, fma=fma, ftz=ftz)
            runs += same("matmul", (a, b), **kw) + same("sum", (x,), **kw) + same("dot", (a[0], b[:, 0]), **kw)
    return runs


@pytest.mark.parametrize("acc", ACCS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", MODES)
def test_boundary_data_every_mode(acc, mode):
    assert boundary_runs(acc, mode, [(True, False), (False, True)]) == 12


@pytest.mark.slow
@pytest.mark.parametrize("acc", ACCS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", MODES)
def test_boundary_data_every_mode_fma_ftz_pairs(acc, mode):
    assert boundary_runs(acc, mode, [(True, True), (False, False)]) == 12


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_random_matmul_vector_path(name, mode):
    """Wide rows (the vectorised loop, with rows that leave the normal range now and then), and an
    output width that is not a multiple of the vector length."""
    rng = np.random.default_rng(MODES.index(mode))
    dt = LOW[name]
    a = (rng.standard_normal((9, 300)) * 4).astype(dt)
    b = rng.standard_normal((300, 43)).astype(dt)
    b[:, 5] = 0
    for acc, fma in ((name, True), (name, False), ("fp32", True)):
        assert same("matmul", (a, b), acc=acc, rounding=mode, fma=fma) == 1


@pytest.mark.parametrize("order", [O.Blocked(7, O.Sequential(), O.Pairwise()), O.SplitK(3), O.NumpyPairwise(),
                                   O.Blocked(4, O.Sequential(), O.Sequential(), FP32)], ids=repr)
def test_orders_made_of_chains(order):
    rng = np.random.default_rng(7)
    x = boundary(rng, (3, 200), FP16, 1, np.float16)
    a = boundary(rng, (4, 70), BF16, 2, ml_dtypes.bfloat16)
    b = boundary(rng, (70, 5), BF16, 2, ml_dtypes.bfloat16, along=1)
    for mode in ("rne", "rd", "rto"):
        assert same("sum", (x,), acc="fp16", order=order, rounding=mode) >= 1
        assert same("matmul", (a, b), acc="bf16", order=order, rounding=mode) >= 1


def test_fp32_chains_of_plain_float32_additions():
    """FP32 accumulator, RNE, fp16 inputs: numpy adds in float32; so does the kernel (NaN signs included)."""
    rng = np.random.default_rng(3)
    x = boundary(rng, (8, 500), FP32, 1, np.float16)
    a, b = boundary(rng, (6, 90), FP32, 2, np.float16), boundary(rng, (90, 7), FP32, 2, np.float16, along=1)
    for fma in (True, False):
        assert same("sum", (x,), acc="fp32", fma=fma) == 1
        assert same("matmul", (a, b), acc="fp32", fma=fma) == 1


def test_fp32_chains_of_fused_multiply_adds(monkeypatch):
    """FP32 accumulator, RNE, fp32 inputs, fma=True: IEEE binary32 fma in the kernel (products of 48 bits, one
    rounding of s + a b), against numpy's float64 route: ties, subnormal results, overflow, inf and NaN."""
    rng = np.random.default_rng(11)
    taken = []
    real = jitchain._fma32
    monkeypatch.setattr(jitchain, "_fma32", lambda st, sub: taken.append(real(st, sub)) or taken[-1])
    x = boundary(rng, (8, 500), FP32, 1, np.float32)
    a, b = boundary(rng, (6, 90), FP32, 2, np.float32), boundary(rng, (90, 7), FP32, 2, np.float32, along=1)
    c = (rng.standard_normal((5, 300)) * 2.0**-63).astype(np.float32)      # products in FP32's subnormal range
    d = (rng.standard_normal((300, 4)) * 2.0**-63).astype(np.float32)
    assert same("sum", (x,), acc="fp32") == 1                      # (terms are FP32 numbers: float32 additions)
    taken.clear()
    assert same("matmul", (a, b), acc="fp32") == 1
    assert same("matmul", (c, d), acc="fp32") == 1
    assert same("dot", (a[0], b[:, 0]), acc="fp32") == 1
    assert taken and all(taken)
    taken.clear()
    for kw in (dict(fma=False), dict(rounding="rtz"), dict(ftz=True)):    # not the fma: other routes
        same("matmul", (a, b), acc="fp32", **kw)
    assert not any(taken)


def test_fp16_chains_of_fused_multiply_adds(monkeypatch):
    """FP16 accumulator, RNE, FP16 (or FP8) inputs, fma=True: IEEE binary16 fma on FP16 bits where the CPU has it
    (step 5), against numpy's route: ties, subnormal results, exact cancellation; a step with an overflow goes
    back to the float32 route whole; other modes, ftz, fma=False and non-finite inputs never take it."""
    if not jitchain.jr.cpu_has("avx512fp16"):
        pytest.skip("this CPU has no AVX512-FP16: step 5 is not taken here (steps 1-4 run FP16 chains)")
    rng = np.random.default_rng(12)
    outcomes = {"kept": 0, "sent back": 0}          # chain_schedule16's calls: finished on FP16 bits, or not
    real = jitchain.chain_schedule16

    def spy(*args):
        out, ok = real(*args)
        outcomes["kept" if ok else "sent back"] += 1
        return out, ok

    monkeypatch.setattr(jitchain, "chain_schedule16", spy)
    clean = [0, 1, 2, 4, 5, 6]                                      # rows / columns without inf and NaN (theme 3)
    for dt in (np.float16, ml_dtypes.float8_e4m3fn):
        x = boundary(rng, (8, 300), FP16, 1, dt)[clean]
        a = boundary(rng, (8, 90), FP16, 2, dt)[clean]
        b = boundary(rng, (90, 8), FP16, 2, dt, along=1)[:, clean]
        for order in (O.Sequential(), O.SplitK(3), O.Blocked(16)):
            assert same("sum", (x[:2],), acc="fp16", order=order) >= 1          # themes 0-1: no overflow
            assert same("matmul", (a[:2], b[:, :2]), acc="fp16", order=order) >= 1
            same("sum", (x,), acc="fp16", order=order)
            same("matmul", (a, b), acc="fp16", order=order)
            same("dot", (a[0], b[:, 0]), acc="fp16", order=order)
    assert outcomes["kept"] > 0 and outcomes["sent back"] > 0       # run on FP16 bits, and sent back on overflow
    outcomes.update({"kept": 0, "sent back": 0})
    full = boundary(rng, (8, 60), FP16, 1, np.float16)           # with inf and NaN inputs
    same("sum", (full,), acc="fp16")
    for kw in (dict(rounding="rtz"), dict(ftz=True), dict(fma=False)):
        same("sum", (x,), acc="fp16", **kw)
        same("matmul", (a, b), acc="fp16", **kw)
    same("matmul", (a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)), acc="bf16")
    same("matmul", (a.astype(np.float32), b.astype(np.float32)), acc="fp16")   # FP32 inputs: not FP16 values
    assert outcomes == {"kept": 0, "sent back": 0}


def test_bf16_chains_through_a_float32_fma(monkeypatch):
    """BF16 accumulator, RNE, BF16 inputs, fma=True: fma in float32, then one rounding of its bits (step 6). The
    one case where that double rounding differs, a product on a BF16 midpoint after a tiny partial sum, is
    flagged and redone: crafted dot products of such terms, boundary data and wide random data all match numpy's
    route; other modes, ftz and fma=False do not take it."""
    rng = np.random.default_rng(13)
    taken = []
    real = jitchain._bf16_fma
    monkeypatch.setattr(jitchain, "_bf16_fma", lambda st, sub: taken.append(real(st, sub)) or taken[-1])
    sig = [(x, y) for x in range(128, 256) for y in range(128, 256)
           if (lambda p: p.bit_length() - (p & -p).bit_length() == 8)(x * y)]     # products of 9 bits: midpoints
    pick = [sig[i] for i in rng.integers(0, len(sig), 64)]
    a = np.array([x for x, _ in pick], float).reshape(8, 8) / 128 * np.exp2(rng.integers(-3, 3, (8, 8)))
    b = np.array([y for _, y in pick], float).reshape(8, 8).T / 128 * np.exp2(rng.integers(-3, 3, (8, 8)))
    a[:, 0] = np.exp2(rng.integers(-60, -20, 8))                      # a tiny first partial sum
    a *= rng.choice([-1.0, 1.0], a.shape)
    a, b = a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    first = np.abs(a[:, :1].astype(float) * b[:1].astype(float))          # exact products
    second = np.abs(a[:, 1:2].astype(float) * b[1:2].astype(float))
    frac = np.frexp(second)[0] * 2**9                                      # 9 significant bits: an odd integer
    assert ((frac % 2 == 1) & (first < second * 2.0**-24)).any()           # the case step 6 must redo
    for order in (O.Sequential(), O.SplitK(2)):
        assert same("matmul", (a, b), acc="bf16", order=order) >= 1
    x = boundary(rng, (8, 300), BF16, 1, ml_dtypes.bfloat16)
    c, d = boundary(rng, (6, 90), BF16, 2, ml_dtypes.bfloat16), boundary(rng, (90, 7), BF16, 2,
                                                                         ml_dtypes.bfloat16, along=1)
    wide = (rng.standard_normal((9, 200)) * np.exp2(rng.integers(-20, 20, (9, 200)))).astype(ml_dtypes.bfloat16)
    same("sum", (x,), acc="bf16")
    same("sum", (wide,), acc="bf16")
    same("matmul", (c, d), acc="bf16")
    same("matmul", (wide[:, :90], wide[:, 100:190].T.copy()), acc="bf16")
    assert taken and all(taken)
    taken.clear()
    for kw in (dict(rounding="rtz"), dict(ftz=True), dict(fma=False)):
        same("matmul", (c, d), acc="bf16", **kw)
    same("matmul", (c.astype(np.float32), d.astype(np.float32)), acc="bf16")   # FP32 inputs: not BF16 values
    assert not any(taken)


def test_what_the_kernel_does_not_take_runs_on_numpy():
    """FP64 accumulators, chains over partial results (the outer Sequential of Blocked), and jit disabled."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    assert same("sum", (x,), acc="fp64") == 0
    assert same("sum", (x,), acc="fp16", order=O.Blocked(8, O.Pairwise(), O.Sequential())) == 0
    before = jitchain.calls.count
    with jit.disabled():
        simulate("sum", x, acc="fp16")
    assert jitchain.calls.count == before


def test_batches_cut_into_chunks():
    """More outputs than simulate runs at once: the kernel gets each chunk's units (lo..hi) of the source."""
    rng = np.random.default_rng(11)
    a = (rng.standard_normal((700, 3)) * 300).astype(np.float16)
    b = rng.standard_normal((3, 200)).astype(np.float16)
    assert same("matmul", (a, b), acc="fp16", rounding="rtz") >= 2
    x = (rng.standard_normal((140_000, 3)) * 1e4).astype(np.float16)
    assert same("sum", (x,), acc="bf16", rounding="ru") >= 2


@pytest.mark.parametrize("mode", MODES)
def test_exact_zero_results(mode):
    """Sums that are exactly zero: their sign (IEEE 754 6.3: -0 under DOWN unless both operands are +0; a
    format without -0 gives +0) is the fast path's only rule for zeros."""
    rng = np.random.default_rng(MODES.index(mode))
    v = (rng.integers(1, 64, (4, 24)) * 0.25).astype(np.float16)
    v[:, 1::2] = -v[:, 0::2]
    v[1] = -0.0
    v[2] = 0.0
    v[3, ::3] = -0.0
    for acc in ("fp16", "fp8_e4m3fnuz", "bf16"):
        for order in (O.Sequential(), O.NumpyPairwise()):
            assert same("sum", (v,), acc=acc, order=order, rounding=mode) >= 1
            assert same("sum", (v[:, :5],), acc=acc, order=order, rounding=mode) >= 1   # NumpyPairwise: from -0
            assert same("matmul", (v, v.T.copy()), acc=acc, order=order, rounding=mode) >= 1


def test_the_log_says_which_backend_ran_each_kind_of_step(caplog):
    """logger numoracle.models at DEBUG: one line per simulate call, steps counted by kind and backend."""
    x = np.arange(1, 65, dtype=np.float16).reshape(2, 32)
    with caplog.at_level("DEBUG", logger="numoracle.models"):
        simulate("sum", x, acc="fp16", order=O.Blocked(8, O.Sequential(), O.Pairwise()))
        with jit.backend("numpy"):
            simulate("sum", x, acc="fp16")
    lines = [r.getMessage() for r in caplog.records if r.name == "numoracle.models"]
    assert lines[0].startswith("simulate: ") and "Chain numba x1" in lines[0] and "Add numpy" in lines[0]
    assert "Chain numpy x1" in lines[1] and "numba" not in lines[1]
