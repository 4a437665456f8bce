"""The pytest plugin costs nothing until used: importing it loads neither numpy nor numoracle's checks, and
pytest starts about as fast with it as without it (bounds generous: the machine may be busy)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}

PROBE = """
import sys, time
import pytest
before = set(sys.modules)
t0 = time.perf_counter()
import numoracle.testing.pytest_plugin
dt = time.perf_counter() - t0
new = set(sys.modules) - before
print(dt)
print(",".join(sorted(m for m in new if m.split(".")[0] in ("numpy", "ml_dtypes", "mpmath", "hypothesis"))))
print(",".join(sorted(m for m in new if m.startswith("numoracle."))))
"""


def _probe() -> tuple[float, list[str], list[str]]:
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=ENV, check=True)
    dt, heavy, ours = p.stdout.splitlines()
    return float(dt), [m for m in heavy.split(",") if m], [m for m in ours.split(",") if m]


def test_importing_the_plugin_loads_no_numpy():
    times, heavy, ours = [], None, None
    for _ in range(3):
        dt, heavy, ours = _probe()
        times.append(dt)
    assert heavy == [], f"the plugin's import loads {heavy}"
    assert set(ours) <= {"numoracle.testing", "numoracle.testing.pytest_plugin", "numoracle.core",
                         "numoracle.core.lazy"}, ours
    assert min(times) < 0.05, f"importing the plugin takes {min(times):.3f} s"


def test_facade_and_testing_load_on_first_use():
    code = ("import sys, numoracle, numoracle.testing as t; a = 'numpy' in sys.modules; "
            "f = numoracle.cast; c = numoracle.assert_matmul_close; t.CloseReport; "
            "print(a, 'numpy' in sys.modules, f.__module__, c.__module__, numoracle.formats.FP16.name, "
            "sorted(set(numoracle.__all__) - set(dir(numoracle))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, check=True).stdout
    assert out.split() == ["False", "True", "numoracle.core.engine.convert", "numoracle.testing.checks", "fp16", "[]"]


def _pytest_start(tmp: Path, *args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "--co", "-p", "no:cacheprovider", *args, str(tmp)],
                   capture_output=True, text=True, env=ENV, cwd=tmp)
    return time.perf_counter() - t0


@pytest.mark.slow   # times ten pytest start-ups (5 s); a timing comparison belongs on an idle machine
def test_pytest_start_up_with_and_without_the_plugin(tmp_path):
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n", encoding="utf-8")
    runs = [(_pytest_start(tmp_path), _pytest_start(tmp_path, "-p", "no:numoracle")) for _ in range(4)]  # interleaved
    with_plugin, without = min(r[0] for r in runs), min(r[1] for r in runs)
    # the plugin's own import is measured above (< 0.05 s); here, whole start-ups, with room for a busy machine
    assert with_plugin - without < 0.3, f"pytest starts in {with_plugin:.3f} s with the plugin, {without:.3f} s without"
