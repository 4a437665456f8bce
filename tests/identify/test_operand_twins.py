"""identify_order does not drop an operand rounding that reads the same values as another on the given inputs
(issue 40, defect 3): a TF32 kernel rounding ties away (rna) on inputs without a TF32 tie is AMBIGUOUS between
rna and rne, with separating inputs (ties) that name it; on inputs with ties it is REPRODUCED with rna."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle.identify.search import identify_order
from numoracle.identify.separate import separating_inputs

TIE = 0x1000        # FP32 bits below TF32's last bit: exactly half of it


def _inputs(ties: bool, seed: int = 0, M: int = 16, K: int = 128, N: int = 8):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    for x in (a, b):
        u = x.view(np.uint32)
        u[(u & 0x1FFF) == TIE] ^= 1                        # no tie anywhere
    if ties:                                                # a tie in a quarter of a's terms
        u = a.view(np.uint32)
        pick = rng.random(u.shape) < 0.25
        u[pick] = (u[pick] & ~np.uint32(0x1FFF)) | TIE
    return a, b


def _kernel(rounding: str):
    arith = no.Arithmetic(order=O.preset("h100", "tf32"), operands="tf32", operands_rounding=rounding)
    return lambda a, b: no.simulate("matmul", a, b, arith=arith).astype(np.float32)


@pytest.mark.parametrize("rounding", ["rna", "rne"])
def test_tie_free_inputs_are_ambiguous_between_roundings_and_separating_inputs_settle_it(rounding):
    a, b = _inputs(ties=False)
    kernel = _kernel(rounding)
    rep = identify_order(kernel(a, b), "matmul", a, b)
    assert rep.verdict == "AMBIGUOUS", str(rep)
    reads = {c.operands for cls in rep.classes for c in cls}
    assert {("tf32", "rne"), ("tf32", "rna")} <= reads, reads
    named = rep.separating.rerun(kernel)
    assert len(named) == 1 and f"({rounding})" in named[0], named


def test_inputs_with_ties_reproduce_rna():
    a, b = _inputs(ties=True)
    rep = identify_order(_kernel("rna")(a, b), "matmul", a, b)
    assert rep.verdict == "REPRODUCED", str(rep)
    assert rep.winner.operands == ("tf32", "rna") and rep.order == O.preset("h100", "tf32")


def test_separating_inputs_hold_ties_of_the_operand_format():
    arith = no.Arithmetic(order=O.preset("h100", "tf32"), operands="tf32", operands_rounding="rne", acc="fp32")
    sep = separating_inputs([arith, arith.replace(operands_rounding="rna")], "matmul", (8, 64, 4), "fp32")
    assert sep.separated
    assert ((sep.inputs[0].view(np.uint32) & 0x1FFF) == TIE).any()
