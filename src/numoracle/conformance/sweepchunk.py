"""One chunk of a sweep: the converter's codes and the engine's, compared and classified.

Two layouts use these steps. The plain one runs :func:`run_chunk` (convert, cast, compare) in a
worker. The pipelined one, for a converter that must stay in the calling process (a GPU's one
CUDA context, declared by ``in_process = True`` on the converter), runs :func:`convert_chunk`
there and :func:`check_chunk` (the engine's cast, the comparison, the classes) in workers.

A chunk's CPU figure is its own: the CPU clock of the thread that ran it (``time.thread_time``),
or of the process where the chunk runs in a worker process's main thread (the converter's own
threads, torch's intra-op pool say, count there); never the process-wide clock summed over
threads that run chunks side by side.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.engine.codekeys import is_nan
from ..core.engine.convert import cast_codes, decode
from ..core.formats.format import AnyFormat
from ..core.formats.interop import as_native, native_dtype, to_codes
from ..core.formats.policy import Policy, resolve_policy
from .report import Witness, smallest, summarise
from .sweepinputs import random_codes

__all__ = ["NDET_SAMPLE", "Job", "Part", "Result", "Converted", "part_codes", "run_chunk", "convert_chunk",
           "check_chunk", "chunk_cpu_clock"]

NDET_SAMPLE = 1 << 16  # inputs per chunk converted a second time


def chunk_cpu_clock() -> Callable[[], float]:
    """The CPU clock of one chunk: the process's in a main thread (a worker process's, or the caller's
    running chunks one at a time), else the calling thread's own (a ThreadPoolExecutor's threads)."""
    return time.process_time if threading.current_thread() is threading.main_thread() else time.thread_time


@dataclass(frozen=True)
class Job:
    fn: Callable | None  # None in the pipelined layout's workers (the converter stays in the calling process)
    src: AnyFormat
    dst: AnyFormat
    pol: Policy
    known: str | None  # library whose known deviations classify the mismatches
    witnesses: int


@dataclass(frozen=True)
class Part:
    lo: int  # input positions [lo, hi)
    hi: int
    kind: str  # "range" (codes lo..hi) | "codes" | "random"
    codes: np.ndarray | None = None
    seed: int = 0


@dataclass
class Result:
    part: Part
    compared: int = 0
    matching: int = 0
    counts: Counter = field(default_factory=Counter)
    known: Counter = field(default_factory=Counter)
    labels: Counter = field(default_factory=Counter)  # (class, label) -> count
    ties: Counter = field(default_factory=Counter)  # class -> ties; -1 entries mark undecidable
    witnesses: dict = field(default_factory=dict)
    nondet: int = 0
    nondet_witnesses: tuple = ()
    error: tuple | None = None  # (kind, message, compared)
    first_last: tuple[int, int] = (0, 0)
    seconds: float = 0.0
    cpu: float = 0.0


def part_codes(job: Job, part: Part) -> np.ndarray:
    if part.kind == "range":
        return np.arange(part.lo, part.hi, dtype=np.dtype(job.src.code_dtype))
    if part.kind == "random":
        return random_codes(job.src, job.dst, part.hi - part.lo, part.seed, part.lo)
    assert part.codes is not None
    return part.codes


def _call(job: Job, codes: np.ndarray) -> Any:
    return job.fn(as_native(codes.copy(), job.src))  # a copy: fn may write into its input


def _result_codes(out: Any, shape: tuple[int, ...], dst: AnyFormat) -> tuple[np.ndarray | None, tuple | None]:
    """fn's output as dst codes, or None with (kind, message, compared) when it breaks the contract."""
    dtype = getattr(out, "dtype", None)
    try:
        a, fmt = to_codes(out)
    except (TypeError, ValueError) as e:
        return None, ("wrong_dtype", f"returned {type(out).__name__} (dtype {dtype}) where {dst.name} was expected "
                      f"({e}); not compared", False)
    if a.shape != shape:
        return None, ("wrong_shape", f"returned shape {a.shape} for an input of shape {shape}; not compared", False)
    if fmt == dst:
        return a, None
    what = f"returned {fmt.name} (dtype {dtype}) where {dst.name} was expected"
    if fmt.is_integer != dst.is_integer:
        hint = (f"; if these are bit patterns, return them viewed as {dst.name}"
                if fmt.is_integer and fmt.bits == dst.bits else "")
        return None, ("wrong_dtype", f"{what}{hint}; not compared", False)
    c = cast_codes(a, fmt, dst, resolve_policy(dst))
    back = cast_codes(c, dst, fmt, resolve_policy(fmt))
    same = (back == a) | (is_nan(a, fmt) & is_nan(back, fmt))
    if same.all() and native_dtype(dst) is None:  # TF32/INT4/UINT4 come back in a container dtype: the contract
        return c, None
    if same.all():
        return c, ("wrong_dtype", f"{what}; every value is a {dst.name} value, so the values were converted "
                   f"exactly and compared", True)
    i = int(np.flatnonzero(~same.ravel())[0])
    return None, ("wrong_dtype", f"{what}, and element {i} ({decode(a.ravel()[i:i + 1], fmt)[0]!r}) is not a "
                  f"{dst.name} value; not compared", False)


