"""Conformance sweeps: run a third-party converter over many source codes and compare it with the engine.

>>> r = sweep("ml_dtypes", "fp64", "bf16", inputs=np.array([0x3FF0100000400000, 0xFFF8000000000000], np.uint64))
>>> r.verdict, r.counts()["nan_payload_or_sign"]  # ml_dtypes keeps the sign of a NaN: a known deviation
('explained', 1)

``fn`` is any callable that takes a native array of the source dtype (numpy / ml_dtypes; TF32 in
its float32 container) and returns the converted array (numpy / ml_dtypes array, torch tensor,
or anything ``np.asarray`` reads, e.g. a jax array), or one of the library names ``"numpy"``,
``"ml_dtypes"``, ``"torch"``, ``"jax"`` (then :class:`Converter` runs ``native.native_cast``).
The known deviations applied are those the installed version of the library shows; the report's
``known_note`` names the recorded ones it no longer shows (``"fixed in 0.7"``).

Inputs are split into chunks, each converted by ``fn`` and by the engine (``cast_codes`` on the
codes), compared code for code, and the mismatches classified (``sweepreport``); chunks run on a
``concurrent.futures.Executor``: a spawn-context process pool by default, or a
``ThreadPoolExecutor``, or a Dask ``Client.get_executor()``. The merged report does not depend on
the executor or the chunking: counts add up and each class keeps the witnesses with the smallest
source codes. A chunk where ``fn`` raises or returns a wrong shape/dtype is reported (the other
chunks still run); the first ``2^16`` inputs of every chunk are converted twice to catch a
non-deterministic converter.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import pickle
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

import numpy as np

from ..core.engine.convert import check_codes
from ..core.formats.format import TF32, AnyFormat, format_of
from ..core.formats.interop import as_array, as_native, native_dtype
from ..core.formats.policy import Policy, Rounding, resolve_policy
from ..core.progress import progress as progress_bar
from ..core.text import hex_width
from .converters import Converter, _fn_name, _library_version
from .deviations import LIBRARIES, fixed_for, installed_version
from .report import (
    CLASSES,
    ClassStats,
    MergedChunks,
    SweepError,
    SweepReport,
)
from .sweepchunk import Converted, Job, Part, Result, check_chunk, convert_chunk, run_chunk
from .sweepinputs import BLOCK, random_codes
from .sweeppool import Chunks, new_pool, run_parts

__all__ = ["sweep", "Converter", "SweepReport", "random_codes", "BLOCK"]

MAX_RANDOM_INPUTS = 1 << 48  # inputs=N: the most random codes one sweep takes


# ---- the sweep ------------------------------------------------------------------------------------
def _resolve_fn(fn: Any, dst: AnyFormat) -> tuple[Callable, str, str | None]:
    """(callable, name for the report, library whose known deviations apply)."""
    if isinstance(fn, str):
        if fn not in LIBRARIES:
            raise ValueError(f"unknown library {fn!r}; fn is a callable or one of {', '.join(LIBRARIES)}")
        fn = Converter(fn, dst)
    if not callable(fn):
        raise TypeError(f"fn must be a callable (native array of src -> array of dst) or a library name "
                        f"({', '.join(LIBRARIES)}), got {type(fn).__name__}")
    lib = getattr(fn, "library", None)
    lib = lib if isinstance(lib, str) and lib in LIBRARIES else None
    if isinstance(fn, Converter):
        return fn, _library_version(fn.library), lib
    return fn, _fn_name(fn) + (f" (known deviations of {lib})" if lib else ""), lib


def _parts(inputs: Any, src: AnyFormat, dst: AnyFormat, pol: Policy, chunk: int,
           seed: int) -> tuple[list[Part], str, int]:
    """Chunks of the inputs, their description and their number."""
    if isinstance(inputs, str):
        if inputs == "full":  # the pytest plugin's deepest level: every code where that is feasible
            inputs = "exhaustive" if src.bits <= 32 else "boundary"
        if inputs == "exhaustive":
            if src.bits > 32:
                raise ValueError(f"inputs='exhaustive' enumerates every code, and {src.name} has 2^{src.bits}; "
                                 "use inputs='boundary' or inputs=N (N seeded, boundary-weighted random codes)")
            n = 1 << src.bits
            return (Chunks([(0, n)], chunk, lambda lo, hi: Part(lo, hi, "range")),
                    f"exhaustive (all 2^{src.bits} = {n} codes)", n)
        if inputs == "boundary":
            from .boundary import boundary_values  # (boundary imports nothing of sweep; lazy for import time)
            bv = boundary_values(src, dst, rounding=pol.rounding.value, overflow=pol.overflow.value)
            codes = np.asarray(bv.codes)
            codes = check_codes(codes, src)
            return _array_parts(codes, chunk), f"boundary ({codes.size} codes from boundary_values)", codes.size
        raise ValueError(f"inputs must be 'exhaustive', 'boundary', a count N or an array of {src.name} codes; "
                         f"got {inputs!r}")
    if isinstance(inputs, (int, np.integer)) and not isinstance(inputs, bool):
        n = int(inputs)
        if not 1 <= n <= MAX_RANDOM_INPUTS:
            raise ValueError(f"inputs=N needs 1 <= N <= 2^{MAX_RANDOM_INPUTS.bit_length() - 1} random codes "
                             f"(sweep.MAX_RANDOM_INPUTS: days of work at ~1e9 codes/s), got {n}")
        step = max(BLOCK, chunk // BLOCK * BLOCK)
        return (Chunks([(0, n)], step, lambda lo, hi: Part(lo, hi, "random", seed=seed)),
                f"random ({n} codes, seed {seed}; half uniform over {src.name} codes, half near {dst.name} "
                "rounding ties)", n)
    if isinstance(inputs, range) or (isinstance(inputs, (list, tuple)) and inputs
                                     and all(isinstance(g, range) for g in inputs)):
        return _range_parts([inputs] if isinstance(inputs, range) else list(inputs), src, chunk)
    if isinstance(inputs, (list, tuple)) and not inputs:
        raise ValueError("inputs is empty; give at least one code (or 'exhaustive', 'boundary', N)")
    if isinstance(inputs, (list, tuple)) and all(isinstance(v, (int, np.integer)) for v in inputs):
        big = any(int(v) >= 1 << 63 for v in inputs)
        inputs = np.array([int(v) for v in inputs], np.uint64 if big else np.int64)  # Python ints beyond int64
    codes = as_array(inputs, "inputs")
    if codes.dtype.kind not in "iu" or codes.ndim != 1:
        raise TypeError(f"inputs as an array must be a 1-d array of integer {src.name} codes (bit patterns), got "
                        f"dtype {codes.dtype}, shape {codes.shape}; for values use numoracle.encode(values, src)")
    codes = check_codes(codes, src)
    if not codes.size:
        raise ValueError("inputs is an empty array; give at least one code")
    return _array_parts(np.ascontiguousarray(codes), chunk), f"{codes.size} given codes", codes.size


def _range_parts(ranges: list[range], src: AnyFormat, chunk: int) -> tuple[Chunks, str, int]:
    for g in ranges:
        if g.step != 1 or g.start < 0 or g.stop > 1 << src.bits or not len(g):
            raise ValueError(f"a range of inputs must be a non-empty range(start, stop) of {src.name} codes within "
                             f"0..2^{src.bits} (step 1), got {g!r}")
    parts = Chunks([(g.start, g.stop) for g in ranges], chunk, lambda lo, hi: Part(lo, hi, "range"))
    n = sum(len(g) for g in ranges)
    w = hex_width(src)
    what = (f"codes 0x{ranges[0].start:0{w}x}..0x{ranges[0].stop - 1:0{w}x}" if len(ranges) == 1
            else f"{len(ranges)} ranges of codes")
    return parts, f"{what} ({n} codes)", n


def _array_parts(codes: np.ndarray, chunk: int) -> list[Part]:
    return [Part(lo, min(lo + chunk, codes.size), "codes", codes[lo:lo + chunk]) for lo in range(0, codes.size, chunk)]


def _check_arguments(src: Any, dst: Any, rounding: Any, overflow: Any, nan_to: Any, ftz: bool, daz: bool,
                     progress: Any, witnesses: Any, chunk: Any, workers: Any, timeout: Any, executor: Any,
                     seed: Any) -> tuple[AnyFormat, AnyFormat, Policy]:
    """Step 1 of a sweep: the formats and the engine's policy, every argument checked (the message says the fix)."""
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be True, False or None, got {type(progress).__name__}")
    src, dst = format_of(src), format_of(dst)
    if Rounding.of(rounding) is Rounding.STOCHASTIC:
        raise ValueError("sweep compares deterministic casts; rounding='sr' needs per-element random bits, which a "
                         "third-party converter does not take: sweep another mode")
    pol = resolve_policy(dst, rounding, overflow, nan_to, ftz, daz)
    if native_dtype(src) is None and src != TF32:
        raise ValueError(f"{src.name} has no numpy or ml_dtypes dtype, so fn cannot be given native {src.name} "
                         "arrays; sweep a source format that has one")
    if not isinstance(witnesses, int) or witnesses < 0:
        raise ValueError(f"witnesses must be an int >= 0, got {witnesses!r}")
    if not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"chunk must be a positive int (inputs per task), got {chunk!r}")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer,
                                                                                       np.floating))
                                or not 0 < timeout < math.inf):
        raise ValueError(f"timeout must be a positive number of seconds (per chunk), got {timeout!r}")
    if workers is not None and executor is not None:
        raise ValueError("workers sizes the default process pool; with executor= size the executor itself")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int (it seeds the random inputs), got {seed!r}")
    return src, dst, pol


