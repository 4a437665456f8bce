"""numoracle's pytest plugin, run through pytest itself (``pytester``): reports, levels, goldens, docs/testing.md.

The plugin is active through its ``pytest11`` entry point: none of the sample test files here has a
conftest. ``test_fresh_venv_install`` installs the repository into a new virtual environment and runs
the documented sample there.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shlex
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "testing.md"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch):
    """Short summary lines are truncated to the width, as on a terminal (CI variables turn that off)."""
    for var in ("CI", "BUILD_NUMBER", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(var, raising=False)


# Sample runs happen in this process (pytester's inline runs). Without the plugins below each run would
# re-import and re-rewrite the whole hypothesis package (the snapshot of sys.modules drops it after every
# run), and run slow gc.collect() passes at exit: 5-10x the time of the run itself.
QUIET = ("-p", "no:cacheprovider", "-p", "no:unraisableexception", "-p", "no:hypothesispytest", "-p", "no:benchmark")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*args, *QUIET)


def output(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines + result.errlines)


# ---- the documented sample runs -------------------------------------------------------------------------
def doc_runs() -> list[tuple[dict[str, str], list[str], list[str]]]:
    """Walk docs/testing.md: ``# test_x.py`` python blocks create sample files, ``# appended to test_x.py``
    blocks extend them, and ``$ pytest ...`` text blocks are runs: (files at that point, args, expected lines)."""
    files: dict[str, str] = {}
    runs = []
    for m in FENCE.finditer(DOC.read_text(encoding="utf-8")):
        lang, code = m.group(1), m.group(2)
        first, _, rest = code.partition("\n")
        if lang == "python":
            if (new := re.fullmatch(r"# (test_\w+\.py)", first)) is not None:
                files[new.group(1)] = code
            elif (more := re.match(r"# appended to (test_\w+\.py)", first)) is not None:
                files[more.group(1)] += "\n\n" + code
        elif lang == "text" and first.startswith("$ pytest"):
            runs.append((dict(files), shlex.split(first)[2:], rest.splitlines()))
    return runs


def assert_shows(out: str, expected: list[str]) -> None:
    """``expected`` ("..." = any lines) appears in ``out``: each run of lines between "..." contiguously, in order."""
    lines = [ln.rstrip() for ln in out.splitlines()]
    chunks: list[list[str]] = [[]]
    for ln in expected:
        if ln.strip() == "...":
            chunks.append([])
        else:
            chunks[-1].append(ln.rstrip())
    pos = 0
    for chunk in (c for c in chunks if c):
        for start in range(pos, len(lines) - len(chunk) + 1):
            if lines[start:start + len(chunk)] == chunk:
                pos = start + len(chunk)
                break
        else:
            raise AssertionError("the output lacks these documented lines (in this order):\n" + "\n".join(chunk)
                                 + "\n--- output ---\n" + out)


def test_doc_has_sample_runs():
    runs = doc_runs()
    assert [args for _, args, _ in runs] == [[], ["test_kernel.py"], ["test_kernel.py"], ["test_goldens.py"],
                                             ["test_goldens.py", "--numoracle-update-goldens"], ["test_goldens.py"]]


def test_documented_runs_show_the_documented_output(pytester):
    """Every ``$ pytest`` block of docs/testing.md, replayed in order on the sample files written so far."""
    for files, args, expected in doc_runs():
        for name, code in files.items():
            pytester.path.joinpath(name).write_text(code, encoding="utf-8")
        result = run(pytester, *args)
        assert_shows(output(result), expected)
        failing = any(ln.startswith("E ") for ln in expected)
        if args:
            assert result.ret == (1 if failing else 0), output(result)


def test_documented_text_blocks_are_the_printed_output(capsys):
    """A text block right after a python block that prints is exactly what it prints."""
    namespace: dict = {"__name__": "doc_testing"}
    printed, checked = None, 0
    for m in FENCE.finditer(DOC.read_text(encoding="utf-8")):
        lang, code = m.group(1), m.group(2)
        if lang == "python":
            capsys.readouterr()
            exec(compile(code, str(DOC), "exec"), namespace)
            printed = capsys.readouterr().out
        elif lang == "text" and printed and not code.startswith("$"):
            assert code.rstrip("\n") == printed.rstrip("\n")
            checked += 1
            printed = None
        else:
            printed = None
    assert checked >= 3


# ---- failure reports -----------------------------------------------------------------------------------
SAMPLE = '''
import ml_dtypes
import numpy as np

from numoracle import assert_matmul_close

A = np.array([[1, 2, -3, 4], [2, 0, 1, -1]], ml_dtypes.bfloat16)
B = np.array([[1, 2], [3, -1], [0, 2], [1, 1]], ml_dtypes.bfloat16)


def kernel(a, b):
    out = (a.astype(np.float32) @ b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    out[0, 0] = 14  # BUG
    return out


def test_kernel():
    assert_matmul_close(kernel(A, B), A, B, acc="fp32")
'''


A_INTS = [[1, 2, -3, 4], [2, 0, 1, -1]]
B_INTS = [[1, 2], [3, -1], [0, 2], [1, 1]]


def test_matmul_failure_shows_the_report_then_passes_once_fixed(pytester):
    # hand-worked: A @ B = [[11, -2], [1, 5]]; 14 lies in [8, 16) where bf16 steps by 2^(3-7) = 1/16:
    # 14 - 11 = 3 = 48 ULPs. The bound allows about 2^-8 * 11 there, so exactly one element fails.
    assert (np.array(A_INTS) @ np.array(B_INTS)).tolist() == [[11, -2], [1, 5]]
    pytester.makepyfile(test_sample=SAMPLE)
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "numoracle: level=fast",
        '>       assert_matmul_close(kernel(A, B), A, B, acc="fp32")',
        "E       Matmul mismatch: 1 of 4 elements exceed the bound (max error/bound 69.81 at index (0, 0)); *",
        "E       worst 4 element(s), * = over the bound (exact = the exact result rounded to float64; ULPs = *",
        "E            index  actual  exact  |error|     bound  error/bound  ULPs (bf16)",
        # bound at (0, 0): u_out |y| = 2^-8 * 11 = 0.04296875, plus c * sum|a b| = 1.8e-7 * 11
        "E         * (0, 0)    14.0   11.0        3   0.04297        69.81          +48",
        "E       bound: matmul: inputs bf16, accumulator fp32 (rne), K = 4, *",
        "test_sample.py:17: NumoracleAssertionError",
        "FAILED test_sample.py::test_kernel - Matmul mismatch: 1 of 4 elements exceed*",
    ])
    out = output(result)
    assert "numoracle/core/asserting.py" not in out and "NumoracleAssertionError: Matmul" not in out  # no internals
    pytester.makepyfile(test_sample=SAMPLE.replace("    out[0, 0] = 14  # BUG\n", ""))
    run(pytester).assert_outcomes(passed=1)


def test_fulltrace_keeps_numoracle_frames(pytester):
    pytester.makepyfile(test_sample=SAMPLE)
    out = output(run(pytester, "--fulltrace"))
    assert "numoracle/core/asserting.py" in out and "Matmul mismatch: 1 of 4" in out


def test_errors_inside_numoracle_keep_their_traceback(pytester):
    pytester.makepyfile(test_bad="""
        import numpy as np
        from numoracle import assert_matmul_close

        def test_shapes():
            a = np.ones((2, 3), np.float32)
            assert_matmul_close(np.ones((2, 2), np.float32), a, a)
    """)
    result = run(pytester)
    result.assert_outcomes(failed=1)
    out = output(result)
    assert "ValueError: matmul: A has shape (2, 3) and B has shape (2, 3)" in out
    assert "numoracle/testing/checks.py" in out  # a usage error: where it was raised stays visible


def test_other_numoracle_assertions_are_pruned_too(pytester):
    pytester.makepyfile(test_chain="""
        from numoracle.chains.search import assert_chain_equivalent

        def test_chain():
            assert_chain_equivalent("fp64", "fp32", "bf16")
    """)
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        '>       assert_chain_equivalent("fp64", "fp32", "bf16")',
        "E       fp64 -(rne)-> fp32 -(rne)-> bf16 DIFFERS from fp64 -(rne)-> bf16 (DOUBLE_ROUNDING)",
        "E         smallest witness: *",
        "FAILED test_chain.py::test_chain - fp64 -(rne)-> fp32 -(rne)-> bf16 DIFFERS*",
    ])
    assert "chainsearch.py" not in output(result)


def test_equality_of_numoracle_objects_is_explained(pytester):
    pytester.makepyfile(test_eq="""
        from numoracle import classify_cast_chain

        def test_eq():
            assert classify_cast_chain("int32", "fp32", "fp16") == classify_cast_chain("int32", "fp32", "bf16")
    """)
    result = run(pytester, "-vv")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E       assert <ChainVerdict: int32 -(rne)-> fp32 -(rne)-> fp16 EQUALS *> == <ChainVerdict: *",
        "E         two ChainVerdict objects differ (- left, + right):",
        "E         -int32 -(rne)-> fp32 -(rne)-> fp16 EQUALS int32 -(rne)-> fp16 *",
        "E         +int32 -(rne)-> fp32 -(rne)-> bf16 *",
    ])


# ---- levels --------------------------------------------------------------------------------------------
LEVEL_TESTS = """
    import pytest

    def test_depth(numoracle_level, sweep_inputs):
        print("LEVEL", numoracle_level, sweep_inputs)

    @pytest.mark.numoracle_full
    def test_long():
        print("LONG RAN")
