"""Stochastic rounding: ``cast(x, dst, rounding="sr", sr_bits=r, random_bits=R)``.

The contract (docs/semantics.md): with ``f`` the discarded fraction of a quantum (``0 <= f < 1``),
``|x|`` rounds away from zero iff ``floor(f * 2^r) + R >= 2^r``. So the result is always one of
the two neighbours of ``x``; ``R = 0`` always truncates; and over all ``2^r`` values of ``R``
exactly ``floor(f * 2^r)`` round away, i.e. with uniform ``R`` the probability of rounding away
is the fractional distance ``f`` itself whenever ``f`` has at most ``r`` bits.

The neighbours and ``f`` are computed here independently of the engine: from the sorted list
of the destination's values and exact ``Fraction`` arithmetic.

Statistical test: for each value, ``N = 20000`` seeded uniform draws of ``R``; the count of
rounding away must lie within 6 standard deviations of ``N * f`` (binomial; the two-sided
normal tail beyond 6 sigma is 2e-9 per value, under 1e-6 for all values together), and is
exact where ``f`` is 0. The seed is fixed (``default_rng(20240)``), so the test is
deterministic; the exhaustive enumeration of ``R`` pins the rule exactly.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import numoracle as no
from numoracle.core.engine.convert import CHUNK
from numoracle.formats import FP64

# (source, destination, sr_bits): float and integer destinations, 32- and 64-bit engine words
CASES = [("fp32", "bf16", 8), ("fp32", "fp8_e4m3fn", 5), ("fp16", "fp8_e5m2", 4), ("fp64", "fp16", 10),
         ("fp32", "int8", 6), ("fp16", "fp4_e2m1fn", 3), ("bf16", "e8m0fnu", 4), ("fp64", "bf16", 32)]


def _grid(dst) -> np.ndarray:
    """Sorted finite values of dst as Fractions (object array), from decoding every code."""
    if dst.is_integer:
        return np.array([Fraction(i) for i in range(dst.min_value, dst.max_value + 1)], dtype=object)
    v = no.decode(np.arange(1 << dst.bits, dtype=np.uint64).astype(dst.code_dtype), dst)
    v = np.unique(v[np.isfinite(v)])
    return np.array([Fraction(float(a)) for a in v], dtype=object)


def _neighbours(x: Fraction, grid) -> tuple[Fraction, Fraction, Fraction]:
    """(toward-zero neighbour, away-from-zero neighbour, f) of a value strictly inside the grid's range."""
    i = int(np.searchsorted(grid, x, side="right"))
    below, above = grid[i - 1], grid[i] if i < len(grid) else None
    if below == x:
        return x, x, Fraction(0)
    lo, hi = (below, above) if x > 0 else (above, below)
    return lo, hi, (x - lo) / (hi - lo)


def _sample(src, dst, rng, n) -> np.ndarray:
    """Finite source codes strictly between the destination's extreme values (and not tiny for E8M0)."""
    codes = rng.integers(0, 1 << src.bits, 8 * n, dtype=np.uint64).astype(src.code_dtype)
    v = no.decode(codes, src)
    g = _grid(dst)
    lo, hi = float(g[0]), float(g[-1])
    if dst.name == "e8m0fnu":
        lo = float(g[0])  # every value below 2^-127 clamps to it: no neighbours to speak of
    ok = np.isfinite(v) & (v > lo) & (v < hi) & (np.abs(v) > 2.0**-120 if dst.name == "e8m0fnu" else True)
    return codes[ok][:n]


def _sr(codes, src, dst, r, R):
    return no.cast(codes, dst, src=src, rounding="sr", sr_bits=r, random_bits=R)


@pytest.mark.parametrize("src,dst,r", CASES, ids=lambda c: str(c))
def test_exactly_floor_f_2r_of_all_bits_round_away(src, dst, r):
    """Enumerate every R: the away count is floor(f * 2^r), and which R round away is the top ones."""
    src, dst = no.formats.format_of(src), no.formats.format_of(dst)
    rng = np.random.default_rng(11)
    codes = _sample(src, dst, rng, 300 if r <= 10 else 40)
    g = _grid(dst)
    vals = [Fraction(float(a)) for a in no.decode(codes, src)]
    if r > 10:  # 2^32 values of R are too many: check the anchors R = 0, threshold - 1, threshold, 2^r - 1
        for c, x in zip(codes, vals, strict=True):
            lo, hi, f = _neighbours(x, g)
            k = int(f * 2**r)  # floor
            Rs = np.array(sorted({0, max(0, 2**r - k - 1), min(2**r - 1, 2**r - k), 2**r - 1}), np.uint64)
            got = no.decode(_sr(np.full(Rs.size, c), src, dst, r, Rs), dst)
            want = [float(hi) if k + int(R) >= 2**r else float(lo) for R in Rs]
            assert list(got) == want, (hex(int(c)), x, f)
        return
    R = np.tile(np.arange(1 << r, dtype=np.uint32), codes.size)
    got = no.decode(_sr(np.repeat(codes, 1 << r), src, dst, r, R), dst).reshape(codes.size, 1 << r)
    for row, c, x in zip(got, codes, vals, strict=True):
        lo, hi, f = _neighbours(x, g)
        k = int(f * 2**r)
        want = np.where(np.arange(1 << r) + k >= 1 << r, float(hi), float(lo))
        assert np.array_equal(row, want), (hex(int(c)), x, f, k)


