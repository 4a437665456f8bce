"""Composite bounds: registration, components, argument errors, and the bounds against the exact references."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle.composite  # noqa: F401  (registers the ops)
from numoracle.bounds.expected import expected_error_bound
from numoracle.composite.attention import attention_reference
from numoracle.composite.norms import layer_norm_reference
from numoracle.composite.softmax import softmax_reference
from numoracle.composite.ulps import ELEMENTWISE, elementwise_error


def test_every_op_is_registered_and_lists_its_roundings():
    for op in ("softmax", "log_softmax", "logsumexp", "cross_entropy", "layernorm", "rmsnorm", "attention"):
        b = expected_error_bound(op, "bf16", 256, out="bf16")
        names = [c.name for c in b.components]
        assert any(n.startswith("accumulation") for n in names) and "output rounding" in names, (op, names)
        assert op in str(b)


def test_softmax_coefficient_grows_with_K_and_exp_error():
    c = [expected_error_bound("softmax", "fp32", K).coefficient for K in (16, 256, 4096)]
    assert c[0] < c[1] < c[2]
    assert expected_error_bound("softmax", "fp32", 256, exp="cuda_expf").coefficient > c[1]
    assert expected_error_bound("softmax", "fp32", 256, order="pairwise").coefficient < c[1]
    p = expected_error_bound("softmax", "fp32", 4096, kind="probabilistic")
    assert p.coefficient < c[2]


def test_online_and_split_kv_cost_more_than_plain():
    plain = expected_error_bound("attention", "bf16", 4096, head_dim=128, order="blocked:64")  # the same tree
    online = expected_error_bound("attention", "bf16", 4096, head_dim=128, block=64)
    assert online.coefficient > plain.coefficient
    assert "online rescaling" in [c.name for c in online.components]


def test_errors_are_clear():
    with pytest.raises(ValueError, match="do not fit the accumulator"):
        expected_error_bound("softmax", "fp32", 8, acc="bf16")
    with pytest.raises(ValueError, match="welford"):
        expected_error_bound("rmsnorm", "fp32", 8, variance="welford")
    with pytest.raises(ValueError, match="moments_depth"):
        expected_error_bound("layernorm", "fp32", 8, variance="welford", moments_depth=8)
    with pytest.raises(ValueError, match="pass out="):
        expected_error_bound("logsumexp", "bf16", 8, form="composed")
    with pytest.raises(ValueError, match="normalize='before'"):
        expected_error_bound("attention", "bf16", 8, normalize="before", block=4)
    with pytest.raises(TypeError, match="unexpected keyword"):
        expected_error_bound("softmax", "fp32", 8, block=4)
    with pytest.raises(ValueError, match="unknown elementwise"):
        elementwise_error("fastexp")
    with pytest.raises(ValueError, match="K = 8"):
        expected_error_bound("softmax", "fp32", 8).tolerance(np.zeros((2, 9), np.float32))
    assert all(e.source for e in ELEMENTWISE.values())


def _simulated_softmax(x32: np.ndarray) -> np.ndarray:
    """softmax evaluated in fp32 by numpy (sequential-free: numpy's pairwise sum), the kernel under test here."""
    m = x32.max(axis=-1, keepdims=True)
    e = np.exp(x32 - m)
    return e / e.sum(axis=-1, keepdims=True, dtype=np.float32)


def test_bounds_cover_an_fp32_kernel_against_the_exact_reference():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((64, 300)) * 8).astype(np.float32)
    ref = softmax_reference(x, out="fp32")  # within half an fp32 ulp of exact: the tolerance adds u |y|
    b = expected_error_bound("softmax", "fp32", 300, exp="sleef_u35")
    got = _simulated_softmax(x).astype(np.float64)
    assert (np.abs(got - ref) <= b.tolerance(x) + 2.0**-24 * ref).all()
    # a kernel that drops the last 4 keys is outside the bound
    bad = _simulated_softmax(x[:, :-4])
    assert (np.abs(bad - ref[:, :-4]) > b.tolerance(x)[:, :-4] + 2.0**-24 * ref[:, :-4]).any()


def test_layernorm_and_attention_tolerances_are_finite_and_positive():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    t = expected_error_bound("layernorm", "fp32", 64, eps=1e-5).tolerance(x, eps=1e-5)
    assert np.isfinite(t).all() and (t > 0).all()
    assert np.isfinite(layer_norm_reference(x)).all()
    q, k, v = (rng.standard_normal((1, 16, 8)).astype(np.float32) for _ in range(3))
    for kw in ({}, {"block": 4}, {"splits": 2}):
        t = expected_error_bound("attention", "fp32", 16, **kw).tolerance(q, k, v, causal=True)
        assert np.isfinite(t).all() and (t > 0).all(), kw
    assert np.isfinite(attention_reference(q, k, v, causal=True)).all()


def test_unimported_composite_op_is_refused_by_the_lower_layer():
    from numoracle.bounds import expected

    saved = expected.EXTRA_OPS.pop("softmax")
    try:
        with pytest.raises(ValueError, match="import that module first"):
            expected.expected_error_bound("softmax", "fp32", 8)
    finally:
        expected.EXTRA_OPS["softmax"] = saved


def test_vacuous_bounds_are_infinite_never_negative():
    """A sum whose error factor reaches 1 (bf16 accumulation of 4096 terms) makes the bound +inf, not <= 0 or NaN
    (regression: 1 / (1 - sigma) went negative)."""
    x = np.random.default_rng(8).standard_normal((2, 4096)).astype(np.float32)
    import ml_dtypes

    xb = x.astype(ml_dtypes.bfloat16)
    for op in ("softmax", "log_softmax", "logsumexp"):
        t = expected_error_bound(op, "bf16", 4096, acc="bf16").tolerance(xb)
        assert np.isposinf(t).all(), op
    q = xb[:, :64].reshape(2, 16, 4).astype(np.float32)
    t = expected_error_bound("attention", "bf16", 16, acc="bf16", order="sequential", exp=10**6).tolerance(q, q, q)
    assert not (t <= 0).any() and not np.isnan(t).any()


def test_ftz_is_refused_for_composite_ops():
    with pytest.raises(ValueError, match="ftz=True is not modelled for softmax"):
        expected_error_bound("softmax", "fp32", 8, ftz=True)
