"""softmax / log_softmax / logsumexp / cross-entropy references: correctly rounded against mpmath at 320 bits."""

from __future__ import annotations

import zlib

import mpmath
import numpy as np
import pytest
from cases import DTYPES, rows
from mpref import PREC, lse_value, mp, round_fraction, softmax_row, to_fraction

from numoracle.composite.softmax import (
    cross_entropy_reference,
    log_softmax_reference,
    logsumexp_reference,
    softmax_reference,
)


def _expected(op: str, x: np.ndarray, keep: np.ndarray, fmt: str) -> np.ndarray:
    """The mpmath value of every element of one row, rounded by mpref (NaN / 0 / -inf by the conventions)."""
    live = keep & ~np.isneginf(x)
    if (live & np.isnan(x)).any() or (op != "logsumexp" and (live & np.isposinf(x)).any()):
        return np.array(np.nan) if op == "logsumexp" else np.full(x.size, np.nan)
    if op == "logsumexp" and (live & np.isposinf(x)).any():
        return np.array(np.inf)
    if op == "logsumexp":
        return np.array(-np.inf if not live.any() else round_fraction(lse_value(x, live), fmt))
    if not live.any():
        return np.full(x.size, np.nan)
    m, T, L = softmax_row(x, live)
    out = np.full(x.size, 0.0 if op == "softmax" else -np.inf)
    with mpmath.workprec(PREC):
        for j in np.flatnonzero(live):
            d = mp(x[j]) - m  # exact: a difference of two floats of the format
            y = to_fraction(mpmath.exp(d) / (1 + T)) if op == "softmax" else to_fraction(d) - to_fraction(L)
            out[j] = round_fraction(y, fmt)
    return out


def _run(op: str, fmt: str, total: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    checked = 0
    fn = {"softmax": softmax_reference, "log_softmax": log_softmax_reference, "logsumexp": logsumexp_reference}[op]
    for x, keep in rows(fmt, total, rng):
        got = fn(x.astype(DTYPES[fmt]), mask=keep)
        want = _expected(op, x, keep, fmt)
        assert np.array_equal(got, want, equal_nan=True), (op, fmt, x, keep, got, want)
        checked += np.size(want)
    return checked


@pytest.mark.parametrize("fmt", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp"])
def test_correctly_rounded_on_hard_rows(op, fmt):
    assert _run(op, fmt, 1500 if op != "logsumexp" else 20000, seed=zlib.crc32(f"{op}{fmt}".encode())) > 0


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp"])
def test_correctly_rounded_1e5(op, fmt):
    """The acceptance run: >= 10^5 checked elements per operation and format (logsumexp: 10^5 rows)."""
    total = 100_000 if op != "logsumexp" else 5_000_000
    n = _run(op, fmt, total, seed=7 + len(op))
    print(f"{op} {fmt}: {n} elements correctly rounded")
    assert n >= 100_000


def test_cross_entropy_is_the_negated_log_softmax_at_the_target():
    rng = np.random.default_rng(9)
    for fmt in ("fp32", "bf16"):
        x = np.asarray(rng.standard_normal((50, 33)) * 10).astype(DTYPES[fmt])
        t = rng.integers(0, 33, 50)
        t[3] = -100
        ce = cross_entropy_reference(x, t)
        ls = log_softmax_reference(x)
        rows = np.arange(50)
        assert np.array_equal(ce[t >= 0], -ls[rows, np.maximum(t, 0)][t >= 0]) and ce[3] == 0
    with pytest.raises(ValueError, match="target indices"):
        cross_entropy_reference(np.zeros((2, 3), np.float32), np.array([0, 3]))
