"""Pieces of a cast chain's source line: where each hop is constant or monotone (docs/chains.md).

A hop ``h: A -> B`` (deterministic rounding, no wrapping) does one of a few things to a non-NaN
input ``y``, and which one depends only on where ``y`` lies in A's key order. Its *rank*:

====  =========================================================  ===============================
rank  inputs                                                     h on them
====  =========================================================  ===============================
0     -inf                                                       one point: constant
1     negative finite values whose result is *invalid*           constant (the canonical NaN, or
      (NaN, or the ``nan_to`` substitute): overflow under        the ``nan_to`` code)
      ``nan``, anything negative into an unsigned float format
2     the other negative finite values                           non-decreasing, never NaN
3     -0                                                         one point: constant
4     +0                                                         one point: constant
5     positive finite values with a valid result                 non-decreasing, never NaN
6     positive finite values whose result is invalid (overflow)  constant
7     +inf                                                       one point: constant
====  =========================================================  ===============================

Invalid results sit at the far end of each half (overflow thresholds; an unsigned destination
makes every negative input invalid), so the rank is non-decreasing in A's key. Hence, on a
source interval where the chain's prefix up to A is non-decreasing and never NaN, the inputs of
each rank form a sub-interval, found by binary search; on it the prefix through ``h`` is
constant (ranks 0, 1, 3, 4, 6, 7) or again non-decreasing and never NaN (ranks 2, 5). NaN inputs
never reach a hop inside a monotone piece, and on a constant piece every later hop is constant.
Refining hop by hop, and once more by the direct cast's rank of the source, cuts each half of
the source's nonzero finite values into pieces on which the chain is constant or monotone and
the direct cast is constant or monotone: exactly what the cell proof needs.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.engine.codekeys import (
    NEG_FINITE,
    NEG_INF,
    NEG_ZERO,
    POS_FINITE,
    POS_INF,
    POS_ZERO,
    binades,
    from_key,
    is_nan,
    key_place,
    to_key,
)
from ..core.engine.convert import cast_codes
from ..core.formats.format import AnyFormat
from ..core.formats.policy import Flags, Policy

if TYPE_CHECKING:  # pragma: no cover
    from .spec import ChainSpec

__all__ = ["Piece", "chain_pieces", "hop_rank", "rank_table", "half_binades", "CONSTANT_RANKS", "first_true",
           "midpoint"]

CONSTANT_RANKS = frozenset({0, 1, 3, 4, 6, 7})
FIRST_TRUE_WAYS = 16  # points per round of first_true
_HALF_CUTS: dict[tuple, list[tuple[int, int, int]]] = {}  # (a, b, policy, half, lo, hi) -> rank pieces
_RANK_TABLES: dict[tuple, Any] = {}  # (a, b, policy) -> rank_table's lookup
_RANK_OF_PLACE = {NEG_INF: 0, NEG_ZERO: 3, POS_ZERO: 4, POS_INF: 7}

Piece = tuple[int, int, bool]  # (lo_key, hi_key, chain constant on it)


def midpoint(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """floor((left + right) / 2) of int64 keys without overflow (keys span up to 2^64 - 1)."""
    return (left >> 1) + (right >> 1) + (left & right & 1)


def first_true(lo: np.ndarray, hi: np.ndarray, pred, ways: int = FIRST_TRUE_WAYS) -> tuple[np.ndarray, np.ndarray]:
    """Smallest key x in [lo, hi] with pred(x) (pred monotone False..True). Returns (x, found).

    A ``ways``-ary search: each round evaluates pred at ``ways - 1`` points spread over every open
    interval at once (one call), so a 64-bit span takes log_ways(2^64) calls instead of 64. The
    calls cost mostly their fixed overhead (a few codes each), so fewer, wider calls are faster;
    the answer is the same as bisection's for any monotone pred.
    """
    found = pred(hi, np.arange(hi.size))
    left, right = lo.copy(), hi.copy()  # the answer lies in [left, right]; pred(right) holds
    act = np.flatnonzero(found & (left < right))
    j = np.arange(1, ways, dtype=np.uint64)
    while act.size:
        a, b = left[act], right[act]
        span = b.view(np.uint64) - a.view(np.uint64)  # exact: b > a, and the span fits 64 bits
        q, r = span // np.uint64(ways), span % np.uint64(ways)
        off = q[:, None] * j + (r[:, None] * j) // np.uint64(ways)  # floor(span * j / ways), no overflow
        pts = (a.view(np.uint64)[:, None] + off).view(np.int64)  # in [a, b): a wrapping add, exact in int64
        p = np.asarray(pred(pts.ravel(), np.repeat(act, ways - 1))).reshape(pts.shape)
        n_false = (~p).sum(axis=1)  # pred is False on a prefix of the points
        rows = np.arange(act.size)
        hit = n_false < ways - 1
        right[act] = np.where(hit, pts[rows, np.minimum(n_false, ways - 2)], b)
        left[act] = np.where(n_false > 0, pts[rows, np.maximum(n_false - 1, 0)] + 1, a)
        act = act[left[act] < right[act]]
    return left, found


def hop_rank(codes: np.ndarray, a: AnyFormat, b: AnyFormat, pol: Policy) -> np.ndarray:
    """Rank (0..7, module docstring) of non-NaN codes of ``a`` as inputs of the hop a -> b."""
    codes = np.asarray(codes).astype(a.code_dtype)
    out, fl = cast_codes(codes, a, b, pol, flags=True)
    invalid = is_nan(out, b) | ((fl & np.uint8(Flags.INVALID)) != 0)
    place = key_place(to_key(codes, a), a)
    rank = np.full(codes.shape, -1, np.int8)
    for p, r in _RANK_OF_PLACE.items():
        rank[place == p] = r
    rank[place == NEG_FINITE] = np.where(invalid[place == NEG_FINITE], 1, 2)
    rank[place == POS_FINITE] = np.where(invalid[place == POS_FINITE], 6, 5)
    return rank


def _split(keys_lo: np.ndarray, keys_hi: np.ndarray, rank_of) -> list[tuple[int, int, int]]:
    """Cut intervals [keys_lo[i], keys_hi[i]] where the (non-decreasing) rank changes: (lo, hi, rank)."""
    r_lo, r_hi = np.split(rank_of(np.concatenate([keys_lo, keys_hi])), [keys_lo.size])  # one engine call
    if np.any(r_lo > r_hi):
        raise RuntimeError("internal error: a hop's rank decreases along a monotone piece; please report it")
    t_i = np.repeat(np.arange(keys_lo.size), (r_hi - r_lo).astype(np.int64))
    t_r = np.concatenate([np.arange(a + 1, b + 1) for a, b in zip(r_lo, r_hi)] or [np.zeros(0, np.int64)])
    starts, _ = first_true(keys_lo[t_i], keys_hi[t_i], lambda x, idx: rank_of(x) >= t_r[idx])
    out: list[tuple[int, int, int]] = []
    for i in range(keys_lo.size):
        sel = t_i == i
        b_starts = np.concatenate([[keys_lo[i]], starts[sel]])
        b_ranks = np.concatenate([[r_lo[i]], t_r[sel]])
        for n in range(b_starts.size):
            end = b_starts[n + 1] - 1 if n + 1 < b_starts.size else keys_hi[i]
            if b_starts[n] <= end:
                out.append((int(b_starts[n]), int(end), int(b_ranks[n])))
    lo = np.array([p[0] for p in out], np.int64)
    hi = np.array([p[1] for p in out], np.int64)
    want = np.array([p[2] for p in out], np.int64)
    if lo.size and np.any(rank_of(np.concatenate([lo, hi])) != np.concatenate([want, want])):
        raise RuntimeError("internal error: a hop's rank is not constant on a piece; please report it")
    return out


def _whole_half_cuts(a_fmt: AnyFormat, b_fmt: AnyFormat, pol: Policy, negative: bool,
                     lo: int, hi: int) -> list[tuple[int, int, int]]:
    """The hop a -> b's rank pieces of one half [lo, hi] of a's nonzero finite keys, computed once per
    (a, b, policy, half): the first hop of every chain from a through b, and the direct cast from a to
    b, cut that same half (a table of chains shares them across many triples)."""
    ck = (a_fmt, b_fmt, pol, negative, lo, hi)
    if ck not in _HALF_CUTS:

        def rank_of(keys):
            return hop_rank(from_key(keys, a_fmt).astype(a_fmt.code_dtype), a_fmt, b_fmt, pol)

        _HALF_CUTS[ck] = _split(np.array([lo], np.int64), np.array([hi], np.int64), rank_of)
    return _HALF_CUTS[ck]


@functools.cache
def half_binades(fmt: AnyFormat, negative: bool) -> tuple[tuple[int, int, int], ...]:
    """``binades(fmt, negative)`` (exponent, lo_key, hi_key), made once per format and half."""
    return tuple(tuple(int(x) for x in b) for b in binades(fmt, negative))


def _half_span(fmt: AnyFormat, negative: bool) -> tuple[int, int] | None:
    """[lo, hi]: the keys of one half of fmt's nonzero finite values (None when the half is empty)."""
    bins = half_binades(fmt, negative)
    if not bins:
        return None
    return min(bins[0][1], bins[-1][1]), max(bins[0][2], bins[-1][2])


