"""In-place masking probes: one set of inputs kept between calls, each probe written into a lane of it and undone.

A probe (a, j, zero) puts +M at term a, -M at term j, 0 at the terms ``zero`` and the unit s u (s = +-1,
the sign) at every other term. A *lane* is the part of the inputs one probe occupies:

* ``"all"``: every output position sees the probe (a sum's x[n], or every row of x[R, n]; a dot; a matmul whose
  rows of A and columns of B repeat, each term split into two exact factors): one probe per call;
* ``"rows"``: row r of x[R, n] (a sum over the last axis), or row r of A with B of ones (a matmul): R probes per
  call, read at that row's outputs;
* ``"cols"``: column c of B with A of ones (a matmul): N probes per call, read at that column's outputs.

The inputs are edited in place between calls (FPRev's probes), so a probe costs fn's own time plus a few item
writes; the outputs are read once per batch (``Prober.read_many``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .probe import Prober

__all__ = ["Lanes", "packed_modes"]

UNIT, PLUS, MINUS, ZERO = 0, 1, 2, 3
_RECHECK = 8          # calls of the last batch repeated to tell a kernel that is not deterministic


def packed_modes(p: Prober, u: float, M: float) -> list[str]:
    """The lane layouts that carry several probes per call here, widest first: a sum over rows; a matmul's rows
    of A or columns of B (where u and +-M are themselves input values: no split into factors)."""
    if p.op == "sum" and p.rows > 1:
        return ["rows"]
    if p.op != "matmul":
        return []
    v = np.array([u, M, -M])
    with np.errstate(all="ignore"):
        if not np.array_equal(v.astype(p.dtype).astype(np.float64), v):
            return []
    Mr, _, N = p.shape  # type: ignore[misc]
    modes = [m for m, k in (("rows", Mr), ("cols", N)) if k > 1]
    return sorted(modes, key=lambda m: -(Mr if m == "rows" else N))


class Lanes:
    """The kernel's inputs laid out for masking probes (module docstring), and the loop that runs them."""

    def __init__(self, p: Prober, u: float, M: float, sign: int = 1, mode: str = "all",
                 which: np.ndarray | None = None):
        self.p, self.u, self.M, self.sign, self.mode = p, u, M, sign, mode
        self._grid: tuple | None = None              # (array, lanes are its rows) of a packed layout
        width = 1 if mode == "all" else p.out_shape[0] if mode == "rows" else p.out_shape[-1]
        # the rows / columns this layout probes in (a lane class, reveal/classes.py): lane l is row which[l]
        self.which = np.arange(width) if which is None or mode == "all" else np.asarray(which, np.int64)
        self.lanes = self.which.size
        self.per = p.npos // width                   # output positions each lane is read at
        self._all = self.lanes == width and bool((self.which == np.arange(width)).all())
        self.args, self._put = self._layout(np.array([sign * u, M, -M, 0.0]))
        x = self.args[0]
        self._one = (x, x[0], *self.p.native(np.array([M, -M]), "probe")) if mode == "all" and p.op == "sum" \
            and x.ndim == 1 else None
        self._pair = self._pair_values() if mode == "all" and p.op == "dot" else None
        self.recent: list[tuple] = []                # the last batch's last calls, for a determinism check

    def _layout(self, v: np.ndarray) -> tuple[tuple, Callable]:
        """The inputs (units everywhere) and put(lane, terms, code) writing code's value at those terms."""
        p, n, at = self.p, self.p.n, self.which.tolist()
        if self.mode == "all" and p.op != "sum":
            fa, fb = p.split(v[:3])
            fa, fb = np.append(fa, 0.0), np.append(fb, fb[0])
            ta, tb = p.native(fa, "probe"), p.native(fb, "probe")
            if p.op == "dot":
                a, b = np.full(n, ta[0]), np.full(n, tb[0])

                def put_dot(lane: int, k: Any, c: int) -> None:
                    a[k], b[k] = ta[c], tb[c]
                return (a, b), put_dot
            Mr, _, N = p.shape  # type: ignore[misc]
            A, B = np.full((Mr, n), ta[0]), np.full((n, N), tb[0])

            def put_mm(lane: int, k: Any, c: int) -> None:
                A[:, k], B[k, :] = ta[c], tb[c]
            return (A, B), put_mm
        tv = p.native(v, "probe")
        self._tv = tv
        if p.op == "sum":
            x = np.full((p.rows, n) if p.rows else (n,), tv[0])
            if self.mode == "rows":
                def put_row(lane: int, k: Any, c: int) -> None:
                    x[at[lane], k] = tv[c]
                self._grid = (x, True)
                return (x,), put_row
            if x.ndim == 2:
                def put_all(lane: int, k: Any, c: int) -> None:
                    x[:, k] = tv[c]
                return (x,), put_all

            def put_one(lane: int, k: Any, c: int) -> None:
                x[k] = tv[c]
            return (x,), put_one
        Mr, _, N = p.shape  # type: ignore[misc]
        one = np.ones(1, p.dtype)[0]
        if self.mode == "rows":
            A, B = np.full((Mr, n), tv[0]), np.full((n, N), one)

            def put_arow(lane: int, k: Any, c: int) -> None:
                A[at[lane], k] = tv[c]
            self._grid = (A, True)
            return (A, B), put_arow
        A, B = np.full((Mr, n), one), np.full((n, N), tv[0])

        def put_bcol(lane: int, k: Any, c: int) -> None:
            B[k, at[lane]] = tv[c]
        self._grid = (B, False)
        return (A, B), put_bcol

    def run(self, a: np.ndarray, j: np.ndarray, zero: list | None = None) -> np.ndarray:
        """Every probe's outputs at its lane's positions, exact: (probes, positions per lane). Probe k: +M at term
        a[k], -M at j[k], 0 at the terms zero[k] (an int array or None; zero None: none anywhere)."""
        L, p = self.lanes, self.p
        A, J = a.tolist(), j.tolist()
        if L == 1 and zero is None and self._one is not None:
            raws = self._run_one(A, J)
        elif zero is None and self._pair is not None:
            raws = self._run_pair(A, J)
        else:
            raws = self._run_lanes(A, J, zero)
        vals = p.read_many(raws)                         # (calls, output positions)
        if L > 1:   # lane l of each call: row l (rows) or column l (cols) of the outputs
            v = vals.reshape(len(raws), p.out_shape[0], -1)
            v = v if self.mode == "rows" else v.transpose(0, 2, 1)
            vals = (v if self._all else v[:, self.which]).reshape(len(raws) * L, self.per)
        vals = vals[:len(A)]
        starts = range(0, len(A), L)[-_RECHECK:]
        self.recent = [(a[lo:lo + L], j[lo:lo + L], None if zero is None else zero[lo:lo + L], vals[lo:lo + L])
                       for lo in starts]
        return vals

    def _run_one(self, A: list, J: list) -> list:
        """One probe per call into a 1-D input (a sum's x[n]): FPRev's in-place edits, the tightest loop."""
        x, unit, plus, minus = self._one
        return self.p.loop(x, A, J, plus, minus, unit)

    def _pair_values(self) -> tuple:
        """(a, b, (x, y) factors of +M, of -M, of the unit) of a dot's inputs, read back from the layout."""
        a, b = self.args
        vals = []
        for c in (PLUS, MINUS, UNIT):
            self._put(0, 0, c)
            vals.append((a[0], b[0]))
        return (a, b, *vals)

    def _run_pair(self, A: list, J: list) -> list:
        """One probe per call of a dot: both factors of the two terms edited in place (Prober.loop_pair)."""
        a, b, plus, minus, unit = self._pair
        return self.p.loop_pair(a, b, A, J, plus, minus, unit)

    def _run_grid(self, A: list, J: list) -> list:
        """Packed probes without zeroed terms: each call's +M and -M written into all its lanes by one indexed
        assignment (and set back by one)."""
        L, call, args, raws = self.lanes, self.p.raw_call, self.args, []
        g, by_row = self._grid  # type: ignore[misc]
        unit = self._tv[UNIT]
        a, j = np.asarray(A, np.int64), np.asarray(J, np.int64)
        # each call's +M and -M in one indexed assignment: terms a (then j) of the call's lanes (a != j in a lane,
        # one probe per lane: no two entries meet)
        vals = np.repeat(self._tv[[PLUS, MINUS]], L)
        full = len(A) // L
        terms = np.concatenate((a[:full * L].reshape(full, L), j[:full * L].reshape(full, L)), axis=1)
        lanes = np.concatenate((self.which[:L], self.which[:L]))
        for c in range(-(-len(A) // L)):
            if c < full:
                at, v = (terms[c], lanes), vals
            else:                       # the last call's lanes, fewer than L
                k = len(A) - full * L
                at = (np.concatenate((a[full * L:], j[full * L:])), np.concatenate((self.which[:k], self.which[:k])))
                v = np.concatenate((vals[:k], vals[L:L + k]))
            if by_row:
                at = (at[1], at[0])
            g[at] = v
            try:
                raws.append(call(args))
            finally:
                g[at] = unit
        return raws

    def _run_lanes(self, A: list, J: list, zero: list | None) -> list:
        if zero is None and self._grid is not None and self.lanes > 1:
            return self._run_grid(A, J)
        L, put, call, args, raws = self.lanes, self._put, self.p.raw_call, self.args, []
        Z = zero if zero is not None else [None] * len(A)
        for lo in range(0, len(A), L):
            chunk = range(lo, min(lo + L, len(A)))
            for lane, k in enumerate(chunk):
                if Z[k] is not None:
                    put(lane, Z[k], ZERO)
                put(lane, A[k], PLUS)
                put(lane, J[k], MINUS)
            try:
                raws.append(call(args))
            finally:
                for lane, k in enumerate(chunk):
                    put(lane, A[k], UNIT)
                    put(lane, J[k], UNIT)
                    if Z[k] is not None:
                        put(lane, Z[k], UNIT)
        return raws

    def deterministic(self) -> bool:
        """Do the last batch's last calls (up to _RECHECK) give the same outputs again, bit for bit?"""
        for a, j, zero, vals in list(self.recent):
            again = self.run(a, j, zero)
            same = (again.view(np.uint64) == vals.view(np.uint64)) | (np.isnan(again) & np.isnan(vals))
            if not same.all():
                return False
        return True