@pytest.mark.parametrize("src,dst,r", CASES, ids=lambda c: str(c))
def test_result_is_one_of_the_two_neighbours(src, dst, r):
    """Every code (FP16/BF16 sources) or a seeded sample, random bits: rtz(x) or the away-from-zero result."""
    src, dst = no.formats.format_of(src), no.formats.format_of(dst)
    rng = np.random.default_rng(5)
    if src.bits <= 16:
        codes = np.arange(1 << src.bits, dtype=np.uint64).astype(src.code_dtype)
    else:
        codes = rng.integers(0, 1 << src.bits, 1 << 16, dtype=np.uint64).astype(src.code_dtype)
    R = rng.integers(0, 1 << r, codes.size, dtype=np.uint64)
    got = _sr(codes, src, dst, r, R)
    rtz = no.cast(codes, dst, src=src, rounding="rtz")
    neg = np.signbit(no.decode(codes, src).astype(np.float64))
    away = np.where(neg, no.cast(codes, dst, src=src, rounding="rd"), no.cast(codes, dst, src=src, rounding="ru"))
    assert np.all((got == rtz) | (got == away))
    # R = 0 truncates, except where even the truncated magnitude overflows: then sr, like rne,
    # gives inf (NaN for FN formats) where rtz gives max (docs/semantics.md, step 3)
    zero = _sr(codes, src, dst, r, np.zeros_like(R))
    fits = np.ones(codes.size, bool)
    if not dst.is_integer:
        thr = float(dst.overflow_threshold("rtz")[0])
        with np.errstate(invalid="ignore"):
            fits = ~(np.abs(no.decode(codes, src).astype(np.float64)) >= thr)
    assert np.array_equal(zero[fits], rtz[fits])
    assert np.array_equal(zero[~fits], got[~fits])
    both = rtz != away
    assert 0 < np.count_nonzero(got[both] == away[both]) < np.count_nonzero(both)  # both do occur


def _constructed(src, dst, r, rng, n, extra: Fraction) -> list[tuple[int, Fraction, Fraction, Fraction]]:
    """Up to n (source code, toward-zero neighbour, away neighbour, f) with f = k/2^r + extra, k >= 1,
    built between random adjacent destination values (both signs) and kept where src holds them."""
    g = _grid(dst)
    out = []
    for _ in range(50 * n):
        i = int(rng.integers(0, len(g) - 1))
        a, b = g[i], g[i + 1]
        if a * b < 0 or (dst.name == "e8m0fnu" and i == 0):
            continue
        lo, hi = (a, b) if a >= 0 else (b, a)
        f = Fraction(int(rng.integers(1, 1 << r)), 1 << r) + extra
        x = lo + f * (hi - lo)
        if Fraction(float(x)) != x or x == 0:
            continue
        code = no.cast(np.array([float(x)]).view(np.uint64), src, src=FP64, rounding="rtz")
        if Fraction(float(no.decode(code, src)[0])) == x:
            out.append((int(code[0]), lo, hi, f))
        if len(out) == n:
            break
    return out


