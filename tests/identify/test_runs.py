"""compare_runs on split-K runs whose partials met in other orders: ULP counts, summaries, exact explanations."""

from __future__ import annotations

import numpy as np

import numoracle as no
from numoracle import orders as O


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
