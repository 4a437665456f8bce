"""Bit-exact simulation of order-controlled reductions: sum, dot, matmul (docs/architecture.md).

``simulate(op, *inputs, acc=FP32, order=Sequential(), rounding="rne", fma=True, out=None)`` returns
what a kernel that accumulates in ``acc`` along ``order`` computes, as exact float64 values (or
codes). The inputs are decoded exactly; products of inputs are exact in float64 (p_a + p_b <= 53);
every rounding step is exact (numoracle.models.engine.accumulate). The order is compiled once per (order, K) into
waves of independent steps (numoracle.orders), each run as one numpy operation across all outputs.

Each addition gets the cheapest exact method (``_plan``): "direct" when fl64(x + y) is exact or a
second rounding to nearest is innocuous, "odd" (round-to-odd at 53 bits where s lands on a critical
point) otherwise, "f64" for an FP64 accumulator. Runs of ``s = fl(s + t)`` (sequential chains, also
the blocks of Blocked and numpy's eight accumulators) run in float32 when every operand is an FP32
number: plain IEEE float32 addition for an FP32 accumulator with RNE, ``Arith.add32`` for formats of
at most 23 bits. Wide waves and large batches are cut into cache-sized pieces. The order compiles to a
program of typed steps (models/engine/program.py, models/engine/steps.py); models/engine/dispatch.py decides, step by
step,
whether the numpy reference (models/engine/numpysteps.py) or, with numba installed and enough work, a compiled
kernel runs it (models/kernels/chain.py, jitblock.py, jitblockrun.py: the same bits, tested against numpy).

>>> import numpy as np
>>> float(simulate("sum", np.ones(4096, np.float16), acc="fp16"))
2048.0
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core import jit
from ...core.engine.convert import cast, decode
from ...core.formats.format import FP32, FP64, Format, format_of
from ...core.formats.policy import Rounding
from ...core.fpmode import require_ieee
from ..arithmetic import Arithmetic, takes_arithmetic
from ..orders.basic import Order, Sequential
from ..orders.text import as_order
from . import numpysteps
from .dispatch import assign
from .program import prepare
from .sources import read_sources
from .steps import BlockRun, BlockStep, Context, Program

__all__ = ["simulate"]

_LABELLED = (numpysteps.RUNNERS[BlockStep], numpysteps.RUNNERS[BlockRun])   # numpy steps reading labels
_BUDGET = 96 << 20       # bytes of the value buffer (all live slots) per batch chunk
_MAX_CHUNK = 1 << 17     # outputs per chunk


def _work(inputs: tuple) -> int:
    """The call's element steps from the inputs' shapes, as the run decides them: m K n of a matmul, the size
    of a sum's or a dot's inputs; 0 for inputs without a shape (lists: read on the numpy path)."""
    shapes = [getattr(x, "shape", None) for x in inputs]
    if not all(isinstance(s, tuple) for s in shapes):    # (torch.Size is a tuple; read_sources checks the rest)
        return 0
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    if len(shapes) == 2 and len(shapes[0]) == 2 and len(shapes[1]) == 2:
        return sizes[0] * int(shapes[1][1])
    return max(sizes)


def _run(prog: Program, src, sub_inputs: bool) -> np.ndarray:
    """The program on every output, in chunks of the batch whose value buffer stays within _BUDGET; each
    step by the backend models/engine/dispatch.py assigns it."""
    runners = assign(prog.steps, program=prog)
    if any(run in _LABELLED for _, run in runners):     # (the kernels make their own)
        src.prepare_labels()
    if any(st.float32() for st in prog.steps):
        src.prepare_f32()
    ctx = Context(src, sub_inputs)
    shapes = [st.shape() for st in prog.steps] or [(1, 1)]
    per_row = max(n for _, n in shapes)
    width = max(w for w, _ in shapes)
    per_chunk = min(_MAX_CHUNK, _BUDGET // (8 * (prog.nslots + 2 * width)), max(numpysteps.PASS // per_row, 1))
    chunk = max(1, per_chunk // src.unit)
    out = np.empty(src.units * src.unit)
    for lo in range(0, src.units, chunk):
        hi = min(lo + chunk, src.units)
        sub = src.view(lo, hi)
        V = np.empty((prog.nslots, (hi - lo) * src.unit))
        for st, run in runners:
            V[st.dst] = run(st, V, sub, ctx)
        out[lo * src.unit:hi * src.unit] = V[prog.result]
    return out


# ======================================================================================================
# Public entry point
# ======================================================================================================

@takes_arithmetic
def simulate(op: str, *inputs: Any, arith: Arithmetic | None = None, acc: Any = None,
             order: Order | str | None = None, rounding: Any = "rne", fma: bool = True, out: Any = None,
             out_rounding: Any = None, ftz: bool = False, codes: bool = False) -> np.ndarray:
    """Bit-exact result of a reduction under an accumulation model.

    op: "sum" (one array, reduce its last axis), "dot" (two 1-D arrays), "matmul" (A (m, K) @ B (K, n)).
    inputs: numpy float16/32/64, ml_dtypes (bfloat16, float8_*, ...) or torch arrays; values are exact.
    arith: a numoracle.Arithmetic (e.g. an identify_order report's ``.arithmetic``) in place of the keywords
      acc, order, rounding, fma, out, out_rounding, ftz (and its operands: inputs rounded as the kernel reads them).
    acc: accumulator format (FP32 default, or the order's own, e.g. a preset's); any float format with
      p <= 51 (FP32, TF32, FP16, BF16, FP8 ...) or FP64.
    order: numoracle.orders Order or its text (numoracle.orders.parse: 'pairwise', 'blocked:64',
      'preset:h100/fp8', str(order)); default Sequential().
    rounding: mode of every accumulation step (the order's own steps, e.g. BlockFMA's output, keep theirs).
    fma: True: a term (input, or exact product) enters its first addition exact: for a sequential dot
      product that is an FMA chain; in a tree two terms meet as fl(t_i + t_j), one rounding. False: a
      term is first rounded to the accumulator (multiply, round, add). BlockFMA ignores it.
    out: round the accumulated result once more to this format (with ``out_rounding``, default
      ``rounding``), e.g. acc=FP32, out=BF16 for a kernel that stores bf16.
    ftz: flush subnormal results of every rounding step to zero (sign kept).
    codes: return codes of ``out`` (or of the result's format) instead of float64 values.

    NaN and inf propagate as in IEEE 754 (inf - inf = NaN). Returns a float64 array (or codes) of
    the output shape: op "sum": x.shape[:-1]; "dot": (); "matmul": (m, n).

    >>> import ml_dtypes
    >>> from numoracle import orders
    >>> a = np.array([1, 2**-12, 2**-12, 2**-12], np.float16)
    >>> float(simulate("dot", a, a, order=orders.preset("v100", "fp16")))   # 2^-24 terms truncate away
    1.0
    >>> float(simulate("dot", a, a, acc="fp32", rounding="ru"))
    1.0000003576278687
    """
    if not isinstance(op, str):
        raise TypeError(f"op must be 'sum', 'dot' or 'matmul', got {type(op).__name__}")
    require_ieee("simulate")
    with jit.for_work(_work(inputs)):           # (the inputs' reading takes kernels where the call will)
        src, shape, K, fmts, sub_inputs = read_sources(op, inputs)
    order = as_order(order, fmts[0] if fmts else None, default=Sequential())
    if getattr(order, "per_position", False):   # a PerPosition order: one simulate per distinct order
        return order.simulate_positions(simulate, op, inputs, acc=acc, rounding=rounding, fma=fma, out=out,
                                        out_rounding=out_rounding, ftz=ftz, codes=codes)
    if acc is not None:
        acc = format_of(acc)
        if not isinstance(acc, Format):
            raise ValueError(f"acc must be a float format; {acc.name} is an integer format")
        if order.acc is not None and order.acc != acc:
            raise ValueError(f"acc={acc.name} conflicts with the order's own accumulator {order.acc.name}")
    acc = acc or order.acc or FP32
    mode = Rounding.of(rounding)
    if mode is Rounding.STOCHASTIC:
        raise ValueError("rounding='sr' is not modelled (each step would need its own random bits)")
    prog = prepare(order, K, acc, mode, bool(fma), bool(ftz), src)
    with np.errstate(all="ignore"), jit.for_work(int(np.prod(shape, dtype=np.int64)) * max(K, 1)):
        vals = _run(prog, src, sub_inputs).reshape(shape)
    if out is not None:
        out = format_of(out)
        c = cast(vals.view(np.uint64), out, src=FP64, rounding=out_rounding or rounding, ftz=ftz)
        return c if codes else decode(c, out)
    if codes:
        return cast(vals.view(np.uint64), prog.fmt, src=FP64)
    return vals
