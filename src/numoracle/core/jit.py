"""The optional compiled backend: numba kernels where installed, numpy everywhere else.

numoracle's numpy code is the reference: every compiled kernel has a numpy twin that gives the same
bits, and the tests run both on the same data (``disabled()`` switches the kernels off). A kernel is
used when all of these hold:

1. numba is importable (``pip install "numoracle[fast]"``); it is imported only when a kernel is
   first needed, so ``import numoracle`` stays fast;
2. the environment variable ``NUMORACLE_JIT`` is not ``0``;
3. no ``disabled()`` block is active in this thread;
4. the call has enough work to repay a kernel's first use in the process (loading it from numba's
   disk cache takes tenths of a second, compiling it on a machine's first run several seconds):
   ``work`` >= ``MIN_WORK`` element steps, unless ``NUMORACLE_JIT=1`` or a ``forced()`` block asks
   for kernels at every size (the kernel tests do, on small data). An entry point (``simulate``,
   ``exact_matmul``) decides once for the whole call with ``for_work``; the steps inside ask
   ``enabled()`` and follow that decision, so a step outside such a block stays on numpy.

Kernel modules decorate their functions with ``njit`` below and are imported lazily by the code
that calls them (``if jit.enabled(): from . import kernels``, inside the entry point's ``for_work``).
Compiled code is cached on disk (numba's ``cache=True``), so only the first run on a machine pays
the compilation.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from .policy import Rounding

__all__ = ["enabled", "disabled", "forced", "for_work", "njit", "MIN_WORK", "MODE_CODES",
           "RNE", "RNA", "RTZ", "UP", "DOWN", "ODD"]

MIN_WORK = 1 << 22   # element steps (e.g. m * n * K of a matmul) from which the kernels are used

# the rounding modes as the integers kernels branch on (numba cannot take an Enum); stochastic
# rounding has none: no kernel takes it
RNE, RNA, RTZ, UP, DOWN, ODD = range(6)
MODE_CODES = {Rounding.NEAREST_EVEN: RNE, Rounding.NEAREST_AWAY: RNA, Rounding.TOWARD_ZERO: RTZ,
              Rounding.UP: UP, Rounding.DOWN: DOWN, Rounding.TO_ODD: ODD}

_state = threading.local()


@lru_cache(maxsize=1)
def _numba() -> Any:
    """The numba module, or None when it is not installed (or fails to import)."""
    try:
        import numba
    except Exception:  # pragma: no cover - depends on the environment
        return None
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


def for_work(work: int):
    """The block of an entry point doing ``work`` element steps: its steps use the kernels when the
    work repays them (or they are forced), else the numpy path (one decision for the whole call)."""
    return _inside("large") if _repays(work) else disabled()


def njit(fn: Callable | None = None, **options: Any) -> Any:
    """numba.njit(cache=True, nogil=True, **options) when numba is installed; else the function itself
    (it is then never called: callers check ``enabled()`` first)."""
    def wrap(f: Callable) -> Callable:
        nb = _numba()
        if nb is None:
            return f
        return nb.njit(cache=True, nogil=True, **options)(f)
    return wrap if fn is None else wrap(fn)
