"""exact_matmul's int8 GEMM (exact/intgemm.py) is off in these tests unless a test turns it on: it runs wherever
the process has loaded torch, which depends on what a worker ran before, and tests that check which engine or
pass a product takes must not. Results are the same bits either way (tests/exact/test_intgemm.py)."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.exact import intgemm


@pytest.fixture(autouse=True)
def _int8_gemm_off(monkeypatch):
    monkeypatch.setitem(intgemm._state, "f", None)


def exact_int_gemm(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The int8 GEMM's contract in numpy (int64 products and sums: exact), for tests without torch."""
    assert x.dtype == np.int8 and y.dtype == np.int8 and x.shape[1] <= intgemm.MAX_K
    return (x.astype(np.int64) @ y.astype(np.int64)).astype(np.int32)


@pytest.fixture
def int8_gemm(monkeypatch):
    """The int8 GEMM on, as numpy's exact integer product."""
    monkeypatch.setitem(intgemm._state, "f", exact_int_gemm)
