"""Batch invariance and determinism: whether a kernel's order for one output changes with batch size, row position,
split or any parameter (numoracle.check_invariance; docs/invariance.md)."""

from .check import assert_batch_invariant, check_invariance
from .recorded import RecordedClasses, classes_of_recorded
from .report import Counterexample, Gap, InvarianceReport, OrderClass, Point, Threshold

__all__ = ["check_invariance", "assert_batch_invariant", "InvarianceReport", "OrderClass", "Point", "Threshold",
           "Gap", "Counterexample", "classes_of_recorded", "RecordedClasses"]
