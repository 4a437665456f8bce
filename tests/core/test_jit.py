"""The optional compiled backend's switch (numoracle.core.jit)."""

import pytest

from numoracle.core import jit


def test_disabled_switches_kernels_off_and_nests(monkeypatch):
    monkeypatch.delenv("NUMORACLE_JIT", raising=False)
    before = jit.enabled()
    with jit.disabled():
        assert not jit.enabled()
        with jit.disabled():
            assert not jit.enabled()
        assert not jit.enabled()
    assert jit.enabled() == before


def test_environment_variable_turns_kernels_off(monkeypatch):
    monkeypatch.setenv("NUMORACLE_JIT", "0")
    assert not jit.enabled()


def test_njit_compiles_when_numba_is_installed():
    pytest.importorskip("numba")

    @jit.njit
    def add(a, b):
        return a + b

    assert add(2, 3) == 5
    assert hasattr(add, "py_func")        # a numba dispatcher, not the plain function


def test_small_calls_stay_on_numpy_unless_forced(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.delenv("NUMORACLE_JIT", raising=False)
    assert jit.enabled(jit.MIN_WORK) and jit.enabled(None)
    assert not jit.enabled(jit.MIN_WORK - 1)
    with jit.forced():
        assert jit.enabled(1)
        with jit.disabled():
            assert not jit.enabled(1)       # disabled wins
    assert not jit.enabled(1)
    monkeypatch.setenv("NUMORACLE_JIT", "1")
    assert jit.enabled(1)
