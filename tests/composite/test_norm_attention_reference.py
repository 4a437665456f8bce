"""rms_norm / layer_norm / attention references: correctly rounded against mpmath at 320 bits (mpref.py)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from cases import DTYPES, to_fmt
from mpref import PREC, mp, round_fraction, to_fraction

from numoracle.composite.attention import attention_reference
from numoracle.composite.norms import layer_norm_reference, rms_norm_reference

NORM_KINDS = ("normal", "huge", "eps", "tiny", "constant", "square")


def _norm_row(kind: str, n: int, fmt: str, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """(row in fmt, eps) of one kind: eps-dominated variances, tiny inputs, perfect-square variances ..."""
    eps = float(rng.choice([1e-5, 1e-6, 0.0]))
    if kind == "normal":
        x = rng.standard_normal(n) * rng.choice([1e-3, 1, 100])
    elif kind == "huge":
        x = rng.standard_normal(n) * float(np.finfo(np.float32).max) / 8
    elif kind == "eps":  # variance far below eps
        x, eps = 1 + rng.standard_normal(n) * 1e-4, 1.0
    elif kind == "tiny":
        x = rng.standard_normal(n) * 1e-40
    elif kind == "constant":
        x, eps = np.full(n, rng.standard_normal()), 1e-5
    else:  # mean 0, variance 1 or 4: rational results (midpoints possible)
        x, eps = rng.choice([-1.0, 1.0], n) * rng.choice([1, 2]), 0.0
        x[: n // 2], x[n // 2: 2 * (n // 2)] = -x[0], x[0]
    return to_fmt(x, fmt), eps


def _norm_expected(x, w, b, eps, fmt, layer):
    xs = [Fraction(float(a)) for a in x]
    n = len(xs)
    mu = sum(xs, Fraction(0)) / n if layer else Fraction(0)
    t = sum(((a - mu) ** 2 for a in xs), Fraction(0)) / n + Fraction(eps)
    if t == 0:
        return np.full(n, np.nan)
    num, den = math.isqrt(t.numerator), math.isqrt(t.denominator)
    root = Fraction(num, den) if num * num == t.numerator and den * den == t.denominator else None
    out = []
    with mpmath.workprec(PREC):
        r = None if root is not None else mpmath.sqrt(mpmath.mpf(t.numerator) / t.denominator)
        for j, a in enumerate(xs):
            if root is not None:
                y = (a - mu) / root * Fraction(float(w[j])) + Fraction(float(b[j]))
            else:
                centred = mpmath.mpf(a.numerator) / a.denominator - mpmath.mpf(mu.numerator) / mu.denominator
                y = to_fraction(centred / r * mp(w[j]) + mp(b[j]))
            out.append(round_fraction(y, fmt) + 0.0)
    return np.array(out)


def _run_norms(fmt: str, total: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    checked, i = 0, 0
    while checked < total:
        kind = NORM_KINDS[i % len(NORM_KINDS)]
        n = int(rng.integers(2, 64))
        x, eps = _norm_row(kind, n, fmt, rng)
        w = to_fmt(rng.standard_normal(n), fmt) if i % 3 else np.ones(n)
        b = to_fmt(rng.standard_normal(n), fmt) if i % 2 else np.zeros(n)
        dt = DTYPES[fmt]
        got_ln = layer_norm_reference(x.astype(dt)[None], w.astype(dt), b.astype(dt), eps=eps)[0]
        got_rms = rms_norm_reference(x.astype(dt)[None], w.astype(dt), eps=eps)[0]
        want_ln = _norm_expected(x, w, b, eps, fmt, True)
        want_rms = _norm_expected(x, w, np.zeros(n), eps, fmt, False)
        assert np.array_equal(got_ln, want_ln, equal_nan=True), (kind, x, eps, got_ln, want_ln)
        assert np.array_equal(got_rms, want_rms, equal_nan=True), (kind, x, eps, got_rms, want_rms)
        checked, i = checked + n, i + 1
    return checked


@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
def test_norms_correctly_rounded(fmt):
    assert _run_norms(fmt, 1500, seed=11 if fmt == "fp32" else 12) >= 1500


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
def test_norms_correctly_rounded_1e5(fmt):
    n = _run_norms(fmt, 100_000, seed=21 if fmt == "fp32" else 22)
    print(f"layer_norm and rms_norm {fmt}: {n} elements each correctly rounded")


def _attention_expected(q, k, v, keep, scale, fmt):
    Lq, D = q.shape
    out = np.empty((Lq, v.shape[1]))
    with mpmath.workprec(PREC):
        sc = 1 / mpmath.sqrt(D) if scale is None else mp(scale)
        for i in range(Lq):
            js = np.flatnonzero(keep[i])
            if not js.size:
                out[i] = np.nan
                continue
            s = [sc * mpmath.fsum(mp(a) * mp(b) for a, b in zip(q[i], k[j])) for j in js]
            m = max(s)
            p = [mpmath.exp(x - m) for x in s]
            L = mpmath.fsum(p)
            for c in range(v.shape[1]):
                vals = [Fraction(float(v[j, c])) for j in js]
                if len(set(vals)) == 1:  # a constant column: the output is that value exactly
                    out[i, c] = round_fraction(vals[0], fmt)
                else:
                    out[i, c] = round_fraction(to_fraction(mpmath.fsum(pj * mp(v[j, c]) for pj, j in zip(p, js)) / L),
                                               fmt)
    return out


def _run_attention(fmt: str, total: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    checked, i = 0, 0
    dt = DTYPES[fmt]
    while checked < total:
        Lq, Lk, D, Dv = (int(a) for a in rng.integers(1, [9, 17, 17, 9]))
        big = [1.0, 1.0, 30.0, 1e-20][i % 4]  # large logits, tiny inputs
        q, k = (to_fmt(rng.standard_normal((L, D)) * big, fmt) for L in (Lq, Lk))
        v = to_fmt(rng.standard_normal((Lk, Dv)), fmt)
        if i % 5 == 0:
            v[:, 0] = 1.5  # a constant column (rational outputs)
        keep = rng.random((Lq, Lk)) > [0, 0.3, 0.9][i % 3]
        if i % 7 == 0:
            keep &= np.tril(np.ones((Lq, Lk), bool))
        scale = [None, 0.125, 0.3][i % 3]
        got = attention_reference(q.astype(dt), k.astype(dt), v.astype(dt), mask=keep, scale=scale)
        want = _attention_expected(q, k, v, keep, scale, fmt)
        assert np.array_equal(got, want, equal_nan=True), (q, k, v, keep, scale, got, want)
        checked, i = checked + got.size, i + 1
    return checked


@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
def test_attention_correctly_rounded(fmt):
    assert _run_attention(fmt, 1500, seed=31 if fmt == "fp32" else 32) >= 1500


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
def test_attention_correctly_rounded_1e5(fmt):
    n = _run_attention(fmt, 100_000, seed=41 if fmt == "fp32" else 42)
    print(f"attention {fmt}: {n} elements correctly rounded")


def test_conventions_and_errors():
    x = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    o = attention_reference(x, x, x, mask=np.array([[True, True], [False, False]]))
    assert np.isnan(o[1]).all() and np.isfinite(o[0]).all()
    z = attention_reference(x[:1], x[:1], x[:1], mask=np.array([[False]]), empty_rows="zero")
    assert (z == 0).all()
    with pytest.raises(ValueError, match="NaN or inf"):
        attention_reference(np.array([[np.inf]], np.float32), x[:, :1], x)
    with pytest.raises(ValueError, match="empty_rows"):
        attention_reference(x[:1], x[:1], x[:1], empty_rows="zeros")
    with pytest.raises(ValueError, match="eps"):
        rms_norm_reference(x[:1], eps=-1.0)
    assert np.isnan(layer_norm_reference(np.ones((1, 4), np.float32), eps=0.0)).all()  # 0 / 0
