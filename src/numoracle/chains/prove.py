"""Cast chains: prove that a multi-hop conversion equals the single-step one, for every source value.

The decision procedure (docs/chains.md has the argument in full):

* Pieces (``chainpieces``): each half of the source's nonzero finite values is cut, hop by hop,
  where a hop's *rank* changes (its input crosses +-0, +-inf or the start of an invalid range:
  overflow into NaN, a negative into an unsigned format). On each piece the chain ``g`` is
  constant (some hop met a single point or made NaN / its ``nan_to`` code, so every later hop,
  a NaN-removing one included, is constant) or non-decreasing and never NaN; the direct
  conversion ``f`` likewise, after one more cut by its own rank.
* Cells: on a monotone piece ``g`` factors through every format C of the chain, so it is
  constant on each *cell* of source values that the chain's prefix up to C maps to one C value.
  ``f`` is monotone on the cell, so ``f == g`` there iff ``f`` at the cell's two ends equals
  ``g``; where not, the differing sources are a prefix and a suffix of the cell, found by binary
  search on the ordered source keys (64-bit keys without overflow).
* Inside one binade [2^e, 2^(e+1)) of the source every format's values form a uniform lattice,
  and rounding commutes with translations by P = 2 x (the largest quantum): the pattern of cells
  repeats. Taking C = the coarsest format in the binade, the first and last ``K`` C-values of
  each window (one binade of one piece) cover every distinct case (K = 12 spans 6 periods at
  each end, more than the 3 needed for the edges, the formats' max finite values and saturation
  points). So a proof costs O(binades x K) binary searches, for 8- to 64-bit sources alike.
* Zeros, infinities and NaNs of the source are checked directly. Wrapping hops are not
  monotone: those chains are enumerated for sources of 32 bits or fewer and refused above.
* The witness is the differing source of least magnitude (-0 counts as 0; ties go to the
  smaller code; infinities after every finite value, NaNs last).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np

from ..core.engine.codekeys import (
    NEG_FINITE,
    POS_FINITE,
    from_key,
    is_nan,
    key_bounds,
    key_place,
    positive_side,
    result_key,
    to_key,
)
from ..core.formats.format import AnyFormat, Format
from ..core.formats.policy import Overflow
from ..core.progress import progress
from .pieces import chain_pieces, first_true, half_binades
from .spec import ChainSpec, chain_spec
from .verdict import ChainVerdict, Proof, Witness, classify_reason, region_key_ranges

__all__ = ["classify_cast_chain", "ChainSpec", "chain_spec", "K_PERIOD"]  # ChainSpec, chain_spec: from spec.py

K_PERIOD = 12
_EXHAUSTIVE_CHUNK = 1 << 22
_ENUMERATE_BITS = 8      # method='auto' enumerates sources this narrow: 256 codes, three engine calls, are
                         # cheaper than the cell search's binary searches (and as complete)




def _monotone(spec: ChainSpec) -> bool:
    """False when a hop wraps (integer overflow modulo 2^bits): then only enumeration is sound."""
    return not any(p.overflow is Overflow.WRAP for p in spec.policies)


# ---- cells: source intervals on which the chain is constant ------------------------------
def _g_key(spec: ChainSpec, upto: int, keys: np.ndarray) -> np.ndarray:
    """Keys of the chain prefix through hop ``upto`` (0 = identity) at source keys."""
    codes = from_key(keys, spec.src).astype(spec.src.code_dtype)
    out = spec.prefix(codes, upto)
    return result_key(out, spec.formats[upto], positive_side(keys, spec.src))


def _quantum_log2(fmt: AnyFormat, e: int) -> float:
    """log2 of the spacing of fmt's values in binade e (inf where every value there maps to one)."""
    if fmt.is_integer:
        return np.inf if e >= fmt.precision else 0.0
    assert isinstance(fmt, Format)
    if e > fmt.emax:
        return np.inf
    if not fmt.has_subnormals and e < fmt.emin:
        return np.inf
    return float(max(e, fmt.emin) - fmt.man_bits)


