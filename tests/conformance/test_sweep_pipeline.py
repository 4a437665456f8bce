"""The pipelined sweep layout (a converter that must stay in the calling process, checks in workers) and
the CPU figure of a sweep (each chunk's own CPU, never a process-wide clock summed over threads)."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import pytest

from numoracle.conformance.sweepchunk import Job, Part, check_chunk, convert_chunk, run_chunk
from numoracle.conformance.sweeper import Converter, sweep
from numoracle.core.formats.format import BF16, FP32
from numoracle.core.formats.policy import resolve_policy


class MainOnly:
    """ml_dtypes' cast to BF16 that must run in the calling process (like a CUDA context): it holds a
    lock (so it cannot be pickled into a worker) and records the pid of every call."""

    in_process = True
    library = "ml_dtypes"

    def __init__(self, fail_on: int | None = None, slow_on: int | None = None, interrupt_on: int | None = None):
        self.lock = threading.Lock()
        self.pids: list[int] = []
        self.fail_on, self.slow_on, self.interrupt_on = fail_on, slow_on, interrupt_on

    def __call__(self, x: np.ndarray) -> np.ndarray:
        with self.lock:
            self.pids.append(os.getpid())
        codes = x.view(np.uint32)
        if self.interrupt_on is not None and np.any(codes == self.interrupt_on):
            raise KeyboardInterrupt
        if self.fail_on is not None and np.any(codes == self.fail_on):
            raise RuntimeError("device lost")
        if self.slow_on is not None and np.any(codes == self.slow_on):
            time.sleep(1.5)
        with np.errstate(invalid="ignore"):
            return x.astype(ml_dtypes.bfloat16)


def _same(a, b) -> None:
    """Equal reports but for the converter's name (timings and the layout are not compared)."""
    assert dataclasses.replace(b, against=a.against) == a
    assert a.to_dict()["classes"] == b.to_dict()["classes"]


@pytest.mark.parametrize("rounding", ["rne", "rtz"])
def test_pipelined_results_equal_the_plain_layout(rounding):
    # seeded boundary-weighted random inputs; under RTZ ml_dtypes (RNE) differs in many codes and classes
    plain = sweep(Converter("ml_dtypes", "bf16"), "fp32", "bf16", inputs=1 << 18, chunk=1 << 16, seed=7,
                  rounding=rounding, executor=ThreadPoolExecutor(2))
    fn = MainOnly()
    piped = sweep(fn, "fp32", "bf16", inputs=1 << 18, chunk=1 << 16, seed=7, rounding=rounding,
                  executor=ThreadPoolExecutor(2))
    assert piped.executor.startswith("pipelined") and piped.chunks == 4
    assert plain.mismatches > (1000 if rounding == "rtz" else 0)  # RNE: ml_dtypes' known NaN deviations
    _same(plain, piped)
    # the same seeded inputs, given as an array, on the default process pool
    codes = np.random.default_rng(3).integers(0, 1 << 32, 1 << 17, dtype=np.uint64)
    a = sweep(Converter("ml_dtypes", "bf16"), "fp32", "bf16", inputs=codes, chunk=1 << 15, rounding=rounding,
              executor=ThreadPoolExecutor(2))
    b = sweep(MainOnly(), "fp32", "bf16", inputs=codes, chunk=1 << 15, rounding=rounding, workers=2)
    _same(a, b)


def test_in_process_converter_runs_in_the_calling_process():
    fn = MainOnly()
    r = sweep(fn, "fp32", "bf16", inputs=range(0x3F800000, 0x3F800000 + (1 << 18)), chunk=1 << 16, workers=2)
    assert r.ok and r.compared == 1 << 18 and r.workers == 2
    assert r.executor == "pipelined: fn in this process, checks on ProcessPoolExecutor"
    # every chunk converted once and its first 2^16 codes a second time (the determinism check), all here
    assert len(fn.pids) == 8 and set(fn.pids) == {os.getpid()}
    assert not multiprocessing.active_children()


