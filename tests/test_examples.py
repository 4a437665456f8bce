"""The acceptance examples of the conversion layer, one test each."""

from __future__ import annotations

import subprocess
import sys
import time
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import numoracle as no
from numoracle import Format, cast, decode, encode
from numoracle.core.formats.interop import native_dtype
from numoracle.formats import (
    BF16,
    E8M0FNU,
    FP4_E2M1FN,
    FP6_E2M3FN,
    FP6_E3M2FN,
    FP8_E3M4,
    FP8_E4M3,
    FP8_E4M3B11FNUZ,
    FP8_E4M3FN,
    FP8_E4M3FNUZ,
    FP8_E5M2,
    FP8_E5M2FNUZ,
    FP16,
    FP32,
    FP64,
    INT8,
    INT32,
    TF32,
    as_native,
    format_of,
)

F = Fraction


def one(x, dst, **kw) -> int:
    """The code of one value (a numpy scalar: its dtype names the source format)."""
    return int(cast(x, dst, **kw))


# ---- FP16 ------------------------------------------------------------------------------------
def test_fp16_rne_65519_is_65504():
    assert one(np.float64(65519), FP16) == 0x7BFF
    assert decode(np.uint16(0x7BFF), FP16) == 65504


def test_fp16_rne_65520_is_inf():
    assert one(np.float64(65520), FP16) == 0x7C00


def test_fp16_rtz_1e9_is_max():
    assert one(np.float64(1e9), FP16, rounding="rtz") == 0x7BFF


def test_fp16_ru_minus_1e9_is_minus_max():
    assert one(np.float64(-1e9), FP16, rounding="ru") == 0xFBFF
    assert decode(np.uint16(0xFBFF), FP16) == -65504


# ---- INT32 -> FP32 --------------------------------------------------------------------------------
def test_int32_16777217_to_fp32_is_16777216():
    c = one(np.int32(16777217), FP32)
    assert c == 0x4B800000 and decode(np.uint32(c), FP32) == 16777216


# ---- FP8 E4M3FN ---------------------------------------------------------------------------------
def test_e4m3fn_464_ties_down_to_448():
    assert one(np.float32(464), FP8_E4M3FN) == 0x7E


def test_e4m3fn_464_5_overflows_to_nan():
    assert one(np.float32(464.5), FP8_E4M3FN) == 0x7F


def test_e4m3fn_saturate_gives_448():
    assert one(np.float32(464.5), FP8_E4M3FN, overflow="saturate") == 0x7E
    assert one(np.float32(-1e6), FP8_E4M3FN, overflow="saturate") == 0xFE


# ---- FP8 E4M3FNUZ -------------------------------------------------------------------------------
def test_e4m3fnuz_negative_zero_is_plus_zero():
    assert one(np.float32(-0.0), FP8_E4M3FNUZ) == 0x00


def test_e4m3fnuz_nan_is_0x80():
    assert one(np.float32(np.nan), FP8_E4M3FNUZ) == 0x80


# ---- E8M0 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("x", [0.0, -0.0, -1.0, -2.0**-130, -np.inf])
def test_e8m0_zero_and_negatives_are_nan(x):
    assert one(np.float32(x), E8M0FNU) == 0xFF


def test_e8m0_1_5_rounds_to_2():
    c = one(np.float32(1.5), E8M0FNU)
    assert c == 0x80 and decode(np.uint8(c), E8M0FNU) == 2.0


# ---- float -> int ---------------------------------------------------------------------------------
def test_fp32_nan_to_int8_is_0():
    assert one(np.float32(np.nan), INT8) == 0


@pytest.mark.parametrize(("mode", "want"), [("rne", 4), ("rtz", 3), ("rna", 4)])
def test_fp32_3_5_to_int8(mode, want):
    assert one(np.float32(3.5), INT8, rounding=mode) == want


@pytest.mark.parametrize(("mode", "want"), [("rne", 2), ("rna", 3)])
def test_fp32_2_5_to_int8(mode, want):
    assert one(np.float32(2.5), INT8, rounding=mode) == want