@functools.cache
def _coarsest(formats: tuple[AnyFormat, ...], e: int) -> int:
    """Index of the chain's coarsest format in source binade e (the first, where several tie)."""
    return int(np.argmax([_quantum_log2(f, e) for f in formats]))


def _cells(spec: ChainSpec) -> tuple[np.ndarray, np.ndarray, int]:
    """Cells (lo_key, hi_key) on which g is constant, covering every case by periodicity."""
    windows: dict[int, list[tuple[int, int]]] = {}
    los, his, evals = [], [], 0
    fmts = tuple(spec.formats)
    for neg in (False, True):
        monotone = []
        for a, b, const in chain_pieces(spec, neg):
            if const:  # the chain is constant on the piece: one cell
                los.append(np.array([a], np.int64))
                his.append(np.array([b], np.int64))
            else:
                monotone.append((a, b))
        for e, klo, khi in half_binades(spec.src, neg) if monotone else []:
            c = _coarsest(fmts, e)
            for a, b in monotone:  # a window: one binade of one monotone piece
                if max(klo, a) <= min(khi, b):
                    windows.setdefault(c, []).append((max(klo, a), min(khi, b)))
    for c, wins in windows.items():
        if c == 0:  # the source is the coarsest: every source value is its own cell
            pts = _source_cells(wins)
            los.append(pts)
            his.append(pts)
            continue
        for w_lo, w_hi, w_evals in _search_cells(spec, c, np.array(wins, np.int64)):
            los.append(w_lo)
            his.append(w_hi)
            evals += w_evals
    lo = np.concatenate(los) if los else np.zeros(0, np.int64)
    hi = np.concatenate(his) if his else np.zeros(0, np.int64)
    return lo, hi, evals


def _source_cells(wins: list[tuple[int, int]]) -> np.ndarray:
    """Windows where the source is the coarsest format: every key is a cell; the first and last
    K_PERIOD keys of a long window stand for the rest (periodicity)."""
    pts = []
    for a, b in wins:
        if b - a + 1 <= 2 * K_PERIOD:
            pts.append(np.arange(a, b + 1))
        else:
            pts.append(np.concatenate([np.arange(a, a + K_PERIOD), np.arange(b - K_PERIOD + 1, b + 1)]))
    return np.concatenate(pts).astype(np.int64) if pts else np.zeros(0, np.int64)


def _search_cells(spec: ChainSpec, c: int, w: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """The cells of each window (rows of w: lo_key, hi_key): g's values at the ends, then a search for
    the first key of each value in between (the first and last K_PERIOD values of a long window)."""
    klo, khi = w[:, 0], w[:, 1]
    g_lo, g_hi = np.split(_g_key(spec, c, np.concatenate([klo, khi])), [klo.size])  # one engine call
    t_bin, t_key, t_first = [], [], []
    for i in range(klo.size):
        a, b = int(g_lo[i]), int(g_hi[i])
        if a > b:
            raise RuntimeError(f"internal error: the chain prefix is not monotone on binade {i} of "
                               f"{spec.label()}; please report it")
        if b - a <= 2 * K_PERIOD:
            ks = list(range(a + 1, b + 1))
            firsts = [True] * len(ks)
        else:
            ks = list(range(a + 1, a + K_PERIOD + 1)) + list(range(b - K_PERIOD + 1, b + 1))
            # the cell starting at the last bottom boundary spans the skipped middle
            firsts = [True] * (K_PERIOD - 1) + [False] + [True] * K_PERIOD
        t_bin += [i] * len(ks)
        t_key += ks
        t_first += firsts
    t_bin_a = np.array(t_bin, np.int64)
    t_key_a = np.array(t_key, np.int64)
    t_first_a = np.array(t_first, bool)
    if t_key_a.size:
        def pred(x, idx):
            return _g_key(spec, c, x) >= t_key_a[idx]
        b_key, found = first_true(klo[t_bin_a], khi[t_bin_a], pred)
    else:
        b_key, found = np.zeros(0, np.int64), np.zeros(0, bool)
    # each window's cells: [klo, b_1 - 1], [b_1, b_2 - 1], ..., [b_n, khi] over its found boundaries
    # (t_bin is sorted: the boundaries of a window are consecutive). A cell is checked when it starts
    # at a searched boundary that follows its predecessor (the cell that spans the skipped middle of a
    # long window starts at a "last" boundary, t_first False).
    b_bin, b_start, b_keep = t_bin_a[found], b_key[found], t_first_a[found]
    n_b = np.bincount(b_bin, minlength=klo.size)
    first = np.concatenate([[0], np.cumsum(n_b + 1)[:-1]])   # index of each window's first cell
    starts = np.empty(klo.size + b_bin.size, np.int64)
    keep = np.ones(starts.size, bool)
    starts[first] = klo
    inner = np.ones(starts.size, bool)
    inner[first] = False
    starts[inner], keep[inner] = b_start, b_keep
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:] - 1
    ends[first + n_b] = khi                                  # each window's last cell ends at khi
    ok = keep & (starts <= ends)
    n_t = np.bincount(t_bin_a, minlength=klo.size)
    return [(starts[a:a + k + 1][ok[a:a + k + 1]], ends[a:a + k + 1][ok[a:a + k + 1]], 2 + 70 * int(t))
            for a, k, t in zip(first.tolist(), n_b.tolist(), n_t.tolist())]


