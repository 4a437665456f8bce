"""Hypothesis strategies over formats (``numoracle.strategies``; needs hypothesis): codes, values, ties,
near-overflow values and subnormals of any numoracle format."""

from .core.lazy import namespace

API = dict.fromkeys(("codes", "values", "code_arrays", "value_arrays", "ties", "near_overflow", "subnormals"),
                    ".testing.strategies")

__all__, __getattr__, __dir__ = namespace(__name__, API)