def run_chunk(job: Job, part: Part) -> Result:
    """Convert one chunk with fn and the engine, compare, classify; never raises for fn's faults."""
    clock = chunk_cpu_clock()
    t0, c0 = time.perf_counter(), clock()
    res = Result(part)
    codes = part_codes(job, part)
    if codes.size:
        res.first_last = (int(codes[0]), int(codes[-1]))
    rng = part.kind == "range"  # codes lo..hi: fn may have the array (and write into it); the others get a copy
    r = cast_codes(codes, job.src, job.dst, job.pol) if rng else None
    try:
        out = job.fn(as_native(codes if rng else codes.copy(), job.src))
    except Exception as e:  # noqa: BLE001 - fn is foreign code: report whatever it raises
        res.error = ("exception", f"{type(e).__name__}: {e}", False)
    else:
        a, res.error = _result_codes(out, codes.shape, job.dst)
        if a is not None:
            if r is None:
                r = cast_codes(codes, job.src, job.dst, job.pol)
            neq = a != r
            n_mm = int(np.count_nonzero(neq))
            res.compared, res.matching = codes.size, codes.size - n_mm
            if rng:  # fn may have written into codes: make them again (only the ones needed)
                head = dataclasses.replace(part, hi=min(part.hi, part.lo + NDET_SAMPLE))
                codes = part_codes(job, part if n_mm else head)
            if n_mm:
                _classify(job, res, codes[neq], a[neq], r[neq], rng)
            _check_determinism(job, res, codes[:NDET_SAMPLE], a[:NDET_SAMPLE])
    res.seconds, res.cpu = time.perf_counter() - t0, clock() - c0
    return res


def _classify(job: Job, res: Result, codes: np.ndarray, a: np.ndarray, r: np.ndarray, ascending: bool) -> None:
    """The classes of the mismatching codes (fn gave ``a``, the engine ``r``) into ``res``."""
    summ = summarise(job.src, job.dst, job.pol, job.known, job.witnesses, codes, a, r, ascending=ascending)
    res.counts, res.known, res.labels, res.ties, res.witnesses = (
        summ["counts"], summ["known"], summ["labels"], summ["ties"], summ["witnesses"])


# ---- the pipelined layout: convert here, check in a worker ------------------------------------------
@dataclass
class Converted:
    """One chunk converted by fn in the calling process: what a worker needs to check it."""

    part: Part
    out: np.ndarray | None = None  # fn's result as dst codes (None: not compared, see error)
    error: tuple | None = None
    nondet: int = 0
    nondet_witnesses: tuple = ()
    first_last: tuple[int, int] = (0, 0)
    seconds: float = 0.0
    cpu: float = 0.0  # the converting thread's own CPU time


def convert_chunk(job: Job, part: Part, timeout: float | None = None) -> Converted:
    """fn on one chunk, in this thread (and its determinism check); never raises for fn's faults.

    fn cannot be stopped here, so a call past ``timeout`` seconds is reported (kind ``"timeout"``) when
    it returns, and its chunk is not compared."""
    assert job.fn is not None
    t0, c0 = time.perf_counter(), time.thread_time()
    conv = Converted(part)
    codes = part_codes(job, part)
    if codes.size:
        conv.first_last = (int(codes[0]), int(codes[-1]))
    rng = part.kind == "range"  # codes lo..hi: fn may write into them (they are made again below)
    try:
        out = job.fn(as_native(codes if rng else codes.copy(), job.src))
    except Exception as e:  # noqa: BLE001 - fn is foreign code: report whatever it raises
        conv.error = ("exception", f"{type(e).__name__}: {e}", False)
    else:
        took = time.perf_counter() - t0
        if timeout is not None and took > timeout:
            conv.error = ("timeout", f"the converter took {took:.3g} s on a chunk, more than the timeout of "
                          f"{timeout:g} s (it runs in this process, so it could not be stopped; its inputs were "
                          "not compared)", False)
        else:
            conv.out, conv.error = _result_codes(out, codes.shape, job.dst)
        if conv.out is not None:
            if rng:
                codes = part_codes(job, dataclasses.replace(part, hi=min(part.hi, part.lo + NDET_SAMPLE)))
            _check_determinism(job, conv, codes[:NDET_SAMPLE], conv.out[:NDET_SAMPLE])
    conv.seconds, conv.cpu = time.perf_counter() - t0, time.thread_time() - c0
    return conv


def check_chunk(job: Job, conv: Converted) -> Result:
    """The engine's cast of a converted chunk, the comparison and the classes (in a worker: no fn needed)."""
    clock = chunk_cpu_clock()
    t0, c0 = time.perf_counter(), clock()
    res = Result(conv.part, error=conv.error, nondet=conv.nondet, nondet_witnesses=conv.nondet_witnesses,
                 first_last=conv.first_last)
    if conv.out is not None:
        codes = part_codes(job, conv.part)
        r = cast_codes(codes, job.src, job.dst, job.pol)
        neq = conv.out != r
        n_mm = int(np.count_nonzero(neq))
        res.compared, res.matching = codes.size, codes.size - n_mm
        if n_mm:
            _classify(job, res, codes[neq], conv.out[neq], r[neq], conv.part.kind == "range")
    res.seconds = conv.seconds + time.perf_counter() - t0
    res.cpu = conv.cpu + clock() - c0
    return res


def _check_determinism(job: Job, res: Result | Converted, codes: np.ndarray, a: np.ndarray) -> None:
    try:
        a2, err = _result_codes(_call(job, codes), codes.shape, job.dst)
    except Exception as e:  # noqa: BLE001
        a2, err = None, ("exception", f"{type(e).__name__}: {e}", True)
    if a2 is None:
        assert err is not None
        res.error = res.error or (err[0], f"a second call on the same inputs (the first succeeded): {err[1]}", True)
        return
    d = np.flatnonzero(a2 != a)
    res.nondet = int(d.size)
    res.nondet_witnesses = tuple(Witness(int(codes[i]), int(a[i]), int(a2[i]), "call 1, call 2")
                                 for i in d[smallest(codes[d], job.witnesses)])


