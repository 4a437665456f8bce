"""tables/boundary.csv: the boundary values of common conversions, with what numoracle.cast gives for each.

One row per (src, dst) pair of :data:`PAIRS` and per code of ``boundary_values(src, dst)``
(round-to-nearest-even, the destination's default overflow policy, FP32 as the implicit
intermediate): the label, the source code and its exact value, and the destination code.
"""

from __future__ import annotations

from typing import Any

from ..conformance.boundary import boundary_values
from ..core.engine.convert import cast
from ..core.text import hex_width

__all__ = ["PAIRS", "boundary_rows", "boundary_table"]

PAIRS: tuple[tuple[str, str], ...] = (
    ("fp32", "fp16"), ("fp32", "bf16"), ("fp32", "fp8_e4m3fn"), ("fp32", "fp8_e5m2"), ("fp32", "fp8_e4m3fnuz"),
    ("fp32", "fp4_e2m1fn"), ("fp32", "e8m0fnu"), ("fp32", "int8"),
    ("fp64", "fp32"), ("fp64", "fp16"), ("fp64", "bf16"),
    ("bf16", "fp8_e4m3fn"), ("bf16", "e8m0fnu"), ("fp16", "fp8_e4m3fn"), ("fp16", "fp8_e5m2"), ("fp16", "int8"),
    ("int32", "fp16"), ("int32", "bf16"), ("int32", "fp32"),
)


def boundary_rows(src: str, dst: str) -> list[dict[str, Any]]:
    """The rows of one pair: src, dst, label, code (hex), value (exact text), dst_code (hex, under rne)."""
    bv = boundary_values(src, dst)
    out = cast(bv.codes, bv.dst, src=bv.src)
    w = hex_width(bv.dst)
    return [{"src": bv.src.name, "dst": bv.dst.name, "label": r["label"], "code": r["code"], "value": r["value"],
             "dst_code": f"0x{int(c):0{w}x}"} for r, c in zip(bv.rows(), out.tolist())]


def boundary_table() -> list[dict[str, Any]]:
    """Every row, pair by pair in :data:`PAIRS` order, each pair's rows by source value (NaNs last)."""
    return [row for s, d in PAIRS for row in boundary_rows(s, d)]
