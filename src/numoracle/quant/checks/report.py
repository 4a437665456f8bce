"""The report of :func:`numoracle.assert_quantized_close`: one element's row, the summary-then-worst-elements
report, and the assertion error that carries it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from ...core.errors import NumoracleAssertionError, failure_message
from ...core.formats.format import AnyFormat
from ..bounds.error import QuantErrorReport

__all__ = ["QuantElement", "QuantCheckReport", "QuantizedMismatch", "CLASSES", "RANK", "code_hex"]

CLASSES = ("exact", "tie", "scale off by one ULP", "mismatch")
RANK = {"mismatch": 0, "scale off by one ULP": 1, "tie": 2, "exact": 3}


class QuantElement(NamedTuple):
    """One element of a quantisation check (codes as ints; values as float64)."""

    index: tuple[int, ...]
    x: float
    actual_code: int | None  # None in values mode when no code explains the value
    actual_value: float
    expected_code: int
    expected_value: float
    t: float
    scale: float
    distance: int | None  # ordered-code distance actual - expected (None: NaN involved)
    cls: str


@dataclass
class QuantCheckReport:
    """Result of :func:`check_quantized_close`."""

    passed: bool
    mode: str  # "codes" or "values"
    fmt: AnyFormat
    n_checked: int
    counts: dict[str, int]
    allow_outliers: int
    worst: list[QuantElement]
    scale_fmt: AnyFormat | None
    n_scale_blocks: int = 0
    scales_off_by_one: int = 0
    scales_mismatch: int = 0
    scale_witness: list[str] = field(default_factory=list)
    signed_zeros: int = 0
    max_error_ratio: float = 0.0  # max |x - actual value| / quantisation error bound (finite x)
    error_bound: QuantErrorReport | None = None
    out_format: AnyFormat | None = None  # values mode: the format of the actual values
    notes: list[str] = field(default_factory=list)
    zero_points_differ: bool = False
    nan_where_finite: int = 0  # actual NaN where the reference value is finite
    inf_where_finite: int = 0  # actual +-inf where the reference value is finite
    finite_where_nan: int = 0  # actual not NaN where the reference value is NaN
    nonfinite_witness: list[tuple[int, ...]] = field(default_factory=list)  # first such elements

    @property
    def n_outliers(self) -> int:
        return self.counts["tie"] + self.counts["scale off by one ULP"]

    @property
    def n_mismatch(self) -> int:
        return self.counts["mismatch"]

    def summary(self) -> str:
        c = self.counts
        what = "codes" if self.mode == "codes" else f"dequantized values ({self.out_format.name})" \
            if self.out_format else "dequantized values"
        by = (f"{c['exact']} exact, {c['tie']} tie, {c['scale off by one ULP']} scale off by one ULP, "
              f"{c['mismatch']} mismatch")
        budget = f"outliers {self.n_outliers} of {self.allow_outliers} allowed"
        sc = ""
        if self.n_scale_blocks:
            sc = (f"; scales: {self.scales_off_by_one} of {self.n_scale_blocks} off by one ULP of "
                  f"{self.scale_fmt.name if self.scale_fmt else '?'}, {self.scales_mismatch} off by more")
        head = "Quantized close" if self.passed else "Quantized mismatch"
        why = ""
        if not self.passed:
            bits = []
            if c["mismatch"]:
                bits.append(f"{c['mismatch']} element(s) no tie or scale flip explains")
            if self.n_outliers > self.allow_outliers:
                bits.append(f"{self.n_outliers} outliers exceed the budget of {self.allow_outliers}")
            if self.scales_mismatch:
                bits.append(f"{self.scales_mismatch} scale(s) off by more than one ULP")
            if self.zero_points_differ:
                bits.append("zero points differ")
            bits += self._nonfinite_bits()
            why = " (" + "; ".join(bits) + ")"
        ratio = f"{self.max_error_ratio:.4g}"
        if self.nan_where_finite or self.inf_where_finite:  # the ratio is inf: say why
            ratio += f" ({'NaN' if self.nan_where_finite else 'inf'} where finite expected)"
        return (f"{head}{why}: {self.n_checked} {self.fmt.name} {what}: {by}; {budget}{sc}; max |x - actual| / "
                f"bound {ratio}")

    def _nonfinite_bits(self) -> list[str]:
        """Counts of actual NaN / inf where the reference is finite, then of actual values where it is NaN."""
        bits = []
        if self.nan_where_finite:
            bits.append(f"{self.nan_where_finite} NaN where finite expected")
        if self.inf_where_finite:
            bits.append(f"{self.inf_where_finite} inf where finite expected")
        if self.finite_where_nan:
            bits.append(f"{self.finite_where_nan} non-NaN where NaN expected")
        return bits

    def failure(self, msg: str | Callable[[str], str] | None = None, verbose: bool = False) -> Exception:
        """The exception a failing assertion raises: :class:`QuantizedMismatch` (its report is the whole story,
        so ``verbose`` adds nothing)."""
        return QuantizedMismatch(self, msg)

    def __str__(self) -> str:
        lines = [self.summary()]
        if self.nonfinite_witness:
            lines.append(f"{'; '.join(self._nonfinite_bits())}: first at {', '.join(map(str, self.nonfinite_witness))} "
                         "(listed first below)")
        if self.signed_zeros:
            lines.append(f"{self.signed_zeros} element(s) hold the other signed zero (equal values; accepted)")
        lines += self.notes
        if self.scale_witness:
            lines.append("scales that differ (block index: actual vs expected):")
            lines += ["  " + w for w in self.scale_witness]
        if self.worst:
            lines.append(f"worst {len(self.worst)} element(s) (distance = actual - expected in ordered codes of "
                         f"{self.fmt.name}; t = x / scale as rounded before the cast):")
            lines += _table(self.worst, self.fmt)
        return "\n".join(lines)


class QuantizedMismatch(NumoracleAssertionError):
    """Raised by :func:`assert_quantized_close`; ``.report`` is the :class:`QuantCheckReport`."""

    def __init__(self, report: QuantCheckReport, msg: str | Callable[[str], str] | None = None) -> None:
        super().__init__(failure_message(str(report), msg), report)


def code_hex(code: int | None, fmt: AnyFormat) -> str:
    if code is None:
        return "-"
    return f"0x{code:0{max(1, -(-fmt.bits // 4))}x}"


def _table(rows: list[QuantElement], fmt: AnyFormat) -> list[str]:
    head = ("index", "x", "actual", "expected", "t", "scale", "distance", "class")
    body = [(str(e.index), f"{e.x!r}", f"{code_hex(e.actual_code, fmt)} ({e.actual_value!r})",
             f"{code_hex(e.expected_code, fmt)} ({e.expected_value!r})", f"{e.t!r}", f"{e.scale!r}",
             "nan" if e.distance is None else f"{e.distance:+d}", e.cls) for e in rows]
    w = [max(len(r[c]) for r in [head, *body]) for c in range(len(head))]
    return ["  " + "  ".join(s.rjust(w[c]) for c, s in enumerate(r)).rstrip() for r in [head, *body]]


