"""In-place masking probes: one set of inputs kept between calls, each probe written into a lane of it and undone.

A probe ``Probe(a, j, zero)`` puts +M at term a, -M at term j, 0 at the terms ``zero`` and the unit s u (s = +-1,
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
from dataclasses import dataclass
from typing import Any

import numpy as np

from .probe import Prober

__all__ = ["Probe", "Lanes", "packed_modes"]

UNIT, PLUS, MINUS, ZERO = 0, 1, 2, 3
_RECHECK = 8          # calls of the last batch repeated to tell a kernel that is not deterministic


@dataclass(frozen=True)
class Probe:
    """+M at term a, -M at term j, 0 at the terms ``zero`` (an int array, or None), the unit elsewhere."""

    a: int
    j: int
    zero: Any = None


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

    def __init__(self, p: Prober, u: float, M: float, sign: int = 1, mode: str = "all"):
        self.p, self.u, self.M, self.sign, self.mode = p, u, M, sign, mode
        self.lanes = 1 if mode == "all" else p.out_shape[0] if mode == "rows" else p.out_shape[-1]
        self.per = p.npos // self.lanes              # output positions each lane is read at
        self.args, self._put = self._layout(np.array([sign * u, M, -M, 0.0]))
        self.recent: list[tuple[list[Probe], np.ndarray]] = []   # the last batch, for a determinism check

    def _layout(self, v: np.ndarray) -> tuple[tuple, Callable]:
        """The inputs (units everywhere) and put(lane, terms, code) writing code's value at those terms."""
        p, n = self.p, self.p.n
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
        if p.op == "sum":
            x = np.full((p.rows, n) if p.rows else (n,), tv[0])
            if self.mode == "rows":
                def put_row(lane: int, k: Any, c: int) -> None:
                    x[lane, k] = tv[c]
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
                A[lane, k] = tv[c]
            return (A, B), put_arow
        A, B = np.full((Mr, n), one), np.full((n, N), tv[0])

        def put_bcol(lane: int, k: Any, c: int) -> None:
            B[k, lane] = tv[c]
        return (A, B), put_bcol

    def run(self, probes: list[Probe]) -> np.ndarray:
        """Every probe's outputs at its lane's positions, exact: (len(probes), positions per lane)."""
        L, put, p, args = self.lanes, self._put, self.p, self.args
        raws, self.recent = [], []
        for lo in range(0, len(probes), L):
            chunk = probes[lo:lo + L]
            for lane, pr in enumerate(chunk):
                if pr.zero is not None:
                    put(lane, pr.zero, ZERO)
                put(lane, pr.a, PLUS)
                put(lane, pr.j, MINUS)
            try:
                raws.append(p.raw_call(args))
            finally:
                for lane, pr in enumerate(chunk):
                    put(lane, pr.a, UNIT)
                    put(lane, pr.j, UNIT)
                    if pr.zero is not None:
                        put(lane, pr.zero, UNIT)
        vals = p.read_many(raws)                         # (calls, output positions)
        if L > 1:   # lane l of each call: row l (rows) or column l (cols) of the outputs
            v = vals.reshape(len(raws), p.out_shape[0], -1)
            vals = (v if self.mode == "rows" else v.transpose(0, 2, 1)).reshape(len(raws) * L, self.per)
        vals = vals[:len(probes)]
        starts = range(0, len(probes), L)[-_RECHECK:]
        self.recent = [(probes[lo:lo + L], vals[lo:lo + L]) for lo in starts]
        return vals

    def deterministic(self) -> bool:
        """Do the last batch's last calls (up to _RECHECK) give the same outputs again, bit for bit?"""
        for probes, vals in list(self.recent):
            again = self.run(probes)
            same = (again.view(np.uint64) == vals.view(np.uint64)) | (np.isnan(again) & np.isnan(vals))
            if not same.all():
                return False
        return True
