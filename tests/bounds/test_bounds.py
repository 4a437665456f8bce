"""Error bounds (bounds.py, tolerance.py, cli_bounds.py, boundtable.py): formulas against hand
computations, refusals, the probabilistic lambda/confidence relation, and validation against a
test-local emulation (numoracle.cast rounds every partial sum; exact references by integer sums)."""

from __future__ import annotations

import argparse
import json
import math
import os
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from numoracle import Format, cast, decode
from numoracle.bounds.errorbound import Tolerance
from numoracle.bounds.expected import OrderSpec, expected_error_bound, parse_order, recommended_tolerance
from numoracle.cli.bounds import add_bound_parsers
from numoracle.formats import BF16, FP8_E4M3FN, FP16, FP32
from numoracle.tables.bounds import bounds_table

U32, U16, UB = Fraction(1, 2**24), Fraction(1, 2**11), Fraction(1, 2**8)
TIGHTNESS: dict[str, float] = {}


# ---- formulas against hand computations -----------------------------------------------------------
def test_fp32_sequential_sum_is_the_master_rule_exactly():
    b = expected_error_bound("sum", FP32, 4096, order="sequential")
    assert b.exact and b.coefficient == (1 + U32) ** 4095 - 1
    assert b.depth == 4095 and not b.vacuous
    assert b.gamma() == 4095 * U32 / (1 - 4095 * U32)  # gamma_(K-1)
    assert b.coefficient < b.gamma()


def test_fp32_dot_rounds_its_products_once_more():
    b = expected_error_bound("dot", FP32, 4096, order="sequential")
    assert b.coefficient == (1 + U32) ** 4096 - 1 and b.depth == 4096
    assert expected_error_bound("dot", FP32, 4096, fma=False).coefficient == b.coefficient  # same h_max


def test_bf16_products_are_exact_in_fp32():
    b = expected_error_bound("matmul", BF16, 4096, acc=FP32)
    assert b.coefficient == (1 + U32) ** 4095 - 1
    assert str(b.order) == "any"


def test_bf16_accumulation_at_4096_is_vacuous_and_gamma_refuses():
    b = expected_error_bound("matmul", BF16, 4096)  # acc defaults to bf16
    assert 4095 * UB > 1 and b.vacuous and b.coefficient == (1 + UB) ** 4096 - 1
    assert "VACUOUS" in str(b)
    with pytest.raises(ValueError, match=r"gamma form undefined: n\*u = 16"):
        b.gamma()
    assert "gamma form: undefined" in str(b)


@pytest.mark.parametrize("order, depth", [
    ("pairwise", 12), ("pairwise:8", 7 + 9), ("blocked:128", 127 + 31), ("splitk:8", 511 + 7),
    ("splitk:8:pairwise", 511 + 3), ("any", 4095), ("sequential", 4095), ("blocked:4096", 4095),
    ("blocked:5000", 4095), ("splitk:3", 1365 + 2)])
def test_leaf_depth_per_order(order, depth):
    b = expected_error_bound("sum", FP32, 4096, order=order)
    assert b.depth == depth and b.coefficient == (1 + U32) ** depth - 1


def test_block_fma_and_promotion_per_theory_section_4():
    beta, urz = Fraction(33, 2**13), Fraction(1, 2**23)
    b = expected_error_bound("matmul", FP8_E4M3FN, 4096, acc=FP32, order="blockfma:32:13")
    assert b.coefficient == ((1 + beta) * (1 + urz)) ** 128 - 1
    h = expected_error_bound("matmul", FP8_E4M3FN, 4096, acc=FP32, order="blockfma:32:13:13")  # H100 preset
    assert h.coefficient == ((1 + beta) * (1 + Fraction(1, 2**13))) ** 128 - 1
    # DeepSeek-V3: the 13-fraction-bit tensor-core partial of 128 terms is promoted to FP32 (+ scale multiply)
    p = expected_error_bound("matmul", FP8_E4M3FN, 4096, acc=FP32, order="promoted:128:32:13")
    assert p.coefficient == ((1 + beta) * (1 + Fraction(1, 2**13))) ** 4 * (1 + U32) ** (1 + 31) - 1
    assert p.coefficient < h.coefficient / 10  # why DeepSeek promotes every 128 terms
    assert "truncat" in str(b) and "Khattak" in str(b)


def test_mixed_precision_input_and_output_rounding():
    b = expected_error_bound("matmul", BF16, 4096, acc=FP32, inputs_rounded_from=FP32, out=BF16)
    acc = (1 + UB) ** 2 * (1 + U32) ** 4095 - 1
    assert b.coefficient == (1 + UB) * acc and b.u_out == UB
    names = [c.name for c in b.components]
    assert names[:2] == ["input rounding", "products"] and "output rounding to bf16" in str(b)
    # FP32 output of an FP32 accumulator is exact: no output term
    assert expected_error_bound("matmul", BF16, 64, acc=FP32, out=FP32).u_out is None
    # inputs rounded from a narrower format are exact
    e = expected_error_bound("matmul", BF16, 64, acc=FP32, inputs_rounded_from=FP8_E4M3FN)
    assert e.coefficient == (1 + U32) ** 63 - 1


