"""The verdict's evidence (identify/evidence.py): an open search says REPRODUCED only where the outputs are enough to
tell the reproducing candidate from an order outside the set tried that lands on them by chance.

The recordings: tests/data/cpu/isa (seeds 300 / 400, OPENBLAS_CORETYPE=Sandybridge / Haswell, torch 2.13.0+cpu's
``torch.dot`` under MKL_ENABLE_INSTRUCTIONS=AVX2, an MKL kernel no candidate models) and tests/data/cpu.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle.identify.evidence import THRESHOLD, evidence
from numoracle.identify.search import identify_order
from optional import torch_on_amd

DATA = Path(__file__).resolve().parents[1] / "data" / "cpu"


def _exact_log10_ratio(preds: np.ndarray, ref: np.ndarray) -> float:
    """(k / N) / prod q_i in fractions, then log10: the estimate's definition, computed independently."""
    hits = preds == ref[None, :]
    n = preds.shape[0]
    ratio = Fraction(int(hits.all(axis=1).sum()), n)
    for i in range(ref.size):
        ratio /= Fraction(int(hits[:, i].sum()), n)
    return math.log10(ratio.numerator) - math.log10(ratio.denominator)


def test_one_output_carries_no_evidence():
    rng = np.random.default_rng(3)
    for n, k in ((54, 1), (324, 1), (40, 17), (5, 5)):
        preds = {i: np.array([7 if i < k else rng.integers(8, 12)], np.uint64) for i in range(n)}
        ev = evidence(preds, np.array([7], np.uint64), outputs=1)
        assert ev is not None and ev.matching == k and ev.candidates == n
        assert abs(ev.log10_ratio) < 1e-12 and not ev.enough     # k / N is q_1: the ratio is exactly 1
        assert ev.outputs_needed() is None if k == n else ev.outputs_needed() >= 1


def test_evidence_is_the_likelihood_ratio():
    rng = np.random.default_rng(11)
    for m in (2, 6, 12):
        ref = rng.integers(0, 3, m).astype(np.uint64)
        preds = rng.integers(0, 3, (30, m)).astype(np.uint64)
        preds[:2] = ref                      # two candidates reproduce every output
        ev = evidence(dict(enumerate(preds)), ref, outputs=m)
        assert ev.matching >= 2 and math.isclose(ev.log10_ratio, _exact_log10_ratio(preds, ref), abs_tol=1e-9)
        # the per-output evidence measured on watched rows counts for every output (rows are exchangeable)
        more = evidence(dict(enumerate(preds)), ref, outputs=4 * m)
        assert math.isclose(more.log10_ratio - ev.log10_ratio, 3 * m * ev.per_output, abs_tol=1e-9)
    assert evidence({0: np.array([1, 2], np.uint64)}, np.array([1, 3], np.uint64), 2) is None   # nothing reproduces


def _isa(isa: str):
    d = np.load(DATA / "isa" / f"{isa}.npz")
    return d, json.loads(str(d["meta"]))


@pytest.mark.parametrize("isa", ["avx", "avx2"])
def test_mkl_avx2_dot_of_one_output_is_not_reproduced(isa):
    # before: REPRODUCED as Interleaved(8, halving, fma=False) / Interleaved(4, halving, fma=True), one output
    # matched by chance; one output carries no evidence, so AMBIGUOUS whatever matches it (here also MKL's dot on
    # this AMD CPU, cpuvariants), and the rerun on the separating inputs names the kernel's arithmetic
    d, meta = _isa(isa)
    assert meta["MKL_ENABLE_INSTRUCTIONS"] == "AVX2" and meta["torch"] == "2.13.0+cpu"
    a, b, y = (d[f"fp32__dot_1000_cancel__{k}"] for k in ("A", "B", "torch_dot"))
    rep = identify_order(y, "dot", a, b)
    assert rep.verdict == "AMBIGUOUS" and rep.separating is not None, str(rep)
    assert abs(rep.evidence.log10_ratio) < 1e-9 and rep.evidence.outputs == 1 and not rep.evidence.enough
    amd = O.MklDot(4, 4, fma=False, registers="order", lanes="halves", rest="lane0")
    sep = rep.separating
    named = [n for n, ar in zip(sep.names, sep.arithmetics) if ar.order == amd]
    assert len(named) == 1 and len(sep.calls) >= 16       # outputs enough to confirm, not only to separate
    assert all(u.flags.owndata for u, _ in sep.calls)     # each call its own array (MKL's order follows alignment)
    want = [no.simulate("dot", u, v, arith=sep.arithmetics[sep.names.index(named[0])]) for u, v in sep.calls]
    assert sep.which(np.array(want, np.float32)) == named     # the model's own bits name it alone


