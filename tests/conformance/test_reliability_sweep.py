"""Sweeps stop cleanly: a per-chunk timeout, Ctrl-C at once with one line, no worker outlives its parent,
and input counts cost time, not memory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import numoracle
from numoracle.conformance.sweeper import MAX_RANDOM_INPUTS, _parts, sweep
from numoracle.conformance.sweeppool import Chunks

SRC = str(Path(numoracle.__file__).resolve().parents[1])
CONVERTERS = textwrap.dedent('''
    import os
    import time

    import ml_dtypes
    import numpy as np


    def hang(x):
        mark = os.environ.get("NUMORACLE_TEST_HANG_MARKS")
        if mark:                          # tell the test this worker is inside the converter
            open(os.path.join(mark, str(os.getpid())), "w").close()
        while True:
            time.sleep(0.2)


    def hang_on_zero(x):
        """Hangs on the chunk that holds code 0; converts the others like ml_dtypes."""
        if np.any(x.view(np.uint16) == 0):
            hang(x)
        return x.astype(ml_dtypes.float8_e4m3fn)
''')
needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds processes through /proc")


@pytest.fixture
def conv(tmp_path, monkeypatch):
    (tmp_path / "noconv.py").write_text(CONVERTERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    import noconv
    importlib.reload(noconv)
    return noconv


def _env(tmp_path: Path) -> dict:
    (tmp_path / "marks").mkdir(exist_ok=True)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), SRC]),
            "NUMORACLE_TEST_HANG_MARKS": str(tmp_path / "marks"), "PYTHONFAULTHANDLER": "1"}


def _children(pid: int) -> set[int]:
    """Every live descendant of pid (from /proc)."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d.name))
    out, todo = set(), [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _interactive_sigint() -> None:
    """In the child before exec: Ctrl-C as in a terminal. A test run started in the background (``cmd &`` in a
    script, nohup) ignores SIGINT, and a child inherits that: Python then installs no KeyboardInterrupt handler
    and no Ctrl-C can reach the sweep (seen: SigIgn bit 2 set in both processes)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _start_hanging_sweep(tmp_path: Path) -> tuple[subprocess.Popen, set[int]]:
    cmd = [sys.executable, "-m", "numoracle", "sweep", "fp16", "fp8_e4m3fn", "--against", "noconv:hang",
           "--workers", "2", "--chunk", "8192", "--no-progress"]
    p = subprocess.Popen(cmd, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=_interactive_sigint)
    deadline = time.monotonic() + 180                          # a loaded machine starts workers slowly
    marks = tmp_path / "marks"
    while time.monotonic() < deadline and len(list(marks.iterdir())) < 2:   # both workers in the converter
        time.sleep(0.2)
        assert p.poll() is None, p.communicate()
    assert len(list(marks.iterdir())) >= 2, "the sweep's two workers never reached the converter"
    return p, _children(p.pid)


def _gone(pids: set[int], within: float) -> set[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        left = {q for q in pids if _alive(q)}
        if not left:
            return set()
        time.sleep(0.1)
    return {q for q in pids if _alive(q)}


@needs_proc
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_no_worker_outlives_a_killed_sweep(tmp_path, conv, sig):
    p, kids = _start_hanging_sweep(tmp_path)
    try:
        os.kill(p.pid, sig)
        p.wait(timeout=30)
        left = _gone(kids, within=10)
        assert not left, f"processes left after {sig.name}: {left}"
    finally:
        for q in _children(p.pid) | kids:
            if _alive(q):
                os.kill(q, signal.SIGKILL)
        if p.poll() is None:
            p.kill()
        p.communicate()


@needs_proc
def test_ctrl_c_stops_at_once_with_one_line(tmp_path, conv):
    p, kids = _start_hanging_sweep(tmp_path)
    try:
        t = time.monotonic()
        os.kill(p.pid, signal.SIGINT)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:     # say where it hangs: the main process's stack, its children
            stack = Path(f"/proc/{p.pid}/stack")
            where = stack.read_text() if stack.exists() else ""
            sig = {who: [ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("Sig")]
                   for who, pid in (("sweep", p.pid), ("pytest", os.getpid()))}
            where += f"; signal masks: {sig}"
            os.kill(p.pid, signal.SIGABRT)                 # faulthandler: every thread's Python stack on stderr
            try:
                out, err = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            pytest.fail(f"still running 30 s after SIGINT; stderr: {err[-6000:]}; kernel stack: {where!r}; "
                        f"children: {_children(p.pid)}")
        assert time.monotonic() - t < 15
        assert p.returncode == 130, err
        assert err.strip() == "numoracle: interrupted", err
        assert not _gone(kids, within=10)
    finally:
        for q in kids:
            if _alive(q):
                os.kill(q, signal.SIGKILL)
        if p.poll() is None:
            p.kill()


# ~8 s of deliberate waits (slow worker starts, then a timeout): in the slow tier, for the default tier's 4-minute
# budget; the default tier keeps the single-chunk timeout and the pipelined faults and timeouts
@pytest.mark.slow
def test_a_chunk_past_the_timeout_is_a_converter_fault(conv, tmp_path, monkeypatch):
    # workers that take longer than the timeout to start, as on a loaded machine (spawn, imports): a chunk is
    # timed from when a worker starts it, so only the hanging chunk is a fault, however slow the start
    (tmp_path / "slowstart").mkdir()
    (tmp_path / "slowstart" / "sitecustomize.py").write_text("import time\ntime.sleep(4)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "slowstart"))  # read by the spawned workers as they start
    t = time.monotonic()
    r = sweep(conv.hang_on_zero, "fp16", "fp8_e4m3fn", inputs=range(0, 4 * 4096), chunk=4096, workers=2,
              timeout=3, progress=False)
    assert time.monotonic() - t < 90
    kinds = {e.kind for e in r.errors}
    assert kinds == {"timeout"} and r.verdict == "error"
    bad = [e for e in r.errors if e.kind == "timeout"]
    assert bad[0].first_range == (0, 4096) and "within 3 s" in bad[0].message
    assert r.compared == 3 * 4096  # the other chunks were run (again, in a new pool) and compared


def test_a_single_chunk_with_a_timeout_runs_in_a_pool_it_can_stop(conv):
    r = sweep(conv.hang, "fp16", "fp8_e4m3fn", inputs=range(0, 256), timeout=2, progress=False)
    assert [e.kind for e in r.errors] == ["timeout"] and r.compared == 0


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "5"])
def test_timeout_must_be_positive_seconds(bad):
    with pytest.raises(ValueError, match="timeout"):
        sweep("ml_dtypes", "fp16", "fp8_e4m3fn", inputs=16, timeout=bad)


def test_input_counts_beyond_the_limit_are_refused_and_the_rest_stream():
    with pytest.raises(ValueError, match="MAX_RANDOM_INPUTS"):
        sweep("ml_dtypes", "fp16", "fp8_e4m3fn", inputs=10**18)
    t = time.monotonic()
    from numoracle.core.formats.format import format_of
    from numoracle.core.formats.policy import resolve_policy

    dst = format_of("fp8_e4m3fn")
    parts, _, n = _parts(MAX_RANDOM_INPUTS, format_of("fp32"), dst, resolve_policy(dst), 1 << 16, 0)
    assert isinstance(parts, Chunks) and n == MAX_RANDOM_INPUTS and len(parts) == MAX_RANDOM_INPUTS >> 16
    first = next(iter(parts))
    assert (first.lo, first.hi) == (0, 1 << 16)
    assert time.monotonic() - t < 1  # nothing of size N was built


def test_a_normal_sweep_still_matches(conv):
    r = sweep(conv.hang_on_zero, "fp16", "fp8_e4m3fn", inputs=np.arange(1, 4096, dtype=np.uint16), progress=False)
    assert r.errors == () and r.compared == 4095
