"""The one order vocabulary: parse(str(o)) == o for every order class and preset, and the same order text in
simulate, expected_error_bound and the CLI."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle.cli.app import main
from numoracle.formats import FP16, FP32, FP64

EVERY_ORDER = [
    O.Sequential(), O.Pairwise(), O.Blocked(64), O.Blocked(16, O.Pairwise(), O.Sequential(), FP32),
    O.SplitK(4), O.SplitK(3, O.Pairwise(), O.Sequential(), (2, 0, 1), combine_acc=FP16),
    O.BlockFMA(8, 24), O.BlockFMA(32, 13, truncate=False, out_rounding="rne", out_frac_bits=13, carry_bit=False,
                                  acc=FP16),
    O.Promoted(), O.Promoted(64, O.preset("h100", "bf16"), FP32),
    O.NumpyPairwise(), O.NumpyPairwise(8192, FP32, FP16),
    O.TiledSplitK(3, 64), O.TiledSplitK(2, 8, O.preset("h100", "fp16"), O.Pairwise(), FP32),
    O.GpuReduce(), O.GpuReduce(4, 32, 2, 2, "vector"), O.ChunkedScan(64), O.ChunkedScan(32, FP64),
    O.TreeOrder.from_text("((0+1)+(2+3))"),
    O.TreeOrder(9, ((0, 1, 2, 3), (9, 4, 5, 6, 7), (10, 8)), (1, 1, 0),
                ((FP32, "rtz"), O.preset("h100", "fp16")), leaf=FP32, out=FP16),
    O.PerPosition((O.TreeOrder.from_text("((0+1)+2)"), O.TreeOrder.from_text("(0+(1+2))")), ((0, 1), (1, 1))),
    O.VectorCascade(), O.VectorCascade(1, 4, 3, 2, 2), O.ThreadSplit(4, 1024, O.VectorCascade(load=2), O.Sequential()),
    O.Interleaved(16, "pairwise"), O.Interleaved(4, "halving", "after", False), O.XlaChunks(), O.XlaChunks(64, False),
    O.XlaVector(), O.XlaVector(8, 2), O.XlaScan(), O.XlaScan(8, 3),
    O.GotoBlocks(), O.GotoBlocks(256, O.Interleaved(16, "pairwise")),
    O.OpenBlasDot(), O.OpenBlasDot(8, 2, 0, False, None), O.MklDot(), O.MklDot(8, 2),
    O.YnnSum(), O.YnnSum("kn", split=128), O.YnnSum("k1", 8, 2, 32768), O.ChainApart(), O.ChainApart(2, 3, True),
    O.MklSmallGemm(), O.MklSmallGemm(O.Sequential(), O.ChainApart(4, 4, True), 8),
    O.CompensatedTree(O.TreeOrder.from_text("(((0+1)+2)+(3+4))"), ((0, 1),)),
    O.CompensatedTree(O.TreeOrder.from_text("(((0+1)+2)+3)"), ((0, 1, 2),), "neumaier", True, FP64),
]
PRESET_ORDERS = [O.preset(*p.split("/")) for p in O.PRESETS] + [
    O.preset(a, "fp16") for a in O.GPU_ALIASES] + [O.preset("h100", "fp16", out="fp16"),
                                                 O.preset("h100", "fp8", promote=64)]


def test_every_order_class_is_covered():
    from numoracle.models.orders.text import ORDER_CLASSES

    covered = {type(o) for o in EVERY_ORDER}
    assert covered == set(ORDER_CLASSES.values()), "add the new order class to EVERY_ORDER"


@pytest.mark.parametrize("o", EVERY_ORDER + PRESET_ORDERS, ids=str)
def test_parse_inverts_str_and_order_text(o):
    assert O.parse(str(o)) == o
    assert O.parse(O.order_text(o)) == o


def test_presets_are_named_by_their_call():
    assert O.order_text(O.preset("h200", "fp8")) == 'preset("h100", "fp8")'
    assert O.order_text(O.Promoted(64, O.preset("h100", "fp8"), FP32)) == \
        'Promoted(every=64, inner=preset("h100", "fp8"), outer_acc=Format(fp32))'
    assert O.parse("preset:h200/bf16") == O.parse('preset("h100", "bf16")') == O.preset("h100", "bf16")


@pytest.mark.parametrize(("text", "msg"), [
    ("__import__('os').system('true')", "neither a literal nor an order"),
    ("Blocked(b=64, inner=open('x'))", "not an order class"),
    ("Blocked(b=64", "not a constructor call"),
    ("Blocked(bee=64)", "unexpected keyword"),
    ("Format(fp32)", "not an order"),
    ("pairwise:4", "no single evaluation"),
    ("preset:h100", "input format"),
    ("blokced:4", "did you mean 'blocked'"),
])
def test_bad_texts_say_what_to_write(text, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        O.parse(text)


def test_the_same_text_in_simulate_and_the_bounds():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 300)).astype(ml_dtypes.bfloat16)
    cases = [("blocked:64", O.Blocked(64)), ("Blocked(b=64)", O.Blocked(64)), ("pairwise", O.Pairwise()),
             ("preset:h100/bf16", O.preset("h100", "bf16")), ("preset:h100", O.preset("h100", "bf16")),
             ('Promoted(every=128, inner=preset("h100", "bf16"))', O.Promoted(128, O.preset("h100", "bf16")))]
    for text, obj in cases:
        np.testing.assert_array_equal(no.simulate("sum", x, order=text), no.simulate("sum", x, order=obj))
        assert no.expected_error_bound("sum", "bf16", 300, order=text) == \
            no.expected_error_bound("sum", "bf16", 300, order=obj), text


@pytest.mark.parametrize("text", ["blocked:64", "Blocked(b=64)", "preset:h100/bf16"])
def test_the_same_text_in_the_cli(capsys, text):
    assert main(["bound", "sum", "--dtype", "bf16", "-K", "300", "--order", text, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = no.expected_error_bound("sum", "bf16", 300, order=O.parse(text))
    assert float(got["coefficient"]) == float(want.coefficient) and got["depth"] == want.depth


def test_the_same_text_in_the_checks_compare_runs_and_identify():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 256)).astype(np.float16)
    text, obj = "Blocked(b=64, inner=Pairwise())", O.Blocked(64, O.Pairwise())
    y = no.simulate("sum", x, order=obj, acc="fp32").astype(np.float32)
    r_text, r_obj = no.check_sum_close(y, x, order=text), no.check_sum_close(y, x, order=obj)
    assert r_text.passed and r_text.bound == r_obj.bound
    assert str(r_text.power) == str(r_obj.power)      # the detection power simulates the same order
    assert "stand-in" not in str(r_text.power)       # the named order itself, not sequential and pairwise
    rep = no.identify_order(y, "sum", x, candidates=[text, "sequential", "pairwise"])
    assert rep.order == obj
    cmp_text = no.compare_runs(y, y, "sum", x, orders=[text])
    cmp_obj = no.compare_runs(y, y, "sum", x, orders=[obj])
    assert cmp_text.verdict == cmp_obj.verdict == "IDENTICAL"
