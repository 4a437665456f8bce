"""The command line: one line on stderr and a documented status for every user error, never a traceback."""

from __future__ import annotations

import importlib.util
import time

import pytest

from numoracle.cli import info as cli_info  # formats and info live there
from numoracle.cli.app import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_usage_error(capsys, argv, match: str) -> None:
    t = time.perf_counter()
    rc, out, err = run(capsys, *argv)
    assert time.perf_counter() - t < 20
    assert rc == EXIT_USAGE == 2, (argv, rc, err)
    assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("numoracle: error: ") and match in err, err


@pytest.mark.parametrize(("argv", "match"), [
    (["chain", "fp32", "fp16", "fp8_e4m3fn", "--rounding", ""], "--rounding '' has an empty entry"),
    (["chain", "fp32", "fp16", "fp8_e4m3fn", "--rounding", "rne,,rtz"], "empty entry"),
    (["chain", "fp32", "fp16", "--json", "--markdown"], "not allowed with argument --json"),
    (["chains", "--from", "fp32", "--to", "fp16", "--max-len", "0"], "--max-len: expected a positive integer"),
    (["chains", "--from", "fp32", "--to", "fp16", "--modes", ""], "--modes '' has an empty entry"),
    (["tolerance", "matmul", "--dtype", "bf16", "-K", "64", "--kappa", "inf"], "kappa must be finite"),
    (["tolerance", "matmul", "--dtype", "bf16", "-K", "64", "--kappa", "nan"], "kappa must be finite"),
    (["plot", "bound", "--samples", "1000000000"], "plot.MAX_ELEMENTS"),
    (["boundary", "fp32", "fp16", "--rounding", "sr"], "boundary --rounding takes one of"),
    (["sweep", "fp16", "fp8_e4m3fn", "--against", "tensorflow"], "module:function"),
    (["sweep", "fp16", "fp8_e4m3fn", "--against", "no_such_module_xyz:fn"], "cannot import"),
    (["sweep", "fp16", "fp8_e4m3fn", "--against", "numoracle:no_such_fn"], "has no 'no_such_fn'"),
    (["sweep", "fp16", "fp8_e4m3fn", "--against", "ml_dtypes", "--inputs", "1e18"], "MAX_RANDOM_INPUTS"),
    (["sweep", "fp16", "fp8_e4m3fn", "--against", "ml_dtypes", "--timeout", "-1"], "--timeout"),
    (["cast", "1e99999999999", "--to", "fp16", "--from", "fp32"], "is not a value of fp32"),
    (["cast", "1" * 5000, "--to", "fp16"], "parse.MAX_DIGITS"),
    (["cast", "0x1.8", "--to", "fp16"], "looks like a code"),
    (["info", "i16"], "numpy has no such dtype"),
    (["cast", "1", "--to", "e15m48"], "unknown format"),
])
def test_user_errors_are_one_line_with_status_2(capsys, argv, match):
    assert_usage_error(capsys, argv, match)


def test_sweep_against_a_library_that_is_not_installed_names_the_pip_install(capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert_usage_error(capsys, ["sweep", "fp16", "fp8_e4m3fn", "--against", "torch"], "pip install torch")


def test_a_missing_optional_module_names_the_pip_install(capsys, monkeypatch):
    def needs_matplotlib(args):
        raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")

    monkeypatch.setattr(cli_info, "_cmd_formats", needs_matplotlib)
    assert_usage_error(capsys, ["formats"], "matplotlib is not installed; pip install numoracle[plot]")


def test_an_internal_error_is_one_line_with_status_3(capsys, monkeypatch):
    def bug(args):
        return {}["missing"]

    monkeypatch.setattr(cli_info, "_cmd_formats", bug)
    rc, out, err = run(capsys, "formats")
    assert rc == EXIT_INTERNAL == 3 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("numoracle: internal error: KeyError") and "please report" in err


def test_ctrl_c_is_one_line_with_status_130(capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_info, "_cmd_formats", interrupted)
    rc, out, err = run(capsys, "formats")
    assert rc == EXIT_INTERRUPTED == 130 and err == "numoracle: interrupted\n"


def test_help_documents_the_exit_statuses(capsys):
    rc, out, _ = run(capsys, "--help")
    assert rc == 0
    flat = " ".join(out.split())
    assert "2 usage error" in flat and "3 internal error" in flat and "130 interrupted" in flat
