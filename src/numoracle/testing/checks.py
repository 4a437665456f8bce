"""Checks for kernels: ``assert_*_close`` against exact references and error bounds, and run comparisons.

``check_matmul_close(actual, A, B, acc="fp32")`` computes the exact product (correctly rounded to
float64, and to the output format), the error bound of ``expected_error_bound`` for the inputs'
format, K and accumulator, evaluated elementwise on these inputs (``ErrorBound.tolerance``), and
returns a :class:`CloseReport`. An element passes when ``|actual - exact| <= bound`` or when it is
bit-identical to the exact result correctly rounded to the output format (``out`` if given, else
the format of ``actual``). The check fails when more than ``allow_outliers`` elements fail, and
always when the bound is vacuous (coefficient >= 1). ``assert_*_close`` raise
:class:`NumoracleAssertionError` (an ``AssertionError``) with the compact report as its message
(``msg=``, ``verbose=``) and the report as ``.report``. ``compare_runs(a, b, op, *inputs)`` tells
apart two runs that are bit-identical, differ as reorderings explain, differ in a way no order
explains, or still hold the poison pattern (``poison_like``) somewhere.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from ..bounds.expected import ErrorBound, expected_error_bound
from ..core.args import check_int
from ..core.codekeys import is_nan, to_key
from ..core.convert import cast, decode
from ..core.errors import NumoracleAssertionError
from ..core.formats import FP32, FP64, AnyFormat, Format, format_of
from ..models.arithmetic import Arithmetic, takes_arithmetic
from .checkpower import detection_power
from .closeproblem import Problem as _Problem
from .closeproblem import exact_value as _exact_value
from .closereport import CloseReport, Element, element_table, vacuous_text
from .poison import poison_code, poison_like, poison_mask, ranges_text

__all__ = ["check_sum_close", "check_dot_close", "check_matmul_close", "assert_sum_close", "assert_dot_close",
           "assert_matmul_close", "CloseReport", "Element", "poison_like", "poison_mask", "poison_code",
           "compare_runs", "RunComparison", "VERDICTS", "NumoracleAssertionError"]

VERDICTS = ("IDENTICAL", "REORDERING", "UNEXPLAINED", "UNWRITTEN")


def _ulps(ka: np.ndarray, ke: np.ndarray, ofmt: AnyFormat) -> np.ndarray:
    """Signed ULP distances of keys (-0 and +0 count as one point)."""
    d = ka - ke
    if isinstance(ofmt, Format) and ofmt.has_negative_zero:
        d = np.where((ka < 0) & (ke >= 0), d + 1, np.where((ka >= 0) & (ke < 0), d - 1, d))
    return d


class _Judged(NamedTuple):
    vals: np.ndarray
    ok: np.ndarray
    bad_nonfinite: np.ndarray
    err: np.ndarray
    ratio: np.ndarray
    ulps: np.ndarray
    ulp_known: np.ndarray


class _Setup:
    """Reference, output format, bound and elementwise tolerance of a problem."""

    def __init__(self, pb: _Problem, afmt: AnyFormat, *, acc: Any, order: Any, kind: str, out: Any, fma: bool,
                 rounding: Any, confidence: float, orders: list | None = None, ftz: bool = False) -> None:
        self.pb = pb
        self.ofmt = format_of(out) if out is not None else afmt
        bout = self.ofmt if isinstance(self.ofmt, Format) else None
        shape = tuple(pb.shape) if kind == "probabilistic" and pb.shape else None
        self.bounds: list[ErrorBound] = [
            expected_error_bound(pb.op, pb.dtype, pb.K, acc=acc, order=o, fma=fma, kind=kind, confidence=confidence,
                                 out=bout, shape=shape, rounding=rounding, ftz=ftz) for o in (orders or [order])]
        self.bound = self.bounds[0]
        try:  # one exact product, rounded to float64 and to the output format
            self.exact, ex_out = pb.expected(FP64, self.ofmt)
            self.out_exact = True
        except ValueError:  # a destination that round-to-odd float64 cannot serve: round the float64 result
            self.exact, = pb.expected(FP64)
            ex_out, self.out_exact = self.exact, False
        with np.errstate(all="ignore"):
            self.exact_codes = np.asarray(cast(ex_out, self.ofmt)).reshape(-1)
        ref = self.exact.reshape(pb.work_shape)
        tols = [np.asarray(b.tolerance(*pb.inputs, reference=ref), np.float64).reshape(-1) for b in self.bounds]
        self.tol = np.maximum.reduce(tols) if len(tols) > 1 else tols[0]

    def judge(self, codes: np.ndarray, afmt: AnyFormat) -> _Judged:
        vals = np.asarray(decode(codes, afmt)).astype(np.float64)
        if afmt == self.ofmt:
            oc = codes.astype(np.uint64)
        else:
            with np.errstate(all="ignore"):
                oc = np.asarray(cast(codes, self.ofmt, src=afmt)).astype(np.uint64).reshape(-1)
        same = oc == self.exact_codes.astype(np.uint64)
        if not self.out_exact:
            same &= False
        ulps, ulp_known = self._ulp_distances(codes, afmt, oc)
        with np.errstate(all="ignore"):
            err = np.abs(vals - self.exact)
            err = np.where(np.isnan(err), np.inf, err)
            ratio = np.where(err == 0, 0.0, err / self.tol)
        fin_exact = np.isfinite(self.exact)
        nonfinite = ~np.isfinite(vals) & fin_exact & ~same
        within = err <= self.tol
        # err = fl(|actual - fl64(exact)|) is off by at most 2^-53 (err + |exact|) plus the float64 underflow
        # unit: where |err - tol| is that close, settle the element with the exact rational result
        with np.errstate(all="ignore"):
            slack = np.ldexp(np.maximum(np.abs(self.exact), err), -50) + np.ldexp(1.0, -1070)
            near = fin_exact & np.isfinite(vals) & np.isfinite(self.tol) & ~same & (np.abs(err - self.tol) <= slack)
        for i in np.flatnonzero(near):
            v = _exact_value(np.asarray(decode(codes[i:i + 1], afmt))[0])
            within[i] = abs(v - self.pb.exact_at(int(i))) <= Fraction(float(self.tol[i]))
        ok = (within & fin_exact & np.isfinite(vals)) | same
        return _Judged(vals, ok, nonfinite, err, ratio, ulps, ulp_known)

    def count_ulps_in(self, fmt: AnyFormat) -> None:
        """Count ULPs in ``fmt`` (values the output holds exactly) rather than in the output format."""
        self.ufmt = fmt
        with np.errstate(all="ignore"):
            self.exact_ucodes = np.asarray(cast(self.pb.expected(fmt)[0], fmt)).reshape(-1).astype(np.uint64)

    def _ulp_distances(self, codes: np.ndarray, afmt: AnyFormat, oc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f = getattr(self, "ufmt", self.ofmt)
        if f == self.ofmt:
            uc, ec = oc, self.exact_codes.astype(np.uint64)
        else:
            with np.errstate(all="ignore"):
                uc = np.asarray(cast(codes, f, src=afmt)).astype(np.uint64).reshape(-1)
            ec = self.exact_ucodes
        known = ~is_nan(uc, f) & ~is_nan(ec, f)
        return _ulps(to_key(np.where(known, uc, 0), f), to_key(np.where(known, ec, 0), f), f), known


    def element(self, j: _Judged, i: int, shape: tuple[int, ...]) -> Element:
        idx = tuple(int(t) for t in np.unravel_index(i, shape)) if shape else ()
        return Element(idx, float(j.vals[i]), float(self.exact[i]), float(j.err[i]), float(self.tol[i]),
                       float(j.ratio[i]), int(j.ulps[i]) if j.ulp_known[i] else None, bool(j.ok[i]))


def _ulp_format(codes: np.ndarray, afmt: AnyFormat, out: Any, acc: Any) -> AnyFormat | None:
    """The accumulator's format when the output is a wider float array that holds only its values (``simulate``
    returns float64 holding FP32 results): ULPs of that format say more than float64 ULPs. None otherwise."""
    try:
        fa = format_of(acc)
    except (TypeError, ValueError):
        return None
    if out is not None or not isinstance(fa, Format) or not isinstance(afmt, Format) or fa.bits >= afmt.bits:
        return None
    with np.errstate(all="ignore"):
        back = cast(cast(codes, fa, src=afmt), afmt, src=fa)
    fin = ~is_nan(codes, afmt)
    return fa if bool(np.all(np.asarray(back)[fin] == codes[fin])) else None

def _order_worst(j: _Judged, k: int) -> np.ndarray:
    """Flat indices of the k worst elements: failing first, then by error/bound (ties: by index).

    Only the candidates that can be among the k (found with a partition, ties and NaN kept) are
    sorted: the order is that of a full sort of every element.
    """
    if k <= 0 or j.ok.size == 0:
        return np.zeros(0, np.intp)
    neg = -j.ratio
    cand = np.flatnonzero(~j.ok)
    if cand.size > k:
        cand = cand[_smallest(neg[cand], k)]
    elif cand.size < k:
        rest = np.flatnonzero(j.ok)
        cand = np.union1d(cand, rest[_smallest(neg[rest], k - cand.size)])
    return cand[np.lexsort((neg[cand], j.ok[cand]))][:k]


def _smallest(v: np.ndarray, k: int) -> np.ndarray:
    """Indices (ascending) of the entries of v that a sort could put among its first k: every entry
    at or below the k-th smallest value (NaN sorts last)."""
    if k >= v.size:
        return np.arange(v.size)
    t = np.partition(v, k - 1)[k - 1]
    return np.arange(v.size) if np.isnan(t) else np.flatnonzero(v <= t)


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
    st = _Setup(pb, afmt, acc=acc, order=order, kind=kind, out=out, fma=fma, rounding=rounding,
                confidence=confidence, ftz=ftz)
    ufmt = _ulp_format(codes, afmt, out, acc)
    if ufmt is not None:
        st.count_ulps_in(ufmt)
    j = st.judge(codes, afmt)
    n_fail = int((~j.ok).sum())
    shape = tuple(pb.shape)
    worst = [st.element(j, int(i), shape) for i in _order_worst(j, show)]
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


@takes_arithmetic
def check_dot_close(actual: Any, a: Any, b: Any, arith: Arithmetic | None = None,
                    *, acc: Any = FP32, order: Any = "any", kind: str = "worst",
                    out: Any = None, allow_outliers: int = 0, confidence: float = 0.999, fma: bool = True,
                    rounding: Any = "rne", show: int = 10, ftz: bool = False, daz: bool = False) -> CloseReport:
    """Check ``actual`` = the dot products of ``a`` and ``b`` over their last axis (see :func:`check_sum_close`)."""
    return _check("dot", actual, (a, b), acc=acc, order=order, kind=kind, out=out, allow_outliers=allow_outliers,
                  confidence=confidence, fma=fma, rounding=rounding, show=show, ftz=ftz, daz=daz)


@takes_arithmetic
def check_matmul_close(actual: Any, a: Any, b: Any, arith: Arithmetic | None = None,
                       *, acc: Any = FP32, order: Any = "any", kind: str = "worst",
                       out: Any = None, allow_outliers: int = 0, confidence: float = 0.999, fma: bool = True,
                       rounding: Any = "rne", show: int = 10, ftz: bool = False, daz: bool = False) -> CloseReport:
    """Check ``actual`` = ``a @ b`` (numpy matmul shapes) (see :func:`check_sum_close`)."""
    return _check("matmul", actual, (a, b), acc=acc, order=order, kind=kind, out=out, allow_outliers=allow_outliers,
                  confidence=confidence, fma=fma, rounding=rounding, show=show, ftz=ftz, daz=daz)


def _raise(r: CloseReport, msg: str | Callable[[str], str] | None, verbose: bool) -> CloseReport:
    __tracebackhide__ = True  # pytest shows the caller's line and the report, not numoracle's frames
    if not r.passed:
        raise NumoracleAssertionError(r.message(msg, verbose), r)
    return r


@takes_arithmetic
def assert_sum_close(actual: Any, x: Any, arith: Arithmetic | None = None,
                     *, axis: int = -1, acc: Any = FP32, order: Any = "any",
                     kind: str = "worst", out: Any = None, allow_outliers: int = 0, confidence: float = 0.999,
                     fma: bool = True, rounding: Any = "rne", show: int = 10, ftz: bool = False, daz: bool = False,
                     msg: str | Callable[[str], str] | None = None, verbose: bool = False) -> CloseReport:
    """:func:`check_sum_close`; raises NumoracleAssertionError unless it passed; returns the report.

    msg: a string shown above the report, or a callable that gets the report's text and returns the
    message (as ``torch.testing.assert_close`` takes it). verbose: show the full report
    (``report.explain()``: the bound's derivation and what the check can detect) instead of the
    compact one. The other arguments are :func:`check_sum_close`'s (likewise for the dot and
    matmul assertions below).
    """
    __tracebackhide__ = True
    r = check_sum_close(actual, x, axis=axis, acc=acc, order=order, kind=kind, out=out, allow_outliers=allow_outliers,
                        confidence=confidence, fma=fma, rounding=rounding, show=show, ftz=ftz, daz=daz)
    return _raise(r, msg, verbose)


@takes_arithmetic
def assert_dot_close(actual: Any, a: Any, b: Any, arith: Arithmetic | None = None,
                     *, acc: Any = FP32, order: Any = "any", kind: str = "worst",
                     out: Any = None, allow_outliers: int = 0, confidence: float = 0.999, fma: bool = True,
                     rounding: Any = "rne", show: int = 10, ftz: bool = False, daz: bool = False,
                     msg: str | Callable[[str], str] | None = None, verbose: bool = False) -> CloseReport:
    """:func:`check_dot_close`, raising NumoracleAssertionError unless it passed (see :func:`assert_sum_close`)."""
    __tracebackhide__ = True
    r = check_dot_close(actual, a, b, acc=acc, order=order, kind=kind, out=out, allow_outliers=allow_outliers,
                        confidence=confidence, fma=fma, rounding=rounding, show=show, ftz=ftz, daz=daz)
    return _raise(r, msg, verbose)


@takes_arithmetic
def assert_matmul_close(actual: Any, a: Any, b: Any, arith: Arithmetic | None = None,
                        *, acc: Any = FP32, order: Any = "any", kind: str = "worst",
                        out: Any = None, allow_outliers: int = 0, confidence: float = 0.999, fma: bool = True,
                        rounding: Any = "rne", show: int = 10, ftz: bool = False, daz: bool = False,
                        msg: str | Callable[[str], str] | None = None, verbose: bool = False) -> CloseReport:
    """:func:`check_matmul_close`, raising NumoracleAssertionError unless it passed (see :func:`assert_sum_close`)."""
    __tracebackhide__ = True
    r = check_matmul_close(actual, a, b, acc=acc, order=order, kind=kind, out=out, allow_outliers=allow_outliers,
                           confidence=confidence, fma=fma, rounding=rounding, show=show, ftz=ftz, daz=daz)
    return _raise(r, msg, verbose)


# ---- comparing two runs ------------------------------------------------------------------------------
@dataclass
class RunComparison:
    """Verdict on two runs of one kernel on the same inputs (see :func:`compare_runs`)."""

    verdict: str
    op: str
    n_elements: int
    n_differ: int  # elements whose bits differ between the runs
    max_run_ulps: int | None  # largest ULP distance between the runs (None when a NaN is involved)
    unwritten: dict[str, list[str]]  # run name -> index ranges still holding the poison code
    n_unwritten: dict[str, int]
    unexplained: list[tuple[str, Element]]  # (run, element) outside every bound, worst first
    n_unexplained: int
    bound: ErrorBound | None
    max_ratio: float
    out_format: AnyFormat
    identified: dict[str, Any] = field(default_factory=dict)  # run name -> the order reproducing it, or None
    ulp_format: AnyFormat | None = None  # the format max_run_ulps counts in (the output format when it holds them)
    exact: Any = None  # identify.runs.ExactExplanation: differing elements as the same split partials reordered

    def _diff_text(self) -> str:
        ufmt = self.ulp_format or self.out_format
        return f"{self.n_differ} of {self.n_elements} elements differ" + (
            f" (at most {self.max_run_ulps} ULPs of {ufmt.name} apart)" if self.max_run_ulps is not None else "")

    def summary(self) -> str:
        """One line: what was compared and the verdict (every numoracle report has summary())."""
        v = self.verdict
        if v == "IDENTICAL":
            return f"IDENTICAL: the two runs of {self.op} are bit-identical ({self.n_elements} elements)"
        if v == "UNWRITTEN":
            return ("UNWRITTEN: " + "; ".join(f"{r}: {c} element(s)" for r, c in self.n_unwritten.items() if c)
                    + f" of {self.n_elements} still hold the poison pattern")
        exact = self.exact is not None and self.exact.complete
        if v == "REORDERING":
            return f"REORDERING: {self._diff_text()}, " + (
                "each differing element is the other run's split partials combined in another order" if exact else
                "every element within a reordering's bound")
        why = "equal no order of the split partials" if self.exact is not None and not exact and \
            self.exact.split is not None and self.exact.exhaustive else "outside every order's bound"
        return f"UNEXPLAINED: {self._diff_text()}; {self.n_unexplained} element(s) {why}"

    def __str__(self) -> str:
        v, n = self.verdict, self.n_elements
        diff = self._diff_text()
        if v == "IDENTICAL":
            lines = [f"IDENTICAL: the two runs are bit-identical ({n} elements)"]
        elif v == "UNWRITTEN":
            lines = ["UNWRITTEN: elements still hold the poison pattern, so the kernel never wrote them (their "
                     "values depend on what the buffer held before): "
                     + "; ".join(f"{r}: {c} element(s)" for r, c in self.n_unwritten.items() if c)]
            for r, rng in self.unwritten.items():
                if rng:
                    more = f" ... ({len(rng) - 12} more ranges)" if len(rng) > 12 else ""
                    lines.append(f"  {r}: " + ", ".join(rng[:12]) + more)
        elif v == "REORDERING":
            lines = [f"REORDERING: {diff}, and every element of both runs lies within the error bound of a "
                     f"reordered accumulation around the exact result (max error/bound {self.max_ratio:.4g}): "
                     "expected from split-K, atomics or other order changes"]
        else:
            lines = [f"UNEXPLAINED: {diff}; {self.n_unexplained} element(s) lie outside the bound of every order "
                     f"considered (max error/bound {self.max_ratio:.4g}): a bug, not a reordering"]
            lines.append("worst elements outside the bound:")
            lines += element_table([e for _, e in self.unexplained], self.out_format, "run index",
                                   [r for r, _ in self.unexplained])
        if self.identified:
            found = {r: o for r, o in self.identified.items() if o is not None}
            lines.append("identified: " + ", ".join(f"{r} = {o!r}" if o is not None else f"{r}: no model tried "
                                                    "reproduces it" for r, o in self.identified.items())
                         + (": the runs are the same arithmetic in two orders (reordering)"
                            if len(found) == len(self.identified) and v != "UNEXPLAINED" else ""))
        if self.exact is not None:
            lines.append(self.exact.text())
        if self.bound is not None:
            if self.bound.vacuous and v in ("REORDERING", "UNEXPLAINED"):
                lines.append("WARNING: " + vacuous_text(self.bound) + ("; the exact explanation above does not rely "
                             "on it" if self.exact is not None and self.exact.complete else
                             "; REORDERING says little here"))
            lines.append("bound:")
            lines += ["  " + s for s in str(self.bound).splitlines()]
        return "\n".join(lines)


def _run_ulp_codes(ca: np.ndarray, cb: np.ndarray, fa: AnyFormat, ofmt: AnyFormat,
                   acc: Any) -> tuple[AnyFormat, np.ndarray, np.ndarray]:
    """The format to count the runs' ULP distances in, and both runs' codes in it: the output format when both
    runs hold only its values (fp16 results stored as float32 or float64), else the accumulator's when no output
    format is given and it holds them (simulate's float64 holding FP32 sums), else the stored format."""
    for f in (ofmt, None if acc is None else _ulp_format(np.concatenate([ca, cb]), fa, None, acc)):
        if f is None or f == fa or not isinstance(f, Format) or not isinstance(fa, Format):
            continue
        with np.errstate(all="ignore"):
            na, nb = (np.asarray(cast(c, f, src=fa)).reshape(-1) for c in (ca, cb))
            back = [np.asarray(cast(x, fa, src=f)).reshape(-1) for x in (na, nb)]
        fin = [~is_nan(c, fa) for c in (ca, cb)]
        if all(np.array_equal(b[m].astype(np.uint64), c[m].astype(np.uint64)) for b, c, m in zip(back, (ca, cb), fin)):
            return f, na, nb
    return fa, ca, cb


@takes_arithmetic
def compare_runs(run_a: Any, run_b: Any, op: str, *inputs: Any, arith: Arithmetic | None = None,
                 acc: Any = FP32, orders: Any = None,
                 kind: str = "worst", out: Any = None, axis: int = -1, confidence: float = 0.999, fma: bool = True,
                 rounding: Any = "rne", pattern: int | None = None, show: int = 10,
                 identify: Any = True, exact: bool = True) -> RunComparison:
    """Compare two runs of a kernel computing ``op`` ("sum", "dot", "matmul") on ``inputs``.

    Verdicts (in this priority):

    * "UNWRITTEN": some element of either run holds the poison code (``poison_like``; ``pattern``):
      the kernel never wrote it. Lists the index ranges (rectangles for 2-D outputs).
    * "IDENTICAL": the runs are bit-identical.
    * "REORDERING": the runs differ, but every element of both runs is within the bound of some
      order in ``orders`` (default: any order, the worst case) around the exact result, or equals the
      exact result correctly rounded to the output format: what split-K with another S, atomics in
      another order, or another tiling produce.
    * "UNEXPLAINED": some element of a run lies outside those bounds (or is NaN/inf where the exact
      result is finite): no accumulation order explains it. The elements are listed worst first.

    ``orders``: None (= "any"), or a list of orders (strings or ``numoracle.orders`` objects); an element
    is explained when it lies within the largest of their bounds. acc, kind, out, fma, rounding: as in
    :func:`check_matmul_close`; axis: for op="sum".

    ``identify``: when the runs differ, name the order of each run (:func:`numoracle.identify_order`,
    the guided search; or a list of candidate orders; False: skip): ``.identified`` maps "run_a" / "run_b"
    to the order that reproduces that run bit for bit (its first 64 output rows), or None. It explains,
    and never changes the verdict.

    ``exact``: when the runs differ, look for an exact explanation (:mod:`numoracle.identify.runs`): every differing
    element is the same split-K partials combined in another order (atomics), per element, every order up to 8
    partials. ``.exact`` says which elements are; when the search over the orders was exhaustive and some
    differing element equals no order of those partials, the verdict is UNEXPLAINED (a corrupted element) even
    inside the bound.
    """
    op = str(op).lower()
    if op not in ("sum", "dot", "matmul"):
        raise ValueError(f"unknown op {op!r}; ops: sum, dot, matmul")
    need = 1 if op == "sum" else 2
    if len(inputs) != need:
        raise ValueError(f"{op} takes {need} input array(s), got {len(inputs)}")
    pb = _Problem(op, inputs, axis)
    (ca, fa), (cb, fb) = pb.actual(run_a, "run_a"), pb.actual(run_b, "run_b")
    if fa != fb:
        raise ValueError(f"run_a is {fa.name} and run_b is {fb.name}; compare runs stored in one format")
    ofmt = format_of(out) if out is not None else fa
    shape = tuple(pb.shape)
    code = np.uint64(poison_code(fa) if pattern is None else int(pattern))
    masks = {"run_a": (ca.astype(np.uint64) == code).reshape(shape),
             "run_b": (cb.astype(np.uint64) == code).reshape(shape)}
    differ = ca.astype(np.uint64) != cb.astype(np.uint64)
    ka_nan, kb_nan = is_nan(ca, fa), is_nan(cb, fa)
    known = ~ka_nan & ~kb_nan
    ufmt, ua, ub = _run_ulp_codes(ca, cb, fa, ofmt, acc if out is None else None)
    d = _ulps(to_key(np.where(known, ua, 0), ufmt), to_key(np.where(known, ub, 0), ufmt), ufmt)
    max_ulps: int | None = 0
    if differ.any():
        max_ulps = int(np.abs(d[differ]).max()) if known[differ].all() else None
    base: dict[str, Any] = dict(op=op, n_elements=int(ca.size), n_differ=int(differ.sum()), max_run_ulps=max_ulps,
                                ulp_format=ufmt,
                                unwritten={k: ranges_text(m) for k, m in masks.items()},
                                n_unwritten={k: int(m.sum()) for k, m in masks.items()}, out_format=ofmt)
    if any(m.any() for m in masks.values()):
        return RunComparison("UNWRITTEN", unexplained=[], n_unexplained=0, bound=None, max_ratio=float("nan"), **base)
    if not differ.any():
        return RunComparison("IDENTICAL", unexplained=[], n_unexplained=0, bound=None, max_ratio=0.0, **base)
    ords = None if orders is None else list(orders) if isinstance(orders, (list, tuple)) else [orders]
    ords = None if ords is None else [None if o == "any" else o for o in ords]
    st = _Setup(pb, fa, acc=acc, order=None, kind=kind, out=out, fma=fma, rounding=rounding, confidence=confidence,
                orders=ords)
    bound = max(st.bounds, key=lambda b: b.coefficient)
    bad: list[tuple[float, str, Element]] = []
    n_bad, mr = 0, 0.0
    judged = {}
    for name, codes in (("run_a", ca), ("run_b", cb)):
        j = judged[name] = st.judge(codes, fa)
        n_bad += int((~j.ok).sum())
        mr = max(mr, float(j.ratio.max()) if j.ratio.size else 0.0)
        bad += [(float(j.ratio[i]), name, st.element(j, int(i), shape)) for i in _order_worst(j, show) if not j.ok[i]]
    bad.sort(key=lambda t: -t[0])
    verdict = "UNEXPLAINED" if n_bad else "REORDERING"
    from ..identify.search import identify_runs

    found = identify_runs(identify, {"run_a": run_a, "run_b": run_b}, op, inputs, acc, out, axis)
    why = None
    if exact and isinstance(fa, Format):
        from ..identify.runs import explain_runs
        ins = inputs if op != "sum" else (np.moveaxis(np.asarray(inputs[0]), axis, -1),)
        why = explain_runs(ca, cb, fa, op, ins, acc, out, found)
        lost = [(name, int(i)) for name, idx in why.unexplained.items() for i in idx]
        if why.established and lost and verdict == "REORDERING":
            verdict, n_bad = "UNEXPLAINED", len(lost)
            bad = [(0.0, name, st.element(judged[name], i, shape)) for name, i in lost]
    return RunComparison(verdict, unexplained=[(r, e) for _, r, e in bad[:show]], n_unexplained=n_bad, bound=bound,
                         max_ratio=mr, identified=found, exact=why, **base)

