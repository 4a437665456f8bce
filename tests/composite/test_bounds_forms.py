"""The bounds' intermediate formats (stats=, form="composed"), Welford's variance, normalize="before" and the
probabilistic kind: against numoracle's bit-exact models (composite/sim) on random and adversarial rows, fresh seeds."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numoracle.composite  # noqa: F401  (registers the ops)
from numoracle.bounds.expected import expected_error_bound
from numoracle.composite import simulate_layer_norm, simulate_log_softmax, simulate_logsumexp, sleef_expf_u10
from numoracle.composite.norms import layer_norm_reference
from numoracle.composite.softmax import log_softmax_reference, logsumexp_reference

BF16 = ml_dtypes.bfloat16


def _rows(rng, K):
    """bf16 rows: a large max over small entries (log S near 0), wide and near-tied rows."""
    big = rng.standard_normal((6, K)) * 3
    big[:, 0] = 200.0
    ties = np.repeat(rng.standard_normal((6, 1)), K, axis=1) + rng.standard_normal((6, K)) * 2.0**-6
    return np.concatenate([big, rng.standard_normal((6, K)) * 20, ties]).astype(BF16)


@pytest.mark.parametrize("op", ["log_softmax", "logsumexp"])
def test_stats_bound_covers_the_model_that_stores_S_and_log_S_in_bf16(op):
    rng = np.random.default_rng(101)
    sim = {"log_softmax": simulate_log_softmax, "logsumexp": simulate_logsumexp}[op]
    ref = {"log_softmax": log_softmax_reference, "logsumexp": logsumexp_reference}[op]
    worst_fused = 0.0
    for K in (7, 100, 1000):
        x = _rows(rng, K)
        got = sim(x, exp=sleef_expf_u10, stats="bf16", out="bf16").astype(np.float64)
        exact = np.asarray(ref(x, out="fp32"), np.float64)
        kw = dict(acc="fp32", out="bf16", exp="sleef_u10", log="sleef_u10")
        tol = expected_error_bound(op, "bf16", K, stats="bf16", **kw).tolerance(x) + 2.0**-24 * np.abs(exact)
        assert (np.abs(got - exact) <= tol).all()
        fused = expected_error_bound(op, "bf16", K, **kw).tolerance(x) + 2.0**-24 * np.abs(exact)
        worst_fused = max(worst_fused, float((np.abs(got - exact) / fused).max()))
        assert (tol >= fused).all()
    if op == "log_softmax":
        assert worst_fused > 1  # the fused (fp32-internal) bound does not describe this evaluation


def test_composed_form_is_wider_than_stats_which_is_wider_than_fused():
    x = _rows(np.random.default_rng(102), 64)
    kw = dict(acc="fp32", out="bf16")
    t = [expected_error_bound("logsumexp", "bf16", 64, **kw, **f).tolerance(x)
         for f in ({}, {"stats": "bf16"}, {"form": "composed"})]
    assert (t[0] <= t[1]).all() and (t[1] <= t[2]).all() and (t[0] < t[2]).any()
    assert "exp stored" in [c.name for c in expected_error_bound("softmax", "bf16", 64, form="composed",
                                                                 **kw).components]


@pytest.mark.parametrize("variance", ["welford", "rowwise"])
def test_welford_bound_covers_the_models_including_offset_rows(variance):
    rng = np.random.default_rng(103)
    for K in (8, 40, 300):
        for off, sc in ((0.0, 1.0), (300.0, 0.05), (5.0, 3.0)):
            x = (rng.standard_normal((16, K)) * sc + off).astype(np.float32)
            got = simulate_layer_norm(x, eps=1e-5, variance=variance, out="fp32").astype(np.float64)
            exact = np.asarray(layer_norm_reference(x, eps=1e-5, out="fp32"), np.float64)
            depth = K - 1 if variance == "welford" else min(K - 1, 34 + (-(-K // 16) - 1).bit_length())
            b = expected_error_bound("layernorm", "fp32", K, eps=1e-5, variance="welford", moments_depth=depth)
            assert (np.abs(got - exact) <= b.tolerance(x, eps=1e-5) + 2.0**-24 * np.abs(exact)).all()


def test_vacuous_welford_bound_is_infinite_not_nan():
    """Regression: a row whose Welford bound is vacuous gave NaN (0 * inf) on an element equal to the mean."""
    x = (100.0 + np.arange(4095) % 3 - 1).astype(np.float32)[None]  # the mean, 100, is an element
    for affine in ("centered", "folded"):
        t = expected_error_bound("layernorm", "fp32", 4095, eps=1e-5, variance="welford", affine=affine).tolerance(
            x, eps=1e-5)
        assert np.isposinf(t).all(), affine


def test_welford_bound_grows_with_depth_and_offset():
    x = np.random.default_rng(104).standard_normal((2, 256)).astype(np.float32)
    t = [expected_error_bound("layernorm", "fp32", 256, eps=1e-5, variance="welford", moments_depth=h).tolerance(
        x + off, eps=1e-5).max() for h, off in ((10, 0), (255, 0), (255, 50))]
    assert t[0] < t[1] < t[2]


def test_probabilistic_forms_are_smaller_for_long_rows_and_never_larger():
    rng = np.random.default_rng(105)
    x = rng.standard_normal((4, 4096)).astype(np.float32)
    q, k, v = (rng.standard_normal((1, 64, 32)).astype(np.float32) for _ in range(3))
    cases = [("layernorm", (x,), {"eps": 1e-5}), ("rmsnorm", (x,), {"eps": 1e-6})]
    for op, args, kw in cases:
        w, p = (expected_error_bound(op, "fp32", 4096, kind=kd, **kw).tolerance(*args, **kw)
                for kd in ("worst", "probabilistic"))
        assert (p <= w).all() and (p < w).any(), op
    w, p = (expected_error_bound("attention", "fp32", 64, kind=kd, order="sequential").tolerance(q, k, v)
            for kd in ("worst", "probabilistic"))
    assert (p <= w).all() and (p < w).any()
    assert expected_error_bound("rmsnorm", "fp32", 4096, kind="probabilistic").confidence == 0.999


def test_normalize_before_bounds_with_A_not_o():
    rng = np.random.default_rng(106)
    q, k, v = (rng.standard_normal((1, 32, 16)).astype(np.float32) for _ in range(3))
    kw = dict(acc="fp32", out="bf16", p_format="bf16")
    after = expected_error_bound("attention", "bf16", 32, **kw).tolerance(q, k, v)
    before = expected_error_bound("attention", "bf16", 32, normalize="before", **kw).tolerance(q, k, v)
    assert (before >= after).all() and (before > after).any()


def test_vacuous_attention_bound_is_infinite_even_where_o_is_zero():
    q = np.zeros((1, 4, 2), np.float32)
    v = np.zeros((1, 4, 2), np.float32)
    t = expected_error_bound("attention", "bf16", 4, acc="bf16", exp=10**6).tolerance(q, q, v)
    assert np.isposinf(t).all()
