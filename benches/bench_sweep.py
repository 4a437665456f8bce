"""Conformance sweep speed: FP32 -> BF16, FP16, E4M3FN, E5M2 against ml_dtypes and torch (and numpy FP16).

Run: python benches/bench_sweep.py [--workers 2] [--step 16] [--numpy] [--full [LIB:DST ...]]
                                   [--pipeline [LIB:DST ...]] [--targets LIB:DST ...]

- profile of one chunk of 2^24 codes (in this process): the engine's cast (``convert.cast_codes``),
  the library's cast, the comparison, on a typical chunk (1.0 .. 2.0) and on one where every code
  mismatches (large negative values into E4M3FN: NaN vs saturation);
- stratified sweep: every ``--step``-th chunk of 2^24 codes (so each exponent range counts in
  proportion) on sweep's process pool with ``--workers`` workers; the CPU time in chunks times
  ``step`` estimates the full sweep's CPU time, and (pool start-up + CPU / workers) its wall time;
- ``--full``: the full 2^32 sweep of the named targets (default ml_dtypes:bf16), wall time measured.
- ``--pipeline``: a converter that must stay in the main process (``in_process = True``, as a GPU's
  one CUDA context; here the library's CPU cast, refusing to be pickled or called elsewhere) over
  every ``--step``-th chunk, in the pipelined layout (converts here, the engine's cast and the
  comparison in ``--workers`` processes) and in the thread layout such a converter needed before
  (a ThreadPoolExecutor of ``--workers`` threads); cores used = CPU time of this process and its
  workers (``resource.getrusage``) / wall time.

The machine may be shared: the load average (os.getloadavg) is printed before and after each step;
figures taken under load overstate the time.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from numoracle.conformance.sweeper import Converter, sweep
from numoracle.core.engine.convert import cast_codes
from numoracle.core.formats.format import FP32, format_of
from numoracle.core.formats.policy import resolve_policy

TARGETS = [("ml_dtypes", "bf16"), ("ml_dtypes", "fp8_e4m3fn"), ("ml_dtypes", "fp8_e5m2"), ("torch", "bf16"),
           ("torch", "fp16"), ("torch", "fp8_e4m3fn"), ("torch", "fp8_e5m2")]
CHUNK = 1 << 24


def load() -> str:
    return "load " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def profile_chunk(library: str, dst: str, start: int) -> str:
    f = format_of(dst)
    codes = np.arange(start, start + CHUNK, dtype=np.uint32)
    conv = Converter(library, f)
    conv(codes[:16].view(np.float32))  # import the library
    t0 = time.perf_counter()
    r = cast_codes(codes, FP32, f, resolve_policy(f))
    t1 = time.perf_counter()
    a = np.asarray(conv(codes.view(np.float32))).view(r.dtype)
    t2 = time.perf_counter()
    n = int(np.count_nonzero(a != r))
    t3 = time.perf_counter()
    rep = sweep(conv, FP32, f, inputs=range(start, start + CHUNK), chunk=CHUNK)
    t4 = time.perf_counter()
    return (f"  {library:9s} {dst:10s} chunk {start:#010x}: engine {t1 - t0:5.2f} s, {library} {t2 - t1:5.2f} s, "
            f"compare {t3 - t2:5.2f} s ({n} mismatches); whole chunk in sweep {t4 - t3:5.2f} s "
            f"({rep.verdict})")


def stratified(library: str, dst: str, workers: int, step: int) -> tuple[float, float, float]:
    ranges = [range(k * CHUNK, (k + 1) * CHUNK) for k in range(0, 256, step)]
    r = sweep(library, "fp32", dst, inputs=ranges, workers=workers, progress=False)
    assert r.compared == len(ranges) * CHUNK, str(r)
    start_up = max(0.0, r.seconds - r.cpu_seconds / workers)
    est_wall = start_up + r.cpu_seconds * step / workers
    print(f"  {library:9s} {dst:10s} {len(ranges)} chunks: {r.seconds:6.1f} s wall, {r.cpu_seconds:6.1f} s CPU; "
          f"full 2^32 estimate: {r.cpu_seconds * step:6.0f} CPU-s, {est_wall:5.0f} s wall on {workers} workers "
          f"[{r.verdict}; {load()}]", flush=True)
    return r.seconds, r.cpu_seconds, est_wall


def full(library: str, dst: str, workers: int) -> None:
    print(f"full sweep {library} fp32 -> {dst} on {workers} workers [{load()}]", flush=True)
    r = sweep(library, "fp32", dst, workers=workers, progress=None)
    print(r)
    print(f"  => {r.seconds:.1f} s wall, {r.cpu_seconds:.1f} CPU-s in chunks [{load()}]", flush=True)


class MainProcessCast:
    """A library's cast that must run in the process that made it (like a CUDA converter)."""

    in_process = True

    def __init__(self, library: str, dst: str, in_process: bool = True) -> None:
        self.conv, self.library, self.pid, self.in_process = Converter(library, dst), library, os.getpid(), in_process

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if os.getpid() != self.pid:
            raise RuntimeError("called outside the process that made it")
        return self.conv(x)

    def __reduce__(self):
        raise TypeError("a main-process converter cannot be pickled")


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the sweep's workers, once shut down)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def pipeline(library: str, dst: str, workers: int, step: int) -> None:
    ranges = [range(k * CHUNK, (k + 1) * CHUNK) for k in range(0, 256, step)]
    for layout in ("pipelined", "threads"):
        fn = MainProcessCast(library, dst, in_process=layout == "pipelined")
        ex = ThreadPoolExecutor(workers) if layout == "threads" else None
        w0, c0 = time.perf_counter(), _cpu()
        r = sweep(fn, "fp32", dst, inputs=ranges, workers=None if ex else workers, executor=ex, progress=False)
        wall, cpu = time.perf_counter() - w0, _cpu() - c0
        assert r.compared == len(ranges) * CHUNK, str(r)
        print(f"  {layout:9s} {library:9s} {dst:10s} {len(ranges)} chunks: {wall:6.1f} s wall, {cpu:6.1f} CPU-s "
              f"(this process + workers) = {cpu / wall:4.2f} cores used of {workers}; report: "
              f"{r.cpu_seconds:6.1f} s CPU in chunks [{r.verdict}; {r.executor}; {load()}]", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--step", type=int, default=16, help="sweep every STEP-th chunk of 2^24 codes (default 16)")
    ap.add_argument("--numpy", action="store_true", help="also numpy's float16 cast (slow path: minutes)")
    ap.add_argument("--full", nargs="*", metavar="LIB:DST", help="full 2^32 sweeps (default ml_dtypes:bf16)")
    ap.add_argument("--pipeline", nargs="*", metavar="LIB:DST",
                    help="a main-process converter: pipelined vs thread layout (default ml_dtypes:bf16)")
    ap.add_argument("--targets", nargs="*", metavar="LIB:DST", help="the targets of the default run")
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args()
    if args.pipeline is not None:
        print(f"main-process converter, every {args.step}th chunk of 2^24, {args.workers} workers [{load()}]")
        for t in args.pipeline or ["ml_dtypes:bf16"]:
            pipeline(*t.split(":"), args.workers, args.step)
        return
    if args.full is not None:
        for t in args.full or ["ml_dtypes:bf16"]:
            full(*t.split(":"), args.workers)
        return
    targets = [tuple(t.split(":")) for t in args.targets] if args.targets else TARGETS
    targets += [("numpy", "fp16")] if args.numpy else []
    if not args.no_profile:
        print(f"one chunk of 2^24 codes, one process [{load()}]")
        for library, dst in targets:
            print(profile_chunk(library, dst, 0x3F800000), flush=True)
        print(profile_chunk("torch", "fp8_e4m3fn", 0xE0000000), flush=True)
        print(profile_chunk("ml_dtypes", "fp8_e4m3fn", 0xE0000000), flush=True)
    print(f"stratified sweeps: every {args.step}th chunk of 2^24, process pool of {args.workers} [{load()}]")
    worst = 0.0
    for library, dst in targets:
        worst = max(worst, stratified(library, dst, args.workers, args.step)[2])
    print(f"slowest estimated full sweep: {worst:.0f} s wall on {args.workers} workers (target: under 120 s)")


if __name__ == "__main__":
    main()
