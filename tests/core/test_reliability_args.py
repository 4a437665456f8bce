"""Strict arguments: encode refuses what it cannot hold, formats are never guessed, bools are bools,
sub-byte containers are masked as ml_dtypes masks them, and explain never contradicts the engine."""

from __future__ import annotations

import math
import time
from decimal import Decimal
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from numoracle import Format, cast, decode, encode, exact_sum, expected_error_bound, explain
from numoracle.core.engine.explanation import _show
from numoracle.core.formats.policy import Flags
from numoracle.core.scalar import value_of
from numoracle.formats import FP16, INT4, INT8, INT64, UINT4, as_native, format_of
from numoracle.testing import poison_like, read_golden, write_golden


# ---- encode ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "fmt"), [
    (Fraction(1, 3), "fp64"),
    (Decimal("0.1"), "fp64"),
    (2**70 + 1, "fp64"),
    (np.longdouble(1) / 3, "fp64"),
    (np.array([1, 2], np.longdouble) / 3, "fp32"),
    ("0.1", "fp16"),
    (2**64, "uint64"),
    ([Fraction(1, 2), Fraction(1, 3)], "fp16"),
])
def test_encode_refuses_values_it_cannot_hold(value, fmt):
    with pytest.raises(ValueError, match="not representable"):
        encode(value, fmt)


@pytest.mark.parametrize("value", [None, 1 + 1j, np.complex64(1), True, [1.0, None], np.array([True])])
def test_encode_refuses_non_numbers(value):
    with pytest.raises(TypeError):
        encode(value, "fp16")


def test_encode_takes_exact_python_numbers():
    vals = [Fraction(1, 2), Decimal("-0.25"), 2**70, "0x1p-3", np.longdouble(3), float("inf"), "-0"]
    got = encode(vals, "fp64").view(np.float64)
    assert list(got[:6]) == [0.5, -0.25, 2.0**70, 0.125, 3.0, float("inf")]
    assert np.signbit(got[6]) and got[6] == 0
    assert int(encode(np.longdouble(2) ** 63 - 1, "int64")) == 2**63 - 1


# ---- formats are never guessed -------------------------------------------------------------------
def test_format_of_none_refuses_and_so_do_cast_and_decode():
    with pytest.raises(TypeError, match="format is None"):
        format_of(None)
    with pytest.raises(TypeError, match="format is None"):
        cast(np.ones(2), None)
    with pytest.raises(TypeError, match="format is None"):
        decode(np.zeros(2, np.uint16), None)


@pytest.mark.parametrize(("code", "fmt"), [("i8", INT64), ("i1", INT8), ("<f2", FP16), ("u8", "uint64"),
                                           ("f8", "fp64"), ("i4", "int32")])
def test_numpy_dtype_codes_mean_what_numpy_means(code, fmt):
    assert format_of(code) == format_of(fmt) == format_of(np.dtype(code))


@pytest.mark.parametrize("code", ["i16", "i32", "i64", "f16", "b1", "c8"])
def test_numpy_like_codes_numpy_lacks_are_refused(code):
    with pytest.raises(ValueError, match=repr(code)):
        format_of(code)


# ---- bools are bools, ints are ints ---------------------------------------------------------------
@pytest.mark.parametrize("kw", [{"ftz": "no"}, {"daz": "yes"}, {"ftz": 1}, {"daz": None}])
def test_policy_flags_must_be_bools(kw):
    with pytest.raises(TypeError, match=next(iter(kw))):
        cast(np.ones(2, np.float32), "fp16", **kw)


def test_sr_bits_must_be_an_int_not_a_bool():
    with pytest.raises(ValueError, match="sr_bits"):
        cast(np.ones(2, np.float32), "fp16", rounding="sr", sr_bits=True, random_bits=np.zeros(2, np.uint32))
    with pytest.raises(ValueError, match="sr_bits"):
        cast(np.ones(2, np.float32), "fp16", rounding="sr", sr_bits=4.0, random_bits=np.zeros(2, np.uint32))
    assert cast(np.ones(2, np.float32), "fp16", ftz=np.bool_(True)).tolist() == [0x3C00, 0x3C00]


@pytest.mark.parametrize("pattern", [1.5, 1.0, "1", True])
def test_poison_pattern_must_be_an_int(pattern):
    with pytest.raises(TypeError, match="pattern"):
        poison_like(np.zeros(3, np.float16), pattern=pattern)


# ---- sub-byte containers ---------------------------------------------------------------------------
def _padded(fmt_dtype, raw):
    return np.array(raw, np.uint8).view(fmt_dtype)


def test_int4_padding_bits_are_masked_like_ml_dtypes():
    raw = [0x17, 0xFF, 0x08, 0xF7, 0x80]
    x = _padded(ml_dtypes.int4, raw)
    want = x.astype(np.int64)  # ml_dtypes' own reading: 7, -1, -8, 7, 0
    assert want.tolist() == [7, -1, -8, 7, 0]
    assert decode(cast(x, "int64"), INT64).tolist() == want.tolist()
    assert float(exact_sum(x)) == float(want.sum())
    u = _padded(ml_dtypes.uint4, [0x17, 0xFF, 0x20])
    assert decode(cast(u, "int64"), INT64).tolist() == u.astype(np.int64).tolist() == [7, 15, 0]


