"""check_invariance on composite ops: a synthetic softmax whose sum order changes at M >= 8 (threshold exact,
counterexample confirmed, classes named by their models), an invariant one, torch's CPU softmax over M = 1..64."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle import check_invariance
from numoracle.composite import simulate_rms_norm, simulate_softmax, sleef_expf_u10, torch_cpu_softmax
from numoracle.core.errors import NumoracleError
from numoracle.orders import Interleaved, Pairwise, Sequential
from optional import needs


def switching_softmax(X):
    """A sequential sum below 8 rows, 8 lanes combined by halving from 8 rows on."""
    order = Sequential() if X.shape[0] < 8 else Interleaved(8, combine="halving")
    return simulate_softmax(X, order).astype(np.float32)


def test_threshold_at_8_found_exactly_with_a_confirmed_counterexample():
    rep = check_invariance(switching_softmax, "softmax", vary={"M": range(1, 65)}, at={"K": 100})
    assert rep.verdict == "VARIANT", str(rep)
    assert len(rep.classes) == 2 and len(rep.thresholds) == 1
    t = rep.thresholds[0]
    assert (t.below.get("M"), t.above.get("M")) == (7, 8) and t.exact
    ce = rep.counterexamples[0]
    assert ce.confirmed and ce.model_agrees
    assert ce.inputs_a[0].shape == (7, 100) and ce.inputs_b[0].shape == (8, 100)
    assert np.array_equal(ce.inputs_a[0][0], ce.inputs_b[0][0])                   # the watched row, in both
    assert (switching_softmax(ce.inputs_a[0])[0] != switching_softmax(ce.inputs_b[0])[0]).any()
    a, b = (c.order for c in rep.classes)
    assert a.startswith("Sequential(), exp correctly rounded") and a.endswith("reciprocal")
    assert b.startswith("Interleaved(k=8, combine='halving', tail='lanes'")
    assert rep.not_claimed > 0 and "not a proof" in str(rep) and "not claimed" in str(rep)


def test_invariant_kernel_is_matched_not_proven():
    def kernel(X):
        return simulate_rms_norm(X, eps=1e-6, order=Pairwise()).astype(np.float32)
    rep = check_invariance(kernel, "rms_norm", vary={"M": [1, 2, 3, 7, 8, 9]}, at={"K": 48}, models=None)
    assert rep.verdict == "INVARIANT" and rep.matches == 6 and rep.reveals == 0
    assert rep.classes[0].order is None and "models not tried" in rep.classes[0].description
    assert any("12 seeded check rows" in n and "not a proof" in n for n in rep.notes)


def test_row_position_axis_and_refusals():
    def kernel(X):          # the last row gets a pairwise sum: row position matters
        y = simulate_softmax(X, Sequential())
        y[-1] = simulate_softmax(X[-1:], Pairwise())[0]
        return y.astype(np.float32)
    rep = check_invariance(kernel, "softmax", vary={"row": [0, 1, 2, 3]}, at={"M": 4, "K": 64}, models=None)
    assert rep.verdict == "VARIANT" and [(t.below.get("row"), t.above.get("row")) for t in rep.thresholds] == [(2, 3)]
    with pytest.raises(NumoracleError, match="evidence"):
        check_invariance(kernel, "softmax", vary={"M": [1, 2]}, at={"K": 8}, evidence="reveal")
    with pytest.raises(NumoracleError, match="workers"):
        check_invariance(kernel, "softmax", vary={"M": [1, 2]}, at={"K": 8}, workers=2)
    with pytest.raises(TypeError, match="models"):
        check_invariance(kernel, "softmax", vary={"M": [1, 2]}, at={"K": 8}, models=[3])


def test_torch_cpu_softmax_is_batch_invariant_over_m_1_to_64():
    torch = needs("torch")

    def kernel(X):
        return torch.softmax(torch.from_numpy(X), -1)
    rep = check_invariance(kernel, "softmax", vary={"M": range(1, 65)}, at={"K": 100}, exhaustive=True)
    # torch 2.13.0+cpu: one class at every M (the row's outputs bit-identical on the 12 check rows), named
    assert rep.verdict == "INVARIANT" and rep.not_claimed == 0, str(rep)
    assert rep.classes[0].order.startswith("torch_cpu_softmax")
    X = np.random.default_rng(3).standard_normal((5, 100)).astype(np.float32)
    assert (torch_cpu_softmax(X) == kernel(X).double().numpy()).all()


def test_ambiguous_class_named_after_the_kernel_runs_the_separating_rows():
    # K = 7: on the 12 check rows a sequential sum and others give the same bits; the separating rows, put in the
    # watched row and given to the kernel, leave one model
    def kernel(X):
        return simulate_softmax(X, Sequential(), exp=sleef_expf_u10).astype(np.float32)
    rep = check_invariance(kernel, "softmax", vary={"M": [1, 2]}, at={"K": 7}, draws=3)
    c = rep.classes[0]
    assert rep.verdict == "INVARIANT" and c.order is not None, str(rep)
    assert c.model_verdict.startswith("REPRODUCED after"), c.model_verdict
    assert c.order.startswith("Sequential(), sleef_expf_u10, reciprocal") or c.order.startswith("torch_cpu_softmax")
