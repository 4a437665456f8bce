"""``numoracle sweep``: small sweeps through ``cli.main`` (boundary and random inputs, 8-bit exhaustive)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import numoracle as no
from numoracle.cli import main
from numoracle.conformance.deviations import deviations_for, installed_version
from optional import needs


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["sweep", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_boundary_sweep_finds_ml_dtypes_double_rounding(capsys):
    rc, out, err = run(capsys, "fp64", "bf16", "--against", "ml_dtypes", "--inputs", "boundary")
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("sweep fp64 -> bf16 against ml_dtypes ") and "inputs: boundary (" in lines[0]
    assert lines[1].startswith("EXPLAINED: ") and "all covered by known deviations of ml_dtypes" in lines[1]
    if any(d.kind == "double_rounding" for d in deviations_for("ml_dtypes", "fp64", "bf16")):
        assert "  double_rounding: " in out and "[via fp32; known: double_rounding]" in out
    else:  # ml_dtypes >= 0.7 rounds float64 once; the fixed record is named, as information
        assert "  double_rounding: " not in out and "  nan_payload_or_sign: " in out
        assert (f"note: ml_dtypes {installed_version('ml_dtypes')} does not show these recorded deviations: "
                "double_rounding (ml_dtypes <0.7: fixed in 0.7)") in out


def test_random_inputs_as_json_match_the_library(capsys):
    needs("torch")
    rc, out, _ = run(capsys, "fp64", "fp16", "--against", "torch", "--inputs", "2e4", "--seed", "3", "--json")
    d = json.loads(out)
    assert rc == 0 and d["verdict"] == "explained" and d["ok"] is True
    assert d["compared"] == 20000 and "random (20000 codes, seed 3" in d["inputs"]
    w = d["classes"]["double_rounding"]["witnesses"][0]
    x = np.array([int(w["source"], 16)], np.uint64)
    via32 = no.cast(no.cast(x, "fp32", src="fp64"), "fp16", src="fp32")
    assert int(w["fn"], 16) == int(via32[0]) and int(w["engine"], 16) == int(no.cast(x, "fp16", src="fp64")[0])


def test_eight_bit_source_defaults_to_exhaustive_and_prints_markdown(capsys):
    rc, out, _ = run(capsys, "fp8_e4m3fn", "fp4_e2m1fn", "--against", "ml_dtypes", "--markdown")
    assert rc == 0 and "inputs: exhaustive (all 2^8 = 256 codes)" in out
    assert "| nan_to_policy | 2 |" in out and "`0x7f (NAN)` | `0x8 (-0)` | `0x7 (6)`" in out


def test_policy_options_reach_the_engine(capsys):
    # torch saturates E4M3FN: with --overflow saturate only the NaN signs differ
    needs("torch")
    rc, out, _ = run(capsys, "fp32", "fp8_e4m3fn", "--against", "torch", "--inputs", "boundary", "--json")
    assert "saturation_vs_inf_nan" in json.loads(out)["classes"]
    rc, out, _ = run(capsys, "fp32", "fp8_e4m3fn", "--against", "torch", "--inputs", "boundary", "--overflow",
                     "saturate", "--json")
    d = json.loads(out)
    assert rc == 0 and set(d["classes"]) == {"nan_payload_or_sign"} and "overflow=saturate" in d["policy"]


def test_rounding_option_reaches_the_engine(capsys):
    rc, out, _ = run(capsys, "fp32", "fp16", "--against", "numpy", "--inputs", "5000", "--rounding", "rtz")
    assert rc == 1 and "(rtz, overflow=ieee)" in out.splitlines()[0] and "off_by_one_ulp" in out


def test_unexplained_mismatches_exit_1_with_the_verdict(capsys):
    # numoracle with ftz against a library that keeps subnormals: every subnormal result differs
    rc, out, _ = run(capsys, "fp16", "fp8_e5m2", "--against", "ml_dtypes", "--ftz")
    assert rc == 1 and out.splitlines()[1].startswith("UNEXPLAINED: ")
    assert "flush_to_zero" in out and "note: known deviations of ml_dtypes not checked" in out


@pytest.mark.parametrize("argv, message", [
    (["fp64", "bf16", "--against", "ml_dtypes", "--inputs", "exhaustive"], "use inputs='boundary' or inputs=N"),
    (["fp32", "fp16", "--against", "ml_dtypes", "--inputs", "10"], "use library='numpy'"),
    (["fp32", "fp16", "--against", "numpy", "--inputs", "many"], "--inputs takes exhaustive, boundary or a count"),
    (["fp32", "fp16", "--against", "numpy", "--inputs", "0"], "--inputs takes exhaustive, boundary or a count"),
    (["fp33", "fp16", "--against", "numpy", "--inputs", "10"], "unknown format 'fp33'"),
    (["fp32", "fp16", "--against", "numpy", "--inputs", "10", "--rounding", "sr"], "deterministic casts"),
])
def test_user_errors_exit_2_with_one_line(capsys, argv, message):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_unknown_library_is_refused(capsys):
    rc, _, err = run(capsys, "fp32", "fp16", "--against", "tensorflow")
    assert rc == 2 and "'tensorflow'" in err
    assert "--against takes numpy, ml_dtypes, torch, jax or module:function" in err


def test_jax_is_a_library_and_missing_jax_names_the_pip_install(capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a))
    rc, out, err = run(capsys, "fp32", "bf16", "--against", "jax", "--inputs", "10")
    assert rc == 2 and out == "" and "pip install jax" in err


def test_against_jax_explains_its_nan_signs(capsys):
    needs("jax")
    rc, out, err = run(capsys, "fp32", "bf16", "--against", "jax", "--inputs", "boundary")
    assert rc == 0 and err == "" and out.splitlines()[1].startswith("EXPLAINED: ")
    assert "nan_payload_or_sign" in out and "known deviations of jax" in out


_CONVERTER = '''
import ml_dtypes
import numoracle


def to_e4m3(x):
    return numoracle.cast(x, "fp8_e4m3fn").view(ml_dtypes.float8_e4m3fn)
'''


def test_against_a_module_in_the_current_directory_through_the_console_script(tmp_path):
    """``numoracle sweep --against mod:fn`` imports mod from the current directory, as ``python -m numoracle``
    does (the console script's sys.path[0] is its own folder), here and in the spawned workers."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    script = shutil.which("numoracle", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the numoracle console script is not installed next to this Python")
    (tmp_path / "cwdconv_8a.py").write_text(_CONVERTER)
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([script, "sweep", "fp16", "fp8_e4m3fn", "--against", "cwdconv_8a:to_e4m3", "--workers", "2",
                        "--chunk", "16384", "--no-progress"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[1].startswith("CLEAN") and "compared 65536 of 65536 inputs" in p.stdout
    assert "4 chunk(s) on 2 worker(s) (ProcessPoolExecutor)" in p.stdout  # the workers imported it too