@pytest.mark.parametrize("src,dst,r", [c for c in CASES if c[2] <= 10], ids=lambda c: str(c))
def test_frequency_of_rounding_away_is_the_fractional_distance(src, dst, r):
    """Binomial test (6 sigma, fixed seed) on values whose discarded fraction f has at most r bits
    (probability f), and on values with r + 2 bits (probability floor(f * 2^r) / 2^r)."""
    src, dst = no.formats.format_of(src), no.formats.format_of(dst)
    rng = np.random.default_rng(20240)
    short = _constructed(src, dst, r, rng, 10, Fraction(0))
    long_ = _constructed(src, dst, r, rng, 4, Fraction(1, 1 << (r + 2)))
    assert len(short) == 10 and len(long_) == 4, "too few representable values were built"
    N = 20000
    for code, lo, hi, f in short + long_:
        R = rng.integers(0, 1 << r, N, dtype=np.uint64)
        got = no.decode(_sr(np.full(N, code, src.code_dtype), src, dst, r, R), dst)
        assert np.all((got == float(hi)) | (got == float(lo)))
        away = int(np.count_nonzero(got == float(hi)))
        p = int(f * 2**r) / 2**r
        assert (p == float(f)) == ((f * 2**r).denominator == 1)
        sigma = (N * p * (1 - p)) ** 0.5
        assert abs(away - N * p) <= 6 * sigma, (hex(code), float(f), p, away / N)


def test_deterministic_and_aligned_across_chunks():
    rng = np.random.default_rng(3)
    n = 3 * CHUNK + 5
    codes = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    R = rng.integers(0, 1 << 12, n, dtype=np.uint64)
    a = _sr(codes, "fp32", "bf16", 12, R)
    assert np.array_equal(a, _sr(codes.copy(), "fp32", "bf16", 12, R.copy()))
    assert np.array_equal(a[::-1], _sr(codes[::-1].copy(), "fp32", "bf16", 12, R[::-1].copy()))
    assert np.array_equal(a[CHUNK - 7:CHUNK + 9], _sr(codes[CHUNK - 7:CHUNK + 9], "fp32", "bf16", 12,
                                                       R[CHUNK - 7:CHUNK + 9]))
    m = _sr(codes[:15].reshape(3, 5), "fp32", "bf16", 12, R[:15].reshape(3, 5))
    assert m.shape == (3, 5) and np.array_equal(m.ravel(), a[:15])
    # other bits give other results somewhere: the bits are used
    assert not np.array_equal(a, _sr(codes, "fp32", "bf16", 12, (R + 1) % (1 << 12)))


def test_sr_on_the_specials():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65535.0, 1e30, -1e30], np.float32)
    got = no.cast(x, "fp16", rounding="sr", sr_bits=4, random_bits=np.full(x.size, 15, np.uint8))
    assert [hex(int(c)) for c in got] == ["0x0", "0x8000", "0x7c00", "0xfc00", "0x7e00", "0x7bff", "0x7c00",
                                          "0x7c00", "0xfc00"]
    # R = 0: 65535 = 65504 + (31/32) ulp truncates to max; 1e30 overflows whatever the bits (inf, as rne)
    low = no.cast(x, "fp16", rounding="sr", sr_bits=4, random_bits=np.zeros(x.size, np.uint8))
    assert [hex(int(c)) for c in low[5:]] == ["0x7bff", "0x7bff", "0x7c00", "0xfc00"]
    e4 = no.cast(x[5:], "fp8_e4m3fn", rounding="sr", sr_bits=4, random_bits=np.zeros(4, np.uint8))
    assert [hex(int(c)) for c in e4] == ["0x7f"] * 4  # all beyond 448 + 32: NaN


def test_errors():
    x = np.array([1.0, 2.0], np.float32)
    with pytest.raises(ValueError, match="sr_bits"):
        no.cast(x, "bf16", rounding="sr", random_bits=np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="random_bits"):
        no.cast(x, "bf16", rounding="sr", sr_bits=8)
    with pytest.raises(ValueError, match="shape"):
        no.cast(x, "bf16", rounding="sr", sr_bits=8, random_bits=np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="shape"):
        no.cast(x, "bf16", rounding="sr", sr_bits=8, random_bits=np.zeros((2, 1), np.uint8))
    with pytest.raises(ValueError, match=r"\[0, 2\*\*8\)"):
        no.cast(x, "bf16", rounding="sr", sr_bits=8, random_bits=np.array([0, 256]))
    with pytest.raises(ValueError, match=r"\[0, 2\*\*8\)"):
        no.cast(x, "bf16", rounding="sr", sr_bits=8, random_bits=np.array([-1, 0]))
    with pytest.raises(TypeError, match="integers"):
        no.cast(x, "bf16", rounding="sr", sr_bits=8, random_bits=np.array([0.5, 0.0]))
    for bad in (0, 33, 2.5):
        with pytest.raises(ValueError, match="sr_bits"):
            no.cast(x, "bf16", rounding="sr", sr_bits=bad, random_bits=np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="sr_bits"):
        no.cast(x, "bf16", rounding="rne", sr_bits=8)
    with pytest.raises(ValueError, match="random_bits"):
        no.cast(x, "bf16", rounding="rtz", random_bits=np.zeros(2, np.uint8))
