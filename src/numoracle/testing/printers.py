"""How hypothesis prints numpy and ml_dtypes scalars in a failing example, so that the text pastes back into
``@example(...)`` as the same value of the same type (NaN from its bits, to keep sign and payload)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["register_printers"]


def _ml_dtypes_repr(obj: Any, p: Any, cycle: bool) -> None:
    """How hypothesis prints an ml_dtypes scalar: ``ml_dtypes.bfloat16(1.5)``, or from its bits for NaN."""
    name = type(obj).__name__
    f = float(obj)
    if f != f:  # NaN: its bits, so that the payload and sign survive the paste
        bits = np.array([obj]).view(f"u{np.dtype(type(obj)).itemsize}")[0]
        p.text(f"np.uint{8 * bits.itemsize}({int(bits):#x}).view(ml_dtypes.{name})")
    else:
        p.text(f"ml_dtypes.{name}({f!r})".replace("(inf)", "(float('inf'))").replace("(-inf)", "(float('-inf'))"))


def _numpy_repr(obj: Any, p: Any, cycle: bool) -> None:
    """How hypothesis prints a numpy scalar: ``np.float16(1.5)``, ``np.int8(-3)`` (numpy 2's own repr; numpy 1.x
    prints a bare ``1.5``, which pastes back as a Python float), NaN from its bits."""
    name = type(obj).__name__
    if isinstance(obj, np.floating):
        f = float(obj)
        if f != f:
            bits = np.array([obj]).view(f"u{obj.itemsize}")[0]
            p.text(f"np.uint{8 * obj.itemsize}({int(bits):#x}).view(np.{name})")
        else:
            p.text(f"np.{name}({f!r})".replace("(inf)", "(float('inf'))").replace("(-inf)", "(float('-inf'))"))
    else:
        p.text(f"np.{name}({int(obj)!r})")


def register_printers() -> None:
    """Register both printers with hypothesis (idempotent)."""
    import ml_dtypes
    from hypothesis.vendor.pretty import for_type_by_name

    for name in dir(ml_dtypes):
        t = getattr(ml_dtypes, name)
        if isinstance(t, type) and name.startswith(("float", "bfloat")):
            for_type_by_name(t.__module__, t.__name__, _ml_dtypes_repr)
    for t in (np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
              np.int64, np.uint64):
        for_type_by_name(t.__module__, t.__name__, _numpy_repr)


