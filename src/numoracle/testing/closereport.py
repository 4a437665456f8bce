"""The report of a closeness check: compact by default, the full derivation on demand.

``str(report)`` is what a failing ``assert_*_close`` shows: one headline, the worst elements with
those over the bound marked ``*``, their distance in ULPs of the output format, and the bound in
one line. ``report.explain()`` adds the bound's derivation (components, sources, assumptions) and
what the check can detect (``report.power``); ``assert_*_close(..., verbose=True)`` shows that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..bounds.boundmath import sci
from ..bounds.expected import ErrorBound
from ..core.errors import NumoracleAssertionError, failure_message
from ..core.formats.format import AnyFormat

__all__ = ["Element", "CloseReport", "element_table", "vacuous_text", "bound_line", "failure_message"]


class Element(NamedTuple):
    """One output element of a check: values as float64, ``ulps`` = signed ULP distance in the output format."""

    index: tuple[int, ...]
    actual: float
    exact: float
    error: float
    bound: float
    ratio: float
    ulps: int | None
    passed: bool


def element_table(rows: list[Element], ulp_fmt: AnyFormat, first: str = "index",
                  tags: list[str] | None = None) -> list[str]:
    """The elements as aligned text; ``*`` in the first column marks an element over the bound."""
    head = (" ", first, "actual", "exact", "|error|", "bound", "error/bound", f"ULPs ({ulp_fmt.name})")
    body = [(" " if e.passed else "*", (tags[i] + " " if tags else "") + str(e.index), repr(e.actual),
             repr(e.exact), f"{e.error:.4g}", f"{e.bound:.4g}", f"{e.ratio:.4g}",
             "nan" if e.ulps is None else f"{e.ulps:+d}")
            for i, e in enumerate(rows)]
    w = [max(len(r[c]) for r in [head, *body]) for c in range(len(head))]
    return ["  " + r[0] + " " + "  ".join(s.rjust(w[c + 1]) for c, s in enumerate(r[1:])).rstrip()
            for r in [head, *body]]


def vacuous_text(b: ErrorBound) -> str:
    """Why a vacuous bound (c >= 1) says nothing, and what would give one that does."""
    return (f"the error bound is vacuous (c = {sci(b.coefficient, 4)} >= 1 allows 100% error relative to sum|t|), so "
            f"it cannot tell a correct kernel from a wrong one. To get a bound that says something: accumulate in "
            f"a wider format than {b.acc.name} (acc=...)"
            + ("" if b.kind == "probabilistic" else ", use kind='probabilistic'")
            + f", give the kernel's actual (shallower) order instead of '{b.order}' (e.g. order='pairwise' or "
            f"orders.SplitK(s)), or reduce K = {b.K}")


def bound_line(b: ErrorBound) -> str:
    """The bound in one line: its model and coefficient."""
    head = str(b).splitlines()[0].removeprefix("ErrorBound").strip()
    return f"bound: {head}; c = {sci(b.coefficient, 4)}"


@dataclass
class CloseReport:
    """Result of a ``check_*_close``: ``passed``, counts, the worst elements, the bound and the margin.

    ``str(report)`` is compact; :meth:`explain` gives the bound's derivation and the detection power.
    ``ulp_format``: the format the ULP column counts in (the output format; for a float64 array whose
    values all lie in the accumulator's format, such as ``simulate``'s output, the accumulator's).
    """

    op: str
    passed: bool
    n_checked: int
    n_fail: int
    allow_outliers: int
    bound: ErrorBound
    max_ratio: float  # the largest |error| / bound (the margin; reported even on pass)
    max_ratio_index: tuple[int, ...] | None
    worst: list[Element]
    out_format: AnyFormat
    nonfinite: list[tuple[int, ...]] = field(default_factory=list)  # NaN/inf in actual, exact finite
    n_nonfinite: int = 0
    power_fn: Any = field(default=None, repr=False, compare=False)  # -> checkpower.DetectionPower, computed lazily
    ulp_format: AnyFormat | None = None

    @property
    def vacuous(self) -> bool:
        return self.bound.vacuous

    @property
    def power(self) -> Any:
        """What this check can detect (:class:`numoracle.checkpower.DetectionPower`), or the reason it is unknown."""
        if not hasattr(self, "_power"):
            try:
                self._power = self.power_fn() if self.power_fn is not None else None
            except (ValueError, TypeError) as e:
                self._power = f"detection power: not computed ({e})"
        return self._power

    def summary(self) -> str:
        name = self.op.capitalize()
        at = f" at index {self.max_ratio_index}" if self.max_ratio_index is not None else ""
        margin = f"max error/bound {self.max_ratio:.4g}{at}"
        if self.vacuous:
            return (f"{name} check failed: {vacuous_text(self.bound)} ({self.n_fail} of {self.n_checked} elements "
                    f"exceed it; {margin})")
        if self.n_fail > self.allow_outliers:
            return (f"{name} mismatch: {self.n_fail} of {self.n_checked} elements exceed the bound ({margin}); "
                    f"allowed outliers {self.allow_outliers}")
        if self.n_fail:
            return (f"{name} close: {self.n_fail} of {self.n_checked} elements exceed the bound, within the "
                    f"{self.allow_outliers} allowed outliers ({margin})")
        return f"{name} close: all {self.n_checked} elements within the bound ({margin}); allowed outliers " \
               f"{self.allow_outliers}"

    def _elements(self) -> list[str]:
        lines = []
        if self.n_nonfinite:
            shown = ", ".join(map(str, self.nonfinite)) + (" ..." if self.n_nonfinite > len(self.nonfinite) else "")
            lines.append(f"{self.n_nonfinite} element(s) are NaN/inf where the exact result is finite: {shown}")
        if self.worst:
            uf = self.ulp_format or self.out_format
            lines.append(f"worst {len(self.worst)} element(s), * = over the bound (exact = the exact result rounded "
                         f"to float64; ULPs = actual - exact rounded to {uf.name}):")
            lines += element_table(self.worst, uf)
        return lines

    def __str__(self) -> str:
        return "\n".join([self.summary(), *self._elements(), bound_line(self.bound),
                          "(report.explain() or verbose=True: the bound's derivation and what this check can detect)"])

    def explain(self) -> str:
        """The full report: the compact one, the bound's derivation, and the detection power."""
        lines = [self.summary(), *self._elements(), "bound:"]
        lines += ["  " + s for s in str(self.bound).splitlines()]
        if self.power is not None:
            lines += str(self.power).splitlines()
        return "\n".join(lines)

    def failure(self, msg: str | Callable[[str], str] | None = None, verbose: bool = False) -> Exception:
        """The exception a failing assertion raises (``numoracle.core.asserting``)."""
        return NumoracleAssertionError(self.message(msg, verbose), self)

    def message(self, msg: str | Callable[[str], str] | None = None, verbose: bool = False) -> str:
        """The text a failing assertion shows (``numoracle.core.errors.failure_message``)."""
        return failure_message(self.explain() if verbose else str(self), msg)
