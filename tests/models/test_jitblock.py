"""The compiled block FMA (models/kernels/block.py) against its numpy reference (accumulate.block_fma): same bits.

Every case runs simulate twice on the same data, with the kernel and under ``jit.disabled()``, and checks
that the kernel did run (its call counter moved) or, for steps it does not cover, that it did not.
"""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle.core import jit
from numoracle.core.formats.format import Format
from numoracle.formats import BF16, FP16, FP32
from numoracle.models.engine.simulation import simulate
from optional import kernels

kernels()  # numba installed and the kernels on (NUMORACLE_JIT is not 0)


@pytest.fixture(autouse=True)
def _kernels_at_every_size():
    """These tests' data are small, and simulate keeps small calls on numpy: use the kernels anyway."""
    with jit.forced():
        yield
from numoracle.models.kernels import block as jitblock  # noqa: E402  (needs numba only to run, not to import)

_DT = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32, "fp8": ml_dtypes.float8_e4m3fn}

# every preset built on BlockFMA: (system, inputs, out)
_PRESETS = [(p.gpu, p.inputs, "fp32") for p in O.GPU_PRESETS] + [
    ("h200", "fp8", "fp32"), ("v100", "fp16", "fp16"), ("a100", "fp16", "fp16"),
    ("h100", "fp16", "fp16"), ("b200", "fp8", "fp16")]


