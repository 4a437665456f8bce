"""The composite models (numoracle.composite.sim.model, moments, elementwise) against independent computations: plain
float32 loops written here, Fractions, mpmath (tests/composite/mpref.py), the exact references, known cases."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from mpref import round_fraction, to_fraction

import numoracle.composite  # noqa: F401  (registers the composite bounds)
from numoracle.bounds.expected import expected_error_bound
from numoracle.composite.norms import layer_norm_reference
from numoracle.composite.sim import elementwise as ew
from numoracle.composite.sim.model import (
    simulate_layer_norm,
    simulate_log_softmax,
    simulate_logsumexp,
    simulate_rms_norm,
    simulate_softmax,
)
from numoracle.composite.sim.moments import rowwise_moments
from numoracle.composite.softmax import softmax_reference
from numoracle.core.formats.format import BF16, FP32
from numoracle.orders import Interleaved, Pairwise, Sequential

f32 = np.float32


# ---- elementwise functions -----------------------------------------------------------------------------------

def _mp_round(fn, v: float) -> float:
    mpmath.mp.prec = 200
    return round_fraction(to_fraction(fn(mpmath.mpf(v))), "fp32")


@pytest.mark.parametrize("name, mpf, lo, hi", [("exp", mpmath.exp, -100.0, 80.0), ("log", mpmath.log, 1e-30, 1e30),
                                               ("sqrt", mpmath.sqrt, 1e-30, 1e30),
                                               ("rsqrt", lambda x: 1 / mpmath.sqrt(x), 1e-30, 1e30)])
def test_correctly_rounded_functions_against_mpmath(name, mpf, lo, hi):
    rng = np.random.default_rng(11)
    if name == "exp":
        v = rng.uniform(lo, hi, 300).astype(f32)
    else:
        v = np.exp(rng.uniform(np.log(lo), np.log(hi), 300)).astype(f32)
    got = getattr(ew, f"{name}_cr")(v.astype(np.float64), FP32)
    want = np.array([_mp_round(mpf, float(a)) for a in v])
    assert (got == want).all()
    # bf16: the same function rounds to 8 bits
    vb = v[:50].astype(np.float64)
    vb = np.array([round_fraction(Fraction(float(a)), "bf16") for a in vb])
    gotb = getattr(ew, f"{name}_cr")(vb, BF16)
    mpmath.mp.prec = 200
    assert (gotb == [round_fraction(to_fraction(mpf(mpmath.mpf(float(a)))), "bf16") for a in vb]).all()


def test_fma32_is_one_rounding():
    rng = np.random.default_rng(12)
    a, b, c = (rng.standard_normal(2000).astype(f32) * f32(2.0) ** rng.integers(-20, 20, 2000).astype(f32)
               for _ in range(3))
    got = ew.fma32(a, b, c)
    want = [round_fraction(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), "fp32")
            for x, y, z in zip(a, b, c)]
    assert (got.astype(np.float64) == want).all()
    # the two-rounding evaluation differs somewhere on these inputs: the test can tell them apart
    assert ((a * b + c).astype(f32) != got).any()


def test_sleef_expf_is_within_one_ulp_and_not_correctly_rounded_everywhere():
    d = -np.abs(np.random.default_rng(13).standard_normal(20000)).astype(f32) * f32(10)
    s = ew.sleef_expf_u10(d).astype(f32)
    c = ew.exp_cr(d.astype(np.float64)).astype(f32)
    ulps = np.abs(s.view(np.int32).astype(np.int64) - c.view(np.int32))
    assert ulps.max() == 1 and 0 < (ulps == 1).sum() < 0.15 * d.size     # 9.4% on this seed
    assert ew.sleef_expf_u10(np.array([0.0, -np.inf, -105.0, np.nan], f32)).tolist()[:3] == [1.0, 0.0, 0.0]


# ---- the softmax family against plain float32 loops ------------------------------------------------------------

def _loop_softmax(x: np.ndarray, lanes: int | None, divide: bool = False) -> np.ndarray:
    """softmax of one float32 row, written out: exp correctly rounded, the sum sequential or in lanes + halving."""
    m = x.max()
    d = (x - m).astype(f32)
    e = ew.exp_cr(d.astype(np.float64)).astype(f32)
    if lanes is None:
        s = f32(0)
        for t in e:
            s = f32(s + t)
    else:
        acc = np.zeros(lanes, f32)
        for i, t in enumerate(e):
            acc[i % lanes] = f32(acc[i % lanes] + t)
        while lanes > 1:
            lanes //= 2
            acc = (acc[:lanes] + acc[lanes:2 * lanes]).astype(f32)
        s = acc[0]
    return (e / s).astype(f32) if divide else (e * f32(f32(1) / s)).astype(f32)


@pytest.mark.parametrize("n", [1, 7, 33, 200])
def test_softmax_model_equals_a_float32_loop(n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((4, n)) * 8).astype(f32)
    for order, lanes in ((Sequential(), None), (Interleaved(8, combine="halving"), 8)):
        got = simulate_softmax(x, order)
        want = np.array([_loop_softmax(r, lanes) for r in x])
        assert (got == want).all()
        assert (simulate_softmax(x, order, normalize="divide") == [_loop_softmax(r, lanes, True) for r in x]).all()
    # the order is visible: sequential and pairwise differ on these rows (n large enough)
    if n >= 33:
        assert (simulate_softmax(x, Sequential()) != simulate_softmax(x, Pairwise())).any()


def test_softmax_known_cases_and_the_reference():
    for n in (3, 7, 10):                 # all equal: 1/n rounded once (S = n exact, fl(1/n), times 1)
        x = np.full((1, n), 2.5, f32)
        assert (simulate_softmax(x) == softmax_reference(x)).all()
        assert (simulate_softmax(x, normalize="divide") == softmax_reference(x)).all()
    y = simulate_softmax(np.array([[0.0, -200.0, -np.inf]], f32))
    assert y.tolist() == [[1.0, 0.0, 0.0]]
    assert np.isnan(simulate_softmax(np.array([[1.0, np.nan]], f32))).all()
    # random rows: within the bound of a correctly rounded exp and any order, and not always the reference
    x = (np.random.default_rng(3).standard_normal((8, 100)) * 5).astype(f32)
    got, ref = simulate_softmax(x, Pairwise()), softmax_reference(x, out="fp64")
    tol = expected_error_bound("softmax", "fp32", 100).tolerance(x)
    assert (np.abs(got - ref) <= tol).all() and (got != softmax_reference(x)).any()
    got = got.astype(f32)
    # out: the fp32 result rounded once more
    assert (simulate_softmax(x, out="bf16") == np.array([[round_fraction(Fraction(float(v)), "bf16") for v in r]
                                                         for r in got])).all()


def test_log_softmax_and_logsumexp_models():
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((5, 40)) * 10).astype(f32)
    got = simulate_log_softmax(x)
    m = x.max(-1, keepdims=True)
    d = (x - m).astype(f32)
    e = ew.exp_cr(d.astype(np.float64)).astype(f32)
    s = np.zeros(5, f32)
    for j in range(40):
        s = (s + e[:, j]).astype(f32)
    L = ew.log_cr(s.astype(np.float64)).astype(f32)
    assert (got == (d - L[:, None]).astype(f32)).all()
    assert (simulate_logsumexp(x) == (m[:, 0] + L).astype(f32)).all()
    # stats in bf16: S and L rounded to bf16 between the steps
    Lb = ew.log_cr(np.array([round_fraction(Fraction(float(v)), "bf16") for v in s]), FP32)
    Lb = np.array([round_fraction(Fraction(float(v)), "bf16") for v in Lb])
    assert (simulate_log_softmax(x, stats="bf16") == (d - Lb[:, None].astype(f32)).astype(f32)).all()
    assert simulate_logsumexp(np.array([[3.25]], f32)).tolist() == [3.25]          # one entry: exact


def test_elementwise_callables_and_refusals():
    x = (np.random.default_rng(5).standard_normal((3, 20))).astype(f32)
    ours = simulate_softmax(x, exp=ew.sleef_expf_u10)
    theirs = simulate_softmax(x, exp=lambda d: ew.sleef_expf_u10(d).astype(f32))     # a float32 callable
    assert (ours == theirs).all()
    with pytest.raises(ValueError, match="not fp32 numbers"):
        simulate_softmax(x, exp=lambda d: np.exp(d.astype(np.float64)))          # float64 results: refused
    with pytest.raises(ValueError, match="at most 24 bits"):
        simulate_softmax(x, acc="fp64")
    with pytest.raises(ValueError, match="normalize"):
        simulate_softmax(x, normalize="multiply")


# ---- norms -----------------------------------------------------------------------------------------------------

def _loop_layer_norm(x: np.ndarray, eps: float, welford: bool) -> np.ndarray:
    n = x.size
    if welford:
        mean = var = f32(0)
        for k, v in enumerate(x, 1):
            delta = f32(v - mean)
            mean = f32(mean + f32(delta / f32(k)))
            var = f32(var + f32(delta * f32(v - mean)))
        var = f32(var / f32(n))
    else:
        s = f32(0)
        for v in x:
            s = f32(s + v)
        mean = f32(s / f32(n))
        q = f32(0)
        for v in x:
            dv = f32(v - mean)
            q = f32(q + f32(dv * dv))
        var = f32(q / f32(n))
    t = f32(var + f32(eps))
    r = f32(ew.rsqrt_cr(np.array([float(t)]))[0])
    return ((x - mean).astype(f32) * r).astype(f32)


@pytest.mark.parametrize("welford", [False, True])
def test_layer_norm_model_equals_a_float32_loop(welford):
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((4, 37)) * 3 + 100).astype(f32)       # an offset: the variance forms differ
    got = simulate_layer_norm(x, eps=1e-5, variance="welford" if welford else "two_pass")
    assert (got == np.array([_loop_layer_norm(r, 1e-5, welford) for r in x])).all()
    other = simulate_layer_norm(x, eps=1e-5, variance="two_pass" if welford else "welford")
    assert (got != other).any()


def test_layer_norm_affine_forms_and_known_cases():
    x = np.array([[1.0, -1.0, 1.0, -1.0]], f32)     # mean 0, variance 1: every form gives x exactly
    for kw in ({}, {"variance": "welford"}, {"variance": "rowwise"}, {"affine": "folded"}, {"contract": True}):
        assert (simulate_layer_norm(x, eps=0.0, **kw) == layer_norm_reference(x, eps=0.0)).all()
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((3, 24)) * 2).astype(f32)
    w, b = rng.standard_normal(24).astype(f32), rng.standard_normal(24).astype(f32)
    base = simulate_layer_norm(x, eps=1e-5)
    centered = simulate_layer_norm(x, w, b, eps=1e-5)
    assert (centered == ((base.astype(f32) * w).astype(f32) + b).astype(f32)).all()
    fused = simulate_layer_norm(x, w, b, eps=1e-5, contract=True)
    assert (fused == ew.fma32(base.astype(f32), w, b)).all()
    ref = layer_norm_reference(x, w, b, eps=float(f32(1e-5)), out="fp32").astype(f32)
    for y in (centered, fused, simulate_layer_norm(x, w, b, eps=1e-5, affine="folded")):
        assert np.abs(y.astype(f32) - ref).max() < 1e-5


def test_rowwise_moments():
    rng = np.random.default_rng(8)
    for N in (5, 13):              # fewer than the lanes: the scalar Welford alone
        x = (rng.standard_normal((3, N)) * 4 + 7).astype(f32).astype(np.float64)
        mo = rowwise_moments(x, FP32, lanes=16)
        ln = simulate_layer_norm(x.astype(f32), eps=0.0, variance="welford")
        assert (ln == simulate_layer_norm(x.astype(f32), eps=0.0, variance="rowwise")).all()
        assert np.allclose(mo.mean, x.mean(1), rtol=1e-6) and np.allclose(mo.var, x.var(1), rtol=1e-5)
    x = (rng.standard_normal((4, 1000)) * 4 + 7).astype(f32).astype(np.float64)
    for kw in ({}, {"fused": False}, {"contract": True}, {"lanes": 8}):
        mo = rowwise_moments(x, FP32, **kw)
        assert np.allclose(mo.mean, x.mean(1), rtol=1e-6, atol=0) and np.allclose(mo.var, x.var(1), rtol=1e-5)
    assert (rowwise_moments(x, FP32).mean != rowwise_moments(x, FP32, lanes=8).mean).any()


def test_rms_norm_model_equals_a_float32_loop():
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((3, 50)) * 3).astype(f32)
    w = rng.standard_normal(50).astype(f32)
    got = simulate_rms_norm(x, w, eps=1e-6)
    for i, r in enumerate(x):
        s = f32(0)
        for v in r:
            s = f32(s + f32(v * v))
        t = f32(f32(s / f32(50)) + f32(1e-6))
        rs = f32(ew.rsqrt_cr(np.array([float(t)]))[0])
        assert (got[i] == ((r * rs).astype(f32) * w).astype(f32)).all()
    folded = simulate_rms_norm(x, w, eps=1e-6, scale="folded")
    assert (folded != got).any()


# ---- attention -------------------------------------------------------------------------------------------------

def _fma_dot(a: np.ndarray, b: np.ndarray) -> np.float32:
    """A sequential FMA chain in float32: s = fl(s + a_i b_i), one rounding each."""
    s = f32(0)
    for x, y in zip(a, b):
        s = f32(ew.fma32(x, y, s))
    return s


def _loop_fa2(q, k, v, block, causal):
    L, D = q.shape
    sc = f32(1 / np.sqrt(D))
    m = np.full(L, -np.inf, f32)
    lsum = np.zeros(L, f32)
    o = np.zeros((L, v.shape[1]), f32)
    for b0 in range(0, k.shape[0], block):
        cols = range(b0, min(b0 + block, k.shape[0]))
        for i in range(L):
            s = np.array([f32(_fma_dot(q[i], k[j]) * sc) if (not causal or j <= i) else -np.inf for j in cols], f32)
            m_new = max(m[i], s.max())
            if not np.isfinite(m_new):
                continue
            alpha = f32(ew.exp_cr(np.array([float(f32(m[i] - m_new))]))[0]) if np.isfinite(m[i]) else f32(0)
            p = ew.exp_cr((s - m_new).astype(f32).astype(np.float64)).astype(f32)
            ps = f32(0)
            for t in p:
                ps = f32(ps + t)
            lsum[i] = f32(f32(alpha * lsum[i]) + ps)
            pv = np.array([_fma_dot(p, v[list(cols), c]) for c in range(v.shape[1])], f32)
            o[i] = (o[i] * alpha).astype(f32) + pv
            m[i] = m_new
    return (o / lsum[:, None]).astype(f32)


def test_attention_model_equals_a_float32_loop_and_keeps_its_bound():
    from numoracle.composite.attention import attention_reference
    from numoracle.composite.sim.attention import simulate_attention
    rng = np.random.default_rng(21)
    q, k, v = (rng.standard_normal((6, 4)).astype(f32) * 2 for _ in range(3))
    k = np.concatenate([k, rng.standard_normal((6, 4)).astype(f32) * 2])
    v = np.concatenate([v, rng.standard_normal((6, 4)).astype(f32)])
    for causal in (False, True):
        got = simulate_attention(q, k, v, causal=causal, block=4)
        assert (got == _loop_fa2(q, k, v, 4, causal)).all()
    # one block is the plain kernel normalising after PV; more blocks, P in bf16: other bits
    plain = simulate_attention(q, k, v, normalize="after")
    assert (simulate_attention(q, k, v, block=k.shape[0]) == plain).all()
    assert (simulate_attention(q, k, v, block=4) != plain).any()
    assert (simulate_attention(q, k, v, block=4, p_format="bf16") != simulate_attention(q, k, v, block=4)).any()
    qb, kb, vb = (rng.standard_normal((2, 48, 16)).astype(f32) for _ in range(3))
    ref = attention_reference(qb, kb, vb, causal=True, out="fp64")
    for kw in ({"block": 16}, {}, {"normalize": "after"}):
        tol = expected_error_bound("attention", "fp32", 48, **({"block": 16} if kw else {}))
        y = simulate_attention(qb, kb, vb, causal=True, **kw)
        assert (np.abs(y - ref) <= tol.tolerance(qb, kb, vb, causal=True)).all()


def _exp1(x) -> np.float32:
    return f32(ew.exp_cr(np.array([float(x)]))[0])


def _log1(x) -> np.float32:
    return f32(ew.log_cr(np.array([float(x)]))[0])


def _loop_split_kv(q, k, v, splits, causal):
    """FlashDecoding written out in float32: per key range, plain softmax and O_j = (e v) / l, lse_j = m + log l;
    then lse = log(sum exp(lse_j - max)) + max and O = sum exp(lse_j - lse) O_j as FMAs."""
    L, D = q.shape
    Lk = k.shape[0]
    sc = f32(1 / np.sqrt(D))
    width = -(-Lk // splits)
    out = np.zeros((L, v.shape[1]), f32)
    for i in range(L):
        lses, outs = [], []
        for j0 in range(0, Lk, width):
            cols = [j for j in range(j0, min(j0 + width, Lk)) if not causal or j <= i]
            if not cols:
                lses.append(f32(-np.inf))
                outs.append(np.zeros(v.shape[1], f32))
                continue
            s = [f32(_fma_dot(q[i], k[j]) * sc) for j in cols]
            m = max(s)
            e = np.array([_exp1(f32(x - m)) for x in s], f32)
            lsum = f32(0)
            for t in e:
                lsum = f32(lsum + t)
            o = np.array([_fma_dot(e, v[cols, c]) for c in range(v.shape[1])], f32)
            outs.append((o / lsum).astype(f32))
            lses.append(f32(m + _log1(lsum)))
        big = max(lses)
        t = f32(0)
        for x in lses:
            t = f32(t + _exp1(f32(x - big)))
        total = f32(_log1(t) + big)
        acc = np.zeros(v.shape[1], f32)
        for x, o in zip(lses, outs):
            w = _exp1(f32(x - total))
            acc = np.array([ew.fma32(w, a, b) for a, b in zip(o, acc)], f32)
        out[i] = acc
    return out


def test_split_kv_attention_equals_a_float32_loop():
    from numoracle.composite.sim.attention import simulate_attention
    rng = np.random.default_rng(38)
    q = (rng.standard_normal((5, 8)) * 2).astype(f32)
    k, v = ((rng.standard_normal((11, 8)) * 2).astype(f32) for _ in range(2))
    for splits in (2, 3, 4):
        for causal in (False, True):
            got = simulate_attention(q, k, v, splits=splits, causal=causal, normalize="after")
            assert (got == _loop_split_kv(q, k, v, splits, causal)).all(), (splits, causal)
    # one split is the plain kernel normalising after PV; more splits: the combine's roundings show
    plain = simulate_attention(q, k, v, normalize="after")
    assert (simulate_attention(q, k, v, splits=1, normalize="after") == plain).all()
    assert (simulate_attention(q, k, v, splits=3, normalize="after") != plain).any()
    # splits of online-softmax blocks; the combine needs each range normalised after PV
    assert np.isfinite(simulate_attention(q, k, v, splits=2, block=2, normalize="after")).all()
    with pytest.raises(ValueError, match="normalize='after'"):
        simulate_attention(q, k, v, splits=2)


def test_attention_scaling_of_the_inputs_and_reciprocal_normalisation():
    from numoracle.composite.sim.accarith import mul as amul
    from numoracle.composite.sim.attention import simulate_attention
    rng = np.random.default_rng(39)
    q, k, v = (rng.standard_normal((6, 32)).astype(f32) for _ in range(3))
    r = f32(np.sqrt(1 / np.sqrt(32)))          # 32^-1/4, not a power of two: q r and k r round
    qs, ks = (amul(a, float(r), FP32) for a in (q, k))
    want = simulate_attention(qs, ks, v, scale=1.0)
    assert (simulate_attention(q, k, v, scaling="inputs") == want).all()
    assert (simulate_attention(q, k, v, scaling="inputs") != simulate_attention(q, k, v)).any()
    after = simulate_attention(q, k, v, normalize="after", out="fp64")
    recip = simulate_attention(q, k, v, normalize="after_reciprocal", out="fp64")
    assert (after != recip).any() and np.allclose(after, recip, rtol=2**-22, atol=0)


def test_torch_attention_exps_are_close_to_exp():
    x = np.linspace(-80, 0, 20001).astype(f32).astype(np.float64)
    cr = ew.exp_cr(x)
    u20 = ew.torch_exp_u20(x)
    ulp = np.spacing(cr.astype(f32)).astype(np.float64)
    assert (np.abs(u20 - cr) <= 20 * ulp).all() and (u20 != cr).any()
    assert ew.torch_exp_u20(np.array([0.0]))[0] == 1.0
    fx = ew.torch_fexp_u20(x)
    assert (np.abs(fx - cr) <= 2.0**-12 * cr).all()
    assert ew.torch_fexp_u20(np.array([0.0]))[0] == 1 - 7 * 2.0**-17     # the fast exp's exp(0): not 1
    assert ew.torch_exp_u20(np.array([-np.inf, -100.0]))[0] == 0 and ew.torch_fexp_u20(np.array([-100.0]))[0] == 0
