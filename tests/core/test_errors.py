"""Bad input gets an error that names the problem and the fix."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle import Format, cast, decode
from numoracle.formats import format_of

X = np.array([1.0, 2.0])


# ---- format names ---------------------------------------------------------------------------
def test_unknown_format_lists_close_matches():
    with pytest.raises(ValueError, match=r"unknown format 'flaot16'; did you mean 'float16'"):
        format_of("flaot16")
    with pytest.raises(ValueError, match=r"unknown format 'fp61'; did you mean 'fp64', 'fp16'"):
        cast(X, "fp61")


def test_unknown_format_without_close_match_points_to_the_list():
    with pytest.raises(ValueError, match=r"unknown format 'zzzz' \(numoracle formats lists them all\)"):
        format_of("zzzz")


@pytest.mark.parametrize(("name", "candidates"), [
    ("e4m3", "fp8_e4m3fn, fp8_e4m3, fp8_e4m3fnuz, fp8_e4m3b11fnuz"),
    ("fp8", "fp8_e4m3fn, fp8_e5m2, fp8_e4m3fnuz, fp8_e5m2fnuz"),
    ("fp6", "fp6_e3m2fn, fp6_e2m3fn"),
])
def test_ambiguous_name_lists_candidates(name, candidates):
    with pytest.raises(ValueError, match=f"format name '{name}' is ambiguous; say which: {candidates}"):
        format_of(name)


def test_unresolvable_object():
    with pytest.raises(TypeError, match="cannot resolve a format from 5"):
        format_of(5)


# ---- codes ------------------------------------------------------------------------------------
def test_code_out_of_range_for_the_source_width():
    with pytest.raises(ValueError, match=r"code 0x1ffff is out of range for fp16 \(16 bits: 0\.\.0xffff\)"):
        cast(np.array([0x3C00, 0x1FFFF]), "fp32", src="fp16")
    with pytest.raises(ValueError, match=r"code 0x10 is out of range for fp4_e2m1fn"):
        cast(np.array([0x10]), "fp32", src="fp4_e2m1fn")


def test_negative_code():
    with pytest.raises(ValueError, match="codes are unsigned bit patterns; got a negative value -1"):
        cast(np.array([-1]), "fp32", src="fp16")


def test_float_array_passed_with_src():
    with pytest.raises(TypeError, match=r"with src=fp32, x must hold integer codes.*dtype float64.*without src="):
        cast(X, "fp16", src="fp32")
    with pytest.raises(TypeError, match="integer codes"):
        decode(np.array([1.0]), "fp16")


@pytest.mark.parametrize("bad", [np.array(["a"]), np.array([True])])
def test_non_numeric_arrays(bad):
    with pytest.raises(TypeError, match=f"cannot convert an array of dtype {bad.dtype}"):
        cast(bad, "fp16")


# ---- policy typos -----------------------------------------------------------------------------
def test_rounding_typo_lists_valid_modes():
    with pytest.raises(ValueError, match=r"unknown rounding mode 'rnee' \(did you mean 'rne'\?\); "
                                         r"valid: rne, rna, rtz, ru, rd, rto, sr"):
        cast(X, "fp16", rounding="rnee")


def test_overflow_typo_lists_valid_policies():
    with pytest.raises(ValueError, match=r"unknown overflow policy 'saturte' \(did you mean 'saturate'\?\); "
                                         r"valid: ieee, saturate, nan, wrap"):
        cast(X, "fp16", overflow="saturte")


def test_nan_to_typo_lists_valid_policies():
    with pytest.raises(ValueError, match=r"unknown nan_to policy 'zer'.*valid: max, zero, min, raise"):
        cast(X, "int8", nan_to="zer")


def test_policy_of_the_wrong_type():
    with pytest.raises(TypeError, match="rounding mode must be a string or Rounding, got int"):
        cast(X, "fp16", rounding=1)


# ---- stochastic rounding ------------------------------------------------------------------------
def test_sr_without_sr_bits():
    with pytest.raises(ValueError, match=r"rounding='sr' needs sr_bits.*random_bits.*reproducible"):
        cast(X, "fp16", rounding="sr")


def test_sr_without_random_bits():
    with pytest.raises(ValueError, match=r"rounding='sr' needs random_bits: .*one per element"):
        cast(X, "fp16", rounding="sr", sr_bits=8)


def test_sr_random_bits_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"random_bits has shape \(3,\), but x has shape \(2,\); give one per element"):
        cast(X, "fp16", rounding="sr", sr_bits=8, random_bits=np.zeros(3, np.uint8))


def test_sr_random_bits_out_of_range():
    with pytest.raises(ValueError, match=r"random_bits must lie in \[0, 2\*\*8\); got 0\.\.256"):
        cast(X, "fp16", rounding="sr", sr_bits=8, random_bits=np.array([0, 256]))


def test_sr_bits_out_of_range():
    with pytest.raises(ValueError, match="sr_bits must be an int in 1..32, got 40"):
        cast(X, "fp16", rounding="sr", sr_bits=40, random_bits=np.zeros(2, np.uint64))


def test_random_bits_without_sr():
    with pytest.raises(ValueError, match="random_bits are only used with rounding='sr', not 'rne'"):
        cast(X, "fp16", random_bits=np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="sr_bits is only used with rounding='sr', not 'rtz'"):
        cast(X, "fp16", rounding="rtz", sr_bits=8)


# ---- policies that cannot apply to the destination ------------------------------------------------
def test_wrap_to_a_float_format():
    with pytest.raises(ValueError, match="overflow='wrap' applies to integer destinations only, not fp16; "
                                         "use 'ieee' or 'saturate'$"):
        cast(X, "fp16", overflow="wrap")


@pytest.mark.parametrize("dst", ["int8", "uint4", "int64"])
def test_ieee_overflow_to_an_integer_names_wrap(dst):
    with pytest.raises(ValueError, match=f"overflow='ieee' needs infinities, which {dst} lacks; "
                                         "use 'saturate' or 'wrap'$"):
        cast(X, dst, overflow="ieee")


def test_a_refused_overflow_policy_suggests_exactly_the_ones_the_destination_takes():
    """For every registry format: the policies a refusal suggests are exactly those that cast takes."""
    import re

    from numoracle import Overflow
    from numoracle.formats import registry

    for fmt in registry():
        taken, refused = set(), {}
        for o in Overflow:
            try:
                cast(X, fmt, overflow=o.value)
                taken.add(o.value)
            except ValueError as e:
                refused[o.value] = str(e)
        assert refused, fmt.name
        for o, msg in refused.items():
            assert set(re.findall(r"'(\w+)'", msg.split(" use ", 1)[1])) == taken, (fmt.name, o, msg)


def test_nan_overflow_to_a_format_without_nan():
    with pytest.raises(ValueError, match="overflow='nan' needs a NaN, which fp6_e2m3fn lacks; use 'saturate'"):
        cast(X, "fp6_e2m3fn", overflow="nan")
    with pytest.raises(ValueError, match="overflow='nan' needs a NaN, which int8 lacks"):
        cast(X, "int8", overflow="nan")


def test_nan_overflow_to_a_format_with_inf():
    with pytest.raises(ValueError, match="overflow='nan' is for formats without infinities; fp16 has them: use 'ieee'"):
        cast(X, "fp16", overflow="nan")


def test_ieee_overflow_to_a_format_without_inf():
    with pytest.raises(ValueError, match="overflow='ieee' needs infinities, which fp8_e4m3fn lacks; use 'nan'"):
        cast(X, "fp8_e4m3fn", overflow="ieee")


def test_nan_to_on_a_format_that_has_nan():
    with pytest.raises(ValueError, match=r"nan_to applies to formats without NaN; fp16 has a NaN \(NaN stays NaN\)"):
        cast(X, "fp16", nan_to="zero")


@pytest.mark.parametrize(("dst", "fixes"), [
    ("int8", "'zero', 'max' or 'min'"),
    ("fp4_e2m1fn", "'max', 'zero' or 'min'"),
])
def test_nan_to_raise(dst, fixes):
    with pytest.raises(ValueError, match=f"NaN has no representation in {dst} and nan_to='raise'; pass nan_to={fixes}"):
        cast(np.array([1.0, np.nan]), dst, nan_to="raise")
    assert cast(X, dst, nan_to="raise").shape == (2,)  # no NaN, no error


def test_ftz_to_an_integer():
    with pytest.raises(ValueError, match="ftz flushes subnormal results.*drop ftz=True"):
        cast(X, "int8", ftz=True)


# ---- user formats ----------------------------------------------------------------------------------
def test_invalid_user_formats():
    with pytest.raises(ValueError, match="nan='fn' formats have no infinities"):
        Format("bad", 5, 2, 15, nan="fn")
    with pytest.raises(ValueError, match="P3109 needs precision < bits, got P=8 for 8 bits"):
        Format.p3109(8)
    with pytest.raises(ValueError, match=r"nan must be one of \('ieee', 'fn', 'fnuz', 'none'\), got 'fnu'"):
        Format("bad", 4, 3, 7, nan="fnu")


def test_format_without_a_native_dtype():
    from numoracle.formats import as_native

    with pytest.raises(ValueError, match="e3m2 has no numpy or ml_dtypes dtype; use decode"):
        as_native(np.array([1]), Format.ieee_like(3, 2))


def test_big_endian_arrays_give_the_values_codes():
    from numoracle.core.formats.interop import to_codes

    for dt, code in (("<f4", 0x3F800000), (">f4", 0x3F800000), (">f8", 0x3FF0000000000000), (">i2", 1)):
        codes, _ = to_codes(np.array([1], dt))
        assert int(codes[0]) == code, dt
    assert cast(np.array([65519.0], ">f8"), "fp16").tolist() == [0x7BFF]
