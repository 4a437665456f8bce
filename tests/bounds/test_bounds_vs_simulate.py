"""Every order and model of ``simulate`` stays within ``expected_error_bound`` for that same order.

The emulated result (bit-exact for its model) is compared with the exact reference; the worst
case bound must never be exceeded, and the probabilistic bound's violation rate must stay under
its stated probability. The tightness (max error / bound) is printed with ``-s``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle.formats import BF16, FP16, FP32

RNG = np.random.default_rng(20261129)


def _data(kind: str, m: int, k: int, n: int, dtype):
    if kind == "random":
        a, b = RNG.standard_normal((m, k)), RNG.standard_normal((k, n))
    elif kind == "positive":  # every partial sum grows: rounding errors add up, no cancellation
        a, b = RNG.uniform(0.5, 1.0, (m, k)), RNG.uniform(0.5, 1.0, (k, n))
    else:  # "cancelling": large alternating terms around a small result
        a = RNG.uniform(0.9, 1.1, (m, k)) * np.where(np.arange(k) % 2, 1.0, -1.0)
        b = RNG.uniform(0.9, 1.1, (k, n)) * 64.0
    return a.astype(dtype), b.astype(dtype)


ORDERS = [
    ("sequential", O.Sequential(), FP32, np.float32),
    ("pairwise", O.Pairwise(), FP32, np.float32),
    ("blocked:64", O.Blocked(64), FP32, ml_dtypes.bfloat16),
    ("splitk:8", O.SplitK(8), FP32, ml_dtypes.bfloat16),
    ("splitk:8 permuted", O.SplitK(8, permutation=(3, 1, 7, 0, 5, 2, 6, 4)), FP32, ml_dtypes.bfloat16),
    ("sequential fp16 acc", O.Sequential(), FP16, np.float16),
    ("v100 fp16", O.preset("v100", "fp16"), None, np.float16),
    ("a100 bf16", O.preset("a100", "bf16"), None, ml_dtypes.bfloat16),
    ("h100 fp16", O.preset("h100", "fp16"), None, np.float16),
    ("h100 fp8", O.preset("h100", "fp8"), None, ml_dtypes.float8_e4m3fn),
    ("deepseek fp8", O.preset("deepseek", "fp8"), None, ml_dtypes.float8_e4m3fn),
]


@pytest.mark.parametrize("name,order,acc,dtype", ORDERS, ids=[o[0] for o in ORDERS])
@pytest.mark.parametrize("kind", ["random", "positive", "cancelling"])
def test_worst_case_bound_holds_for_the_model(name, order, acc, dtype, kind):
    m, k, n = 8, 512, 8
    a, b = _data(kind, m, k, n, dtype)
    kw = {} if acc is None else {"acc": acc}
    got = no.simulate("matmul", a, b, order=order, **kw)
    exact = no.exact_matmul(a, b)
    fmt_in = no.formats.format_of(a.dtype)
    bound = no.expected_error_bound("matmul", fmt_in, k, order=order, **({"acc": acc} if acc else {}))
    tol = bound.tolerance(a, b)
    err = np.abs(got - exact)
    ratio = float(np.max(err / tol))
    print(f"{name:<20} {kind:<10} max error/bound {ratio:.3g}")
    assert ratio <= 1.0, f"{name} ({kind}): an emulated error exceeds the worst-case bound, ratio {ratio}\n{bound}"


def test_probabilistic_bound_violation_rate():
    """Random data, FP16 sequential accumulation: violations stay under the stated probability."""
    m, k, n = 16, 1024, 16
    conf = 0.99
    bound = no.expected_error_bound("matmul", FP16, k, acc=FP16, order=O.Sequential(), kind="probabilistic",
                                    confidence=conf, shape=(m, n))
    violations = total = 0
    for _ in range(4):
        a, b = _data("random", m, k, n, np.float16)
        got = no.simulate("matmul", a, b, acc=FP16, order=O.Sequential())
        err = np.abs(got - no.exact_matmul(a, b))
        violations += int(np.sum(err > bound.tolerance(a, b)))
        total += m * n
    assert violations / total <= 1 - conf, f"{violations} of {total} elements exceed the probabilistic bound"


def test_seed_experiment_with_simulate():
    """BF16 x BF16 64x256 @ 256x64 (the seed notebook): FP32 accumulation is within its worst-case bound,
    BF16 accumulation within its probabilistic one, and the bounds are ordered as the errors are."""
    a = RNG.standard_normal((64, 256)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((256, 64)).astype(ml_dtypes.bfloat16)
    exact = no.exact_matmul(a, b)
    e32 = np.abs(no.simulate("matmul", a, b, acc=FP32) - exact)
    e16 = np.abs(no.simulate("matmul", a, b, acc=BF16) - exact)
    b32 = no.expected_error_bound("matmul", BF16, 256, acc=FP32)
    p16 = no.expected_error_bound("matmul", BF16, 256, acc=BF16, kind="probabilistic", shape=(64, 64))
    assert (e32 <= b32.tolerance(a, b)).all() and (e16 <= p16.tolerance(a, b)).all()
    assert e16.max() > 100 * e32.max() and p16.coefficient_float > 100 * b32.coefficient_float


def _compensated_orders(n: int, fmt: str):
    """Kahan and Neumaier chains over a whole sum, and over 8 plain lanes (CompensatedTree, as reveal returns)."""
    chain = O.TreeOrder(n, tuple([(0, 1)] + [(n + i, i + 2) for i in range(n - 2)]), steps=((fmt, "rne"),))
    lanes, tops = [], []
    for lane in range(8):
        terms = list(range(lane, n, 8))
        s = terms[0]
        for t in terms[1:]:
            lanes.append((s, t))
            s = n + len(lanes) - 1
        tops.append(s)
    top = []
    s = tops[0]
    for t in tops[1:]:
        lanes.append((s, t))
        s = n + len(lanes) - 1
        top.append(s - n)
    lanes_tree = O.TreeOrder(n, tuple(lanes), steps=((fmt, "rne"),))
    whole = (tuple(range(n - 1)),)
    return [O.CompensatedTree(chain, whole), O.CompensatedTree(chain, whole, flush=True),
            O.CompensatedTree(chain, whole, err="fp64"), O.CompensatedTree(chain, whole, "neumaier", True),
            O.CompensatedTree(lanes_tree, (tuple(top),), flush=True)]


@pytest.mark.parametrize("fmt,dtype", [("fp16", np.float16), ("fp32", np.float32)])
@pytest.mark.parametrize("kind", ["random", "positive", "cancelling", "spread"])
def test_compensated_trees_stay_within_their_bound(fmt, dtype, kind):
    """reveal's compensated orders (Kahan, flushed, a float64 error term, Neumaier, lanes under Kahan): the
    schedule-depth bound holds, including data where Kahan's correction misfires (terms far above the sum)."""
    n, rows = 256, 64
    if kind == "spread":     # magnitudes over 2^+-10, signs mixed: terms larger than the running sum
        x = RNG.standard_normal((rows, n)) * 2.0 ** RNG.integers(-10, 10, (rows, n))
    else:
        x = _data(kind, rows, n, 1, np.float64)[0]
    x = x.astype(dtype)
    exact = no.exact_sum(x, axis=-1)
    for order in _compensated_orders(n, fmt):
        got = no.simulate("sum", x, order=order)
        tol = no.expected_error_bound("sum", no.formats.format_of(dtype), n, order=order).tolerance(x)
        ratio = float(np.max(np.abs(got - exact) / tol))
        assert ratio <= 1.0, f"{order!r} ({kind}): error {ratio:.3g} x the bound"
