"""Reductions: exact references, bit-exact accumulation models (orders), error bounds and tolerances."""
