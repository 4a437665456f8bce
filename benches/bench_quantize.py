"""Quantize / dequantize throughput: numoracle.quant.quantizer vs a plain numpy implementation of the same rule.

Run: python benches/bench_quantize.py [--log2n 24] [--repeat 3]
Inputs: 2^log2n FP32 elements, N(0, 1) times a per-row magnitude, as a (rows, 4096) weight matrix.
Rules:
  int8 per-channel: s = fl32(amax_row / 127), q = clip(rint(x / s), -127, 127) (FP32 division);
                    dequantize q * s (numoracle returns exact float64; numpy here float64 too).
  mxfp8 e4m3 / 32:  X = 2^(floor(log2 amax_block) - 8) (E8M0), q = e4m3(clip(x / X, +-448)) (ml_dtypes cast);
                    dequantize q * X.
Prints the best time of each, elements/s and the ratio numoracle_time / numpy_time (lower is better),
after checking both produce the same codes.
"""

from __future__ import annotations

import argparse

import ml_dtypes
import numpy as np
from timing import best_time

from numoracle.quant.quantizer import dequantize, quantize


def np_int8(x: np.ndarray):
    s = np.abs(x).max(axis=1, keepdims=True) / np.float32(127)
    return np.clip(np.rint(x / s), -127, 127).astype(np.int8), s


def np_int8_deq(q: np.ndarray, s: np.ndarray) -> np.ndarray:
    return q.astype(np.float64) * s


def np_mx(x: np.ndarray):
    xb = x.reshape(x.shape[0], -1, 32)
    _, e = np.frexp(np.abs(xb).max(axis=-1, keepdims=True))
    X = np.ldexp(np.float32(1), np.clip(e - 9, -127, 127))
    return np.clip(xb / X, -448, 448).astype(ml_dtypes.float8_e4m3fn).reshape(x.shape), X


def np_mx_deq(q: np.ndarray, X: np.ndarray) -> np.ndarray:
    return (q.reshape(X.shape[0], -1, 32).astype(np.float64) * X).reshape(q.shape)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = 1 << args.log2n
    cols = 4096
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((n // cols, cols)) * np.logspace(-3, 3, n // cols)[:, None]).astype(np.float32)
    cases = {
        "int8 per-channel": (lambda: quantize(x, "int8", granularity="channel", axis=0), np_int8, np_int8_deq),
        "mxfp8 e4m3 /32": (lambda: quantize(x, "fp8_e4m3fn", scale_rule="mx"), np_mx, np_mx_deq),
    }
    print(f"n = 2^{args.log2n} FP32 elements, best of {args.repeat}")
    print(f"{'rule':<17} {'step':<10} {'numpy s':>8} {'numpy M/s':>10} {'numoracle s':>12} {'numoracle M/s':>14} "
          f"{'ratio':>6}")
    for name, (ours, ref, ref_deq) in cases.items():
        q = ours()
        rq, rs = ref(x)
        assert np.array_equal(q.codes, rq.view(np.uint8)), f"{name}: codes differ from the numpy rule"
        assert np.array_equal(dequantize(q), ref_deq(rq, rs)), f"{name}: dequantized values differ"
        rows = [("quantize", best_time(lambda ref=ref: ref(x), args.repeat), best_time(ours, args.repeat)),
                ("dequantize", best_time(lambda f=ref_deq, a=rq, b=rs: f(a, b), args.repeat),
                 best_time(lambda q=q: dequantize(q), args.repeat))]
        for step, t_np, t_no in rows:
            print(f"{name:<17} {step:<10} {t_np:>8.3f} {n / t_np / 1e6:>10.0f} {t_no:>12.3f} {n / t_no / 1e6:>14.0f} "
                  f"{t_no / t_np:>6.2f}")


if __name__ == "__main__":
    main()
