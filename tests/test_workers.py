"""The suite's default parallelism (tests/workers.py), run on a sample project through pytest itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workers import _MAX_WORKERS, _cores

pytest_plugins = ["pytester"]
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch) -> pytest.Pytester:
    """A project of two tests whose conftest imports the hook; its runs load xdist and no other plugin."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (pip install -e \".[test]\" installs it)")
    if _cores() < 2:
        pytest.skip("one core: whole-suite runs stay in one process")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    for name in [n for n in os.environ if n.startswith("PYTEST_XDIST")]:  # this run may be a worker itself
        monkeypatch.delenv(name)
    pytester.makeini(f"[pytest]\ntestpaths = t\npythonpath = {TESTS}\n")
    pytester.makeconftest("from workers import pytest_cmdline_main  # noqa: F401\n")
    pytester.mkdir("t")
    (pytester.path / "t" / "test_a.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    return pytester


def run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    return project.runpytest_subprocess("-p", "xdist", "-p", "no:cacheprovider", *args)


def _workers(result: pytest.RunResult) -> str | None:
    """xdist's "created: n/n workers" line, or None (one process)."""
    return next((line for line in result.outlines if line.startswith("created:")), None)


def test_a_whole_run_goes_on_the_cores(project):
    result = run(project)
    n = min(_cores(), _MAX_WORKERS)
    assert _workers(result) == f"created: {n}/{n} workers", result.outlines
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize("args,last", [(("t/test_a.py",), "2 passed"), (("-n", "0"), "2 passed"),
                                       (("--collect-only",), "2 tests collected")], ids=["a file", "-n 0", "co"])
def test_other_runs_stay_in_one_process(project, args, last):
    result = run(project, *args)
    assert _workers(result) is None and last in result.outlines[-1], result.outlines


def test_n_chooses(project):
    result = run(project, "-n", "1")
    assert _workers(result) == "created: 1/1 worker", result.outlines
