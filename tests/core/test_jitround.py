"""The compiled kernels' one rounding step (core/kernels/rounding.py) against the engine (round_pack), bit for bit.

``round_value`` rounds a whole float64 value as the kernels' scalar routes do (models/kernels/chain.py's, the block
FMA's outputs): it is compared with ``cast`` (float64 -> format, then decoded) on boundary-weighted values
(ties, the subnormal range, the overflow threshold, zeros, infinities, NaN) in every mode the kernels take and
every overflow policy of the format, with and without ftz. ``round_bits`` is compared on float32 words in
the normal range, where the kernels use it on its own; ``int_grid`` (exact/kernels/ozaki.py's RNE / RO of a
limb window) against the engine on integers.
"""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle.core import jit
from numoracle.core.engine.convert import decode
from numoracle.core.formats.policy import Overflow, Rounding
from policies import MODES, overflows

pytest.importorskip("numba")
from numoracle.core.kernels import rounding as jr  # noqa: E402  (needs numba)
from numoracle.formats import BF16, FP4_E2M1FN, FP8_E4M3FN, FP8_E4M3FNUZ, FP8_E5M2, FP16, FP32, FP64, TF32

FMTS = [FP16, BF16, FP32, TF32, FP8_E4M3FN, FP8_E5M2, FP8_E4M3FNUZ, FP4_E2M1FN]


@jit.njit
def _values(v, mode, g, lim):
    out = np.empty_like(v)
    for i in range(v.size):
        out[i] = jr.round_value(v[i], mode, g, lim)
    return out


@jit.njit
def _bits(b, mode, g):
    out = np.empty_like(b)
    for i in range(b.size):
        out[i] = jr.round_bits(b[i], mode, g)
    return out


def boundary(fmt, rng, n: int = 4000) -> np.ndarray:
    """float64 values around fmt's grid: random bits, exact ties and their neighbours, the subnormal range and
    below it, the overflow threshold's neighbourhood, +-0, +-inf, NaN; both signs."""
    e = rng.integers(fmt.emin - fmt.man_bits - 3, fmt.emax + 3, n)
    sig = 1 + rng.integers(0, 1 << 52, n) * 2.0**-52
    x = np.ldexp(sig, e)
    q = np.ldexp(1.0, np.maximum(e, fmt.emin) - fmt.man_bits)            # the grid's quantum at x
    tie = (np.floor(x / q) + 0.5) * q
    x = np.where(rng.random(n) < 0.3, tie * (1 + rng.choice([-1, 0, 0, 1], n) * 2.0**-50), x)
    top = float(fmt.max_finite)
    ulp = 2.0 ** (fmt.emax - fmt.man_bits)
    edge = top + ulp * np.array([-1, -0.5, -0.25, 0, 0.25, 0.5, 0.5 + 2**-20, 0.75, 1, 2])
    x = np.concatenate([x, edge, [0.0, 2.0 ** (fmt.emax + 1), np.inf, np.nan, 2.0**-1074]])
    return x * rng.choice([-1.0, 1.0], x.size)


def engine(v: np.ndarray, fmt, mode, ovf, ftz: bool) -> np.ndarray:
    codes = no.cast(v.view(np.uint64), fmt, src=FP64, rounding=mode, overflow=ovf, ftz=ftz)
    return decode(codes, fmt).astype(np.float64)


def same(a, b) -> bool:
    return bool(np.all((a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))))


@pytest.mark.parametrize("fmt", FMTS, ids=lambda f: f.name)
@pytest.mark.parametrize("mode", MODES)
def test_round_value_every_mode_overflow_policy_and_ftz(fmt, mode):
    rng = np.random.default_rng([FMTS.index(fmt), MODES.index(mode)])
    v = boundary(fmt, rng)
    if not fmt.has_nan:
        v = v[~np.isnan(v)]           # (a NaN into a format without one follows nan_to: not the kernels' case)
    g = jr.grid(fmt, np.float64)
    code = jit.MODE_CODES[Rounding.of(mode)]
    for ovf in overflows(fmt):
        for ftz in (False, True):
            native = fmt == FP32 and mode == "rne" and not ftz     # Arith's native float32 conversion
            lim = jr.limits(fmt, Overflow(ovf), ftz, native)
            got, want = _values(v, code, g, lim), engine(v, fmt, mode, ovf, ftz)
            bad = np.flatnonzero(~((got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))))
            assert not bad.size, f"{ovf} ftz={ftz}: {v[bad[0]]!r} -> {got[bad[0]]!r}, engine {want[bad[0]]!r}"


