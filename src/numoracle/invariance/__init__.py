"""Batch invariance and determinism: whether a kernel's order for one output changes with batch size, row position,
split or any parameter (``numoracle.check_invariance``; docs/invariance.md).

The public namespace ``numoracle.invariance``: the report's types and the recorded-outputs form; ``check_invariance``
and ``assert_batch_invariant`` are at the top level. Imports every layer below it (reveal, identify, the models,
testing's run comparison); only the command line imports it.
"""

from ..core.lazy import names_from as _from
from ..core.lazy import namespace

API = {
    **_from(".report", "InvarianceReport", "OrderClass", "Point", "Threshold", "Gap", "Counterexample"),
    **_from(".recorded", "classes_of_recorded", "RecordedClasses"),
}

__all__, __getattr__, __dir__ = namespace(__name__, API)
