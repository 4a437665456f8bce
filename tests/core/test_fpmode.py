"""core/fpmode.py: the entry points whose exact steps need IEEE subnormals refuse a thread that flushes them
(FTZ / DAZ, set here through torch.set_flush_denormal, the common way it gets set), with an error naming the fix;
without the guard, exact_sum of two smallest subnormals came out 0 in that mode."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle.core.errors import FlushToZeroError
from numoracle.core.fpmode import subnormals_flushed


def test_an_ieee_thread_is_not_flagged():
    assert not subnormals_flushed()
    assert float(no.exact_sum(np.array([2.0**-1074, 2.0**-1074]))) == 2.0**-1073


def test_a_flushing_thread_is_refused_with_the_fix():
    torch = pytest.importorskip("torch")
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero mode torch can set")
    try:
        assert subnormals_flushed()
        a = np.ones((2, 3))
        for call in (lambda: no.exact_sum(a), lambda: no.exact_dot(a, a), lambda: no.exact_matmul(a, a.T),
                     lambda: no.simulate("sum", a)):
            with pytest.raises(FlushToZeroError, match=r"set_flush_denormal\(False\)"):
                call()
        assert isinstance(FlushToZeroError("x"), ValueError)
    finally:
        torch.set_flush_denormal(False)
    assert not subnormals_flushed()
    assert float(no.exact_sum(np.array([2.0**-1074, 2.0**-1074]))) == 2.0**-1073
