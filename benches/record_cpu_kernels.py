"""Record this machine's CPU kernels (numpy, torch, jax) into small .npz files for identify_order's tests.

Run: python benches/record_cpu_kernels.py [--out tests/data/cpu] [--seed 100]

Another instruction set: run it under OPENBLAS_CORETYPE=Sandybridge / Haswell / SkylakeX (numpy's OpenBLAS),
MKL_ENABLE_INSTRUCTIONS=AVX2 and ATEN_CPU_CAPABILITY=avx2 (torch's MKL and ATen kernels); the meta records them.

Writes ``fp32.npz``, ``fp16.npz`` and ``bf16.npz`` (bf16 arrays stored as their uint16 codes). Keys: ``meta`` (JSON:
library versions, torch's threads and CPU capability, the CPU), per case ``TAG__X`` (sums: the rows, shape (rows,
n)) or ``TAG__A`` / ``TAG__B`` (dot: vectors; matmul: A (m, K), B (K, p)), and ``TAG__KERNEL`` for every kernel of
tests/identify/cpu_kernels.py run on them (``numpy_sum``, ``torch_sum0``, ``jax_cumsum``, ...; a library that is
not installed is left out). TAG is ``OP_SHAPE_KIND`` with OP ``sum`` (sums, sums over axis 0 and cumsums of the
same rows) or ``dot`` / ``matmul``; KIND ``normal``, ``cancel`` (each row's second half is its first half negated
and reversed, times 1.0001) or ``wide`` (magnitudes spread over 2^-20..2^20; 2^-6..2^6 for fp16). The sizes keep
the whole directory under 2 MB; one long fp32 row (n = 40000) is split over threads by torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "identify"))
from cpu_kernels import LIBS, kernel, versions  # noqa: E402

DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}
SUMS = {"fp32": [((16, 100), ("normal", "cancel", "wide")), ((8, 1000), ("normal", "cancel", "wide")),
                 ((2, 5000), ("normal", "wide")), ((1, 40000), ("normal",))],
        "fp16": [((16, 100), ("normal", "wide")), ((8, 1000), ("normal", "cancel"))],
        "bf16": [((16, 100), ("normal", "wide")), ((8, 1000), ("normal", "cancel"))]}
DOTS = [(37, "normal"), (1000, "normal"), (1000, "cancel")]
MATMULS = [((8, 256, 6), "normal"), ((4, 1000, 3), "cancel")]


def draw(shape: tuple, kind: str, fmt: str, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal(shape)
    if kind == "wide":
        e = 6 if fmt == "fp16" else 20
        x = x * np.exp2(rng.integers(-e, e + 1, shape))
    elif kind == "cancel":
        h = shape[-1] // 2
        x[..., shape[-1] - h:] = -x[..., :h][..., ::-1] * 1.0001
    return x.astype(DTYPES[fmt])


def store(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.uint16) if a.dtype == ml_dtypes.bfloat16 else a


def record(fmt: str, rng: np.random.Generator) -> dict:
    out: dict = {}
    ops = ("sum", "sum0", "cumsum") + (("sumf",) if fmt != "fp32" else ())   # half inputs: also a float32 output
    runs = [(f"{lib}_{op}", kernel(f"{lib}_{op}")) for lib in LIBS for op in ops]
    for shape, kinds in SUMS[fmt]:
        for kind in kinds:
            tag = f"sum_{shape[0]}x{shape[1]}_{kind}"
            x = draw(shape, kind, fmt, rng)
            out[f"{tag}__X"] = store(x)
            for name, fn in runs:
                if fn is not None:
                    out[f"{tag}__{name}"] = store(fn(x))
    if fmt != "fp32":
        for n, kind in DOTS[:2]:   # half-precision dots with a float32 output (jax preferred_element_type)
            tag = f"dot_{n}_{kind}"
            a, b = draw((n,), kind, fmt, rng), draw((n,), "normal", fmt, rng)
            out[f"{tag}__A"], out[f"{tag}__B"] = store(a), store(b)
            for lib in LIBS:
                fn = kernel(f"{lib}_dotf")
                if fn is not None:
                    out[f"{tag}__{lib}_dotf"] = np.asarray(fn(a, b), np.float32).reshape(())
        return out
    for n, kind in DOTS:
        tag = f"dot_{n}_{kind}"
        a, b = draw((n,), kind, fmt, rng), draw((n,), "normal", fmt, rng)
        out[f"{tag}__A"], out[f"{tag}__B"] = a, b
        for lib in LIBS:
            fn = kernel(f"{lib}_dot")
            if fn is not None:
                out[f"{tag}__{lib}_dot"] = np.asarray(fn(a, b), np.float32).reshape(())
    for (m, k, p), kind in MATMULS:
        tag = f"matmul_{m}x{k}x{p}_{kind}"
        a, b = draw((m, k), kind, fmt, rng), draw((k, p), "normal", fmt, rng)
        out[f"{tag}__A"], out[f"{tag}__B"] = a, b
        for lib in LIBS:
            fn = kernel(f"{lib}_matmul")
            if fn is not None:
                out[f"{tag}__{lib}_matmul"] = np.asarray(fn(a, b))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "cpu"))
    ap.add_argument("--seed", type=int, default=100, help="seed of the first file (the others: +1, +2)")
    args = ap.parse_args()
    d = Path(args.out)
    d.mkdir(parents=True, exist_ok=True)
    meta = json.dumps(versions())
    for i, fmt in enumerate(DTYPES):
        arrays = record(fmt, np.random.default_rng(args.seed + i))
        np.savez_compressed(d / f"{fmt}.npz", meta=np.array(meta), **arrays)
        print(f"{fmt}: {len(arrays)} arrays, {(d / f'{fmt}.npz').stat().st_size / 1e3:.0f} kB")
    print(meta)


if __name__ == "__main__":
    main()