def test_pipelined_faults_timeouts_and_interrupts():
    base = 0x3F800000
    span = range(base, base + (1 << 16))
    r = sweep(MainOnly(fail_on=base + (1 << 14) + 3), "fp32", "bf16", inputs=span, chunk=1 << 14, workers=2)
    assert r.compared == 3 << 14 and [e.kind for e in r.errors] == ["exception"]
    assert "device lost" in r.errors[0].message and r.errors[0].first_range[0] == base + (1 << 14)
    r = sweep(MainOnly(slow_on=base), "fp32", "bf16", inputs=span, chunk=1 << 14, timeout=1.0,
              executor=ThreadPoolExecutor(2))
    assert r.compared == 3 << 14 and [e.kind for e in r.errors] == ["timeout"]
    assert "could not be stopped" in r.errors[0].message
    with pytest.raises(KeyboardInterrupt):
        sweep(MainOnly(interrupt_on=base + (2 << 14)), "fp32", "bf16", inputs=span, chunk=1 << 14, workers=2)
    deadline = time.monotonic() + 5
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not multiprocessing.active_children()


class Spinner:
    """Burns ``cpu`` seconds of its own thread's CPU on the chunk holding code 0, then lets the other
    chunks (which only wait, using no CPU) return: they run while it spins."""

    library = "ml_dtypes"

    def __init__(self, cpu: float, in_process: bool = False):
        self.cpu, self.in_process, self.done = cpu, in_process, threading.Event()

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if x.view(np.uint32)[0] == 0 and not self.done.is_set():
            c = time.thread_time()
            while time.thread_time() - c < self.cpu:
                pass
            self.done.set()
        elif not self.in_process:
            self.done.wait(30)
        return x.astype(ml_dtypes.bfloat16)


def test_cpu_figure_counts_each_chunks_own_cpu_under_threads():
    # four chunks on four threads; one spins 0.4 s, three wait meanwhile. A process-wide clock would
    # give each waiting chunk the spinner's 0.4 s too (1.6 s in all).
    fn = Spinner(0.4)
    r = sweep(fn, "fp32", "bf16", inputs=range(0, 1 << 14), chunk=1 << 12, executor=ThreadPoolExecutor(4))
    assert r.ok and r.chunks == 4
    assert 0.4 <= r.cpu_seconds < 0.75, r.cpu_seconds


def test_cpu_figure_of_the_pipelined_layout():
    # the converting thread's CPU and each check's own: checks in threads run while the converter spins
    fn = Spinner(0.4, in_process=True)
    r = sweep(fn, "fp32", "bf16", inputs=range(0, 1 << 14), chunk=1 << 12, executor=ThreadPoolExecutor(2))
    assert r.ok and r.chunks == 4 and r.executor.startswith("pipelined")
    assert 0.4 <= r.cpu_seconds < 0.75, r.cpu_seconds


def test_check_chunk_adds_the_converters_cpu_and_compares_like_run_chunk():
    job = Job(MainOnly(), FP32, BF16, resolve_policy(BF16, "rtz"), None, 4)
    part = Part(0x3F80C000, 0x3F80C000 + 4096, "range")  # above half an ulp of BF16: RNE and RTZ differ
    conv = convert_chunk(job, part)
    assert conv.out is not None and conv.error is None and conv.cpu >= 0
    conv.cpu = 100.0  # marked: the result's CPU is the converter's plus the check's own
    res = check_chunk(Job(None, FP32, BF16, job.pol, None, 4), conv)
    assert 100.0 <= res.cpu < 101.0
    assert res.compared == 4096 and res.matching == 0 and sum(res.counts.values()) == 4096
    plain = run_chunk(job, part)
    for f in ("compared", "matching", "counts", "known", "labels", "ties", "witnesses", "nondet", "error",
              "first_last"):
        assert getattr(res, f) == getattr(plain, f), f