def test_fp32_300_to_int8_saturate_and_wrap():
    assert one(np.float32(300), INT8, overflow="saturate") == 127
    assert one(np.float32(300), INT8, overflow="wrap") == 44


# ---- format_of --------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "fmt"), [
    ("fp16", FP16), ("float16", FP16), ("half", FP16), ("bf16", BF16), ("bfloat16", BF16),
    ("fp8_e4m3fn", FP8_E4M3FN), ("float8_e4m3fn", FP8_E4M3FN), ("int32", INT32),
])
def test_format_of_names(name, fmt):
    assert format_of(name) is fmt


@pytest.mark.parametrize(("dtype", "fmt"), [
    (np.float16, FP16), (np.dtype("float32"), FP32), (np.float64, FP64), (np.int32, INT32),
    (np.dtype("int8"), INT8),
])
def test_format_of_numpy_dtypes(dtype, fmt):
    assert format_of(dtype) is fmt
    assert format_of(np.zeros(2, dtype)) is fmt


@pytest.mark.parametrize(("dtype", "fmt"), [
    (ml_dtypes.bfloat16, BF16), (ml_dtypes.float8_e4m3fn, FP8_E4M3FN), (ml_dtypes.float8_e5m2, FP8_E5M2),
    (ml_dtypes.float8_e4m3fnuz, FP8_E4M3FNUZ), (ml_dtypes.float8_e5m2fnuz, FP8_E5M2FNUZ),
    (ml_dtypes.float8_e4m3b11fnuz, FP8_E4M3B11FNUZ), (ml_dtypes.float6_e3m2fn, FP6_E3M2FN),
    (ml_dtypes.float6_e2m3fn, FP6_E2M3FN), (ml_dtypes.float4_e2m1fn, FP4_E2M1FN),
    (ml_dtypes.float8_e8m0fnu, E8M0FNU),
])
def test_format_of_ml_dtypes(dtype, fmt):
    assert format_of(dtype) is fmt
    assert format_of(np.dtype(dtype)) is fmt


def test_format_of_torch_dtypes():
    torch = pytest.importorskip("torch")
    pairs = [(torch.float16, FP16), (torch.bfloat16, BF16), (torch.float32, FP32), (torch.float64, FP64),
             (torch.float8_e4m3fn, FP8_E4M3FN), (torch.float8_e5m2, FP8_E5M2), (torch.int32, INT32),
             (torch.int8, INT8), (torch.float8_e8m0fnu, E8M0FNU)]
    for dt, fmt in pairs:
        assert format_of(dt) is fmt, dt
    assert one(torch.tensor(65520.0), FP16) == 0x7C00  # a tensor's dtype names the source


def test_format_of_torch_tensor():
    torch = pytest.importorskip("torch")
    assert format_of(torch.zeros(2, dtype=torch.bfloat16)) is BF16


# ---- derived constants ---------------------------------------------------------------------------
def test_fp16_overflow_threshold():
    assert FP16.overflow_threshold("rne") == (65520, True)


def test_e4m3fn_overflow_threshold():
    assert FP8_E4M3FN.overflow_threshold("rne") == (464, False)


