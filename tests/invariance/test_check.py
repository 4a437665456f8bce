"""check_invariance on kernels of known behaviour: verdicts, exact thresholds (against brute force), confirmed
counterexamples, bad kernels, assert_batch_invariant and the recorded-outputs form."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

from numoracle import assert_batch_invariant, check_invariance
from numoracle import orders as O
from numoracle.core.errors import NumoracleAssertionError, NumoracleError
from numoracle.invariance import classes_of_recorded
from numoracle.invariance.space import breakpoints, parse_range
from numoracle.models.engine.simulation import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
import inv_kernels as kn  # noqa: E402

MM = {"at": {"K": 64, "N": 4}}


def _thresholds(rep, axis="M"):
    return [(t.below.get(axis), t.above.get(axis)) for t in rep.thresholds if t.axis == axis]


def _check_counterexamples(rep, fn):
    """Every counterexample confirmed, and confirmed again here by calling the kernel on its inputs."""
    assert rep.counterexamples and all(c.confirmed and c.model_agrees for c in rep.counterexamples)
    for c in rep.counterexamples:
        a, b = np.asarray(fn(*c.inputs_a))[c.row_a], np.asarray(fn(*c.inputs_b))[c.row_b]
        assert not np.array_equal(a.view(np.uint32), b.view(np.uint32))
        assert np.array_equal(c.inputs_a[0][c.row_a], c.inputs_b[0][c.row_b])   # the same watched row
        assert c.ulps > 0


def test_invariant_kernel_one_class_and_honest_gaps():
    rep = check_invariance(kn.invariant, "matmul", vary={"M": range(1, 129)}, **MM)
    assert rep.verdict == "INVARIANT" and len(rep.classes) == 1 and rep.reveals == 1
    assert not rep.thresholds and not rep.counterexamples
    tried = {p.config.get("M") for p in rep.points}
    assert tried == set(breakpoints(list(range(1, 129))))
    assert rep.not_claimed == 128 - len(tried) and rep.gaps
    assert all("not claimed" in g.claim for g in rep.gaps)
    assert "not claimed" in str(rep) and "INVARIANT" in rep.summary()


def test_exhaustive_tries_every_point_and_reveal_evidence_reveals_each():
    rep = check_invariance(kn.invariant, "matmul", vary={"M": range(1, 41)}, exhaustive=True, **MM)
    assert rep.verdict == "INVARIANT" and rep.not_claimed == 0 and not rep.gaps and len(rep.points) == 40
    rep = check_invariance(kn.invariant, "matmul", vary={"M": [1, 2, 3, 64]}, evidence="reveal", **MM)
    assert rep.reveals == 4 and len(rep.classes) == 1 and rep.revealed and rep.verdict == "INVARIANT"


def test_split_k_from_m_threshold_exact_and_counterexample_confirmed():
    rep = check_invariance(kn.split_k, "matmul", vary={"M": range(1, 129)}, **MM)
    assert rep.verdict == "VARIANT" and len(rep.classes) == 2
    assert _thresholds(rep) == [(63, 64)] and rep.thresholds[0].exact
    brute = kn.brute_classes(kn.split_k, range(1, 129), 64, 4)
    assert kn.brute_thresholds(brute) == [(63, 64)]
    _check_counterexamples(rep, kn.split_k)
    # classes are named by their revealed trees: split-K's last combine adds 48 + 16 terms, M >= 64 is one chain
    assert "root adds subtrees of 48 + 16 terms" in rep.classes[0].description
    assert "one chain" in rep.classes[1].description
    assert "threshold M: 63 -> 64" in str(rep)


def test_k_tile_from_m_times_n_thresholds_per_n():
    rep = check_invariance(kn.tile_from_mn, "matmul", vary={"M": range(1, 65), "N": [4, 8]}, at={"K": 64})
    assert rep.verdict == "VARIANT"
    got = sorted((t.below.get("N"), t.below.get("M"), t.above.get("M")) for t in rep.thresholds)
    assert got == [(4, 25, 26), (8, 12, 13)]        # 26 and 13 are no breakpoints: bisection found them
    for n in (4, 8):
        brute = kn.brute_classes(kn.tile_from_mn, range(1, 65), 64, n)
        assert [(n, a, b) for a, b in kn.brute_thresholds(brute)] == [g for g in got if g[0] == n]
    _check_counterexamples(rep, kn.tile_from_mn)


def test_edge_tile_position_dependent():
    rep = check_invariance(kn.edge_tile, "matmul", vary={"row": range(0, 20)}, at={"M": 20, "K": 64, "N": 4})
    assert rep.verdict == "VARIANT" and _thresholds(rep, "row") == [(15, 16)]
    assert {p.cls for p in rep.points if p.config.get("row") >= 16} == {rep.thresholds[0].above_class}
    _check_counterexamples(rep, kn.edge_tile)


def test_edge_tile_last_row_changes_and_changes_back_along_m():
    rep = check_invariance(kn.edge_tile, "matmul", vary={"M": range(1, 41)}, at={"row": -1, "K": 64, "N": 4})
    assert rep.verdict == "VARIANT" and len(rep.classes) == 2
    # the last row is in a full tile exactly when 8 divides M: every crossing is a threshold, each one exact
    assert _thresholds(rep) == [(7, 8), (8, 9), (15, 16), (16, 17), (23, 24), (24, 25), (31, 32), (32, 33),
                                (39, 40)]
    brute = kn.brute_classes(kn.edge_tile, range(1, 41), 64, 4, row=-1)
    assert kn.brute_thresholds(brute) == _thresholds(rep)
    # what lies between two tried batch sizes of one class is not claimed
    assert any(g.lo.get("M") == 9 and g.hi.get("M") == 15 and "not claimed" in g.claim for g in rep.gaps)


def test_power_of_two_k_only():
    rep = check_invariance(kn.pow2_k, "matmul", vary={"M": range(1, 33), "K": [31, 32, 33, 63, 64, 65]},
                           at={"N": 2})
    assert rep.verdict == "VARIANT"
    got = sorted((t.below.get("K"), t.below.get("M"), t.above.get("M")) for t in rep.thresholds)
    assert got == [(32, 7, 8), (64, 7, 8)]
    _check_counterexamples(rep, kn.pow2_k)


def test_nondeterministic_kernel_reported_first_with_compare_runs():
    rep = check_invariance(kn.nondeterministic(), "matmul", vary={"M": range(1, 9)}, **MM)
    assert rep.verdict == "NOT DETERMINISTIC" and not rep.counterexamples
    assert "compare_runs" in rep.nondeterminism and "REORDERING" in rep.nondeterminism


def test_user_parameter_through_a_factory():
    def make_fn(split):
        return lambda A, B: simulate("matmul", A, B, order=O.SplitK(split)).astype(np.float32)
    rep = check_invariance(None, "matmul", make_fn=make_fn, vary={"split": [1, 2, 4], "M": [1, 8]}, **MM)
    assert rep.verdict == "VARIANT" and len(rep.classes) == 3
    assert {(t.below.get("split"), t.above.get("split")) for t in rep.thresholds} == {(1, 2), (2, 4)}


def test_sum_and_dot_ops():
    def rowsum(X):
        return simulate("sum", X, order=O.Pairwise() if X.shape[0] < 4 else O.Sequential()).astype(np.float32)
    rep = check_invariance(rowsum, "sum", vary={"M": range(1, 9)}, at={"K": 32})
    assert rep.verdict == "VARIANT" and _thresholds(rep) == [(3, 4)]
    _check_counterexamples(rep, rowsum)

    def rowdot(A, B):
        return np.array([simulate("dot", a, b, order=O.Pairwise()) for a, b in zip(A, B)], np.float32)
    rep = check_invariance(rowdot, "dot", vary={"M": range(1, 6)}, at={"K": 32})
    assert rep.verdict == "INVARIANT" and rep.not_claimed == 0


# ---- bad kernels --------------------------------------------------------------------------------------------
def test_kernel_raising_at_some_configurations_is_undetermined_there():
    def fn(A, B):
        if A.shape[0] >= 30:
            raise RuntimeError("no kernel for this shape")
        return kn.invariant(A, B)
    rep = check_invariance(fn, "matmul", vary={"M": range(1, 41)}, **MM)
    assert rep.verdict == "UNDETERMINED"
    bad = {p.config.get("M") for p in rep.undetermined}
    assert bad and min(bad) >= 30 and all("RuntimeError" in p.detail and "M=" in p.detail for p in rep.undetermined)


def test_wrong_shape_and_hang_are_named():
    def wrong(A, B):
        return kn.invariant(A, B)[:1] if A.shape[0] == 16 else kn.invariant(A, B)
    rep = check_invariance(wrong, "matmul", vary={"M": [1, 8, 16]}, **MM)
    assert rep.verdict == "UNDETERMINED" and [p.config.get("M") for p in rep.undetermined] == [16]
    assert "shape (1, 4)" in rep.undetermined[0].detail and "M=16" in rep.undetermined[0].detail

    def hang(A, B):
        if A.shape[0] == 8:
            time.sleep(3)
        return kn.invariant(A, B)
    calls = {"n": 0}

    def hang_later(A, B):           # hangs on its third call at M = 8, not its first
        if A.shape[0] == 8:
            calls["n"] += 1
            if calls["n"] == 3:
                time.sleep(3)
        return kn.invariant(A, B)
    t0 = time.perf_counter()
    rep = check_invariance(hang_later, "matmul", vary={"M": [1, 8]}, call_seconds=0.3, **MM)
    assert time.perf_counter() - t0 < 2.5 and "did not return within 0.3 s at M=8" in rep.undetermined[0].detail
    t0 = time.perf_counter()
    rep = check_invariance(hang, "matmul", vary={"M": [1, 8]}, call_seconds=0.3, **MM)
    assert time.perf_counter() - t0 < 2.5
    assert rep.verdict == "UNDETERMINED" and "did not return within 0.3 s at M=8" in rep.undetermined[0].detail


def test_time_budget_stops_the_sweep():
    rep = check_invariance(kn.invariant, "matmul", vary={"M": range(1, 129)}, max_seconds=0.05, **MM)
    assert rep.verdict == "UNDETERMINED" and any("time budget" in n for n in rep.notes)


def test_bad_arguments():
    with pytest.raises(NumoracleError, match="K"):
        check_invariance(kn.invariant, "matmul", vary={"M": [1, 2]}, at={"N": 4})
    with pytest.raises(NumoracleError, match="make_fn"):
        check_invariance(kn.invariant, "matmul", vary={"split": [1, 2]}, **MM)
    with pytest.raises(TypeError, match="not both"):
        check_invariance(kn.invariant, "matmul", make_fn=lambda: kn.invariant, vary={"M": [1]}, **MM)
    with pytest.raises(NumoracleError, match="op"):
        check_invariance(kn.invariant, "conv", vary={"M": [1]}, **MM)
    with pytest.raises(NumoracleError, match="both in vary and in at"):
        check_invariance(kn.invariant, "matmul", vary={"K": [1]}, **MM)


def test_breakpoints_and_ranges():
    b = breakpoints(list(range(1, 257)))
    assert {1, 2, 3, 63, 64, 65, 127, 128, 129, 255, 256, 24, 25, 23} <= set(b) and 37 not in b
    assert parse_range("1:4") == [1, 2, 3, 4] and parse_range("2:8:2") == [2, 4, 6, 8]
    assert parse_range("1,2,4") == [1, 2, 4]
    with pytest.raises(ValueError, match="LO:HI"):
        parse_range("1:x")


# ---- surfaces -----------------------------------------------------------------------------------------------
def test_assert_batch_invariant():
    assert assert_batch_invariant(kn.invariant, "matmul", vary={"M": [1, 2, 64]}, **MM).verdict == "INVARIANT"
    with pytest.raises(NumoracleAssertionError, match="threshold M: 63 -> 64") as e:
        assert_batch_invariant(kn.split_k, "matmul", vary={"M": range(1, 129)}, **MM)
    assert "CONFIRMED" in str(e.value) and e.value.report.verdict == "VARIANT"


def test_to_dict_is_json_ready():
    import json

    rep = check_invariance(kn.split_k, "matmul", vary={"M": [1, 63, 64]}, **MM)
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["verdict"] == "VARIANT" and d["thresholds"][0]["below"]["M"] == 63 and d["counterexamples"][0][
        "confirmed"]


def test_recorded_outputs_classes():
    rng = np.random.default_rng(3)
    B = rng.standard_normal((64, 4)).astype(np.float32)
    recs = []
    for M in (1, 8, 63, 64, 100):
        A = (rng.standard_normal((M, 64)) * np.exp2(rng.integers(-8, 9, (M, 64)))).astype(np.float32)
        recs.append(({"M": M}, kn.split_k(A, B), (A, B)))
    rc = classes_of_recorded(recs, "matmul", candidates=[O.Sequential(), O.Pairwise(), O.SplitK(4)])
    assert rc.verdict == "VARIANT" and [[m["M"] for m in c.members] for c in rc.classes] == [[1, 8, 63], [64, 100]]
    assert "class A" in str(rc)


def test_ulp_gap_against_nextafter():
    from numoracle.invariance.counter import ulp_gap

    f32 = np.dtype(np.float32)
    one = np.array([1.0])
    up = np.array([float(np.nextafter(np.float32(1), np.float32(2)))])
    assert ulp_gap(one, up, f32) == 1 and ulp_gap(up, one, f32) == 1
    tiny = float(np.nextafter(np.float32(0), np.float32(1)))
    assert ulp_gap(np.array([-tiny]), np.array([tiny]), f32) == 2
    assert ulp_gap(np.array([1.0]), np.array([2.0]), f32) == 1 << 23
    assert ulp_gap(np.array([np.nan]), np.array([1.0]), f32) == 1 << 40


def test_bf16_inputs():
    import ml_dtypes

    def fn(A, B):
        assert A.dtype == ml_dtypes.bfloat16
        order = O.SplitK(2) if A.shape[0] >= 4 else O.Sequential()
        return simulate("matmul", A, B, order=order, out="bf16").astype(ml_dtypes.bfloat16)
    rep = check_invariance(fn, "matmul", vary={"M": range(1, 9)}, at={"K": 32, "N": 2}, dtype="bf16")
    assert rep.dtype == "bf16" and rep.verdict == "VARIANT" and _thresholds(rep) == [(3, 4)]
    assert rep.counterexamples[0].confirmed and rep.counterexamples[0].ulps > 0


@pytest.mark.slow
def test_workers_spread_the_first_configurations():
    rep = check_invariance(kn.split_k, "matmul", vary={"M": range(1, 129)}, workers=2, **MM)
    assert rep.verdict == "VARIANT" and _thresholds(rep) == [(63, 64)] and len(rep.classes) == 2
    assert rep.reveals >= 2 and rep.calls > 0
    _check_counterexamples(rep, kn.split_k)
    with pytest.raises(NumoracleError, match="pickles"):
        check_invariance(lambda A, B: A @ B, "matmul", vary={"M": [1, 2]}, workers=2, **MM)


@pytest.mark.slow
def test_executor_parts_inline():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as ex:
        rep = check_invariance(kn.tile_from_mn, "matmul", vary={"M": range(1, 65)}, at={"K": 64, "N": 4},
                               executor=ex)
    assert rep.verdict == "VARIANT" and _thresholds(rep) == [(25, 26)]
    serial = check_invariance(kn.tile_from_mn, "matmul", vary={"M": range(1, 65)}, at={"K": 64, "N": 4})
    assert {p.config: p.cls for p in rep.points} == {p.config: p.cls for p in serial.points}


@pytest.mark.slow
def test_dask_local_cluster_gives_the_serial_classes():
    """The first configurations spread over a Dask cluster (a client's executor, as the sweeps take it)."""
    distributed = pytest.importorskip("distributed", reason="needs dask.distributed: pip install distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            distributed.Client(lc) as client:
        rep = check_invariance(kn.tile_from_mn, "matmul", vary={"M": range(1, 65)}, at={"K": 64, "N": 4},
                               executor=client.get_executor())
    assert rep.verdict == "VARIANT" and _thresholds(rep) == [(25, 26)]
    serial = check_invariance(kn.tile_from_mn, "matmul", vary={"M": range(1, 65)}, at={"K": 64, "N": 4})
    assert {p.config: p.cls for p in rep.points} == {p.config: p.cls for p in serial.points}


@pytest.mark.parametrize("op", ["sum", "dot"])
def test_nondeterministic_sum_and_dot(op):
    rng = np.random.default_rng(2)

    def fn(*xs):
        order = O.SplitK(4, permutation=tuple(rng.permutation(4)))
        if op == "sum":
            return simulate("sum", xs[0], order=order).astype(np.float32)
        return np.array([simulate("dot", a, b, order=order) for a, b in zip(*xs)], np.float32)
    rep = check_invariance(fn, op, vary={"M": [1, 2, 3]}, at={"K": 32})
    assert rep.verdict == "NOT DETERMINISTIC" and "compare_runs:" in rep.nondeterminism


def test_progress_lines():
    lines = []
    rep = check_invariance(kn.invariant, "matmul", vary={"M": [1, 2, 3]}, progress=lines.append, **MM)
    assert len(lines) == 3 and lines[0].startswith("invariance: M=1") and "class A (revealed)" in lines[0]
    assert "(matched)" in lines[1] and rep.verdict == "INVARIANT"
