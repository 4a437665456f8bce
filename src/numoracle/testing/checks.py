"""Checks for kernels: ``assert_*_close`` against exact references and error bounds.

``check_matmul_close(actual, A, B, acc="fp32")`` computes the exact product (correctly rounded to
float64, and to the output format), the error bound of ``expected_error_bound`` for the inputs'
format, K and accumulator, evaluated elementwise on these inputs (``ErrorBound.tolerance``), and
returns a :class:`CloseReport`. An element passes when ``|actual - exact| <= bound`` or when it is
bit-identical to the exact result correctly rounded to the output format (``out`` if given, else
the format of ``actual``). The check fails when more than ``allow_outliers`` elements fail, and
always when the bound is vacuous (coefficient >= 1). ``assert_*_close`` raise
:class:`NumoracleAssertionError` (an ``AssertionError``) with the compact report as its message
(``msg=``, ``verbose=``) and the report as ``.report``. Comparing two runs of a kernel is
:mod:`numoracle.testing.runs` (``compare_runs``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.args import check_int
from ..core.asserting import asserting
from ..core.errors import NumoracleAssertionError
from ..core.formats.format import FP32
from ..models.arithmetic import Arithmetic, takes_arithmetic
from .checkpower import detection_power
from .closeproblem import Problem as _Problem
from .closereport import CloseReport, Element
from .judge import Setup, ulp_format_of, worst_first
from .poison import poison_code, poison_like, poison_mask

__all__ = ["check_sum_close", "check_dot_close", "check_matmul_close", "assert_sum_close", "assert_dot_close",
           "assert_matmul_close", "CloseReport", "Element", "poison_like", "poison_mask", "poison_code",
           "NumoracleAssertionError"]


def _check(op: str, actual: Any, inputs: tuple, *, axis: int = -1, acc: Any, order: Any, kind: str, out: Any,
           allow_outliers: int, confidence: float, fma: bool, rounding: Any, show: int, ftz: bool = False,
           daz: bool = False) -> CloseReport:
    check_int(allow_outliers, "allow_outliers", 0)
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a string ('worst' or 'probabilistic'), got {type(kind).__name__}")
    check_int(show, "show", 0)
    if daz:
        raise ValueError("daz=True (subnormal inputs read as zero) is not modelled by the bounds; flush the inputs "
                         "yourself (the check then compares against their exact result), or pass daz=False")
    pb = _Problem(op, inputs, axis)
    codes, afmt = pb.actual(actual)
    order = None if order == "any" else order
    st = Setup(pb, afmt, acc=acc, order=order, kind=kind, out=out, fma=fma, rounding=rounding,
                confidence=confidence, ftz=ftz)
    ufmt = ulp_format_of(codes, afmt, out, acc)
    if ufmt is not None:
        st.count_ulps_in(ufmt)
    j = st.judge(codes, afmt)
    n_fail = int((~j.ok).sum())
    shape = tuple(pb.shape)
    worst = [st.element(j, int(i), shape) for i in worst_first(j, show)]
    imax = int(np.argmax(j.ratio)) if j.ratio.size else None
    nf = np.flatnonzero(j.bad_nonfinite)
    passed = n_fail <= allow_outliers and not st.bound.vacuous
    return CloseReport(op, passed, int(codes.size), n_fail, int(allow_outliers), st.bound,
                       float(j.ratio[imax]) if imax is not None else 0.0,
                       tuple(int(t) for t in np.unravel_index(imax, shape)) if imax is not None else None,
                       worst, st.ofmt, [tuple(int(t) for t in np.unravel_index(i, shape)) for i in nf[:10]],
                       int(nf.size), lambda: detection_power(pb.op, pb.inputs, pb.work_shape, pb.K, st.exact, st.tol,
                                                             st.ofmt, acc=acc, order=order, kind=kind, fma=fma,
                                                             rounding=rounding, confidence=confidence, dtype=pb.dtype,
                                                             bound_c=st.bound.coefficient_float),
                       ulp_format=ufmt or st.ofmt)


@takes_arithmetic
def check_sum_close(actual: Any, x: Any, arith: Arithmetic | None = None,
                    *, axis: int = -1, acc: Any = FP32, order: Any = "any", kind: str = "worst",
                    out: Any = None, allow_outliers: int = 0, confidence: float = 0.999, fma: bool = True,
                    rounding: Any = "rne", show: int = 10, ftz: bool = False, daz: bool = False) -> CloseReport:
    """Check ``actual`` = the sum of ``x`` over ``axis`` against the exact sum and its error bound.

    acc: the kernel's accumulator; order: its order ("any" = the worst over all orders, or a string /
    ``numoracle.orders`` object); kind: "worst" or "probabilistic" (with ``confidence``); out: the output
    format (default: ``actual``'s). allow_outliers: how many elements may exceed the bound. show: how many
    worst elements the report lists. ftz: the kernel flushes subnormal results to zero (the bound gains
    min normal per operation, ``numoracle.ftzbound``); daz (subnormal inputs read as zero) is refused.
    ``report.explain()`` adds what the check can detect (``report.power``). ValueError: shapes, NaN/inf inputs.
    """
    return _check("sum", actual, (x,), axis=axis, acc=acc, order=order, kind=kind, out=out,
                  allow_outliers=allow_outliers, confidence=confidence, fma=fma, rounding=rounding, show=show,
                  ftz=ftz, daz=daz)


def _two_operand_check(op: str, what: str) -> Callable[..., CloseReport]:
    """check_dot_close and check_matmul_close: one signature, the operation and its docstring apart."""

    @takes_arithmetic
    def check(actual: Any, a: Any, b: Any, arith: Arithmetic | None = None,
              *, acc: Any = FP32, order: Any = "any", kind: str = "worst",
              out: Any = None, allow_outliers: int = 0, confidence: float = 0.999, fma: bool = True,
              rounding: Any = "rne", show: int = 10, ftz: bool = False, daz: bool = False) -> CloseReport:
        return _check(op, actual, (a, b), acc=acc, order=order, kind=kind, out=out, allow_outliers=allow_outliers,
                      confidence=confidence, fma=fma, rounding=rounding, show=show, ftz=ftz, daz=daz)

    check.__name__ = check.__qualname__ = f"check_{op}_close"
    check.__doc__ = f"Check ``actual`` = {what} (see :func:`check_sum_close`)."
    return check


check_dot_close = _two_operand_check("dot", "the dot products of ``a`` and ``b`` over their last axis")
check_matmul_close = _two_operand_check("matmul", "``a @ b`` (numpy matmul shapes)")
assert_sum_close = asserting(check_sum_close)
assert_dot_close = asserting(check_dot_close)
assert_matmul_close = asserting(check_matmul_close)
