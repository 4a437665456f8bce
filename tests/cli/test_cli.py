"""The ``numoracle`` command line, run in-process through ``main(argv)``."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import numpy as np
import pytest

from numoracle import cast, decode
from numoracle.cli.app import exact_decimal, main, show_exact
from numoracle.formats import FP8_E4M3FN, registry


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def cast_json(capsys, *argv: str) -> dict:
    rc, out, err = run(capsys, "cast", *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def rows(text: str) -> dict[str, str]:
    """Two-column output -> {key: value} (columns are separated by two or more spaces)."""
    out = {}
    for line in text.splitlines():
        parts = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        if len(parts) == 2:
            out[parts[0]] = parts[1]
    return out


# ---- formats / info ------------------------------------------------------------------------
def test_formats_lists_every_registry_format_aligned(capsys):
    rc, out, _ = run(capsys, "formats")
    assert rc == 0
    registry_part, *held = out.split("\n\n")  # the registry first, then one section per kind of held format
    assert [h.splitlines()[0].split(" (")[0] for h in held] == [
        "codebooks", "GGUF block types", "packed int4 conventions", "IEEE P3109 8-bit formats"]
    rc, alone, _ = run(capsys, "formats", "--kind", "registry")
    assert rc == 0 and alone.strip() == registry_part.strip()
    lines = registry_part.splitlines()
    assert lines[0].split()[:5] == ["name", "bits", "e", "m", "bias"]
    names = [ln.split()[0] for ln in lines[2:]]
    assert names == [f.name for f in registry()]
    fp16 = next(ln for ln in lines if ln.startswith("fp16 "))
    assert fp16.split() == ["fp16", "16", "5", "10", "15", "ieee", "yes", "yes", "yes", "65504", "2^-14", "2^-24"]
    e4m3 = next(ln for ln in lines if ln.startswith("fp8_e4m3fn "))
    assert e4m3.split()[5:10] == ["fn", "no", "yes", "yes", "448"]
    # aligned: the "bits" column starts at the same offset on every line
    col = lines[0].index("bits")
    assert all(ln[col - 2: col] == "  " and ln[col] != " " for ln in lines[2:])


def test_info_e4m3fn_shows_max_and_the_rne_threshold(capsys):
    rc, out, _ = run(capsys, "info", "fp8_e4m3fn")
    assert rc == 0
    r = rows(out)
    assert r["max_finite"] == "448  (0x7e)"
    assert r["-max_finite"] == "-448  (0xfe)"
    assert r["min_subnormal"] == "0.001953125  (0x01)"
    assert r["overflow_threshold[rne]"] == "|x| > 464"  # 464 itself ties down to 448
    assert r["overflow_threshold[rna]"] == "|x| >= 464"
    assert r["overflow_threshold[rtz]"] == "|x| >= 480"
    assert r["canonical NaN"] == "0x7f" and r["-0"] == "0x80"
    assert "unit_roundoff[rne,rna]" in r and r["unit_roundoff[rne,rna]"] == "0.0625"


def test_info_fp16_thresholds_per_mode_and_sign(capsys):
    _, out, _ = run(capsys, "info", "half")
    r = rows(out)
    assert r["name"].startswith("fp16")
    assert r["overflow_threshold[rne]"] == "|x| >= 65520"
    assert r["overflow_threshold[ru]"] == "|x| > 65504 for x > 0; |x| >= 65536 for x < 0"
    assert r["min_subnormal"] == "2^-24 ≈ 5.9604645e-8  (0x0001)"
    assert r["+inf"] == "0x7c00"
    assert r["default policy"] == "rne, overflow=ieee"


@pytest.mark.parametrize("fmt", registry(), ids=lambda f: f.name)
def test_info_codes_decode_to_the_constants(capsys, fmt):
    rc, out, err = run(capsys, "info", fmt.name)
    assert rc == 0, err
    r = rows(out)
    # a format without subnormals says so (its least positive value is min_normal)
    key = "min_value" if fmt.is_integer else "min_subnormal" if fmt.has_subnormals else "min_normal"
    for k, want in (("max_value", fmt.max_value) if fmt.is_integer else ("max_finite", fmt.max_finite),
                    (key, fmt.min_value if fmt.is_integer else fmt.min_subnormal)):
        code = int(r[k].rsplit("(", 1)[1].rstrip(")"), 16)
        assert Fraction(decode(np.array([code], np.uint64), fmt)[0].item()) == want


# ---- cast ----------------------------------------------------------------------------------
def test_cast_65519_to_fp16(capsys):
    rc, out, _ = run(capsys, "cast", "65519", "--to", "fp16")
    assert rc == 0
    r = rows(out)
    assert (r["code"], r["value"], r["flags"]) == ("0x7bff", "65504", "INEXACT")
    assert r["below"] == "0x7bff  65504" and r["above"] == "0x7c00  +inf"
    assert "exactly representable" not in out


def test_cast_65520_to_fp16_is_inf(capsys):
    d = cast_json(capsys, "65520", "--to", "fp16")
    assert (d["code"], d["result"]) == ("0x7c00", "+inf")
    assert d["flags"] == ["INEXACT", "OVERFLOW"]
    assert d["below"] == {"code": "0x7bff", "value": "65504"}
    assert d["source"] == {"format": "fp64", "code": "0x40effe0000000000", "how": "exact"}
    assert d["policy"]["overflow"] == "ieee" and d["exact"] is False


def test_cast_negative_values_and_policies(capsys):
    d = cast_json(capsys, "-1e9", "--to", "fp16", "--rounding", "ru")
    assert (d["code"], d["result"]) == ("0xfbff", "-65504")
    d = cast_json(capsys, "464.5", "--to", "e4m3fn", "--overflow", "sat")
    assert (d["code"], d["result"]) == ("0x7e", "448")
    d = cast_json(capsys, "-inf", "--to", "int8", "--nan-to", "min")
    assert d["code"] == "0x80"  # -inf saturates to the minimum, nan_to does not apply
    d = cast_json(capsys, "nan", "--to", "int8", "--nan-to", "min")
    assert (d["code"], d["result"], d["flags"]) == ("0x80", "-128", ["INVALID"])
    assert d["below"] is None and d["above"] is None
    d = cast_json(capsys, "300", "--to", "int8", "--overflow", "wrap")
    assert d["result"] == "44" and d["above"] is None and d["below"]["value"] == "127"


def test_cast_ftz_and_daz(capsys):
    assert cast_json(capsys, "-1e-7", "--to", "fp16")["code"] == "0x8002"
    d = cast_json(capsys, "-1e-7", "--to", "fp16", "--ftz")
    assert (d["code"], d["result"]) == ("0x8000", "-0")
    assert "UNDERFLOW" in d["flags"]
    d = cast_json(capsys, "0x0001", "--from", "fp16", "--to", "fp32", "--daz")
    assert d["code"] == "0x00000000"


@pytest.mark.parametrize("mode", ["rd", "ru", "rne"])
@pytest.mark.parametrize("sign", ["", "-"])
def test_cast_daz_flushes_a_subnormal_source_on_the_exact_path_as_on_the_code_path(capsys, mode, sign):
    """0x1p-1023 (an FP64 code) and 0x1.00000000000001p-1023 (exact, no FP64 code stands for it into fp64)
    are both subnormal sources: with --daz both read as a zero of their sign, as numoracle.cast does."""
    zero = (1 << 63) if sign else 0
    code, fl = cast(np.array([-(2.0**-1023) if sign else 2.0**-1023]), "fp64", rounding=mode, daz=True, flags=True)
    assert (int(code.view(np.uint64)[0]), int(fl[0])) == (zero, 0)  # the Python API
    want = {"code": f"0x{zero:016x}", "result": f"{sign}0", "flags": [], "exact": False,
            "below": {"code": f"0x{zero:016x}", "value": f"{sign}0"}, "above": {"code": f"0x{zero:016x}",
                                                                               "value": f"{sign}0"}}
    for text, how in ((f"{sign}0x1p-1023", "exact"), (f"{sign}0x1.00000000000001p-1023", "exact reference"),
                      (f"{sign}1e-400", "exact reference")):
        d = cast_json(capsys, text, "--to", "fp64", "--rounding", mode, "--daz")
        assert d["source"]["how"] == how and d["policy"]["daz"] is True
        assert {k: d[k] for k in want} == want, text
        assert d["notes"][-1] == f"--daz: {text} lies below fp64's smallest normal (2^-1022): a subnormal input, " \
                                 f"read as {sign}0"
    d = cast_json(capsys, f"{sign}0x1.00000000000001p-1023", "--to", "fp64", "--rounding", mode)  # without --daz
    assert d["flags"] == ["INEXACT", "UNDERFLOW"] and d["result"] != f"{sign}0"
    assert not any(n.startswith("--daz") for n in d["notes"])
    d = cast_json(capsys, f"{sign}0x1.00000000000001p-1022", "--to", "fp64", "--rounding", mode, "--daz")
    assert d["flags"] == ["INEXACT"] and "e-308" in d["result"]  # normal: daz leaves it alone


def test_cast_from_a_code_and_from_a_value(capsys):
    d = cast_json(capsys, "0x7bff", "--from", "fp16", "--to", "fp8_e5m2")
    assert d["value"] == "65504" and d["code"] == "0x7c"  # 65504 > 61440: rounds to inf
    d = cast_json(capsys, "3.5", "--from", "fp32", "--to", "int8", "--rounding", "rtz")
    assert d["source"]["code"] == "0x40600000" and d["result"] == "3"
    d = cast_json(capsys, "0x8000", "--from", "fp16", "--to", "fp8_e4m3fnuz")
    assert d["value"] == "-0" and d["code"] == "0x00"
    d = cast_json(capsys, "0x1fc00", "--from", "tf32", "--to", "bf16")
    assert d["value"] == "1" and d["code"] == "0x3f80" and d["exact"] is True


def test_cast_exact_value_reports_itself_as_both_neighbours(capsys):
    rc, out, _ = run(capsys, "cast", "448", "--to", "fp8_e4m3fn")
    assert "[exactly representable]" in out
    r = rows(out)
    assert r["below"] == r["above"] == "0x7e  448" and r["flags"] == "none"


def test_cast_e8m0_has_nothing_below_its_least_value(capsys):
    d = cast_json(capsys, "1e-50", "--to", "e8m0fnu")
    assert d["code"] == "0x00" and d["below"] is None and d["above"]["code"] == "0x00"
    assert cast_json(capsys, "0", "--to", "e8m0fnu")["code"] == "0xff"


# Values that FP64 cannot hold. Rounding them to FP64 first would round twice and get these
# wrong; the round-to-odd stand-in keeps them exact.
@pytest.mark.parametrize(("value", "rounding", "code"), [
    ("65519.999999999999999999", "rne", "0x7bff"),  # FP64 rounds it up to 65520, which overflows
    ("1.00048828125000000000000000001", "rne", "0x3c01"),  # a hair above the tie 1 + 2^-11
    ("1.00048828124999999999999999999", "rna", "0x3c00"),  # a hair below it
    ("1.00000000000000000000000000001", "ru", "0x3c01"),
    ("-1.00000000000000000000000000001", "rtz", "0xbc00"),
    ("-1.00000000000000000000000000001", "rto", "0xbc01"),
    ("1/3", "rne", "0x3555"),
])
def test_cast_values_not_exact_in_fp64(capsys, value, rounding, code):
    d = cast_json(capsys, value, "--to", "fp16", "--rounding", rounding)
    assert d["code"] == code
    assert d["source"]["how"] == "round-to-odd stand-in" and "INEXACT" in d["flags"]
    assert "not exact in FP64" in d["notes"][0]


def _brute_force(x: Fraction, values: list[Fraction], mode: str) -> Fraction:
    """Round x to the sorted finite values by the definition (x strictly inside their range)."""
    lo = max(v for v in values if v <= x)
    hi = min(v for v in values if v >= x)
    if lo == hi:
        return lo
    if mode == "rd":
        return lo
    if mode == "ru":
        return hi
    if mode == "rtz":
        return lo if x > 0 else hi
    d_lo, d_hi = x - lo, hi - x
    if d_lo != d_hi:
        return lo if d_lo < d_hi else hi
    lo_code = int(cast(np.array([float(lo)]), FP8_E4M3FN)[0])
    return lo if lo_code % 2 == 0 else hi  # rne: the even code


def test_cast_of_fractions_matches_brute_force_rounding(capsys):
    codes = np.arange(256, dtype=np.uint8)
    vals = decode(codes, FP8_E4M3FN)
    values = sorted({Fraction(float(v)) for v in vals if np.isfinite(v)})
    rng = np.random.default_rng(7)
    for _ in range(40):  # thirds (never exact in FP64) at scales from the top binade to the subnormals
        den = 3 * 2 ** int(rng.integers(0, 14))
        x = Fraction(int(rng.integers(-448 * den + 1, 448 * den)), den)
        for mode in ("rne", "rd", "ru", "rtz"):
            d = cast_json(capsys, f"{x.numerator}/{x.denominator}", "--to", "fp8_e4m3fn", "--rounding", mode)
            got = Fraction(float(decode(np.array([int(d["code"], 16)], np.uint8), FP8_E4M3FN)[0]))
            assert got == _brute_force(x, values, mode), (x, mode, d)
            below = Fraction(float(decode(np.array([int(d["below"]["code"], 16)], np.uint8), FP8_E4M3FN)[0]))
            assert below == _brute_force(x, values, "rd")


def test_cast_large_integers_go_through_int64(capsys):
    d = cast_json(capsys, "18446744073709551615", "--to", "fp32")
    assert d["source"]["format"] == "uint64" and d["code"] == "0x5f800000"
    d = cast_json(capsys, "9007199254740993", "--to", "fp64", "--rounding", "ru")
    assert d["source"] == {"format": "int64", "code": "0x0020000000000001", "how": "exact"}
    assert d["result"] == "9007199254740994"


def test_cast_rounds_values_no_fp64_code_stands_for_with_the_exact_reference(capsys):
    d = cast_json(capsys, "1/3", "--to", "fp64")
    assert d["source"]["how"] == "exact reference" and d["exact"] is False
    assert d["code"] == "0x3fd5555555555555" and "exact reference" in d["notes"][0]
    assert cast_json(capsys, "1/3", "--to", "fp64", "--rounding", "ru")["code"] == "0x3fd5555555555556"


def test_cast_text_output_has_the_note(capsys):
    _, out, _ = run(capsys, "cast", "0.1", "--to", "bf16")
    assert "note: 0.1 is not exact in FP64" in out
    assert rows(out)["code"] == "0x3dcd"


# ---- tables ----------------------------------------------------------------------------------
def test_tables_writes_formats_csv(capsys, tmp_path):
    # every table but chains (minutes; tests/test_tables.py recomputes a sample of its rows)
    rc, out, _ = run(capsys, "tables", "--out", str(tmp_path), "--only", "formats,bounds,boundary")
    assert rc == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["boundary.csv", "bounds.csv", "formats.csv"]
    assert f"formats.csv ({len(registry())} rows)" in out


# ---- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "message"), [
    (["info", "fp17"], "unknown format 'fp17'; did you mean 'fp16'"),
    (["cast", "1", "--to", "e4m3"], "ambiguous; say which: fp8_e4m3fn, fp8_e4m3, fp8_e4m3fnuz"),
    (["cast", "1", "--to", "fp16", "--rounding", "rnee"], "unknown rounding mode 'rnee'"),
    (["cast", "1", "--to", "fp16", "--overflow", "wrap"], "integer destinations only"),
    (["cast", "1", "--to", "fp16", "--nan-to", "zero"], "nan_to applies to formats without NaN"),
    (["cast", "1", "--to", "fp16", "--rounding", "sr"], "needs random bits"),
    (["cast", "0x1ffff", "--from", "fp16", "--to", "fp32"], "out of range for fp16"),
    (["cast", "0x3c00", "--to", "fp32"], "give its format with --from"),
    (["cast", "0.1", "--from", "fp16", "--to", "fp32"], "is not a value of fp16"),
    (["cast", "1.5", "--from", "int8", "--to", "fp32"], "is not a value of int8"),
    (["cast", "abc", "--to", "fp16"], "cannot parse 'abc'"),
    (["cast", "1", "--to"], "expected one argument"),
    (["cast", "1"], "required: --to"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_errors_are_one_line_with_exit_status_2(capsys, argv, message):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith("numoracle: error: ") and err.count("\n") == 1
    assert message in err
    assert "Traceback" not in err


def test_help_exits_0(capsys):
    rc, out, _ = run(capsys, "cast", "--help")
    assert rc == 0 and "--rounding" in out


# ---- number formatting -------------------------------------------------------------------------
@pytest.mark.parametrize(("x", "text"), [
    (Fraction(448), "448"),
    (Fraction(-15, 2), "-7.5"),
    (Fraction(1, 2**24), "2^-24 ≈ 5.9604645e-8"),
    (Fraction(10) ** 400, "1e400"),
    (Fraction(-7, 10**30), "-7e-30"),
    (Fraction(1, 3), "1/3 ≈ 0.33333333"),
    (Fraction(2**53 - 1) * 2**971, "9007199254740991*2^971 ≈ 1.7976931e+308"),
])
def test_show_exact(x, text):
    assert show_exact(x) == text


def test_exact_decimal_is_exact():
    assert exact_decimal(Fraction(1, 2**24)) == "0.000000059604644775390625"
    assert exact_decimal(Fraction(-12345, 100)) == "-123.45"
    assert exact_decimal(Fraction(1, 3)) is None
    x = Fraction(3, 2**70)
    assert Fraction(exact_decimal(x)) == x


def test_boundary_command_lists_the_seed_values(capsys):
    assert main(["boundary", "int32", "fp16"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("boundary values of int32 -> fp16 (rne, overflow=ieee): ")
    listed = {int(line.split()[1]) for line in out.splitlines()[1:]}
    seed = {0, 1, 2048, 65504, 65505, 65519, 65520, 70000, 2**20, 2**24, 2**24 + 1, 2**25}
    assert seed | {-v for v in seed} <= listed
    assert main(["boundary", "fp32", "fp16", "--via", "nope"]) == 2
