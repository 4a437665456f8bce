"""compare_runs on split-K runs whose partials met in other orders: ULP counts, summaries, exact explanations."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle.formats import FP16


def _fp16_splitk_runs(seed=0, m=8, k=256, n=8, s=4):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, k)).astype(np.float16)
    B = rng.standard_normal((k, n)).astype(np.float16)
    perm = [3, 1, 2, 0] if s == 4 else list(range(s))[::-1]
    a = no.simulate("matmul", A, B, acc="fp16", order=O.SplitK(s), out="fp16")
    b = no.simulate("matmul", A, B, acc="fp16", order=O.SplitK(s, permutation=perm), out="fp16")
    return A, B, a, b


def test_run_ulps_counted_in_the_output_format_and_summary():
    """Two fp16 runs held as float64 (simulate's outputs) with out="fp16": ULPs of fp16, not of float64 (which
    made 16 fp16 ULPs read as 2^46)."""
    A, B, a, b = _fp16_splitk_runs()
    native = no.compare_runs(a.astype(np.float16), b.astype(np.float16), "matmul", A, B, acc="fp16", identify=False)
    wide = no.compare_runs(a, b, "matmul", A, B, acc="fp16", out="fp16", identify=False)
    assert 0 < native.max_run_ulps < 64
    assert wide.max_run_ulps == native.max_run_ulps
    assert f"at most {native.max_run_ulps} ULPs of fp16 apart" in str(wide)
    for rep in (native, wide):
        line = rep.summary()
        assert line.startswith(rep.verdict + ":") and "\n" not in line
        assert f"{rep.n_differ} of {rep.n_elements} elements differ" in line
    same = no.compare_runs(a, a.copy(), "matmul", A, B, acc="fp16", out="fp16", identify=False)
    assert same.summary().startswith("IDENTICAL")


def _atomic_runs(fmt, seed=0, m=8, k=384, n=8, s=6):
    """Two runs of an atomic split-K kernel: s partials per element, added into the output in the order the
    blocks finished, which differs per element and per run."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, k)).astype(np.float16)
    B = rng.standard_normal((k, n)).astype(np.float16)
    unit = O.Sequential() if fmt == "fp16" else O.preset("h100", "fp16")
    acc = "fp16" if fmt == "fp16" else "fp32"
    runs = []
    for _ in range(2):
        out = np.empty((m, n))
        perms = [tuple(int(i) for i in rng.permutation(s)) for _ in range(4)]
        pick = rng.integers(0, 4, (m, n))
        for q, perm in enumerate(perms):
            y = no.simulate("matmul", A, B, acc=acc, order=O.SplitK(s, unit, permutation=perm))
            out[pick == q] = y[pick == q]
        runs.append(out.astype(np.float16 if fmt == "fp16" else np.float32))
    return A, B, runs, acc


@pytest.mark.parametrize("fmt", ["fp16", "fp32"])
def test_atomic_split_k_runs_explained_exactly_and_a_corrupted_element_is_not(fmt):
    A, B, (ra, rb), acc = _atomic_runs(fmt)
    c = no.compare_runs(ra, rb, "matmul", A, B, acc=acc, identify=False)
    assert c.verdict == "REORDERING" and c.exact.complete, str(c)
    assert "each differing element is the other run's split partials combined in another order" in c.summary()
    assert "exact: every one of the" in str(c) and c.exact.split.s == 6
    bad = rb.copy()
    i = int(np.flatnonzero(ra.ravel() != rb.ravel())[0])
    bad.ravel()[i] = np.nextafter(bad.ravel()[i], np.inf, dtype=bad.dtype)     # one ULP: inside every bound
    c = no.compare_runs(ra, bad, "matmul", A, B, acc=acc, identify=False)
    assert c.verdict == "UNEXPLAINED" and c.n_unexplained == 1, str(c)
    assert list(c.exact.unexplained["run_b"]) == [i] and c.exact.exhaustive
    assert c.unexplained[0][0] == "run_b" and c.unexplained[0][1].index == np.unravel_index(i, ra.shape)
    assert c.by_exact and "equal no order of the split partials" in c.summary()
    assert "inside the bound" in str(c) and "outside the bound" not in str(c), str(c)   # it said outside


@pytest.mark.parametrize("fmt", ["fp16", "fp32"])
def test_identify_finds_per_element_combine_orders(fmt):
    """identify_order on one atomic run: a PerPosition of SplitK orders, one permutation per element, confirmed
    on every element through simulate."""
    A, B, (_, rb), acc = _atomic_runs(fmt, seed=1)
    rep = no.identify_order(rb, "matmul", A, B, acc=acc)
    assert rep.winner is not None and rep.winner.stage == "permutation", str(rep)
    got = no.simulate("matmul", A, B, arith=rep.arithmetic).astype(rb.dtype)
    np.testing.assert_array_equal(got, rb)


def test_sampled_exact_explanation_says_so_and_claims_nothing_for_the_rest():
    """When most of a sample of the differing elements is no reordering, only the sample is searched: the
    explanation keeps the real count of differing elements, says the search was a sample, and is neither
    complete nor established (it was the sample's size passed as n_differ, read as "every one of 64")."""
    A, B, (ra, _), acc = _atomic_runs("fp16", m=16, n=16)
    bad = np.nextafter(ra, np.inf, dtype=ra.dtype)                 # every element one ULP off: no reordering
    from numoracle.identify.runs import explain_runs
    codes = [np.asarray(x).view(np.uint16).ravel() for x in (ra, bad)]
    e = explain_runs(*codes, FP16, "matmul", (A, B), acc, None, {})
    assert e.split is not None and e.n_differ == ra.size == 256 and e.n_searched == 64 and e.sampled
    assert not e.complete and not e.established
    assert "a sample of 64 of the 256 differing elements" in e.text(), e.text()


def test_unexplained_by_the_bound_does_not_claim_the_partials_were_searched():
    """Every element far off: UNEXPLAINED by the bound, the exact search stops at its sample. The summary said
    the elements "equal no order of the split partials" though only a sample of them was searched."""
    A, B, (ra, _), acc = _atomic_runs("fp16", m=16, n=16)
    c = no.compare_runs(ra, (ra.astype(np.float64) * 100).astype(ra.dtype), "matmul", A, B, acc=acc, identify=False)
    assert c.verdict == "UNEXPLAINED" and not c.by_exact and c.exact.sampled, str(c)
    assert "outside every order's bound" in c.summary(), c.summary()
