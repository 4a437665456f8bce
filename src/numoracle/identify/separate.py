"""Inputs that separate orders: ``separating_inputs(orders, op, shape, dtype)`` builds inputs on which the given
orders (or whole arithmetics) give different outputs, for the user to rerun a kernel on.

Rows of inputs are drawn from several kinds of data (normal values; magnitudes spread over 2^-10..2^10; every
16th term scaled by 2^12 with random signs, which makes long sums cancel; one large term among small ones; values
near a power of two), every candidate is simulated on them, and rows are picked greedily until every pair of
candidates differs on at least one output element (matmul: one row of A against a shared B; sum: one row; dot:
one vector against a shared one, a kernel call each: ``calls`` of them at most). Pairs that no drawn row tells
apart are reported: on every input tried they are the same arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from ..core.args import check_choice, check_int
from ..core.engine.convert import cast, decode
from ..core.errors import NumoracleError
from ..core.formats.format import FP32, Format, format_of
from ..core.formats.interop import as_native
from ..models.arithmetic import Arithmetic
from ..models.engine.simulation import simulate
from ..models.orders.basic import Order
from ..models.orders.text import order_text

__all__ = ["separating_inputs", "SeparatingInputs", "KINDS"]

KINDS = ("normal", "spread", "cancel", "one_large", "near_pow2")
FRESH_KINDS = KINDS + ("mirror",)     # rerun's confirmation draws these too


def _as_arith(o: Any, acc: Any, out: Any) -> Arithmetic:
    if isinstance(o, Arithmetic):
        a = o
    elif isinstance(o, Order):
        a = Arithmetic(acc=None if o.acc is not None else acc, order=o)
    else:
        order = getattr(o, "order", None)     # an identify Candidate: its order, accumulator and operand rounding
        if not isinstance(order, Order):
            raise TypeError(f"separating_inputs takes orders or numoracle.Arithmetic values, got {o!r}")
        ops = getattr(o, "operands", None)
        kw = {} if ops is None else {"operands": ops[0], "operands_rounding": ops[1]}
        a = Arithmetic(acc=getattr(o, "acc", None) or (None if order.acc is not None else acc), order=order, **kw)
    return a if out is None or a.out is not None else a.replace(out=out)


def _name(a: Arithmetic) -> str:
    extra = [] if a.acc is None or a.acc == a.order.acc else [f"acc={a.acc.name}"]
    extra += [f"operands {a.operands.name} ({a.operands_rounding})"] if a.operands is not None else []
    return order_text(a.order) + (f" [{', '.join(extra)}]" if extra else "")


def _rows(kind: str, n_rows: int, K: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal((n_rows, K))
    if kind == "spread":
        x *= np.exp2(rng.integers(-10, 11, (n_rows, K)))
    elif kind == "cancel":
        big = np.zeros((n_rows, K), bool)
        big[:, rng.integers(0, 16)::16] = True
        x = np.where(big, np.exp2(12) * rng.choice([-1.0, 1.0], (n_rows, K)), x)
    elif kind == "one_large":
        x *= 2.0 ** -8
        x[np.arange(n_rows), rng.integers(0, K, n_rows)] = rng.choice([-1.0, 1.0], n_rows) * rng.uniform(1, 2, n_rows)
    elif kind == "mirror":                  # the second half cancels the first, reversed: a small sum of large terms
        h = K // 2
        x[:, K - h:] = -x[:, :h][:, ::-1] * (1 + rng.uniform(-2.0 ** -10, 2.0 ** -10, (n_rows, h)))
    elif kind == "near_pow2":
        wobble = 1 + rng.uniform(-2.0 ** -8, 2.0 ** -8, (n_rows, K))
        x = np.sign(x) * np.exp2(rng.integers(-4, 5, (n_rows, K))) * wobble
    return x


def _steer(row: np.ndarray, B: np.ndarray | None, fmt: Format, out: Format, col: int,
           rng: np.random.Generator) -> np.ndarray:
    """The row with a few of its terms nudged so that its exact result (of column ``col`` for a matmul) lies
    next to a midpoint of ``out``: there the orders' last-bit differences decide the rounding, so orders that
    agree elsewhere in ``out`` (16-bit outputs) differ."""
    x = row.astype(np.float64).copy()
    w = np.ones(x.size) if B is None else B[:, col].astype(np.float64)
    ok = np.flatnonzero(w != 0)
    if not ok.size:
        return row
    e = float(np.dot(x, w))
    with np.errstate(all="ignore"):
        lo = float(np.asarray(decode(cast(np.array([e]), out, rounding="rtz"), out))[0])
    if not np.isfinite(lo) or lo == 0:
        return row
    ulp = 2.0 ** (max(np.floor(np.log2(abs(lo))), out.emin) - (out.precision - 1))
    hi = lo + np.sign(e if e else 1.0) * ulp
    m = (lo + hi) / 2
    for k in rng.choice(ok, size=min(3, ok.size), replace=False):
        with np.errstate(all="ignore"):
            t = x[k] + (m - float(np.dot(x, w))) / w[k]
            x[k] = float(np.asarray(decode(cast(np.array([t]), fmt), fmt))[0])
    return x.astype(row.dtype) if np.all(np.isfinite(x)) else row


def _ties(row: np.ndarray, narrow: Format, rng: np.random.Generator) -> np.ndarray:
    """The row with half its terms moved onto a midpoint of ``narrow`` (the format the operands are rounded to on
    the way in): there rounding ties to even, away from zero and toward zero read different values, which inputs
    drawn at random almost never show (a tie is 1 in 2^13 FP32 values for TF32)."""
    x = row.copy()
    with np.errstate(all="ignore"):
        t = np.asarray(decode(cast(x, narrow, rounding="rtz"), narrow), np.float64)
    ok = np.isfinite(t) & (t != 0) & (rng.random(x.size) < 0.5)
    e = np.floor(np.log2(np.abs(np.where(ok, t, 1.0))))
    half = np.exp2(np.maximum(e, narrow.emin) - narrow.man_bits - 1)
    x[ok] = (t + np.sign(t) * half)[ok]
    return x


def _in_format(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(all="ignore"):
        codes = cast(x, fmt)
    return as_native(codes, fmt)


@dataclass
class SeparatingInputs:
    """Inputs on which candidate arithmetics differ, their outputs, and which pairs they could not tell apart."""

    op: str
    inputs: tuple
    names: list[str]
    outputs: list[np.ndarray]          # simulate's outputs (codes of the output format) per candidate
    arithmetics: list[Arithmetic]
    not_separated: list[tuple[int, int]] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)   # the kind of data of each row
    row_calls: bool = False    # a sum of one vector: the kernel is called once per row of inputs[0]

    @property
    def separated(self) -> bool:
        return not self.not_separated

    def which(self, actual: Any) -> list[str]:
        """The candidates whose outputs on these inputs equal ``actual`` (the kernel rerun on them) bit for bit."""
        from ..core.formats.interop import to_codes
        codes, fmt = to_codes(actual, "actual")
        found = []
        for name, a, got in zip(self.names, self.arithmetics, self.outputs):
            ofmt = a.out or a.accumulator
            c = codes if fmt == ofmt else cast(codes, ofmt, src=fmt)
            if np.array_equal(np.asarray(c).astype(np.uint64).ravel(), np.asarray(got).astype(np.uint64).ravel()):
                found.append(name)
        return found

    @property
    def calls(self) -> list[tuple]:
        """The kernel's calls these inputs make: one, or for a dot given several vectors, one per row of
        ``inputs[0]`` against ``inputs[1]`` (a single dot has one output: one call cannot tell more than two
        orders apart, several can)."""
        # each row a fresh array (not a view into the rows' block): a kernel may pick its order by the data's
        # alignment (MKL's dot peels to an aligned address), and a recorded call had an array of its own
        if self.op == "dot" and self.inputs[0].ndim == 2:
            return [(np.array(a), self.inputs[1]) for a in self.inputs[0]]
        if self.row_calls and self.inputs[0].ndim == 2:    # a kernel that sums one vector: a call per row
            return [(np.array(a),) for a in self.inputs[0]]
        return [self.inputs]

    def rerun(self, fn: Any, *, confirm: bool = True, seed: int = 1) -> list[str]:
        """``fn`` (the kernel) called on these inputs as :attr:`calls` says, and the candidates whose outputs equal
        its outputs bit for bit (:meth:`which`). confirm: each candidate named is also checked on fresh inputs of
        the same shapes (every kind of row, ``seed``): the separating inputs tell the candidates apart, not
        the candidates from a kernel that is none of them, which may agree with one of them on these inputs and
        not on others. A candidate that fails the fresh inputs is dropped (an empty list: none is the kernel)."""
        names = self._kernel_matches(fn)
        if confirm and names:
            fresh = self.fresh(seed)
            names = [n for n in fresh._kernel_matches(fn) if n in names]
        return names

    def _kernel_matches(self, fn: Any) -> list[str]:
        outs = [np.asarray(fn(*c)) for c in self.calls]
        return self.which(outs[0] if len(outs) == 1 else np.stack(outs))

    def fresh(self, seed: int = 1) -> SeparatingInputs:
        """The same candidates on fresh inputs of these shapes and format (rows of every kind: normal, spread,
        cancelling, ...)."""
        rng = np.random.default_rng(seed)
        fmt = format_of(self.inputs[0].dtype)
        A0 = self.inputs[0]
        A2 = A0 if A0.ndim == 2 else A0[None, :]
        rows = np.concatenate([_in_format(_rows(FRESH_KINDS[r % len(FRESH_KINDS)], 1, A2.shape[1], rng), fmt)
                               for r in range(len(A2))])
        A = rows if A0.ndim == 2 else rows[0]
        if self.op == "sum":
            inputs: tuple = (A,)
        else:
            B0 = self.inputs[1]
            B = _in_format(rng.standard_normal(B0.shape).reshape(1, -1), format_of(B0.dtype)).reshape(B0.shape)
            inputs = (A, B)
        if self.op == "dot" and A.ndim == 2:
            outs = [np.asarray(_run(a, "matmul", A, inputs[1][:, None])).ravel() for a in self.arithmetics]
        else:
            outs = [simulate(self.op, *inputs, arith=a, codes=True) for a in self.arithmetics]
        return SeparatingInputs(self.op, inputs, list(self.names), outs, list(self.arithmetics),
                                list(self.not_separated), [FRESH_KINDS[r % len(FRESH_KINDS)] for r in range(len(A2))],
                                self.row_calls)

    def instructions(self) -> str:
        shapes = " and ".join("x".join(map(str, x.shape)) for x in self.inputs)
        what = (f"against sep.inputs[1] ({len(self.calls)} dots of {self.inputs[1].size}" if self.op == "dot" else
                f"({len(self.calls)} sums of {self.inputs[0].shape[-1]}")
        how = (f"call the kernel once per row of sep.inputs[0] {what}, {self.inputs[0].dtype}; sep.calls lists "
               f"them) and pass the outputs stacked to "
               f"sep.which(outputs), or call sep.rerun(kernel)" if len(self.calls) > 1 else
               f"rerun the kernel on sep.inputs ({shapes}, {self.inputs[0].dtype}); sep.which(new_output) or "
               "sep.rerun(kernel)")
        lines = [f"{how} names the one of the {len(self.names)} candidates (from numoracle.identify.separating_inputs("
                 f"rep.classes, {self.op!r}, shape, dtype)) that reproduces it"]
        for i, j in self.not_separated:
            lines.append(f"no input tried separates {self.names[i]} from {self.names[j]}: the same arithmetic on "
                         "every input tried")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.instructions()


def separating_inputs(orders: Any, op: str, shape: Any, dtype: Any, *, acc: Any = FP32, out: Any = None,
                      seed: int = 0, pools: int = 4, pool_rows: int = 64, calls: int = 1,
                      min_calls: int = 1) -> SeparatingInputs:
    """Inputs of the given shape and format on which the given orders give different outputs.

    orders: numoracle orders or :class:`numoracle.Arithmetic` values (an AMBIGUOUS report's ``classes`` work too:
    their first candidate each). op: "sum" (shape (rows, n)), "dot" (shape (K,)) or "matmul" (shape (M, K, N)).
    dtype: the input format. acc: the accumulator where an order does not fix one; out: the format the kernel
    stores (16-bit outputs hide differences that FP32 outputs show). Rows are picked from ``pools`` pools of
    ``pool_rows`` drawn rows until every pair differs somewhere; pairs still equal are listed (``not_separated``).
    calls: for "dot", how many vectors (kernel calls) may be used: one output tells at most two orders apart, so a
    dot that must separate more gets up to ``calls`` rows in ``inputs[0]``, as many as it needs
    (:attr:`SeparatingInputs.calls`, :meth:`SeparatingInputs.rerun`). min_calls: for "dot", at least this many
    (up to ``calls``; the others drawn data): outputs enough to confirm the one that reproduces them, not only to
    tell the candidates apart (an order outside them matches one of two on a single output by chance).
    """
    items = list(orders) if isinstance(orders, (list, tuple)) else [orders]
    items = [c[0] if isinstance(c, list) and c else c for c in items]
    if not items:
        raise ValueError("orders is empty: give the orders (or Arithmetic values) to separate")
    ariths = [_as_arith(o, acc, out) for o in items]     # in the order given (equal ones are never separated)
    if out is None:     # one output format for all, so that their codes compare: the widest accumulator
        wide = max((a.accumulator for a in ariths), key=lambda f: (f.precision, f.emax))
        ariths = [a if a.out is not None else a.replace(out=wide) for a in ariths]
    fmt = format_of(dtype)
    op = check_choice(op.lower() if isinstance(op, str) else op, "op", ("sum", "dot", "matmul"))
    M, K, N = _dims(op, shape)
    calls = check_int(calls, "calls", 1, 1 << 10)
    if op == "dot":
        M = calls
    seed, pools = check_int(seed, "seed", 0), check_int(pools, "pools", 1, 1 << 10)
    pool_rows = check_int(pool_rows, "pool_rows", 1, 1 << 16)
    _check_size(op, (M, K, N), pool_rows)
    ofmt = ariths[0].out or ariths[0].accumulator
    reads = [a.operands for a in ariths if a.operands is not None and a.operands.precision < fmt.precision]
    narrow = min(reads, key=lambda f: f.precision) if reads else None   # operands rounded on the way in
    rng = np.random.default_rng(seed)
    B = _in_format(rng.standard_normal((K, N)), fmt) if op != "sum" else None
    pairs = set(combinations(range(len(ariths)), 2))
    chosen: list[np.ndarray] = []
    kinds: list[str] = []
    for _ in range(max(1, pools)):
        if not pairs or len(chosen) >= M:
            break
        ks = [KINDS[i % len(KINDS)] for i in range(pool_rows)]
        pool = np.concatenate([_in_format(_rows(k, 1, K, rng), fmt) for k in ks])
        for r in range(1, pool_rows, 2):    # every other row steered next to a midpoint of the output format
            row = _steer(pool[r].astype(np.float64), B, fmt, ofmt, r % N, rng)
            pool[r] = _in_format(row[None, :], fmt)[0]
        if narrow is not None:              # every fourth row: ties of the operand format (rne, rtz, rna differ)
            for r in range(2, pool_rows, 4):
                pool[r] = _in_format(_ties(pool[r].astype(np.float64), narrow, rng)[None, :], fmt)[0]
        res = [np.asarray(_run(a, op, pool, B)).reshape(pool_rows, -1) for a in ariths]
        while pairs and len(chosen) < M:
            gain = [sum(1 for i, j in pairs if not np.array_equal(res[i][r], res[j][r])) for r in range(pool_rows)]
            r = int(np.argmax(gain))
            if gain[r] == 0:
                break
            chosen.append(pool[r])
            kinds.append(ks[r])
            pairs = {(i, j) for i, j in pairs if np.array_equal(res[i][r], res[j][r])}
    if op == "dot" and chosen:        # a dot: as many calls as the separation needed (and min_calls)
        M = max(len(chosen), min(check_int(min_calls, "min_calls", 1), calls))
    while len(chosen) < M:            # the other rows: more drawn data of every kind
        k = KINDS[len(chosen) % len(KINDS)]
        chosen.append(_in_format(_rows(k, 1, K, rng), fmt)[0])
        kinds.append(k)
    A = np.stack(chosen[:M])
    inputs = (A,) if op == "sum" else ((A[0] if M == 1 else A, B[:, 0]) if op == "dot" else (A, B))
    if op == "sum" and (isinstance(shape, (int, np.integer)) or len(shape) == 1):
        inputs = (A[0],)
    if op == "dot" and M > 1:        # one dot per row: the rows against the one column
        outs = [np.asarray(_run(a, "matmul", A, B[:, :1])).ravel() for a in ariths]
    else:
        outs = [simulate(op, *inputs, arith=a, codes=True) for a in ariths]
    return SeparatingInputs(op, inputs, [_name(a) for a in ariths], outs, ariths, sorted(pairs), kinds[:M])


def _dims(op: str, shape: Any) -> tuple[int, int, int]:
    """(M, K, N) of op's shape: sum (n,) or (rows, n), dot (K,), matmul (M, K, N); each size in 1 .. 2^24."""
    s = (shape,) if isinstance(shape, (int, np.integer)) else shape
    want = {"sum": (1, 2), "dot": (1,), "matmul": (3,)}[op]
    if not isinstance(s, (tuple, list)) or len(s) not in want:
        form = {"sum": "(n,) or (rows, n)", "dot": "(K,)", "matmul": "(M, K, N)"}[op]
        raise ValueError(f"shape must be {form} for {op}, got {type(shape).__name__} {shape!r:.40}")
    d = [check_int(v, "shape", 1, 1 << 24) for v in s]
    if op == "matmul":
        return d[0], d[1], d[2]
    return (d[0], d[1], 1) if len(d) == 2 else (1, d[0], 1)


MAX_ELEMENTS = 1 << 28    # inputs, pools and outputs together (2 GiB of float64): the sizes' product is checked


def _check_size(op: str, dims: tuple[int, int, int], pool_rows: int) -> None:
    """Refuse a shape whose arrays (the drawn pools, the inputs, the outputs) hold more than MAX_ELEMENTS values
    together, before any is made: each size may be small while their product is not ((2**24, 2**24))."""
    M, K, N = dims
    total = (M + pool_rows) * K + K * N + (M + pool_rows) * N
    if total > MAX_ELEMENTS:
        raise NumoracleError(f"separating_inputs for {op} of shape (M, K, N) = {dims} with pool_rows={pool_rows} "
                             f"needs {total:.3g} values, more than {MAX_ELEMENTS} (2^28): give a smaller shape (fewer "
                             "rows, or a shorter K; a few rows of the kernel's K separate orders as well)")


def _run(a: Arithmetic, op: str, rows: np.ndarray, B: np.ndarray | None) -> np.ndarray:
    if op == "sum":
        return simulate("sum", rows, arith=a, codes=True)
    return simulate("matmul", rows, B, arith=a, codes=True)
