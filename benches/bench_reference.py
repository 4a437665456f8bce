"""Exact matmul reference vs float64 BLAS: exact_matmul(A, B) against ``A64 @ B64``.

Run: python benches/bench_reference.py [--m 256 --k 4096 --n 256] [--repeat 5]
(OPENBLAS_NUM_THREADS=1 in front for single-threaded BLAS on both sides.)
A is M x K and B is K x N (default 256 x 4096 @ 4096 x 256), standard normal data cast to
FP32, BF16 and FP64, plus an ill-conditioned FP32 set (magnitudes spread over 2^-40..2^40
and rows that cancel), and a whole ``assert_matmul_close`` on the FP32 set. Prints the median time of
each over ``--repeat`` interleaved runs and the ratio to BLAS (targets, one thread, issue 26: exact_matmul
FP32 within 3.8x (three GEMMs are about 3.1x), 10x ill-conditioned; earlier 5x and 15x; the check within
10x). The BLAS time is float64 ``A @ B`` on the same values. Issue 39's targets: ill-conditioned within 6x, FP32
within 3.5x. ``--split`` runs exact_matmul on the digit split alone (no Ozaki scheme II: the engine before issue 39).
``--only ROW ...`` runs only the rows named (as printed; ``check`` for ``assert_matmul_close``).
Rows "-> FP32" round the same products into FP32 (``out="fp32"``: the plain-GEMM shortcut, exact/plaingemm.py);
the others into FP64. Where torch is installed the bench loads it (one thread, like BLAS), so that exact_matmul
takes Ozaki scheme II's int8 GEMMs (exact/intgemm.py); ``--no-torch`` measures without them (what a process
without torch gets).
"""

from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
from timing import median_times, shape_parser

from numoracle.exact import intgemm, ozaki2
from numoracle.exact.reference import exact_matmul
from numoracle.testing.checks import assert_matmul_close


def inputs(m: int, k: int, n: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    ill_a = a * np.exp2(rng.integers(-40, 41, (m, k)))
    ill_b = b * np.exp2(rng.integers(-40, 41, (k, n)))
    ill_a[:, 1::2] = -ill_a[:, 0::2]  # pairs that cancel exactly, the rest nearly
    ill_a[:, 1::4] *= 1 + 2.0**-20
    return {
        "fp32": (a.astype(np.float32), b.astype(np.float32)),
        "bf16": (a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)),
        "fp64": (a, b),
        "fp32 ill-conditioned": (ill_a.astype(np.float32), ill_b.astype(np.float32)),
    }


def main() -> None:
    ap = shape_parser(5)
    ap.add_argument("--split", action="store_true", help="the digit split alone (no Ozaki scheme II)")
    ap.add_argument("--no-torch", action="store_true", help="without torch's int8 GEMM (exact/intgemm.py)")
    ap.add_argument("--only", nargs="+", metavar="ROW", help="run only these rows (names as printed, e.g. "
                    "'fp32' 'fp32 ill-conditioned' 'check'); default all")
    args = ap.parse_args()
    if args.split:
        ozaki2.choose = lambda *a: None
    if not args.no_torch:
        try:
            import torch
            torch.set_num_threads(1)  # one thread, like the BLAS it is compared with
        except ImportError:
            pass
    gemm = intgemm.matmul()
    int8 = f"torch {sys.modules['torch'].__version__}'s int8 GEMM" if gemm is not None else "no int8 GEMM"
    env = {k: v for k, v in os.environ.items() if "BLAS" in k or "OMP" in k or "MKL" in k}
    print(f"A {args.m}x{args.k} @ B {args.k}x{args.n}; {int8}; BLAS/OMP environment: {env or 'none set'}")
    print(f"{'inputs':22s} {'float64 A@B':>12s} {'exact_matmul':>13s} {'ratio':>7s}")
    data = inputs(args.m, args.k, args.n)
    runs = [(name, a, b, "fp64") for name, (a, b) in data.items()]
    runs += [(name + " -> FP32", *data[name], "fp32") for name in ("fp32", "fp32 ill-conditioned")]
    if args.only:
        runs = [r for r in runs if r[0] in args.only]
    for name, a, b, out in runs:
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        t_blas, t_exact = median_times([lambda: a64 @ b64, lambda: exact_matmul(a, b, out=out)],  # noqa: B023
                                       args.repeat)
        print(f"{name:22s} {t_blas * 1e3:9.1f} ms {t_exact * 1e3:10.1f} ms {t_exact / t_blas:6.2f}x")
    if args.only and "check" not in args.only:
        return
    # the whole check: one exact product (float64 and the output format), the bound, the judgement
    a, b = inputs(args.m, args.k, args.n)["fp32"]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    c = (a @ b).astype(np.float32)
    t_blas, t_check = median_times([lambda: a64 @ b64, lambda: assert_matmul_close(c, a, b)], args.repeat)
    print(f"{'assert_matmul_close':22s} {t_blas * 1e3:9.1f} ms {t_check * 1e3:10.1f} ms {t_check / t_blas:6.1f}x"
          "  (fp32 inputs, fp32 result)")


if __name__ == "__main__":
    main()