def _special_codes(fmt: AnyFormat) -> np.ndarray:
    """Zeros, infinities and a few NaNs of a source format (checked directly)."""
    if fmt.is_integer:
        return np.zeros(1, np.uint64)
    assert isinstance(fmt, Format)
    cs = [0]
    if fmt.has_negative_zero:
        cs.append(fmt.sign_bit)
    lo, hi = key_bounds(fmt)
    if fmt.has_inf:
        cs += [int(from_key(np.array([hi]), fmt)[0]), int(from_key(np.array([lo]), fmt)[0])]
    if fmt.bits <= 16:
        allc = np.arange(1 << fmt.bits, dtype=np.uint64)
        cs += list(allc[is_nan(allc, fmt)])
    elif fmt.has_nan:
        top = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
        cands = [top | 1, top | (1 << (fmt.man_bits - 1)), top | ((1 << fmt.man_bits) - 1)] if fmt.nan == "ieee" \
            else [fmt.mag_mask if fmt.nan == "fn" else fmt.sign_bit]
        cs += cands + [c | fmt.sign_bit for c in cands if fmt.signed]
    return np.unique(np.array(cs, np.uint64))


# ---- the verdict ----------------------------------------------------------------------------
def _differing_segments(spec: ChainSpec, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inside cells where g is the constant c, the source keys where f differs: f is non-decreasing
    in the key, so they form [lo, x1-1] (f < c) and [x2, hi] (f > c) with x1 = first f >= c and
    x2 = first f > c. Returns (starts, ends) of the non-empty segments."""
    T = spec.dst

    def key_of(fn, keys):
        codes = from_key(keys, spec.src).astype(spec.src.code_dtype)
        return result_key(fn(codes), T, positive_side(keys, spec.src))

    c = key_of(spec.chain, lo)
    x1, f1 = first_true(lo, hi, lambda k, idx: key_of(spec.direct_cast, k) >= c[idx])
    x2, f2 = first_true(lo, hi, lambda k, idx: key_of(spec.direct_cast, k) > c[idx])
    low_seg = ~f1 | (x1 > lo)  # f < c at lo: [lo, x1 - 1], or the whole cell when f never reaches c
    low_end = np.where(f1, x1 - 1, hi)  # no wrap: x1 > lo wherever it is used
    starts = np.concatenate([lo[low_seg], x2[f2]])
    ends = np.concatenate([low_end[low_seg], hi[f2]])
    return starts, ends


def _least_magnitude_candidates(fmt: AnyFormat, codes: np.ndarray) -> np.ndarray:
    """The few codes that can have the least magnitude (|value| grows with the distance of the key from
    the middle on each half): the first key of the positive half, the last of the negative half
    (-0 there, where it is among the codes), and the smallest NaN code (ordered exactly afterwards)."""
    codes = np.asarray(codes).astype(np.uint64)
    nan = is_nan(codes, fmt)
    keys = to_key(codes[~nan], fmt)
    pos = positive_side(keys, fmt)
    fin = _nonzero_finite(fmt, codes[~nan])
    pick = []
    for sel in (pos, pos & fin):  # also the least nonzero finite one of each half (for the reason)
        if sel.any():
            pick.append(from_key(np.array([keys[sel].min()]), fmt))
    for sel in (~pos, ~pos & fin):
        if sel.any():
            pick.append(from_key(np.array([keys[sel].max()]), fmt))
    pick.append(np.sort(codes[nan])[:1])
    return np.unique(np.concatenate(pick).astype(np.uint64))


def _nonzero_finite(fmt: AnyFormat, codes: np.ndarray) -> np.ndarray:
    """Where codes are numbers other than +-0 and +-inf (NaN codes: False)."""
    codes = np.asarray(codes).astype(np.uint64)
    nan = is_nan(codes, fmt)
    place = key_place(to_key(np.where(nan, np.uint64(0), codes), fmt), fmt)
    return ~nan & ((place == NEG_FINITE) | (place == POS_FINITE))


def _magnitude_order(fmt: AnyFormat, codes: np.ndarray) -> list[int]:
    """Indices of codes sorted by |value| (-0 is as small as +0), then by code; infinities after every
    finite value, NaNs last. Exact for every format."""
    from fractions import Fraction

    from ..core.scalar import Special, value_of

    def mag(c: int):
        v = value_of(int(c), fmt)
        if not isinstance(v, Special):
            return (0, abs(Fraction(v)), int(c))
        rank = {"zero": 0, "inf": 1, "nan": 2}[v.kind]
        return (rank, Fraction(0), int(c))

    return sorted(range(len(codes)), key=lambda i: mag(codes[i]))


def _exhaustive(spec: ChainSpec, executor=None) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray], int]:
    """Every source code (sources of 32 bits or fewer): the least-magnitude candidates among the codes
    where chain and direct differ, and the region pieces holding any such code (as segments)."""
    n = 1 << spec.src.bits
    jobs = [(spec, a, min(a + _EXHAUSTIVE_CHUNK, n)) for a in range(0, n, _EXHAUSTIVE_CHUNK)]
    runs = map(_exhaustive_part, jobs) if executor is None else executor.map(_exhaustive_part, jobs)
    parts = list(progress(runs, total=len(jobs), desc=f"chain {spec.label()} (exhaustive)", unit="chunk")
                 if len(jobs) > 1 else runs)
    cands = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.uint64)
    hit = np.unique(np.concatenate([p[1] for p in parts]), axis=0) if parts else np.zeros((0, 2), np.int64)
    return cands, (hit[:, 0], hit[:, 1]), n


def _exhaustive_part(args) -> tuple[np.ndarray, np.ndarray]:
    """One chunk of source codes: the least-magnitude differing candidates, and the region pieces
    (lo_key, hi_key rows) holding a differing number (computed only where some code differs)."""
    spec, a, b = args
    codes = np.arange(a, b, dtype=np.uint64).astype(spec.src.code_dtype)
    bad = codes[spec.chain(codes) != spec.direct_cast(codes)].astype(np.uint64)
    if not bad.size:
        return bad, np.zeros((0, 2), np.int64)
    ranges = region_key_ranges(spec)
    nan = is_nan(bad, spec.src)
    keys = to_key(bad[~nan], spec.src)
    idx = np.searchsorted(ranges[:, 0], keys, side="right") - 1
    inside = (idx >= 0) & (keys <= ranges[np.maximum(idx, 0), 1])
    return _least_magnitude_candidates(spec.src, bad), ranges[np.unique(idx[inside])]


def classify_cast_chain(src: Any, *hops_then_dst: Any, rounding: Any = "rne", overflow: Any = None,
                        ftz: bool = False, method: str = "auto", executor: Any = None) -> ChainVerdict:
    """Prove that ``src -> hop -> ... -> dst`` equals ``src -> dst`` for every source value, or find
    the smallest-magnitude source value where they differ. ``rounding`` / ``overflow`` are one value
    for every hop or a list with one per hop; the direct cast uses the last hop's.

    ``method``: "auto" (exhaustive enumeration for sources of at most 8 bits and where the chain is not
    monotone, the cell proof otherwise),
    "proof", or "exhaustive" (every source code; sources of 32 bits or fewer).
    """
    spec = chain_spec(src, *hops_then_dst, rounding=rounding, overflow=overflow, ftz=ftz)
    if method not in ("auto", "proof", "exhaustive"):
        raise ValueError(f"method must be 'auto', 'proof' or 'exhaustive', got {method!r}")
    t0 = time.perf_counter()
    monotone = _monotone(spec)
    if method == "proof" and not monotone:
        raise ValueError(f"{spec.label()} has a wrapping hop, which is not monotone, so the cell proof does "
                         "not apply; use method='exhaustive'")
    if method == "exhaustive" or not monotone or (method == "auto" and spec.src.bits <= _ENUMERATE_BITS):
        if spec.src.bits > 32:
            why = "it is not monotone" if not monotone else "method='exhaustive' was asked"
            raise ValueError(f"{spec.label()}: {why}, and a {spec.src.bits}-bit source is too wide to enumerate "
                             "(2^64 codes); only sources of 32 bits or fewer can be checked code by code")
        bad, segments, points = _exhaustive(spec, executor)
        method_name = "exhaustive enumeration of every source code"
    else:
        spec_codes = _special_codes(spec.src).astype(spec.src.code_dtype)
        diff_special = spec_codes[spec.chain(spec_codes) != spec.direct_cast(spec_codes)]
        lo, hi, evals = _cells(spec)
        codes_lo = from_key(lo, spec.src).astype(spec.src.code_dtype)
        codes_hi = from_key(hi, spec.src).astype(spec.src.code_dtype)
        both = np.concatenate([codes_lo, codes_hi])  # the two ends of every cell, one engine call per hop
        g_lo, g_hi = np.split(spec.chain(both), [lo.size])
        if np.any(g_lo != g_hi):
            raise RuntimeError(f"internal error: the chain is not constant on a cell of {spec.label()}; "
                               "please report it")
        f_lo, f_hi = np.split(spec.direct_cast(both), [lo.size])
        fail = (f_lo != g_lo) | (f_hi != g_hi)
        seg_a, seg_b = _differing_segments(spec, lo[fail], hi[fail])
        # the least-magnitude key of each segment: its start on the positive side, its end on the negative
        wk = np.where(positive_side(seg_a, spec.src), seg_a, seg_b)
        bad = np.concatenate([diff_special.astype(np.uint64), from_key(wk, spec.src)])
        segments = (seg_a, seg_b)
        points = int(spec_codes.size + 2 * lo.size + evals)
        n_bin = len(half_binades(spec.src, False)) + len(half_binades(spec.src, True))
        method_name = (f"cell proof: {lo.size} cells over {n_bin} binades (periodic pattern, K={K_PERIOD})"
                       f" + {spec_codes.size} special codes")
    elapsed = time.perf_counter() - t0
    witness = finite = None
    if bad.size:
        cands = _least_magnitude_candidates(spec.src, np.unique(bad))
        order = _magnitude_order(spec.src, cands)
        witness = Witness.build(spec, int(cands[order[0]]))
        # the reason names what happens to numbers; a differing zero/inf/NaN alone is SPECIALS
        fin = [int(cands[i]) for i in order if _nonzero_finite(spec.src, cands[i:i + 1])[0]]
        finite = Witness.build(spec, fin[0]) if fin else None
    proof = Proof(method_name, points, elapsed)
    reason = classify_reason(spec, witness, segments, finite)
    return ChainVerdict(spec, witness is None, reason, witness, proof, segments)