def _values(rng, dtype, n: int, special: bool) -> np.ndarray:
    """n values of dtype, boundary-weighted: subnormals, the largest exponents, significands just below 2
    (products that carry into the next binade), powers of two, +-0, ordinary values; inf/NaN if asked."""
    fi = ml_dtypes.finfo(dtype)
    m, lo, hi = int(fi.nmant), int(fi.minexp), int(fi.maxexp) - 1
    kind = rng.integers(0, 7, n)
    sig = rng.uniform(1, 2, n)
    e = rng.integers(lo, hi + 1, n)
    x = np.where(kind == 0, rng.standard_normal(n), 0.0)
    x = np.where(kind == 1, sig * np.exp2(e), x)                                           # anywhere in range
    x = np.where(kind == 2, rng.integers(1, 2**m, n) * float(fi.smallest_subnormal), x)   # subnormal
    x = np.where(kind == 3, float(fi.max) * rng.uniform(0.5, 1, n), x)                     # top binade
    x = np.where(kind == 4, (2 - rng.integers(0, 3, n) * 2.0**-m) * np.exp2(rng.integers(-3, 4, n)), x)
    x = np.where(kind == 5, np.exp2(rng.integers(lo, hi + 1, n)), x)                       # powers of two
    x = np.where(kind == 6, np.where(rng.random(n) < 0.5, 0.0, -0.0), x)                  # +-0
    x = np.where(rng.random(n) < 0.5, -x, x)
    v = np.clip(x, -float(fi.max), float(fi.max)).astype(dtype)
    if special:
        idx = rng.choice(n, max(1, n // 40), replace=False)
        v[idx] = np.array([np.inf, -np.inf, np.nan] if fi.max < np.inf and _has_inf(dtype) else [np.nan],
                          np.float32)[rng.integers(0, 3 if _has_inf(dtype) else 1, idx.size)].astype(dtype)
    return v


def _has_inf(dtype) -> bool:
    return bool(np.isinf(np.array(np.inf, np.float32).astype(dtype)))


def _inputs(rng, dtype, m: int, K: int, n: int, boundary: bool, special: bool = False):
    if boundary:
        a = _values(rng, dtype, m * K, special).reshape(m, K)
        b = _values(rng, dtype, K * n, False).reshape(K, n)
        a[: m // 2, 1::2] = a[: m // 2, ::2][:, : K // 2]        # exact cancellation in the first rows:
        b[1::2, : n // 2] = -b[::2, : n // 2][: K // 2]          # a_k b_k + a_k (-b_k) = 0 pairwise
    else:
        a = (rng.standard_normal((m, K)) * 4).astype(dtype)
        b = (rng.standard_normal((K, n)) * 4).astype(dtype)
    return a, b


def _same(op, ins, covered: bool = True, **kw) -> None:
    before = jitblock.calls.count
    got = simulate(op, *ins, **kw)
    assert (jitblock.calls.count > before) == covered, "the kernel ran" if not covered else "the kernel did not run"
    with jit.disabled():
        want = simulate(op, *ins, **kw)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok].view(np.uint64), want[ok].view(np.uint64)), (op, kw)


@pytest.mark.parametrize("system,inputs,out", _PRESETS)
def test_presets_match_numpy(system, inputs, out):
    order = O.preset(system, inputs, out=out)
    rng = np.random.default_rng(zlib.crc32(f"{system}/{inputs}/{out}".encode()))   # (str hash() varies by process)
    dts = [_DT[inputs]] + ([ml_dtypes.float8_e5m2] if inputs == "fp8" else [])
    for dt in dts:
        for boundary in (True, False):
            a, b = _inputs(rng, dt, 7, 301, 9, boundary)
            _same("matmul", (a, b), order=order)
            _same("dot", (a[0], b[:, 0]), order=order)
    if system == "h100":
        _same("sum", (_values(rng, _DT[inputs], 5 * 200, False).reshape(5, 200),), order=order)


@pytest.mark.parametrize("mode", ["rne", "rna", "rtz", "ru", "rd", "rto"])
@pytest.mark.parametrize("truncate,carry", [(True, True), (False, True), (False, False)])
def test_modes_sticky_carry(mode, truncate, carry):
    rng = np.random.default_rng(17)
    for acc, frac, out_frac in ((FP32, 23, 12), (FP16, 12, None), (BF16, 16, 7)):
        order = O.BlockFMA(8, frac, truncate=truncate, out_rounding=mode, out_frac_bits=out_frac, carry_bit=carry,
                           acc=acc)
        a, b = _inputs(rng, np.float16, 6, 90, 5, True)
        for ftz in (False, True):
            _same("matmul", (a, b), order=order, ftz=ftz)


def test_inf_nan_inputs():
    rng = np.random.default_rng(5)
    for dt, order in ((np.float16, O.preset("h100", "fp16")), (ml_dtypes.float8_e5m2, O.preset("h100", "fp8")),
                      (ml_dtypes.float8_e4m3fn, O.preset("deepseek", "fp8")), (np.float16, O.preset("v100", "fp16"))):
        a, b = _inputs(rng, dt, 8, 200, 6, True, special=True)
        _same("matmul", (a, b), order=order)
        _same("sum", (a,), order=order)


def test_overflow_and_tiny_outputs():
    # fp16 accumulators: sums of top-binade products overflow (the engine's rule, then K&M's inf), and
    # products of subnormals land below min_normal (the kernel's integer rounding), in every mode
    big = np.full((2, 64), 60000, np.float16)
    tiny = np.full((2, 64), 2.0**-20, np.float16)
    for mode in ("rne", "rna", "rtz", "ru", "rd", "rto"):
        order = O.BlockFMA(4, 12, out_rounding=mode, acc=FP16)
        _same("matmul", (big, big.T), order=order)
        _same("matmul", (-big, big.T.copy()), order=order)
        for ftz in (False, True):
            _same("matmul", (tiny, np.full((64, 3), 3 * 2.0**-9, np.float16)), order=order, ftz=ftz)
        tie = np.array([5 * 2.0**-13, -5 * 2.0**-13, 0, 0], np.float16)       # 5 * 2^-25: half a subnormal
        _same("matmul", (tie[None, :], np.diag(np.full(4, 2.0**-12)).astype(np.float16)), order=order)


def test_accumulator_without_negative_zero():
    # e5m2fnuz has no -0: a negative result that rounds to zero is +0
    order = O.BlockFMA(4, 8, out_rounding="rtz", acc=no.formats.format_of(ml_dtypes.float8_e5m2fnuz))
    a = np.array([[-2.0**-10, 0, 0, 0], [-2.0**-3, 2.0**-9, 0, 0]], np.float16)
    _same("matmul", (a, np.diag(np.full(4, 2.0**-10)).astype(np.float16)), order=order)


def test_c_label_clamped_at_fp32_registers():
    # block 1 leaves c = 2^-137, an FP32 subnormal: its label is -126 (an FP32 register's), so block 2's
    # products 2^-152 lie below the window 2^(-126 - 24) and truncate away (with c's own exponent they would not)
    a = np.array([2.0**-70] * 8 + [2.0**-76] * 8, ml_dtypes.bfloat16)
    _same("dot", (a, a), order=O.preset("a100", "bf16"))
    assert float(simulate("dot", a, a, order=O.preset("a100", "bf16"))) == 2.0**-137


def test_uncovered_steps_stay_on_numpy():
    # an accumulator whose exponent range reaches 2^-1010: its scales could leave float64's normal range,
    # so the kernel declines the step (decided from the formats, before any data is touched)
    low = Format("low_e10m10", 10, 10, 1001)
    order = O.BlockFMA(8, 13, acc=low)
    a, b = _inputs(np.random.default_rng(2), np.float16, 4, 40, 3, False)
    _same("matmul", (a, b), covered=False, order=order)


def test_disabled_and_env(monkeypatch):
    a, b = _inputs(np.random.default_rng(3), np.float16, 3, 64, 3, True)
    before = jitblock.calls.count
    with jit.disabled():
        simulate("matmul", a, b, order=O.preset("h100", "fp16"))
    monkeypatch.setenv("NUMORACLE_JIT", "0")
    simulate("matmul", a, b, order=O.preset("h100", "fp16"))
    assert jitblock.calls.count == before


# ---- runs of chained blocks in one call (models/kernels/blockrun.py) -------------------------------------------------

def _runs(order, K: int, src_ins):
    """The runs of chained block steps in simulate's program for (order, K): lengths of each run."""
    from numoracle.models.engine import program
    from numoracle.models.engine import simulation as sim
    from numoracle.models.engine.steps import BlockRun
    src, _, K_, _, _ = sim.read_sources("matmul", src_ins)
    prog = program.prepare(order, K_, order.acc, no.Rounding.of("rne"), True, False, src)
    return [len(st.steps) for st in prog.steps if isinstance(st, BlockRun)]


def test_fusable_runs():
    a, b = _inputs(np.random.default_rng(8), np.float16, 3, 301, 2, False)
    assert _runs(O.preset("v100", "fp16"), 301, (a, b)) == [76]               # ceil(301 / 4) blocks: one run
    a, b = _inputs(np.random.default_rng(8), ml_dtypes.float8_e4m3fn, 3, 256, 2, False)
    # promoted every 128: the two groups side by side, each step two blocks wide, four steps chained
    assert _runs(O.preset("deepseek", "fp8"), 256, (a, b)) == [4]


@pytest.mark.parametrize("preset", [("v100", "fp16"), ("a100", "bf16"), ("h100", "fp8"), ("h100", "tf32")])
def test_tile_edges(preset):
    # rows and columns beyond one tile (32 rows x 256 outputs) and ragged at both ends; K a few blocks long,
    # not a multiple of n, and shorter than one block; a sum whose batch spans several tiles
    rng = np.random.default_rng(21)
    order = O.preset(*preset)
    dt = _DT[preset[1]]
    for m, K, n in ((37, 45, 261), (17, 3, 300), (1, 70, 513)):
        _same("matmul", _inputs(rng, dt, m, K, n, True), order=order)
    if preset == ("h100", "fp8"):               # promoted: runs two and more blocks wide (w > 1)
        _same("matmul", _inputs(rng, dt, 19, 300, 260, True), order=O.preset("deepseek", "fp8"))
    _same("sum", (_values(rng, dt, 600 * 23, False).reshape(600, 23),), order=order)


def test_overflow_rows_among_tiles():
    # fp16 accumulator: a few rows overflow part-way (rerun block by block), the rest of the tile runs on
    order = O.BlockFMA(4, 12, out_rounding="rne", acc=FP16)
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((40, 64)) * 8).astype(np.float16)
    a[[3, 17, 30], 20:] = 250
    b = np.abs(rng.standard_normal((64, 270)) * 8).astype(np.float16)
    b[:, ::7] *= -1
    _same("matmul", (a, b), order=order)
    got = simulate("matmul", a, b, order=order)
    assert np.isinf(got[[3, 17, 30]]).any() and np.isfinite(got[:3]).all()


def test_truncating_blocks_float32_terms_below_float32_range():
    # BF16 products from 2^-80 to 2^100 in one block: E near 100, so the small terms scaled by 2^(F - E)
    # fall below float32's range (even to 0). A truncating block still takes float32 terms (terms32): those
    # terms truncate to +-0 as the exact ones do; a sticky block does not (its sign bit needs them)
    rng = np.random.default_rng(29)
    m, K, n = 5, 96, 7
    big = rng.random((m, K)) < 0.3
    a = (rng.uniform(1, 2, (m, K)) * np.where(big, 2.0**50, 2.0**-40) * rng.choice([-1, 1], (m, K)))
    b = (rng.uniform(1, 2, (K, n)) * np.exp2(rng.integers(-40, 51, (K, n))) * rng.choice([-1, 1], (K, n)))
    a, b = a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    seen = []
    real = jitblock.terms32
    for truncate in (True, False):
        order = O.BlockFMA(16, 25, truncate=truncate)
        try:
            jitblock.terms32 = lambda st: seen.append(real(st)) or seen[-1]
            _same("matmul", (a, b), order=order)
        finally:
            jitblock.terms32 = real
        assert seen and all(seen) == truncate
        seen.clear()


def test_int32_block_sums_near_their_bound():
    # H100 FP16 blocks of 16 products just below 4 with K&M's carry: each scaled term just below 2^27, the
    # block's sum just below 2^31 (the kernel's int32 sums, jitblockrun._pass2_int), of either sign
    top = np.float16(2 - 2.0**-10)
    order = O.preset("h100", "fp16")
    for sign in (1, -1):
        a = np.full((3, 64), top, np.float16)
        b = np.full((64, 5), sign * top, np.float16)
        b[:, 4] = np.float16(sign * 2.0**-14)                          # small terms in the last column
        _same("matmul", (a, b), order=order)


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_compiled_labels_are_simsources_labels(dt):
    """The kernels' labels (jitblock.labels_of: one compiled pass, int32 or float32) are simsources._labels of the
    same values, read as float32 or float64: normal, subnormal, zero, inf and NaN inputs."""
    from numoracle.core.formats.format import format_of
    from numoracle.models.engine import sources as simsources

    rng = np.random.default_rng(21)
    f = format_of(dt)
    e = rng.uniform(np.log2(float(f.min_subnormal)) - 1, np.log2(float(f.max_finite)), 6000)
    with np.errstate(over="ignore"):
        x = (np.exp2(e) * rng.choice([-1.0, 1.0], e.size)).astype(dt)
    x[::50] = 0
    if f.has_inf:
        x[1::77], x[2::91] = np.inf, np.nan
    for held in (np.float32, np.float64):
        if held == np.float32 and dt == np.float64:
            continue
        v = x.reshape(60, 100).astype(held)
        want = simsources._labels(v, f)
        for out in (np.int32, np.float32):
            np.testing.assert_array_equal(jitblock.labels_of(v, f, out), want.astype(out), err_msg=f"{held} {out}")


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.float32],
                         ids=lambda d: np.dtype(d).name)
