"""Order-controlled accumulation models: simulate() on an m x n x K matmul vs float64 numpy matmul.

Run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 python benches/bench_simulate.py
     [--m 256 --n 256 --k 4096] [--repeat 5] [--quick]
Prints, per model, the first call (which also compiles the order for this K, and the numba kernel where it
is not cached yet), the median of ``--repeat`` further calls with the compiled kernels (numba, where
installed) and with ``jit.disabled()`` (the numpy path), and their ratios to the float64 BLAS matmul's
median in the same interleaved repetitions (the kernel's runs and the numpy path's each interleaved with
BLAS on their own; one thread when OPENBLAS_NUM_THREADS=1, as above; the header also gives one-thread BLAS
measured in a child process). Interleaved, BLAS finds its inputs evicted by the candidate and reads 10-20%
slower than back to back; "alone" is BLAS's median run back to back (warm) and "kern/alone" the kernel's ratio
to it, the stricter figure.
Targets (one thread, issue 39): every order class and preset within 8x of the float64 matmul: sequential chains,
trees (pairwise, a TreeOrder from reveal_order, GpuReduce, the CPU orders: models/kernels/tree.py runs them whole), the
FP16 / BF16 accumulators and the tensor-core block-FMA presets (earlier passes: 20x and 40x, issue 26).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
from timing import best_time, median_times, shape_parser

from numoracle import orders, reveal_order, simulate
from numoracle.core import jit
from numoracle.orders import GotoBlocks, GpuReduce, Interleaved, VectorCascade


def blas_one_thread(m: int, n: int, k: int) -> float:
    code = ("import numpy as np, time\n"
            f"rng = np.random.default_rng(0); a = rng.standard_normal(({m}, {k}))\n"
            f"b = rng.standard_normal(({k}, {n}))\n"
            "a @ b\nbest = 1e9\n"
            "for _ in range(7):\n    t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)\n"
            "print(best)\n")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> None:
    ap = shape_parser(5)
    ap.add_argument("--quick", action="store_true", help="only the three headline models")
    args = ap.parse_args()
    m, n, k = args.m, args.n, args.k
    rng = np.random.default_rng(0)
    a64, b64 = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    a64 @ b64
    blas = best_time(lambda: a64 @ b64, 7)
    blas1 = blas_one_thread(m, n, k)
    print(f"{m}x{n}x{k}: float64 numpy matmul {blas * 1e3:.1f} ms (default threads), "
          f"{blas1 * 1e3:.1f} ms (1 thread)")
    x = {dt: (a64.astype(dt), b64.astype(dt)) for dt in
         (np.float16, np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn)}
    models = [
        ("sequential, FP32 acc, fp16 inputs", np.float16, dict(acc="fp32")),
        ("sequential, FP16 acc, fp16 inputs", np.float16, dict(acc="fp16")),
        ("H100 FP8 tensor core (BlockFMA 32, F=13)", ml_dtypes.float8_e4m3fn, dict(order=orders.preset("h100", "fp8"))),
    ]
    if not args.quick:
        t0 = time.perf_counter()
        revealed = reveal_order(np.sum, "sum", n=k).order        # numpy's float32 sum: 8 lanes, then a tree
        print(f"revealed numpy's float32 sum over n = {k} in {time.perf_counter() - t0:.1f} s: a TreeOrder of depth "
              f"{revealed.depth}")
        models += [
            ("sequential, BF16 acc, bf16 inputs", ml_dtypes.bfloat16, dict(acc="bf16")),
            ("sequential, FP32 acc, fp32 inputs (FMA)", np.float32, dict(acc="fp32")),
            ("pairwise, FP32 acc, fp16 inputs", np.float16, dict(acc="fp32", order=orders.Pairwise())),
            ("pairwise, BF16 acc, bf16 inputs", ml_dtypes.bfloat16, dict(acc="bf16", order=orders.Pairwise())),
            ("pairwise, FP32 acc, fp32 inputs", np.float32, dict(acc="fp32", order=orders.Pairwise())),
            ("TreeOrder revealed (np.sum), fp16 inputs", np.float16, dict(order=revealed)),
            ("GpuReduce (torch CUDA sum), FP32, fp16 in", np.float16, dict(acc="fp32", order=GpuReduce())),
            ("VectorCascade (torch CPU sum), FP32, fp16", np.float16, dict(acc="fp32", order=VectorCascade())),
            ("Interleaved(8, pairwise), FP32, fp16 in", np.float16,
             dict(acc="fp32", order=Interleaved(8, combine="pairwise"))),
            ("GotoBlocks(384) (OpenBLAS K loop), FP32, fp16", np.float16, dict(acc="fp32", order=GotoBlocks(384))),
            ("H100 fp16 tensor core (BlockFMA 16, F=25)", np.float16, dict(order=orders.preset("h100", "fp16"))),
            ("H100 bf16 tensor core", ml_dtypes.bfloat16, dict(order=orders.preset("h100", "bf16"))),
            ("DeepSeek-V3 FP8 (promoted every 128)", ml_dtypes.float8_e4m3fn,
             dict(order=orders.preset("deepseek", "fp8"))),
        ]
    print(f"kernels: {'numba' if jit.enabled(jit.MIN_WORK) else 'off (numba not installed, or NUMORACLE_JIT=0)'}")
    print(f"{'model':44s} {'first':>7s} {'kernel':>8s} {'numpy':>8s} {'BLAS':>8s} {'kernel/BLAS':>11s} "
          f"{'numpy/BLAS':>10s} {'alone':>8s} {'kern/alone':>10s}")
    for name, dt, kw in models:
        a, b = x[dt]
        t0 = time.perf_counter()
        simulate("matmul", a, b, **kw)
        first = time.perf_counter() - t0

        def numpy_path():
            with jit.disabled():
                simulate("matmul", a, b, **kw)   # noqa: B023

        # the kernel against BLAS, then the numpy path against BLAS: the numpy path's large temporaries, freed
        # between calls, would otherwise leave the kernel's allocations to fresh pages in every other run
        t_blas, t_jit = median_times([lambda: a64 @ b64, lambda: simulate("matmul", a, b, **kw)],  # noqa: B023
                                     args.repeat)
        t_blas_np, t_np = median_times([lambda: a64 @ b64, numpy_path], max(3, args.repeat // 2))
        t_alone, = median_times([lambda: a64 @ b64], args.repeat)     # BLAS back to back: its inputs stay warm
        print(f"{name:44s} {first:6.2f}s {t_jit:7.3f}s {t_np:7.3f}s {t_blas * 1e3:6.1f}ms {t_jit / t_blas:10.1f}x "
              f"{t_np / t_blas_np:9.1f}x {t_alone * 1e3:6.1f}ms {t_jit / t_alone:10.1f}x")


if __name__ == "__main__":
    main()
