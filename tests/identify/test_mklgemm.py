"""MKL's small sgemm as torch 2.13.0+cpu's ``torch.mm`` calls it on an AMD EPYC (Zen 5): ``MklSmallGemm``
(models/orders/mklgemm.py), fitted on other data (seeds 0 .. 5) and checked here on tests/data/cpu/mkl_sgemm.npz
(benches/record_mkl_sgemm.py, seeds 20 ..) and, where torch 2.13.0+cpu runs on an AMD CPU, on fresh data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle.identify.cpuvariants import variant_orders, variants_of
from numoracle.identify.search import identify_order
from optional import torch_on_amd

DATA = Path(__file__).resolve().parents[1] / "data" / "cpu" / "mkl_sgemm.npz"
MKL = O.MklSmallGemm()


def _recorded():
    d = np.load(DATA)
    tags = sorted({k.split("__")[0] for k in d.files if "__" in k})
    return d, json.loads(str(d["meta"])), tags


def _sim(a, b, order):
    return np.asarray(no.simulate("matmul", a, b, order=order, out="fp32"), np.float32)


def _by_hand(a, b, mask):
    """Each output in float32 numpy: products rounded; bulk a chain; edge blocks of 8 (4 chained, 4 apart)."""
    p = (a[:, None, :] * b.T[None, :, :]).astype(np.float32)
    out = np.zeros(p.shape[:2], np.float32)
    K = p.shape[2]
    for i, j in np.ndindex(*out.shape):
        s, k = np.float32(0), 0
        if mask[i, j]:
            while k + 8 <= K:
                for t in p[i, j, k:k + 4]:
                    s = np.float32(s + t)
                part = p[i, j, k + 4]
                for t in p[i, j, k + 5:k + 8]:
                    part = np.float32(part + t)
                s, k = np.float32(s + part), k + 8
        for t in p[i, j, k:]:
            s = np.float32(s + t)
        out[i, j] = s
    return out


def test_edge_positions_follow_the_alignment_of_c():
    m = MKL.edge_mask((8, 6))          # rows start at 6 i: odd rows 2 elements before an aligned address
    assert m[1::2, :2].all() and m.sum() == 8
    m = MKL.edge_mask((9, 9))          # row i starts at 9 i = i mod 4: 3, 2, 1 peeled elements
    assert [int(r.sum()) for r in m] == [0, 3, 2, 1, 0, 3, 2, 1, 0]
    assert not MKL.edge_mask((5, 5))[1].any()      # 3 peeled, 2 left (< 4): the row is all bulk
    assert MKL.edge_mask((5, 5))[3, 0] and MKL.edge_mask(()).shape == ()
    assert O.parse(str(MKL)) == MKL and O.parse(str(O.ChainApart())) == O.ChainApart()
    with pytest.raises(ValueError, match="align"):
        O.MklSmallGemm(align=0)
    with pytest.raises(ValueError, match="chained"):
        O.ChainApart(chained=0)


def test_model_is_the_recorded_torch_mm():
    d, meta, tags = _recorded()
    assert meta["torch"] == "2.13.0+cpu" and meta["cpu"] == "AMD EPYC" and len(tags) == 7
    edge_only = bulk_only = 0
    for tag in tags:
        a, b, y = d[f"{tag}__A"], d[f"{tag}__B"], d[f"{tag}__Y"]
        assert (_sim(a, b, MKL).view(np.uint32) == y.view(np.uint32)).all(), tag
        assert (_by_hand(a, b, MKL.edge_mask(y.shape)).view(np.uint32) == y.view(np.uint32)).all(), tag
        bulk_only += (_sim(a, b, MKL.bulk) != y).any()
        edge_only += (_sim(a, b, MKL.edge) != y).any()
    # both orders are needed: the bulk alone fails on 5 of the 7 shapes, the edge alone on all of them
    assert bulk_only == 5 and edge_only == 7


def test_identify_names_the_variant_on_the_recording():
    d, _, _ = _recorded()
    a, b, y = d["8x256x6__A"], d["8x256x6__B"], d["8x256x6__Y"]
    rep = identify_order(y, "matmul", a, b)
    assert rep.verdict == "REPRODUCED" and rep.order == MKL, rep
    assert [v.kernel for v in variants_of(MKL)] == ["sgemm (small)"] and MKL in variant_orders()


def test_model_on_fresh_data():
    # the live kernel, where it is the recording's: torch 2.13.0+cpu on an AMD CPU (fresh seed 31)
    torch = torch_on_amd()
    rng = np.random.default_rng(31)
    for m, k, n in [(8, 256, 6), (11, 53, 7), (2, 95, 13), (16, 30, 11), (6, 1500, 5)]:
        a = (rng.standard_normal((m, k)) * np.exp2(rng.integers(-8, 9, (m, k)))).astype(np.float32)
        b = (rng.standard_normal((k, n)) * np.exp2(rng.integers(-8, 9, (k, n)))).astype(np.float32)
        y = torch.mm(torch.from_numpy(a), torch.from_numpy(b)).numpy()
        assert (_sim(a, b, MKL).view(np.uint32) == y.view(np.uint32)).all(), (m, k, n)


def test_rows_pruned_and_splits_keep_positions():
    # more rows than identify's prune_rows (8): the candidate is scored on a subset of rows, placed in the whole
    # output (its order depends on the row); a NOT-REPRODUCED search never splits K under a per-position unit
    d, _, _ = _recorded()
    a, b, y = d["9x64x9__A"], d["9x64x9__B"], d["9x64x9__Y"]
    rep = identify_order(y, "matmul", a, b, prune_rows=4)
    assert rep.verdict == "REPRODUCED" and rep.order == MKL, rep


@pytest.mark.slow
def test_a_search_that_fails_goes_through_splits_with_pruned_rows():
    d, _, _ = _recorded()
    a, b, y = d["9x64x9__A"], d["9x64x9__B"], d["9x64x9__Y"]
    flipped = y.copy()
    flipped.view(np.uint32)[1, 0] ^= 1                # no order reproduces this: the search goes through splits
    rep = identify_order(flipped, "matmul", a, b, prune_rows=4, keep=40, max_candidates=5000)
    assert rep.verdict != "REPRODUCED"
