"""Conformance of other libraries' casts: boundary values, sweeps, known deviations and sweep reports."""