def sweep(
    fn: Callable | str,
    src: Any,
    dst: Any,
    *,
    inputs: str | int | Any = "exhaustive",
    rounding: Any = "rne",
    overflow: Any = None,
    nan_to: Any = None,
    ftz: bool = False,
    daz: bool = False,
    executor: Executor | None = None,
    workers: int | None = None,
    chunk: int = 1 << 24,
    progress: bool | None = None,
    seed: int = 0,
    witnesses: int = 4,
    timeout: float | None = None,
) -> SweepReport:
    """Run converter ``fn`` from ``src`` to ``dst`` over ``inputs``; compare with ``numoracle.cast``.

    fn: a callable (native array of ``src`` -> array of ``dst``) or ``"numpy"`` / ``"ml_dtypes"`` /
    ``"torch"`` / ``"jax"`` (that library's own cast, as :class:`Converter`); a callable with a ``library``
    attribute naming one of them (a GPU wrapper, say) is checked against that library's known
    deviations. inputs: ``"exhaustive"`` (every code; sources of 32 bits or fewer), ``"boundary"``
    (``numoracle.conformance.boundary_values(src, dst).codes``), ``"full"`` (exhaustive up to 32-bit sources,
    boundary above: the pytest plugin's ``sweep_inputs`` at ``--numoracle-level=full``), an int N
    (N seeded random codes, see :func:`random_codes`) or a 1-d array of source codes.
    rounding/overflow/nan_to/ftz/daz: the engine's policy (the destination's defaults when omitted). executor: any
    ``concurrent.futures.Executor``; None starts a spawn-context process pool of ``workers``
    processes (default ``os.cpu_count()``), except that a single chunk runs in the calling process;
    with the default pool ``fn`` must be picklable (a module-level function or class instance).
    chunk: inputs per task (default 2^24: about 0.2 GB of temporaries per worker for FP32 sources).
    progress: a progress bar on stderr (default: on a terminal, numoracle.core.progress). witnesses: how
    many (smallest source codes) each class keeps. timeout: seconds one chunk may take; a chunk past it is
    reported as a converter fault (kind ``"timeout"``) and, in the default pool, its worker is killed
    (with it, the pool: chunks in flight run again in a new one); the default pool is used even for a
    single chunk when a timeout is given. Ctrl-C kills the default pool's workers at once, and they
    die with the calling process if it is killed (see ``numoracle.sweeppool``).

    A converter that must stay in the calling process (a GPU's one CUDA context) says so with an
    attribute ``in_process = True``: then this process converts the chunks one after another
    while the workers (the default pool or ``executor``) run the engine's cast, the comparison
    and the classification, pipelined (the next chunk converts while the workers check earlier
    ones), and fn need not be picklable. Such a fn cannot be stopped: a call past ``timeout`` is
    reported as a timeout when it returns, and its chunk is not compared.
    """
    t0 = time.perf_counter()
    src, dst, pol = _check_arguments(src, dst, rounding, overflow, nan_to, ftz, daz, progress, witnesses, chunk,
                                     workers, timeout, executor, seed)
    fn, against, lib = _resolve_fn(fn, dst)
    if isinstance(fn, Converter):
        _probe(fn, src)
    # the known deviations were recorded under RNE and each destination's own nan_to/ftz/daz
    default_pol = pol == resolve_policy(dst, pol.rounding, pol.overflow) and pol.rounding is Rounding.NEAREST_EVEN
    job = Job(fn, src, dst, pol, lib if default_pol else None, witnesses)
    parts, described, n_inputs = _parts(inputs, src, dst, pol, int(chunk), int(seed))
    label = f"sweep {src.name}->{dst.name} vs {against}"
    merged, n_workers, layout = _execute(job, parts, executor, workers, timeout, progress, label)
    return _report(job, against, described, n_inputs, merged, time.perf_counter() - t0, n_workers, len(parts),
                   layout)