@pytest.mark.parametrize("mode", MODES)
def test_round_value_block_fma_infinities(mode):
    """inf_at (the block FMA's rule): from 2^(emax + 1) on every result is infinite, in every mode; below it
    the engine's rounding, overflow included."""
    fmt = FP16
    rng = np.random.default_rng(MODES.index(mode))
    v = boundary(fmt, rng)
    lim = jr.limits(fmt, Overflow.IEEE, False, False, inf_at=2.0 ** (fmt.emax + 1))
    got = _values(v, jit.MODE_CODES[Rounding.of(mode)], jr.grid(fmt, np.float64), lim)
    big = np.isfinite(v) & (np.abs(v) >= 2.0 ** (fmt.emax + 1))
    assert big.any() and np.array_equal(got[big], np.copysign(np.inf, v[big]))
    assert same(got[~big], engine(v[~big], fmt, mode, "ieee", False))


@pytest.mark.parametrize("fmt", [FP16, BF16, FP8_E4M3FN, FP8_E5M2, TF32], ids=lambda f: f.name)
@pytest.mark.parametrize("mode", MODES)
def test_round_bits_on_float32_words_in_the_normal_range(fmt, mode):
    rng = np.random.default_rng([7, MODES.index(mode)])
    with np.errstate(over="ignore"):      # values past FP32's range: inf, outside the normal range
        v = boundary(fmt, rng).astype(np.float32)
    g = jr.grid(fmt, np.float32)
    b = v.view(np.uint32)
    normal = (jr_outside(b, g) <= int(g.span))
    got = _bits(b, jit.MODE_CODES[Rounding.of(mode)], g).view(np.float32).astype(np.float64)
    ok = normal & (np.abs(got) <= float(fmt.max_finite))
    assert ok.sum() > 1000
    assert same(got[ok], engine(v[ok].astype(np.float64), fmt, mode, "saturate", False))


def jr_outside(b: np.ndarray, g) -> np.ndarray:
    """outside(b, g) restated in numpy: |x|'s bits - min_normal's, as unsigned words."""
    return (b & np.uint32(0x7FFFFFFF)) - g.lo


@pytest.mark.parametrize("mode", ["rne", "rto"])
def test_int_grid_rounds_integers_as_the_engine(mode):
    """exact/kernels/ozaki.py rounds a limb window (kept bits, guard bit, sticky bit) at bit 2: the engine's
    rounding of w / 4 (exact in float64: w < 2^53) to an integer (INT64) in the same mode."""
    rng = np.random.default_rng(3)
    w = np.concatenate([rng.integers(0, 1 << 53, 5000), np.arange(64)]).astype(np.int64)
    got = _bits(w, jit.MODE_CODES[Rounding.of(mode)], jr.int_grid(2)) >> 2
    want = no.cast((w / 4.0).view(np.uint64), "int64", src=FP64, rounding=mode).view(np.int64)
    assert np.array_equal(got, want)


def test_wide_vectors_marks_only_the_kernel_that_asks():
    """wide_vectors() puts "prefer-vector-width"="512" on the function that calls it, and on no other (numba's
    other code in the process keeps LLVM's default); the function still computes what it did."""
    import numba

    @numba.njit(cache=False)
    def wide(x):
        jr.wide_vectors()
        s = 0.0
        for v in x:
            s += v
        return s

    @numba.njit(cache=False)
    def plain(x):
        s = 0.0
        for v in x:
            s += v
        return s

    x = np.arange(100.0)
    assert wide(x) == plain(x) == 4950.0
    attr = '"prefer-vector-width"="512"'
    assert attr in wide.inspect_llvm(wide.signatures[0])
    assert attr not in plain.inspect_llvm(plain.signatures[0])