def test_blocked_with_a_narrower_outer_accumulator_counts_the_conversion():
    from numoracle.orders import Blocked

    b = expected_error_bound("sum", FP32, 1024, order=Blocked(64, outer_acc=BF16))
    assert b.coefficient == (1 + U32) ** 63 * (1 + UB) ** (1 + 15) - 1


def test_huge_k_is_rounded_up_not_down():
    b = expected_error_bound("sum", FP32, 2**20, order="sequential")
    assert not b.exact
    with mpmath.workdps(80):
        true = mpmath.power(1 + mpmath.mpf(2) ** -24, 2**20 - 1) - 1
        c = mpmath.mpf(b.coefficient.numerator) / b.coefficient.denominator
        assert true <= c <= true * (1 + mpmath.mpf(10) ** -40)


def test_tight_rn_option():
    seq = expected_error_bound("sum", FP16, 1024, order="sequential", tight_rn=True)
    assert seq.coefficient == 1023 * U16 and "Rump" in seq.method
    assert expected_error_bound("sum", FP16, 1024, order="sequential").coefficient > 1023 * U16  # default: master
    dot = expected_error_bound("dot", FP32, 4096, order="sequential", fma=False, tight_rn=True)
    assert dot.coefficient == 4096 * U32
    with pytest.raises(ValueError, match="order='sequential'"):
        expected_error_bound("sum", FP16, 1024, order="pairwise", tight_rn=True)
    with pytest.raises(ValueError, match="fma=False"):
        expected_error_bound("dot", FP32, 64, order="sequential", tight_rn=True)


# ---- orders: strings and order objects (each describes itself through spec()) ---------------------------
from numoracle.orders import Blocked, BlockFMA, Pairwise, Promoted, Sequential, SplitK  # noqa: E402


@pytest.mark.parametrize("obj, text", [
    (Sequential(), "sequential"), (Pairwise(), "pairwise"), (Blocked(128, Sequential(), Sequential()), "blocked:128"),
    (SplitK(8, Sequential(), Sequential(), (3, 1, 0, 2, 7, 6, 5, 4)), "splitk:8"),
    (SplitK(8, Sequential(), Pairwise()), "splitk:8:pairwise"),
    (BlockFMA(32, 13), "blockfma:32:13"), (BlockFMA(32, 13, out_frac_bits=13), "blockfma:32:13:13"),
    (Promoted(128, BlockFMA(32, 13, out_frac_bits=13), outer_acc=None), "promoted:128:32:13")])
def test_order_objects_match_their_strings(obj, text):
    """An order object and its string give one OrderSpec and one bound."""
    assert parse_order(obj) == parse_order(text) and str(parse_order(obj)) == text
    k = dict(acc=FP32, order=obj)
    assert expected_error_bound("matmul", FP8_E4M3FN, 1000, **k).coefficient == \
        expected_error_bound("matmul", FP8_E4M3FN, 1000, acc=FP32, order=text).coefficient


def test_nested_orders_and_their_names():
    o = parse_order(Blocked(64, Pairwise(), Sequential(), FP32))
    assert o.inner == OrderSpec("pairwise")
    assert str(o) == "blocked(b=64, inner=pairwise, outer=sequential, outer_acc=fp32)"
    b = expected_error_bound("sum", FP16, 4096, acc=FP16, order=Blocked(64, Pairwise(), Sequential(), FP32))
    assert b.coefficient == (1 + U16) ** 6 * (1 + U32) ** 63 - 1


def test_the_real_order_objects_and_presets():
    from numoracle import orders
    tc = OrderSpec("blockfma", 32, frac_bits=13, acc=FP32, out_frac_bits=13)
    assert parse_order(orders.preset("h100", "fp8")) == tc
    assert parse_order(orders.Promoted()) == parse_order(orders.preset("deepseek", "fp8")) == OrderSpec(
        "promoted", 128, tc, outer_acc=FP32)
    h100 = expected_error_bound("matmul", FP8_E4M3FN, 4096, acc=FP32, order=orders.preset("h100", "fp8"))
    assert h100.coefficient == expected_error_bound("matmul", FP8_E4M3FN, 4096, acc=FP32,
                                                    order="blockfma:32:13:13").coefficient
    sk = expected_error_bound("sum", FP16, 4096, acc=FP16,
                              order=orders.SplitK(8, orders.Sequential(), orders.Pairwise(), combine_acc=FP32))
    assert sk.coefficient == (1 + U16) ** 511 * (1 + U32) ** 3 - 1  # slices in FP16, combined in FP32
    assert str(sk.order).startswith("splitk(s=8")
    npy = expected_error_bound("sum", FP16, 1000, order=orders.preset("numpy", "fp16"))
    # 1000 -> 496 | 504 -> 248 | 248, 248 | 256 -> ... 120 | 128: (16-1) + 3 levels; 3 halvings; one FP16 carry
    assert npy.depth == 15 + 3 + 3 + 1 and "carry rounding" in str(npy)


@pytest.mark.parametrize("bad, msg", [
    ("zigzag", "unknown order 'zigzag'"), ("blocked", "unknown order"), ("blocked:0", "positive integer"),
    ("blocked:x", "positive integer"), ("splitk:4:tree", "unknown order"), ("pairwse", "did you mean 'pairwise'"),
    (3.5, "unknown order object of class 'float'")])
