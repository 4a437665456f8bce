"""The suite's default parallelism: a whole-suite run (no paths given: the ini file's testpaths) spreads over the
machine's cores with pytest-xdist (the test extra installs it), at most _MAX_WORKERS worker processes. ``-n 0``
keeps it in one process, ``-n N`` chooses; a run of chosen files or tests stays in one process unless ``-n``
says otherwise; ``--pdb`` and ``--collect-only`` stay in one process. conftest.py imports the hook, which is
how pytest finds it; tests/test_workers.py runs it on a sample project.
"""

from __future__ import annotations

import os

import pytest

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