"""


def test_default_level_is_fast(pytester):
    pytester.makepyfile(test_lv=LEVEL_TESTS)
    result = run(pytester, "-s", "-rs", "--strict-markers")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["numoracle: level=fast", "*LEVEL fast boundary*",
                                 "SKIPPED [[]1[]] test_lv.py:6: numoracle_full: runs with --numoracle-level=full*"])
    assert "LONG RAN" not in output(result)


def test_full_level_from_the_option(pytester):
    pytester.makepyfile(test_lv=LEVEL_TESTS)
    result = run(pytester, "-s", "--numoracle-level=full")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["numoracle: level=full", "*LEVEL full full*", "*LONG RAN*"])


def test_level_from_the_ini_file_and_the_option_wins(pytester):
    pytester.makeini("[pytest]\nnumoracle_level = full\n")
    pytester.makepyfile(test_lv=LEVEL_TESTS)
    result = run(pytester, "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["numoracle: level=full", "*LEVEL full full*"])
    result = run(pytester, "-s", "--numoracle-level=fast")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["numoracle: level=fast", "*LEVEL fast boundary*"])


def test_bad_levels_are_usage_errors(pytester):
    pytester.makepyfile(test_lv=LEVEL_TESTS)
    result = run(pytester, "--numoracle-level=slow")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "invalid choice: 'slow'" in output(result)
    pytester.makeini("[pytest]\nnumoracle_level = thorough\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "numoracle_level = 'thorough' in the ini file; use one of: fast, full" in output(result)


def test_marker_and_options_are_documented(pytester):
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.numoracle_full: a long numoracle check; runs only with*"])
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["numoracle (numerics oracle) checks:", "*--numoracle-level=*",
                                 "*--numoracle-goldens=DIR*", "*--numoracle-update-goldens*"])


# ---- goldens --------------------------------------------------------------------------------------------
GOLDEN_TEST = """
    import ml_dtypes
    import numpy as np

    def test_q(golden):
        x = np.array([0.1, -0.0, 1e9, 3.0], np.float32).astype(ml_dtypes.bfloat16)
        x[2] = x[2] * ml_dtypes.bfloat16({scale})
        golden.check("q/bf16", x, meta={{"rounding": "{mode}"}})