def test_keys_give_the_raw_label_and_the_carry(dt):
    """jitblock.keys_of: over every block of boundary-weighted terms (subnormals, zeros, significands just below 2,
    the top binade), the largest key product's exponent is 2 raw + c, with raw the largest label sum of the
    nonzero products and raw + c = max(floor(log2 max |t|), raw), as block_fma computes them from the labels."""
    from numoracle.core.formats.format import format_of
    from numoracle.models.engine import sources as simsources

    rng = np.random.default_rng(5)
    f = format_of(dt)
    a, b = _values(rng, dt, 4000, False).astype(np.float64), _values(rng, dt, 4000, False).astype(np.float64)
    if dt == np.float32:                                # FP32 inputs: float64 keys (the products are exact there)
        a, b = a * 2.0**-60, b                          # (and a range whose doubled labels fit float64)
    ka, kb = jitblock.keys_of(b, f, a, f), jitblock.keys_of(a, f, b, f)    # (B's keys: A's are the kernel's)
    assert ka is not None and kb is not None, "the keys apply to this range"
    np.testing.assert_array_equal(ka, [jitblock.key_of(x, *jitblock.key_fields(a, f))[0] for x in a])
    la, lb = (simsources._labels(v, f).astype(np.int64) for v in (a, b))
    n = 8
    t, lab, key = (a * b).reshape(-1, n), (la + lb).reshape(-1, n), (ka * kb).reshape(-1, n)
    nz = t != 0
    has_p = nz.any(axis=1)
    raw = np.where(nz, lab, -(1 << 40)).max(axis=1)
    ep = np.maximum(np.frexp(np.abs(t).max(axis=1))[1] - 1, raw)
    ek = np.frexp(key.max(axis=1))[1] - 1
    assert has_p.sum() > 400 and (ep > raw)[has_p].sum() > 50, "blocks with and without a carry"
    np.testing.assert_array_equal(key.max(axis=1) != 0, has_p)
    np.testing.assert_array_equal((ek >> 1)[has_p], raw[has_p])
    np.testing.assert_array_equal(((ek >> 1) + (ek & 1))[has_p], ep[has_p])


