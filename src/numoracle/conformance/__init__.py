"""Conformance of other libraries' casts: boundary values, sweeps, known deviations and sweep reports."""

from ..core.lazy import namespace

API = {"boundary_values": ".boundary", "BoundaryValues": ".boundary", "sweep": ".sweeper",
       "SweepReport": ".sweeper", "KNOWN_DEVIATIONS": ".deviations"}

__all__, __getattr__, __dir__ = namespace(__name__, API)