"""


def golden_test(pytester: pytest.Pytester, scale: float = 1.0, mode: str = "rne") -> Path:
    tests = pytester.path / "tests"
    tests.mkdir(exist_ok=True)
    path = tests / "test_g.py"
    path.write_text(textwrap.dedent(GOLDEN_TEST.format(scale=scale, mode=mode)), encoding="utf-8")
    return tests / "goldens" / "q" / "bf16.golden"


def test_golden_missing_then_created_then_checked(pytester):
    gpath = golden_test(pytester)
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E       golden 'q/bf16' does not exist (tests/goldens/q/bf16.golden); create it: run pytest "
        "--numoracle-update-goldens tests/test_g.py::test_q, check the new file and commit it"])
    assert not gpath.exists()
    result = run(pytester, "--numoracle-update-goldens")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["numoracle: level=fast, updating goldens", "*- numoracle goldens -*",
                                 "created tests/goldens/q/bf16.golden (tests/test_g.py::test_q)",
                                 "1 created, 0 updated, 0 unchanged golden file(s); review and commit them"])
    from numoracle.testing.golden import read_golden

    g = read_golden(gpath)
    expect = np.array([0.1, -0.0, 1e9, 3.0], np.float32).astype(ml_dtypes.bfloat16)
    assert g.format.name == "bf16" and g.meta == {"rounding": "rne"}
    assert g.codes.tolist() == expect.view(np.uint16).tolist()
    run(pytester).assert_outcomes(passed=1)
    stamp = gpath.stat().st_mtime_ns
    result = run(pytester, "--numoracle-update-goldens")
    result.stdout.fnmatch_lines(["0 created, 0 updated, 1 unchanged golden file(s)*"])
    assert gpath.stat().st_mtime_ns == stamp  # an unchanged golden is not rewritten


def test_golden_mismatch_report_then_update(pytester):
    gpath = golden_test(pytester)
    run(pytester, "--numoracle-update-goldens").assert_outcomes(passed=1)
    golden_test(pytester, scale=1.0078125)  # 1e9 (bf16 0x4e6e, 998244352) times (1 + 2^-7): 2 ULPs up
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E       Golden mismatch 'q/bf16' (tests/goldens/q/bf16.golden): 1 of 4 bf16 elements differ bit-wise "
        "(shape (4,)); max ULP distance 2",
        "E       differing elements (bf16 codes; ULPs = actual - golden):",
        "E         index  golden  actual  golden value  actual value  ULPs",
        "E          (2,)  0x4e6e  0x4e70   998244352.0  1006632960.0    +2",
        "E       if the new result is right, rewrite the golden: pytest --numoracle-update-goldens "
        "tests/test_g.py::test_q",
    ])
    result = run(pytester, "--numoracle-update-goldens")
    result.stdout.fnmatch_lines(["updated tests/goldens/q/bf16.golden (tests/test_g.py::test_q)"])
    from numoracle.testing.golden import read_golden

    assert read_golden(gpath).codes[2] == 0x4E70
    run(pytester).assert_outcomes(passed=1)


def test_golden_meta_must_match(pytester):
    golden_test(pytester)
    run(pytester, "--numoracle-update-goldens").assert_outcomes(passed=1)
    golden_test(pytester, mode="rtz")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E       Golden mismatch 'q/bf16' *: meta differs (rounding: golden 'rne', now 'rtz')"
                                 ])


def test_golden_damaged_file_fails_with_golden_error(pytester):
    gpath = golden_test(pytester)
    run(pytester, "--numoracle-update-goldens").assert_outcomes(passed=1)
    data = bytearray(gpath.read_bytes())
    data[-75] ^= 0x40  # a payload byte
    gpath.write_bytes(bytes(data))
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E       numoracle.testing.golden.GoldenError: *bf16.golden: checksum mismatch*",
                                 "E       to rewrite it from this test: pytest --numoracle-update-goldens "
                                 "tests/test_g.py::test_q"])
    run(pytester, "--numoracle-update-goldens").assert_outcomes(passed=1)  # update repairs it
    run(pytester).assert_outcomes(passed=1)


def test_goldens_directory_option(pytester):
    golden_test(pytester)
    result = run(pytester, "--numoracle-goldens", "store", "--numoracle-update-goldens")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"numoracle: level=fast, goldens={pytester.path / 'store'}, updating goldens",
                                 "created store/q/bf16.golden *"])
    assert (pytester.path / "store" / "q" / "bf16.golden").exists()
    assert not (pytester.path / "tests" / "goldens").exists()
    run(pytester, "--numoracle-goldens", "store").assert_outcomes(passed=1)


def test_golden_names_and_shared_goldens(pytester):
    pytester.makepyfile(test_names="""
        import numpy as np
        import pytest

        def test_bad_name(golden):
            with pytest.raises(ValueError, match="golden name '../x'"):
                golden.path("../x")
            assert golden.path("a/b-1.c").name == "b-1.c.golden"

        def test_one(golden):
            golden.check("shared", np.arange(3, dtype=np.int8))

        def test_two(golden):
            golden.check("shared", np.arange(4, dtype=np.int8))
    """)
    result = run(pytester, "--numoracle-update-goldens")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["E       golden 'shared' (goldens/shared.golden) was already written in this run by "
                                 "test_names.py::test_one with other contents; two checks cannot share one golden*"])


@pytest.fixture(scope="module")
def torch_imported():
    """torch, imported before ``pytester`` snapshots sys.modules: a snapshot without it would drop it at
    teardown, and torch cannot be imported twice in one process."""
    return pytest.importorskip("torch")


def test_golden_fixture_takes_torch_tensors_and_codes(torch_imported, pytester):
    pytester.makepyfile(test_t="""
        import numpy as np
        import torch

        def test_t(golden):
            t = torch.tensor([1.5, -0.0, float("nan"), 448.0]).to(torch.float8_e4m3fn)
            golden.check("t", t)
            golden.check("tf32", np.array([0, 0x7FFFF, 0x3F800 >> 0], np.uint32), fmt="tf32")
            assert golden.read("t").format.name == "fp8_e4m3fn"
            assert golden.read("t").codes.tolist() == t.view(torch.uint8).tolist()
    """)
    run(pytester, "--numoracle-update-goldens").assert_outcomes(passed=1)
    run(pytester).assert_outcomes(passed=1)


# ---- the acceptance run: a fresh venv ------------------------------------------------------------------
def _editable_install() -> tuple[str, str | None]:
    dist = importlib.metadata.distribution("numoracle")
    return str(dist.locate_file("")), dist.read_text("direct_url.json")


@pytest.mark.slow   # builds a venv and pip-installs into it (6 s)
@pytest.mark.skipif(sys.platform == "win32", reason="the venv layout below is POSIX")
def test_fresh_venv_install(tmp_path):
    """``pip install ".[test]"`` into a new venv; the documented sample then fails with the report and passes
    once fixed, with no conftest anywhere.

    The venv sees the system's packages (numpy, torch ...), so the install needs no index: with hatchling
    (the build backend) installed it runs offline (``--no-index --no-build-isolation``); without it, pip
    fetches hatchling into an isolated build (the test is skipped when that cannot reach an index). The
    venv is made without its own pip/setuptools: the system's pip installs into it, and torch's
    setuptools requirement is met by the system's setuptools rather than the venv's older seed copy.
    """
    before = _editable_install()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "PIP_")) and k not in ("CI", "BUILD_NUMBER", "PYTHONPATH", "VIRTUAL_ENV")}
    if sys.prefix != sys.base_prefix:  # run from a venv: --system-site-packages shows the base's packages, not ours
        purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=env,
                                 capture_output=True, text=True, check=True).stdout.strip()
        Path(purelib, "_outer_site.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    offline = importlib.util.find_spec("hatchling") is not None
    how = ["--no-index", "--no-build-isolation"] if offline else ["--timeout", "15", "--retries", "0"]
    pip = subprocess.run([py, "-m", "pip", "install", *how, "--no-input", "-q", "--disable-pip-version-check",
                          f"{ROOT}[test]"], env=env, capture_output=True, text=True)
    if pip.returncode and not offline and re.search(r"hatchling|connection|network|resolve", pip.stdout + pip.stderr,
                                                    re.I):
        pytest.skip("hatchling is not installed and pip cannot fetch it: " + pip.stderr.strip()[-300:])
    assert pip.returncode == 0, pip.stdout + pip.stderr
    where = subprocess.run([py, "-c", "import numoracle; print(numoracle.__file__)"], env=env, capture_output=True,
                           text=True, check=True).stdout.strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), where  # the venv's copy, not the checkout
    assert _editable_install() == before  # the main environment's install is untouched

    (files, args, expected), (fixed, _, expected_fixed) = doc_runs()[1:3]
    work = tmp_path / "work"
    work.mkdir()
    (work / "test_kernel.py").write_text(files["test_kernel.py"], encoding="utf-8")
    assert not list(work.glob("conftest.py"))
    cmd = [py, "-m", "pytest", *args, "-p", "no:cacheprovider"]
    res = subprocess.run(cmd, cwd=work, env={**env, "COLUMNS": "80"}, capture_output=True, text=True)
    assert res.returncode == 1, res.stdout + res.stderr
    assert_shows(res.stdout, expected)
    (work / "test_kernel.py").write_text(fixed["test_kernel.py"], encoding="utf-8")
    res = subprocess.run(cmd, cwd=work, env={**env, "COLUMNS": "80"}, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert_shows(res.stdout, expected_fixed)
    assert "numoracle: level=fast" in res.stdout and "1 passed" in res.stdout
