"""numba's disk cache for numoracle's kernels, invalidated by a change to any of the package's source files.

numba keeps a compiled function on disk with a stamp of its own source file, and reuses it while that file is
unchanged. A kernel's compiled code also holds what it calls from other modules (jitround's word operations,
jitblock's steps inlined into jitblockrun's kernels) and the module constants it read, so after an edit of such a
module the cache would hand back the old code (numba issue 1833). ``install`` puts a cache locator in front of
numba's own: for a function of this package it takes the locator numba would have chosen (the same directory) and
adds a digest of every ``.py`` file of the package to its stamp, so that any edit (or an upgrade that changes any
file) recompiles the kernels once. Called by core/jit.py when it imports numba; a numba without the hooks this
uses (its cache internals, ``CacheImpl`` or ``_CacheImpl``), or one told to use other locators
(NUMBA_CACHE_LOCATOR_CLASSES), keeps its own behaviour.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["install", "package_digest", "digest"]

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
