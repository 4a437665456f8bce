"""``numoracle plot``: figures of bounds against emulated errors (being written)."""

from __future__ import annotations

import argparse

__all__ = ["add_plot_parsers"]


def add_plot_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ``plot`` (filled in by the plotting work)."""