def test_bad_orders(bad, msg):
    with pytest.raises(ValueError, match=msg):
        expected_error_bound("sum", FP32, 16, order=bad)


# ---- probabilistic -------------------------------------------------------------------------------------
def _fail(lam: Fraction, u: Fraction, events: int) -> mpmath.mpf:
    with mpmath.workdps(50):
        lm = mpmath.mpf(lam.numerator) / lam.denominator
        return events * 2 * mpmath.exp(-(lm**2) * (1 - mpmath.mpf(u.numerator) / u.denominator) ** 2 / 2)


@pytest.mark.parametrize("conf, shape", [(0.999, None), (0.9, (64, 64)), (1 - 1e-9, (8,))])
def test_probabilistic_lambda_meets_the_confidence_tightly(conf, shape):
    K = 4096
    b = expected_error_bound("matmul", BF16, K, acc=FP32, kind="probabilistic", confidence=conf, shape=shape)
    events = K * (math.prod(shape) if shape else 1)
    assert b.events == events
    fail = _fail(b.lambda_, U32, events)
    assert conf <= 1 - fail and b.probability >= conf
    assert conf + 1e-8 * (1 - conf) > 1 - _fail(b.lambda_ * (1 - Fraction(1, 10**9)), U32, events)  # not loose
    # gamma_tilde_n(lambda) = exp(lambda sqrt(n) u + n u^2/(1-u)) - 1 with n = K - 1 roundings
    with mpmath.workdps(50):
        lm, n, u = mpmath.mpf(b.lambda_.numerator) / b.lambda_.denominator, K - 1, mpmath.mpf(2) ** -24
        g = mpmath.expm1(lm * mpmath.sqrt(n) * u + n * u**2 / (1 - u))
        c = mpmath.mpf(b.coefficient.numerator) / b.coefficient.denominator
        assert g <= c <= g * (1 + mpmath.mpf(10) ** -30)
    assert b.coefficient < b.worst_coefficient / 5
    assert f"{b.probability:.6g}"[:5] in str(b) and "lambda" in str(b)


def test_probabilistic_never_exceeds_worst_case_and_supports_sr():
    small = expected_error_bound("sum", FP32, 16, kind="probabilistic")
    assert small.coefficient == small.worst_coefficient  # lambda*sqrt(n) > n for tiny n: the worst case wins
    sr = expected_error_bound("sum", BF16, 4096, acc=BF16, rounding="sr", kind="probabilistic")
    assert "Connolly" in sr.method and sr.components[-1].u == 2 * UB


@pytest.mark.parametrize("kw, msg", [
    (dict(rounding="rtz"), "rtz rounding errs with a bias"), (dict(order="blockfma:32:13"), "truncation"),
    (dict(order="promoted:128:32:13"), "truncation")])
def test_probabilistic_refuses_biased_models(kw, msg):
    with pytest.raises(ValueError, match=msg) as e:
        expected_error_bound("matmul", FP8_E4M3FN, 1024, acc=FP32, kind="probabilistic", **kw)
    assert "use kind='worst'" in str(e.value)


# ---- errors --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, kw, msg", [
    (("conv", FP32, 8), {}, "unknown op 'conv'; ops: sum, dot, matmul"), (("sum", FP32, 0), {}, "must be >= 1"),
    (("sum", FP32, -3), {}, ">= 1"), (("sum", FP32, 2.5), {}, "integer"), (("sum", FP32, 8), dict(kind="typical"),
                                                                           "unknown kind 'typical'"),
    (("sum", FP32, 8), dict(acc=BF16), "accumulator narrower than the inputs"),
    (("sum", FP32, 8), dict(confidence=1.0), "confidence"), (("sum", "fp33", 8), {}, "fp33"),
    (("dot", FP32, 8), dict(acc="int32"), "integer accumulator"), (("dot", FP32, 8), dict(out="int8"), "integer"),
    (("dot", "int8", 8), dict(acc="int32", inputs_rounded_from=FP32), "quantisation")])
def test_errors(args, kw, msg):
    with pytest.raises(ValueError, match=msg):
        expected_error_bound(*args, **kw)


def test_tolerance_refuses_bad_inputs():
    b = expected_error_bound("matmul", BF16, 4, acc=FP32)
    good = np.ones((2, 4))
    for bad, msg in [(np.array([[1, np.nan, 1, 1]] * 2), "non-finite"), (np.array([[np.inf, 1, 1, 1]] * 2), "inf"),
                     (np.ones((2, 5)), "reduction length"), (np.full((2, 4), 1 / 3), "not a bf16 value"),
                     (np.ones(4), "2 dimensions")]:
        with pytest.raises(ValueError, match=msg):
            b.tolerance(bad, good.T)
    with pytest.raises(ValueError, match="2 input"):
        b.tolerance(good)


def test_integer_accumulation_is_exact_until_it_may_overflow():
    b = expected_error_bound("matmul", "int8", 64, acc="int32", out=FP16)
    assert b.coefficient == 0 and b.u_out == U16
    a = np.full((2, 64), 127.0)
    assert np.all(b.tolerance(a, a.T) <= float(U16) * 64 * 127**2 * 1.0001)
    big = expected_error_bound("matmul", "int8", 2**18, acc="int32")
    x = np.full((1, 2**18), -128.0)
    with pytest.raises(ValueError, match="may overflow"):
        big.tolerance(x, x.T)


