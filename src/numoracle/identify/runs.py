"""compare_runs' exact explanation: every element where two runs differ is the same split-K partials combined in
another order (atomics land in the order the thread blocks finish).

:func:`explain_runs` takes the split under either run's identified order (or, when neither was identified, tries
``SplitK(s, unit)`` for s = 2..8 over the sequential unit and the presets that take the input format, on the first
elements of run_a), computes every element's partials once, and searches, for each differing element of each run,
a way to combine those partials that gives its bits: a chain in any order (:mod:`numoracle.identify.permute`), or
any binary tree of them (:mod:`numoracle.identify.trees`: ``((p0 + p1) + (p2 + p3))`` is a reordering too), every
one up to 8 partials. An element no combine reproduces stays unexplained: with an exhaustive search it is not a
reordering of these partials (a corrupted or unwritten element, a bug).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.engine.convert import decode
from ..core.formats.format import Format, format_of
from ..models.orders.basic import Order, Sequential, SplitK
from .families import tensor_core_units
from .permute import EXHAUSTIVE, partials, permutation_search, split_of
from .problem import native
from .trees import EXHAUSTIVE_TREES, tree_search

__all__ = ["ExactExplanation", "explain_runs"]

_SAMPLE = 64   # differing elements searched first


@dataclass
class ExactExplanation:
    """Which differing elements are the other run's partials combined in another order."""

    split: Order | None           # the split whose partials were permuted (None: no split found)
    n_differ: int                 # elements whose bits differ between the runs
    explained: dict[str, int]     # run name -> searched elements reproduced by some order of the partials
    unexplained: dict[str, np.ndarray]   # run name -> searched flat indices no order reproduces
    exhaustive: bool              # every order of the partials was tried
    how: str                      # where the split came from
    n_searched: int | None = None  # differing elements searched (None: all n_differ; fewer: a sample)

    @property
    def sampled(self) -> bool:
        return self.n_searched is not None and self.n_searched < self.n_differ

    @property
    def complete(self) -> bool:
        return self.split is not None and not self.sampled and all(v.size == 0 for v in self.unexplained.values())

    @property
    def established(self) -> bool:
        """The same-partials explanation holds for the bulk (at least 90 % of each run's differing elements, every
        order searched): an element it leaves out is then no reordering of these partials."""
        if self.split is None or not self.exhaustive or self.sampled or not self.n_differ:
            return False
        return all(n >= 0.9 * self.n_differ for n in self.explained.values())

    def text(self) -> str:
        if self.split is None:
            return f"exact: no split-K order found whose partials reproduce the runs ({self.how})"
        from ..models.orders.text import order_text
        s = getattr(self.split, "s", "?")
        if self.complete:
            return (f"exact: every one of the {self.n_differ} differing elements equals the other run's {s} split "
                    f"partials ({order_text(self.split)}, {self.how}) combined in another order")
        bad = {r: int(v.size) for r, v in self.unexplained.items() if v.size}
        tried = "every order and tree" if self.exhaustive else "a sample of the orders"
        n = self.n_differ if not self.sampled else self.n_searched
        of = (f" of a sample of {n} of the {self.n_differ} differing elements (most of the sample is no reordering, "
              "so the rest were not searched)") if self.sampled else ""
        return (f"exact: {sum(bad.values())} differing element(s){of} ("
                + ", ".join(f"{r}: {k}" for r, k in bad.items())
                + f") equal no order of the {s} split partials ({tried} tried; {order_text(self.split)}, {self.how}); "
                f"the other {n - max(bad.values(), default=0)} are those partials combined in another order")


def _find_split(op: str, ins: tuple, target: np.ndarray, out: Format, acc: Format, probe: int = 16) -> SplitK | None:
    """A SplitK(s, unit), s = 2..8, whose partials in some order reproduce the first ``probe`` elements."""
    n = target.size
    first = np.arange(min(probe, n))
    cut = ins if op != "matmul" else (ins[0][: max(1, -(-first.size // ins[1].shape[1]))], ins[1])
    for unit in [Sequential(), *tensor_core_units(format_of(ins[0].dtype))]:
        for s in range(2, EXHAUSTIVE + 1):
            split = SplitK(s, unit)
            m = cut[0].shape[0] * ins[1].shape[1] if op == "matmul" else first.size
            elems = first[first < m]
            res = permutation_search(op, cut, target[:m], out, split, acc, elements=elems)
            if res.explained[elems].all():
                return split
    return None


def _reordered(op: str, ins: tuple, v: np.ndarray, out: Format, split: SplitK, acc: Format, elements: np.ndarray,
               P: np.ndarray) -> tuple[np.ndarray, bool]:
    """Which of ``elements`` some combine of their partials gives (a chain from +0 in any order, or any binary tree),
    and whether every combine was tried."""
    res = permutation_search(op, ins, v, out, split, acc, elements=elements, P=P)
    ok = res.explained[elements]
    if split.s <= EXHAUSTIVE_TREES and not ok.all():      # the rest: every tree of the partials
        ok[~ok] = tree_search(P, v, elements[~ok], split.combine_acc or acc, out)
    return ok, res.exhaustive and split.s <= EXHAUSTIVE_TREES


def explain_runs(codes_a: np.ndarray, codes_b: np.ndarray, fmt: Format, op: str, inputs: tuple, acc: Any, out: Any,
                 identified: dict) -> ExactExplanation:
    """The exact explanation of two runs' differences (codes flat, in ``fmt``); inputs with the reduced axis last."""
    ofmt = format_of(out) if out is not None else fmt
    accf = format_of(acc)
    ins = tuple(native(x, f"input {i}") for i, x in enumerate(inputs))
    differ = np.flatnonzero(codes_a.astype(np.uint64) != codes_b.astype(np.uint64))
    va, vb = (np.asarray(decode(c, fmt), np.float64).ravel() for c in (codes_a, codes_b))
    splits = [(s, f"the split of {name}'s identified order") for name, o in identified.items()
              if (s := split_of(o)) is not None]
    if not splits:
        s = _find_split(op, ins, va, ofmt, accf)
        splits = [(s, "found on run_a's first elements")] if s is not None else []
    if not splits:
        return ExactExplanation(None, int(differ.size), {}, {}, False, "tried SplitK(s) for s = 2..8 over the "
                                "sequential order and the presets that take the input format")
    found = []
    sample = differ if differ.size <= _SAMPLE else differ[np.linspace(0, differ.size - 1, _SAMPLE).astype(np.int64)]
    for split, how in dict.fromkeys(splits):
        P = partials(op, ins, split, accf)
        explained, unexplained, exhaustive, searched = {}, {}, True, differ
        for v in ((va, vb) if sample.size < differ.size else ()):
            # a sample first: where most of it is no reordering, the explanation cannot hold for the bulk, and
            # searching every order for every element (the costly part) would change nothing
            pre, _ = _reordered(op, ins, v, ofmt, split, accf, sample, P)
            if pre.sum() < 0.8 * sample.size:
                searched = sample
                break
        for name, v in (("run_a", va), ("run_b", vb)):
            ok, every = _reordered(op, ins, v, ofmt, split, accf, searched, P)
            explained[name] = int(ok.sum())
            unexplained[name] = searched[~ok]
            exhaustive &= every
        found.append(ExactExplanation(split, int(differ.size), explained, unexplained, exhaustive, how,
                                      int(searched.size)))
    return max(found, key=lambda e: sum(e.explained.values()))
