"""A library's own cast (numpy, ml_dtypes, torch, jax) run on numoracle codes, returning codes: the converter every
comparison of another library's casts runs."""

from __future__ import annotations

import numpy as np

from ..core.formats.format import TORCH_NAMES, AnyFormat, format_of
from ..core.formats.interop import as_native, is_torch, native_dtype, to_codes

__all__ = ["LIBRARIES", "native_cast"]

LIBRARIES = ("numpy", "ml_dtypes", "torch", "jax")
_NUMPY_BUILTIN = frozenset(
    ["float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
)
_NARROW = ("fp6_e3m2fn", "fp6_e2m3fn", "fp4_e2m1fn")


# ---------------------------------------------------------------------------------------
def _torch_dtype(fmt: AnyFormat):
    import torch

    for tname, fname in TORCH_NAMES.items():
        if fname == fmt.name:
            return getattr(torch, tname)
    raise ValueError(f"torch has no dtype for {fmt.name}")


def _to_torch(codes: np.ndarray, fmt: AnyFormat):
    import torch

    if fmt.is_integer:
        return torch.from_numpy(np.ascontiguousarray(as_native(codes, fmt)))
    signed = {8: np.uint8, 16: np.int16, 32: np.int32, 64: np.int64}[fmt.bits]
    t = torch.from_numpy(np.ascontiguousarray(codes.view(signed)))
    return t.view(_torch_dtype(fmt))


def _array_codes(a: np.ndarray) -> tuple[np.ndarray, AnyFormat]:
    """Codes and format of a numpy / ml_dtypes array (FP6/FP4 codes masked to their bits)."""
    fmt = format_of(a.dtype)
    codes = np.ascontiguousarray(a).view(fmt.code_dtype)
    if fmt.name in _NARROW:
        codes = codes & np.array((1 << fmt.bits) - 1, codes.dtype)
    return codes, fmt


def native_cast(x, dst, library: str) -> np.ndarray:
    """Run ``library``'s own cast of ``x`` to ``dst``; return the destination codes.

    ``x`` is a numpy / ml_dtypes array (for ``"torch"`` also a tensor, for ``"jax"`` a jax array).
    ``"numpy"`` and ``"ml_dtypes"`` call ``x.astype(dtype)`` (``"numpy"`` only between numpy's own
    dtypes, ``"ml_dtypes"`` only where one side is an ml_dtypes type); ``"torch"`` calls
    ``tensor.to(dtype)`` on the CPU; ``"jax"`` calls ``jax_array.astype(dtype)`` on the CPU device,
    with 64-bit types enabled for the call (so float64 and int64 arrays are not narrowed on the way
    in). Raises TypeError where the library has no such cast.
    """
    dst = format_of(dst)
    if library not in LIBRARIES:
        raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")
    if library == "jax":
        return _jax_cast(x, dst)
    if library == "torch":
        t = x if is_torch(x) else _to_torch(*_array_codes(np.asarray(x)))
        try:
            out = t.to(_torch_dtype(dst))
        except (RuntimeError, NotImplementedError) as e:
            raise TypeError(f"torch cannot cast {t.dtype} to {dst.name}: {e}") from None
        return to_codes(out)[0]
    a = np.asarray(x)
    dt = native_dtype(dst)
    if dt is None:
        raise ValueError(f"{dst.name} has no numpy or ml_dtypes dtype")
    builtin = a.dtype.name in _NUMPY_BUILTIN and dt.name in _NUMPY_BUILTIN
    if library == "numpy" and not builtin:
        raise ValueError(f"{a.dtype} -> {dt} is an ml_dtypes cast; use library='ml_dtypes'")
    if library == "ml_dtypes" and builtin:
        raise ValueError(f"{a.dtype} -> {dt} is numpy's own cast; use library='numpy'")
    with np.errstate(invalid="ignore", over="ignore"):
        out = a.astype(dt)
    return _array_codes(out)[0]


def _jax_x64():
    """A context in which jax keeps 64-bit types (jax narrows float64/int64 to 32 bits by default)."""
    import jax

    enable = getattr(jax, "enable_x64", None)  # jax >= 0.7
    if enable is not None:
        return enable(True)
    from jax.experimental import enable_x64  # older jax

    return enable_x64()


def _jax_cast(x, dst: AnyFormat) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    dt = native_dtype(dst)
    if dt is None or dst.name == "tf32":
        raise ValueError(f"{dst.name} has no jax dtype")
    with _jax_x64():
        cpu = jax.devices("cpu")[0]
        a = x if type(x).__module__.startswith(("jax", "jaxlib")) else np.asarray(x)
        try:
            t = jax.device_put(jnp.asarray(a), cpu)
            if t.dtype != np.asarray(a).dtype:
                raise TypeError(f"jax reads {np.asarray(a).dtype} as {t.dtype}")
            out = np.asarray(t.astype(dt))
        except (RuntimeError, NotImplementedError, ValueError) as e:
            raise TypeError(f"jax cannot cast {np.asarray(a).dtype} to {dst.name}: {e}") from None
    if out.dtype != dt:
        raise TypeError(f"jax cast to {dst.name} gave {out.dtype}")
    return _array_codes(out)[0]


