"""Converters a sweep checks: a library's own cast (numpy, ml_dtypes, torch, jax) as a picklable callable."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.errors import NumoracleError
from ..core.formats.format import format_of
from ..core.formats.interop import as_native
from .deviations import LIBRARIES
from .native import native_cast
from .versions import installed_version


# ---- converters -----------------------------------------------------------------------------
class Converter:
    """``library``'s own cast to ``dst`` as a picklable callable (``native.native_cast`` semantics).

    ``Converter("torch", "fp8_e4m3fn")(np.float32([500]))`` returns an ml_dtypes float8_e4m3fn array.
    """

    def __init__(self, library: str, dst: Any) -> None:
        if library not in LIBRARIES:
            raise ValueError(f"unknown library {library!r}; fn may be one of {', '.join(LIBRARIES)} or a callable")
        if importlib.util.find_spec(library) is None:
            raise NumoracleError(f"{library} is not installed, so its cast cannot be swept; pip install {library}")
        self.library = library
        self.dst = format_of(dst)

    def __call__(self, x: Any) -> np.ndarray:
        return as_native(native_cast(x, self.dst, self.library), self.dst)

    def __repr__(self) -> str:
        return f"Converter({self.library!r}, {self.dst.name!r})"


def _library_version(library: str) -> str:
    """``"ml_dtypes 0.7.0"`` for a sweep's header; the bare name where the version is unknown."""
    v = installed_version(library)
    return library if v is None else f"{library} {v}"


def _fn_name(fn: Callable) -> str:
    mod = getattr(fn, "__module__", None) or type(fn).__module__
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{mod}.{name}" if mod and mod != "builtins" else name
