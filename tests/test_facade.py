"""The facade ``numoracle``: lazy (nothing loaded until a name is used), complete, and helpful on a typo."""

from __future__ import annotations

import subprocess
import sys

import pytest

import numoracle as no


def test_import_numoracle_loads_nothing_until_used():
    code = ("import sys, numoracle; "
            "ours = {m for m in sys.modules if m.startswith('numoracle')}; "
            "assert 'numpy' not in sys.modules and ours <= {'numoracle', 'numoracle.core', 'numoracle.core.lazy'}, "
            "sorted(ours); "
            "numoracle.cast; assert 'numoracle.core.engine.convert' in sys.modules; "
            "assert not {'torch', 'hypothesis', 'matplotlib', 'tqdm'} & set(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_public_name_resolves_and_public_modules_load():
    assert all(getattr(no, name) is not None for name in no.__all__)
    assert no.orders.GpuReduce and no.testing.read_golden
    for ns in no.NAMESPACES:
        if ns == "strategies":
            continue   # (needs hypothesis: tests/testing/test_strategies.py)
        mod = getattr(no, ns)
        assert all(getattr(mod, name) is not None for name in mod.__all__), ns


def test_a_typo_gets_the_close_names():
    with pytest.raises(AttributeError, match="did you mean 'cast'"):
        no.casst  # noqa: B018