@pytest.mark.slow
def test_one_output_with_one_arithmetic_is_too_few():
    # numpy's cumsum of one row of 40000: its last element, one output, one arithmetic reproduces it
    d = np.load(DATA / "fp32.npz")
    x, y = d["sum_1x40000_normal__X"], d["sum_1x40000_normal__numpy_cumsum"]
    rep = identify_order(y, "sum", x)
    assert rep.verdict == "AMBIGUOUS" and rep.weak and len(rep.classes) == 1, str(rep)
    assert abs(rep.evidence.log10_ratio) < 1e-9 and "too few outputs to decide" in rep.headline()
    assert rep.to_dict()["evidence"]["enough"] is False
    sep = rep.separating       # fresh rows on which the one arithmetic predicts bits
    assert len(sep.names) == 1 and sep.inputs[0].shape[0] >= 16 and sep.inputs[0].shape[1] == x.shape[1]
    got = np.concatenate([np.cumsum(r[None, :], axis=-1)[:, -1] for r in sep.inputs[0]])
    assert sep.which(got) == sep.names
    assert sep.which(np.nextafter(got, np.float32(np.inf))) == []


@pytest.mark.parametrize(("isa", "order"), [("avx", O.GotoBlocks(384, O.Interleaved(1, fma=False), 16)),
                                            ("avx2", O.GotoBlocks(320, O.Sequential(), 8))])
def test_many_outputs_stay_reproduced(isa, order):
    d, _ = _isa(isa)
    tag = "fp32__matmul_4x1000x3_cancel"
    a, b, y = d[f"{tag}__A"], d[f"{tag}__B"], d[f"{tag}__numpy_matmul"]
    rep = identify_order(y, "matmul", a, b)          # the open search: 12 outputs
    assert rep.verdict == "REPRODUCED" and rep.order == order and not rep.weak, str(rep)
    assert rep.evidence.enough and rep.evidence.log10_ratio > THRESHOLD + 3, rep.evidence.text()


def test_two_outputs_are_too_few_and_the_rerun_names_it():
    d = np.load(DATA / "fp32.npz")
    x, y = d["sum_2x5000_normal__X"], d["sum_2x5000_normal__numpy_sum"]
    rep = identify_order(y, "sum", x)
    assert rep.verdict == "AMBIGUOUS" and rep.weak and 0 < rep.evidence.log10_ratio < THRESHOLD, str(rep)
    sep = rep.separating
    rows = sep.inputs[0]
    assert rows.shape[0] >= 16 and rows.shape[1] == x.shape[1]
    # numpy's sum on the fresh rows: the candidate named (numpy 2.4.6 on this machine's recording; its pairwise
    # blocks of 8 do not depend on the CPU), in blocks of the recorded 2 rows as the kernel was launched
    got = np.concatenate([np.sum(rows[i:i + 2], axis=-1) for i in range(0, rows.shape[0], 2)])
    assert sep.which(got) == sep.names, str(rep)


def test_a_closed_set_is_not_weighed():
    d, _ = _isa("avx2")
    a, b, y = (d[f"fp32__dot_1000_cancel__{k}"] for k in ("A", "B", "numpy_dot"))
    rep = identify_order(y, "dot", a, b, candidates=[O.OpenBlasDot(4, 8, 0, True, "fp64", "pairwise")])
    assert rep.verdict == "REPRODUCED" and rep.evidence is None and not rep.weak


def test_the_rerun_names_mkl_on_this_cpu():
    # torch's dot rerun on the separating dots: on the recording's AMD CPU (torch 2.13.0+cpu) it is MKL's AMD
    # kernel, not the candidate the one recorded output matched by chance
    d, meta = _isa("avx")
    torch = torch_on_amd(meta["torch"])
    a, b, y = (d[f"fp32__dot_1000_cancel__{k}"] for k in ("A", "B", "torch_dot"))
    rep = identify_order(y, "dot", a, b)
    which = rep.separating.rerun(lambda u, v: torch.dot(torch.from_numpy(u), torch.from_numpy(v)).numpy())
    assert len(which) == 1 and which[0].startswith("MklDot(vec=4"), (which, str(rep))
