"""Record your GPU's kernels (inputs and outputs) as an ``.npz``, to identify their orders and keep as test fixtures.

Run it on the machine with the GPU (needs torch; triton kernels are callables like any other)::

    python -m numoracle.testing.record gpu.npz                      # cuBLAS matmuls and torch's reductions
    python -m numoracle.testing.record gpu.npz --what sum --device cuda

or from Python, with kernels of your choice::

    from numoracle.testing import record
    rec = record.record_matmul({"my_kernel": lambda a, b: my_triton_mm(a, b)}, shapes=[(128, 4096, 128)],
                               fmts=("fp16",))
    record.save(rec, "my_kernel.npz")

then, on any machine: ``numoracle identify matmul gpu.npz:fp16_128x4096x128_randn__my_kernel
gpu.npz:fp16_128x4096x128_randn__A gpu.npz:fp16_128x4096x128_randn__B --format fp16``.

Layout (keys ``<tag>__<what>``):

* matmul: tag ``<fmt>_<M>x<K>x<N>_<kind>``; ``__A`` (M, K) and ``__B`` (K, N) hold input codes (unsigned
  integers of the format's width); ``__<kernel>`` each kernel's output: float32 as float32, narrower
  outputs as codes; ``__rerun_identical``: every kernel gave the same bits on a second call.
* sum: tag ``<dtype>_<rows>x<n>``; ``__X`` input codes; ``__<kernel>`` outputs as above (the default
  kernels: ``sum_rows_fp32`` = ``X.sum(-1, dtype=float32)``, ``sum_cols_fp32`` = the same sums by the
  column kernel, ``sum_native`` = ``X.sum(-1)`` in the input dtype, ``cumsum_last``).
* ``__meta__``: a JSON string with the device name and the torch / CUDA versions.

Data kinds: ``randn`` (standard normal), ``spread`` (normal times 2^-10..2^10: alignment and truncation
show), ``cancel`` (every 16th term of A's rows scaled by 2^12, B's rows with random signs: large terms
that cancel). Everything is seeded. The test suite never needs a GPU: it reads recordings.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["record_matmul", "record_sum", "matmul_kernels", "sum_kernels", "save", "make_inputs", "main"]

_TORCH_DT = {"fp16": "float16", "bf16": "bfloat16", "fp8_e4m3fn": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
             "float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "fp32": "float32"}


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError("numoracle.testing.record needs torch on the machine that records (pip install torch)") from e
    return torch


def make_inputs(kind: str, M: int, K: int, N: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """float64 A (M, K) and B (K, N) of one data kind (module docstring)."""
    if kind == "randn":
        return rng.standard_normal((M, K)), rng.standard_normal((K, N))
    if kind == "spread":
        return (rng.standard_normal((M, K)) * np.exp2(rng.integers(-10, 11, (M, K))),
                rng.standard_normal((K, N)) * np.exp2(rng.integers(-10, 11, (K, N))))
    if kind == "cancel":
        a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
        a[:, ::16] *= 2.0**12
        b[::16, :] *= rng.choice([-1.0, 1.0], b[::16, :].shape)
        return a, b
    raise ValueError(f"unknown data kind {kind!r}; kinds: randn, spread, cancel")


def _to_device(x: np.ndarray, fmt: str, device: str):
    torch = _torch()
    if fmt not in _TORCH_DT:
        raise ValueError(f"format {fmt!r} is not recordable; use one of {', '.join(sorted(_TORCH_DT))}")
    dt = getattr(torch, _TORCH_DT[fmt])
    if fmt.startswith("fp8"):
        x = np.clip(x, -448.0 if fmt == "fp8_e4m3fn" else -57344.0, 448.0 if fmt == "fp8_e4m3fn" else 57344.0)
    return torch.from_numpy(np.ascontiguousarray(x, np.float32)).to(dt).to(device)


def _codes(t) -> np.ndarray:
    """A tensor's bits as a numpy array: float32 stays float32, other dtypes become unsigned codes."""
    torch = _torch()
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.float32:
        return t.numpy()
    ib = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(ib).numpy().view(f"u{t.element_size()}")


def _run(kernels: dict, args: tuple, rec: dict, tag: str, errors: list) -> None:
    same = True
    for name, fn in kernels.items():
        try:
            out = _codes(fn(*args))
            again = _codes(fn(*args))
        except Exception as e:  # a kernel the machine lacks (e.g. FP8 before Hopper): record and go on
            errors.append(f"{tag}__{name}: {e!r}"[:300])
            continue
        rec[f"{tag}__{name}"] = out
        same &= bool(np.array_equal(out.view(f"u{out.dtype.itemsize}"), again.view(f"u{again.dtype.itemsize}")))
    rec[f"{tag}__rerun_identical"] = np.array(same)


def matmul_kernels(fmt: str) -> dict[str, Callable]:
    """torch's matmuls for inputs of ``fmt``: cuBLAS with FP32 and native outputs; _scaled_mm for FP8."""
    torch = _torch()
    if fmt.startswith("fp8"):
        def scaled(fast):
            def mm(a, b):
                one = torch.ones((), dtype=torch.float32, device=a.device)   # unit scales: the plain product
                return torch._scaled_mm(a, b.t().contiguous().t(), scale_a=one, scale_b=one,
                                        out_dtype=torch.float32, use_fast_accum=fast)
            return mm
        return {"scaled_mm_fast0": scaled(False), "scaled_mm_fast1": scaled(True)}
    return {"torch_mm_out_fp32": lambda a, b: torch.mm(a, b, out_dtype=torch.float32),
            "torch_mm_native": lambda a, b: torch.mm(a, b)}


