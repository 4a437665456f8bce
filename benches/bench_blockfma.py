"""Tensor-core block FMA in simulate(): the compiled kernel (models/kernels/block.py) vs the numpy path vs BLAS.

Run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 python benches/bench_blockfma.py
     [--m 256 --n 256 --k 4096] [--repeat 3] [--all]
The TF32 preset runs twice: on TF32 values (FP32 rounded to TF32, what the hardware multiplies: 22-bit products,
float32 terms) and on FP32 values as they are (48-bit products: float64 terms, 8 to a vector where float32 has 16).
Per model: the median of ``--repeat`` interleaved runs of float64 BLAS matmul (one thread when run as
above), simulate with the kernel and simulate on the numpy path (``jit.disabled()``), their ratios to
BLAS, and whether both paths gave the same bits; then BLAS's median run back to back ("alone": its inputs
stay warm, where interleaved runs find them evicted and read 10-20% slower) and the kernel's ratio to it. The
first call (compilation, cached on disk afterwards) is not timed. Target (issue 26): the kernel within 8x of
one-thread BLAS (earlier: 40x).
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
from timing import median_times, shape_parser

import numoracle as no
from numoracle import orders
from numoracle.core import jit
from numoracle.models.engine.simulation import simulate


def numpy_path(*args, **kw):
    with jit.disabled():
        return simulate(*args, **kw)


def as_inputs(x: np.ndarray, dt) -> np.ndarray:
    """x in dt; "tf32": FP32 values rounded to TF32 (nearest even, as cuBLAS rounds its FP32 operands), held in
    float32 (what the tensor cores multiply; simulate reads their 11 significant bits and takes float32 terms)."""
    if dt == "tf32":
        return no.formats.as_native(no.cast(x.astype(np.float32), "tf32"), "tf32")
    return x.astype(dt)


def main() -> None:
    ap = shape_parser(3)
    ap.add_argument("--all", action="store_true", help="also the A100, V100 and TF32 presets")
    args = ap.parse_args()
    if not jit.enabled(jit.MIN_WORK):
        raise SystemExit("numba is not installed (or NUMORACLE_JIT=0): nothing to compare")
    rng = np.random.default_rng(0)
    a64, b64 = rng.standard_normal((args.m, args.k)), rng.standard_normal((args.k, args.n))
    fp8, bf16 = ml_dtypes.float8_e4m3fn, ml_dtypes.bfloat16
    models = [("H100 FP8 (BlockFMA 32, F=13)", fp8, ("h100", "fp8")),
              ("H100 fp16 (BlockFMA 16, F=25)", np.float16, ("h100", "fp16")),
              ("DeepSeek-V3 FP8 (promoted every 128)", fp8, ("deepseek", "fp8"))]
    if args.all:
        models += [("H100 bf16 (BlockFMA 16, F=25)", bf16, ("h100", "bf16")),
                   ("A100 bf16 (BlockFMA 8, F=24)", bf16, ("a100", "bf16")),
                   ("V100 fp16 (BlockFMA 4, F=23)", np.float16, ("v100", "fp16")),
                   ("H100 tf32, TF32 inputs (BlockFMA 8)", "tf32", ("h100", "tf32")),
                   ("H100 tf32, FP32 inputs (BlockFMA 8)", np.float32, ("h100", "tf32"))]
    print(f"{args.m}x{args.n}x{args.k}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'model':38s} {'BLAS':>8s} {'kernel':>8s} {'numpy':>8s} {'kern/BLAS':>9s} {'np/BLAS':>8s} "
          f"{'speedup':>7s} same {'alone':>8s} {'kern/alone':>6s}")
    for name, dt, p in models:
        a, b, order = as_inputs(a64, dt), as_inputs(b64, dt), orders.preset(*p)
        got, want = simulate("matmul", a, b, order=order), numpy_path("matmul", a, b, order=order)
        same = np.array_equal(got.view(np.uint64), want.view(np.uint64))
        t_blas, t_jit, t_np = median_times([lambda: a64 @ b64,
                                            lambda: simulate("matmul", a, b, order=order),   # noqa: B023
                                            lambda: numpy_path("matmul", a, b, order=order)], args.repeat)  # noqa: B023
        t_alone, = median_times([lambda: a64 @ b64], args.repeat)     # BLAS back to back: its inputs stay warm
        print(f"{name:38s} {t_blas * 1e3:6.1f}ms {t_jit:7.3f}s {t_np:7.3f}s {t_jit / t_blas:8.1f}x "
              f"{t_np / t_blas:7.0f}x {t_np / t_jit:6.1f}x {same} {t_alone * 1e3:6.1f}ms {t_jit / t_alone:6.1f}x")


if __name__ == "__main__":
    main()
