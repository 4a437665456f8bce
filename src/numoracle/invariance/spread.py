"""Spreading an invariance check's first configurations over worker processes or a Dask executor (the sweeps'
executor, conformance/sweeppool.py): each part tried in a worker, its classes merged by structural order equality;
bisection then runs in the parent."""

from __future__ import annotations

import pickle
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..conformance.sweeppool import new_pool, run_parts
from ..core.errors import NumoracleError
from .kernel import kernel_factory
from .report import Point
from .search import Sweep
from .space import Config, Space

__all__ = ["PartJob", "run_part", "spread"]


@dataclass
class PartJob:
    """What a worker needs to try ``configs`` (everything picklable: the kernel must be a module-level function)."""

    index: int
    fn: Any
    make_fn: Any
    op: str
    dtype: str
    dt: np.dtype
    space: Space
    configs: list[Config]
    settings: dict          # evidence, draws, reveal_kw, seed (Sweep's keywords)
    seconds: float
    call_seconds: float
    max_m: int


@dataclass
class _Kernel:
    """The part of a worker's KernelAt the parent needs (its configuration and output format)."""

    config: Config
    out_fmt: Any


def run_part(job: PartJob) -> tuple[int, bool, Sweep]:
    """In a worker: try the part's configurations (no bisection); the sweep comes back without its kernels."""
    kernel_at = kernel_factory(job.fn, job.make_fn, job.op, job.dt, job.call_seconds, job.settings["seed"],
                               job.max_m)
    sw = Sweep(kernel_at, job.space, job.op, job.dtype, deadline=time.perf_counter() + job.seconds, progress=None,
               **job.settings)
    complete = sw.run(job.configs, bisect=False)
    sw.calls = sum(k.calls for k in sw.kernels.values())
    if sw.nondet is not None:
        k, inputs, o1, o2 = sw.nondet
        sw.nondet = (_Kernel(k.config, k.out_fmt), inputs, o1, o2)
    sw.kernels, sw.kernel_at = {}, None  # type: ignore[assignment]
    sw.clear_caches()
    return job.index, complete, sw


def _parts(configs: list[Config], n: int) -> list[list[Config]]:
    """n contiguous parts (neighbouring configurations share a class: fewer reveals per part)."""
    n = max(1, min(n, len(configs)))
    cuts = [round(i * len(configs) / n) for i in range(n + 1)]
    return [configs[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def spread(sweep: Sweep, configs: list[Config], *, fn: Any, make_fn: Any, dt: np.dtype, call_seconds: float,
           max_m: int, workers: int, executor: Executor | None, seconds: float) -> bool:
    """Try ``configs`` in ``workers`` processes (or ``executor``'s); adopt the parts in order. False when a part
    ran out of time; a part the executor lost or that passed the time budget leaves its configurations
    undetermined, with the reason."""
    if executor is None:
        try:
            pickle.dumps(fn if fn is not None else make_fn)
        except Exception as e:
            raise NumoracleError(f"workers=... needs a kernel that pickles (a module-level function), got "
                                 f"{type(e).__name__}: {e}") from None
    settings = {"evidence": sweep.evidence, "draws": sweep.draws, "reveal_kw": sweep.reveal_kw, "seed": sweep.seed}
    jobs = [PartJob(i, fn, make_fn, sweep.op, sweep.dtype, dt, sweep.space, part, settings, seconds, call_seconds,
                    max_m) for i, part in enumerate(_parts(configs, max(workers, 1) if executor is None else 4))]
    done: list[tuple[int, bool, Sweep]] = []
    lost: list[tuple[PartJob, str]] = []
    run_parts(jobs, run_part, executor=executor, make_pool=None if executor is not None else lambda: new_pool(workers),
              window=len(jobs), timeout=seconds + 30, add=done.append,
              fault=lambda job, kind, msg: lost.append((job, f"{kind}: {msg}")))
    for _, _, part in sorted(done, key=lambda r: r[0]):
        sweep.adopt(part)
    for job, why in lost:
        for c in job.configs:
            sweep.points[c] = Point(c, None, "undetermined", f"the worker's part was lost ({why})")
    return all(ok for _, ok, _ in done) and not lost
