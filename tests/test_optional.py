"""The skip accounting for optional packages: one reason string per package, read back by the closing summary."""

from __future__ import annotations

import pytest

from optional import OPTIONAL, available, needs, reason, requires, skipped_for


@pytest.mark.parametrize("name", OPTIONAL)
def test_every_reason_is_counted_for_its_package(name):
    assert skipped_for(reason(name)) == name
    assert skipped_for("Skipped: " + reason(name)) == name


@pytest.mark.parametrize("text, name", [
    ("could not import 'torch': No module named 'torch'", "torch"),  # pytest.importorskip's own
    ("could not import 'jax.numpy': No module named 'jax'", "jax"),
    ("No module named 'numba'", "numba"),
    ("the architecture test needs grimp: pip install grimp", "grimp"),
    ("needs mypy: pip install mypy", "mypy"),
    ("jax 0.10.2 has no fp8_e5m3fnu type", None),  # a skip for another reason
    ("could not import 'scipy': No module named 'scipy'", None),  # not one of the suite's optional packages
    ("architecture.md has no python blocks", None),
])
def test_other_skip_reasons(text, name):
    assert skipped_for(text) == name


def test_needs_skips_with_the_reason_and_returns_the_module(monkeypatch):
    import optional

    assert needs("pytest") is pytest and available("pytest")
    monkeypatch.setattr(optional, "available", lambda name: False)
    with pytest.raises(pytest.skip.Exception, match="^needs torch \\(not installed: pip install torch --index-url"):
        needs("torch")
    mark = requires("no_such_package_xyz")
    assert mark.args == (True,) and mark.kwargs["reason"] == reason("no_such_package_xyz")


def test_the_summary_counts_skips_per_package(tmp_path):
    """A run with skips for missing packages ends with one line per package (jax included), in its own process."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).parent
    for name in ("optional.py", "conftest.py", "workers.py"):  # the suite's conftest and what it imports
        shutil.copy(here / name, tmp_path)
    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "from optional import needs, reason\n"
        "def test_a(): needs('no_such_mod_a')\n"
        "def test_jax(): pytest.skip(reason('jax'))\n"
        "def test_jax2(): pytest.importorskip('jax_not_here_xyz', reason=reason('jax'))\n"
        "def test_torch(): pytest.importorskip('torch_not_here_xyz')\n"
        "def test_other(): pytest.skip('not today')\n")
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(tmp_path)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "5 skipped" in p.stdout, p.stdout + p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("numoracle: ")]
    assert lines == ["numoracle: 2 test(s) skipped because jax is not installed (pip install jax runs them)"], lines
