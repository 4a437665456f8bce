"""Which backend runs each step of simulate's program: the numpy reference or a compiled kernel (one place).

Each kind of step has its numpy reference (models/engine/numpysteps.py) and, where one exists, a kernel module
(``_KERNELS``) that keeps core/jit.py's contract: ``covers(step)``, ``run(step, V, sub, ctx)``, ``calls``.
``assign`` asks ``jit.kernel_for`` once per step, before anything runs, and logs at DEBUG (logger
``numoracle.models``) how many steps of each kind each backend runs. A BlockRun the run kernel does not
take is decided step by step. A whole program of additions (a tree: Const, Load, Add and Chain steps) is offered
first, as one ``TreeRun``, to the tree kernel (models/kernels/tree.py), which runs it in one call.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

import numpy as np

from ...core import jit
from .numpysteps import RUNNERS
from .steps import BlockRun, BlockStep, Chain, Program, Step, TreeRun

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


def _tree():
    from ..kernels import tree
    return tree


_KERNELS = {Chain: _chain, BlockStep: _block, BlockRun: _blockrun, TreeRun: _tree}   # each step kind's kernels


def _backend(step: Step) -> tuple[Callable, str]:
    load = _KERNELS.get(type(step))
    kern = jit.kernel_for(step, load) if load else None
    return (kern.run, "numba") if kern is not None else (RUNNERS[type(step)], "numpy")


def _whole(prog: Program) -> list[tuple[Step, Callable]] | None:
    """The program as one TreeRun with the tree kernel's runner, where that kernel takes it; else None."""
    tree = TreeRun(dst=np.array([prog.result]), steps=prog.steps, result=prog.result, nslots=prog.nslots)
    run, name = _backend(tree)
    if name != "numba":
        return None
    logger.debug("simulate: TreeRun numba x1 (%d steps)", len(prog.steps))
    return [(tree, run)]


def assign(steps: tuple[Step, ...], what: str = "simulate", program: Program | None = None
           ) -> list[tuple[Step, Callable]]:
    """(step, runner) for every step, in order: runner(step, V, sub, ctx) gives the step's values. With the
    ``program`` (of these steps), a kernel may take it whole (one step, which writes the result's slot)."""
    out: list[tuple[Step, Callable]] = []
    tally: Counter = Counter()
    on = jit.enabled()
    if on and program is not None:
        whole = _whole(program)
        if whole is not None:
            return whole
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