# THEORY.md §6: (bias, emax, emin, max finite, min normal, min subnormal)
THEORY = {
    FP64: (1023, 1023, -1022, (2 - F(1, 2**52)) * 2**1023, F(1, 2**1022), F(1, 2**1074)),
    FP32: (127, 127, -126, (2 - F(1, 2**23)) * 2**127, F(1, 2**126), F(1, 2**149)),
    TF32: (127, 127, -126, (2 - F(1, 2**10)) * 2**127, F(1, 2**126), F(1, 2**136)),
    BF16: (127, 127, -126, (2 - F(1, 2**7)) * 2**127, F(1, 2**126), F(1, 2**133)),
    FP16: (15, 15, -14, F(65504), F(1, 2**14), F(1, 2**24)),
    FP8_E4M3FN: (7, 8, -6, F(448), F(1, 2**6), F(1, 2**9)),
    FP8_E5M2: (15, 15, -14, F(57344), F(1, 2**14), F(1, 2**16)),
    FP8_E4M3: (7, 7, -6, F(240), F(1, 2**6), F(1, 2**9)),  # IEEE-style: the top exponent holds inf and NaN
    FP8_E3M4: (3, 3, -2, F(31, 2), F(1, 4), F(1, 2**6)),
    FP8_E4M3FNUZ: (8, 7, -7, F(240), F(1, 2**7), F(1, 2**10)),
    FP8_E5M2FNUZ: (16, 15, -15, F(57344), F(1, 2**15), F(1, 2**17)),
    FP6_E3M2FN: (3, 4, -2, F(28), F(1, 4), F(1, 2**4)),
    FP6_E2M3FN: (1, 2, 0, F(15, 2), F(1), F(1, 8)),
    FP4_E2M1FN: (1, 2, 0, F(6), F(1), F(1, 2)),
    E8M0FNU: (127, 127, -127, F(2**127), F(1, 2**127), F(1, 2**127)),  # no subnormals: the least value
    # unsigned, finite, one NaN (0xFF): the top exponent 16 holds 1.000..1.110, so max = 1.75 * 2^16
    no.formats.format_of("fp8_e5m3fnu"): (15, 16, -14, F(114688), F(1, 2**14), F(1, 2**17)),
}


@pytest.mark.parametrize("fmt", list(THEORY), ids=lambda f: f.name)
def test_constants_match_theory_table(fmt):
    bias, emax, emin, mx, mn, sub = THEORY[fmt]
    assert (fmt.bias, fmt.emax, fmt.emin) == (bias, emax, emin)
    assert (fmt.max_finite, fmt.min_normal, fmt.min_subnormal) == (mx, mn, sub)


def test_every_registry_float_is_in_the_theory_table_or_checked_by_ml_dtypes():
    floats = [f for f in no.formats.registry() if not f.is_integer]
    assert set(floats) - set(THEORY) == {FP8_E4M3B11FNUZ}
    assert (FP8_E4M3B11FNUZ.max_finite, FP8_E4M3B11FNUZ.min_subnormal) == (30, F(1, 2**13))
    assert INT8.max_value == 127 and INT8.min_value == -128


@pytest.mark.parametrize("fmt", [f for f in THEORY if f not in (FP64, FP32, FP16, TF32)] + [FP8_E4M3B11FNUZ],
                         ids=lambda f: f.name)
def test_constants_match_ml_dtypes_finfo(fmt):
    dtype = native_dtype(fmt)
    if dtype is None:
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no dtype for {fmt.name}")
    fi = ml_dtypes.finfo(dtype)
    assert F(float(fi.max)) == fmt.max_finite
    assert F(float(fi.smallest_subnormal)) == fmt.min_subnormal
    assert F(float(fi.smallest_normal)) == fmt.min_normal


# ---- user formats -------------------------------------------------------------------------------
def test_ieee_like_5_2_has_e5m2_values():
    codes = np.arange(256, dtype=np.uint8)
    mine, ref = decode(codes, Format.ieee_like(5, 2)), decode(codes, FP8_E5M2)
    np.testing.assert_array_equal(mine, ref)  # NaNs at the same codes compare equal here


def test_p3109_constants():
    p3 = Format.p3109(3)
    assert p3.max_finite == 49152 and p3.min_subnormal == F(1, 2**17)
    p4 = Format.p3109(4)
    assert p4.max_finite == 224 and p4.min_subnormal == F(1, 2**10)
    assert one(np.float32(-0.0), p3) == 0 and one(np.float32(np.nan), p3) == 0x80
    assert one(np.float32(np.inf), p3) == 0x7F


# ---- as_native / decode / encode --------------------------------------------------------------------
NATIVE = [BF16, FP16, FP8_E4M3FN, FP8_E5M2, FP8_E4M3FNUZ, FP8_E5M2FNUZ, FP8_E4M3B11FNUZ,
          FP6_E3M2FN, FP6_E2M3FN, FP4_E2M1FN, E8M0FNU]


