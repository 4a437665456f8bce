"""Split-K partials combined in any permutation, found per output element (atomics: each element its own order).

A split-K kernel whose thread blocks add their partials into the output with atomics combines them in the order
the blocks finish, which can differ from element to element and from run to run. Given a split (``SplitK`` or
``TiledSplitK`` with its unit), :func:`permutation_search` computes every slice's partial once and, for each output
element, looks for an order of those partials whose sequential sum (from +0, each step rounded to the combine
format) gives the element's bits: every permutation up to 8 partials, beyond that a seeded random sample of
``max_perms`` permutations (the result says so). The orders found are written as a ``PerPosition`` of ``SplitK``
orders with those permutations; identify_order confirms it through simulate like any other candidate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from itertools import permutations
from typing import Any

import numpy as np

from ..core.formats.format import FP64, Format
from ..core.formats.policy import Rounding
from ..models.engine.accumulate import Arith
from ..models.engine.simulation import simulate
from ..models.orders.basic import Order, SplitK
from ..models.orders.text import order_text

__all__ = ["PermutationResult", "permutation_search", "permutation_stage", "split_of", "EXHAUSTIVE"]

EXHAUSTIVE = 8     # up to this many partials every permutation is tried


@dataclass
class PermutationResult:
    split: Order                  # the split whose partials were permuted (its own combine order ignored)
    found: np.ndarray             # per element (flattened): index into perms of the first order reproducing it, or -1
    perms: list[tuple[int, ...]]  # the permutations tried, the identity first
    exhaustive: bool              # every permutation was tried (else a sample: an element not found may still be)

    @property
    def explained(self) -> np.ndarray:
        return self.found >= 0

    def note(self) -> str:
        s = len(self.perms[0])
        how = (f"every one of the {len(self.perms)} orders of {s} partials" if self.exhaustive else
               f"{len(self.perms)} of the {math.factorial(s)} orders of {s} partials (a seeded sample: the search "
               "stopped there)")
        return f"{int(self.explained.sum())} of {self.found.size} elements reproduced by {how}"

    def order(self, shape: tuple) -> Order | None:
        """A PerPosition of SplitK orders (one per permutation used) when every element is explained, else None."""
        if not self.explained.all():
            return None
        from ..models.orders.tree import PerPosition
        used = sorted(set(self.found.tolist()))
        if used == [0]:
            return with_permutation(self.split, self.perms[0])
        index = np.searchsorted(used, self.found)
        return PerPosition(tuple(with_permutation(self.split, self.perms[u]) for u in used), index.reshape(shape),
                           shape)


def with_permutation(split: SplitK, perm: tuple[int, ...]) -> SplitK:
    """The split with its partials meeting sequentially in ``perm`` order."""
    return SplitK(split.s, split.inner, permutation=None if list(perm) == sorted(perm) else perm,
                  combine_acc=split.combine_acc)


def split_of(order: Any) -> Order | None:
    """The SplitK under an identified order (a SplitK, or a PerPosition of SplitKs), else None."""
    if isinstance(order, SplitK):
        return SplitK(order.s, order.inner, combine_acc=order.combine_acc)
    inner = getattr(order, "orders", None)
    if inner and all(isinstance(o, SplitK) for o in inner):
        return split_of(inner[0])
    return None


def _perms(s: int, max_perms: int, seed: int) -> tuple[list[tuple[int, ...]], bool]:
    ident = tuple(range(s))
    if s <= EXHAUSTIVE:
        return [ident] + [q for q in permutations(range(s)) if q != ident], True
    rng = np.random.default_rng(seed)
    seen = {ident, ident[::-1]}
    out = [ident, ident[::-1]]
    while len(out) < max_perms:
        q = tuple(int(i) for i in rng.permutation(s))
        if q not in seen:
            seen.add(q)
            out.append(q)
    return out, False


def _adder(fmt: Format) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """fl(x + y) in fmt (round to nearest even) for values of fmt: the exact rounding of simulate
    (models.accumulate.Arith). The search only picks the candidate orders; simulate confirms them."""
    a = Arith(fmt, Rounding.NEAREST_EVEN, False)
    plan = "f64" if fmt == FP64 else "odd"
    return lambda x, y: a.add(x, y, plan)


def partials(op: str, inputs: tuple, split: SplitK, acc: Format) -> np.ndarray:
    """(elements, s): every output element's slice partials, each reduced by the split's unit from zero."""
    K = inputs[0].shape[-1]
    sizes = [(j + 1) * K // split.s - j * K // split.s for j in range(split.s)]
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    unit_acc = split.inner.acc or acc
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        ins = (np.ascontiguousarray(inputs[0][..., lo:hi]),) if op == "sum" else \
            (np.ascontiguousarray(inputs[0][..., lo:hi]), np.ascontiguousarray(inputs[1][lo:hi]))
        parts.append(np.asarray(simulate(op, *ins, acc=unit_acc, order=split.inner)).ravel())
    return np.stack(parts, axis=1)


def permutation_search(op: str, inputs: tuple, target: np.ndarray, out: Format, split: SplitK, acc: Format,
                       max_perms: int = 20000, seed: int = 0, chunk: int = 4096, elements: np.ndarray | None = None,
                       P: np.ndarray | None = None) -> PermutationResult:
    """For each output element, the first permutation of ``split``'s partials whose sequential combine (in the
    split's combine_acc, else ``acc``) rounds to the element's bits in ``out``. target: the elements' values.
    elements: flat indices to search (the others stay -1); P: the partials, when already computed."""
    P = partials(op, inputs, split, acc) if P is None else P
    cfmt = split.combine_acc or acc
    want = np.asarray(target, np.float64).ravel()
    perms, exhaustive = _perms(split.s, max_perms, seed)
    add, to_out = _adder(cfmt), Arith(out, Rounding.NEAREST_EVEN, False).round
    found = np.full(want.size, -1, np.int64)
    pending = np.zeros(want.size, bool)
    pending[np.arange(want.size) if elements is None else np.asarray(elements, np.int64)] = True
    for c0 in range(0, len(perms), chunk):
        todo = np.flatnonzero((found < 0) & pending)
        if not todo.size:
            break
        idx = np.asarray(perms[c0:c0 + chunk], np.int64)          # (q, s)
        vals = P[todo][:, idx]                                    # (e, q, s)
        acc_v = np.zeros(vals.shape[:2])
        for j in range(split.s):
            acc_v = add(acc_v, vals[:, :, j])
        res = acc_v if out == cfmt else to_out(acc_v)
        hit = (res == want[todo, None]) | (np.isnan(res) & np.isnan(want[todo, None]))
        any_hit = hit.any(axis=1)
        found[todo[any_hit]] = c0 + hit[any_hit].argmax(axis=1)
    return PermutationResult(split, found, perms, exhaustive)


def permutation_stage(search: Any, units: list, top: int = 3) -> Any:
    """identify_order's atomics stage (matmul / dot): ``SplitK(s, unit)`` for s = 3..8 over the ``top`` likeliest
    units, the partials combined in any order per output element. Returns the confirmed candidate, or None."""
    p = search.p
    if p.op == "sum":
        return None
    from ..core.engine.convert import decode
    target = decode(p.codes, p.out)
    for c in units[:top]:
        inputs = p.read(c.operands)
        best = (0, None)
        for s in range(3, EXHAUSTIVE + 1):
            if s > p.K:
                break
            split = SplitK(s, c.order)
            if search.sub is not None and len(p.codes.shape) == 2:   # the pruning rows first: a split whose
                ncol = p.codes.shape[1]                               # partials explain them all is searched
                some = (np.asarray(search.sub)[:, None] * ncol + np.arange(ncol)).ravel()   # on every element
                pre = permutation_search(p.op, inputs, target, p.out, split, c.acc or p.acc, elements=some)
                if not pre.explained[some].all():
                    best = max(best, (int(pre.explained.sum()), pre), key=lambda t: t[0])
                    continue
            res = permutation_search(p.op, inputs, target, p.out, split, c.acc or p.acc)
            order = res.order(tuple(p.codes.shape))
            if order is not None:
                search.notes.append(f"per-element permutations of {s} partials: {res.note()}")
                cand = search.add(p.score(order, None, "permutation", c.acc, c.operands))
                if cand is not None:
                    return cand
            best = max(best, (int(res.explained.sum()), res), key=lambda t: t[0])
        if best[1] is not None:
            search.notes.append(f"per-element permutations over {order_text(c.order)}: at best {best[1].note()}")
    return None