def test_keys_route_and_label_route(monkeypatch):
    """Pass 1 by keys where they apply (FP16, FP8 and BF16 inputs, subnormals included; float32 or float64 keys),
    by labels where the keys would leave the normal range (BF16 products from 2^-80 to 2^80 as float32 terms:
    doubled labels beyond float32's) or the inputs hold inf / NaN: the same bits either way."""
    routes = []
    real = jitblock.keys_of
    monkeypatch.setattr(jitblock, "keys_of", lambda *args: routes.append(real(*args) is not None) or real(*args))
    rng = np.random.default_rng(13)
    wide = [(rng.uniform(1, 2, s) * np.exp2(rng.integers(-40, 41, s)) * rng.choice([-1, 1], s)).astype(
        ml_dtypes.bfloat16) for s in ((20, 200), (200, 40))]
    for ins, keyed in ((_inputs(rng, np.float16, 20, 200, 40, True), True),
                       (_inputs(rng, ml_dtypes.float8_e4m3fn, 20, 200, 40, True), True),
                       (_inputs(rng, ml_dtypes.bfloat16, 20, 200, 40, True), True), (wide, False)):
        routes.clear()
        _same("matmul", ins, order=O.preset("h100", "fp16"))
        assert routes == [keyed]
    routes.clear()
    _same("matmul", (_values(rng, np.float16, 20 * 200, True).reshape(20, 200),
                     _values(rng, np.float16, 200 * 40, False).reshape(200, 40)), order=O.preset("h100", "fp16"))
    assert routes == []                                 # inf / NaN: no keys asked