def _execute(job: Job, parts: Any, executor: Executor | None, workers: int | None, timeout: float | None,
             progress: bool | None, label: str) -> tuple[MergedChunks, int, str]:
    """Step 3 of a sweep: run the chunks (plain or pipelined layout) and merge their results."""
    pipelined = getattr(job.fn, "in_process", False) is True  # fn converts here; the workers check
    work = dataclasses.replace(job, fn=None) if pipelined else job  # what the workers are sent
    merged = MergedChunks()
    n_parts = len(parts)
    own = executor is None and (n_parts > 1 or timeout is not None)
    n_workers = 1
    if own:
        n_workers = min(workers or os.cpu_count() or 1, n_parts)
        _check_picklable(work)
    elif executor is not None:
        n_workers = _executor_workers(executor)
    bar = progress_bar(total=n_parts, desc=label, unit="chunk", enable=progress, eta_after=n_workers)

    def add(r: Result) -> None:
        merged.add(r, job.witnesses)
        bar.update(1)

    def fault(p: Part | Converted, kind: str, message: str) -> None:
        p = p.part if isinstance(p, Converted) else p
        merged.error(kind, message, p, _first_last(p), False)
        bar.update(1)

    # pipelined: this process converts chunk k+1 while the workers check chunk k (a bounded window)
    items = (convert_chunk(job, p, timeout) for p in parts) if pipelined else parts
    try:
        run_parts(items, functools.partial(check_chunk if pipelined else run_chunk, work), executor=executor,
                  make_pool=(lambda: new_pool(n_workers)) if own else None,
                  window=max(n_workers, 1) + 2 if pipelined else 2 * max(n_workers, 1), timeout=timeout,
                  add=add, fault=fault)
    finally:
        bar.close()
    layout = "ProcessPoolExecutor" if own else "inline" if executor is None else type(executor).__name__
    return merged, n_workers, f"pipelined: fn in this process, checks on {layout}" if pipelined else layout


