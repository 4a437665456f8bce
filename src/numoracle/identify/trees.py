"""Split-K partials combined by any binary tree, found per output element: every association and order of the
partials, not only the sequential chains of :mod:`numoracle.identify.permute`.

A kernel may add its split partials as a chain in any order (atomics) or as a tree (``((p0 + p1) + (p2 + p3))``, a
reduction kernel, CUTLASS's parallel reduction), each node ``fl(x + y)`` rounded to the combine format. Addition is
commutative bit for bit, so the distinct combines of s partials are the unordered binary trees with s labelled
leaves: ``(2s - 3)!!`` of them (15 for s = 4, 135,135 for s = 8). :func:`tree_search` evaluates every one of them
for s up to :data:`EXHAUSTIVE_TREES` on the elements still unexplained, a chunk of trees at a time, and says which
elements some tree reproduces. Together with the chains from +0 (permute.py) that is every way to combine the
partials, so an element neither reproduces is no reordering of these partials.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ..core.formats.format import FP32, FP64, Format
from ..core.formats.policy import Rounding
from ..models.engine.accumulate import Arith, native_fp32_ok

__all__ = ["tree_programs", "tree_search", "EXHAUSTIVE_TREES"]

EXHAUSTIVE_TREES = 8       # every tree up to this many partials (135,135 trees at 8)
_CELLS = 1 << 18           # elements x trees evaluated at once (bounds the working memory: 2^18 x (2s - 1) floats)


def _subset_programs(mask: int, s: int, memo: dict) -> np.ndarray:
    """(T, k - 1, 2): every tree over the leaves in bit mask ``mask`` (k of them) as its merges, merge j writing slot
    s + j (its own numbering: a caller shifts it). A tree over a set is a tree over a part holding the lowest leaf
    merged with a tree over the rest, for each such split: (2k - 3)!! trees."""
    if mask in memo:
        return memo[mask]
    leaves = [i for i in range(s) if mask >> i & 1]
    k, low = len(leaves), mask & -mask
    if k == 1:
        memo[mask] = np.zeros((1, 0, 2), np.int16)
        return memo[mask]
    rest = mask ^ low
    out = []
    sub = rest
    while True:                                    # every part A = low + a subset of the rest, B = the others
        a_mask = low | sub
        if a_mask != mask:
            b_mask = mask ^ a_mask
            pa, pb = _subset_programs(a_mask, s, memo), _subset_programs(b_mask, s, memo)
            na, nb = pa.shape[1] + 1, pb.shape[1] + 1                     # leaves of each part
            pb = np.where(pb >= s, pb + (na - 1), pb)                     # B's merges come after A's
            ra = s + na - 2 if na > 1 else a_mask.bit_length() - 1        # the roots' slots
            rb = s + (na - 1) + nb - 2 if nb > 1 else b_mask.bit_length() - 1
            both = np.concatenate([np.repeat(pa, len(pb), axis=0), np.tile(pb, (len(pa), 1, 1)),
                                   np.broadcast_to(np.array([[[ra, rb]]], np.int16), (len(pa) * len(pb), 1, 2))],
                                  axis=1)
            out.append(both.astype(np.int16))
        if sub == 0:
            break
        sub = (sub - 1) & rest
    memo[mask] = np.concatenate(out)
    return memo[mask]


@lru_cache(maxsize=EXHAUSTIVE_TREES)
def tree_programs(s: int) -> np.ndarray:
    """(T, s - 1, 2): every unordered binary tree over leaves 0..s-1 as its merges; slot s + k holds merge k."""
    if not 2 <= s <= EXHAUSTIVE_TREES:
        raise ValueError(f"tree_programs: s must lie in 2..{EXHAUSTIVE_TREES}, got {s}")
    return _subset_programs((1 << s) - 1, s, {})


def _adder(fmt: Format) -> Any:
    """fl(x + y) in fmt, round to nearest even. FP32 values: the machine's float32 addition, IEEE binary32's one
    rounding (where subnormals are kept: ``native_fp32_ok``; the partials are FP32 numbers, so this is exact);
    other formats: the exact route of simulate (models.accumulate.Arith)."""
    if fmt == FP32 and native_fp32_ok():
        return np.add
    a = Arith(fmt, Rounding.NEAREST_EVEN, False)
    plan = "f64" if fmt == FP64 else "odd"
    return lambda x, y: a.add(x, y, plan)


def tree_search(P: np.ndarray, target: np.ndarray, elements: np.ndarray, combine: Format, out: Format) -> np.ndarray:
    """Which of ``elements`` (flat indices) some binary tree of their partials ``P`` (elements, s) reproduces: each
    node fl(x + y) in ``combine`` (round to nearest even), the root rounded to ``out``; ``target``: every element's
    value (float64). Returns a bool per entry of ``elements``. s must be at most EXHAUSTIVE_TREES."""
    s = P.shape[1]
    elements = np.asarray(elements, np.int64)
    hit = np.zeros(elements.size, bool)
    if s < 2 or not elements.size:
        return hit
    progs = tree_programs(s)
    add = _adder(combine)
    to_out = Arith(out, Rounding.NEAREST_EVEN, False).round
    dtype = np.float32 if combine == FP32 and native_fp32_ok() else np.float64
    want = np.asarray(target, np.float64).ravel()
    q = max(1, _CELLS // max(elements.size, 1))
    for c0 in range(0, len(progs), q):
        todo = np.flatnonzero(~hit)
        if not todo.size:
            break
        pr = progs[c0:c0 + q].astype(np.intp)                           # (q, s - 1, 2)
        cols = np.arange(pr.shape[0])
        vals = np.empty((todo.size, pr.shape[0], 2 * s - 1), dtype)
        vals[:, :, :s] = P[elements[todo]][:, None, :]                  # the leaves enter exact
        for k in range(s - 1):                                          # merge k of every tree at once
            vals[:, :, s + k] = add(vals[:, cols, pr[:, k, 0]], vals[:, cols, pr[:, k, 1]])
        res = vals[:, :, -1].astype(np.float64)
        res = res if out == combine else to_out(res)
        w = want[elements[todo]][:, None]
        hit[todo] = ((res == w) | (np.isnan(res) & np.isnan(w))).any(axis=1)
    return hit
