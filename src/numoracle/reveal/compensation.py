"""Compensated levels: additions that carry their rounding error into the next one (Kahan), found by probing.

The masking search cannot see a Kahan sum: where +M absorbs the units the error term takes them up, but -M
absorbs the error term in turn (``y = -M - c`` rounds to -M), so a compensated chain answers the masking probes as a
plain chain does, and only the verification on random data tells it apart. So when a revealed sum tree *differs*,
every node v whose parent w continues it (v its heavier or equal child) gets a *carry probe*, with p the precision
of w's format and E a scale as the node probes use: E under v's accumulator child (the heavier; both when equal),
E 2^-(p+1) (a quarter ulp) under v's other child, E 2^-p (half an ulp) under w's other child and -E under w's
sibling (none when w is the root: the output is then read against E), zeros elsewhere. A tree of roundings drops
both small terms (1 + 1/4 ulp rounds to 1, 1 + 1/2 ulp ties to 1); a Kahan step keeps the quarter in its error
term, adds it to the half at w, and 3/4 ulp rounds up: the output is E 2^(1-p), not 0 (where only w carries its
own error into its parent, the half comes back instead: E 2^-p, not counted for v).
The probe's output is compared with the revealed tree's own simulation on the same terms (which must give 0). A node
whose output is that ulp is checked twice more: the probe negated must give -ulp (a compensated sum rounding to
nearest is odd; a kernel that branches on signs is not), the probe without the quarter must not give the ulp
(nothing to carry), and v's own precision (the node probe's) must be at most p + 1 (a Kahan node reads one bit
wider; a node of a wider format feeding w would give the same ulp without any error term). The nodes that pass,
linked v -> w, are the compensated chains, and the models of :class:`~numoracle.orders.CompensatedTree` (Kahan, with
or without folding the error term in at the end, the error term in the chain's format or FP64) are fitted on random
data and verified as any order is; where none reproduces fn, the report names the chains as showing the signature,
not as Kahan sums. Costs one call per candidate node (two where its children are equal) and two per node that shows
the signature (and a node probe), and a batched simulation of the probes (budgeted: beyond 2^25 terms simulated,
the nodes over the most terms first).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..core.formats.format import FP64, Format
from ..models.engine.simulation import simulate
from ..models.orders.basic import BlockFMA
from ..models.orders.compensated import CompensatedTree
from ..models.orders.tree import TreeOrder
from .nodes import NodeProbe
from .probe import Prober, RevealError

__all__ = ["Carry", "carry_probes", "compensated_candidates", "describe", "recovers_units"]

_BATCH = 256      # probes simulated per call of simulate
_ELEMENTS = 1 << 25   # probes x terms simulated at most (the nodes over the most terms first beyond)


@dataclass
class Carry:
    """What the carry probes found: the compensated chains (node indices, bottom first, with the first node's
    children in Kahan's order), the tree with those children reordered, and the calls and probes spent."""

    chains: list
    tree: TreeOrder
    probes: int
    calls: int
    flagged: int
    other: int = 0          # probes whose output differs from the tree's otherwise (not a carried quarter ulp)
    candidates: int = 0     # probes the tree offers (more than ``probes`` where capped: the largest subtrees first)


def _precision(t: TreeOrder, i: int) -> int | None:
    st = t.step_of(i)
    fmt = st[0] if isinstance(st, tuple) and st[0] is not None else t.acc
    return fmt.precision if isinstance(fmt, Format) else None


def _cases(tree: TreeOrder, probe: NodeProbe, size: np.ndarray, E: float) -> tuple[list, list, list, list]:
    """The carry probes the tree offers: (node, accumulator child, input child), each probe's non-zero terms, the
    precision of w's format, and the tree's output on it (0, or E where w is the root)."""
    n, nodes = tree.n, tree.nodes
    cases: list[tuple[int, int, int]] = []          # (node i, accumulator child, input child)
    spots: list[list[tuple[int, float]]] = []       # each probe's non-zero terms
    precs: list[int] = []
    base: list[float] = []
    for i, ch in enumerate(nodes):
        w = int(probe.parent[n + i])
        if w < 0 or len(ch) != 2 or isinstance(tree.step_of(i), BlockFMA):
            continue
        wch = nodes[w - n]
        if len(wch) != 2 or isinstance(tree.step_of(w - n), BlockFMA):
            continue
        other = next(c for c in wch if c != n + i)
        if size[other] > size[n + i]:               # v must be the heavier (or equal) child: the chain goes on
            continue
        prec = _precision(tree, w - n)
        if prec is None or prec > 60:
            continue
        q = int(probe.parent[w])
        sib = None
        if q >= 0:
            qch = nodes[q - n]
            if len(qch) != 2 or isinstance(tree.step_of(q - n), BlockFMA):
                continue
            sib = next(c for c in qch if c != w)
        a, b = ch
        orient = [(a, b), (b, a)] if size[a] == size[b] else [(a, b) if size[a] > size[b] else (b, a)]
        for acc, inp in orient:
            sp = [(int(probe.first[acc]), E), (int(probe.first[inp]), E * 2.0 ** -(prec + 1)),
                  (int(probe.first[other]), E * 2.0 ** -prec)]
            if sib is not None:
                sp.append((int(probe.first[sib]), -E))
            cases.append((i, int(acc), int(inp)))
            spots.append(sp)
            precs.append(prec)
            base.append(0.0 if sib is not None else E)      # the tree's output: 0, or E at the root
    return cases, spots, precs, base


def carry_probes(p: Prober, tree: TreeOrder, pos: int, top: int) -> Carry:
    """The carry probe (module docstring) at every candidate node; the chains of the nodes where the kernel differs
    from the tree's simulation."""
    n, nodes = tree.n, tree.nodes
    probe = NodeProbe(p, list(nodes), pos, top)
    E = 2.0 ** probe._scale()
    size = np.ones(n + len(nodes), np.int64)
    for i, ch in enumerate(nodes):
        size[n + i] = sum(int(size[c]) for c in ch)
    cases, spots, precs, base = _cases(tree, probe, size, E)
    candidates = len(cases)
    cap = max(_BATCH, _ELEMENTS // n)
    if candidates > cap:     # the nodes over the most terms first (compensated levels sit near the top)
        keep = sorted(np.argsort(-size[n + np.array([c[0] for c in cases])], kind="stable")[:cap].tolist())
        cases, spots = [cases[k] for k in keep], [spots[k] for k in keep]
        precs, base = [precs[k] for k in keep], [base[k] for k in keep]

    def row(k: int, sign: float = 1.0, drop: int = -1) -> np.ndarray:
        t = np.zeros(n)
        for j, (at, v) in enumerate(spots[k]):
            if j != drop:
                t[at] = sign * v
        return t

    c0 = p.calls
    got = np.array([p.terms(row(k), pos)[pos] for k in range(len(cases))])
    calls = p.calls - c0
    want = np.empty(len(cases))
    for lo in range(0, len(cases), _BATCH):
        x = p.native(np.stack([row(k) for k in range(lo, min(lo + _BATCH, len(cases)))]), "carry probe")
        want[lo:lo + _BATCH] = np.asarray(simulate("sum", x, order=tree), np.float64).reshape(-1)
    b = np.array(base)
    ulp = np.array([E * 2.0 ** (1 - pr) for pr in precs])
    carried = (got == b + ulp) & (want == b)
    other = int(((got != want) & ~carried & ~(np.isnan(got) & np.isnan(want))).sum())
    # controls at the nodes that show the signature: the probe negated (a compensated sum rounding to nearest
    # answers -ulp) and without the quarter (nothing to carry: no ulp)
    c1 = p.calls
    for k in np.flatnonzero(carried).tolist():
        neg = float(p.terms(row(k, -1.0), pos)[pos])
        zero = float(p.terms(row(k, drop=1), pos)[pos])
        if neg != -(b[k] + ulp[k]) or zero == b[k] + ulp[k] or \
                probe.precision(n + cases[k][0], (precs[k] + 1, precs[k])) > precs[k] + 1:
            carried[k] = False      # not odd, carried without a quarter, or v itself wider than w (not a carry)
            other += 1
    calls += p.calls - c1
    first: dict[int, tuple[int, int]] = {}
    targets: set[int] = set()
    for (i, acc, inp), d in zip(cases, carried.tolist()):
        w = int(probe.parent[n + i])
        if d and i not in first and w not in targets:
            first[i] = (acc, inp)
            targets.add(w)
    chains, t2 = _chains(tree, probe, first)
    return Carry(chains, t2, len(cases), calls, len(first), other, candidates)


def _chains(tree: TreeOrder, probe: NodeProbe, flagged: dict[int, tuple[int, int]]) -> tuple[list, TreeOrder]:
    """Flagged nodes v linked to their parents w into chains (bottom first); each chain's first node's children
    put in Kahan's order (accumulator first). A chain's nodes all take one step: the first of theirs with a known
    format (the node probes read a compensated node as one bit wider: its error term restores the probed bit)."""
    n = tree.n
    nxt = {i: int(probe.parent[n + i]) - n for i in flagged}
    starts = [i for i in flagged if not any(nxt[j] == i for j in flagged)]
    nodes = list(tree.nodes)
    kinds = list(tree.kinds or [0] * len(nodes))
    chains = []
    for s in sorted(starts):
        c = [s]
        while c[-1] in flagged:
            c.append(nxt[c[-1]])
        known = [kinds[i] for i in c if isinstance(tree.steps[kinds[i]], tuple) and tree.steps[kinds[i]][0]]
        k = known[0] if known else kinds[c[0]]
        for i in c:
            kinds[i] = k
        acc, inp = flagged[s]
        nodes[s] = (acc, inp)
        chains.append(tuple(c))
    return chains, replace(tree, nodes=tuple(nodes), kinds=tuple(kinds))


def compensated_candidates(carry: Carry) -> list[CompensatedTree]:
    """The compensated models of the chains found: Kahan without and with the error term folded in at the end,
    the error term in the chain's format or in FP64 (a wider error term)."""
    if not carry.chains:
        return []
    return [CompensatedTree(carry.tree, tuple(carry.chains), "kahan", f, e) for e in (None, FP64)
            for f in (False, True)]


def describe(carry: Carry) -> str:
    """The chains in words: how many, of how many additions, over inputs of how many terms."""
    t = carry.tree
    n = t.n
    size = np.ones(n + len(t.nodes), np.int64)
    for i, ch in enumerate(t.nodes):
        size[n + i] = sum(int(size[c]) for c in ch)
    shapes: dict[tuple, int] = {}
    for c in carry.chains:
        ins = [int(size[t.nodes[c[0]][0]]), int(size[t.nodes[c[0]][1]])]
        ins += [int(size[next(r for r in t.nodes[c[k]] if r != n + c[k - 1])]) for k in range(1, len(c))]
        key = tuple(sorted(set(ins)))
        shapes[(len(ins), key)] = shapes.get((len(ins), key), 0) + 1
    parts = [f"{k} chain{'s' if k > 1 else ''} of {m} inputs (subtrees of {', '.join(map(str, s))} terms)"
             for (m, s), k in sorted(shapes.items())]
    return "; ".join(parts)


def recovers_units(p: Prober, mask: Any) -> str | None:
    """For a kernel the masking search calls *not a tree*: do the probes count every unit wherever +M and -M sit
    (pairs (0, 1), (0, n-1), (1, n-1): no tree makes all three meet in a subtree of two leaves)? Then nothing M
    absorbs is lost: the kernel carries it to the end. One more probe tells exact accumulation from an error term
    that itself rounds: 1, 2^-p (half an ulp of the output) and 2^-2p at three terms; the exact sum rounds up to
    1 + 2^(1-p), a compensated sum whose error term is of the output's precision (Neumaier's: c = fl(2^-p + 2^-2p) =
    2^-p) ties back to 1. The words for the report's note, or None where the signature is not there."""
    n, u, M = p.n, mask.u, mask.M
    if n < 3 or p.rows or p.op != "sum":
        return None
    for i, j in ((0, 1), (0, n - 1), (1, n - 1)):
        t = np.full(n, u)
        t[i], t[j] = M, -M
        try:
            out = p.terms(t)
        except RevealError:
            return None
        if not (out == (n - 2) * u).all():
            return None
    pairs = "+M and -M at terms (0, 1), (0, n-1) and (1, n-1)"
    g = p.out_fmt
    what = "exact accumulation or a compensated sum that adds its error term at the end"
    if isinstance(g, Format) and n >= 3:
        t = np.zeros(n)
        t[0], t[1], t[2] = 1.0, 2.0 ** -g.precision, 2.0 ** (-2 * g.precision)
        try:
            back: float | None = float(p.terms(t)[0])
        except RevealError:
            back = None
        if back == 1 + 2.0 ** (1 - g.precision):
            what = ("exact accumulation (1 + 2^-p + 2^-2p came back correctly rounded, up: as math.fsum or a long "
                    "accumulator gives it)")
        elif back == 1.0:
            what = ("a compensated sum that adds a rounded error term at the end (1 + 2^-p + 2^-2p came back as 1: "
                    "the error term lost 2^-2p; Neumaier / Kahan-Babuska summation, or pairs of error-free "
                    "transformations)")
    return (f"every masking probe ({pairs}) counts all {n - 2} units: no addition loses what +-M absorb, so the kernel "
            f"carries the absorbed part to its result: {what}. Its order is not revealed (the masking probes need "
            "additions that lose the units)")


def discriminate(p: Prober, cands: list, rng: np.random.Generator, tries: int = 8) -> tuple[list, int, int]:
    """Candidates that fit the same data told apart: random inputs (normal and mixed magnitudes) are simulated by
    every candidate, those where they disagree (up to ``tries`` calls) are given to fn, and the candidates that
    match fn on all of them come first. Returns (candidates reordered, sums simulated, sums where they disagreed)."""
    R = max(p.rows, 1)                                       # outputs per call (a sum over rows: R)
    draws = int(max(64, min(1024, (1 << 21) // max(p.n, 1)))) // R + 1
    X = np.stack([p.inputs_of(rng, ("normal", "mixed")[k % 2])[0] for k in range(draws)])
    flat = X.reshape(-1, p.n)
    sims = np.stack([np.asarray(simulate("sum", flat, order=c), np.float64).reshape(-1) for c in cands])
    split = np.flatnonzero((sims != sims[:1]).any(axis=0))
    if not split.size:
        return cands, flat.shape[0], 0
    calls = list(dict.fromkeys((split // R).tolist()))[:tries]
    want = np.concatenate([p.call(X[k]) for k in calls])
    cols = np.concatenate([k * R + np.arange(R) for k in calls])
    bad = (sims[:, cols] != want[None, :]).sum(axis=1)
    order = np.argsort(bad, kind="stable")
    return [cands[k] for k in order], flat.shape[0], int(split.size)
