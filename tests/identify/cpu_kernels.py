"""This machine's CPU kernels as functions of the inputs identify_order reads (benches/record_cpu_kernels.py
records them; tests/identify/test_cpu_recordings.py re-runs them on separating inputs).

A kernel name is ``LIB_OP``: LIB numpy, torch or jax; OP ``sum`` (along the last axis), ``sum0`` (the same rows
laid out as columns and summed along axis 0: ``sum(X.T.copy(), axis=0)``), ``cumsum`` (the last element of each
row's cumsum), ``dot`` (vectors) or ``matmul``; ``sumf`` / ``dotf``: the same with a float32 output from
fp16 / bf16 inputs (numpy ``sum(dtype=float32)``, torch ``sum(dtype=torch.float32)``, jax ``sum(dtype=float32)``
and ``dot(preferred_element_type=float32)``; a library without one has no kernel). ``kernel(name)`` is
``fn(*inputs) -> outputs`` (numpy arrays in the library's output dtype), or None when the library is not installed
or has no such kernel.
"""

from __future__ import annotations

import importlib.util
import platform
from collections.abc import Callable
from typing import Any

import numpy as np

LIBS = ("numpy", "torch", "jax")
OPS = ("sum", "sum0", "cumsum", "dot", "matmul", "sumf", "dotf")


def have(lib: str) -> bool:
    return importlib.util.find_spec(lib) is not None


def _numpy(op: str) -> Callable:
    if op == "dotf":
        return None
    return {"sumf": lambda x: np.sum(x, axis=-1, dtype=np.float32), "sum": lambda x: np.sum(x, axis=-1),
            "sum0": lambda x: np.sum(np.ascontiguousarray(x.T), axis=0),
            "cumsum": lambda x: np.cumsum(x, axis=-1)[:, -1], "dot": np.dot, "matmul": lambda a, b: a @ b}[op]


def _torch(op: str) -> Callable:
    import torch

    def t(x):
        if x.dtype.name == "bfloat16":
            return torch.from_numpy(np.ascontiguousarray(x).view(np.uint16)).view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(x))

    def n(y):
        y = y.detach()
        return y.view(torch.uint16).numpy().view(x_bf16()) if y.dtype == torch.bfloat16 else y.numpy()

    if op == "dotf":
        return None
    return {"sumf": lambda x: n(t(x).sum(dim=-1, dtype=torch.float32)), "sum": lambda x: n(t(x).sum(dim=-1)),
            "sum0": lambda x: n(t(x.T.copy()).sum(dim=0)),
            "cumsum": lambda x: n(t(x).cumsum(dim=-1)[:, -1]), "dot": lambda a, b: n(torch.dot(t(a), t(b))),
            "matmul": lambda a, b: n(t(a) @ t(b))}[op]


def x_bf16() -> Any:
    import ml_dtypes
    return ml_dtypes.bfloat16


_JAX: dict = {}


def _jax(op: str) -> Callable:
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_platforms", "cpu")
    if op not in _JAX:
        _JAX[op] = jax.jit({"sum": lambda x: jnp.sum(x, axis=-1), "sum0": lambda x: jnp.sum(x, axis=0),
                            "cumsum": lambda x: jnp.cumsum(x, axis=-1)[:, -1], "dot": jnp.dot,
                            "matmul": jnp.matmul, "sumf": lambda x: jnp.sum(x, axis=-1, dtype=jnp.float32),
                            "dotf": lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32)}[op])
    f = _JAX[op]
    if op == "sum0":
        return lambda x: np.asarray(f(np.ascontiguousarray(x.T)))
    return lambda *a: np.asarray(f(*a))


def kernel(name: str) -> Callable | None:
    lib, op = name.split("_", 1)
    if not have(lib):
        return None
    return {"numpy": _numpy, "torch": _torch, "jax": _jax}[lib](op)  # None: the library has no such kernel


def versions() -> dict:
    """Library versions, thread counts and the CPU (recorded with every file)."""
    import os
    info = {"numpy": np.__version__, "machine": platform.machine(), "python": platform.python_version()}
    # the instruction-set overrides the recording ran under (OpenBLAS's core, MKL's and ATen's ISA)
    info.update({k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY")
                 if k in os.environ})
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        info["cpu"] = platform.processor()
    if have("torch"):
        import torch
        info.update(torch=torch.__version__, torch_threads=torch.get_num_threads(),
                    torch_cpu_capability=torch.backends.cpu.get_cpu_capability())
    if have("jax"):
        import jax
        info["jax"] = jax.__version__
    return info
