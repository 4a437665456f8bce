"""The summation tree of a kernel from masking probes (FPRev's idea), for every output position at once.

A probe puts +M at term i, -M at term j and one unit u at every other term. M absorbs every partial sum of
units it meets (M + c u = M in the accumulator), and M - M = 0 exactly where i and j meet: the output counts the
units outside the smallest subtree holding i and j, so ``size(i, j) = n - output / u`` is that subtree's leaf
count. From leaf a, the sizes ``size(a, j)`` order the other leaves along a's path to the root: leaves of equal
size hang off the same path node, and each such group is revealed the same way (recursively, from one of its
leaves). A group whose leaves meet a's subtree only at the group's parent is a set of siblings there: a node of
more than two children (a fused node). Every answer is checked against the tree it implies (the path node of
size s holds exactly s leaves), so a kernel that is not a tree of exact additions is reported, not guessed.

The search runs breadth first: every pending group's probes go in one batch, edited in place into the kernel's
inputs (reveal/lanes.py). Where the kernel maps independent rows (a sum over the last axis, a matmul's rows of A
or columns of B) one call carries one probe per row; otherwise all output positions see the same probe, the
search follows one *leader* position, and every position whose answers ever differ from the leader's is searched
again with its own leader. Calls: n - 1 for a chain, about (n/2) log2 n for a balanced tree (FPRev's recursive
search; fewer where groups repeat a revealed subtree and are only confirmed: reveal/twins.py), divided by the
probes per call, times the number of distinct trees among the output positions.

**Prefix doubling** (one probe per call): the root's leader first reads a window of the first leaves; where a
prefix of them is a complete subtree S, S is searched; where its smallest answers are one leaf each at a stride p
(sizes 2, 3, 4, ...), S is its lane's chain over every p-th leaf, read as far as the answers go on (they are the
chain's certificate). Then S grows by a translate: the leaf x outside S with the smallest known answer s meets
the leader at s; where an earlier S (or S itself) has s - |S| leaves and, moved to start at x, passes its
certificate, S takes it in (``_Search._double``): about n calls instead of a full scan plus its twins (numpy's
pairwise sum: lanes of 8 in blocks of 128, pairwise above; OpenBLAS's sdot: 32 lane chains joined pairwise;
torch's CPU sum: chains of 16 per lane, chained along the lane, then the lanes). Where no earlier S fits, more of
the leader's answers are read (the first leaf past S, then its lane's leaves); where a certificate fails the
search goes on as usual from the answers known, and the groups already revealed are not searched again.

**Directed rounding.** M absorbs the units only where the rounding goes back to M: round to nearest and downward
(positive units), upward (negative units: the sign is flipped when positive units give no count). Toward zero
absorbs only units of M's own sign: with negative units -M absorbs them and +M loses one ulp step at every node
on its path below the meeting node. Those outputs are no counts but grow with that path; so the answers are
grouped by value, and each group probed once more with the terms on +M's side (a and the leaves of the smaller
groups) set to zero: then +M has nothing to round away and the output is a count again.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .classes import lane_classes
from .lanes import Lanes, packed_modes
from .probe import Prober, RevealError
from .twins import certificate, translated, twin_key

__all__ = ["Masking", "search_tree", "to_nodes", "SearchResult"]


class Masking:
    """The probe magnitudes for one kernel: unit u = 2^eu at the counted terms, +-M = +-2^eM at the pair."""

    def __init__(self, p: Prober):
        f, g = p.fmt, p.out_fmt
        assert g is not None
        prod = 1 if p.op == "sum" else 2
        # +-M: the largest power of two of the terms, inside the output's range and (unless the inputs are wider)
        # FP32's; smaller while a probe overflows (a narrower accumulator)
        top = min(prod * f.emax, getattr(g, "emax", 62) - 2, max(125, f.emax - 1))
        low = max(prod * (f.emin - f.man_bits), getattr(g, "emin", -1000) - getattr(g, "man_bits", 0))
        need = (max(p.n, 2) - 1).bit_length() + 2   # ceil(log2 n), in integers
        if p.n >= 2 ** getattr(g, "precision", 64):
            raise RevealError(f"the output format {g.name} cannot count {p.n} terms exactly (p = {g.precision}); "
                              "reveal needs n < 2^p of the output format")
        self.eu = max(low, top - 66 - need)
        c0 = p.calls
        while top - self.eu > need + 12 and not _holds(p, 2.0**self.eu, 2.0**top):
            top -= 2
            self.eu = max(low, top - 66 - need)
        self.eM = top
        while self.eu < top - need - 12:   # calibrate: n and n - 1 units must come back exactly (no underflow)
            u, t = 2.0**self.eu, np.full(p.n, 2.0**self.eu)
            if (p.terms(t) == p.n * u).all():
                t[0] = 0
                if (p.terms(t) == (p.n - 1) * u).all():
                    break
            self.eu += 1
        self.calls = p.calls - c0
        self.absorbs = self.eM - self.eu - need      # accumulators of up to this many bits are masked
        if self.absorbs < 12:
            raise RevealError(f"{f.name} inputs leave too little range to mask partial sums "
                              f"(2^{self.eM} against units 2^{self.eu})")
        self.u, self.M = 2.0**self.eu, 2.0**self.eM
        self.sign = 1                                 # the units' sign (-1 once a kernel rounds upward / to zero)
        self.last: Lanes | None = None                # the lanes of the last search (for a determinism check)
        self.probes = 0                               # probes of the current search


def _holds(p: Prober, u: float, M: float) -> bool:
    """Does the kernel keep +M (then -M) among units finite? Every partial sum of a masking probe is at most M plus
    units, so this tells an accumulator too narrow for M; a pair (i, j) could meet before any overflow."""
    for k, v in ((0, M), (p.n - 1, -M)):
        t = np.full(p.n, u)
        t[k] = v
        if not np.isfinite(p.terms(t)).all():
            return False
    return True


@dataclass
class _Task:
    """One call of FPRev's recursion: the subtrees over leaves G (a whole tree when top is None, else children of
    a node of ``top`` leaves), found from leaf ``a`` at G's ``end`` (0: first, -1: last): the groups along a's
    path (``parts``), then the siblings (``rest``)."""

    G: list[int]
    top: int | None
    end: int = 0
    a: int = -1
    parts: list = field(default_factory=list)
    rest: _Task | None = None
    clade: bool = False          # a group along a path (one subtree, or siblings at a fused node): may be a twin
    fixed: Any = None            # the subtree, where confirmed as a twin (reveal/twins.py)
    expanded: bool = False
    done: bool = False


@dataclass
class _Prefix:
    """The subtree of a task's leader below its path node k (the leader and the first k groups): a template for a
    group of the same size hanging off that node (the other half of a pairwise step)."""

    owner: _Task
    k: int
    G: list[int]
    done: bool = False


@dataclass
class SearchResult:
    """The trees found (nested tree, output positions it holds for) and how they were probed."""

    found: list
    mode: str                    # lane layout: "all", "rows" or "cols"
    calls: int
    probes: int
    classes: list = field(default_factory=list)   # the lane classes searched (lane indices), packed modes only

    @property
    def per_call(self) -> float:
        return self.probes / max(self.calls, 1)


class _Search:
    def __init__(self, p: Prober, mask: Masking, lanes: Lanes, positions: np.ndarray, leader: int,
                 twins: bool = True):
        self.p, self.m, self.n, self.lanes, self.twins = p, mask, p.n, lanes, twins
        self.confirmed = 0                            # twins confirmed (reveal/twins.py)
        self.positions, self.leader = positions, leader
        self.diverged = np.zeros(positions.size, bool)
        self.probes = 0                               # probes run (calls carry lanes.lanes of them)
        self._lead: int | None = None                 # the root's leader, whose answers _known holds
        self._known: dict[int, int] = {}              # size(_lead, j) already probed (prefix doubling)
        self._inner = False
        mask.last = lanes

    def _run(self, a: np.ndarray, j: np.ndarray, zero: list | None = None) -> np.ndarray:
        self.probes += len(a)
        return self.lanes.run(a, j, zero)

    # ---- answers ------------------------------------------------------------------------------------------
    def _counts(self, vals: np.ndarray, a: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(counts at the leader, is a count) of a batch's outputs; marks the positions that answer otherwise."""
        v = vals[:, self.positions]
        lead = v[:, self.leader]
        if v.shape[1] > 1:
            self.diverged |= ~(v == lead[:, None]).all(axis=0)
        if not np.isfinite(lead).all():
            k = int(np.flatnonzero(~np.isfinite(lead))[0])
            raise RevealError(f"fn returned {lead[k]} on finite inputs (probe {a[k]}, {j[k]})")
        c = lead / (self.lanes.sign * self.m.u)
        return c, (c == np.round(c)) & (c >= 0) & (c <= self.n - 2)

    def _relayout(self, sign: int) -> None:
        self.lanes = Lanes(self.p, self.m.u, self.m.M, sign, self.lanes.mode, self.lanes.which)
        self.m.sign, self.m.last = sign, self.lanes

    def sizes(self, tasks: list[_Task]) -> list[np.ndarray]:
        """size(t.a, j) at the leader for every task t and every other leaf j of t.G, all probes in one batch (the
        root leader's answers already known from the prefix doubling taken, not probed again)."""
        if not self._known:
            return self._sizes(tasks)
        known, lead = self._known, self._lead
        sub = [_Task([t.a] + [g for g in t.G if g != t.a and g not in known], t.top, a=t.a) if t.a == lead else t
               for t in tasks]
        try:
            got = self._sizes(sub, strict=True)
        except _Partial:           # answers that are no counts: the whole batch again, as without the cache
            known.clear()
            return self._sizes(tasks)
        out = []
        for t, st, sz in zip(tasks, sub, got):
            if st is not t:
                new = dict(zip(st.G[1:], sz.tolist()))
                sz = np.array([known[g] if g in known else new[g] for g in t.G if g != t.a], np.int64)
            out.append(sz)
        return out

    def _sizes(self, tasks: list[_Task], strict: bool = False) -> list[np.ndarray]:
        """:meth:`sizes` by probes (``strict``: answers that are no counts raise _Partial, before any other probe)."""
        js = [g for t in tasks for g in t.G if g != t.a]
        lens = [len(t.G) - 1 for t in tasks]
        if not js:
            return [np.empty(0, np.int64) for _ in tasks]
        a = np.repeat([t.a for t in tasks], lens)
        j = np.array(js, np.int64)
        vals = self._run(a, j)
        c, ok = self._counts(vals, a, j)
        bad = np.flatnonzero(~ok)
        if bad.size and strict:
            raise _Partial()
        if bad.size and self.lanes.sign == 1:    # upward / toward zero: M absorbs negative units
            self._relayout(-1)
            vals[bad] = self._run(a[bad], j[bad])
            c[bad], ok[bad] = self._counts(vals[bad], a[bad], j[bad])
            bad = np.flatnonzero(~ok)
        if bad.size:
            self._zero_side(np.repeat(np.arange(len(tasks)), lens), a, j, vals, c, ok)
        sizes = (self.n - c).astype(np.int64)
        ends = np.cumsum(lens).tolist()
        return [sizes[e0:e1] for e0, e1 in zip([0] + ends, ends)]     # (np.split costs microseconds a piece)

    def _zero_side(self, owner: np.ndarray, a: np.ndarray, j: np.ndarray, vals: np.ndarray, c: np.ndarray,
                   ok: np.ndarray) -> None:
        """Toward zero (module docstring): group the non-counts of each task by value, smallest first, and probe
        one leaf of each group with +M's side zeroed; the count it gives is every member's (c updated)."""
        lead = vals[:, self.positions[self.leader]]
        ra, rj, zeros, members = [], [], [], []
        for r in np.unique(owner[~ok]):
            idx = np.flatnonzero(owner == r)
            side = list(j[idx[ok[idx]]])
            groups: dict[float, list[int]] = {}
            for k in idx[~ok[idx]]:
                groups.setdefault(float(lead[k]), []).append(int(k))
            for v in sorted(groups, key=abs):
                ks = groups[v]
                ra.append(a[ks[0]])
                rj.append(j[ks[0]])
                zeros.append(np.array(side, np.int64) if side else None)
                members.append(np.array(ks))
                side += list(j[ks])
        c2, ok2 = self._counts(self._run(np.array(ra), np.array(rj), zeros), np.array(ra), np.array(rj))
        if not ok2.all():
            k = members[int(np.flatnonzero(~ok2)[0])][0]
            raise _NotATree(f"a masking probe (+M at term {a[k]}, -M at term {j[k]}, units elsewhere) gave "
                            f"{vals[k].ravel()[0]!r}, not a count of units (a multiple of {self.m.u!r} up to "
                            f"{self.n - 2} units), with units of either sign and with +M's side zeroed: the kernel "
                            "does not add these terms as a tree of exact additions with M absorbing")
        for ks, x in zip(members, c2):
            c[ks] = x

    # ---- FPRev's recursion, breadth first -----------------------------------------------------------------
    def tree(self, G: np.ndarray) -> list[Any]:
        """The subtrees over leaves G (one tree when G is every leaf). A group whose leaves are a translate of
        another group's waits until that one is revealed, then is confirmed as its twin (reveal/twins.py)."""
        root = _Task([int(g) for g in G], None)
        prior = None
        if self.twins and not self._inner and self.lanes.lanes == 1 and len(root.G) >= 2 * DOUBLE_WINDOW and \
                root.G == list(range(self.n)):       # one probe per call (packed lanes: full calls as before)
            prior = self._double(root.G)
            if prior is not None and len(prior[1]) == len(root.G):
                return [prior[0]]
        pending: list[_Task] = [root]
        pioneers: dict[tuple, Any] = {}
        self._pioneers = pioneers
        waiting: dict[tuple, list[_Task]] = {}
        while pending or waiting:
            work = []
            for t in pending:
                if len(t.G) < 2:
                    continue
                key = twin_key(t.G) if t.clade and self.twins else None
                if t.fixed is not None:          # known from the prefix doubling: a pioneer for its twins
                    if key is not None:
                        pioneers.setdefault(key, t)
                    continue
                if key is not None and key in pioneers:
                    waiting.setdefault(key, []).append(t)
                    continue
                if key is not None:
                    pioneers[key] = t
                t.a = t.G[t.end]
                work.append(t)
            fixed = self.confirmed
            pending = self._confirm(pioneers, waiting)
            if not work and not pending and waiting and fixed == self.confirmed:   # none can progress (not expected)
                pending = [t for ts in waiting.values() for t in ts]
                for t in pending:
                    t.clade = False
                waiting.clear()
            answers = self.sizes(work) if work else []
            pending += [c for t, s in zip(work, answers) for c in self._expand(t, s)]
            if prior is not None and root.expanded:
                _reuse(root, prior[0])
                prior = None
        return _resolve(root)

    # ---- prefix doubling ----------------------------------------------------------------------------------
    def _lane_chain(self, a: int, p: int, last: int) -> list[int] | None:
        """[a, a + p, a + 2p, ...]: the leader's chain over every p-th leaf (a vector loop's lane) as far as the
        leader's answers say it goes on (size k + 1 at a + kp: these answers are the chain's certificate, and a
        chain's first links are a subtree), read in growing batches; None where it has fewer than 4 links."""
        known, k, batch = self._known, 0, 8
        members = list(range(a + p, last + 1, p))
        while k < len(members):
            hi = min(len(members), k + batch)
            if not self._leader_answers([j for j in members[k:hi] if j not in known]):
                return None
            while k < hi and known[members[k]] == k + 2:
                k += 1
            if k < hi:                 # the chain ends here
                break
            batch *= 2
        return [a] + members[:k] if k >= 4 else None

    def _double(self, G: list[int]) -> tuple[Any, list[int]] | None:
        """(tree, leaves) of the largest subtree holding G[0] found by doubling a prefix, or None.

        The leader's sizes over a window of the first leaves tell when a prefix of them is a complete subtree S
        (s of them meet the leader within s leaves: a path node holding exactly those); S is searched as usual
        (its answers already known). S may also be the leader's lane chain (:meth:`_lane_chain`). Then, x the
        leaf outside S with the smallest known answer s: where a block B (an earlier S, or S) has s - |S| leaves
        and B moved to start at x passes its certificate (reveal/twins.py), S and B's translate are the two
        children of the node of s leaves (each is a certified subtree, and the subtree of s leaves holding the
        leader and x holds both, so is their union): S grows to it. Where no block fits, more of the leader's
        answers are read first. Where S reaches every leaf, that is the tree: about n probes for the windows and
        certificates, half of a full scan from the leader plus its twins. Otherwise the search goes on as usual
        from the answers known."""
        start = self._first_block(G)
        if start is None:
            return None
        S, T, p = start
        return self._grow(G, S, T, p)

    def _leader_answers(self, js: list[int]) -> bool:
        """The root leader's answers at the leaves js into _known; False (nothing kept) where one is no count."""
        if not js:
            return True
        a = self._lead
        aa, jj = np.full(len(js), a, np.int64), np.array(js, np.int64)
        c, ok = self._counts(self._run(aa, jj), aa, jj)
        if not ok.all():
            return False
        self._known.update(zip(js, (self.n - c).astype(np.int64).tolist()))
        return True

    def _first_block(self, G: list[int]) -> tuple[list[int], Any, int | None] | None:
        """(leaves, tree, lane stride or None) of the first subtree holding the leader that :meth:`_double` grows:
        a complete prefix of a window (searched), or the leader's lane chain; None: the usual search."""
        a, n, known = G[0], len(G), self._known
        self._lead = a
        w, S, T, tried, p = DOUBLE_WINDOW, None, None, False, None
        while S is None:
            w = min(2 * w, n)
            if not self._leader_answers([j for j in G[1:w] if j not in known]) or self.lanes.sign != 1:
                known.clear()                    # other roundings: the usual search alone
                return None
            vals = sorted(known.values())
            best = max((v for k, v in enumerate(vals) if (k + 1 == len(vals) or vals[k + 1] != v) and k + 2 == v),
                       default=0)
            if best >= max(8, w // 4):
                S = [a] + sorted(j for j, v in known.items() if v <= best)
                break
            if not tried and _stride(known, a):
                p, tried = _stride(known, a), True
                S = self._lane_chain(a, p, G[-1])
                if S is not None:
                    T = a
                    for j in S[1:]:
                        T = (T, j)
                    break
            if w == n:
                return None
        if T is None:
            self._inner = True
            try:
                trees = self.tree(np.array(S))
            finally:
                self._inner = False
            if len(trees) != 1:
                return None
            T = trees[0]
        return S, T, p

    def _grow(self, G: list[int], S: list[int], T: Any, p: int | None) -> tuple[Any, list[int]]:
        """:meth:`_double`'s growth of the block (S, T) by certified translates of the blocks before it."""
        a, n, known = G[0], len(G), self._known
        inS = set(S)
        base = certificate(T)
        if not base:
            return T, S
        cT = np.array(base, np.int64).reshape(-1, 3)
        blocks = {len(S): (T, list(S), cT)}       # the certified subtrees of the leader's path, by size (with
        # their certificates: a grown S's is its parts' and one entry for the new node, not walked again)
        if p is None:
            p = _stride(known, a)
        lane = [j for j in range(a + p, G[-1] + 1, p) if j not in inS] if p else []
        heap = [(v, j) for j, v in known.items() if j not in inS]     # the answers outside S, smallest first
        heapq.heapify(heap)
        batch = 8
        while len(S) < n:
            size = len(S)
            while heap and heap[0][1] in inS:
                heapq.heappop(heap)
            v, x = heap[0] if heap else (0, -1)
            blk = blocks.get(v - size)
            if blk is None:    # the next node's size unknown or no block fits it: more of the leader's answers
                first = next((j for j in G if j not in inS), None)
                more = [first] if first is not None and first not in known else \
                    [j for j in lane if j not in known][:batch]
                if not more:
                    break
                batch *= 2
                if not self._leader_answers(more):
                    break
                for j in more:
                    heapq.heappush(heap, (known[j], j))
                continue
            TB, B, cB = blk              # x, the smallest leaf of the next node's size: B moved to start there
            d = x - min(B)
            moved = [u + d for u in B]
            if any(u > G[-1] or u < G[0] or u in inS for u in moved):
                break
            cert = cB + np.array([d, d, 0], np.int64)
            c, ok = self._counts(self._run(cert[:, 0], cert[:, 1]), cert[:, 0], cert[:, 1])
            if not (ok & (self.n - c == cert[:, 2])).all():
                break
            T = (T, translated(TB, d))
            cT = np.concatenate([cT, cert, np.array([[cT[-1, 0], cert[-1, 0], v]], np.int64)])
            for u in moved:
                known[u] = v
            S += moved
            inS.update(moved)
            blocks.setdefault(len(S), (T, list(S), cT))
        return T, S

    def _confirm(self, pioneers: dict, waiting: dict) -> list[_Task]:
        """Twins of revealed pioneers confirmed in one batch (their subtree fixed); those that fail, to search."""
        twins, cert, failed, at = [], [], [], 0
        for key in [k for k in waiting if _complete(pioneers[k])]:
            pio = pioneers[key]
            trees = _resolve(pio)
            base = certificate(trees[0]) if len(trees) == 1 else None
            c0 = np.array(base, np.int64).reshape(-1, 3) if base else None
            s0 = min(pio.G)
            for t in waiting.pop(key):       # equal keys: t.G is pio.G moved by d, and so are tree and certificate
                if c0 is None:
                    failed.append(t)
                    continue
                d = min(t.G) - s0
                twins.append((t, translated(trees[0], d), at, len(c0)))
                cert.append(c0 + np.array([d, d, 0], np.int64))
                at += len(c0)
        if cert:
            x, y, want = np.concatenate(cert).T
            c, ok = self._counts(self._run(x, y), x, y)
            good = ok & (self.n - c == want)
            for t, hyp, lo, k in twins:
                if good[lo:lo + k].all():
                    t.fixed = hyp
                    self.confirmed += 1
                else:
                    failed.append(t)
        for t in failed:
            t.clade = False
        return failed

    def _expand(self, t: _Task, s: np.ndarray) -> list[_Task]:
        """The groups along a's path from the sizes s (each checked against the tree it implies); their tasks.
        A group's leader is taken from the end its parent's was, unless the parent's path had one group only (the
        leader sat at the top: a chain read from its other end), then from the other end."""
        groups: dict[int, list[int]] = {}
        rest: list[int] = []
        top = t.top
        for j, x in zip([g for g in t.G if g != t.a], s.tolist()):
            if x == top:
                rest.append(j)
            else:
                groups.setdefault(x, []).append(j)
        held = 1
        for sk in sorted(groups):
            held += len(groups[sk])
            if held != sk or (top is not None and sk > top):
                raise _NotATree(f"the probes from term {t.a} imply a subtree of {sk} terms holding {held}: no "
                                "summation tree gives these answers")
        end = t.end if len(groups) > 1 else -1 - t.end
        t.parts = [_Task(groups[sk], sk, end, clade=True) for sk in sorted(groups)]
        if rest:
            t.rest = _Task(rest, top, t.end)
        t.expanded = True
        if self.twins:
            below = [t.a]
            for k, part in enumerate(t.parts):
                if k and len(part.G) == len(below) >= 4:   # a group as large as the leader's side: its twin?
                    self._pioneers.setdefault(twin_key(below), _Prefix(t, k, list(below)))
                below += part.G
        return t.parts + ([t.rest] if t.rest else [])


DOUBLE_WINDOW = 32        # the first window of the prefix doubling (leaves); the root needs at least twice that


class _Partial(RevealError):
    """Cached answers met a probe that is no count (the batch is probed again whole)."""


def _stride(known: dict[int, int], a: int) -> int | None:
    """p where the leader a's smallest answers are one leaf each, sizes 2, 3, ..., m (m >= 4) at a + p, a + 2p, ...:
    the start of a chain over every p-th leaf (a vector loop's lane)."""
    by: dict[int, list[int]] = {}
    for j, v in known.items():
        by.setdefault(v, []).append(j)
    m = 1
    while len(by.get(m + 1, ())) == 1:
        m += 1
    if m < 4:
        return None
    p = by[2][0] - a
    ok = p > 0 and all(by[k][0] == a + (k - 1) * p for k in range(2, m + 1))
    return p if ok else None


def _reuse(root: _Task, T: Any) -> None:
    """The root's groups that the prefix doubling already revealed (T's groups along the leader's path, bottom up,
    each over the same leaves) fixed, not searched again."""
    levels, node = [], T
    while isinstance(node, tuple):
        levels.append(node[1:])
        node = node[0]
    levels.reverse()
    for part, lv in zip(root.parts, levels):
        if len(lv) != 1 or sorted(_leaf_list(lv[0])) != sorted(part.G):
            break
        part.fixed = lv[0]


def _leaf_list(t: Any) -> list[int]:
    out, stack = [], [t]
    while stack:
        x = stack.pop()
        if isinstance(x, tuple):
            stack.extend(x)
        else:
            out.append(x)
    return out


def _complete(t: Any) -> bool:
    """Is every subtree of the task (or prefix) revealed (searched or confirmed)?"""
    if isinstance(t, _Prefix):
        t.done = t.done or all(_complete(c) for c in t.owner.parts[:t.k])
    elif not t.done:
        t.done = t.fixed is not None or len(t.G) < 2 or (t.expanded and all(_complete(c) for c in t.parts) and (
            t.rest is None or _complete(t.rest)))
    return t.done


def _resolve(t: Any) -> list[Any]:
    """A task's (or prefix's) subtrees as nested tuples (leaves are term ints)."""
    if isinstance(t, _Prefix):
        node: Any = t.owner.a
        for part in t.owner.parts[:t.k]:
            node = (node, *_resolve(part))
        return [node]
    if t.fixed is not None:
        return [t.fixed]
    if len(t.G) == 1:
        return [t.G[0]]
    node = t.a
    for part in t.parts:            # (a leaf or a fixed subtree read here: no call for them)
        if type(part) is _Task and part.fixed is not None:
            node = (node, part.fixed)
        elif type(part) is _Task and len(part.G) == 1:
            node = (node, part.G[0])
        else:
            node = (node, *_resolve(part))
    return [node] + (_resolve(t.rest) if t.rest else [])


class _NotATree(RevealError):
    """The masking answers are not those of a summation tree."""


def search_tree(p: Prober, mask: Masking, packed: bool = False, twins: bool = True) -> SearchResult:
    """The trees of every output position: one search per distinct tree among them.

    ``packed``: one probe per lane (a sum's rows; a matmul's rows of A or columns of B), several probes per call,
    on the assumption that every lane has the same trees (the caller verifies it on random data and searches again
    without ``packed`` if not); the positions inside a lane (a matmul's columns or rows) may differ, each distinct
    tree searched again with its own leader. Falls back to one probe per call where no packed layout fits."""
    c0, probes = p.calls, 0
    modes = packed_modes(p, mask.u, mask.M) if packed else []
    options = [lane_classes(p, mask.u, mask.M, mask.sign, m) for m in modes]    # reveal/classes.py
    probes += sum(o.probes for o in options)
    for cls in sorted(options, key=lambda o: o.cost):
        if len(cls.classes[0]) < 2:           # no two lanes alike: packing gains nothing
            continue
        found, k = [], 0
        try:
            for which in cls.classes:      # trees of earlier classes confirmed first, the rest searched
                f, todo, kk = _confirm_known(p, mask, cls.mode, which, [t for t, _ in found])
                f2, kk2 = _search_all(p, mask, cls.mode, twins, which, todo)
                f, k = f + f2, k + kk + kk2
                found += [(t, np.sort(np.concatenate([_outputs(p, cls.mode, int(q), which) for q in qs])))
                          for t, qs in f]
        except (_NotATree, RecursionError):
            probes += k + mask.probes
            continue
        return SearchResult(_merged(found), cls.mode, p.calls - c0, probes + k,
                            [c.tolist() for c in cls.classes])
    found, k = _search_all(p, mask, "all", twins)
    return SearchResult(found, "all", p.calls - c0, probes + k)


def _confirm_known(p: Prober, mask: Masking, mode: str, which: np.ndarray, trees: list) -> tuple:
    """([(tree, lane positions)], lane positions left, probes): the known binary trees' certificates
    (reveal/twins.py: one probe per node; a pair shared by several trees probed once) run in the lanes ``which``;
    the positions that answer every probe of a tree as it says hold that tree (certified, not assumed)."""
    lanes = Lanes(p, mask.u, mask.M, mask.sign, mode, which)
    todo, out = np.arange(lanes.per), []
    certs = [(t, c) for t in dict.fromkeys(trees) for c in [certificate(t)] if c]
    if not certs:
        return out, todo, 0
    pairs: dict[tuple[int, int], int] = {}      # the certificates' probes, each pair once (trees share most nodes)
    for _, c in certs:
        for x, y, _ in c:
            pairs.setdefault((x, y), len(pairs))
    xy = np.array(list(pairs), np.int64)
    counts = p.n - lanes.run(xy[:, 0], xy[:, 1]) / (lanes.sign * mask.u)     # (probes, lane positions)
    left = np.ones(lanes.per, bool)
    for t, c in certs:
        rows = np.array([pairs[x, y] for x, y, _ in c], np.int64)
        want = np.array([w for _, _, w in c], np.float64)
        ok = left & (counts[rows] == want[:, None]).all(axis=0)
        if ok.any():
            out.append((t, np.flatnonzero(ok)))
            left &= ~ok
    return out, np.flatnonzero(left), len(pairs)


def _merged(found: list) -> list:
    """Equal trees found in several lane classes as one (tree, positions)."""
    out: dict[Any, list] = {}
    for t, pos in found:
        out.setdefault(t, []).append(pos)
    return [(t, np.sort(np.concatenate(ps))) for t, ps in out.items()]


def _outputs(p: Prober, mode: str, q: int, which: np.ndarray) -> np.ndarray:
    """The output positions of lane position q in the lanes ``which``: column q of those rows (rows of A), row q
    of those columns (columns of B), those rows of a sum (its lanes hold one position each)."""
    if p.op == "sum":
        return np.asarray(which, np.int64)
    N = p.out_shape[1]
    return q + N * which if mode == "rows" else q * N + which


def _search_all(p: Prober, mask: Masking, mode: str, twins: bool = True,
                which: np.ndarray | None = None, todo: np.ndarray | None = None) -> tuple[list, int]:
    """([(tree, lane positions it holds for)], probes): the leader's tree, then again for every diverged one;
    probes packed in the lanes ``which`` (every lane of the mode where None), at the lane positions ``todo``
    (every one where None)."""
    lanes = Lanes(p, mask.u, mask.M, mask.sign, mode, which)
    todo = np.arange(lanes.per) if todo is None else todo
    found = []
    mask.probes = 0
    while todo.size:
        s = _Search(p, mask, lanes, todo, 0, twins)
        try:
            trees = s.tree(np.arange(p.n))
        except RecursionError:
            raise RevealError("the tree is too deep for the recursive search (a chain the probes peel one leaf "
                              "at a time)") from None
        finally:
            mask.probes += s.probes
        lanes = s.lanes
        found.append((_one(trees), todo[~s.diverged]))
        todo = todo[s.diverged]
    return found, mask.probes


def _one(trees: list) -> Any:
    if len(trees) != 1:
        raise _NotATree("the probes give a forest, not one tree")
    return trees[0]


def to_nodes(tree: Any, n: int) -> list[tuple[int, ...]]:
    """A nested tree (leaves are term ints, nodes tuples of children) as TreeOrder nodes (post-order)."""
    nodes: list[tuple[int, ...]] = []

    append = nodes.append

    def walk(t: Any) -> int:     # (leaves read in the parent: one call per node, not per ref; binary nodes inline)
        if type(t) is not tuple:
            return int(t)
        if len(t) == 2:
            a, b = t
            a = a if type(a) is int else walk(a) if type(a) is tuple else int(a)
            b = b if type(b) is int else walk(b) if type(b) is tuple else int(b)
            append((a, b))
        else:
            append(tuple([(c if type(c) is int else int(c)) if type(c) is not tuple else walk(c) for c in t]))
        return n + len(nodes) - 1
    try:
        walk(tree)
        return nodes
    except RecursionError:                        # a deep chain: the explicit stack
        nodes = []
    stack: list[tuple[Any, bool]] = [(tree, False)]
    done: list[int] = []
    while stack:
        t, expanded = stack.pop()
        if not isinstance(t, tuple):
            done.append(int(t))
            continue
        if expanded:
            k = len(t)
            ch = tuple(done[len(done) - k:])
            del done[len(done) - k:]
            nodes.append(ch)
            done.append(n + len(nodes) - 1)
            continue
        stack.append((t, True))
        for c in reversed(t):
            stack.append((c, False))
    return nodes


NotATree = _NotATree
