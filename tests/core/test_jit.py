"""The optional compiled backend's switch (numoracle.core.jit)."""

import pytest

from numoracle.core import jit


def test_disabled_switches_kernels_off_and_nests(monkeypatch):
    monkeypatch.delenv("NUMORACLE_JIT", raising=False)
    before = jit.enabled(jit.MIN_WORK)
    with jit.disabled():
        assert not jit.enabled(jit.MIN_WORK)
        with jit.disabled():
            assert not jit.enabled(jit.MIN_WORK)
        assert not jit.enabled(jit.MIN_WORK)
    assert jit.enabled(jit.MIN_WORK) == before


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
    assert jit.enabled(jit.MIN_WORK) and not jit.enabled(jit.MIN_WORK - 1)
    assert not jit.enabled()                 # a step outside an entry point's block: numpy
    with jit.for_work(jit.MIN_WORK):
        assert jit.enabled()                 # the steps of a large call follow its decision
        with jit.for_work(1):
            assert not jit.enabled()         # a small call nested in it decides for itself
    with jit.for_work(1):
        assert not jit.enabled()
    with jit.forced():
        assert jit.enabled(1)
        with jit.disabled():
            assert not jit.enabled(1)       # disabled wins
    assert not jit.enabled(1)
    monkeypatch.setenv("NUMORACLE_JIT", "1")
    assert jit.enabled(1)


def test_small_calls_never_load_numba():
    """A kernel's first use costs its load (or compilation): small calls, such as a hypothesis
    example's, stay on numpy and do not even import numba."""
    import subprocess
    import sys

    code = ("import sys, numpy as np, numoracle as no\n"
            "a = np.ones((4, 8), np.float16); b = np.ones((8, 3), np.float16)\n"
            "no.simulate('matmul', a, b, acc='fp16')\n"
            "no.simulate('matmul', a, b, order=no.orders.preset('h100', 'fp16'))\n"
            "no.exact_matmul(a.astype(np.float32), b)\n"
            "no.assert_matmul_close(a.astype(np.float32) @ b.astype(np.float32), a, b)\n"
            "x = np.ones(8, np.float32); no.exact_sum(x); no.exact_dot(x, x)\n"
            "no.assert_sum_close(np.float32(8), x); no.assert_dot_close(np.float32(8), x, x)\n"
            "no.quantize(x, 'int8')\n"
            "print('numba' in sys.modules)\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "NUMORACLE_JIT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"


def test_backend_forces_either_path(monkeypatch):
    monkeypatch.delenv("NUMORACLE_JIT", raising=False)
    with jit.backend("numpy"):
        assert not jit.enabled(jit.MIN_WORK)
    with jit.backend("numba"):
        assert jit.enabled(1) == (jit._numba() is not None)
    with jit.backend("auto"):
        assert not jit.enabled(1)
    with pytest.raises(ValueError, match="numpy"):
        jit.backend("cuda")


class _Kernels:
    """A stand-in kernel module: runs even steps."""

    calls = jit.Calls()

    @staticmethod
    def covers(step):
        return step % 2 == 0


def test_kernel_for_is_the_one_decision(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.delenv("NUMORACLE_JIT", raising=False)
    assert jit.kernel_for(2, lambda: _Kernels) is None                  # outside an entry point's block: numpy
    with jit.forced():
        assert jit.kernel_for(2, lambda: _Kernels) is _Kernels
        assert jit.kernel_for(3, lambda: _Kernels) is None              # covers() says no
        with jit.disabled():
            assert jit.kernel_for(2, lambda: _Kernels) is None
    with jit.for_work(jit.MIN_WORK):
        assert jit.kernel_for(4, lambda: _Kernels) is _Kernels
    monkeypatch.setenv("NUMORACLE_JIT", "0")
    with jit.forced():
        assert jit.kernel_for(2, lambda: _Kernels) is None


def test_every_kernel_module_keeps_one_contract():
    pytest.importorskip("numba")
    import importlib

    for name in ("numoracle.models.kernels.chain", "numoracle.models.kernels.block",
                 "numoracle.models.kernels.blockrun", "numoracle.models.kernels.tree", "numoracle.exact.kernels.ozaki"):
        mod = importlib.import_module(name)
        assert callable(mod.covers) and callable(mod.run), name
        assert isinstance(mod.calls, jit.Calls), name
        before = mod.calls.count
        mod.calls.add(2)
        assert mod.calls.count == before + 2
