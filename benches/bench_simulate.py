"""Order-controlled accumulation models: simulate() on an m x n x K matmul vs float64 numpy matmul.

Run: python benches/bench_simulate.py [--m 256 --n 256 --k 4096] [--repeat 2] [--quick]
Prints, per model, the first call (which also compiles the order for this K) and the best of
``--repeat`` further calls, and the ratio of the warm time to float64 BLAS matmul (numpy's default
thread count, and one thread measured in a child process with OPENBLAS_NUM_THREADS=1).
Targets (one thread): sequential FP16/BF16 accumulation within 20x of the float64 matmul, tensor-core
block FMA within 40x.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
from timing import best_time

from numoracle.reduce import orders
from numoracle.reduce.simulation import simulate


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
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=256)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=2)
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
        models += [
            ("sequential, BF16 acc, bf16 inputs", ml_dtypes.bfloat16, dict(acc="bf16")),
            ("sequential, FP32 acc, fp32 inputs (FMA)", np.float32, dict(acc="fp32")),
            ("pairwise, FP32 acc, fp16 inputs", np.float16, dict(acc="fp32", order=orders.Pairwise())),
            ("H100 fp16 tensor core (BlockFMA 16, F=25)", np.float16, dict(order=orders.preset("h100", "fp16"))),
            ("DeepSeek-V3 FP8 (promoted every 128)", ml_dtypes.float8_e4m3fn,
             dict(order=orders.preset("deepseek", "fp8"))),
        ]
    print(f"{'model':44s} {'first':>8s} {'warm':>8s} {'x BLAS':>8s} {'x BLAS(1t)':>10s}")
    for name, dt, kw in models:
        a, b = x[dt]
        t0 = time.perf_counter()
        simulate("matmul", a, b, **kw)
        first = time.perf_counter() - t0
        warm = best_time(lambda: simulate("matmul", a, b, **kw), args.repeat)   # noqa: B023
        print(f"{name:44s} {first:7.2f}s {warm:7.2f}s {warm / blas:7.0f}x {warm / blas1:9.0f}x")


if __name__ == "__main__":
    main()
