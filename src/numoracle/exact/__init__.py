"""Exact references: sums, dot products and matmuls computed exactly (integer limbs, the Ozaki split) and rounded once.

Owns exact_sum, exact_dot, exact_matmul and their compiled twins (jitozaki). Imports only core.
"""
