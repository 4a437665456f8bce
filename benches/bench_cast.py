"""Conversion throughput: numoracle.cast vs the native casts on the same 2^24 FP32 inputs.

Run: python benches/bench_cast.py [--log2n 24] [--repeat 3]
Prints elements/s and the ratio numoracle_time / native_time (lower is better; 1.0 = as fast).
Two input sets: "normal" (float32 normal magnitudes with ~0.1% specials: +-0, +-inf, NaN,
subnormals, overflow) and "bits" (uniformly random 32-bit patterns).
"""

from __future__ import annotations

import argparse
import warnings

import ml_dtypes
import numpy as np
from timing import best_time

import numoracle as no


def inputs(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    normal = (rng.standard_normal(n) * 8).astype(np.float32)
    k = max(n // 1000, 8)
    idx = rng.choice(n, k, replace=False)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e-42, 1e30, 7e4, 500.0], np.float32)
    normal[idx] = specials[rng.integers(0, specials.size, k)]
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return {"normal": normal, "bits": bits}


def natives():
    out = {
        ("fp16", "numpy"): lambda x: x.astype(np.float16),
        ("bf16", "ml_dtypes"): lambda x: x.astype(ml_dtypes.bfloat16),
        ("fp8_e4m3fn", "ml_dtypes"): lambda x: x.astype(ml_dtypes.float8_e4m3fn),
    }
    try:
        import torch

        torch.set_num_threads(1)
        out[("fp16", "torch")] = lambda x: torch.from_numpy(x).to(torch.float16)
    except ImportError:  # pragma: no cover
        pass
    return out


MODES = ("rne", "rna", "rtz", "ru", "rd", "rto", "sr")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = 1 << args.log2n
    warnings.simplefilter("ignore")
    data = inputs(n)
    rbits = np.random.default_rng(1).integers(0, 1 << 16, n, dtype=np.uint32)
    print(f"{'dst':<11} {'inputs':<7} {'native':<10} {'native M/s':>10} {'mode':<4} {'numoracle M/s':>13} {'ratio':>6}")
    for (dst, lib), native in natives().items():
        for kind, x in data.items():
            t_nat = best_time(lambda native=native, x=x: native(x), args.repeat)
            for mode in MODES:
                kw = {"rounding": mode}
                if mode == "sr":
                    kw.update(sr_bits=16, random_bits=rbits)
                t_no = best_time(lambda x=x, dst=dst, kw=kw: no.cast(x, dst, **kw), args.repeat)
                print(f"{dst:<11} {kind:<7} {lib:<10} {n / t_nat / 1e6:>10.0f} {mode:<4} {n / t_no / 1e6:>13.0f} "
                      f"{t_no / t_nat:>6.2f}")


if __name__ == "__main__":
    main()
