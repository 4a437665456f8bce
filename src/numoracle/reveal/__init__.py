"""Revealing a black-box kernel's accumulation order by probing it (numoracle.reveal_order; docs/reveal.md)."""

from .probe import BudgetExhausted, RevealError
from .report import KINDS, RevealReport, reveal_order

__all__ = ["reveal_order", "RevealReport", "RevealError", "BudgetExhausted", "KINDS"]