def _check_picklable(job: Job) -> None:
    """The default pool sends the job (with fn) to worker processes: refuse early what cannot go."""
    try:
        pickle.dumps(job)
    except Exception as e:  # noqa: BLE001 - any pickling failure
        raise TypeError(f"fn cannot be sent to worker processes ({type(e).__name__}: {e}); use a module-level "
                        "function or class instance, or pass executor=concurrent.futures.ThreadPoolExecutor()"
                        ) from None


def _executor_workers(executor: Executor) -> int:
    """How many tasks ``executor`` runs at once, where it says (0 when it does not)."""
    n = getattr(executor, "_max_workers", None)
    if n:
        return int(n)
    client = getattr(executor, "_client", None)  # a Dask ClientExecutor
    try:
        return int(sum(client.nthreads().values())) if client is not None else 0
    except Exception:  # noqa: BLE001 - an informational figure only
        return 0


def _first_last(p: Part) -> tuple[int, int]:
    if p.kind == "range":
        return p.lo, p.hi - 1
    if p.codes is not None and p.codes.size:
        return int(p.codes[0]), int(p.codes[-1])
    return 0, 0


def _probe(fn: Converter, src: AnyFormat) -> None:
    """Refuse a library cast that does not exist before starting workers."""
    try:
        fn(as_native(np.zeros(1, src.code_dtype), src))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{fn.library} cannot cast {src.name} to {fn.dst.name}: {e}") from None


