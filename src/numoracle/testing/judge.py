"""How a check judges a kernel's output: the exact reference, the bound's elementwise tolerance, and per element
whether it passes, its error, its error/bound and its ULP distance (shared by the checks and compare_runs)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from ..bounds.expected import ErrorBound, expected_error_bound
from ..core.engine.codekeys import is_nan, to_key
from ..core.engine.convert import cast, decode
from ..core.formats.format import FP64, AnyFormat, Format, format_of
from .closeproblem import Problem
from .closeproblem import exact_value as _exact_value
from .closereport import Element

__all__ = ["Judged", "Setup", "ulp_distances", "ulp_format_of", "worst_first", "smallest_indices"]


def ulp_distances(ka: np.ndarray, ke: np.ndarray, ofmt: AnyFormat) -> np.ndarray:
    """Signed ULP distances of keys (-0 and +0 count as one point)."""
    d = ka - ke
    if isinstance(ofmt, Format) and ofmt.has_negative_zero:
        d = np.where((ka < 0) & (ke >= 0), d + 1, np.where((ka >= 0) & (ke < 0), d - 1, d))
    return d


class Judged(NamedTuple):
    vals: np.ndarray
    ok: np.ndarray
    bad_nonfinite: np.ndarray
    err: np.ndarray
    ratio: np.ndarray
    ulps: np.ndarray
    ulp_known: np.ndarray


class Setup:
    """Reference, output format, bound and elementwise tolerance of a problem."""

    def __init__(self, pb: Problem, afmt: AnyFormat, *, acc: Any, order: Any, kind: str, out: Any, fma: bool,
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

    def judge(self, codes: np.ndarray, afmt: AnyFormat) -> Judged:
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
        return Judged(vals, ok, nonfinite, err, ratio, ulps, ulp_known)

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
        return ulp_distances(to_key(np.where(known, uc, 0), f), to_key(np.where(known, ec, 0), f), f), known


    def element(self, j: Judged, i: int, shape: tuple[int, ...]) -> Element:
        idx = tuple(int(t) for t in np.unravel_index(i, shape)) if shape else ()
        return Element(idx, float(j.vals[i]), float(self.exact[i]), float(j.err[i]), float(self.tol[i]),
                       float(j.ratio[i]), int(j.ulps[i]) if j.ulp_known[i] else None, bool(j.ok[i]))


def ulp_format_of(codes: np.ndarray, afmt: AnyFormat, out: Any, acc: Any) -> AnyFormat | None:
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

def worst_first(j: Judged, k: int) -> np.ndarray:
    """Flat indices of the k worst elements: failing first, then by error/bound (ties: by index).

    Only the candidates that can be among the k (found with a partition, ties and NaN kept) are
    sorted: the order is that of a full sort of every element.
    """
    if k <= 0 or j.ok.size == 0:
        return np.zeros(0, np.intp)
    neg = -j.ratio
    cand = np.flatnonzero(~j.ok)
    if cand.size > k:
        cand = cand[smallest_indices(neg[cand], k)]
    elif cand.size < k:
        rest = np.flatnonzero(j.ok)
        cand = np.union1d(cand, rest[smallest_indices(neg[rest], k - cand.size)])
    return cand[np.lexsort((neg[cand], j.ok[cand]))][:k]


def smallest_indices(v: np.ndarray, k: int) -> np.ndarray:
    """Indices (ascending) of the entries of v that a sort could put among its first k: every entry
    at or below the k-th smallest value (NaN sorts last)."""
    if k >= v.size:
        return np.arange(v.size)
    t = np.partition(v, k - 1)[k - 1]
    return np.arange(v.size) if np.isnan(t) else np.flatnonzero(v <= t)
