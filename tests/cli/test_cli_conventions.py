"""Command-line conventions: --version, help when bare, python -m, --json on every subcommand (strict JSON,
the documented keys), exit statuses, help text on every argument, and the progress helper's rule."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from numoracle.cli.app import _parser, main
from numoracle.core import progress as prog

ROOT = Path(__file__).resolve().parents[2]


def _strict(text: str):
    """json.loads that refuses NaN / Infinity (not JSON)."""
    def bad(c):
        raise ValueError(f"not JSON: {c}")
    return json.loads(text, parse_constant=bad)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_version_and_python_m(capsys):
    import numoracle

    rc, out, _ = run(capsys, "--version")
    assert rc == 0 and out.strip() == f"numoracle {numoracle.__version__}"
    p = subprocess.run([sys.executable, "-m", "numoracle", "--version"], capture_output=True, text=True,
                       cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    assert p.returncode == 0 and p.stdout.strip() == f"numoracle {numoracle.__version__}", p.stderr
    p = subprocess.run([sys.executable, "-m", "numoracle", "chain", "int32", "fp32", "fp16", "--json"],
                       capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""})
    assert p.returncode == 0 and _strict(p.stdout)["equivalent"] is True


def test_bare_command_prints_help(capsys):
    rc, out, _ = run(capsys)
    assert rc == 0
    assert out.startswith("usage: numoracle") and "formats" in out and "tables" in out and "--version" in out


def test_usage_errors_exit_2(capsys):
    rc, _, err = run(capsys, "nope")
    assert rc == 2 and err.startswith("numoracle: error:")
    rc, _, err = run(capsys, "info", "fp7")
    assert rc == 2 and "unknown format" in err


# every subcommand with --json: (argv, keys its object must have); small, fast arguments
JSON_CASES = {
    "formats": (["formats"], {"formats"}),
    "info": (["info", "fp8_e4m3fn"], {"name", "bits", "max_finite", "overflow_threshold", "default_policy"}),
    "info-int": (["info", "int8"], {"name", "min_value", "max_value"}),
    "boundary": (["boundary", "fp32", "fp16"], {"src", "dst", "via", "rounding", "overflow", "values"}),
    "chains": (["chains", "--from", "fp32", "--to", "fp8_e4m3fn", "--via", "fp16", "--max-len", "2"],
               {"src", "dst", "via", "n_chains", "n_equal", "chains"}),
    "cast": (["cast", "65520", "--to", "fp16"], {"code", "result", "flags", "below", "above", "policy"}),
    "chain": (["chain", "int32", "fp32", "fp16"], {"chain", "equivalent", "reason", "witness", "regions"}),
    "bound": (["bound", "dot", "--dtype", "bf16", "--acc", "fp32", "-K", "64"], {"coefficient"}),
    "tolerance": (["tolerance", "dot", "--dtype", "bf16", "--acc", "fp32", "-K", "64"], {"rtol", "atol"}),
    "sweep": (["sweep", "fp16", "bf16", "--against", "ml_dtypes", "--inputs", "boundary", "--workers", "1"],
              {"verdict", "classes"}),
    "plot": (["plot", "bound", "--K", "16,32", "--samples", "1", "--data", "uniform", "--order", "sequential"],
             {"rows", "Ks", "written"}),
}


@pytest.mark.parametrize("case", sorted(JSON_CASES))
def test_json_on_every_subcommand(capsys, case):
    argv, keys = JSON_CASES[case]
    rc, out, err = run(capsys, *argv, "--json")
    assert rc == 0, err
    obj = _strict(out)
    assert isinstance(obj, dict) and keys <= set(obj), sorted(keys - set(obj))


def test_tables_json(capsys, tmp_path):
    rc, out, err = run(capsys, "tables", "--out", str(tmp_path), "--only", "formats", "--json")
    assert rc == 0, err
    (w,) = _strict(out)["written"]
    rows = len((tmp_path / "formats.csv").read_text().splitlines()) - 1
    assert w["path"].endswith("formats.csv") and w["rows"] == rows


def test_every_subcommand_has_json():
    names = {a.dest for a in _actions(_parser())}
    subs = _subparsers(_parser())
    missing = [name for name, p in subs.items() if "json" not in {a.dest for a in p._actions}]
    assert not missing, missing
    assert "version" in names


def test_chain_check_exit_status(capsys):
    rc, out, _ = run(capsys, "chain", "fp32", "fp16", "fp8_e4m3fn", "--check")
    assert rc == 1 and "DIFFERS" in out
    rc, out, _ = run(capsys, "chain", "fp32", "fp16", "fp8_e4m3fn")  # without --check: a report, status 0
    assert rc == 0 and "DIFFERS" in out
    rc, out, _ = run(capsys, "chain", "int32", "fp32", "fp16", "--check")
    assert rc == 0 and "EQUALS" in out


def _subparsers(p: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    out = {}
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                kids = _subparsers(sp, f"{prefix}{name} ")
                out.update(kids if kids else {f"{prefix}{name}": sp})
    return out


def _actions(p: argparse.ArgumentParser):
    yield from p._actions


def test_every_argument_has_help():
    bad = []
    parsers = {"numoracle": _parser(), **_subparsers(_parser())}
    for name, p in parsers.items():
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not a.help or a.help == argparse.SUPPRESS:
                bad.append(f"{name}: {a.option_strings or a.dest}")
    assert not bad, "arguments without help text:\n" + "\n".join(bad)


def test_messages_read_right(capsys):
    rc, out, _ = run(capsys, "chain", "fp16", "fp8_e4m3fn")
    assert rc == 0 and "no intermediate format" in out and "every intermediate hop" not in out
    rc, out, _ = run(capsys, "chains", "--from", "fp32", "--to", "fp16")
    assert "via -" not in out and "with no intermediate format" in out
    rc, out, _ = run(capsys, "info", "e8m0fnu")
    rows = dict(line.split(None, 1) for line in out.splitlines() if line.startswith(("min_subnormal", "overflow")))
    assert rows["min_subnormal"].startswith("none (no subnormals")
    assert "x < 0" not in out and rows["overflow_threshold[rne]"].startswith("x >= ")
    rc, out, _ = run(capsys, "info", "fp16")
    rne = next(line for line in out.splitlines() if line.startswith("overflow_threshold[rne]"))
    assert rne.split(None, 1)[1] == "|x| >= 65520"  # signed and symmetric under rne: one text
    assert "|x| >= 65536 for x > 0; |x| > 65504 for x < 0" in out  # rd is not symmetric
    rc, out, _ = run(capsys, "bound", "sum", "--dtype", "fp16", "-K", "100000", "--kind", "probabilistic")
    assert "VACUOUS" in out and "kind='probabilistic'" not in out
    rc, out, _ = run(capsys, "bound", "sum", "--dtype", "fp16", "-K", "100000")
    assert "VACUOUS" in out and "kind='probabilistic'" in out


# ---- progress ---------------------------------------------------------------------------------------------
class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal(monkeypatch):
    monkeypatch.delenv(prog.ENV, raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not prog.progress_enabled()
    assert list(prog.progress(range(3), desc="x")) == [0, 1, 2]
    assert sys.stderr.getvalue() == ""
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert prog.progress_enabled()
    assert list(prog.progress(range(3), desc="counting")) == [0, 1, 2]
    assert "counting" in tty.getvalue()
    monkeypatch.setenv(prog.ENV, "0")
    assert not prog.progress_enabled()
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setenv(prog.ENV, "1")
    assert prog.progress_enabled()
    assert prog.progress_enabled(False) is False and prog.progress_enabled(True) is True
    with prog.progress(total=2, enable=False) as bar:
        bar.update(2)
    assert bar.n == 2


def test_progress_shows_no_rate_or_time_left_until_eta_after_units_are_done(monkeypatch):
    import re

    monkeypatch.setattr(sys, "stderr", _Tty())
    eta = re.compile(r"<\d\d:\d\d")  # the time left: [elapsed<left, rate]
    with prog.progress(total=256, desc="sweep", unit="chunk", eta_after=2) as bar:
        assert "<?, ?chunk/s" in str(bar)
        bar.update(1)  # one of two workers' first chunks: a rate from it would count one worker and the start-up
        assert "1/256" in str(bar) and "<?, ?chunk/s" in str(bar) and not eta.search(str(bar))
        bar.update(1)
        assert "2/256" in str(bar) and eta.search(str(bar)) and "?chunk/s" not in str(bar)
    with prog.progress(total=4, unit="chunk") as bar:  # the default: after the first unit
        bar.update(1)
        assert eta.search(str(bar))


def test_a_sweep_shows_no_time_left_until_each_worker_finished_a_chunk(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from numoracle.conformance import sweeper

    seen = []
    real = sweeper.progress_bar
    monkeypatch.setattr(sweeper, "progress_bar", lambda *a, **k: seen.append(k) or real(*a, **k))
    with ThreadPoolExecutor(3) as ex:
        sweeper.sweep("ml_dtypes", "fp8_e5m2", "fp16", executor=ex, chunk=64, progress=False)
    sweeper.sweep("ml_dtypes", "fp8_e5m2", "fp16", progress=False)  # one chunk, in this process
    assert [k["eta_after"] for k in seen] == [3, 1]


def test_tables_show_progress_on_a_terminal(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(prog.ENV, "1")
    rc = main(["tables", "--out", str(tmp_path), "--only", "formats"])
    out, err = capsys.readouterr()
    assert rc == 0 and "tables" in err and "wrote" in out
