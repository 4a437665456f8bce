"""Shared fixtures for the suite, and a closing line on what was skipped for lack of an optional package.

The suite runs against the checkout's ``src/`` (pyproject's ``pythonpath``), so an edit there is what gets
tested. Tiers: the default run; ``-m slow`` (minutes); ``-m exhaustive`` (every code of the wide sources, hours).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from optional import install, missing_from

# the optional packages whose absence skips tests; the closing summary counts the skips of each
OPTIONAL = ("torch", "jax", "numba", "mkdocs", "matplotlib", "distributed", "grimp", "softfloatpy", "mypy",
            "hatchling")
# skip reasons not made by optional.reason(): pytest.importorskip's own, and older hand-written ones
_OTHER_REASONS = re.compile(r"(?:could not import|No module named) '?([A-Za-z_]\w*)|\bneeds ([A-Za-z_]\w*)")


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator (each test that takes it gets the same stream)."""
    return np.random.default_rng(20261201)


def skipped_for(reason: str) -> str | None:
    """The optional package a skip reason says is missing (None: skipped for another reason)."""
    name = missing_from(reason)
    if name is None:
        m = _OTHER_REASONS.search(reason)
        name = next((g for g in m.groups() if g), None) if m else None
    return name if name in OPTIONAL else None


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    missing: dict[str, int] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        reason = str(rep.longrepr[-1]) if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        name = skipped_for(reason.removeprefix("Skipped: "))
        if name is not None:
            missing[name] = missing.get(name, 0) + 1
    for name, n in sorted(missing.items()):
        terminalreporter.write_line(f"numoracle: {n} test(s) skipped because {name} is not installed "
                                    f"(pip install {install(name)} runs them)")
