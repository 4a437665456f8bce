"""``numoracle sweep``: conformance sweeps of a library's cast against the engine (being written)."""

from __future__ import annotations

import argparse

__all__ = ["add_sweep_parsers"]


def add_sweep_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ``sweep`` (filled in by the sweep work)."""