# ---- tolerance arithmetic, rtol/atol ---------------------------------------------------------------------
def test_tolerance_is_c_times_abs_products_rounded_up():
    rng = np.random.default_rng(0)
    A = decode(cast(rng.standard_normal((3, 64)), BF16), BF16)
    B = decode(cast(rng.standard_normal((64, 5)), BF16), BF16)
    b = expected_error_bound("matmul", BF16, 64, acc=FP32)
    t = b.tolerance(A, B)
    for i in range(3):
        for j in range(5):
            exact = b.coefficient * sum(abs(Fraction(A[i, k]) * Fraction(B[k, j])) for k in range(64)) + b.atol_const
            assert Fraction(t[i, j]) >= exact and Fraction(t[i, j]) <= exact * (1 + Fraction(1, 2**40))
    import ml_dtypes

    assert np.array_equal(b.tolerance(A.astype(ml_dtypes.bfloat16), B.astype(ml_dtypes.bfloat16)), t)  # native
    one = expected_error_bound("dot", FP32, 1)
    assert one.depth == 1 and one.coefficient == U32  # K = 1: only the product rounds
    assert expected_error_bound("sum", FP32, 1).coefficient == 0
    x, z = np.zeros(8), expected_error_bound("dot", FP32, 8)
    assert z.atol_const <= Fraction(z.tolerance(x, x)) <= z.atol_const * (1 + Fraction(1, 2**48))  # underflow only


def test_rtol_atol_forms_and_assumptions():
    b = expected_error_bound("matmul", BF16, 256, acc=FP32, out=BF16)
    rtol, atol = b.rtol_atol()  # kappa = 1 by default
    assert rtol >= float(b.coefficient + UB) and atol < 1e-30
    tol = b.rtol_atol(max_abs=2.0)
    assert isinstance(tol, Tolerance) and tol.rtol >= float(UB) and tol.atol >= float(b.coefficient) * 256 * 4
    assert "|value| <= 2.0" in tol.assumptions and tol.kwargs == {"rtol": tol[0], "atol": tol[1]}
    A = np.ones((2, 256))
    got = b.rtol_atol(A, A.T)
    assert got.atol == pytest.approx(float(b.coefficient) * 256, rel=1e-9) and "given inputs only" in got.assumptions
    assert "NOT a guarantee" in b.rtol_atol(kappa=4).assumptions
    r = recommended_tolerance("matmul", BF16, 256, acc=FP32, out=BF16)
    assert tuple(r) == tuple(b.rtol_atol()) and "kappa" in str(r)
    with pytest.raises(ValueError, match="not several"):
        b.rtol_atol(A, A.T, kappa=2)
    with pytest.raises(ValueError, match="kappa"):
        b.rtol_atol(kappa=0.5)


