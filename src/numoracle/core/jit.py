"""The optional compiled backend: numba kernels where installed, numpy everywhere else.

numoracle's numpy code is the reference: every compiled kernel has a numpy twin that gives the same
bits, and the tests run both on the same data (``disabled()`` switches the kernels off). A kernel is
used when all of these hold:

1. numba is importable (a dependency where it has wheels: pyproject.toml); it is imported only when a kernel is
   first needed, so ``import numoracle`` stays fast;
2. the environment variable ``NUMORACLE_JIT`` is not ``0``;
3. no ``disabled()`` block is active in this thread;
4. the call has enough work to repay a kernel's first use in the process (loading it from numba's
   disk cache takes tenths of a second, compiling it on a machine's first run several seconds):
   ``work`` >= ``MIN_WORK`` element steps, unless ``NUMORACLE_JIT=1`` or a ``forced()`` block asks
   for kernels at every size (the kernel tests do, on small data). An entry point (``simulate``,
   ``exact_matmul``) decides once for the whole call with ``for_work``; the steps inside ask
   ``enabled()`` and follow that decision, so a step outside such a block stays on numpy.

One decision point: ``kernel_for(step, load)`` returns the kernel module that runs a step, or None
for the numpy reference. It asks ``enabled()`` (the rules above), then imports the module (lazily:
numba is loaded only here) and asks its ``covers(step)``. Every kernel module keeps one contract:

* ``covers(step) -> bool``: whether it runs this step, decided before anything runs (formats, modes,
  the data's ranges); no fallback on exceptions;
* ``run(step, ...)``: the step's result, the same bits as the numpy reference's;
* ``calls``: a ``Calls`` counter of the steps its kernels have run in this process (tests read
  ``calls.count`` to prove a kernel ran).

The kernels decorate their functions with ``njit`` below; compiled code is cached on disk (numba's
``cache=True``, invalidated by an edit of any of the package's files: core/kernels/cache.py), so only the first run
on a machine (or after an edit) pays the compilation. ``backend("numpy")`` and
``backend("numba")`` force either path in code (``disabled()`` and ``forced()``), as ``NUMORACLE_JIT=0``
and ``=1`` do from the environment; the entry points log at DEBUG (loggers ``numoracle.models`` and
``numoracle.exact``) which backend ran each kind of step.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import lru_cache, wraps
from typing import Any

from .formats.policy import Rounding

__all__ = ["enabled", "disabled", "forced", "backend", "for_work", "kernel_for", "Calls", "njit", "MIN_WORK",
           "MODE_CODES", "RNE", "RNA", "RTZ", "UP", "DOWN", "ODD"]

MIN_WORK = 1 << 22   # element steps (e.g. m * n * K of a matmul) from which the kernels are used

# the rounding modes as the integers kernels branch on (numba cannot take an Enum); stochastic
# rounding has none: no kernel takes it
RNE, RNA, RTZ, UP, DOWN, ODD = range(6)
MODE_CODES = {Rounding.NEAREST_EVEN: RNE, Rounding.NEAREST_AWAY: RNA, Rounding.TOWARD_ZERO: RTZ,
              Rounding.UP: UP, Rounding.DOWN: DOWN, Rounding.TO_ODD: ODD}

_state = threading.local()


@lru_cache(maxsize=1)
def _numba() -> Any:
    """The numba module, or None when it is not installed (or fails to import); its disk cache set up for the
    package's kernels (core/kernels/cache.py) before the first kernel is decorated."""
    try:
        import numba
    except Exception:  # pragma: no cover - depends on the environment
        return None
    from .kernels import cache as jitcache

    jitcache.install()
    return numba


def _repays(work: int | None) -> bool:
    """Does a call of ``work`` element steps take the kernels? ``None``: a step inside a call, which
    follows the decision of the entry point around it (``for_work``). Decided without importing
    numba; NUMORACLE_JIT=1 or forced() say yes at every size."""
    if getattr(_state, "forced", 0) or os.environ.get("NUMORACLE_JIT", "") == "1":
        return True
    if work is None:
        return getattr(_state, "large", 0) > 0
    return work >= MIN_WORK


def enabled(work: int | None = None) -> bool:
    """True when compiled kernels will be used for a call of ``work`` element steps in this thread
    (None: a step inside an entry point's ``for_work`` block, which decided for it). NUMORACLE_JIT:
    0 off, 1 at every size, unset (or anything else) by work."""
    if getattr(_state, "off", 0) or os.environ.get("NUMORACLE_JIT", "") == "0" or not _repays(work):
        return False
    return _numba() is not None


@contextmanager
def _inside(flag: str) -> Iterator[None]:
    """The block counts as inside ``flag`` (off, forced, large) for this thread; blocks nest."""
    setattr(_state, flag, getattr(_state, flag, 0) + 1)
    try:
        yield
    finally:
        setattr(_state, flag, getattr(_state, flag) - 1)


def disabled():
    """Run the block on the numpy reference path (kernels off in this thread)."""
    return _inside("off")


def forced():
    """Use the kernels (where numba is installed) at every size in this block, small calls too."""
    return _inside("forced")


def backend(name: str) -> AbstractContextManager:
    """Force a path in this block: "numpy" (the reference: ``disabled()``), "numba" (the kernels at every
    size where numba is installed: ``forced()``) or "auto" (the default rules)."""
    if name == "numpy":
        return disabled()
    if name == "numba":
        return forced()
    if name == "auto":
        return nullcontext()
    raise ValueError(f"backend must be 'numpy', 'numba' or 'auto', not {name!r}")


def for_work(work: int):
    """The block of an entry point doing ``work`` element steps: its steps use the kernels when the
    work repays them (or they are forced), else the numpy path (one decision for the whole call)."""
    return _inside("large") if _repays(work) else disabled()


def kernel_for(step: Any, load: Callable[[], Any]) -> Any:
    """The one decision: the kernel module (``load()`` imports it, on first use: a function of the caller that
    imports it, so the import graph shows which module runs which kernels) when it runs ``step`` here, else None
    (the numpy reference). It does when kernels are enabled in this thread (``enabled()``: numba installed,
    NUMORACLE_JIT, disabled() / forced(), the entry point's for_work) and the module's ``covers(step)`` says so."""
    if not enabled():
        return None
    kern = load()
    return kern if kern.covers(step) else None


class Calls:
    """How many steps a kernel module's kernels have run in this process (each module's ``calls``)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def add(self, n: int = 1) -> None:
        self.count += n

    def counting(self, fn: Callable) -> Callable:
        """fn, counting its calls here (a kernel module's entry points)."""
        @wraps(fn)
        def counted(*args: Any, **kw: Any) -> Any:
            self.count += 1
            return fn(*args, **kw)
        return counted

    def __repr__(self) -> str:
        return f"Calls({self.count})"


def njit(fn: Callable | None = None, **options: Any) -> Any:
    """numba.njit(cache=True, nogil=True, **options) when numba is installed, compiled once across processes
    (``compile_once``: a process that finds another compiling the same kernel waits for it and loads its code from
    the disk cache); else the function itself (it is then never called: callers check ``enabled()`` first)."""
    def wrap(f: Callable) -> Callable:
        nb = _numba()
        if nb is None:
            return f
        from .kernels.cache import compile_once

        return compile_once(nb.njit(cache=True, nogil=True, **options)(f))
    return wrap if fn is None else wrap(fn)
