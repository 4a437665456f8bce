"""Which backend runs each step of simulate's program: the numpy reference or a compiled kernel (one place).

Each kind of step has its numpy reference (models/engine/numpysteps.py) and, where one exists, a kernel module
(``_KERNELS``) that keeps core/jit.py's contract: ``covers(step)``, ``run(step, V, sub, ctx)``, ``calls``.
``assign`` asks ``jit.kernel_for`` once per step, before anything runs, and logs at DEBUG (logger
``numoracle.models``) how many steps of each kind each backend runs. A BlockRun the run kernel does not
take is decided step by step.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from ...core import jit
from .numpysteps import RUNNERS
from .steps import BlockRun, BlockStep, Chain, Step

__all__ = ["assign", "logger"]

logger = logging.getLogger("numoracle.models")

def _chain():
    from ..kernels import chain
    return chain


def _block():
    from ..kernels import block
    return block


def _blockrun():
    from ..kernels import blockrun
    return blockrun


_KERNELS = {Chain: _chain, BlockStep: _block, BlockRun: _blockrun}   # the kernel module of each kind of step


def _backend(step: Step) -> tuple[Callable, str]:
    load = _KERNELS.get(type(step))
    kern = jit.kernel_for(step, load) if load else None
    return (kern.run, "numba") if kern is not None else (RUNNERS[type(step)], "numpy")


def assign(steps: tuple[Step, ...], what: str = "simulate") -> list[tuple[Step, Callable]]:
    """(step, runner) for every step, in order: runner(step, V, sub, ctx) gives the step's values."""
    out: list[tuple[Step, Callable]] = []
    tally: Counter = Counter()
    on = jit.enabled()
    for step in steps:
        run, name = _backend(step) if on else (RUNNERS[type(step)], "numpy")
        if isinstance(step, BlockRun) and name == "numpy" and on:
            inner = assign(step.steps, what="")         # the run kernel declined: each block on its own
            if any(r is not RUNNERS[BlockStep] for _, r in inner):
                out += inner
                tally.update((type(s).__name__, "numba" if r is not RUNNERS[BlockStep] else "numpy")
                             for s, r in inner)
                continue
        out.append((step, run))
        tally[type(step).__name__, name] += 1
    if what and logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s: %s", what, "; ".join(f"{kind} {name} x{n}" for (kind, name), n in sorted(tally.items())))
    return out
