"""Revealing a black-box kernel's accumulation order by probing it (numoracle.reveal_order; docs/reveal.md).

The public namespace ``numoracle.reveal``: the report and the errors of ``reveal_order``.
"""

from ..core.lazy import namespace

API = {"RevealReport": ".report", "RevealError": ".probe", "BudgetExhausted": ".probe", "KINDS": ".report"}

__all__, __getattr__, __dir__ = namespace(__name__, API)
