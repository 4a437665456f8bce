"""core/kernels/cache.py: numba's disk cache of the package's kernels follows edits of any package file, not only of the
kernel's own (numba's stamp): a kernel that inlines a function of another module is recompiled when that module
changes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from numoracle.core.kernels import cache as jitcache

pytest.importorskip("numba")


def test_digest_covers_every_source_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("X = 1\n")
    (tmp_path / "sub" / "b.py").write_text("Y = 2\n")
    first = jitcache.digest(tmp_path)
    (tmp_path / "notes.txt").write_text("not a source file\n")
    assert jitcache.digest(tmp_path) == first
    (tmp_path / "sub" / "b.py").write_text("Y = 3\n")                 # an edit in a subpackage
    second = jitcache.digest(tmp_path)
    assert second != first
    (tmp_path / "sub" / "c.py").write_text("")                        # a new, empty module
    assert jitcache.digest(tmp_path) not in (first, second)


def test_the_package_kernels_take_the_package_locator():
    from numba import njit
    from numba.core import caching

    from numoracle.core import jit

    jit._numba()                                                      # (installs it)
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
    assert getattr(impl._locator_classes[0], "_numoracle", False)
    assert jitcache.install() and sum(getattr(c, "_numoracle", False) for c in impl._locator_classes) == 1
    from numoracle.models.kernels import blockrun as jitblockrun

    locator = jitblockrun.words_kernel._cache._impl._locator
    assert getattr(locator, "_numoracle", False)
    assert locator.get_source_stamp()[1] == jitcache.package_digest()

    def outside(x):                                                   # this test file is not the package's
        return x

    assert not getattr(njit(cache=True)(outside)._cache._impl._locator, "_numoracle", False)


_PROBE = """
import sys
import numpy as np
from numoracle.core.kernels import lookup as jitlookup
codes = np.array([0x7F81, 0x3C00], np.uint16)                 # an FP16 NaN code, 1.0
print(jitlookup.widen16(codes, False).view(np.uint32).tolist())
"""


def test_an_edit_of_an_inlined_module_recompiles_the_kernel(tmp_path):
    """A copy of the package: jitlookup's widening kernel, compiled and cached, then jitround.py (whose
    magnitude() the kernel inlines) edited: the next process runs the edited code, not the cached one."""
    src = Path(jitcache.__file__).resolve().parents[2]
    pkg = tmp_path / "numoracle"
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path), NUMORACLE_JIT="1")
    env.pop("NUMBA_CACHE_DIR", None)                                 # (the cache in the copy's own __pycache__)

    def probe() -> str:
        out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip()

    assert probe() == str([0x7FC00000, 0x3F800000])                  # every NaN the table's one
    assert list((pkg / "core" / "kernels" / "__pycache__").glob("lookup*.nbi")), "the kernel was cached"
    jr = pkg / "core" / "kernels" / "rounding.py"
    text = jr.read_text()
    old = "ir.Constant(args[0].type, (1 << (b.bitwidth - 1)) - 1)"        # magnitude(): clear the sign bit
    assert old in text
    jr.write_text(text.replace(old, "ir.Constant(args[0].type, 0)"))   # now: every word's magnitude is 0
    assert probe() == str([0x7FF02000, 0x3F800000])                  # the hardware's widening, NaN kept


_RACE = """
import sys, time
import numpy as np
from numoracle.core.kernels import lookup as jitlookup
start = float(sys.argv[1])
while time.time() < start:                                     # both processes call the kernel at one moment
    time.sleep(0.001)
codes = np.array([0x7F81, 0x3C00], np.uint16)
jitlookup.widen16(codes, False)
kernel = [d for d in vars(jitlookup).values() if hasattr(d, "_cache_misses")]
print(sum(sum(d._cache_misses.values()) for d in kernel), sum(sum(d._cache_hits.values()) for d in kernel))
"""


def test_processes_starting_together_compile_a_kernel_once(tmp_path):
    """Two processes on a fresh cache call the same kernel at the same moment: one compiles it, the other waits
    for it (compile_once's file lock) and loads the compiled code from disk (a cache hit, no miss)."""
    import time

    src = Path(jitcache.__file__).resolve().parents[2]
    shutil.copytree(src, tmp_path / "numoracle", ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path), NUMORACLE_JIT="1")
    env.pop("NUMBA_CACHE_DIR", None)
    start = time.time() + 3.0                                         # after both have imported numba (usually)
    procs = [subprocess.Popen([sys.executable, "-c", _RACE, str(start)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    assert time.time() > start, "a process finished before the common start: the test proves nothing"
    counts = sorted(tuple(map(int, out.split())) for out, _ in outs)
    misses = [m for m, _ in counts]
    assert sum(misses) == misses[-1] >= 1 and counts[0][0] == 0 and counts[0][1] >= 1, counts