def sum_kernels() -> dict[str, Callable]:
    """torch's reductions over the last axis (and the same sums by the column kernel)."""
    torch = _torch()
    return {"sum_rows_fp32": lambda x: x.sum(dim=-1, dtype=torch.float32),
            "sum_cols_fp32": lambda x: x.t().contiguous().sum(dim=0, dtype=torch.float32),
            "sum_native": lambda x: x.sum(dim=-1),
            "cumsum_last": lambda x: x.cumsum(dim=-1)[:, -1]}


def _meta(rec: dict, device: str, errors: list) -> dict:
    torch = _torch()
    name = torch.cuda.get_device_name(0) if device.startswith("cuda") and torch.cuda.is_available() else device
    rec["__meta__"] = np.array(json.dumps({"device": name, "torch": torch.__version__,
                                           "cuda": getattr(torch.version, "cuda", None), "errors": errors}))
    return rec


def record_matmul(kernels: dict[str, Callable] | None = None, *, shapes: Any = ((128, 4096, 128),),
                  fmts: Any = ("fp16", "bf16"), kinds: Any = ("randn",), seed: int = 0, device: str = "cuda",
                  strict_fp32: bool = True) -> dict[str, np.ndarray]:
    """Inputs and outputs of ``kernels`` (name -> f(A, B) on torch tensors; default :func:`matmul_kernels`)
    for every shape (M, K, N), input format and data kind. ``strict_fp32``: turn TF32 and reduced-precision
    reductions off first (what the models assume for FP32 / FP16 accumulation)."""
    torch = _torch()
    if strict_fp32 and device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
        for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
            if hasattr(torch.backends.cuda.matmul, flag):
                setattr(torch.backends.cuda.matmul, flag, False)
    rng = np.random.default_rng(seed)
    rec: dict[str, np.ndarray] = {}
    errors: list[str] = []
    for fmt in fmts:
        for M, K, N in shapes:
            for kind in kinds:
                a, b = make_inputs(kind, M, K, N, rng)
                ta, tb = _to_device(a, fmt, device), _to_device(b, fmt, device)
                tag = f"{fmt}_{M}x{K}x{N}_{kind}"
                rec[f"{tag}__A"], rec[f"{tag}__B"] = _codes(ta), _codes(tb)
                _run(kernels or matmul_kernels(fmt), (ta, tb), rec, tag, errors)
    return _meta(rec, device, errors)


def record_sum(kernels: dict[str, Callable] | None = None, *, shapes: Any = ((256, 1000), (64, 16384)),
               dtypes: Any = ("float32", "float16", "bfloat16"), seed: int = 0,
               device: str = "cuda") -> dict[str, np.ndarray]:
    """Inputs and outputs of reduction ``kernels`` (name -> f(X); default :func:`sum_kernels`) for every
    shape (rows, n) and dtype; the data are normal values times 2^-6..2^6."""
    rng = np.random.default_rng(seed)
    rec: dict[str, np.ndarray] = {}
    errors: list[str] = []
    for dt in dtypes:
        for rows, n in shapes:
            x = rng.standard_normal((rows, n)) * np.exp2(rng.integers(-6, 7, (rows, n)))
            t = _to_device(x, dt, device)
            tag = f"{dt}_{rows}x{n}"
            rec[f"{tag}__X"] = _codes(t)
            _run(kernels or sum_kernels(), (t,), rec, tag, errors)
    return _meta(rec, device, errors)


def save(rec: dict[str, np.ndarray], path: str) -> str:
    """Write a recording (compressed .npz); returns the path."""
    np.savez_compressed(path, **rec)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m numoracle.testing.record", description=__doc__.split("\n")[0])
    p.add_argument("path", help="the .npz to write")
    p.add_argument("--what", default="matmul,sum", help="matmul, sum or both (default matmul,sum)")
    p.add_argument("--device", default="cuda", help="torch device (default cuda)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    rec: dict[str, np.ndarray] = {}
    what = {w.strip() for w in args.what.split(",")}
    if not what <= {"matmul", "sum"}:
        p.error(f"--what takes matmul, sum or both, got {args.what!r}")
    errors = []
    if "matmul" in what:
        rec |= record_matmul(seed=args.seed, device=args.device, fmts=("fp16", "bf16", "fp8_e4m3fn"),
                             shapes=((128, 4096, 128), (512, 1024, 512)), kinds=("randn", "cancel"))
        errors += json.loads(str(rec["__meta__"]))["errors"]
    if "sum" in what:
        rec |= record_sum(seed=args.seed, device=args.device)
    meta = json.loads(str(rec["__meta__"]))
    meta["errors"] = sorted(set(errors + meta["errors"]))
    rec["__meta__"] = np.array(json.dumps(meta))
    save(rec, args.path)
    print(f"wrote {args.path}: {len(rec)} arrays; {json.loads(str(rec['__meta__']))}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