def test_int4_codes_out_of_range_are_refused_by_decode():
    with pytest.raises(ValueError, match="out of range for int4"):
        decode(np.array([0x17], np.uint8), INT4)
    assert decode(np.array([0xF], np.uint8), INT4).tolist() == [-1]


def test_golden_of_padded_int4_reads_back(tmp_path):
    x = _padded(ml_dtypes.int4, [0x17, 0xFF, 0x08])
    write_golden(tmp_path / "g.golden", x)
    g = read_golden(tmp_path / "g.golden")
    assert g.format == INT4 and decode(g.codes, INT4).tolist() == [7, -1, -8]
    u = _padded(ml_dtypes.uint4, [0xF3])
    write_golden(tmp_path / "u.golden", u)
    assert read_golden(tmp_path / "u.golden").codes.tolist() == [3] and UINT4.bits == 4


# ---- as_native -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("codes", "match"), [
    ([1.0], "integer codes"), (np.array([0.5], np.float16), "integer codes"),
    ([0x10000], "out of range"), ([-1], "out of range"), (np.array([1 + 1j]), "integer codes"),
])
def test_as_native_checks_its_codes(codes, match):
    with pytest.raises((TypeError, ValueError), match=match):
        as_native(codes, "fp16")


# ---- explain agrees with the engine ---------------------------------------------------------------
_POLICIES = [dict(rounding=r) for r in ("rne", "rna", "rtz", "ru", "rd", "rto")] + [
    dict(rounding="rne", ftz=True), dict(rounding="rd", ftz=True), dict(rounding="ru", ftz=True, daz=True),
    dict(rounding="rne", overflow="saturate"), dict(rounding="rtz", daz=True)]


def _ok_policy(pol: dict, dst) -> bool:
    return not (format_of(dst).is_integer and pol.get("ftz"))  # integers have no subnormals to flush


def check_explain_agrees(src: str, dst: str, codes: np.ndarray) -> int:
    """explain() of each code, under policies that rotate over the codes: code, flags and the stated result
    (the text after the decision's last '->') agree with cast(); 'exact' is said of a finite value iff no flag
    is raised."""
    pols = [p for p in _POLICIES if _ok_policy(p, dst)]
    n = 0
    for k, pol in enumerate(pols):
        part = codes[k::len(pols)]
        want, fl = cast(part, dst, src=src, flags=True, **pol)
        for c, w, f in zip(part.tolist(), want.tolist(), fl.tolist()):
            e = explain(c, dst, src=src, **pol)
            assert (e.code, int(e.flags)) == (w, f), (src, dst, pol, hex(c))
            stated = e.decision.rsplit("->", 1)[1].strip()
            assert stated == _show(value_of(w, dst)), (src, dst, pol, hex(c), e.decision)
            said_exact = ": exact ->" in e.decision
            if "is special" in e.decision:  # inf and NaN: passed through or handled by the policy
                assert not said_exact
            else:
                assert said_exact == (f == Flags.NONE), (src, dst, pol, hex(c), e.decision)
            n += 1
    return n


_SMALL = ["fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp8_e4m3b11fnuz", "e8m0fnu", "int8", "uint8",
          "fp6_e3m2fn", "fp6_e2m3fn", "fp4_e2m1fn", "int4", "uint4"]
_DSTS = [*_SMALL, "fp16", "bf16"]


@pytest.mark.parametrize("src", _SMALL)
def test_explain_agrees_with_the_engine_over_every_small_code(src):
    codes = np.arange(1 << format_of(src).bits, dtype=np.uint64).astype(format_of(src).code_dtype)
    n = sum(check_explain_agrees(src, dst, codes) for dst in _DSTS)
    assert n == len(codes) * len(_DSTS)


@pytest.mark.slow
@pytest.mark.parametrize(("src", "dst"), [("fp16", "fp8_e4m3fn"), ("bf16", "e8m0fnu"), ("bf16", "fp16"),
                                          ("fp16", "int8")])
def test_explain_agrees_with_the_engine_over_every_16_bit_code(src, dst):
    codes = np.arange(1 << 16, dtype=np.uint64).astype(np.uint16)
    assert check_explain_agrees(src, dst, codes) == 1 << 16


@pytest.mark.parametrize("x", [1.0, np.float32(1.0), np.float16(1.0), np.array([1.0]), 1.5, "1"])
def test_explain_with_src_refuses_what_is_not_an_integer_code_as_cast_does(x):
    """explain(np.float32(1.0), src="fp16") read the float as code 1 (1/16777216); cast refuses it."""
    msg = r"with src=fp16, {} must hold integer codes \(bit patterns\) of fp16, but it has dtype"
    with pytest.raises(TypeError, match=msg.format("x")):
        cast(x, "fp32", src="fp16")
    with pytest.raises(TypeError, match=msg.format("value")):
        explain(x, "fp32", src="fp16")


