"""Seeded hard-case generators for the composite references: rows of logits / activations in a format."""

from __future__ import annotations

import ml_dtypes
import numpy as np

DTYPES = {"fp32": np.float32, "bf16": ml_dtypes.bfloat16, "fp16": np.float16}
KINDS = ("normal", "wide", "huge", "masked", "empty", "equal", "ties", "tiny", "single")


def to_fmt(x: np.ndarray, fmt: str) -> np.ndarray:
    """x rounded into the format, as float64 values (ml_dtypes / numpy casts; the values are what matter)."""
    with np.errstate(all="ignore"):
        return np.asarray(np.asarray(x, np.float64).astype(np.float32).astype(DTYPES[fmt]), np.float64)


def _finfo(fmt: str):
    return ml_dtypes.finfo(DTYPES[fmt])


def row(kind: str, n: int, fmt: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(values in fmt, boolean mask: True = kept) of one row of the given kind."""
    fi = _finfo(fmt)
    mx, tiny = float(fi.max), float(fi.smallest_subnormal)
    keep = np.ones(n, bool)
    if kind == "normal":
        x = rng.standard_normal(n) * rng.choice([0.1, 1, 4, 30])
    elif kind == "wide":
        x = rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)
    elif kind == "huge":  # logits up to the format's max, both signs
        x = rng.choice([-1, 1], n) * mx * rng.uniform(0.5, 1, n) * 2.0 ** -rng.integers(0, 6, n)
        x[rng.integers(n)] = mx if rng.random() < 0.5 else -mx
    elif kind == "masked":  # -inf entries and mask=False entries
        x = rng.standard_normal(n) * 3
        x[rng.random(n) < 0.3] = -np.inf
        keep = rng.random(n) > 0.2
    elif kind == "empty":
        x = np.full(n, -np.inf) if rng.random() < 0.5 else rng.standard_normal(n)
        keep = np.zeros(n, bool) if np.isfinite(x).any() else keep
    elif kind == "equal":
        x = np.full(n, rng.choice([0.0, 1.5, -7.25, mx, -mx, tiny, 1e-3]))
    elif kind == "ties":  # near-ties of the max: the max, its predecessor, a few ulps below
        m = float(to_fmt(rng.standard_normal() * 10, fmt))
        below = [float(np.nextafter(DTYPES[fmt](m), DTYPES[fmt](-np.inf)))]
        x = rng.choice([m, *below, m - abs(m) * 2.0 ** -fi.nmant * 3], n)
    elif kind == "tiny":  # subnormal and tiny normal inputs
        x = rng.choice([-1, 1], n) * tiny * rng.integers(0, 2**fi.nmant, n) * rng.choice([1, 2**10], n)
    else:  # "single": one kept entry
        x = rng.standard_normal(n)
        keep = np.zeros(n, bool)
        keep[rng.integers(n)] = True
    return to_fmt(x, fmt), keep


def rows(fmt: str, total: int, rng: np.random.Generator, kinds=KINDS, n_max: int = 96):
    """Rows of every kind, round robin, until ``total`` elements."""
    out, count, i = [], 0, 0
    while count < total:
        n = int(rng.integers(1, n_max))
        out.append(row(kinds[i % len(kinds)], n, fmt, rng))
        count, i = count + n, i + 1
    return out
