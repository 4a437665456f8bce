"""exact_sum / exact_dot / exact_matmul against slow exact references.

The references here share nothing with the code under test: Python ``Fraction`` (or ``int``)
sums of the exact input values, rounded once with ``numoracle.core.scalar.round_value`` (the
Fraction twin of the rounding engine); for larger sizes ``math.fsum`` (correctly rounded sums
of float64 values, Shewchuk) over products that are exact in float64. Results are compared
bit for bit (so -0 and +0 differ; NaN equals NaN). All randomness is seeded.
"""

from __future__ import annotations

import math
import zlib
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import numoracle as no
from numoracle.core.formats.format import Format, registry
from numoracle.core.scalar import round_value
from numoracle.exact.reference import exact_dot, exact_matmul, exact_sum
from numoracle.formats import FP32

FLOATS = [f for f in registry() if not f.is_integer]
OUTS = ["bf16", "fp16", "fp32", "fp8_e4m3fn", "fp8_e5m2", "tf32"]


# ---- references ---------------------------------------------------------------------------------
def values_of(codes, fmt):
    """Exact values of codes: Fractions (floats) or ints, via the Fraction twin of decode."""
    from numoracle.core.scalar import NEG_ZERO, value_of

    out = [value_of(int(c), fmt) for c in np.asarray(codes).ravel()]
    return [0 if v == NEG_ZERO else v for v in out]


def frac(v):
    return Fraction(int(v)) if isinstance(v, (int, np.integer)) else Fraction(float(v))


def rounded(x: Fraction, fmt="fp64") -> float:
    """The exact value x rounded once (RNE) to fmt, as a float."""
    f = no.formats.format_of(fmt)
    return float(no.decode(np.array([round_value(x, f)], f.code_dtype), f)[0])


