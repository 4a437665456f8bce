"""Rows drawn to tell composite models apart: seeded rows of several kinds (normal logits, wide magnitudes,
near-ties, large offsets with a small spread), each model run on them, the models grouped by the bits they give,
and the rows that separate the groups picked for the user to rerun a kernel on (``SeparatingRows``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.engine.convert import cast
from ...core.formats.format import Format
from ...core.formats.interop import as_native

__all__ = ["draw_rows", "SeparatingRows", "group_by_bits", "separate", "KINDS", "same_bits"]

KINDS = ("normal", "wide", "near_tie", "offset")


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the two float64 arrays hold the same value (NaN equals NaN; -0 differs from +0)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))


def draw_rows(kind: str, rows: int, K: int, fmt: Format, rng: np.random.Generator) -> np.ndarray:
    """Rows of ``kind`` as values of fmt (a native array of its dtype): normal (3 N(0, 1)), wide (N(0, 1) times
    2^-6..2^6), near_tie (a third of the terms at the max, the rest a few units below or N(0, 1)), offset
    (50 + 0.01 N(0, 1): norms' cancellation)."""
    x = rng.standard_normal((rows, K))
    if kind == "normal":
        x *= 3
    elif kind == "wide":
        x *= np.exp2(rng.integers(-6, 7, (rows, K)))
    elif kind == "near_tie":
        top = rng.random((rows, K)) < 1 / 3
        near = rng.random((rows, K)) < 0.5
        x = np.where(top, 1.0, np.where(near, 1.0 - rng.integers(1, 9, (rows, K)) * 2.0**-20, x))
    elif kind == "offset":
        x = 50 + 0.01 * x
    else:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    with np.errstate(all="ignore"):
        return as_native(cast(x, fmt), fmt)


def group_by_bits(outputs: list[np.ndarray]) -> list[list[int]]:
    """Indices of the outputs grouped by identical bits (each group in the order given)."""
    groups: list[list[int]] = []
    for i, y in enumerate(outputs):
        for g in groups:
            ref = outputs[g[0]]
            if ref.shape == y.shape and same_bits(ref, y).all():
                g.append(i)
                break
        else:
            groups.append([i])
    return groups


@dataclass
class SeparatingRows:
    """Rows on which the reproducing classes of models give different bits: rerun the kernel on ``inputs`` (one
    call on the whole array) and ask ``which(output)``. ``outputs``: each class's model outputs on them;
    ``not_separated``: pairs of class names no drawn row told apart (none when every pair is separated)."""

    inputs: np.ndarray
    outputs: dict[str, np.ndarray]
    not_separated: list[tuple[str, str]]

    def which(self, output: Any) -> list[str]:
        """The classes whose outputs on ``inputs`` equal the kernel's ``output`` bit for bit."""
        from ...core.inputs import exact_float64
        v, _ = exact_float64(output, "output")
        return [n for n, y in self.outputs.items() if y.shape == v.shape and same_bits(y, v).all()]

    def rerun(self, kernel: Any) -> list[str]:
        """``which(kernel(inputs))``: the kernel called once on the separating rows (as their native array)."""
        return self.which(kernel(self.inputs))

    def instructions(self) -> str:
        return (f"call the kernel on rep.separating.inputs ({self.inputs.shape[0]} rows of {self.inputs.shape[1]}) "
                "and pass its output to rep.separating.which(output): it names the class that reproduces it")


def separate(names: list[str], pool: np.ndarray, outputs: list[np.ndarray]) -> SeparatingRows:
    """Rows of ``pool`` picked greedily until every pair of the named classes differs on one of them; each class's
    outputs are its model's on the picked rows (the models are row-wise: a row's outputs depend on that row only)."""
    R = pool.shape[0]
    picked: list[int] = []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            if any(not same_bits(outputs[i][r], outputs[j][r]).all() for r in picked):
                continue
            diff = [r for r in range(R) if not same_bits(outputs[i][r], outputs[j][r]).all()]
            if diff:
                picked.append(diff[0])
    rows = sorted(set(picked)) or [0]
    return SeparatingRows(pool[rows], {n: y[rows] for n, y in zip(names, outputs)},
                          _unseparated(names, outputs, rows))


def _unseparated(names: list[str], outputs: list[np.ndarray], rows: Any) -> list[tuple[str, str]]:
    rows = list(rows)
    return [(names[i], names[j]) for i in range(len(names)) for j in range(i + 1, len(names))
            if all(same_bits(outputs[i][r], outputs[j][r]).all() for r in rows)]
