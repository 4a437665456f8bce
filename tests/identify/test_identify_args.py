"""identify_order's argument checks and its 1-D sum (issue 40, defects 13, 14 and 18): a sum of one vector is
identified (one output); ``rows=`` / ``budget_s=`` / ``max_candidates=`` out of range, and separating_inputs shapes
whose product is huge, are refused by name."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from numoracle.core.errors import NumoracleError
from numoracle.identify.search import identify_order
from numoracle.identify.separate import separating_inputs
from numoracle.models.engine.simulation import simulate
from numoracle.models.orders.basic import Pairwise, Sequential


def _rows(k: int = 32) -> np.ndarray:
    return np.random.default_rng(4).standard_normal((4, k)).astype(np.float32)


def test_sum_of_one_vector_is_identified():
    x = np.random.default_rng(1).standard_normal(48).astype(np.float32) * np.float32(1000)
    y = np.float32(simulate("sum", x, acc="fp32", order=Sequential()))
    assert np.shape(y) == ()
    rep = identify_order(y, "sum", x, candidates=[Pairwise(), Sequential()])
    assert rep.winner is not None and rep.winner.order == Sequential()
    assert rep.shape == () and rep.n_rows == 1


def test_sum_of_one_vector_auto_separates_per_call():
    x = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    y = np.float32(simulate("sum", x, acc="fp32", order=Sequential()))
    rep = identify_order(y, "sum", x, max_candidates=40)
    assert rep.verdict in ("REPRODUCED", "AMBIGUOUS")
    if rep.verdict == "AMBIGUOUS":       # one output cannot tell many orders apart: a call per row
        sep = rep.separating
        assert all(len(c) == 1 and c[0].ndim == 1 for c in sep.calls)
        kernel = lambda v: np.float32(simulate("sum", v, acc="fp32", order=Sequential()))   # noqa: E731
        assert sep.rerun(kernel)


@pytest.mark.parametrize("rows", [[5], [4], [-1], [], [0.5], [1.0, 2.0], [True, False], [0, 0], 7,
                                  np.ones((2, 2), int), "0"])
def test_rows_out_of_range_or_of_the_wrong_kind_are_refused(rows):
    X = _rows()
    with pytest.raises(NumoracleError, match="rows"):
        identify_order(X.sum(axis=1), "sum", X, rows=rows, candidates=[Sequential()])


def test_rows_given_as_indices_or_a_full_mask_select_those_rows():
    X = _rows()
    y = simulate("sum", X, acc="fp32", order=Sequential())
    for rows in ([3, 1], np.array([True, False, True, False]), np.int64(2)):
        rep = identify_order(y, "sum", X, rows=rows, candidates=[Sequential()])
        assert rep.winner is not None and rep.n_rows == np.count_nonzero(np.ones(4)[rows])


@pytest.mark.parametrize("budget", [math.nan, -1, 0, -math.inf, "10", True])
def test_budget_s_must_be_a_positive_number(budget):
    X = _rows()
    with pytest.raises(NumoracleError, match="budget_s"):
        identify_order(X.sum(axis=1), "sum", X, budget_s=budget, candidates=[Sequential()])


@pytest.mark.parametrize("count", [0, -1, 2.5, True])
def test_max_candidates_must_be_a_positive_int(count):
    X = _rows()
    with pytest.raises(NumoracleError, match="max_candidates"):
        identify_order(X.sum(axis=1), "sum", X, max_candidates=count, candidates=[Sequential()])


def test_separating_inputs_refuses_a_shape_whose_product_is_huge_before_allocating():
    """Defect 18: each size below 2^24 but their product 2^48; run capped at 1 GiB so a regression fails, not OOMs."""
    child = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
             "from numoracle.identify.separate import separating_inputs\n"
             "from numoracle.models.orders.basic import Pairwise, Sequential\n"
             "for shape, op in (((2**24, 2**24), 'sum'), ((2**14, 2**14, 2**14), 'matmul'), ((2**24,), 'sum')):\n"
             "    try:\n"
             "        separating_inputs([Sequential(), Pairwise()], op, shape, 'fp32')\n"
             "        print('ran')\n"
             "    except MemoryError:\n"
             "        print('memory')\n"
             "    except ValueError as e:\n"
             "        print('refused', e)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "NUMORACLE_JIT": "0"}
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120, env=env)
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and all(s.startswith("refused") and "smaller shape" in s for s in lines), (lines, r.stderr)


def test_separating_inputs_of_a_modest_shape_still_work():
    sep = separating_inputs([Sequential(), Pairwise()], "sum", (4, 4096), "fp32")
    assert sep.inputs[0].shape == (4, 4096)


def test_rerun_confirms_the_candidate_it_names_on_fresh_inputs():
    """A kernel that agrees with one candidate on the separating inputs and with neither elsewhere (here it returns
    Pairwise's outputs for exactly those inputs, 4 interleaved chains for any others) is named by the separating inputs
    alone; rerun confirms on fresh inputs and names nothing."""
    from numoracle.identify import separating_inputs
    from numoracle.orders import Interleaved

    sep = separating_inputs([Sequential(), Pairwise()], "sum", (8, 64), "fp32")
    fixed = np.asarray(simulate("sum", sep.inputs[0], acc="fp32", order=Pairwise()), np.float32)

    def kernel(x):
        if np.array_equal(x, sep.inputs[0]):
            return fixed
        return np.asarray(simulate("sum", x, acc="fp32", order=Interleaved(4)), np.float32)

    assert sep.rerun(kernel, confirm=False) == [sep.names[1]]
    assert sep.rerun(kernel) == []
    honest = lambda x: np.asarray(simulate("sum", x, acc="fp32", order=Pairwise()), np.float32)   # noqa: E731
    assert sep.rerun(honest) == [sep.names[1]]
