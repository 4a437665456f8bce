"""Registers the composite operations' bounds with ``expected_error_bound`` (imported by numoracle.composite)."""

from __future__ import annotations

from typing import Any

from ..bounds.expected import register_bound_op
from .attnbound import attention_bound
from .boundbase import CompositeBound
from .normbound import NORM_OPS, norm_bound
from .softmaxbound import SOFTMAX_OPS, softmax_family_bound

__all__ = ["COMPOSITE_OPS", "composite_error_bound"]

COMPOSITE_OPS = (*SOFTMAX_OPS, *NORM_OPS, "attention")


def composite_error_bound(op: str, dtype: Any, K: int, **kw: Any) -> CompositeBound:
    """The bound of one composite op (``expected_error_bound(op, ...)`` calls this)."""
    if op in SOFTMAX_OPS:
        return softmax_family_bound(op, dtype, K, **kw)
    if op in NORM_OPS:
        return norm_bound(op, dtype, K, **kw)
    if op == "attention":
        return attention_bound(op, dtype, K, **kw)
    raise ValueError(f"unknown composite op {op!r}; ops: {', '.join(COMPOSITE_OPS)}")


def _for(op: str) -> Any:
    def bound(dtype: Any, K: int, **kw: Any) -> CompositeBound:
        return composite_error_bound(op, dtype, K, **kw)

    return bound


for _op in COMPOSITE_OPS:
    register_bound_op(_op, _for(_op))
