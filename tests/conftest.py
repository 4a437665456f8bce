"""Shared fixtures for the suite, and a closing line on what was skipped for lack of an optional package.

The suite runs against the checkout's ``src/`` (pyproject's ``pythonpath``), so an edit there is what gets
tested. Tiers: the default run; ``-m slow`` (minutes); ``-m exhaustive`` (every code of the wide sources, hours).

A whole-suite run (no paths given: pyproject's testpaths) spreads over the machine's cores with pytest-xdist
(the test extra installs it), at most _MAX_WORKERS worker processes; ``-n 0`` runs it in this process, ``-n N``
on N workers. A run of chosen files or tests stays in this process unless ``-n`` says otherwise.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from optional import install, skipped_for


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator (each test that takes it gets the same stream)."""
    return np.random.default_rng(20261201)


_MAX_WORKERS = 4  # each worker holds its own numpy arrays and numba kernels: more cores than this barely pay


def _cores() -> int:
    """The cores this process may run on (its affinity, where the system tells it)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Whole-suite runs on up to _MAX_WORKERS cores (see the module's docstring). Runs before xdist's own
    hook of this name (conftest hooks are called first), which turns ``numprocesses`` into workers."""
    if not config.pluginmanager.hasplugin("xdist") or "PYTEST_XDIST_WORKER" in os.environ:
        return
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS  # pytest >= 7.2
    quiet = config.getoption("usepdb", False) or config.getoption("collectonly", False)
    if whole and not quiet and config.getoption("numprocesses", None) is None and _cores() > 1:
        config.option.numprocesses = min(_cores(), _MAX_WORKERS)


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
