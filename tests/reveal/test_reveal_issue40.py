"""Regression tests for issue 40's reveal defects (9-12): directed roundings, kernels that are not deterministic,
FP16 accumulators of FP16 products, matmuls with K = 1."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle import reveal_order
from numoracle.cli import main
from numoracle.core.formats.interop import native_dtype


def _kernel(op, **kw):
    return lambda *a: no.simulate(op, *a, **kw)


def _same_on_fresh_data(op, rep, kernel, n, dtype="fp32", shape=None):
    rng = np.random.default_rng(40)
    dt = native_dtype(no.formats.format_of(dtype))
    for _ in range(3):
        if op == "matmul":
            xs = [rng.standard_normal(shape[:2]).astype(dt), rng.standard_normal(shape[1:]).astype(dt)]
        else:
            xs = [rng.standard_normal(n).astype(dt) for _ in range(1 if op == "sum" else 2)]
        assert np.array_equal(np.asarray(no.simulate(op, *xs, order=rep.order)).ravel(),
                              np.asarray(kernel(*xs)).ravel(), equal_nan=True)


# ---- 9: trees that round toward zero or upward ---------------------------------------------------------------

@pytest.mark.parametrize(("order", "mode", "want"), [
    (O.Pairwise(), "rtz", "rtz"), (O.Sequential(), "ru", "ru"), (O.Pairwise(), "ru", "ru"),
    (O.Sequential(), "rtz", "rtz"), (O.Blocked(8, O.Pairwise(), O.Sequential()), "rd", "rd"),
])
def test_directed_rounding_trees_are_revealed_with_their_mode(order, mode, want):
    kernel = _kernel("sum", order=order, rounding=mode)
    rep = reveal_order(kernel, "sum", n=64, draws=3)
    assert rep.verdict == "reproduced", str(rep)
    assert {m for _, m in rep.order.steps} == {want}, rep.order.steps
    _same_on_fresh_data("sum", rep, kernel, 64)


def test_directed_rounding_dot_products():
    kernel = _kernel("dot", order=O.SplitK(4, combine=O.Pairwise()), rounding="rtz")
    rep = reveal_order(kernel, "dot", n=48, dtype="bf16", draws=3)
    assert rep.verdict == "reproduced", str(rep)
    _same_on_fresh_data("dot", rep, kernel, 48, "bf16")


# ---- 10: a fresh random order on every call ------------------------------------------------------------------

def test_random_order_on_every_call_is_not_deterministic():
    rng = np.random.default_rng(0)

    def shuffled_sum(x):                       # a sequential sum in a new random order each call
        s = np.float32(0)
        for v in x[rng.permutation(len(x))]:
            s = np.float32(s + v)
        return s
    rep = reveal_order(shuffled_sum, "sum", n=32)
    assert rep.verdict == "not deterministic" and rep.order is None, str(rep)
    assert "called again" in rep.notes[0]


def test_a_deterministic_non_tree_stays_not_a_tree():
    import math
    rep = reveal_order(lambda x: np.float32(math.fsum(x.astype(np.float64))), "sum", n=16)
    assert rep.verdict == "not a tree"


# ---- 11: FP16 products accumulated in FP16 along a pairwise tree ---------------------------------------------

@pytest.mark.parametrize(("op", "kw"), [("dot", {"n": 64}), ("matmul", {"shape": (2, 64, 3)})])
def test_fp16_accumulator_pairwise(op, kw):
    kernel = _kernel(op, order=O.Pairwise(), acc="fp16")
    rep = reveal_order(kernel, op, dtype="fp16", draws=2, **kw)
    assert rep.verdict == "reproduced", str(rep)
    _same_on_fresh_data(op, rep, kernel, kw.get("n"), "fp16", kw.get("shape"))


# ---- 12: a matmul with K = 1 ---------------------------------------------------------------------------------

def test_matmul_with_one_term_is_refused_clearly(capsys):
    with pytest.raises(ValueError, match="K = 1 .* no summation order"):
        reveal_order(lambda A, B: A @ B, "matmul", shape=(2, 1, 2))
    assert main(["reveal", "numpy:matmul", "matmul", "--shape", "2,1,2"]) == 2
    assert "K >= 2" in capsys.readouterr().err
