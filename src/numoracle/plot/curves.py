"""Error bounds against emulated errors, as data and as a figure (``numoracle plot bound``).

``bound_curve_data(op, dtypes, orders, Ks, acc=...)`` computes, for every (dtype, accumulator,
order) and every reduction length K:

* the worst-case coefficient c of :func:`numoracle.expected_error_bound` (|y_hat - y| <= c sum|t_k|,
  guaranteed) and, when asked, the probabilistic one (Higham & Mary 2019, per element with
  probability >= ``confidence``);
* the *emulated* errors: ``samples`` seeded random reductions of length K per data set
  ("uniform": U[0, 1), every term positive, no cancellation; "normal": N(0, 1)), rounded to the
  dtype, evaluated bit for bit by :func:`numoracle.simulate` with that order and accumulator, and
  compared with the exact result (:func:`numoracle.exact_dot` / :func:`numoracle.exact_sum`). The
  relative error is |y_hat - y| / sum_k |t_k| (t_k = a_k b_k, or x_k for a sum): the quantity the
  coefficient bounds, so a point and its curve share one axis.

Every emulated error is checked against the rigorous elementwise worst-case bound
(``ErrorBound.tolerance``); one above it is a bug in the bound or the emulator, and raises
:class:`BoundViolation`. The probabilistic bound is not a guarantee (it assumes independent
rounding errors, which fails under stagnation), so its violations are only counted.

``plot_bound(data, path)`` draws the figure (log-log, K against relative error; one colour per
curve, solid = worst case, dashed = probabilistic, markers = the largest emulated error of each
data set) and writes PNG, SVG or PDF by extension, without timestamps or software versions in the
file, so a given matplotlib version writes the same bytes for the same data. matplotlib is an
optional extra (``pip install "numoracle[plot]"``) and is imported only by ``plot_bound``.

    >>> d = bound_curve_data("dot", ["bf16"], ["pairwise"], [16, 256], samples=2)
    >>> [f"{c:.3g}" for c in d.curves[0].worst]
    ['2.38e-07', '4.77e-07']
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..bounds.expected import KINDS
from ..core.engine.convert import cast
from ..core.formats.format import AnyFormat, Format, format_of
from ..core.formats.interop import as_native
from ..core.progress import progress
from ..models.orders.text import as_order, parse_order

__all__ = ["bound_curve_data", "plot_bound", "BoundCurve", "BoundCurves", "BoundViolation", "DATASETS",
           "order_object", "require_matplotlib", "PLOT_OPS"]

MAX_ELEMENTS = 1 << 24  # samples * K per input array: the emulation's working memory stays near 2 GB

PLOT_OPS = ("sum", "dot")
DATASETS = {"uniform": "U[0,1)", "normal": "N(0,1)"}
_INSTALL = 'pip install "numoracle[plot]"'
_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
_DIAG = 16  # dot products emulated per batch


class BoundViolation(AssertionError):
    """An emulated error above its worst-case bound: a bug in the bound or in the emulator."""


# ---- orders ------------------------------------------------------------------------------------
def order_object(order: Any, dtype: Any = None) -> tuple[str, Any]:
    """``(label, numoracle.orders.Order)`` for an Order or any order text (:func:`numoracle.orders.parse`).

    The label is the short form of the bounds where the order has one (``"blocked:64"``), else the order's
    text; ``"preset:<system>"`` keeps its name and takes the input format from ``dtype``. "any" and
    "pairwise:<base>" are bounds over many orders and have no single emulation (refused, saying so).
    """
    if isinstance(order, str) and order.strip().lower().startswith("preset:"):
        label = order.strip().lower()
        return (label.split("/")[0] if "/" not in label else label), as_order(order, dtype)
    obj = as_order(order, dtype)
    return str(parse_order(obj)), obj


# ---- data ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BoundCurve:
    """One (dtype, accumulator, order): bound coefficients and emulated relative errors, per K."""

    op: str
    dtype: str
    acc: str
    order: str
    Ks: tuple[int, ...]
    worst: tuple[float, ...]  # worst-case coefficient per K (rounded up to a float)
    probabilistic: tuple[float, ...] | None  # None when not asked for, or not applicable (biased rounding)
    max_error: dict[str, tuple[float, ...]]  # data set -> largest relative error over the samples, per K
    median_error: dict[str, tuple[float, ...]]
    max_ratio: tuple[float, ...]  # largest |error| / elementwise worst-case bound (<= 1, checked)
    prob_violations: tuple[int, ...] | None  # elements whose relative error exceeds the probabilistic c, per K
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.dtype} in, {self.acc} acc, {self.order}"

    def largest_error(self, i: int) -> float:
        """The largest relative error over every data set at Ks[i]."""
        return max(v[i] for v in self.max_error.values())


@dataclass(frozen=True)
class BoundCurves:
    """What :func:`bound_curve_data` returns: the curves and how they were made."""

    op: str
    curves: tuple[BoundCurve, ...]
    Ks: tuple[int, ...]
    kinds: tuple[str, ...]
    datasets: tuple[str, ...]
    samples: int
    seed: int
    confidence: float
    notes: tuple[str, ...] = field(default=())

    def rows(self) -> list[dict[str, Any]]:
        """One dict per (curve, K): the CSV rows."""
        out = []
        for c in self.curves:
            for i, K in enumerate(c.Ks):
                r: dict[str, Any] = {"op": c.op, "dtype": c.dtype, "acc": c.acc, "order": c.order, "K": K,
                                     "worst": c.worst[i],
                                     "probabilistic": c.probabilistic[i] if c.probabilistic else None}
                for d in self.datasets:
                    r[f"max_{d}"] = c.max_error[d][i]
                    r[f"median_{d}"] = c.median_error[d][i]
                r["max_over_worst"] = c.largest_error(i) / c.worst[i]
                r["max_error_over_elementwise_bound"] = c.max_ratio[i]
                r["prob_violations"] = c.prob_violations[i] if c.prob_violations else None
                r["samples"] = self.samples
                r["seed"] = self.seed
                out.append(r)
        return out

    def to_csv(self) -> str:
        """The rows as CSV text (floats in full precision; empty cells for what was not computed)."""
        rows = self.rows()
        head = list(rows[0]) if rows else []

        def cell(v: Any) -> str:
            return "" if v is None else repr(v) if isinstance(v, float) else str(v)

        return "\n".join([",".join(head), *(",".join(cell(r[h]) for h in head) for r in rows)]) + "\n"

    def table(self) -> str:
        """A fixed-width summary: per curve and K the bounds, the largest emulated errors and max/worst."""
        prob = "probabilistic" in self.kinds
        head = ["dtype", "acc", "order", "K", "worst c"] + (["prob. c"] if prob else [])
        head += [f"max {d}" for d in self.datasets] + ["max/worst"] + (["above prob."] if prob else [])
        body = []
        for c in self.curves:
            for i, K in enumerate(c.Ks):
                row = [c.dtype, c.acc, c.order, str(K), f"{c.worst[i]:.3g}"]
                if prob:
                    row.append(f"{c.probabilistic[i]:.3g}" if c.probabilistic else "n/a")
                row += [f"{c.max_error[d][i]:.3g}" for d in self.datasets]
                row.append(f"{c.largest_error(i) / c.worst[i]:.3g}")
                if prob:
                    row.append(f"{c.prob_violations[i]}/{self.samples * len(self.datasets)}"
                               if c.prob_violations else "n/a")
                body.append(row)
        w = [max(len(r[j]) for r in [head, *body]) for j in range(len(head))]
        left = 3  # dtype, acc, order: left-aligned; numbers right-aligned
        lines = ["  ".join(s.ljust(w[j]) if j < left else s.rjust(w[j]) for j, s in enumerate(r)).rstrip()
                 for r in [head, *body]]
        t = "a_k b_k" if self.op == "dot" else "x_k"
        data = ", ".join(f"{d} {DATASETS[d]}" for d in self.datasets)
        intro = [f"{self.op}: relative error |y_hat - y| / sum|{t}| of emulated kernels (numoracle.simulate) against "
                 f"the exact result; {self.samples} samples per K and data set ({data}), seed {self.seed}",
                 "worst c: guaranteed bound; max/worst: largest emulated error / worst c (<= 1 always)"]
        if prob:
            intro.append(f"prob. c: holds per element with probability >= {self.confidence} (independent rounding "
                         "errors assumed); above prob.: elements whose relative error exceeds it")
        return "\n".join(intro + [""] + lines + [f"note: {n}" for n in self.notes])


def _kinds(kind: Any) -> tuple[str, ...]:
    ks = [kind] if isinstance(kind, str) else list(kind)
    ks = [str(k).strip().lower() for k in ks]
    bad = [k for k in ks if k not in KINDS]
    if bad or not ks:
        raise ValueError(f"unknown kind {bad[0] if bad else ''!r}; kinds: {', '.join(KINDS)} (one or both)")
    return tuple(k for k in KINDS if k in ks)


def _as_list(x: Any, what: str) -> list[Any]:
    items = [x] if isinstance(x, (str, Format)) or not isinstance(x, Sequence) else list(x)
    if not items:
        raise ValueError(f"give at least one {what}")
    return items


def _check_Ks(Ks: Any) -> tuple[int, ...]:
    out = []
    for k in _as_list(Ks, "K"):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"every K (reduction length) must be an integer >= 1, got {k!r}")
        out.append(int(k))
    return tuple(sorted(set(out)))


def _draw(rng: np.random.Generator, dist: str, shape: tuple[int, ...]) -> np.ndarray:
    return rng.random(shape) if dist == "uniform" else rng.standard_normal(shape)


def _native(v: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """float64 values rounded (RNE, the format's overflow) to fmt, as a native array simulate reads."""
    return as_native(cast(v, fmt), fmt)


def _emulate(op: str, ins: list[np.ndarray], acc: AnyFormat | None, order: Any) -> np.ndarray:
    from ..models.engine.simulation import simulate

    if op == "sum":
        return simulate("sum", ins[0], acc=acc, order=order)
    # simulate's dot takes one pair of vectors; a (n, K) @ (K, n) matmul runs n of them as one batch (its
    # diagonal; the other outputs are waste, but every step costs one numpy call whatever the batch width)
    a, b = ins
    out = np.empty(a.shape[0], np.float64)
    for lo in range(0, a.shape[0], _DIAG):
        y = simulate("matmul", a[lo:lo + _DIAG], b[lo:lo + _DIAG].T, acc=acc, order=order)
        out[lo:lo + _DIAG] = np.diagonal(y)
    return out


def _exact(op: str, ins: list[np.ndarray]) -> np.ndarray:
    from ..exact.reference import exact_dot, exact_sum

    return exact_sum(ins[0], axis=-1) if op == "sum" else exact_dot(ins[0], ins[1])


def bound_curve_data(op: str = "dot", dtypes: Any = ("bf16",), orders: Any = ("sequential", "pairwise", "blocked:128"),
                     Ks: Any = tuple(2**i for i in range(4, 13)), *, acc: Any = "fp32",
                     kind: Any = ("worst", "probabilistic"), samples: int = 8, seed: int = 0,
                     data: Any = ("uniform", "normal"), confidence: float = 0.999) -> BoundCurves:
    """Bound coefficients and emulated relative errors against K, per (dtype, accumulator, order).

    op: "dot" (terms a_k b_k) or "sum" (terms x_k). dtypes: input formats (names, Formats, dtypes).
    orders: order strings, ``numoracle.orders`` objects or "preset:<system>" (see :func:`order_object`).
    Ks: reduction lengths. acc: accumulator format(s); an order that fixes its own accumulator (a
    preset) must agree. kind: "worst" and/or "probabilistic" (which coefficients to keep; the worst
    case is always computed, as the emulated errors are checked against it). samples: reductions
    per (K, data set). data: "uniform" (U[0,1)) and/or "normal" (N(0,1)). seed: the data of each
    (K, data set) come from ``np.random.default_rng([seed, K, index of the data set])``, rounded
    (RNE) to each dtype, so every order and accumulator sees the same inputs.

    Raises ValueError for unknown names, bad sizes or an order with no single emulation, and
    :class:`BoundViolation` if an emulated error exceeds its elementwise worst-case bound.
    """
    from ..bounds.expected import expected_error_bound

    op = str(op).lower()
    if op not in PLOT_OPS:
        extra = "; each matmul output element is a dot product of length K: use op dot" if op == "matmul" else ""
        raise ValueError(f"unknown op {op!r}; plot ops: {', '.join(PLOT_OPS)}{extra}")
    fmts = list(dict.fromkeys(format_of(d) for d in _as_list(dtypes, "dtype")))
    accs = list(dict.fromkeys(format_of(a) for a in _as_list(acc, "accumulator")))
    Ks_ = _check_Ks(Ks)
    kinds = _kinds(kind)
    dsets = tuple(dict.fromkeys(str(d).strip().lower() for d in _as_list(data, "data set")))
    bad = [d for d in dsets if d not in DATASETS]
    if bad:
        raise ValueError(f"unknown data set {bad[0]!r}; data sets: {', '.join(DATASETS)}")
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples must be an integer >= 1, got {samples!r}")
    if int(samples) * max(Ks_) > MAX_ELEMENTS:
        raise ValueError(f"samples * K = {int(samples)} * {max(Ks_)} exceeds {MAX_ELEMENTS} (plot.MAX_ELEMENTS: "
                         f"about 2 GB of working memory); ask for at most {MAX_ELEMENTS // max(Ks_)} samples")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if not 0 < float(confidence) < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    n_in = 1 if op == "sum" else 2
    specs = []  # (fmt, acc, label, order object), validated before any work
    for f in fmts:
        if f.is_integer:
            raise ValueError(f"dtype {f.name} is an integer format; the plot covers floating-point reductions")
        for a in accs:
            for o in _as_list(orders, "order"):
                label, obj = order_object(o, f)
                if obj.acc is not None and obj.acc != a:
                    raise ValueError(f"order {label} fixes its accumulator {obj.acc.name}, but acc={a.name}; "
                                     f"use acc={obj.acc.name} for it")
                expected_error_bound(op, f, Ks_[0], acc=a, order=obj)  # user errors surface here, before the work
                specs.append((f, a, label, obj))
    acc_ = [_Acc(dsets) for _ in specs]
    for K in progress(Ks_, desc="bound curves", unit="K"):  # one K at a time: inputs, exact results, sum|t| shared
        cases: dict[str, list[tuple[str, list[np.ndarray], np.ndarray, np.ndarray]]] = {f.name: [] for f in fmts}
        for j, d in enumerate(dsets):
            rng = np.random.default_rng([int(seed), K, j])
            raw = [_draw(rng, d, (int(samples), K)) for _ in range(n_in)]
            for f in fmts:
                ins = [_native(v, f) for v in raw]
                absv = [np.abs(x.astype(np.float64)) for x in ins]
                S = np.sum(absv[0] * absv[1] if n_in == 2 else absv[0], axis=-1)  # exact products, summed in float64
                cases[f.name].append((d, ins, _exact(op, ins), S))
        for (f, a, label, obj), st in zip(specs, acc_):
            st.add(op, f, a, label, obj, K, cases[f.name], kinds, confidence, seed)
    curves = tuple(st.curve(op, f, a, label, Ks_, kinds) for (f, a, label, _), st in zip(specs, acc_))
    return BoundCurves(op, curves, Ks_, kinds, dsets, int(samples), int(seed), float(confidence),
                       tuple(st.note for st in acc_ if st.note))


class _Acc:
    """The numbers of one curve, K by K."""

    def __init__(self, dsets: tuple[str, ...]):
        self.worst: list[float] = []
        self.prob: list[float] = []
        self.mx: dict[str, list[float]] = {d: [] for d in dsets}
        self.md: dict[str, list[float]] = {d: [] for d in dsets}
        self.ratio: list[float] = []
        self.pviol: list[int] = []
        self.note = ""

    def add(self, op: str, f: AnyFormat, a: AnyFormat, label: str, obj: Any, K: int, cases: list, kinds: tuple,
            confidence: float, seed: int) -> None:
        from ..bounds.expected import expected_error_bound

        bw = expected_error_bound(op, f, K, acc=a, order=obj)
        bp = None
        if "probabilistic" in kinds and not self.note:
            try:
                bp = expected_error_bound(op, f, K, acc=a, order=obj, kind="probabilistic", confidence=confidence)
            except ValueError as e:
                self.note = f"{f.name} in, {a.name} acc, {label}: no probabilistic bound ({str(e).split(';')[0]})"
        self.worst.append(bw.coefficient_float)
        if bp is not None:
            self.prob.append(bp.coefficient_float)
        r, nv = 0.0, 0
        for d, ins, ref, S in cases:
            got = _emulate(op, ins, a, obj)
            with np.errstate(invalid="ignore", over="ignore"):
                err = np.abs(got - ref)
            tol = bw.tolerance(*ins)
            if not np.all(err <= tol):
                i = int(np.argmax(np.where(np.isnan(err), np.inf, err / tol)))
                raise BoundViolation(
                    f"emulated {op} ({f.name} inputs, {a.name} accumulator, order {label}, K = {K}, {d} data, "
                    f"seed {seed}, sample {i}): |error| {err[i]!r} exceeds the worst-case bound {tol[i]!r}; "
                    "this is a bug in numoracle's bound or emulator, please report it")
            rel = np.divide(err, S, out=np.zeros_like(err), where=S > 0)
            self.mx[d].append(float(rel.max()))
            self.md[d].append(float(np.median(rel)))
            r = max(r, float(np.max(np.divide(err, tol, out=np.zeros_like(err), where=tol > 0))))
            if bp is not None:  # against the drawn line, c_prob * sum|t| (without the tiny underflow term)
                nv += int(np.sum(rel > self.prob[-1]))
        self.ratio.append(r)
        self.pviol.append(nv)

    def curve(self, op: str, f: AnyFormat, a: AnyFormat, label: str, Ks: tuple[int, ...], kinds: tuple) -> BoundCurve:
        has_p = "probabilistic" in kinds and not self.note
        return BoundCurve(op, f.name, a.name, label, Ks, tuple(self.worst), tuple(self.prob) if has_p else None,
                          {d: tuple(v) for d, v in self.mx.items()}, {d: tuple(v) for d, v in self.md.items()},
                          tuple(self.ratio), tuple(self.pviol) if has_p else None, self.note)


# ---- the figure ----------------------------------------------------------------------------------
def require_matplotlib() -> Any:
    """Import matplotlib (the optional extra) or raise ImportError saying how to install it."""
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(f"plotting needs matplotlib, an optional extra: {_INSTALL} (or pip install matplotlib)") \
            from e
    return matplotlib


def _metadata(fmt: str) -> dict[str, Any]:
    if fmt == "png":
        return {"Software": None}
    if fmt == "svg":
        return {"Date": None, "Creator": None}
    return {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}


def plot_bound(data: BoundCurves, path: Any, *, title: str | None = None, dpi: int = 110) -> Path:
    """Draw ``data`` (from :func:`bound_curve_data`) to ``path`` (.png, .svg or .pdf); returns the path.

    Log-log axes, K against relative error |y_hat - y| / sum|t_k|. One colour per curve (dtype,
    accumulator, order); solid line: worst-case coefficient; dashed: probabilistic; markers: the
    largest emulated error over the samples, one marker shape per data set (errors of exactly 0
    cannot be drawn on a log axis and are left out). The file holds no date or software version.
    """
    require_matplotlib()
    from matplotlib import rc_context
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    p = Path(path)
    fmt = _FORMATS.get(p.suffix.lower())
    if fmt is None:
        raise ValueError(f"{p.name}: the figure is written as PNG, SVG or PDF; name the file *.png, *.svg or *.pdf")
    if not data.curves:
        raise ValueError("no curves to draw")
    markers = ("o", "^", "s", "D")
    with rc_context({"svg.hashsalt": "numoracle", "svg.fonttype": "path", "font.size": 9}):
        fig = Figure(figsize=(10.5, 5.6), dpi=dpi, layout="constrained")
        ax = fig.add_subplot()
        lo, hi = math.inf, 0.0
        for i, c in enumerate(data.curves):
            col = f"C{i % 10}"
            K = np.array(c.Ks, float)
            if "worst" in data.kinds:
                ax.plot(K, c.worst, "-", color=col, lw=1.6, label=c.label)
                hi = max(hi, *c.worst)
            if "probabilistic" in data.kinds and c.probabilistic:
                ax.plot(K, c.probabilistic, "--", color=col, lw=1.2,
                        label=None if "worst" in data.kinds else c.label)
                hi = max(hi, *c.probabilistic)
            for j, d in enumerate(data.datasets):
                y = np.array(c.max_error[d])
                ok = y > 0
                ax.plot(K[ok], y[ok], linestyle="none", marker=markers[j % len(markers)], ms=5, color=col,
                        mfc=col if j == 0 else "white", mew=1.1)
                if ok.any():
                    lo = min(lo, float(y[ok].min()))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        lo = lo if math.isfinite(lo) else hi / 1e6
        ax.set_ylim(lo / 3, min(max(hi * 2, 2 * lo), 3.0))
        if hi >= 1:
            ax.axhline(1.0, color="0.4", lw=0.8, ls=":")
            ax.text(data.Ks[0], 1.12, "c >= 1: vacuous (says nothing)", color="0.3", fontsize=8)
        ax.set_xticks(data.Ks)
        ax.set_xticklabels([str(k) for k in data.Ks], rotation=45 if len(data.Ks) > 10 else 0)
        ax.set_xlabel("K (reduction length)")
        t = "a_k b_k" if data.op == "dot" else "x_k"
        ax.set_ylabel(f"relative error  |y_hat - y| / sum|{t}|")
        ax.grid(True, which="major", color="0.9", lw=0.6)
        ax.set_title(title or f"{data.op}: error bounds (lines) vs emulated errors (markers), {data.samples} samples "
                     f"per K and data set, seed {data.seed}", fontsize=10)
        first = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title_fontsize=8,
                          title="colour: inputs, accumulator, order", frameon=False)
        ax.add_artist(first)
        style = []
        if "worst" in data.kinds:
            style.append(Line2D([], [], color="0.2", lw=1.6, label="worst-case bound (guaranteed)"))
        if "probabilistic" in data.kinds:
            style.append(Line2D([], [], color="0.2", lw=1.2, ls="--",
                                label=f"probabilistic bound (p >= {data.confidence} per element)"))
        for j, d in enumerate(data.datasets):
            style.append(Line2D([], [], color="0.2", ls="none", marker=markers[j % len(markers)],
                                mfc="0.2" if j == 0 else "white", label=f"max emulated error, {DATASETS[d]} data"))
        ax.legend(handles=style, loc="lower left", bbox_to_anchor=(1.01, 0.0), fontsize=8, frameon=False)
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, metadata=_metadata(fmt))
    p.write_bytes(buf.getvalue())
    return p
