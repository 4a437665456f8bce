"""The composite bounds against jax 0.10.2's CPU softmax and dot_product_attention (findings in docs/composite.md)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numoracle.composite  # noqa: F401  (registers the ops)
from numoracle.bounds.expected import expected_error_bound
from numoracle.composite.attention import attention_reference
from numoracle.composite.softmax import softmax_reference

jax = pytest.importorskip("jax", reason="the jax comparisons need jax")
jnp = jax.numpy


def _softmax_ratios(dt, fmt, acc, **extra):
    rng = np.random.default_rng(4)
    normal, sub_zero, sub = [], 0, 0
    for K in (8, 1000):
        for s in (3, 20):
            x = (rng.standard_normal((16, K)) * s).astype(dt)
            got = np.asarray(jax.nn.softmax(jnp.asarray(x), axis=-1)).astype(np.float64)
            ref = softmax_reference(x, out="fp32")
            b = expected_error_bound("softmax", fmt, K, acc=acc, out=fmt, exp="sleef_u35", **extra)
            tol = b.tolerance(x) + 2.0**-24 * ref
            tiny = (ref < 2.0**-126) | ((got == 0) & (ref < 2.0**-125))  # flushed to zero (not modelled)
            normal.append((np.abs(got - ref) / tol)[~tiny])
            sub, sub_zero = sub + int(tiny.sum()), sub_zero + int((got[tiny] == 0).sum())
    return np.concatenate(normal), sub, sub_zero


def test_jax_fp32_softmax_within_the_bound_except_flushed_subnormal_results():
    r, sub, sub_zero = _softmax_ratios(np.float32, "fp32", "fp32")
    assert r.max() <= 1
    assert sub > 0 and sub_zero == sub  # every result below fp32's normal range comes out 0 (flushed)


def test_jax_bf16_softmax_is_inside_the_composed_bound():
    """jax 0.10.2's bf16 softmax (x - max, exp, sum, division: jnp ops, each may store bf16) errs beyond the bound of
    an fp32 evaluation rounded once to bf16, and within form="composed" (every step may store bf16), outputs flushed
    to zero apart."""
    r32, _, _ = _softmax_ratios(ml_dtypes.bfloat16, "bf16", "fp32")
    assert r32.max() > 1
    rc, _, _ = _softmax_ratios(ml_dtypes.bfloat16, "bf16", "fp32", form="composed", div=1)
    assert rc.max() <= 1


def test_jax_fp32_dot_product_attention_within_the_bound():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 64, 4, 32)).astype(np.float32) for _ in range(3))  # (B, L, H, D) in jax
    got = np.swapaxes(np.asarray(jax.nn.dot_product_attention(q, k, v, is_causal=True)), 1, 2).astype(np.float64)
    qt, kt, vt = (np.swapaxes(a, 1, 2) for a in (q, k, v))
    ref = attention_reference(qt, kt, vt, causal=True, out="fp32")
    tol = expected_error_bound("attention", "fp32", 64, exp="sleef_u35", scale_rounded=True).tolerance(
        qt, kt, vt, causal=True) + 2.0**-24 * np.abs(ref)
    assert (np.abs(got - ref) <= tol).all()


def test_jax_bf16_dot_product_attention_normalizes_then_rounds_p_to_bf16():
    """jax 0.10.2's bf16 dot_product_attention: fp32 scores (BF16_BF16_F32), softmax in fp32, P rounded to bf16,
    then P v (jax/_src/nn/functions.py, _dot_product_attention_core): normalize="before", p_format="bf16"."""
    rng = np.random.default_rng(15)
    q, k, v = (rng.standard_normal((2, 64, 4, 32)).astype(ml_dtypes.bfloat16) for _ in range(3))
    got = np.swapaxes(np.asarray(jax.nn.dot_product_attention(q, k, v, is_causal=True)), 1, 2).astype(np.float64)
    qt, kt, vt = (np.swapaxes(a, 1, 2) for a in (q, k, v))
    ref = attention_reference(qt, kt, vt, causal=True, out="fp32")
    kw = dict(acc="fp32", out="bf16", exp="sleef_u35", scale_rounded=True, div=1)
    r = {}
    for name, extra in (("fp32 P", {}), ("true", {"normalize": "before", "p_format": "bf16"})):
        tol = expected_error_bound("attention", "bf16", 64, **kw, **extra).tolerance(qt, kt, vt, causal=True)
        r[name] = (np.abs(got - ref) / (tol + 2.0**-24 * np.abs(ref))).max()
    assert r["fp32 P"] > 1 and r["true"] <= 1