def rank_table(a_fmt: AnyFormat, b_fmt: AnyFormat, pol: Policy):
    """``hop_rank`` of the hop a -> b as a lookup: the rank of a finite input is a step function of its
    key, whose steps the whole-half cuts list once; so later hops of a chain cost no engine call."""
    if (a_fmt, b_fmt, pol) not in _RANK_TABLES:
        _RANK_TABLES[a_fmt, b_fmt, pol] = _make_rank_table(a_fmt, b_fmt, pol)
    return _RANK_TABLES[a_fmt, b_fmt, pol]


def _make_rank_table(a_fmt: AnyFormat, b_fmt: AnyFormat, pol: Policy):
    starts, ranks = [], []
    for neg in (True, False):
        span = _half_span(a_fmt, neg)
        if span is not None:
            for lo, _, r in _whole_half_cuts(a_fmt, b_fmt, pol, neg, *span):
                starts.append(lo)
                ranks.append(r)
    order = np.argsort(starts)
    st, rk = np.array(starts, np.int64)[order], np.array(ranks, np.int8)[order]

    def rank_of(codes: np.ndarray) -> np.ndarray:
        keys = to_key(np.asarray(codes).astype(a_fmt.code_dtype), a_fmt)
        place = key_place(keys, a_fmt)
        rank = np.full(keys.shape, -1, np.int8)
        for p, r in _RANK_OF_PLACE.items():
            rank[place == p] = r
        fin = (place == NEG_FINITE) | (place == POS_FINITE)
        rank[fin] = rk[np.searchsorted(st, keys[fin], side="right") - 1]
        return rank

    return rank_of