def same(a, b) -> bool:
    """Bitwise equality of float64 arrays (NaN == NaN, -0 != +0)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return False
    return bool(np.all((a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))))


def finite_codes(fmt, n, rng):
    """n random codes of fmt with finite values (uniform over codes: every binade and subnormals)."""
    if fmt.bits <= 16:
        allc = np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)
        v = no.decode(allc, fmt).astype(np.float64)
        pool = allc[np.isfinite(v)]
        return pool[rng.integers(0, pool.size, n)]
    c = rng.integers(0, 1 << fmt.bits, n, dtype=np.uint64).astype(fmt.code_dtype)
    v = no.decode(c, fmt)
    while not np.all(np.isfinite(v)):
        bad = ~np.isfinite(v)
        c[bad] = rng.integers(0, 1 << fmt.bits, int(bad.sum()), dtype=np.uint64).astype(fmt.code_dtype)
        v = no.decode(c, fmt)
    return c


def fsum_rows(P):
    return np.array([math.fsum(r) for r in P])


# ---- exact_sum ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "xs, want",
    [
        ([1e30, 1.0, -1e30], 1.0),
        ([1e300, 1e-300, -1e300], 1e-300),
        ([2.0**1023, 2.0**1023, -(2.0**1023)], 2.0**1023),  # a naive left-to-right sum overflows
        ([1.0, 2.0**-53], 1.0),  # a tie: to even
        ([1.0, 2.0**-53, 2.0**-1074], 1.0 + 2.0**-52),  # just above the tie
        ([1.0, 2.0**-53, -(2.0**-1074)], 1.0),  # just below it
        ([1.0 + 2.0**-52, 2.0**-53], 1.0 + 2.0**-51),  # a tie from an odd significand: up
        ([np.finfo(np.float64).max] * 2, np.inf),  # the exact sum overflows: RNE gives inf
        ([np.finfo(np.float64).max] * 2 + [-np.finfo(np.float64).max], np.finfo(np.float64).max),
        ([2.0**-1074] * 3, 3 * 2.0**-1074),
        ([0.1] * 10, 1.0000000000000000555),  # fsum's example: the exact sum rounds to 1.0
    ],
)
def test_sum_examples(xs, want):
    assert same(exact_sum(np.array(xs)), want)
    assert exact_sum(np.array(xs), exact=True) == sum(Fraction(x) for x in xs)


@pytest.mark.parametrize("fmt", FLOATS, ids=lambda f: f.name)
def test_sum_every_float_format_against_fractions(fmt):
    rng = np.random.default_rng(zlib.crc32(fmt.name.encode()))
    rows, n = 6, 40
    codes = finite_codes(fmt, rows * n, rng).reshape(rows, n)
    half = codes[0, : n // 2]
    flipped = half ^ np.asarray(fmt.sign_bit, codes.dtype)
    codes[0, n // 2:] = np.where(no.decode(half, fmt) == 0, half, flipped)  # row 0 cancels (FNUZ: -0 is NaN)
    got = exact_sum(codes, axis=1, fmt=fmt)
    got_exact = exact_sum(codes, axis=1, fmt=fmt, exact=True)
    for i in range(rows):
        ref = sum((frac(v) for v in no.decode(codes[i], fmt)), Fraction(0))
        assert got_exact[i] == ref
        assert same(got[i], rounded(ref)), (fmt.name, i)
        for out in ("bf16", "fp16"):
            assert same(exact_sum(codes[i], fmt=fmt, out=out), rounded(ref, out))


def test_sum_spanning_the_whole_fp64_range_with_cancellation():
    rng = np.random.default_rng(1)
    mags = np.ldexp(1.0 + rng.random(300), rng.integers(-1074, 1000, 300))
    mags = np.concatenate([mags, np.ldexp(rng.integers(1, 2**52, 40).astype(np.float64), -1074)])  # subnormals
    x = mags * rng.choice([-1.0, 1.0], mags.size)
    big = np.concatenate([x, -x[:150], [2.0**-1074, -(2.0**1000)]])  # large parts cancel exactly
    rng.shuffle(big)
    ref = sum(Fraction(v) for v in big)
    assert exact_sum(big, exact=True) == ref
    assert same(exact_sum(big), rounded(ref))
    assert same(exact_sum(big), math.fsum(big))
    for out in OUTS:
        assert same(exact_sum(big, out=out), rounded(ref, out))


def test_sum_of_subnormals_fp32_and_fp64():
    rng = np.random.default_rng(2)
    s32 = (rng.integers(1, 2**23, 500).astype(np.uint32) | (rng.integers(0, 2, 500).astype(np.uint32) << 31))
    x = s32.view(np.float32)
    ref = sum(Fraction(float(v)) for v in x)
    assert same(exact_sum(x), rounded(ref))
    assert same(exact_sum(x, out="fp32"), rounded(ref, "fp32"))
    y = np.ldexp(rng.integers(-(2**52), 2**52, 500).astype(np.float64), -1074)
    assert same(exact_sum(y), rounded(sum(Fraction(v) for v in y)))


def test_sum_large_vector_and_axes_against_fsum():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(1 << 20) * np.exp2(rng.integers(-30, 30, 1 << 20))).astype(np.float32)
    assert same(exact_sum(x), math.fsum(x.astype(np.float64)))
    m = rng.standard_normal((3, 50, 7)) * np.exp2(rng.integers(-200, 200, (3, 50, 7)))
    got = exact_sum(m, axis=1)
    assert got.shape == (3, 7)
    assert same(got, np.array([[math.fsum(m[i, :, j]) for j in range(7)] for i in range(3)]))
    got = exact_sum(m, axis=(0, 2))
    assert same(got, np.array([math.fsum(m[:, k, :].ravel()) for k in range(50)]))
    assert same(exact_sum(m, axis=-1), np.array([[math.fsum(r) for r in p] for p in m]))


def test_sum_accumulator_near_its_limits():
    # 2^22 + 3 equal values with full significands: every limb piece is near 2^32, so blocks of
    # terms that were too large for float64 bin sums (or carries that were lost) would show
    n = (1 << 22) + 3
    v = (2.0**53 - 1) * 2.0**-38  # aligned so that its lowest limb piece is 2^32 - 1 (odd, maximal)
    x = np.full(n, v)
    x[-1] = -(2.0**52 + 1)  # the last term changes the rounding of the rest
    x[-2] = 2.0**-1074  # a span no few digit slices cover: the limb accumulator does this sum
    ref = (n - 2) * Fraction(v) + Fraction(x[-1]) + Fraction(x[-2])
    assert exact_sum(x, exact=True) == ref
    assert same(exact_sum(x), rounded(ref))


def test_sum_digit_slices_at_the_exactness_bound():
    # positive values with 53 significant bits: the first digits all have one sign and full width,
    # so each slice's sum comes within a factor 2 of 2^53, the most float64 holds exactly
    rng = np.random.default_rng(21)
    for n in (1 << 16, (1 << 16) + 1, 3):
        x = 0.5 + rng.random((8, n)) / 2
        x[1] *= -1
        ints = (x * 2.0**53).astype(np.int64).astype(object)  # multiples of 2^-53: exact integers
        ref = [Fraction(int(v), 2**53) for v in ints.sum(axis=1)]
        assert exact_sum(x, axis=1, exact=True).tolist() == ref
        assert same(exact_sum(x, axis=1), [rounded(r) for r in ref])


def test_sum_row_with_many_terms_and_many_rows():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, (1 << 20) + 5)) * 1e10  # rows longer than one accumulation block
    x[:, -1] = -x[:, :-1].sum(axis=1)
    assert same(exact_sum(x, axis=1), fsum_rows(x))
    y = rng.standard_normal((20000, 3)) * np.exp2(rng.integers(-900, 900, (20000, 3)))
    assert same(exact_sum(y, axis=1), fsum_rows(y))


@pytest.mark.parametrize("fmt", ["int8", "uint8", "int32", "uint32", "int64", "uint64", "int4"])
def test_sum_integer_formats(fmt):
    f = no.formats.format_of(fmt)
    rng = np.random.default_rng(f.bits)
    codes = rng.integers(0, 1 << f.bits, 400, dtype=np.uint64).astype(f.code_dtype)
    vals = no.decode(codes, f)
    ref = sum(int(v) for v in vals)
    assert exact_sum(codes, fmt=f, exact=True) == ref
    assert same(exact_sum(codes, fmt=f), rounded(Fraction(ref)))
    if f.bits in (8, 32, 64) and f.signed:
        native = vals.astype(f"int{f.bits}")
        assert same(exact_sum(native), rounded(Fraction(ref)))


def test_sum_native_inputs_torch_ml_dtypes_lists():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a = rng.standard_normal(1000) * 1e3
    for arr in (a.astype(ml_dtypes.bfloat16), a.astype(np.float16), (a / 1e3).astype(ml_dtypes.float8_e4m3fn)):
        ref = sum(Fraction(float(v)) for v in arr.astype(np.float64))
        assert same(exact_sum(arr), rounded(ref))
    t = torch.tensor(a, dtype=torch.bfloat16)
    ref = sum(Fraction(float(v)) for v in t.double().numpy())
    assert same(exact_sum(t), rounded(ref))
    assert same(exact_sum([1e30, 1.0, -1e30]), 1.0)


def test_out_matters_double_rounding_example():
    # exact sum 1 + 2^-8 + 2^-60: above the BF16 midpoint 1 + 2^-8, so BF16 RNE gives 1 + 2^-7.
    # Rounded to FP64 first it becomes the midpoint itself, which then ties to even: 1.0.
    x = np.array([1.0, 2.0**-8, 2.0**-60])
    fp64 = float(exact_sum(x))
    assert fp64 == 1 + 2.0**-8
    naive = float(no.decode(no.cast(np.float64(fp64), "bf16"), "bf16"))
    assert naive == 1.0
    exact = Fraction(1) + Fraction(1, 2**8) + Fraction(1, 2**60)
    assert float(exact_sum(x, out="bf16")) == 1 + 2.0**-7 == rounded(exact, "bf16")
    # just below the midpoint the exact value rounds down to 1.0
    y = np.array([1.0, 2.0**-8, -(2.0**-60)])
    assert float(exact_sum(y, out="bf16")) == 1.0
    # FP32 destination: 1 + 2^-24 + 2^-70
    z = np.array([1.0, 2.0**-24, 2.0**-70])
    assert float(exact_sum(z, out="fp32")) == 1 + 2.0**-23
    assert float(no.decode(no.cast(exact_sum(z), "fp32"), "fp32")) == 1.0


def test_out_random_cancellation_against_fractions():
    rng = np.random.default_rng(6)
    for _ in range(30):
        base = rng.standard_normal(6)
        x = np.concatenate([base, -base[:5], rng.standard_normal(3) * 2.0 ** rng.integers(-80, -20, 3)])
        ref = sum(Fraction(v) for v in x)
        for out in OUTS:
            assert same(exact_sum(x, out=out), rounded(ref, out)), (out, x)


def test_specials_in_sums():
    inf, nan = np.inf, np.nan
    assert np.isnan(exact_sum(np.array([1.0, nan])))
    assert np.isnan(exact_sum(np.array([inf, -inf, 1.0])))
    assert same(exact_sum(np.array([inf, 1e308, 1e308])), inf)
    assert same(exact_sum(np.array([-inf, 5.0])), -inf)
    assert same(exact_sum(np.array([-0.0, -0.0])), -0.0)
    assert same(exact_sum(np.array([-0.0, 0.0])), 0.0)
    assert same(exact_sum(np.array([1.0, -1.0])), 0.0)
    assert same(exact_sum(np.zeros(0)), 0.0)
    assert same(exact_sum(np.zeros((3, 0)), axis=1), np.zeros(3))
    assert same(exact_sum(np.array([inf, 1.0]), out="fp8_e4m3fn"), nan)  # no inf in E4M3FN: NaN
    r = exact_sum(np.array([[1.0, inf], [2.0, 3.0]]), axis=1, exact=True)
    assert r[0] == inf and r[1] == 5
    e4 = no.cast(np.array([np.nan, 1.0], np.float32), "fp8_e4m3fn")  # a NaN code of a format without inf
    assert np.isnan(exact_sum(e4, fmt="fp8_e4m3fn"))


# ---- exact_dot ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fa, fb", [("fp64", "fp64"), ("fp32", "fp32"), ("bf16", "bf16"), ("fp16", "fp8_e5m2"),
                                    ("fp64", "fp8_e4m3fn"), ("fp64", "int64"), ("int32", "int32"),
                                    ("uint64", "int8"), ("tf32", "fp64"), ("e8m0fnu", "fp6_e2m3fn")])
def test_dot_against_fractions(fa, fb):
    fa, fb = no.formats.format_of(fa), no.formats.format_of(fb)
    rng = np.random.default_rng(7)
    R, K = 5, 30
    ca = finite_codes(fa, R * K, rng).reshape(R, K)
    cb = finite_codes(fb, R * K, rng).reshape(R, K)
    got = exact_dot(ca, cb, fmt_a=fa, fmt_b=fb)
    got_exact = exact_dot(ca, cb, fmt_a=fa, fmt_b=fb, exact=True)
    for i in range(R):
        va, vb = values_of(ca[i], fa), values_of(cb[i], fb)
        ref = sum((Fraction(x) * Fraction(y) for x, y in zip(va, vb)), Fraction(0))
        assert got_exact[i] == ref
        assert same(got[i], rounded(ref)), (fa.name, fb.name, i)
        assert same(exact_dot(ca[i], cb[i], fmt_a=fa, fmt_b=fb, out="fp16"), rounded(ref, "fp16"))


@pytest.mark.parametrize("man", [28, 29])
def test_dot_products_at_the_float64_width(man):
    # p = man + 1 with FP32's 24: exactly 53 bits (products are exact in float64) or 54 (they can round)
    f = Format.ieee_like(8, man, name=f"e8m{man}")
    rng = np.random.default_rng(22)
    ca = finite_codes(f, 4 * 50, rng).reshape(4, 50)
    cb = finite_codes(FP32, 4 * 50, rng).reshape(4, 50)
    got = exact_dot(ca, cb, fmt_a=f, fmt_b=FP32)
    got_exact = exact_dot(ca, cb, fmt_a=f, fmt_b=FP32, exact=True)
    for i in range(4):
        ref = sum(Fraction(x) * Fraction(y) for x, y in zip(values_of(ca[i], f), values_of(cb[i], FP32)))
        assert got_exact[i] == ref
        assert same(got[i], rounded(ref))


def test_dot_fp64_products_not_exact_in_fp64():
    rng = np.random.default_rng(8)
    for _ in range(20):
        a = rng.standard_normal(8) * np.exp2(rng.integers(-500, 500, 8))
        b = rng.standard_normal(8) * np.exp2(rng.integers(-500, 500, 8))
        a[4:] = a[:4]
        b[4:] = -b[:4] * (1 + 2.0**-52)  # products nearly cancel: their low halves decide
        ref = sum(Fraction(x) * Fraction(y) for x, y in zip(a, b))
        assert same(exact_dot(a, b), rounded(ref))
        assert same(exact_dot(a, b, out="fp32"), rounded(ref, "fp32"))
    # products in the subnormal range round there: 1.5 * 2^-1074 ties to the even 2^-1073
    assert same(exact_dot(np.array([1.5 * 2.0**-537]), np.array([2.0**-537])), 2.0**-1073)
    assert same(exact_dot(np.array([2.0**-600]), np.array([2.0**-600])), 0.0)
    assert same(exact_dot(np.array([-(2.0**-600)]), np.array([2.0**-600])), -0.0)  # underflows with its sign
    # the exact 2^-1075 + 2^-1090 lies above the midpoint between 0 and 2^-1074: one rounding at the
    # subnormal quantum gives 2^-1074 (rounding to 53 bits first and then to the quantum gives 0)
    assert same(exact_dot(np.array([2.0**-600, 2.0**-600]), np.array([2.0**-475, 2.0**-490])), 2.0**-1074)
    # products that overflow float64 but cancel exactly
    assert same(exact_dot(np.array([1e200, -1e200, 3.0]), np.array([1e200, 1e200, 1.0])), 3.0)


def test_dot_batches_and_specials():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((4, 3, 16)).astype(np.float32)
    b = rng.standard_normal((3, 16)).astype(np.float32)
    got = exact_dot(a, b)
    assert got.shape == (4, 3)
    want = np.array([[math.fsum(a[i, j].astype(float) * b[j].astype(float)) for j in range(3)] for i in range(4)])
    assert same(got, want)
    inf = np.inf
    assert np.isnan(exact_dot(np.array([inf, 1.0]), np.array([0.0, 1.0])))  # 0 * inf
    assert np.isnan(exact_dot(np.array([inf, inf]), np.array([1.0, -1.0])))  # inf - inf
    assert same(exact_dot(np.array([inf, 2.0]), np.array([-1.0, 1e308])), -inf)
    assert same(exact_dot(np.array([0.0, -0.0]), np.array([-1.0, 2.0])), -0.0)  # every product -0
    assert same(exact_dot(np.array([0.0, 0.0]), np.array([-1.0, 2.0])), 0.0)
    assert isinstance(exact_dot(np.ones(3), np.ones(3), exact=True), Fraction)


# ---- exact_matmul -------------------------------------------------------------------------------
def matmul_ref(va, vb):
    M, K = len(va), len(va[0])
    N = len(vb[0])
    return [[sum((Fraction(va[i][k]) * Fraction(vb[k][j]) for k in range(K)), Fraction(0)) for j in range(N)]
            for i in range(M)]


def check_matmul(ca, cb, fa, fb, outs=("fp64",)):
    va = np.array(values_of(ca, fa), object).reshape(ca.shape)
    vb = np.array(values_of(cb, fb), object).reshape(cb.shape)
    ref = matmul_ref(va.tolist(), vb.tolist())
    got = exact_matmul(ca, cb, fmt_a=fa, fmt_b=fb, exact=True)
    assert got.tolist() == ref
    for out in outs:
        got = exact_matmul(ca, cb, fmt_a=fa, fmt_b=fb, out=out)
        want = np.array([[rounded(x, out) for x in row] for row in ref])
        assert same(got, want), (fa.name, fb.name, out)


@pytest.mark.parametrize("fmt", FLOATS, ids=lambda f: f.name)
def test_matmul_every_float_format_random_codes(fmt):
    rng = np.random.default_rng(10)
    ca = finite_codes(fmt, 6 * 24, rng).reshape(6, 24)
    cb = finite_codes(fmt, 24 * 5, rng).reshape(24, 5)
    check_matmul(ca, cb, fmt, fmt, outs=("fp64", "bf16"))


@pytest.mark.parametrize("fa, fb", [("bf16", "fp32"), ("int8", "fp16"), ("int32", "int32"), ("uint32", "fp64"),
                                    ("int64", "int64"), ("uint64", "uint8"), ("fp8_e4m3fn", "int8")])
def test_matmul_mixed_and_integer_formats(fa, fb):
    fa, fb = no.formats.format_of(fa), no.formats.format_of(fb)
    rng = np.random.default_rng(11)
    ca = finite_codes(fa, 5 * 20, rng).reshape(5, 20)
    cb = finite_codes(fb, 20 * 4, rng).reshape(20, 4)
    check_matmul(ca, cb, fa, fb, outs=("fp64", "fp32"))


def test_matmul_ill_conditioned_fp32():
    rng = np.random.default_rng(12)
    M, K, N = 9, 64, 7
    a = rng.standard_normal((M, K)) * np.exp2(rng.integers(-120, 120, (M, K)))
    a[:, K // 2:] = -a[:, : K // 2]  # exact cancellation of halves...
    a[:, -3:] *= 1 + 2.0**-20  # ...except for a few
    b = np.repeat(rng.standard_normal((K // 2, N)) * np.exp2(rng.integers(-120, 120, (K // 2, N))), 2, axis=0)
    b = np.concatenate([b[0::2], b[1::2]])
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    from numoracle.core.formats.interop import to_codes

    ca, cb = to_codes(a32)[0], to_codes(b32)[0]
    check_matmul(ca, cb, FP32, FP32, outs=("fp64", "bf16", "fp16"))


def test_matmul_fp64_many_slices_and_wide_span_fallback():
    rng = np.random.default_rng(13)
    a = rng.standard_normal((5, 12)) * np.exp2(rng.integers(-200, 200, (5, 12)))  # ~20 slices a line
    b = rng.standard_normal((12, 4)) * np.exp2(rng.integers(-200, 200, (12, 4)))
    a[:, 6:] = -a[:, :6]
    b[6:] = b[:6] * (1 + 2.0**-50)
    want = matmul_ref(a.tolist(), b.tolist())
    assert exact_matmul(a, b, exact=True).tolist() == want
    assert same(exact_matmul(a, b), [[rounded(x) for x in r] for r in want])
    # spans beyond 1000 binades (and subnormals): the per-entry path
    a[0, 0], a[1, 1], b[2, 0] = 2.0**1000, 2.0**-1070, 3 * 2.0**-1074
    want = matmul_ref(a.tolist(), b.tolist())
    assert exact_matmul(a, b, exact=True).tolist() == want
    assert same(exact_matmul(a, b), [[rounded(x) for x in r] for r in want])
    assert same(exact_matmul(a, b, out="fp32"), [[rounded(x, "fp32") for x in r] for r in want])


def test_matmul_rows_and_columns_split_between_the_two_paths():
    # row 1 and column 2 hold int64 values beyond 2^53 (not exact in float64): their entries are
    # exact dot products, the rest goes through the Ozaki split; likewise an FP64 row of wide span
    rng = np.random.default_rng(20)
    a = rng.integers(-1000, 1000, (4, 9))
    b = rng.integers(-1000, 1000, (9, 5))
    a[1, 3], b[4, 2] = -(2**63), 2**62 + 1
    want = [[Fraction(int(v)) for v in row] for row in a.astype(object).dot(b.astype(object))]
    assert exact_matmul(a, b, exact=True).tolist() == want
    assert same(exact_matmul(a, b), [[rounded(x) for x in r] for r in want])
    f = rng.standard_normal((4, 9))
    f[2, 0] = 2.0**-1060
    f[2, 1] = 2.0**40
    g = rng.standard_normal((9, 5))
    want = matmul_ref(f.tolist(), g.tolist())
    assert exact_matmul(f, g, exact=True).tolist() == want
    assert same(exact_matmul(f, g), [[rounded(x) for x in r] for r in want])


def test_matmul_medium_fp32_against_fsum_and_digit_bound():
    rng = np.random.default_rng(14)
    M, K, N = 48, 1024, 40
    a = (rng.standard_normal((M, K)) * np.exp2(rng.integers(-20, 20, (M, K)))).astype(np.float32)
    b = (rng.standard_normal((K, N)) * np.exp2(rng.integers(-20, 20, (K, N)))).astype(np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = np.array([[math.fsum(a64[i] * b64[:, j]) for j in range(N)] for i in range(M)])  # products exact
    assert same(exact_matmul(a, b), want)
    # digits at the bound: K equal maximal significands; every slice GEMM sums to ~2^53
    K = 4096
    a = np.full((3, K), np.float32(2 - 2.0**-23))
    b = np.full((K, 2), np.float32(-(2 - 2.0**-23)))
    a[1] *= -1
    a[2, ::2] = np.float32(1 + 2.0**-23)
    ref = [[sum(Fraction(float(x)) * Fraction(float(b[0, 0])) for x in a[i])] * 2 for i in range(3)]
    assert exact_matmul(a, b, exact=True).tolist() == ref


def test_matmul_slice_gemms_at_the_exactness_bound():
    # positive data: the first slices are full-width digits of one sign, so every slice GEMM sums
    # K = 4096 products to just under 2^53, the most that float64 holds exactly. One bit more per
    # slice and BLAS would round.
    rng = np.random.default_rng(17)
    for K in (4096, 3000):
        a = (0.5 + rng.random((6, K)) / 2).astype(np.float32)
        b = (0.5 + rng.random((K, 5)) / 2).astype(np.float32)
        a[0] = np.float32(1 - 2.0**-24)
        b[:, 0] = np.float32(1 - 2.0**-24)
        # every value is a multiple of 2^-24 below 1: the integer matmul (< 2^60) is exact in int64
        ai = (a.astype(np.float64) * 2**24).astype(np.int64)
        bi = (b.astype(np.float64) * 2**24).astype(np.int64)
        ref = [[Fraction(int(v), 2**48) for v in row] for row in ai @ bi]
        assert same(exact_matmul(a, b), [[rounded(x) for x in row] for row in ref])
        assert same(exact_matmul(a, b, out="bf16"), [[rounded(x, "bf16") for x in row] for row in ref])
    # FP64 data: every digit of every slice is full width (53 significant bits per value)
    K = 4096
    a = 0.5 + rng.random((4, K)) / 2
    b = 0.5 + rng.random((K, 3)) / 2
    ai = (a * 2.0**53).astype(np.int64).astype(object)  # multiples of 2^-53 below 1: exact integers
    bi = (b * 2.0**53).astype(np.int64).astype(object)
    ref = [[Fraction(int(v), 2**106) for v in row] for row in ai.dot(bi)]  # Python integers: exact
    assert exact_matmul(a, b, exact=True).tolist() == ref
    assert same(exact_matmul(a, b), [[rounded(x) for x in row] for row in ref])


def test_matmul_shapes_batches_and_vectors():
    rng = np.random.default_rng(15)
    A = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    B = rng.standard_normal((3, 5, 2)).astype(np.float32)
    got = exact_matmul(A, B)
    want = np.matmul(A.astype(np.float64), B.astype(np.float64))  # products exact; sums of 5 may round
    assert got.shape == want.shape
    assert np.allclose(got, want, rtol=1e-14, atol=0)
    v = rng.standard_normal(5)
    for x, y in ((A[0, 0], v), (v, B[0]), (v, v)):
        r = exact_matmul(x, y)
        assert np.shape(r) == np.shape(np.matmul(x, y))
    assert same(exact_matmul(v, v), exact_dot(v, v))
    assert same(exact_matmul(np.zeros((2, 0)), np.zeros((0, 3))), np.zeros((2, 3)))


def test_matmul_column_blocks_give_the_same_result(monkeypatch):
    import numoracle.exact.ozaki as oz

    rng = np.random.default_rng(18)
    a = (rng.standard_normal((7, 300)) * np.exp2(rng.integers(-60, 60, (7, 300)))).astype(np.float32)
    b = (rng.standard_normal((300, 11)) * np.exp2(rng.integers(-60, 60, (300, 11)))).astype(np.float32)
    whole = exact_matmul(a, b, exact=True)
    monkeypatch.setattr(oz, "_LIMBS", 64)  # one column of B per block
    assert exact_matmul(a, b, exact=True).tolist() == whole.tolist()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert same(exact_matmul(a, b), [[math.fsum(a64[i] * b64[:, j]) for j in range(11)] for i in range(7)])


def test_matmul_specials_and_signed_zeros():
    inf, nan = np.inf, np.nan
    a = np.array([[1.0, 2.0], [inf, 1.0], [0.0, 1.0], [nan, 0.0], [-0.0, -0.0], [inf, -1.0]])
    b = np.array([[1.0, 0.0, inf, -inf], [1.0, 1.0, 0.0, 1.0]])
    got = exact_matmul(a, b)
    want = np.empty((6, 4))
    for i in range(6):
        for j in range(4):
            with np.errstate(invalid="ignore"):
                prods = [a[i, k] * b[k, j] for k in range(2)]  # IEEE products, no overflow here
            if any(np.isnan(p) for p in prods) or (inf in prods and -inf in prods):
                want[i, j] = nan
            elif inf in prods or -inf in prods:
                want[i, j] = inf if inf in prods else -inf
            elif all(p == 0 and math.copysign(1, p) < 0 for p in prods):
                want[i, j] = -0.0
            else:
                want[i, j] = float(sum(Fraction(p) for p in prods))
    assert same(got, want)
    assert same(exact_matmul(np.array([[0.0, -0.0]]), np.array([[-1.0], [1.0]])), [[-0.0]])
    ex = exact_matmul(a, b, exact=True)
    assert ex[1, 0] == inf and np.isnan(ex[3, 0]) and ex[0, 0] == 3


def test_matmul_torch_and_native_inputs():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(16)
    a = rng.standard_normal((7, 33))
    b = rng.standard_normal((33, 6))
    ta, tb = torch.tensor(a, dtype=torch.bfloat16), torch.tensor(b, dtype=torch.float32)
    va, vb = ta.double().numpy(), tb.double().numpy()
    want = np.array([[math.fsum(va[i] * vb[:, j]) for j in range(6)] for i in range(7)])
    assert same(exact_matmul(ta, tb), want)
    assert same(exact_matmul(va.astype(ml_dtypes.bfloat16), tb.numpy()), want)


# ---- errors -------------------------------------------------------------------------------------
def test_errors_name_shapes_and_fixes():
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 2\).*B\.T"):
        exact_matmul(np.ones((3, 4)), np.ones((5, 2)))
    with pytest.raises(ValueError, match=r"last axes \(K\).*3 != 4"):
        exact_dot(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="do not broadcast"):
        exact_dot(np.ones((2, 3)), np.ones((4, 3)))
    with pytest.raises(TypeError, match="integer codes"):
        exact_sum(np.ones(3), fmt="bf16")
    with pytest.raises(ValueError, match="exact=True"):
        exact_sum(np.ones(3), out="bf16", exact=True)
    with pytest.raises(ValueError, match="precision <= 51"):
        exact_sum(np.ones(3), out=Format.ieee_like(11, 51, name="e11m51"))
    with pytest.raises(ValueError, match="all FP64 values"):  # wider than the engine carries: refused when built
        exact_sum(np.ones(3), out=Format.ieee_like(12, 10, name="e12m10"))
    with pytest.raises(ValueError, match="<= 32 bits"):
        exact_dot(np.ones(3), np.ones(3), out="int64")
    with pytest.raises(ValueError, match="vectors"):
        exact_dot(np.float64(1), np.ones(3))
    with pytest.raises(ValueError, match=">= 1 dimension"):
        exact_matmul(np.float32(2), np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="batch axes.*do not broadcast"):
        exact_matmul(np.ones((2, 3, 4)), np.ones((3, 4, 5)))


def test_out_custom_format_with_float64_range():
    e11m10 = Format.ieee_like(11, 10, name="e11m10")  # quantum 2^-1032: float64 keeps two more bits
    rng = np.random.default_rng(19)
    for _ in range(20):
        x = np.ldexp(rng.integers(-(2**52), 2**52, 4).astype(np.float64), rng.integers(-1100, -1040, 4))
        ref = sum(Fraction(v) for v in x)
        assert same(exact_sum(x, out=e11m10), rounded(ref, e11m10))


def test_integer_out_and_low_precision_out():
    x = np.array([2.0**40, 0.5, 2.0**-70])
    assert same(exact_sum(x, out="int32"), 2.0**31 - 1)  # saturates
    assert same(exact_sum(np.array([3.0, 0.5, 2.0**-70]), out="int8"), 4.0)
    assert same(exact_sum(np.array([3.0, 0.5]), out="int8"), 4.0)  # tie to even
    assert same(exact_sum(np.array([2.0, 0.5]), out="int8"), 2.0)


def test_out_tuple_gives_each_rounding_from_one_exact_result():
    rng = np.random.default_rng(31)
    a = (rng.standard_normal((5, 70)) * np.exp2(rng.integers(-30, 30, (5, 70)))).astype(np.float32)
    b = (rng.standard_normal((70, 4)) * np.exp2(rng.integers(-30, 30, (70, 4)))).astype(np.float32)
    for fn, args in ((exact_matmul, (a, b)), (exact_dot, (a[:4], b.T)), (exact_sum, (a,))):
        kw = {"axis": -1} if fn is exact_sum else {}
        r64, r16, r32 = fn(*args, out=("fp64", "bf16", "fp32"), **kw)
        assert same(r64, fn(*args, **kw)) and same(r16, fn(*args, out="bf16", **kw))
        assert same(r32, fn(*args, out="fp32", **kw))
    with pytest.raises(ValueError, match="names no format"):
        exact_sum(a, out=())
