"""Exact input parsing: one reader (numoracle.core.parse) for text and scalars, linear time, any exponent."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numoracle import expected_error_bound
from numoracle.cli import main
from numoracle.core.errors import NumoracleError, ParseError
from numoracle.core.parse import MAX_DIGITS, RANGE_EXP, parse_number, read_exact
from numoracle.core.scalar import round_value


def cast_json(capsys, *argv: str) -> dict:
    rc = main(["cast", *argv, "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


# ---- the reader --------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "value"), [
    ("0x1.002000000000001p0", Fraction(0x1002000000000001, 2**60)),
    ("0x1p-1080", Fraction(1, 2**1080)),
    ("1e309", Fraction(10**309)),
    ("-0.000_1", Fraction(-1, 10**4)),
    ("1/3", Fraction(1, 3)),
    ("  +2.5E+3 ", Fraction(2500)),
    ("0x.8p1", Fraction(1)),
    ("1" + "0" * 4900, Fraction(10**4900)),  # trailing zeros do not count as digits
], ids=lambda v: v[:20] if isinstance(v, str) else "v")
def test_parse_is_exact(text, value):
    n = parse_number(text)
    assert n.kind == "finite" and n.value == value


@pytest.mark.parametrize(("text", "kind", "negative"), [
    ("1e99999999", "huge", False), ("0x1p999999999", "huge", False), ("-1e5000", "huge", True),
    ("1e-999999", "tiny", False), ("-0x1p-999999999999999", "tiny", True), ("1e-99999999999999999999", "tiny", False),
])
def test_values_beyond_the_range_are_kept_by_their_side(text, kind, negative):
    n = parse_number(text)
    assert (n.kind, n.negative, n.exact) == (kind, negative, False)


@pytest.mark.parametrize("text", ["1e-999999", "1e99999999", "0x1p999999999", "1e-100000", "9" * MAX_DIGITS,
                                  "0x" + "f" * MAX_DIGITS + "p-99999", "1e-4900"],
                         ids=lambda v: v[:20])
def test_parse_is_fast(text):
    t = time.perf_counter()
    parse_number(text)
    assert time.perf_counter() - t < 0.5


def test_limits_are_named_in_the_message():
    with pytest.raises(ParseError, match=f"at most {MAX_DIGITS} \\(parse.MAX_DIGITS\\)"):
        parse_number("1" * (MAX_DIGITS + 1))
    with pytest.raises(ParseError, match="parse.MAX_CHARS"):
        parse_number("1" * 30000)
    with pytest.raises(ParseError, match=f"beyond 2\\^{RANGE_EXP}.*parse.RANGE_EXP"):
        read_exact("1e99999999", "kappa")


@pytest.mark.parametrize("text", ["", "1e", "0x1", "0x1.8", "1/0", "1..2", "abc", "1e5e5", "--1", "0xp3", "_1"])
def test_malformed_text_is_refused_naming_the_argument(text):
    with pytest.raises(ParseError, match="^myarg"):
        parse_number(text, "myarg")


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**80), 2**80), st.integers(-1100, 1100))
def test_hex_and_decimal_text_read_back_exactly(m, e):
    x = Fraction(m) * Fraction(2) ** e
    assert parse_number(f"{'-' if m < 0 else ''}{hex(abs(m))}p{e}").value == x
    if e < 0:  # m * 2^e = m * 5^-e * 10^e exactly
        dec = f"{m * 5 ** -e}e{e}"
    else:
        dec = str(m * 2**e)
    assert parse_number(dec).value == x


def test_read_exact_takes_every_number_type_exactly():
    assert read_exact(Decimal("0.1")) == Fraction(1, 10)
    assert read_exact(np.longdouble(1) / 3) == Fraction(*(np.longdouble(1) / 3).as_integer_ratio())
    assert read_exact(np.float16(0.1)) == Fraction(float(np.float16(0.1)))
    assert read_exact(2**70 + 1) == 2**70 + 1
    for bad in (None, 1 + 1j, True, np.bool_(True), [1.0], "nan"):
        with pytest.raises((TypeError, ValueError), match="^x"):
            read_exact(bad, "x")


# ---- the command line ----------------------------------------------------------------------------
def test_hex_float_is_not_rounded_through_fp64(capsys):
    d = cast_json(capsys, "0x1.002000000000001p0", "--to", "fp16")
    assert d["code"] == "0x3c01" and d["exact"] is False and "INEXACT" in d["flags"]


def test_tiny_hex_float_underflows_with_flags(capsys):
    d = cast_json(capsys, "0x1p-1080", "--to", "fp16")
    assert d["code"] == "0x0000" and set(d["flags"]) == {"INEXACT", "UNDERFLOW"} and d["exact"] is False
    d = cast_json(capsys, "0x1p-1080", "--to", "fp64", "--rounding", "ru")
    assert d["code"] == "0x0000000000000001" and "UNDERFLOW" in d["flags"]


@pytest.mark.parametrize(("value", "dst", "extra", "code", "flags"), [
    ("1e309", "fp16", [], "0x7c00", {"INEXACT", "OVERFLOW"}),
    ("1e309", "fp64", [], "0x7ff0000000000000", {"INEXACT", "OVERFLOW"}),
    ("1e309", "fp64", ["--rounding", "rtz"], "0x7fefffffffffffff", {"INEXACT", "OVERFLOW"}),
    ("-1e309", "fp16", ["--rounding", "rd"], "0xfc00", {"INEXACT", "OVERFLOW"}),
    ("1e99999999", "fp8_e4m3fn", [], "0x7f", {"INEXACT", "OVERFLOW"}),
    ("1e99999999", "fp8_e4m3fn", ["--overflow", "saturate"], "0x7e", {"INEXACT", "OVERFLOW"}),
    ("0x1p999999999", "bf16", [], "0x7f80", {"INEXACT", "OVERFLOW"}),
    # IEEE 754-2019 §5.8: out of range into an integer is invalid
    ("-0x1p999999999", "int8", ["--overflow", "saturate"], "0x80", {"INVALID"}),
    ("1e-999999", "fp16", [], "0x0000", {"INEXACT", "UNDERFLOW"}),
    ("1e-999999", "fp64", ["--rounding", "ru"], "0x0000000000000001", {"INEXACT", "UNDERFLOW"}),
    ("-1e-999999", "fp32", ["--rounding", "rd"], "0x80000001", {"INEXACT", "UNDERFLOW"}),
])
def test_values_beyond_fp64_round_by_the_policy_quickly(capsys, value, dst, extra, code, flags):
    t = time.perf_counter()
    d = cast_json(capsys, value, "--to", dst, *extra)
    assert time.perf_counter() - t < 2
    assert d["code"] == code and set(d["flags"]) == flags and d["exact"] is False


def test_cli_cast_code_matches_exact_reference(capsys):
    rng = np.random.default_rng(5)
    for _ in range(60):
        m, e = int(rng.integers(1, 10**15)), int(rng.integers(-340, 320))
        mode = ["rne", "rtz", "ru", "rd", "rna", "rto"][int(rng.integers(0, 6))]
        dst = ["fp64", "fp32", "fp16", "bf16", "fp8_e5m2", "int32"][int(rng.integers(0, 6))]
        d = cast_json(capsys, f"{m}e{e}", "--to", dst, "--rounding", mode)
        code, fl = round_value(Fraction(m) * Fraction(10) ** e, dst, rounding=mode, flags=True)
        assert int(d["code"], 16) == code, (m, e, mode, dst)
        assert set(d["flags"]) == {f.name for f in type(fl) if f.value and fl & f}, (m, e, mode, dst)


# ---- other readers -------------------------------------------------------------------------------
def test_tolerance_reads_kappa_and_max_abs_exactly():
    b = expected_error_bound("sum", "fp32", 1000)
    with pytest.raises(NumoracleError, match="kappa must be finite"):
        b.rtol_atol(kappa=float("inf"))
    with pytest.raises(NumoracleError, match="kappa"):
        b.rtol_atol(kappa="1e99999999")
    third = b.rtol_atol(max_abs=Fraction(1, 3)).atol
    below = b.rtol_atol(max_abs=float(Fraction(1, 3))).atol  # float(1/3) < 1/3
    assert third >= below