def _intersect(pieces: list[tuple[int, int]], cuts: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """Each (sorted, disjoint) piece cut where it meets the boundaries of ``cuts`` (sorted intervals that
    tile a span holding every piece): the same intervals as cutting each piece by the rank itself."""
    starts = np.array([c[0] for c in cuts], np.int64)
    out = []
    for a, b in pieces:
        k = int(np.searchsorted(starts, a, side="right")) - 1
        while k < len(cuts) and cuts[k][0] <= b:
            out.append((max(a, cuts[k][0]), min(b, cuts[k][1])))
            k += 1
    return out


def chain_pieces(spec: ChainSpec, negative: bool) -> list[Piece]:
    """One half's nonzero finite source keys cut into pieces on which the chain is constant (True)
    or non-decreasing and never NaN (False), and the direct cast constant or non-decreasing."""
    span = _half_span(spec.src, negative)
    if span is None:
        return []
    lo, hi = span
    src = spec.src
    monotone = [(lo, hi)]
    done: list[tuple[int, int]] = []
    for j in range(len(spec.policies)):
        if not monotone:
            break
        a_fmt, b_fmt, pol = spec.formats[j], spec.formats[j + 1], spec.policies[j]
        if j == 0:  # the whole half of the source, cut by the first hop's rank: shared by every chain
            cut = _whole_half_cuts(src, b_fmt, pol, negative, lo, hi)
            done += [(a, b) for a, b, r in cut if r in CONSTANT_RANKS]
            monotone = [(a, b) for a, b, r in cut if r not in CONSTANT_RANKS]
            continue

        table = rank_table(a_fmt, b_fmt, pol)

        def rank_of(keys, j=j, table=table):
            return table(spec.prefix(from_key(keys, src).astype(src.code_dtype), j))

        cut = _split(np.array([p[0] for p in monotone], np.int64), np.array([p[1] for p in monotone], np.int64),
                     rank_of)
        done += [(a, b) for a, b, r in cut if r in CONSTANT_RANKS]
        monotone = [(a, b) for a, b, r in cut if r not in CONSTANT_RANKS]
    pieces = [(a, b, True) for a, b in done] + [(a, b, False) for a, b in monotone]

    pieces.sort()
    # the direct cast's rank cuts the whole half once; each piece takes the cuts inside it
    cut = _intersect([(a, b) for a, b, _ in pieces], _whole_half_cuts(src, spec.dst, spec.direct, negative, lo, hi))
    # every cut lies inside one piece: look its piece up by its start
    starts = np.array([p[0] for p in pieces], np.int64)
    return [(a, b, pieces[int(np.searchsorted(starts, a, side="right")) - 1][2]) for a, b in cut]
