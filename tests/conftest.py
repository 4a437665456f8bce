"""Shared fixtures for the suite, and a closing line on what was skipped for lack of an optional package.

The suite runs against the checkout's ``src/`` (pyproject's ``pythonpath``), so an edit there is what gets
tested. Tiers: the default run; ``-m slow`` (minutes); ``-m exhaustive`` (every code of the wide sources, hours).

A whole-suite run (no paths given: pyproject's testpaths) spreads over the machine's cores with pytest-xdist
(the test extra installs it; see workers.py); ``-n 0`` runs it in this process, ``-n N`` on N workers. A run of
chosen files or tests stays in this process unless ``-n`` says otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest

from optional import install, skipped_for
from workers import pytest_cmdline_main  # noqa: F401 (a hook: whole-suite runs on the machine's cores)


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator (each test that takes it gets the same stream)."""
    return np.random.default_rng(20261201)


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
