"""Running sweep chunks in worker processes that stop cleanly.

* Bounded work: parts are made lazily (:class:`Chunks`) and at most ``window`` of them are in
  flight, so the number of inputs only costs time, never memory.
* A per-chunk timeout: a chunk that runs longer is reported as a converter fault (kind
  ``"timeout"``); a worker stuck in native code cannot be stopped alone, so the pool's workers
  are killed and the other chunks in flight run again in a new pool. In our pool a chunk is timed
  from when a worker starts it (the worker says so on a pipe before it unpickles the converter), not
  from when the executor queues it: starting the workers (seconds on a loaded machine) and waiting
  in the call queue are not the converter's time.
* Ctrl-C: workers ignore SIGINT; the parent kills them at once and re-raises KeyboardInterrupt
  (the command line prints one line).
* Workers die with their parent, also when it is killed (SIGTERM, SIGKILL): on Linux through
  ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, and everywhere (macOS included) through a watchdog thread
  that polls the parent's pid.
"""

from __future__ import annotations

import ctypes
import itertools
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from typing import Any

__all__ = ["Chunks", "init_worker", "run_parts", "kill_pool", "new_pool", "WATCHDOG_S"]

WATCHDOG_S = 0.5  # how often a worker checks that its parent lives
_PR_SET_PDEATHSIG = 1
_STARTED: Any = None  # in a worker of new_pool's pool: the pipe on which it says that it starts a chunk


class Chunks:
    """Parts of spans of input positions, ``step`` at a time, made when iterated (constant memory)."""

    def __init__(self, spans: list[tuple[int, int]], step: int, make: Callable[[int, int], Any]) -> None:
        self.spans, self.step, self.make = spans, step, make

    def __len__(self) -> int:
        return sum(-(-(hi - lo) // self.step) for lo, hi in self.spans)

    def __iter__(self) -> Iterator[Any]:
        for lo, hi in self.spans:
            for a in range(lo, hi, self.step):
                yield self.make(a, min(a + self.step, hi))


# ---- workers -------------------------------------------------------------------------------------
def init_worker(parent_pid: int, started: Any = None) -> None:
    """Pool initializer: one thread each for torch/OpenMP/BLAS; ignore Ctrl-C; die with the parent.

    ``started``: new_pool's queue, on which the worker puts each chunk's key as it starts the chunk.
    """
    global _STARTED
    _STARTED = started
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and ends the workers
    die_with_parent(parent_pid)


def die_with_parent(parent_pid: int) -> None:
    """End this process when ``parent_pid`` is gone (PDEATHSIG on Linux, a polling watchdog everywhere)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # no prctl: the watchdog alone
            pass
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watchdog, args=(parent_pid,), daemon=True, name="numoracle-watchdog").start()


def _watchdog(parent_pid: int) -> None:
    while True:
        time.sleep(WATCHDOG_S)
        if os.getppid() != parent_pid:  # reparented: the parent is gone
            os._exit(1)


class _Pool(ProcessPoolExecutor):
    """new_pool's pool: ``started`` receives the key of each chunk a worker starts (see _marked)."""

    started: Any


def new_pool(workers: int) -> ProcessPoolExecutor:
    """A spawn-context pool (the parent may hold torch/OpenMP threads, which do not survive a fork)."""
    ctx = multiprocessing.get_context("spawn")
    started = ctx.SimpleQueue()  # put() writes at once (no feeder thread a stuck converter could starve)
    pool = _Pool(max_workers=workers, mp_context=ctx, initializer=init_worker, initargs=(os.getpid(), started))
    pool.started = started
    return pool


def _marked(key: int, run: bytes, part: Any) -> Any:
    """In a worker: say that chunk ``key`` starts, then unpickle the converter's job and run it."""
    if _STARTED is not None:
        _STARTED.put(key)
    return pickle.loads(run)(part)


def kill_pool(pool: Executor) -> None:
    """Stop a process pool now: kill its workers, drop its queued work (does not wait for stuck ones)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for p in procs:
        try:
            p.kill()
        except (OSError, AttributeError, ValueError):
            pass
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.join(timeout=2)
        except (OSError, AttributeError, ValueError, AssertionError):
            pass


# ---- the loop ------------------------------------------------------------------------------------
def run_parts(parts: Iterable[Any], run: Callable[[Any], Any], *, executor: Executor | None,
              make_pool: Callable[[], Executor] | None, window: int, timeout: float | None,
              add: Callable[[Any], None], fault: Callable[[Any, str, str], None]) -> None:
    """``add(run(part))`` for every part, in a pool (``make_pool``: ours, killed on timeouts and
    interrupts) or ``executor`` (the caller's), or inline when both are None. Faults of the executor
    and chunks past ``timeout`` seconds go to ``fault(part, kind, message)``.
    """
    if executor is None and make_pool is None:
        for p in parts:
            add(run(p))
        return
    pool = executor if executor is not None else make_pool()
    # timed chunks in our pool say when they start (the keys are read at every poll, so the pipe never fills)
    blob = pickle.dumps(run) if executor is None and timeout is not None else None
    it, keys = iter(parts), itertools.count()
    pending: dict[Future, list] = {}  # future -> [part, time it started (None: not yet), its key]
    try:
        while True:
            for p in itertools.islice(it, max(0, window - len(pending))):
                k = next(keys)
                f = pool.submit(run, p) if blob is None else pool.submit(_marked, k, blob, p)
                pending[f] = [p, None, k]
            if not pending:
                break
            done, _ = wait(pending, timeout=_poll(timeout), return_when=FIRST_COMPLETED)
            for f in done:
                p = pending.pop(f)[0]
                try:
                    add(f.result())
                except Exception as e:  # noqa: BLE001 - a broken pool, a pickling failure, a killed worker
                    fault(p, "executor", f"{type(e).__name__}: {e}")
            late = _late(pending, timeout, None if blob is None else getattr(pool, "started", None))
            if late:
                for f in late:
                    fault(pending.pop(f)[0], "timeout", f"the converter did not finish a chunk within {timeout:g} s "
                          "(stopped; its inputs were not compared)")
                if executor is None:  # our pool: a stuck worker cannot be stopped alone
                    redo = [v[0] for v in pending.values()]
                    kill_pool(pool)
                    pool, pending = make_pool(), {}
                    it = itertools.chain(redo, it)
                else:
                    for f in late:
                        f.cancel()
    except BaseException:
        if executor is None:
            kill_pool(pool)
        raise
    if executor is None:
        pool.shutdown(wait=True)


def _poll(timeout: float | None) -> float:
    return 0.5 if timeout is None else min(0.5, max(0.01, timeout / 4))


def _late(pending: dict[Future, list], timeout: float | None, started: Any = None) -> list[Future]:
    """Futures that have run longer than ``timeout``: timed from the worker's word that it started the chunk
    (``started``, new_pool's queue), else (a caller's executor) from when the future was first seen running."""
    if timeout is None:
        return []
    now, late = time.monotonic(), []
    if started is not None:
        begun = set()
        while not started.empty():
            begun.add(started.get())
        for v in pending.values():
            if v[1] is None and v[2] in begun:
                v[1] = now
    for f, v in pending.items():
        if started is None and v[1] is None and f.running():
            v[1] = now
        if v[1] is not None and now - v[1] > timeout:
            late.append(f)
    return late
