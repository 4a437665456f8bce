"""The problem identify_order solves: a kernel's inputs and outputs, the inputs as a kernel may have read them
(operands rounded on the way in), and the scoring of one candidate arithmetic against the outputs bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.engine.codekeys import is_nan, to_key
from ..core.engine.convert import cast, decode
from ..core.errors import ArgumentTypeError, NumoracleError
from ..core.formats.format import Format, format_of
from ..core.formats.interop import to_codes
from ..models.arithmetic import Arithmetic
from ..models.engine.simulation import simulate
from ..models.orders.basic import Order
from .report import Candidate, ulp_histogram

__all__ = ["Problem", "native", "ulps", "operand_text", "row_index"]

# operand roundings a kernel may apply on the way in, per input format: (format, rounding)
OPERAND_ROUNDINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "fp32": (("tf32", "rne"), ("tf32", "rtz"), ("tf32", "rna")),
}


def operand_text(operands: tuple | None) -> str:
    return "" if operands is None else f"operands rounded to {operands[0]} ({operands[1]})"


def native(x: Any, what: str) -> np.ndarray:
    if isinstance(x, np.ndarray) and x.dtype.kind not in "OUSVb":
        return x
    from ..core.formats.interop import as_native
    codes, fmt = to_codes(x, what)
    return as_native(codes, fmt)


def ulps(ka: np.ndarray, kb: np.ndarray, fmt: Format) -> np.ndarray:
    """Signed ULP distances of ordered keys (-0 and +0 are one point)."""
    d = ka.astype(np.int64) - kb.astype(np.int64)
    if fmt.has_negative_zero:
        d = np.where((ka < 0) & (kb >= 0), d + 1, np.where((ka >= 0) & (kb < 0), d - 1, d))
    return d


def row_index(rows: Any, n: int) -> np.ndarray:
    """identify_order's ``rows=`` as distinct row indices in [0, n): a non-empty list of ints, or a boolean
    mask of n entries with at least one True. Refused (naming the fix): floats, negative or out-of-range indices
    (-1 is not "the last row" here), repeated rows, a mask of another length, an empty selection."""
    try:
        idx = np.asarray(rows)
    except (ValueError, TypeError) as e:
        raise ArgumentTypeError(f"rows must be a list of row indices or a boolean mask, got {type(rows).__name__} "
                                f"({e})") from None
    fix = f"give row indices in 0..{n - 1} or a boolean mask of {n} entries"
    if idx.dtype == bool:
        if idx.ndim != 1 or idx.size != n:
            raise NumoracleError(f"rows: a boolean mask must have one entry per output row ({n}), got shape "
                                 f"{idx.shape}; {fix}")
        idx = np.flatnonzero(idx)
    elif idx.dtype.kind in "iu" and idx.ndim <= 1:
        idx = idx.ravel().astype(np.int64)
        bad = idx[(idx < 0) | (idx >= n)]
        if bad.size:
            raise NumoracleError(f"rows: row {int(bad[0])} is not an output row; {fix}")
        if np.unique(idx).size != idx.size:
            raise NumoracleError(f"rows: row {int(idx[np.argmax(np.bincount(idx))])} is given more than once; {fix}")
    elif idx.size or idx.dtype.kind not in "f":
        raise ArgumentTypeError(f"rows must be integer row indices or a boolean mask, got {idx.dtype} values "
                                f"{rows!r:.40}; {fix}")
    if idx.size == 0:
        raise NumoracleError(f"rows selects no output row; {fix} (rows=None: every row)")
    return idx


WATCHED = 1024      # output elements per candidate kept for the verdict's evidence (rows are exchangeable)


class Problem:
    """The kernel's inputs and outputs, cut to rows on demand, and the scoring of one candidate."""

    def __init__(self, actual: Any, op: str, inputs: tuple, acc: Any, out: Any, rows: Any):
        self.op = str(op).lower()
        if self.op not in ("sum", "dot", "matmul"):
            composite = self.op in ("softmax", "log_softmax", "logsumexp", "rms_norm", "layer_norm")
            raise ValueError(f"unknown op {op!r}; identify_order supports sum, dot, matmul" + (
                f" (for {self.op} call numoracle.composite.identify_composite(actual, {self.op!r}, x): it scores "
                "whole-kernel models, docs/identify.md)" if composite else ""))
        need = 1 if self.op == "sum" else 2
        if len(inputs) != need:
            raise TypeError(f"identify_order({self.op!r}) takes {need} input array(s), got {len(inputs)}")
        self.inputs = tuple(native(x, f"input {i}") for i, x in enumerate(inputs))
        codes, fmt = to_codes(actual, "actual")
        if not isinstance(fmt, Format):
            raise TypeError(f"actual holds {fmt.name} codes; pass the kernel's floating-point outputs")
        self.acc = format_of(acc)
        self.out = format_of(out) if out is not None else fmt
        if fmt != self.out:   # outputs stored wider than they were rounded to (e.g. fp16 sums kept as float32)
            wide, codes = codes, cast(codes, self.out, src=fmt)
            back = decode(codes, self.out)
            lost = ~((back == decode(wide, fmt)) | np.isnan(back))
            if lost.any():
                raise ValueError(f"out={self.out.name}: {int(lost.sum())} of actual's {fmt.name} values are not "
                                 f"{self.out.name} values (e.g. {decode(wide, fmt)[lost].ravel()[0]!r}); give the "
                                 "format the kernel rounded its outputs to")
        shape = self._shape()
        if codes.shape != shape:
            raise ValueError(f"actual has shape {codes.shape}, but {self.op} of inputs of shapes "
                             f"{[x.shape for x in self.inputs]} gives {shape}")
        self.n_outputs = int(np.prod(shape)) if shape else 1   # before any row subset: the kernel's launch
        self.vector = self.op == "sum" and not shape   # a 1-D sum (one output): scored as one row of one sum
        if self.vector:
            self.inputs, codes, shape = (self.inputs[0][None, :],), np.asarray(codes).reshape(1), (1,)
        if rows is not None:
            if self.op == "dot":
                raise ValueError("rows= selects output rows; a dot product has a single output")
            idx = row_index(rows, shape[0])
            self.inputs = (self.inputs[0][idx],) + self.inputs[1:]
            codes = codes[idx]
        self.codes = np.asarray(codes)
        self.n_rows = 1 if self.op == "dot" else self.codes.shape[0]
        self.K = self.inputs[0].shape[-1]
        self.evaluated = 0
        self._exact: dict = {}
        self._read: dict = {None: self.inputs}
        self._variants: list | None = None
        self.aliases: list[tuple] = []     # (operand rounding, the earlier one that reads the same values here)
        self.watch: np.ndarray | None = None   # the rows every candidate is scored on (the pruning rows; None: all)
        self.predictions: dict[tuple, np.ndarray] = {}   # candidate key -> its output codes on the watched rows

    def _shape(self) -> tuple:
        x = self.inputs[0]
        if self.op == "sum":
            if x.ndim < 1 or x.shape[-1] < 1:
                raise ValueError("identify_order('sum') reduces the last axis of a non-empty array")
            return x.shape[:-1]
        b = self.inputs[1]
        if self.op == "dot":
            return ()
        if x.ndim != 2 or b.ndim != 2 or x.shape[1] != b.shape[0]:
            raise ValueError(f"matmul takes A (m, K) and B (K, n); got shapes {x.shape} and {b.shape}")
        return (x.shape[0], b.shape[1])

    @property
    def in_fmt(self) -> Format:
        return format_of(self.inputs[0].dtype)

    def arith(self, order: Order, acc: Format | None = None, operands: tuple | None = None) -> Arithmetic:
        """The candidate as one Arithmetic value: its order, accumulator, output format and operand rounding."""
        a = acc if acc is not None else (None if order.acc is not None else self.acc)
        kw = {} if operands is None else {"operands": operands[0], "operands_rounding": operands[1]}
        return Arithmetic(acc=a, order=order, out=self.out, **kw)

    def operand_variants(self) -> list[tuple | None]:
        """How the inputs may have been read: as given, or rounded to a narrower format (those that change them)."""
        if self._variants is None:
            found: list[tuple | None] = [None]
            for v in OPERAND_ROUNDINGS.get(self.in_fmt.name, ()):
                same = next((u for u in found if all(np.array_equal(x, y) for x, y in zip(self.read(u), self.read(v)))),
                            "none")
                if same == "none":
                    found.append(v)
                else:   # the same operands on these inputs (no ties, say): one arithmetic here, the first one named
                    self.aliases.append((v, same))
            self._variants = found
        return self._variants

    def read(self, operands: tuple | None) -> tuple:
        """The inputs rounded as ``operands`` = (format, rounding) says (cached), as float32 / float64 arrays."""
        if operands not in self._read:
            self._read[operands] = Arithmetic(operands=operands[0], operands_rounding=operands[1]).read_operands(
                self.inputs)
        return self._read[operands]

    def cut(self, rows: np.ndarray | None, lo: int = 0, hi: int | None = None, operands: tuple | None = None) -> tuple:
        """The inputs (as read with ``operands``) of the given rows, and of terms lo..hi-1 only."""
        ins = self.read(operands)
        if rows is not None and self.op != "dot":
            ins = (ins[0][rows],) + ins[1:]
        if lo == 0 and hi is None:
            return ins
        if self.op == "sum":
            return (np.ascontiguousarray(ins[0][..., lo:hi]),)
        return np.ascontiguousarray(ins[0][..., lo:hi]), np.ascontiguousarray(ins[1][lo:hi])

    def score(self, order: Order, rows: np.ndarray | None, stage: str, acc: Format | None = None,
              operands: tuple | None = None) -> Candidate:
        """Simulate the candidate on the given rows (every row: through simulate's own arith= path on the
        inputs as given, the confirmation) and compare its output bits with the kernel's."""
        a = self.arith(order, acc, operands)
        if rows is None or self.op == "dot":
            got = simulate(self.op, *self.inputs, arith=a, codes=True)
        elif getattr(order, "per_position", False):   # an order per output position: place the rows in the whole
            got = simulate(self.op, *self.cut(None, operands=operands), acc=a.accumulator, order=order, out=self.out,
                           codes=True)[rows]
        else:
            got = simulate(self.op, *self.cut(rows, operands=operands), acc=a.accumulator, order=order, out=self.out,
                           codes=True)
        self.evaluated += 1
        return self.compare(order, got, rows, stage, acc=acc, operands=operands)

    def compare(self, order: Order, got: np.ndarray, rows: np.ndarray | None, stage: str, simulated: bool = True,
                acc: Format | None = None, operands: tuple | None = None) -> Candidate:
        """Score a model's output codes (of the given rows) against the kernel's; simulated=False marks codes
        computed by a shortcut (a guide for the search: such a score never confirms an order)."""
        ref = self.codes if rows is None or self.op == "dot" else self.codes[rows]
        self._keep(got, rows, (order, acc, operands))
        bias = self.bias(got, rows)
        got, ref = np.asarray(got).ravel(), np.asarray(ref).ravel()
        nan_g, nan_r = is_nan(got, self.out), is_nan(ref, self.out)
        same = (got.astype(np.uint64) == ref.astype(np.uint64)) | (nan_g & nan_r)
        known = ~nan_g & ~nan_r
        d = ulps(to_key(np.where(known, got, 0), self.out), to_key(np.where(known, ref, 0), self.out), self.out)
        return Candidate(order, stage, int(same.sum()), int(same.size), ulp_histogram(d[~same & known],
                                                                                       int((~same & ~known).sum())),
                         float(np.median(np.abs(d[known]))) if known.any() else float("nan"),
                         (rows is None or self.op == "dot") and simulated, bias, simulated, acc, operands)

    def _keep(self, got: np.ndarray, rows: np.ndarray | None, key: tuple) -> None:
        """Keep a candidate's prediction on the watched rows (its first WATCHED elements), for the verdict's
        estimate of how the tried candidates spread over the kernel's outputs (:mod:`.evidence`)."""
        got = np.asarray(got)
        if self.op != "dot" and rows is None and self.watch is not None:
            got = got[self.watch]
        elif self.op != "dot" and rows is not None and (self.watch is None or rows is not self.watch
                                                        and not np.array_equal(rows, self.watch)):
            return       # another row subset: not comparable with the others' predictions
        self.predictions[key] = got.ravel()[:WATCHED].astype(np.uint64)

    def watched(self) -> np.ndarray:
        """The kernel's output codes on the watched rows, as :meth:`_keep` keeps the candidates'."""
        ref = self.codes if self.op == "dot" or self.watch is None else self.codes[self.watch]
        return np.asarray(ref).ravel()[:WATCHED].astype(np.uint64)

    def bias(self, codes: np.ndarray, rows: np.ndarray | None) -> float:
        """Mean direction of the outputs' errors: -1 all toward zero (truncation), 0 unbiased, +1 away.

        Measured against the float64 evaluation of the inputs (a guide for the search, not a verdict):
        a truncating block FMA and a round-to-nearest order differ here even when few bits agree."""
        key = (None if rows is None else rows.tobytes())
        if key not in self._exact:
            ins = [x.astype(np.float64) for x in self.inputs]
            if rows is not None and self.op != "dot":
                ins[0] = ins[0][rows]
            self._exact[key] = ins[0].sum(axis=-1) if self.op == "sum" else ins[0] @ ins[1]
        ex = np.asarray(self._exact[key]).ravel()
        v = decode(np.asarray(codes).ravel(), self.out)
        ok = np.isfinite(v) & (ex != 0) & (v != ex)
        return float(np.mean(np.sign(v[ok] - ex[ok]) * np.sign(ex[ok]))) if ok.any() else 0.0
