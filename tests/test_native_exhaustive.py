"""Exhaustive tier: every one of the 2^32 FP32 codes against the native casts.

Targets (RNE, each library's own overflow semantics, i.e. numoracle's default policy):
numpy ``astype(float16)``; ml_dtypes ``astype`` to ``bfloat16``, ``float8_e4m3fn``, ``float8_e5m2``.
Every mismatch must be explained by a ``KNOWN_DEVIATIONS`` entry (``deviations.classify``);
in practice all of them are NaNs that keep the source's sign and payload.

Run::

    pytest -m exhaustive tests/test_native_exhaustive.py

The codes are split into chunks of 2^24 swept in parallel on a ``ProcessPoolExecutor``
(workers: ``$NUMORACLE_SWEEP_WORKERS``, default ``os.cpu_count()``).

Runtime: measured here (2 cores shared with other work) on a stratified 2^28 sample, every 16th
chunk so that every exponent range counts in proportion: 16 chunks in 33.5 s on one process,
0.5-4.6 s a chunk (~2.1 s on average). About half is numpy's float16 cast, which takes a slow
path (~65 ns/element here) for every value that underflows, overflows or is subnormal in FP16
(84% of all FP32 codes); the rest is numoracle's four casts and ml_dtypes'. Extrapolated to all
256 chunks: ~9 CPU-minutes, i.e. ~9 minutes on one worker, ~5 on two free cores.

The default suite runs the same machinery (same chunk function, same executor) on a 2^24 slice
made of the regions where the rounding decisions are: FP16 underflow and overflow, the FP8
overflow thresholds, the infinities and NaNs.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from concurrent.futures import Executor, ProcessPoolExecutor

import numpy as np
import pytest

import numoracle as no
from numoracle.deviations import classify_ids, native_cast

CHUNK = 1 << 24
TARGETS = (("numpy", "fp16"), ("ml_dtypes", "bf16"), ("ml_dtypes", "fp8_e4m3fn"), ("ml_dtypes", "fp8_e5m2"))


def sweep_chunk(start: int, stop: int, targets=TARGETS) -> dict:
    """Compare FP32 codes [start, stop) for each (library, dst); return counts and a few witnesses."""
    t0 = time.perf_counter()
    codes = np.arange(stop - start, dtype=np.uint32) + np.uint32(start)
    x = codes.view(np.float32)
    counts: Counter = Counter()
    bad: list[tuple] = []
    for library, dst in targets:
        lib = native_cast(x, dst, library)
        ours = no.cast(codes, dst, src=no.FP32)
        counts[(library, dst, "compared")] += codes.size
        mm = np.flatnonzero(lib != ours)
        if not mm.size:
            continue
        ids, labels = classify_ids(library, no.FP32, dst, codes[mm], lib[mm])
        for k, c in zip(*np.unique(ids, return_counts=True), strict=True):
            counts[(library, dst, labels[k])] += int(c)
        un = mm[ids == 1][:4]
        bad += [(library, dst, int(codes[i]), int(lib[i]), int(ours[i])) for i in un]
    return {"counts": counts, "unexplained": bad, "seconds": time.perf_counter() - t0}


def sweep(ranges, *, executor: Executor | None = None, workers: int | None = None) -> dict:
    """Run ``sweep_chunk`` over ``ranges`` (a list of (start, stop)) on an executor; merge the results."""
    own = executor is None
    if own:
        workers = workers or int(os.environ.get("NUMORACLE_SWEEP_WORKERS", 0)) or os.cpu_count() or 1
        # spawn: the parent may hold torch/OpenMP threads, which do not survive a fork
        executor = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = [executor.submit(sweep_chunk, a, b) for a, b in ranges]
        total: Counter = Counter()
        bad: list[tuple] = []
        seconds = 0.0
        for f in futures:
            r = f.result()
            total.update(r["counts"])
            bad += r["unexplained"]
            seconds += r["seconds"]
    finally:
        if own:
            executor.shutdown()
    return {"counts": total, "unexplained": bad, "cpu_seconds": seconds}


def _assert_clean(res: dict, n: int) -> None:
    assert not res["unexplained"], "unexplained mismatches (library, dst, fp32 code, lib code, numoracle code): " + (
        ", ".join(f"({a}, {b}, {c:#010x}, {d:#x}, {e:#x})" for a, b, c, d, e in res["unexplained"][:12]))
    for library, dst in TARGETS:
        assert res["counts"][(library, dst, "compared")] == n
        assert res["counts"][(library, dst, "unexplained")] == 0


# 4 regions of 2^22 codes: FP16 underflow (2^-25 .. 1.5*2^-25), FP16/E5M2 overflow (around 65520),
# +inf and the signalling NaNs, and -448 .. -640 (E4M3FN overflow, negative)
SLICE = [(0x33000000, 0x33400000), (0x477F0000, 0x47BF0000), (0x7F800000, 0x7FC00000), (0xC3E00000, 0xC4200000)]


def test_sweep_machinery_on_a_slice():
    res = sweep(SLICE, workers=2)
    _assert_clean(res, sum(b - a for a, b in SLICE))
    c = res["counts"]
    # the slice does meet the NaN deviations (so classification runs) and nothing else
    assert c[("numpy", "fp16", "nan_payload_or_sign")] > 0 and c[("ml_dtypes", "fp8_e4m3fn", "nan_payload_or_sign")] > 0
    kinds = {k[2] for k in c} - {"compared"}
    assert kinds == {"nan_payload_or_sign"}, kinds


def test_sweep_finds_a_planted_error(monkeypatch):
    """The chunk function reports a library error that no deviation explains."""
    import sys

    real = native_cast

    def broken(x, dst, library):
        out = real(x, dst, library)
        out[5] ^= 1  # one wrong last bit, as a double rounding would give
        return out

    monkeypatch.setattr(sys.modules[__name__], "native_cast", broken)
    r = sweep_chunk(0x3F800000, 0x3F800100, targets=(("ml_dtypes", "bf16"),))
    assert r["unexplained"] == [("ml_dtypes", "bf16", 0x3F800005, 0x3F81, 0x3F80)]
    assert r["counts"][("ml_dtypes", "bf16", "compared")] == 256


@pytest.mark.exhaustive
def test_all_fp32_codes():
    ranges = [(a, a + CHUNK) for a in range(0, 1 << 32, CHUNK)]
    res = sweep(ranges)
    _assert_clean(res, 1 << 32)