def test_explain_with_src_takes_integer_codes_of_any_integer_type():
    for code in (0x3C00, np.uint16(0x3C00), np.int64(0x3C00), np.array([0x3C00], np.uint16), np.array(0x3C00)):
        e = explain(code, "fp32", src="fp16")
        assert e.value == 1 and e.code == 0x3F800000
    assert explain(0xBFF0000000000000, "fp32", src="fp64").value == -1  # codes past 2^63
    with pytest.raises(ValueError, match="explain takes one code, got an array of 2"):
        explain(np.array([1, 2], np.uint16), "fp32", src="fp16")
    with pytest.raises(ValueError, match="out of range for fp16"):
        explain(0x10000, "fp32", src="fp16")


# ---- bounded work ------------------------------------------------------------------------------------
@pytest.mark.parametrize("K", [10**12, 10**16, 10**18, 10**100])
@pytest.mark.parametrize("kind", ["worst", "probabilistic"])
def test_error_bounds_of_huge_K_answer_in_milliseconds(K, kind):
    t = time.perf_counter()
    b = expected_error_bound("matmul", "bf16", K, kind=kind)
    tol = b.rtol_atol()
    text = str(b)
    assert time.perf_counter() - t < 0.5
    assert b.coefficient == math.inf and tol.rtol == math.inf and "inf" in text


def test_large_but_finite_bounds_stay_exact():
    b = expected_error_bound("matmul", "bf16", 262144)  # (1 + 2^-8)^262143 - 1 ~ 7e443: past floats, exact
    assert isinstance(b.coefficient, Fraction) and b.coefficient > Fraction(10) ** 443


@pytest.mark.parametrize(("e", "m"), [(15, 48), (12, 10), (10, 53), (15, 64), (11, 53)])
def test_formats_wider_than_the_engine_are_refused_when_built(e, m):
    with pytest.raises(ValueError, match="all FP64 values|wider than 64 bits"):
        Format.ieee_like(e, m)


def test_the_widest_carried_formats_are_accepted():
    assert Format.ieee_like(11, 52) == format_of("fp64")
    assert Format.ieee_like(11, 40).max_finite < 2**1024
    with pytest.raises(ValueError, match="smallest value"):
        Format("low", 11, 52, 1100)  # values below 2^-1074


# ---- the shared helpers: choices, numbers, arrays ---------------------------------------------
def test_check_choice_number_and_array_name_the_argument():
    from numoracle.core.args import check_array, check_choice, check_number
    from numoracle.core.errors import ArgumentTypeError

    assert check_choice("gptq", "convention", ("gptq", "awq")) == "gptq"
    with pytest.raises(ValueError, match="convention must be one of 'gptq', 'awq', got 'x'"):
        check_choice("x", "convention", ("gptq", "awq"))
    with pytest.raises(ArgumentTypeError, match="convention must be one of .* got ndarray"):
        check_choice(np.array([]), "convention", ("gptq", "awq"))
    assert check_number(5, "max_seconds") == 5.0
    assert check_number(Fraction(1, 4), "s", 0, 1) == 0.25
    for bad in (0, -1.0, math.nan, math.inf, 2**80):
        with pytest.raises(ValueError, match=r"max_seconds must be a number in \(0, 1e\+09\]"):
            check_number(bad, "max_seconds", 0.0, 1e9)
    for bad in (True, "5", 1j, np.ones(1)):
        with pytest.raises(TypeError, match="max_seconds must be a number"):
            check_number(bad, "max_seconds")
    bf = np.ones(3, ml_dtypes.bfloat16)
    assert check_array(bf, "scales", np.float64).dtype == np.float64
    assert check_array([1, 2], "codes").dtype.kind == "i"
    for bad in ([[1.0], [2.0, 3.0]], np.array(["a"]), np.array([1j]), [True], None, object()):
        with pytest.raises(ValueError, match="scales must be an array of"):
            check_array(bad, "scales")


def test_codebook_blocks_longer_than_the_array_are_one_block():
    """A block longer than the array is one partial block (bitsandbytes 0.50.2 divides such a block by its absmax,
    a full block multiplies by the reciprocal: block=40 on 40 values is a full block, block=41 is not)."""
    from numoracle.quant import dequantize_codebook, quantize_codebook

    x = np.linspace(-1, 2, 40, dtype=np.float32)
    one, huge = quantize_codebook(x, "nf4", block=41), quantize_codebook(x, "nf4", block=2**80)
    assert np.array_equal(one.codes, huge.codes) and np.array_equal(one.absmax, huge.absmax)
    assert np.array_equal(dequantize_codebook(huge.codes, huge.absmax, "nf4", 2**80), one.dequantize())
    assert np.array_equal(huge.absmax_per_element(), np.full(40, one.absmax[0]))
    with pytest.raises(ValueError, match="block must lie in"):
        quantize_codebook(x, "nf4", block=0)