# ---- CLI ----------------------------------------------------------------------------------------------
def _cli(*argv: str) -> str:
    p = argparse.ArgumentParser()
    add_bound_parsers(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(list(argv))
    return args.run(args)


def test_cli_bound_and_tolerance():
    text = _cli("bound", "matmul", "--dtype", "bf16", "--acc", "fp32", "-K", "4096")
    assert "c = 2.4411" in text and "4095 x u = 2^-24" in text
    d = json.loads(_cli("bound", "matmul", "--dtype", "bf16", "--acc", "fp32", "-K", "4096", "--json", "--kind",
                        "probabilistic", "--shape", "64x64", "--out", "bf16"))
    assert d["kind"] == "probabilistic" and d["events"] == 4096 * 64 * 64 and d["u_out"] == "1/256"
    assert float(d["coefficient"]) < float(d["worst_coefficient"])
    t = _cli("tolerance", "matmul", "--dtype", "bf16", "--acc", "fp32", "-K", "4096", "--max-abs", "1,2")
    assert t.splitlines()[1].startswith("rtol = ") and "K * 1.0 * 2.0" in t
    v = _cli("tolerance", "sum", "--dtype", "bf16", "-K", "4096", "--order", "pairwise")
    assert "atol" in v and "ASSUMED" in v
    assert "vacuous" in _cli("tolerance", "sum", "--dtype", "bf16", "-K", "4096")
    with pytest.raises(ValueError, match="unknown op"):
        _cli("bound", "conv", "--dtype", "bf16", "-K", "8")
    with pytest.raises(ValueError, match="--shape"):
        _cli("bound", "matmul", "--dtype", "bf16", "-K", "8", "--shape", "axb")


# ---- table ----------------------------------------------------------------------------------------------
def test_bounds_table_rows_are_exact_text_and_deterministic():
    rows = bounds_table(ks=(16, 4096, 2**20))
    assert rows == bounds_table(ks=(16, 4096, 2**20))
    assert len(rows) == (11 * 4 + 2) * 3 * 2
    assert all(isinstance(v, (str, int, bool)) for r in rows for v in r.values())
    cell = {(r["dtype"], r["acc"], r["order"], r["K"], r["kind"]): r for r in rows}
    r = cell[("bf16", "fp32", "sequential", 4096, "worst")]
    assert Fraction(r["coefficient"]) >= (1 + U32) ** 4095 - 1 > Fraction(r["coefficient"]) - Fraction(1, 10**20)
    assert cell[("bf16", "bf16", "sequential", 4096, "worst")]["vacuous"] is True
    assert cell[("fp8_e4m3fn", "fp32", "blockfma:32:13:13", 4096, "probabilistic")]["note"].startswith("refused")
    h = cell[("fp8_e4m3fn", "fp32", "blockfma:32:13:13", 4096, "worst")]
    assert Fraction(h["coefficient"]) >= ((1 + Fraction(33, 2**13)) * (1 + Fraction(1, 2**13))) ** 128 - 1
    p = cell[("fp16", "fp32", "pairwise", 2**20, "probabilistic")]
    assert float(p["coefficient"]) <= float(cell[("fp16", "fp32", "pairwise", 2**20, "worst")]["coefficient"])


# ---- validation against a test-local emulation -------------------------------------------------------
def fl(x: np.ndarray, fmt, rounding: str = "rne") -> np.ndarray:
    return decode(cast(np.asarray(x, np.float64), fmt, rounding=rounding), fmt)


def ro_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b rounded to odd at 53 bits (TwoSum): rounding it once more to p <= 51 bits is correct."""
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    need = (e != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0)
    if need.any():
        s = s.copy()
        s[need] = np.nextafter(s[need], np.where(e[need] > 0, np.inf, -np.inf))
    return s


def seq(T: np.ndarray, acc, fma: bool = True) -> np.ndarray:
    """Sequential accumulation of the terms T (..., K) in acc: s = fl(t_k + s) (FMA) or fl(fl(t_k) + s)."""
    s = np.zeros(T.shape[:-1])
    for k in range(T.shape[-1]):
        t = T[..., k] if fma else fl(T[..., k], acc)
        s = fl(ro_add(t, s), acc)
    return s


def pairwise(T: np.ndarray, acc) -> np.ndarray:
    x = fl(T, acc)  # products round once (exact where they fit)
    while x.shape[-1] > 1:
        h = x.shape[-1] // 2
        y = fl(ro_add(x[..., 0:2 * h:2], x[..., 1:2 * h:2]), acc)
        x = np.concatenate([y, x[..., 2 * h:]], axis=-1)
    return x[..., 0]


def blocked(T: np.ndarray, acc, b: int) -> np.ndarray:
    parts = np.stack([seq(T[..., i:i + b], acc) for i in range(0, T.shape[-1], b)], axis=-1)
    return seq(parts, acc)


def block_fma(T: np.ndarray, acc, N: int, F: int, out=None, ab: tuple | None = None, emin: int = -6) -> np.ndarray:
    """THEORY §4: per block, align c and N exact products to the largest exponent label E, truncate below
    2^(E-F), add exactly, round toward zero to ``out`` (default acc); chain the blocks. Labels are
    floor(log2|t|), or with ``ab = (A, B)`` Khattak & Mikaitis's: input exponents clamped at ``emin``."""
    c = np.zeros(T.shape[:-1])
    if ab is not None:
        ea, eb = (np.maximum(np.frexp(np.abs(v))[1] - 1, emin).astype(float) for v in ab)
        raw = ea[:, None, :] + eb.T[None, :, :]
        lab = raw + (np.abs(T) >= np.ldexp(2.0, raw.astype(int)))
    for i in range(0, T.shape[-1], N):
        t = T[..., i:i + N]
        lt = np.frexp(np.where(t != 0, t, 1.0))[1] - 1.0 if ab is None else lab[..., i:i + N]
        lc = np.maximum(np.frexp(np.where(c != 0, c, 1.0))[1] - 1.0, -126)
        E = np.maximum(np.where(t != 0, lt, -np.inf).max(axis=-1), np.where(c != 0, lc, -np.inf))
        E = np.where(np.isfinite(E), E, 0).astype(int)
        unit = np.ldexp(1.0, E - F)[..., None]
        terms = np.concatenate([c[..., None], t], axis=-1)
        d = (np.trunc(terms / unit) * unit).sum(axis=-1)  # multiples of unit, < 2^53 units: exact
        c = fl(d, out or acc, "rtz")
    return c


def exact_sums(T: np.ndarray) -> np.ndarray:
    """Exact sums over the last axis of float64 terms, as an object array of Fractions (integer arithmetic)."""
    m, e = np.frexp(T)
    M = (m * 2.0**53).astype(np.int64)
    E = e.astype(np.int64) - 53
    lo = int(E.min())
    ints = np.left_shift(M.astype(object), (E - lo).astype(object)).sum(axis=-1)
    scale = Fraction(2) ** lo
    return np.vectorize(lambda v: Fraction(v) * scale, otypes=[object])(ints)


def check(name: str, got: np.ndarray, T: np.ndarray, tol: np.ndarray, exact: np.ndarray | None = None) -> float:
    """Assert |got - exact| <= tol elementwise; record and return the tightness max(err / tol)."""
    y = exact_sums(T) if exact is None else exact
    err = np.vectorize(lambda g, yy: abs(Fraction(float(g)) - yy), otypes=[object])(got, y)
    ratio = np.vectorize(lambda er, t: float(er / Fraction(float(t))) if t else float(er != 0),
                         otypes=[float])(err, tol)
    worst = float(ratio.max())
    i = np.unravel_index(int(ratio.argmax()), ratio.shape)
    assert worst <= 1, f"{name}: bound exceeded at {i}: error {float(err[i]):.6g} > tolerance {float(tol[i]):.6g}"
    TIGHTNESS[name] = worst
    return worst


def q(x: np.ndarray, fmt) -> np.ndarray:
    return fl(x, fmt)


@pytest.fixture(scope="module")
def seed_data():
    """The seed notebook's experiment: BF16 x BF16, 64x256 @ 256x64."""
    rng = np.random.default_rng(42)
    A = q(rng.standard_normal((64, 256)), BF16)
    B = q(rng.standard_normal((256, 64)), BF16)
    return A, B


def _terms(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return A[:, None, :] * B.T[None, :, :]  # (M, N, K) exact products


def test_seed_experiment_fp32_vs_bf16_accumulation(seed_data):
    A, B = seed_data
    K = 256
    b32 = expected_error_bound("matmul", BF16, K, acc=FP32, order="sequential")
    b16 = expected_error_bound("matmul", BF16, K, acc=BF16, order="sequential")
    # products are exact in FP32 (depth K-1) but round in BF16 (depth K): the ratio of the two coefficients
    ratio = b16.coefficient / b32.coefficient
    assert ratio == ((1 + UB) ** K - 1) / ((1 + U32) ** (K - 1) - 1)
    first_order = (K * UB) / ((K - 1) * U32)  # u_bf16/u_fp32 * K/(K-1): 65792
    assert first_order < ratio < first_order * Fraction(7, 4)  # higher-order growth: (e^(Ku)-1)/(Ku) < 1.72
    assert b16.vacuous and not b32.vacuous
    p16 = expected_error_bound("matmul", BF16, K, acc=BF16, order="sequential", kind="probabilistic", shape=(64, 64))
    p32 = expected_error_bound("matmul", BF16, K, acc=FP32, order="sequential", kind="probabilistic", shape=(64, 64))
    assert not p16.vacuous and 2**16 * 0.9 < float(p16.coefficient / p32.coefficient) < 2**16 * 1.3
    T = _terms(A, B)
    y = exact_sums(T)
    e32, e16 = seq(T, FP32), seq(T, BF16)
    t32 = check("seed bf16@bf16 acc fp32 worst", e32, T, b32.tolerance(A, B), y)
    check("seed bf16@bf16 acc bf16 worst (vacuous)", e16, T, b16.tolerance(A, B), y)
    check("seed bf16@bf16 acc bf16 probabilistic", e16, T, p16.tolerance(A, B), y)
    check("seed bf16@bf16 acc fp32 probabilistic", e32, T, p32.tolerance(A, B), y)
    err = lambda g: max(abs(Fraction(float(a)) - b) for a, b in zip(g.ravel(), y.ravel()))  # noqa: E731
    assert float(err(e16) / err(e32)) > 1.3 * 2**10  # the notebook asserted > 1.3; the ratio is ~2^16-ish
    assert t32 < 0.05  # random data: far below the worst case


def _round_up_chain(K: int, u: Fraction, rows: int = 4) -> np.ndarray:
    """Terms 1, then u(1 + 2^-6) repeated: every addition rounds up (the worst sequential case)."""
    x = np.full((rows, K), float(u * (1 + Fraction(1, 64))))
    x[:, 0] = 1.0
    x[1::2] *= -1
    return x


def test_validation_sequential_sum_fp16_adversarial():
    x = _round_up_chain(1024, U16)
    for fmt_order, tight in (("sequential", False), ("sequential", True), ("any", False)):
        b = expected_error_bound("sum", FP16, 1024, order=fmt_order, tight_rn=tight)
        r = check(f"sum fp16 K=1024 {fmt_order}{' tight_rn' if tight else ''} round-up chain", seq(x, FP16), x,
                  b.tolerance(x))
        assert r > 0.4  # the bound is nearly attained


def test_validation_matmul_fp32_acc_random_positive_alternating_and_chain():
    rng = np.random.default_rng(7)
    K = 256
    cases = {"normal": (rng.standard_normal((16, K)), rng.standard_normal((K, 16))),
             "positive": (rng.random((16, K)), rng.random((K, 16))),
             "alternating": (np.abs(rng.standard_normal((16, K))) * (-1.0) ** np.arange(K), rng.random((K, 16))),
             "chain": (_round_up_chain(K, U32, rows=16), np.ones((K, 16)))}
    for name, (a, bm) in cases.items():
        A, B = q(a, BF16), q(bm, BF16)
        T = _terms(A, B)
        for order, emu in (("sequential", lambda T: seq(T, FP32)), ("pairwise", lambda T: pairwise(T, FP32)),
                           ("blocked:32", lambda T: blocked(T, FP32, 32))):
            b = expected_error_bound("matmul", BF16, K, acc=FP32, order=order)
            check(f"matmul bf16 acc fp32 {order} {name}", emu(T), T, b.tolerance(A, B))
    assert TIGHTNESS["matmul bf16 acc fp32 sequential chain"] > 0.3


def test_validation_products_underflowing_the_accumulator():
    """BF16 products (1 + 2^-6 + 2^-14) 2^-150 lie between FP32's subnormals: every FMA rounds up by ~u_sub/2,
    an absolute error that no multiple of sum|t| covers: the bound's underflow term does."""
    v = (1 + 2**-7) * 2.0**-75
    A, B = np.full((2, 64), v), np.full((64, 2), v)
    T = _terms(A, B)
    b = expected_error_bound("matmul", BF16, 64, acc=FP32, order="sequential")
    assert b.atol_const > 0 and float(b.coefficient) * float(T.sum(-1).max()) < 2.0**-149
    assert check("matmul bf16 acc fp32 products in fp32's subnormal range", seq(T, FP32), T, b.tolerance(A, B)) > 0.9


def test_validation_fp16_products_rounded_with_and_without_fma_and_output():
    rng = np.random.default_rng(3)
    K = 256
    A, B = q(rng.random((8, K)), FP16), q(rng.random((K, 8)) + 0.5, FP16)
    T = _terms(A, B)
    y = exact_sums(T)
    for fma in (True, False):
        b = expected_error_bound("matmul", FP16, K, order="sequential", fma=fma)
        check(f"matmul fp16 acc fp16 sequential positive fma={fma}", seq(T, FP16, fma=fma), T, b.tolerance(A, B), y)
    bo = expected_error_bound("matmul", FP16, K, acc=FP32, out=BF16)
    got = fl(seq(T, FP32), BF16)
    ref = np.vectorize(float, otypes=[float])(y)
    check("matmul fp16 acc fp32 out bf16 (reference)", got, T, bo.tolerance(A, B, reference=ref), y)
    check("matmul fp16 acc fp32 out bf16 (derived |y|)", got, T, bo.tolerance(A, B), y)


def test_validation_inputs_rounded_from_fp32_to_fp8_with_underflow():
    rng = np.random.default_rng(11)
    K = 128
    a32 = q(rng.standard_normal((8, K)) * 2.0 ** rng.integers(-14, 3, (8, K)), FP32)
    b32 = q(rng.standard_normal((K, 8)) * 2.0 ** rng.integers(-14, 3, (K, 8)), FP32)
    a32[0, :5] = 0.0
    a32[1, :], b32[:, 1] = 0.625 * 2**-10, 448.0  # row 1 flushes to zero in E4M3: every product a*448 is lost
    A, B = q(a32, FP8_E4M3FN), q(b32, FP8_E4M3FN)
    assert np.any((np.abs(a32) < 2.0**-6) & (a32 != 0)) and np.any(A == 0)  # inputs underflow in E4M3
    b = expected_error_bound("matmul", FP8_E4M3FN, K, acc=FP32, inputs_rounded_from=FP32, order="sequential")
    assert b.input_underflow is not None
    T32 = _terms(a32, b32)
    assert check("matmul fp32->e4m3 inputs, acc fp32", seq(_terms(A, B), FP32), T32, b.tolerance(a32, b32)) > 0.5
    with pytest.raises(ValueError, match="not a fp32 value"):
        b.tolerance(a32 + 1e-30, b32)


def test_validation_block_fma_and_promotion_adversarial():
    rng = np.random.default_rng(5)
    K = 1024
    a = rng.random((8, K)) * 0.05
    a[:, ::32] = 8.0  # one large product per block: the small ones lose their low bits
    A, B = q(a, FP8_E4M3FN), q(rng.random((K, 8)) + 0.5, FP8_E4M3FN)
    T = _terms(A, B)
    y = exact_sums(T)
    b = expected_error_bound("matmul", FP8_E4M3FN, K, acc=FP32, order="blockfma:32:13")
    r = check("matmul e4m3 blockfma:32:13 truncating", block_fma(T, FP32, 32, 13), T, b.tolerance(A, B), y)
    p = expected_error_bound("matmul", FP8_E4M3FN, K, acc=FP32, order="promoted:128:32:13")
    F14 = Format.ieee_like(8, 13, name="fp32_13")  # the 13-fraction-bit tensor-core accumulator (THEORY §4)
    groups = np.stack([block_fma(T[..., g:g + 128], FP32, 32, 13, out=F14) for g in range(0, K, 128)], axis=-1)
    check("matmul e4m3 promoted:128:32:13", seq(groups, FP32), T, p.tolerance(A, B), y)
    assert r > 0.02
    # one block: a product of 1 and 31 products just under the 2^-13 grid step, all truncated away
    a1 = np.full((1, 32), 1.875 * 2**-6)
    b1 = np.full((32, 1), 2.0**-8)
    a1[0, 0], b1[0, 0] = 1.0, 1.0
    T1 = _terms(a1, b1)
    b32 = expected_error_bound("matmul", FP8_E4M3FN, 32, acc=FP32, order="blockfma:32:13")
    assert check("matmul e4m3 blockfma:32:13 one block, 31 products truncated", block_fma(T1, FP32, 32, 13), T1,
                 b32.tolerance(a1, b1)) > 0.85


def test_validation_small_k_random_search_nearly_attains_tree_bounds():
    """Random search over 20,000 all-positive FP16 rows finds cases at 60-87% of the bound, so a depth
    one too small for pairwise / blocked orders would fail here."""
    rng = np.random.default_rng(0)
    for K, order, emu, floor in ((4, "pairwise", lambda x: pairwise(x, FP16), 0.8),
                                 (8, "pairwise", lambda x: pairwise(x, FP16), 0.7),
                                 (8, "blocked:4", lambda x: blocked(x, FP16, 4), 0.55),
                                 (8, "splitk:2", lambda x: seq(np.stack([seq(x[..., :4], FP16), seq(x[..., 4:], FP16)],
                                                                        -1), FP16), 0.55)):
        x = q(rng.random((20000, K)) * 2.0 ** rng.integers(-4, 1, (20000, K)), FP16)
        b = expected_error_bound("sum", FP16, K, order=order)
        assert check(f"sum fp16 K={K} {order} random search", emu(x), x, b.tolerance(x)) > floor


def test_validation_product_rounding_is_one_more_level():
    """K = 2, fma=False, FP16: fl(fl(a1 b1) + fl(a2 b2)) errs by ~3u * sum|t|: more than a depth-1 bound."""
    a = np.array([[1 + 2**-10, 1 + 2**-10]])
    bm = np.array([[1.0], [1 - 2**-11]])
    T = _terms(a, bm)
    got = seq(T, FP16, fma=False)
    b = expected_error_bound("matmul", FP16, 2, order="sequential", fma=False)
    assert b.depth == 2
    y = exact_sums(T)
    assert abs(Fraction(float(got[0, 0])) - y[0, 0]) > U16 * (abs(y[0, 0]))  # a depth-1 bound would fail
    assert check("dot fp16 K=2 fma=False product + addition", got, T, b.tolerance(a, bm), y) > 0.7


def test_validation_block_fma_exponent_labels_of_subnormal_inputs():
    """Khattak & Mikaitis clamp a subnormal input's exponent at emin: 2^-9 * 448 = 0.875 gets label 2, not -1,
    so the other 31 products (0.9375 * 2^-11) fall below the window 2^(2-13) and vanish: 4x the error that
    THEORY §4's max|t| form allows. The bound's label term covers it."""
    a = np.full((2, 32), 1.875 * 2**-6)
    bm = np.full((32, 2), 2.0**-6)
    a[:, 0], bm[0, :] = 2.0**-9, 448.0
    T = _terms(a, bm)
    got = block_fma(T, FP32, 32, 13, ab=(a, bm))
    y = exact_sums(T)
    b = expected_error_bound("matmul", FP8_E4M3FN, 32, acc=FP32, order="blockfma:32:13")
    assert float(abs(Fraction(float(got[0, 0])) - y[0, 0])) > 3 * float(b.coefficient) * float(y[0, 0])
    assert check("matmul e4m3 blockfma:32:13 clamped labels of subnormal inputs", got, T, b.tolerance(a, bm), y) > 0.4
    assert b.rtol_atol(max_abs=448.0).atol >= float(b.tolerance(a, bm).max())


def test_validation_probabilistic_bf16_accumulation_random():
    rng = np.random.default_rng(2024)
    K, M = 512, 32
    A, B = q(rng.standard_normal((M, K)), BF16), q(rng.standard_normal((K, M)), BF16)
    T = _terms(A, B)
    b = expected_error_bound("matmul", BF16, K, acc=BF16, kind="probabilistic", shape=(M, M), order="sequential")
    assert not b.vacuous and expected_error_bound("matmul", BF16, K, acc=BF16).vacuous
    check("matmul bf16 acc bf16 probabilistic K=512", seq(T, BF16), T, b.tolerance(A, B))


def tightness_table() -> str:
    """The bound tightness (max error / bound) of every validation case run, one line each."""
    rows = [f"  {v:8.4f}  {k}" for k, v in sorted(TIGHTNESS.items())]
    return "\n".join(["bound tightness (max error / bound):", *rows])


def test_tightness_summary():
    """Nothing is printed into pytest's output; NUMORACLE_TIGHTNESS=PATH writes the table to PATH."""
    if not TIGHTNESS:
        pytest.skip("runs after the validation tests (they record the tightness)")
    text = tightness_table()
    assert len(text.splitlines()) == 1 + len(TIGHTNESS) and max(TIGHTNESS.values()) <= 1
    path = os.environ.get("NUMORACLE_TIGHTNESS")
    if path:
        Path(path).write_text(text + "\n")


def test_an_order_without_spec_is_refused_with_the_fix():
    class Mine:
        pass

    with pytest.raises(ValueError, match="defines spec"):
        expected_error_bound("sum", FP16, 64, order=Mine())


def test_input_membership_round_trip_accepts_members_and_refuses_the_rest():
    """The float64 round-trip shortcut accepts exactly the format's values (subnormals included)."""
    for fmt, members, outsiders in (
            ("fp32", [2.0**-149, -3 * 2.0**-149, 2.0**-126 * 1.5, 3.4028234663852886e38], [2.0**-150, 1 + 2.0**-30]),
            ("fp16", [2.0**-24, 65504.0, -0.0], [2.0**-25, 65520.0, 1 + 2.0**-11])):
        b = expected_error_bound("sum", fmt, 4, acc="fp32")
        b.tolerance(np.array(members + [0.0] * (4 - len(members))))
        for v in outsiders:
            with pytest.raises(ValueError, match=f"not a {fmt} value"):
                b.tolerance(np.array([v, 0.0, 0.0, 0.0]))
