"""Orders and order texts whose parameters dwarf the data are refused before they allocate (issue 40, defects 15,
16, 17, 19): each case runs in a child process with 1 GiB of address space and a time limit, so a regression fails
the test (MemoryError, a timeout) instead of exhausting the machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from numoracle.core.errors import NumoracleError
from numoracle.models.engine.simulation import simulate
from numoracle.models.orders import basic as orders
from numoracle.models.orders import blasdot as dotorders
from numoracle.models.orders import cpu as cpuorders
from numoracle.models.orders import gpu as gpuorders
from numoracle.models.orders import tree as treeorder
from numoracle.models.orders import ynnpack as ynnorders
from numoracle.models.orders.text import parse

SRC = Path(__file__).resolve().parents[2] / "src"

_CHILD = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
import numpy as np
from numoracle.models.orders import cpu as cpuorders
from numoracle.models.orders import blasdot as dotorders
from numoracle.models.orders import gpu as gpuorders
from numoracle.models.orders import basic as orders
from numoracle.models.orders import ynnpack as ynnorders
from numoracle.models.orders.text import parse
from numoracle.models.engine.simulation import simulate
ns = {**vars(orders), **vars(gpuorders), **vars(cpuorders), **vars(dotorders), **vars(ynnorders)}
x = np.arange(1, 17, dtype=np.float32)
for line in sys.stdin.read().splitlines():
    kind, text = line.split(" ", 1)
    try:
        if kind == "parse":
            parse(text)
        else:
            o = eval(text, ns)
            simulate("dot", x, x, acc="fp32", order=o) if kind == "dot" else simulate("sum", x[None], acc="fp32",
                                                                                        order=o)
        print("ran", text, flush=True)
    except MemoryError:
        print("memory", text, flush=True)
    except ValueError as e:
        print("refused", type(e).__name__, text, flush=True)
"""


def run_capped(lines: list[str], timeout: float = 120.0) -> list[str]:
    """Each line ("sum <order>", "dot <order>" or "parse <text>") run in one child under 1 GiB of address space."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "NUMORACLE_JIT": "0"}
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD], input="\n".join(lines), capture_output=True, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the child did not finish in {timeout} s (an unbounded order?); it printed {e.stdout!r}")
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.splitlines()


HUGE = [
    "sum SplitK(10**12)", "sum SplitK(10**7)", "sum GpuReduce(vec=10**9)", "sum GpuReduce(lanes=2**40)",
    "sum GpuReduce(warps=2**40)", "sum GpuReduce(blocks=10**12)", "sum GpuReduce(blocks=10**12, layout='unroll')",
    "sum ChunkedScan(2**40)", "sum Interleaved(10**12)", "sum Interleaved(10**12, combine='halving')",
    "sum XlaVector(lanes=10**12)", "sum XlaScan(levels=10**12)", "sum VectorCascade(accumulators=10**12)",
    "sum VectorCascade(levels=10**12, lanes=1)", "sum YnnSum(pack=10**12)", "sum YnnSum(lanes=2**40)",
    "dot MklDot(vec=2**40)", "dot MklDot(accumulators=2**40)", "sum GotoBlocks(q=1, inner=SplitK(10**6))",
    "sum ThreadSplit(inner=SplitK(10**9))",
    "parse TreeOrder(n=1000000000, nodes=((0, 1),))", "parse TreeOrder(n=10**12, nodes=((0, 1),))",
]


def test_huge_parameters_are_refused_before_they_allocate():
    out = run_capped(HUGE)
    assert len(out) == len(HUGE), out
    for line, case in zip(out, HUGE):
        assert line.startswith("refused"), (case, line)


def test_huge_parameters_that_cost_nothing_still_run():
    cases = ["sum TiledSplitK(10**12)", "sum XlaVector(unroll=2**40)", "sum Blocked(10**12)",
             "sum ThreadSplit(threads=10**12)", "sum XlaChunks(chunk=10**12)", "sum YnnSum(split=10**12)"]
    out = run_capped(cases)
    assert [line.split(" ")[0] for line in out] == ["ran"] * len(cases), out


def test_slot_refusal_names_the_order_and_the_fix():
    x = np.ones((1, 16), np.float32)
    with pytest.raises(NumoracleError, match=r"SplitK keeps 100000 slices.*16 terms.*s <= K"):
        simulate("sum", x, acc="fp32", order=orders.SplitK(100_000))


def test_orders_at_the_sizes_kernels_use_still_run():
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    for o in (orders.SplitK(64), gpuorders.GpuReduce(), gpuorders.ChunkedScan(1024), cpuorders.Interleaved(16),
              cpuorders.VectorCascade(), cpuorders.XlaScan(), ynnorders.YnnSum(), gpuorders.GpuReduce(4, 32, 16, 8)):
        y = simulate("sum", x, acc="fp32", order=o)
        assert y.shape == (2,) and np.all(np.isfinite(y))
    assert np.isfinite(simulate("dot", x[0], x[1], acc="fp32", order=dotorders.MklDot()))


def test_tree_order_child_count_is_checked_first():
    with pytest.raises(ValueError, match="cannot be a tree over n = 1000000000"):
        treeorder.TreeOrder(n=1_000_000_000, nodes=((0, 1),))
    assert treeorder.TreeOrder(n=3, nodes=((0, 1), (3, 2))).n == 3


@pytest.mark.parametrize("text", ["Blocked(64, **{'inner': Pairwise()})", "Blocked(**{'b': 64})",
                                  "SplitK(4, **{})"])
def test_parse_refuses_double_star_keywords(text):
    with pytest.raises(ValueError, match=r"\*\*mapping"):
        parse(text)


def test_parse_keeps_written_keywords():
    assert parse("Blocked(64, inner=Pairwise())") == orders.Blocked(64, orders.Pairwise())


@pytest.mark.parametrize("shape, index", [((-1, -2), (0, 1)), ((2**32, 2**32), ()), ((2**62, 4), ()),
                                          ((-(2**32), 2), (0, 1)), ((2.0, 1), (0, 1)), ((True, 2), (0, 1))])
def test_per_position_refuses_shapes_that_wrap_or_are_negative(shape, index):
    with pytest.raises((ValueError, TypeError), match="PerPosition"):
        treeorder.PerPosition((orders.Sequential(), orders.Pairwise()), index, shape)


def test_per_position_of_a_good_shape():
    p = treeorder.PerPosition((orders.Sequential(), orders.Pairwise()), ((0, 1), (1, 0)))
    assert p.shape == (2, 2) and p.order_at(1, 0) == orders.Pairwise()