@pytest.mark.parametrize("fmt", NATIVE, ids=lambda f: f.name)
def test_as_native_holds_the_decoded_values(fmt):
    codes = np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)
    native = as_native(codes, fmt)
    values = decode(codes, fmt)
    ok = ~np.isnan(values)
    np.testing.assert_array_equal(native[ok].astype(np.float64), values[ok])
    assert np.isnan(native[~ok].astype(np.float32)).all()
    np.testing.assert_array_equal(native.view(np.uint8 if fmt.bits <= 8 else np.uint16), codes)


@pytest.mark.parametrize("fmt", [FP16, FP32, TF32], ids=lambda f: f.name)
def test_as_native_round_trips_through_cast(fmt):
    codes = np.arange(0, 1 << fmt.bits, max(1, (1 << fmt.bits) >> 16), dtype=np.uint64).astype(fmt.code_dtype)
    ok = ~np.isnan(decode(codes, fmt))
    back = cast(as_native(codes, fmt), fmt)  # numpy float16 / float32 arrays are read back exactly
    np.testing.assert_array_equal(back[ok], codes[ok])


@pytest.mark.parametrize("fmt", [BF16, FP8_E4M3FN], ids=lambda f: f.name)
def test_as_native_round_trips_through_cast_ml_dtypes(fmt):
    codes = np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)
    ok = ~np.isnan(decode(codes, fmt))
    np.testing.assert_array_equal(cast(as_native(codes, fmt), fmt)[ok], codes[ok])


def test_as_native_int_and_fp32():
    c = cast(np.array([1.5, -2.0]), FP32)
    np.testing.assert_array_equal(as_native(c, FP32), np.array([1.5, -2.0], np.float32))
    c8 = cast(np.array([-3.0, 100.0]), INT8)
    np.testing.assert_array_equal(as_native(c8, INT8), np.array([-3, 100], np.int8))


def test_decode_is_exact_and_encode_inverts_it():
    codes = np.arange(1 << 16, dtype=np.uint16)
    vals = decode(codes, FP16)
    assert vals.dtype == np.float64
    ok = ~np.isnan(vals)
    np.testing.assert_array_equal(vals[ok], codes.view(np.float16)[ok].astype(np.float64))
    fin = np.isfinite(vals)
    np.testing.assert_array_equal(encode(vals[fin], FP16), codes[fin])
    assert decode(np.uint8(0x80), INT8) == -128


def test_encode_refuses_inexact_values():
    with pytest.raises(ValueError, match=r"0\.1.*not representable in fp16.*use cast\(\)"):
        encode(0.1, FP16)
    assert int(encode(0.5, FP16)) == 0x3800
    with pytest.raises(ValueError, match="not representable in int8"):
        encode(np.array([1, 200]), INT8)


def test_encode_infinity():
    assert int(encode(np.inf, FP16)) == 0x7C00


def test_tf32_codes_are_19_bit_and_native_is_float32():
    assert TF32.bits == 19
    x = np.array([1.0, -np.inf, 3.4e38, 0.1], np.float32)
    c = cast(x, TF32)
    assert int(c.max()) < 1 << 19 and int(c[0]) == 0x1FC00
    nat = as_native(c, TF32)
    assert nat.dtype == np.float32
    np.testing.assert_array_equal(nat[:2], x[:2])
    np.testing.assert_array_equal(nat.astype(np.float64), decode(c, TF32))
    # rne to 10 mantissa bits: 0.1f = 0x3dcccccd -> 0x3dccc000 in the container
    assert int(nat.view(np.uint32)[3]) == 0x3DCCC000


# ---- import cost -----------------------------------------------------------------------------------
def test_import_does_not_import_torch():
    code = "import sys, numoracle; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"


def test_import_is_fast():
    # measured here: ~0.25 s wall for the whole process (0.1 s of it the bare interpreter)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import numoracle"], check=True)
    wall = time.perf_counter() - t0
    assert wall < 2.0, f"python -c 'import numoracle' took {wall:.2f} s"
