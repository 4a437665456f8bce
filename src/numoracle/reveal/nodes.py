"""What each node of a revealed tree does: the format and rounding of additions, the parameters of fused nodes.

* **Additions** (two-child nodes): for node v = fl(x + y), put 1 at a leaf under x, 2^-k at a leaf under y, -1 at
  a leaf under v's sibling and 0 elsewhere: v's parent cancels the 1 exactly, so the output is 2^-k when v kept
  1 + 2^-k and 0 when it rounded it away. A binary search over k gives v's precision p (fp64 53, fp32 24, fp16
  11, bf16 8); 1 + 0.75 ulp and its negative then tell the rounding (nearest, toward zero, up, down). Nodes are
  probed on a sample (every node of a small tree, a stratified sample of a large one); where the sample
  disagrees, every node is probed.
* **Fused nodes** (more than two children: a block FMA, a multi-term adder): 1, -1 and 2^-s among its terms give
  the aligned window's fraction bits F (2^-s survives iff s <= F); the remaining parameters of the
  :class:`~numoracle.orders.BlockFMA` model (truncation or a sticky bit, output rounding and precision, the carry
  bit) are the candidates that reproduce the kernel on crafted and random data.
* **Terms entering rounded** (a product rounded before it is added, the first product of a chain started from
  +0): candidates scored on random data (masking cannot see a rounding of a lone term).
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from typing import Any

import numpy as np

from ..core.formats.format import BF16, FP16, FP32, FP64, Format
from ..models.orders.basic import BlockFMA
from ..models.orders.tree import TreeOrder
from .probe import Prober, RevealError

__all__ = ["NodeProbe", "FORMATS_BY_PRECISION"]

FORMATS_BY_PRECISION = {53: FP64, 24: FP32, 11: FP16, 8: BF16}


class NodeProbe:
    """Probes of one tree's nodes, read at output position ``pos``."""

    def __init__(self, p: Prober, nodes: list[tuple[int, ...]], pos: int, top: int,
                 spots: list[int] | None = None):
        self.p, self.nodes, self.pos, self.n, self.top = p, nodes, pos, p.n, top
        # a matmul's output positions of this tree in distinct rows and columns: independent probes, one call
        self.spots = spots if spots and p.op == "matmul" else [pos]
        parent = [-1] * (self.n + len(nodes))
        first = list(range(self.n)) + [0] * len(nodes)    # a leaf under every ref
        for i, ch in enumerate(nodes):
            for c in ch:
                parent[c] = self.n + i
            first[self.n + i] = first[ch[0]]
        self.parent = np.array(parent, np.int64)
        self.first = np.array(first, np.int64)
        self._par, self._first = parent, first          # the same as lists (fast item reads)

    def out(self, t: np.ndarray) -> float:
        return float(self.p.terms(t, self.pos)[self.pos])

    def out_sparse(self, idx: list[int], vals: list[float]) -> float:
        """:meth:`out` of terms that are zero but ``vals`` at ``idx`` (Prober.sparse: no array of n per call)."""
        if self.p.op == "sum":
            return float(self.p.sparse(idx, vals, pos=self.pos)[self.pos])
        a, b = self.p.split(np.asarray(vals, np.float64))
        return float(self.p.sparse(idx, a, b, pos=self.pos)[self.pos])

    def _scale(self) -> int:
        """An exponent E such that 2^E and 2^(E - 60) are both usable terms (or as close as the format allows);
        at most the masking's M (which the kernel was seen to hold)."""
        f = self.p.fmt
        prod = 1 if self.p.op == "sum" else 2
        return min(self.top - 1, max(0, prod * (f.emin - f.man_bits) + 62))

    def _kept_terms(self, v: int, small: float, sign: float = 1.0) -> tuple[list[int], list[float], float]:
        """The terms of :meth:`_kept`'s probe, scaled by E (nonzero ones: indices, values), and what to subtract
        from output / E."""
        ch = self.nodes[v - self.n]
        par = self._par[v]
        E = 2.0 ** self._scale()
        idx = [self._first[ch[0]], self._first[ch[1]]]
        vals = [sign * E, sign * small * E]
        if par < 0:    # the root: no cancellation, the output itself (1 + small, as the output format keeps it)
            return idx, vals, sign
        sib = [c for c in self.nodes[par - self.n] if c != v][0]
        return idx + [self._first[sib]], vals + [-sign * E], 0.0

    def _kept(self, v: int, small: float, sign: float = 1.0) -> float:
        """Output of the probe 1 (under v's first child), small (under its second), -1 (under v's sibling)."""
        idx, vals, off = self._kept_terms(v, small, sign)
        return self.out_sparse(idx, vals) / 2.0 ** self._scale() - off

    def kept_many(self, vs: list[int], smalls: list[float]) -> np.ndarray:
        """:meth:`_kept` of many probes; a matmul's at its spots, up to one per row and column in each call."""
        probes = [self._kept_terms(v, sm) for v, sm in zip(vs, smalls)]
        if self.p.op == "sum":
            outs = self.p.sparse_many([(idx, vals, None) for idx, vals, _ in probes], self.pos)
        else:                        # the products split into factors in one go
            ends = np.cumsum([len(idx) for idx, _, _ in probes]).tolist()
            fa, fb = self.p.split(np.concatenate([np.asarray(vals, np.float64) for _, vals, _ in probes])) \
                if probes else (np.empty(0), np.empty(0))
            split = [(idx, fa[e0:e1], fb[e0:e1]) for (idx, _, _), e0, e1 in zip(probes, [0] + ends, ends)]
            outs = self.p.sparse_at(split, self.spots) if len(self.spots) > 1 else self.p.sparse_many(split, self.pos)
        return np.asarray(outs, np.float64) / 2.0 ** self._scale() - np.array([off for _, _, off in probes])

    def _exact(self, v: int, k: int) -> bool:
        """Does v keep 1 + 2^-k exactly? (A directed rounding may move it to 1 + ulp instead of 1: not kept.)"""
        return self._kept(v, 2.0**-k) == 2.0**-k

    def precision(self, v: int, likely: tuple = ()) -> int:
        """The precision v rounds to (the largest k with 1 + 2^-k kept, plus one); ``likely`` precisions first."""
        for q in likely:
            if self._exact(v, q - 1) and not self._exact(v, q):
                return q
        lo, hi = 0, 1
        low_exp = (1 if self.p.op == "sum" else 2) * (self.p.fmt.emin - self.p.fmt.man_bits)
        kmax = min(64, self._scale() - low_exp)
        while hi < kmax and self._exact(v, hi):
            lo, hi = hi, min(2 * hi, kmax)
        if hi == kmax and self._exact(v, hi):
            return kmax + 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._exact(v, mid):
                lo = mid
            else:
                hi = mid
        return lo + 1

    def rounding(self, v: int, p: int) -> str:
        """rne, rtz, ru or rd: 1 + 0.75 ulp and -(1 + 0.75 ulp) at v."""
        small = 3 * 2.0 ** -(p + 1)
        up = self._kept(v, small) != 0
        neg_away = self._kept(v, small, -1.0) != 0
        return {(True, True): "rne", (False, False): "rtz", (True, False): "ru", (False, True): "rd"}[(up, neg_away)]

    def probeable(self) -> list[int]:
        """Two-child nodes whose parent is a two-child node (the cancellation there is one exact addition)."""
        out, n, nodes, par = [], self.n, self.nodes, self._par
        for i, ch in enumerate(nodes):
            q = par[n + i]
            if len(ch) == 2 and q >= 0 and len(nodes[q - n]) == 2:
                out.append(n + i)
        return out

    def leaf_rounded(self, k: int, p_in: int) -> bool:
        """Does product k enter its node rounded to the inputs' precision p? t_k = (1 + 2^-h)^2 needs 2h + 1 bits
        (h = ceil(p/2)); the first leaf of its sibling holds -(1 + 2^(1-h)): the output is 2^-2h when t_k entered
        exact, 0 when rounded."""
        par = self._par[k]
        sib = [c for c in self.nodes[par - self.n] if c != k][0]
        h = -(-p_in // 2)
        a = 1 + 2.0**-h
        if not (np.array([a]).astype(self.p.dtype).astype(np.float64) == a).all():
            raise RevealError(f"{self.p.fmt.name} cannot hold 1 + 2^-{h}: leaf roundings not probed")
        got = self.p.sparse([k, self._first[sib]], [a, -(1 + 2.0 ** (1 - h))], [a, 1.0], pos=self.pos)
        return float(got[self.pos]) != 2.0 ** (-2 * h)

    def leaves_rounded(self, ks: list[int], p_in: int, bits: int) -> dict[int, bool]:
        """:meth:`leaf_rounded` for many products, several per call: leaves whose parents' subtrees are disjoint
        each get the probe scaled by 4^i (i = 0, 1, ...), zeros elsewhere; the output is the sum of 2^-2h 4^i over
        the exact ones, exact while the sum fits ``bits`` (the narrowest node format's precision). Only for trees
        that round to nearest (a directed rounding leaves residues that could read as another leaf's bit); an
        output that is not such a sum is probed leaf by leaf."""
        h = -(-p_in // 2)
        a = 1 + 2.0**-h
        g = max(1, (bits - 2) // 2)
        out: dict[int, bool] = {}
        groups, probes = _disjoint_groups(self, ks, g), []
        nodes, n, par, first = self.nodes, self.n, self._par, self._first
        fa_all = [v for i in range(g) for v in (a * 2.0**i, -(1 + 2.0 ** (1 - h)) * 2.0**i)]
        fb_all = [v for i in range(g) for v in (a * 2.0**i, 2.0**i)]
        for group in groups:     # nonzero terms only (Prober.sparse): the leaf and its sibling's first leaf
            idx = []
            for k in group:
                ch = nodes[par[k] - n]
                idx += [k, first[ch[1] if ch[0] == k else ch[0]]]
            probes.append((idx, fa_all[:len(idx)], fb_all[:len(idx)]))
        if len(self.spots) > 1:
            outs = self.p.sparse_at(probes, self.spots)
        else:
            outs = self.p.sparse_many(probes, self.pos)
        odd = int("10" * g, 2)                      # the bits above each leaf's bit: set only by a wrong sum
        for group, o in zip(groups, np.asarray(outs, np.float64).tolist()):
            v = o * 2.0 ** (2 * h)
            code = int(v) if v == int(v) and 0 <= v < 4.0 ** len(group) else -1
            if code < 0 or code & odd:
                out.update({k: self.leaf_rounded(k, p_in) for k in group})
            else:
                out.update({k: not (code >> (2 * i)) & 1 for i, k in enumerate(group)})
        return out

    def frac_bits(self, v: int) -> int:
        """Fused node v: the largest s such that 1 - 1 + 2^-s keeps 2^-s (the aligned window's fraction bits)."""
        terms = [c for c in self.nodes[v - self.n] if c < self.n]
        if len(terms) < 3:
            raise RevealError("a fused node of fewer than three terms: its window cannot be probed")
        E = 2.0 ** self._scale()

        def kept(s: int) -> bool:
            return self.out_sparse(terms[:3], [E, -E, E * 2.0**-s]) != 0

        s = 1
        while s < 60 and kept(s + 1):
            s += 1
        return s


def _disjoint_groups(probe: NodeProbe, ks: list[int], g: int) -> list[list[int]]:
    """The leaves ks in groups of at most g whose parents' subtrees are pairwise disjoint (intervals of the leaves'
    depth-first order that do not overlap), greedily by interval end."""
    n, nodes = probe.n, probe.nodes
    nn = len(nodes)
    size = [1] * n + [0] * nn                      # leaves under every ref (children before parents)
    for i, ch in enumerate(nodes):
        size[n + i] = size[ch[0]] + size[ch[1]] if len(ch) == 2 else sum(size[c] for c in ch)
    lo = [0] * (n + nn)                            # leaves numbered in depth-first order (left to right): a
    for i in range(nn - 1, -1, -1):                # node's first leaf, handed down from the root
        at = lo[n + i]
        for c in nodes[i]:
            lo[c] = at
            at += size[c]
    par = probe._par
    pop, push = heapq.heappop, heapq.heappush
    groups: list[list[int]] = []
    open_: list[tuple[int, int]] = []              # (end of the group's last interval, group index): a heap
    for k in sorted(ks, key=lambda k: lo[par[k]]):   # interval partitioning, by start
        q = par[k]
        start = lo[q]
        if open_ and open_[0][0] < start:
            gi = pop(open_)[1]
            grp = groups[gi]
        else:
            gi, grp = len(groups), []
            groups.append(grp)
        grp.append(k)
        if len(grp) < g:
            push(open_, (start + size[q] - 1, gi))     # the interval's end: its last leaf
    return groups


def root_format(probe: NodeProbe, likely: tuple) -> Format | None:
    """The format the root's value reaches the output in (1 + 2^-k at the root, read through the output)."""
    root = probe.n + len(probe.nodes) - 1
    if len(probe.nodes[-1]) != 2:
        return None
    return FORMATS_BY_PRECISION.get(probe.precision(root, likely))


def node_steps(probe: NodeProbe, sample: int = 32, rng: Any = None) -> tuple[list[Any], list[int], list[str]]:
    """(steps, kinds, notes) of the two-child nodes: format and rounding per node (sampled, then all if mixed)."""
    cands = probe.probeable()
    notes: list[str] = []
    root = probe.n + len(probe.nodes) - 1
    if not cands and len(probe.nodes[-1]) == 2:
        cands = [root]
        notes.append("additions probed at the root (through the output format)")
    elif not cands:
        return [(None, None)], [0] * len(probe.nodes), ["no addition could be probed alone: additions are "
                                                         "modelled in the accumulator format (simulate's acc)"]
    rng = rng or np.random.default_rng(0)
    if len(cands) <= 512:
        pick = cands
    else:   # a random sample, and the first and last nodes (tails and final combines live there)
        pick = sorted(set(rng.choice(cands, sample, replace=False).tolist()) | set(cands[:16]) | set(cands[-32:]))
    likely: tuple = ()
    found: dict[int, int] = {}
    for v in pick[:1]:
        found[v] = probe.precision(v, likely)
        likely = (found[v],) + tuple(q for q in likely if q != found[v])
    rest = [v for v in pick if v not in found]
    if rest and hasattr(probe, "kept_many"):   # the commonest precision at every node at once (a matmul's packed
        # in its spots; the others' calls made back to back, Prober.sparse_many)
        q = likely[0]
        got = probe.kept_many(rest + rest, [2.0 ** (1 - q)] * len(rest) + [2.0**-q] * len(rest))
        for v, a, b in zip(rest, got[:len(rest)], got[len(rest):]):
            if a == 2.0 ** (1 - q) and b != 2.0**-q:      # precision's own test of a likely q
                found[v] = q
    for v in pick:
        if v not in found:
            found[v] = probe.precision(v, likely)
            likely = (found[v],) + tuple(q for q in likely if q != found[v])
    if len(set(found.values())) > 1 and len(cands) <= 4096:
        for v in cands:
            if v not in found:
                found[v] = probe.precision(v, likely)
                likely = (found[v],) + tuple(q for q in likely if q != found[v])
    keys: dict[int, tuple] = {}
    for p in sorted(set(found.values())):
        fmt = FORMATS_BY_PRECISION.get(p)
        if fmt is None:
            notes.append(f"nodes keep {p} bits: no known format has that precision; modelled as the accumulator")
        v = next(v for v, q in found.items() if q == p)
        mode = probe.rounding(v, p) if fmt is not None else None
        keys[p] = (fmt, mode)
    steps = list(dict.fromkeys(keys.values()))
    common = max(set(found.values()), key=list(found.values()).count)
    kinds = [steps.index(keys[common])] * len(probe.nodes)
    for v, p in found.items():
        kinds[v - probe.n] = steps.index(keys[p])
    if len(found) < len(cands):
        notes.append(f"node formats probed on a sample of {len(found)} of {len(cands)} nodes; the others take the "
                     "commonest (not probed)")
    if len(found) > len(keys):
        notes.append("roundings probed at one node per format; the other nodes of that format assumed alike")
    return steps, kinds, notes


def fused_candidates(f: int, terms: int, acc: Format | None) -> list[BlockFMA]:
    """BlockFMA models with window F = f (or f - 1: the probe may see the carry bit's extra place)."""
    out = []
    for fb in dict.fromkeys((f, f - 1)):
        if fb < 1 or fb > 40 or (terms + 1) << (fb + 3) > 1 << 53:
            continue
        for trunc in (True, False):
            for rnd, ofb in (("rtz", None), ("rne", None), ("rtz", fb), ("rne", 10)):
                for carry in (True, False):
                    out.append(BlockFMA(terms, fb, truncate=trunc, out_rounding=rnd, out_frac_bits=ofb,
                                        carry_bit=carry, acc=acc))
    return out


def with_step(tree: TreeOrder, fused: BlockFMA) -> TreeOrder:
    """The tree with every fused node given the block FMA ``fused``."""
    steps = list(tree.steps)
    kinds = list(tree.kinds or [0] * len(tree.nodes))
    idx = [i for i, ch in enumerate(tree.nodes) if len(ch) > 2]
    k = len(steps)
    steps.append(fused)
    for i in idx:
        kinds[i] = k
    return replace(tree, steps=tuple(steps), kinds=tuple(kinds))
