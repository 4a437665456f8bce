"""Record torch.mm (float32) on this machine for tests/data/cpu/mkl_sgemm.npz: the shapes that pin MKL's small sgemm
(models/orders/mklgemm.py: which outputs take which order, the K % 8 rest), on scaled random data (exponents spread
over 2^-8 .. 2^8, so neighbouring orders give other bits), seeds 20 + i. Run: python benches/record_mkl_sgemm.py
[--out FILE]; the meta keeps the versions, the CPU and MKL_ENABLE_INSTRUCTIONS."""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHAPES = [(8, 256, 6), (9, 64, 9), (7, 37, 7), (5, 23, 7), (3, 40, 13), (6, 14, 10), (4, 200, 3)]


def draw(shape: tuple, rng: np.random.Generator) -> np.ndarray:
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-8, 9, shape))).astype(np.float32)


def main() -> None:
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "cpu" / "mkl_sgemm.npz"))
    args = ap.parse_args()
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor()
    meta = {"torch": torch.__version__, "numpy": np.__version__, "cpu": cpu,
            "MKL_ENABLE_INSTRUCTIONS": os.environ.get("MKL_ENABLE_INSTRUCTIONS", ""), "seeds": "20 + shape index"}
    out = {}
    for i, (m, k, n) in enumerate(SHAPES):
        rng = np.random.default_rng(20 + i)
        a, b = draw((m, k), rng), draw((k, n), rng)
        tag = f"{m}x{k}x{n}"
        out[f"{tag}__A"], out[f"{tag}__B"] = a, b
        out[f"{tag}__Y"] = torch.mm(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    np.savez_compressed(args.out, meta=np.array(json.dumps(meta)), **out)
    print(args.out, f"{Path(args.out).stat().st_size / 1e3:.0f} kB", meta)


if __name__ == "__main__":
    main()
