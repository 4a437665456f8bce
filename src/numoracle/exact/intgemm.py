"""An exact int8 GEMM for Ozaki scheme II's small primes: torch's ``_int_mm`` where torch is already loaded.

Ozaki scheme II (ozaki2.py) multiplies balanced residues; with primes below 2^8 they fit int8 and their
products sum exactly in int32 (K 125^2 < 2^31 for K <= MAX_K), so one integer GEMM gives the residue
product with no rounding at all. torch's CPU ``_int_mm`` took 0.6 ms for 256 x 4096 x 256 where one-thread
float64 BLAS took 10.5 (torch 2.13.0+cpu, AMD Zen 5), so about 30 such GEMMs cost what 2 float64 ones do.
numoracle never imports torch for this (the import takes 1-3 s): the GEMM is used where the process has loaded
torch, after a self-test on first use against an exact product (a torch without a CPU ``_int_mm``, or one that
differs, turns it off; logged). ozaki2's float64 primes are the path without it, and the reference.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

import numpy as np

MAX_K = 1 << 17  # columns per call: K ((p - 1)/2)^2 <= 2^17 125^2 < 2^31 for primes p <= 251
logger = logging.getLogger("numoracle.exact")
_state: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray] | None] = {}


def matmul() -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """The exact int8 GEMM ``f(x, y) -> int32 x @ y`` (x: (M, k) int8, y: (k, N) int8, k <= MAX_K), or None where
    torch is not loaded or failed the self-test (checked once per process)."""
    if "f" in _state:
        return _state["f"]
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "_int_mm"):
        return None  # not decided for good: torch may be loaded later
    _state["f"] = _checked(torch)
    return _state["f"]


def _checked(torch) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    def f(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return torch._int_mm(torch.from_numpy(x), torch.from_numpy(y)).numpy()

    rng = np.random.default_rng(20261203)  # extremes and odd shapes, a row and a column: the self-test of this torch
    x = rng.integers(-127, 128, (37, 1029)).astype(np.int8)
    y = rng.integers(-127, 128, (1029, 23)).astype(np.int8)
    x[0], y[:, 0] = -127, -127
    pairs = [(x, y), (x[:1], y[:, :1]), (x[:5, :3], y[:3, :7])]
    pairs = [(np.ascontiguousarray(a), np.ascontiguousarray(b)) for a, b in pairs]  # as ozaki2 passes them
    try:
        ok = all(_same(f(a, b), a, b) for a, b in pairs)
    except Exception as e:  # noqa: BLE001 - any failure: the float64 primes instead
        logger.info("exact: torch %s's _int_mm does not run on CPU here (%s): float64 primes only",
                    torch.__version__, e)
        return None
    if not ok:
        logger.warning("exact: torch %s's _int_mm differs from the exact product: not used", torch.__version__)
        return None
    return f


def _same(got: np.ndarray, x: np.ndarray, y: np.ndarray) -> bool:
    return got.dtype == np.int32 and np.array_equal(got.astype(np.int64), x.astype(np.int64) @ y.astype(np.int64))


def reset() -> None:
    """Forget the decision (tests: turn torch's GEMM on or off)."""
    _state.clear()