def _report(job: Job, against: str, described: str, n_inputs: int, m: MergedChunks, seconds: float, workers: int,
            chunks: int, executor: str) -> SweepReport:
    classes: dict[str, ClassStats] = {}
    for name in CLASSES:
        if not m.counts.get(name):
            continue
        t = m.ties.get(name)
        classes[name] = ClassStats(
            name, int(m.counts[name]), int(m.known[name]) if job.known is not None else None,
            {lab: int(c) for (cl, lab), c in sorted(m.labels.items()) if cl == name},
            None if t is None or t < 0 else int(t), tuple(m.witnesses.get(name, ())))
    errors = tuple(sorted(
        (SweepError(kind, msg, (e[0], e[1]), (e[2], e[3]), e[4], e[5], e[6]) for (kind, msg), e in m.errors.items()),
        key=lambda e: (e.first_range, e.kind, e.message)))
    lib = _lib_of(job.fn)
    if lib is None:
        note = (f"fn is not a known library (give it a library attribute naming {', '.join(LIBRARIES[:-1])} or "
                f"{LIBRARIES[-1]} to check that library's known deviations)")
    elif job.known is None:
        note = (f"known deviations of {lib} not checked: they are recorded for RNE with the destination's "
                f"default nan_to and without ftz/daz, and this sweep uses {job.pol}")
    else:
        note = _fixed_note(lib, job.src, job.dst)
    return SweepReport(job.src, job.dst, against, lib, str(job.pol), described, n_inputs, m.compared, m.matching,
                       classes, m.nondet, tuple(m.nondet_witnesses), errors, note, seconds, m.cpu, workers, chunks,
                       executor)


def _fixed_note(lib: str, src: AnyFormat, dst: AnyFormat) -> str:
    """Information, not a failure: the recorded deviations of the pair that the installed version no longer shows."""
    fixed = fixed_for(lib, src, dst)
    if not fixed:
        return ""
    kinds = dict.fromkeys(f"{d.kind} ({d.versions}: {d.status(installed_version(lib))})" for d in fixed)
    return f"{lib} {installed_version(lib)} does not show these recorded deviations: {'; '.join(kinds)}"


def _lib_of(fn: Callable) -> str | None:
    lib = getattr(fn, "library", None)
    return lib if isinstance(lib, str) and lib in LIBRARIES else None
