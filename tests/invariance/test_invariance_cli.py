"""``numoracle invariance``: the class table, exit status, --json, --factory and usage errors."""

from __future__ import annotations

import json

from numoracle.cli import main

KERNELS = '''
import numpy as np
from numoracle import orders as O
from numoracle.models.engine.simulation import simulate

def split_k(A, B):
    return simulate("matmul", A, B, order=O.SplitK(4) if A.shape[0] < 64 else O.Sequential()).astype(np.float32)

def pairwise(A, B):
    return simulate("matmul", A, B, order=O.Pairwise()).astype(np.float32)

def make_fn(split):
    return lambda A, B: simulate("matmul", A, B, order=O.SplitK(split)).astype(np.float32)
'''


def _file(tmp_path):
    p = tmp_path / "kernels.py"
    p.write_text(KERNELS)
    return str(p)


def test_variant_table_and_status(tmp_path, capsys):
    f = _file(tmp_path)
    assert main(["invariance", f"{f}:split_k", "matmul", "--vary", "M=1:128", "--at", "K=64", "--at", "N=4"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["class", "order", "revealed", "at", "tried"]
    assert "threshold M: 63 -> 64" in out and "CONFIRMED" in out and "M: 64..65, 71..73" in out


def test_invariant_json(tmp_path, capsys):
    f = _file(tmp_path)
    assert main(["invariance", f"{f}:pairwise", "matmul", "--vary", "M=1,2,3,64", "--at", "K=64", "--at", "N=4",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] == "INVARIANT" and d["reveals"] == 1 and d["not_claimed"] == 0


def test_factory_and_errors(tmp_path, capsys):
    f = _file(tmp_path)
    assert main(["invariance", f"{f}:make_fn", "matmul", "--factory", "--vary", "split=1,4", "--at", "K=64",
                 "--at", "N=4"]) == 1
    assert "threshold split: 1 -> 4" in capsys.readouterr().out
    assert main(["invariance", f"{f}:pairwise", "matmul", "--at", "K=64", "--at", "N=4"]) == 2
    assert "--vary" in capsys.readouterr().err
    assert main(["invariance", f"{f}:pairwise", "matmul", "--vary", "M=1:x", "--at", "K=64"]) == 2
    assert main(["invariance", f"{f}:pairwise", "matmul", "--vary", "M=1:4"]) == 2
    assert "K" in capsys.readouterr().err


SOFTMAX = '''
import numpy as np
from numoracle.composite import simulate_softmax
from numoracle.orders import Interleaved, Sequential

def switching(X):
    return simulate_softmax(X, Sequential() if X.shape[0] < 8 else Interleaved(8, combine="halving")).astype(np.float32)
'''


def test_composite_op_table_and_json(tmp_path, capsys):
    p = tmp_path / "softmax_kernels.py"
    p.write_text(SOFTMAX)
    assert main(["invariance", f"{p}:switching", "softmax", "--vary", "M=1:16", "--at", "K=40"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["class", "outputs", "first", "seen", "at", "tried"]
    assert "threshold M: 7 -> 8" in out and "CONFIRMED" in out and "model Sequential()" in out
    assert main(["invariance", f"{p}:switching", "softmax", "--vary", "M=1,2,3", "--at", "K=40", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] == "INVARIANT" and d["reveals"] == 0 and d["matches"] == 3
