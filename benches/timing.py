"""Shared timing helper for the benchmarks (run them as ``python benches/<name>.py``)."""

from __future__ import annotations

import argparse
import statistics
import time


def best_time(fn, repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``fn()``, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def best_times(fns, repeat: int) -> list[float]:
    """Best wall time of each function, the runs interleaved (so load on the machine hits all alike)."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def median_times(fns, repeat: int) -> list[float]:
    """Median wall time of each function over ``repeat`` interleaved runs (load on the machine hits all alike;
    the median is what a user sees run after run, the best the machine's floor)."""
    runs: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            runs[i].append(time.perf_counter() - t0)
    return [statistics.median(r) for r in runs]


def shape_parser(repeat: int) -> argparse.ArgumentParser:
    """The matmul benches' arguments: A is m x k, B is k x n (256 x 4096 @ 4096 x 256 by default)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=repeat)
    return ap
