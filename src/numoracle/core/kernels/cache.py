"""numba's disk cache for numoracle's kernels, invalidated by a change to any of the package's source files.

numba keeps a compiled function on disk with a stamp of its own source file, and reuses it while that file is
unchanged. A kernel's compiled code also holds what it calls from other modules (jitround's word operations,
jitblock's steps inlined into jitblockrun's kernels) and the module constants it read, so after an edit of such a
module the cache would hand back the old code (numba issue 1833). ``install`` puts a cache locator in front of
numba's own: for a function of this package it takes the locator numba would have chosen (the same directory) and
adds a digest of every ``.py`` file of the package to its stamp, so that any edit (or an upgrade that changes any
file) recompiles the kernels once. ``install`` is called by core/jit.py when it imports numba; a numba without the
hooks this uses (its cache internals, ``CacheImpl`` or ``_CacheImpl``), or one told to use other locators
(NUMBA_CACHE_LOCATOR_CLASSES), keeps its own behaviour.

``compile_once`` makes that once per machine, not once per process: processes starting together (a pool of an
``Executor``, the test suite's workers) would each compile the same kernel at the same time, since none finds it on
disk before another has finished. A kernel's compilation runs under an advisory lock on a file beside its cache
entry, so the second process waits and then loads the first one's code from disk (core/jit.py's ``njit`` wraps
every kernel so).
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: every process compiles for itself, as numba does
    fcntl = None  # type: ignore[assignment]

__all__ = ["install", "package_digest", "digest", "compile_once"]

_ROOT = Path(__file__).resolve().parents[2]             # the numoracle package directory (core/kernels/../..)


@cache
def package_digest() -> str:
    """``digest`` of the package's directory, computed once per process."""
    return digest(_ROOT)


def digest(root: Path) -> str:
    """sha256 over every .py file under root (its path relative to root, then its bytes), in path order."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _inside(py_file: str) -> bool:
    try:
        return Path(py_file).resolve().is_relative_to(_ROOT)
    except (OSError, ValueError):  # pragma: no cover - unusual paths
        return False


def install() -> bool:
    """Put the package's locator first in numba's cache locators (once); returns whether it is installed."""
    try:
        from numba.core import caching
    except ImportError:  # pragma: no cover - depends on numba's layout
        return False
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    base = getattr(caching, "_CacheLocator", None)
    classes = getattr(impl, "_locator_classes", None)
    if impl is None or base is None or not isinstance(classes, list):
        return False
    if any(getattr(c, "_numoracle", False) for c in classes):
        return True

    class PackageLocator(base):
        """numba's locator for one of the package's functions, its stamp joined by the package's digest."""

        _numoracle = True

        def __init__(self, inner: Any):
            self._inner = inner

        def ensure_cache_path(self) -> None:
            self._inner.ensure_cache_path()

        def get_cache_path(self) -> str:
            return self._inner.get_cache_path()

        def get_source_stamp(self) -> Any:
            return self._inner.get_source_stamp(), package_digest()

        def get_disambiguator(self) -> str:
            return self._inner.get_disambiguator()

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if not _inside(py_file):
                return None
            for other in classes:
                if other is not cls:
                    inner = other.from_function(py_func, py_file)
                    if inner is not None:
                        return cls(inner)
            return None

    classes.insert(0, PackageLocator)
    return True


def compile_once(dispatcher: Any) -> Any:
    """``dispatcher`` (a numba dispatcher of the package), its compilations made one at a time across processes.

    1. A signature it already holds, or a dispatcher without a disk cache: numba's ``compile`` as it is.
    2. Else numba's compiler lock first (one compilation at a time in this process, so the file lock below is
       never taken by two threads of one process; nested compilations of callees are the same thread, and the
       lock is reentrant there), then an exclusive ``flock`` on ``<cache entry>.lock``, then numba's
       ``compile``: it looks in the disk cache first, so a process that waited loads what the other compiled.
    Kernels call only kernels below them (no recursion), so two processes hold such locks in one order: no
    deadlock. The lock is released when the compilation returns or raises.
    """
    if fcntl is None:  # pragma: no cover - Windows
        return dispatcher
    try:
        from numba.core import sigutils
        from numba.core.compiler_lock import global_compiler_lock
        path = os.path.join(dispatcher._cache._cache_path, dispatcher._cache._impl.filename_base + ".lock")
    except (ImportError, AttributeError):  # pragma: no cover - a numba without these internals, or no disk cache
        return dispatcher
    compile_in_process = dispatcher.compile
    held: list[int] = []                   # this dispatcher's lock depth in the thread holding the compiler lock

    def compile(sig: Any) -> Any:
        args, _ = sigutils.normalize_signature(sig)
        if tuple(args) in dispatcher.overloads:                              # step 1
            return compile_in_process(sig)
        with global_compiler_lock:                                           # step 2
            if held:
                return compile_in_process(sig)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError:                                                  # a read-only cache: numba's behaviour
                return compile_in_process(sig)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                held.append(fd)
                return compile_in_process(sig)
            finally:
                held.clear()
                os.close(fd)                                                 # (releases the flock)

    dispatcher.compile = compile
    return dispatcher
