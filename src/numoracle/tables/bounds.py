"""tables/bounds.csv: error-bound coefficients by input format, accumulator, order, K and kind.

One row per (dtype, acc, order, K, kind) for a matmul (the per-element bound of a dot product of
length K): c in |y_hat - y| <= c * sum_k |a_k b_k|. Cells are deterministic text: decimals rounded
UP to 17 significant digits (Python ints and Fractions only, plus mpmath at fixed precision for the
probabilistic factor), so the table never understates a bound. Rows that a model refuses (the
probabilistic bound of a truncating block FMA) keep empty numbers and say why in ``note``.
"""

from __future__ import annotations

from typing import Any

from ..bounds.boundmath import sci
from ..bounds.expected import expected_error_bound

__all__ = ["bounds_table", "DTYPES", "ORDERS", "FP8_ORDERS", "KS", "KINDS_TABLE"]

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2")
ORDERS = ("sequential", "pairwise", "blocked:128", "splitk:8")
FP8_ORDERS = ("blockfma:32:13:13",)  # H100/H200 FP8 tensor core (docs/theory.md §4; orders.preset("h100", "fp8")):
# N = 32 products per block, F = 13 kept fraction bits, a 13-fraction-bit chained accumulator in FP32's range
KS = tuple(2**k for k in range(4, 21))
KINDS_TABLE = ("worst", "probabilistic")
DIGITS = 17


def _combos(dtypes: tuple[str, ...]) -> list[tuple[str, str, str]]:
    out = []
    for d in dtypes:
        for a in dict.fromkeys(("fp32", d)):
            orders = ORDERS + (FP8_ORDERS if d.startswith("fp8") and a == "fp32" else ())
            out += [(d, a, o) for o in orders]
    return out


def _row(d: str, a: str, o: str, K: int, kind: str, confidence: float) -> dict[str, Any]:
    row: dict[str, Any] = {"op": "matmul", "dtype": d, "acc": a, "order": o, "K": K, "kind": kind,
                           "confidence": str(confidence) if kind == "probabilistic" else ""}
    try:
        b = expected_error_bound("matmul", d, K, acc=a, order=o, kind=kind, confidence=confidence)
    except ValueError as e:
        return {**row, "depth": "", "coefficient": "", "exact": "", "gamma": "", "lambda": "", "vacuous": "",
                "note": "refused: " + str(e).split(";")[0]}
    try:
        g = sci(b.gamma(), DIGITS)
    except ValueError:
        g = ""
    return {**row, "depth": b.depth, "coefficient": sci(b.coefficient, DIGITS), "exact": b.exact, "gamma": g,
            "lambda": sci(b.lambda_, 12) if b.lambda_ is not None else "", "vacuous": b.vacuous,
            "note": "vacuous: c >= 1" if b.vacuous else ("gamma form undefined (n u >= 1)" if not g else "")}


def bounds_table(dtypes: tuple[str, ...] = DTYPES, ks: tuple[int, ...] = KS,
                 kinds: tuple[str, ...] = KINDS_TABLE, confidence: float = 0.999) -> list[dict[str, Any]]:
    """The rows of tables/bounds.csv (accumulators: fp32 and the input format; round to nearest; order
    strings as in ``numoracle.bounds.expected``; probabilistic rows: union bound over the K error products of
    one element, no output shape)."""
    return [_row(d, a, o, K, kind, confidence) for d, a, o in _combos(tuple(dtypes)) for K in ks for kind in kinds]
