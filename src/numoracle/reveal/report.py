"""reveal_order: the exact order of a black-box sum / dot / matmul kernel, found by probing it; RevealReport.

Steps (docs/reveal.md): two calls on ones (is fn deterministic, does it add?); the masking search for the tree
of every output position (reveal/tree.py); the nodes' formats, roundings and fused-node parameters
(reveal/nodes.py); then verification: the order is simulated on fresh random data of several kinds and
compared bit for bit with fn's outputs.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.args import check_bool, check_choice, check_int, check_number
from ..core.errors import ArgumentTypeError
from ..core.formats.format import FP32, Format
from ..models.orders.basic import BlockFMA, Order
from ..models.orders.compensated import CompensatedTree
from ..models.orders.tree import PerPosition, TreeOrder
from .classes import FINGERPRINTS
from .compensation import carry_probes, compensated_candidates, describe, discriminate, recovers_units
from .nodes import NodeProbe, fused_candidates, node_steps, root_format, with_step
from .probe import BudgetExhausted, Prober, RevealError, input_format
from .replay import replay
from .tree import Masking, NotATree, search_tree, to_nodes

__all__ = ["reveal_order", "RevealReport", "KINDS"]

KINDS = ("normal", "positive", "mixed", "cancelling")


@dataclass
class RevealReport:
    """What :func:`reveal_order` found. ``verified`` is True when ``order`` reproduced fn bit for bit on every
    random input of the verification (``mismatches``): a check on a sample of inputs, not a proof."""

    op: str
    n: int
    shape: tuple | None
    dtype: str
    order: Order | None
    calls: int
    seconds: float
    verdict: str                   # "reproduced", "differs", "not deterministic", "not a tree", "not verified"
    mismatches: dict = field(default_factory=dict)   # kind -> (outputs that differ, outputs compared)
    tree_calls: int = 0
    node_calls: int = 0
    verify_calls: int = 0
    trees: int = 0                 # distinct trees among the output positions
    out_format: str | None = None
    notes: list = field(default_factory=list)
    probes_per_call: float = 1.0   # masking probes each call of the tree search carried (packed rows), on average
    carry_calls: int = 0           # calls of the carry probes (reveal/compensation.py), made when a tree differs
    lane_classes: tuple = ()       # packed probes: the lanes (rows / columns) grouped by tree (reveal/classes.py)

    @property
    def verified(self) -> bool:
        """The verdict is "reproduced": ``order`` gave fn's bits on every random input of the verification."""
        return self.verdict == "reproduced"

    @property
    def fprev_basic_calls(self) -> int:
        """Calls of FPRev's basic form (one probe per pair of terms): n(n-1)/2."""
        return self.n * (self.n - 1) // 2

    def __str__(self) -> str:
        what = (f"matmul {self.shape}" if self.op == "matmul" else f"sum of {self.shape[0]} rows, n={self.n}"
                if self.shape else f"{self.op} n={self.n}")
        lines = [f"RevealReport  {what} {self.dtype} -> {self.out_format}: {self.verdict}",
                 f"  calls: {self.calls} (tree search {self.tree_calls}, nodes {self.node_calls}, verification "
                 f"{self.verify_calls}{f', carry probes {self.carry_calls}' if self.carry_calls else ''}, the rest: "
                 "two calls on ones and the masking's calibration); "
                 f"{self.probes_per_call:.1f} probes per tree-search call; FPRev basic: {self.fprev_basic_calls}; "
                 f"{self.seconds:.2f} s"]
        if self.order is not None:
            o = self.order
            if isinstance(o, TreeOrder):
                lines.append(f"  order: TreeOrder over {o.n} terms, depth {o.depth}, steps {o.steps}, "
                             f"out {o.out.name if o.out else None}")
                if o.n <= 64:
                    lines.append(f"  tree: {o.text()}")
            elif isinstance(o, CompensatedTree):
                lines.append(f"  order: CompensatedTree over {o.tree.n} terms, {o.method}"
                             f"{' (flushed)' if o.flush else ''}{f' (error term {o.err.name})' if o.err else ''}, "
                             f"{len(o.chains)} compensated chains of "
                             f"{sorted({len(c) for c in o.chains})} nodes; tree depth {o.tree.depth}")
            else:
                lines.append(f"  order: {type(o).__name__} with {len(getattr(o, 'orders', (o,)))} distinct trees")
        for k, (bad, tot) in self.mismatches.items():
            lines.append(f"  {k:<10} {tot - bad}/{tot} outputs bit for bit on random inputs")
        lines += [f"  note: {x}" for x in self.notes]
        return "\n".join(lines)


def _check_args(op: Any, n: Any, shape: Any, rows: Any) -> tuple[int, tuple | None]:
    op = check_choice(op, "op", ("sum", "dot", "matmul"))
    if op == "matmul":
        if not isinstance(shape, (tuple, list, np.ndarray)) or len(shape) != 3:
            raise ValueError(f"matmul needs shape=(M, K, N): fn(A[M, K], B[K, N]) -> [M, N], got {shape!r:.40}")
        shape = tuple(check_int(s, "shape", 1, 1 << 24) for s in shape)
        if shape[1] < 2:
            raise ValueError(f"matmul shape {shape}: K = {shape[1]} gives each output from one product, with no "
                             "summation order to reveal; give K >= 2")
        if rows is not None:
            raise ValueError("rows= is for op 'sum' (fn(x[rows, n]) -> [rows]); a matmul's rows are in shape")
        return shape[1], shape
    k = check_int(n, f"{op} needs n, the number of terms; n", 2, 1 << 24)
    if rows is None:
        return k, None
    if op != "sum":
        raise ValueError("rows= is for op 'sum' (fn(x[rows, n]) -> [rows])")
    return k, (check_int(rows, "rows", 1, 1 << 24), k)


def _check_budgets(fn: Any, max_calls: Any, max_seconds: Any, verify: Any, kinds: Any, draws: Any,
                   seed: Any) -> tuple:
    if not callable(fn):
        raise ArgumentTypeError(f"fn must be a callable (the kernel), got {type(fn).__name__} {fn!r:.40}")
    if not isinstance(kinds, (tuple, list)) or not kinds or not all(isinstance(k, str) and k in KINDS
                                                                      for k in kinds):
        raise ValueError(f"kinds must be a non-empty tuple of {', '.join(KINDS)}, got {type(kinds).__name__} "
                         f"{kinds!r:.40}")
    return (check_int(max_calls, "max_calls", 1), check_number(max_seconds, "max_seconds", 0.0, 1e9),
            check_bool(verify, "verify"), tuple(kinds), None if draws is None else check_int(draws, "draws", 1, 1000),
            check_int(seed, "seed", 0))


def _run(p: Prober, inputs: tuple) -> np.ndarray:
    return p.call(*inputs)


FUSED_PROBES = 8      # fused nodes whose window _tree_order probes


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))


class _Data:
    """Random inputs and fn's outputs on them, drawn once (when first needed) and reused to score candidates."""

    def __init__(self, p: Prober, rng: np.random.Generator, kinds: tuple, draws: int):
        self._args = (p, rng, kinds, draws)
        self._items: list | None = None

    @property
    def items(self) -> list:
        if self._items is None:
            p, rng, kinds, draws = self._args
            self._items = []
            for kind in kinds:
                for _ in range(draws):
                    ins = p.inputs_of(rng, kind)
                    self._items.append((kind, ins, _run(p, ins)))
        return self._items

    def score(self, p: Prober, order: Order, positions: np.ndarray) -> int:
        """Outputs at ``positions`` where the order differs from fn (only those positions simulated)."""
        try:
            gots = replay(p.op, [ins for _, ins, _ in self.items], order, p.fmt, positions)
        except (ValueError, OverflowError):
            return 1 << 30
        return sum(int((~_same(got[positions], want[positions])).sum()) for got, (_, _, want) in zip(gots, self.items))


def _tree_order(p: Prober, nested: Any, positions: np.ndarray, data: _Data, notes: list, top: int) -> TreeOrder:
    """The TreeOrder of one revealed tree: node formats and roundings probed, fused nodes and leaves fitted."""
    nodes = to_nodes(nested, p.n)
    fused = [i for i, ch in enumerate(nodes) if len(ch) > 2]
    probe = NodeProbe(p, nodes, int(positions[0]), top, _spots(p, positions))
    steps, kinds, ns = node_steps(probe)
    notes += ns
    fmts = [s[0] for s in steps if s[0] is not None]
    acc = max(fmts, key=lambda f: f.precision) if fmts else None
    g = p.out_fmt
    if acc is None or (fused and acc.precision > 24):
        acc = g if isinstance(g, Format) and p.fmt.precision <= g.precision <= 24 else FP32
    out = g if isinstance(g, Format) and g.precision < acc.precision else None
    if out is None and not fused:
        rf = root_format(probe, (acc.precision,))
        out = rf if rf is not None and rf.precision < acc.precision else None
    placeholder = [BlockFMA(max(len(nodes[i]) for i in fused), 10)] if fused else []
    for i in fused:
        kinds[i] = len(steps)
    if not fused and p.op != "sum":     # (built once, by _leaves)
        return _leaves(p, _Draft(p.n, tuple(nodes), tuple(kinds), tuple(steps), acc, None, out), probe, notes)
    base = TreeOrder(p.n, tuple(nodes), tuple(kinds), tuple(steps) + tuple(placeholder), acc=acc, out=out)
    if fused:
        # the window probed at up to FUSED_PROBES fused nodes spread over the tree (first and last included)
        at = sorted({fused[int(round(j))] for j in np.linspace(0, len(fused) - 1, min(FUSED_PROBES, len(fused)))})
        windows = [probe.frac_bits(p.n + i) for i in at]
        f = max(set(windows), key=windows.count)
        if len(set(windows)) > 1:
            notes.append(f"fused nodes: windows of {sorted(set(windows))} fraction bits at the {len(at)} nodes "
                         f"probed; modelled with the commonest ({f}), which is not every node's arithmetic")
        nt = max(sum(c < p.n for c in nodes[i]) for i in fused)
        cands = [with_step(base, c) for c in fused_candidates(f, nt, None)]
        scores = [data.score(p, c, positions) for c in cands]
        best = int(np.argmin(scores))
        base = cands[best]
        fit = ("reproduces every random output" if scores[best] == 0 else
               f"the closest, still off on {scores[best]} random outputs")
        notes.append(f"fused nodes: window of {f} fraction bits probed at {len(at)} of {len(fused)} nodes; "
                     f"{base.steps[-1]} fitted on random data ({len(cands)} candidates): {fit}")
    if p.op != "sum":
        base = _leaves(p, base, probe, notes)
    return base


def _spots(p: Prober, positions: np.ndarray) -> list[int]:
    """A matmul's positions among ``positions`` in distinct rows and distinct columns (greedy): node probes at
    them are independent, one call carries them all (Prober.factors_at)."""
    if p.op != "matmul":
        return [int(positions[0])]
    N = p.out_shape[1]
    rows, cols, out = set(), set(), []
    for q in positions.tolist():
        r, c = divmod(int(q), N)
        if r not in rows and c not in cols:
            rows.add(r)
            cols.add(c)
            out.append(int(q))
    return out


def _order_of(p: Prober, found: list, data: _Data, notes: list, top: int) -> Order:
    """The order of the searched trees: one TreeOrder, or a PerPosition map of them."""
    orders = [_tree_order(p, tree, pos, data, notes, top) for tree, pos in found]
    if len(orders) == 1:
        return orders[0]
    index = np.zeros(int(np.prod(p.out_shape)), np.int64)
    for j, (_, pos) in enumerate(found):
        index[pos] = j
    return PerPosition(tuple(orders), tuple(index.tolist()), p.out_shape)


@dataclass(frozen=True)
class _Draft:
    """A TreeOrder's fields before it is built (its checks run once, on the final tree)."""

    n: int
    nodes: tuple
    kinds: tuple
    steps: tuple
    acc: Any
    leaf: Any
    out: Any

    def order(self, **changes: Any) -> TreeOrder:
        f = {**self.__dict__, **changes}
        return TreeOrder(f["n"], f["nodes"], f["kinds"], f["steps"], acc=f["acc"], leaf=f["leaf"], out=f["out"])


def _leaves(p: Prober, t: TreeOrder | _Draft, probe: NodeProbe, notes: list) -> TreeOrder:
    """Products wider than the accumulator: each term of a two-child node probed for entering rounded (a rounding
    node over it, in its node's step) or exact (an FMA); several per call in trees that round to nearest."""
    from dataclasses import replace

    pin = p.fmt.precision
    kinds = list(t.kinds or [0] * len(t.nodes))
    par = probe.parent.tolist()
    cands = [k for k in range(t.n) if len(t.nodes[par[k] - t.n]) == 2]
    steps2 = [st for st in t.steps if isinstance(st, tuple)]
    fmts = [st[0] for st in steps2 if isinstance(st[0], Format)] + ([t.out] if isinstance(t.out, Format) else [])
    if steps2 and all(st[1] == "rne" for st in steps2) and fmts:   # several products per call
        found = probe.leaves_rounded(cands, pin, min(f.precision for f in fmts))
    else:
        found = {k: probe.leaf_rounded(k, pin) for k in cands}
    rounded = [k for k in cands if found[k]]
    if not rounded:
        notes.append("terms: every product enters its addition exact (FMA)")
        return t.order() if isinstance(t, _Draft) else t
    m = len(rounded)
    ref = np.arange(t.n + len(t.nodes), dtype=np.int64)       # every ref's new number: nodes move up by m,
    ref[t.n:] += m
    ref[rounded] = t.n + np.arange(m)                            # a rounded term is read through its rounding node
    lens = list(map(len, t.nodes))
    flat = ref[np.fromiter(itertools.chain.from_iterable(t.nodes), np.int64, sum(lens))].tolist()
    it = iter(flat)
    nodes = [(k,) for k in rounded] + [(next(it), next(it)) if k == 2 else tuple(itertools.islice(it, k))
                                       for k in lens]
    step = (p.fmt, "rne")
    steps = list(t.steps) + ([step] if step not in t.steps else [])
    nk = [steps.index(step)] * m + kinds
    notes.append(f"terms: {m} of {t.n} products enter rounded to {p.fmt.name} (multiply, then add), the rest exact "
                 "(FMA)")
    if isinstance(t, _Draft):
        return t.order(nodes=tuple(nodes), kinds=tuple(nk), steps=tuple(steps))
    return replace(t, nodes=tuple(nodes), kinds=tuple(nk), steps=tuple(steps))


SPREAD = 64     # output positions per draw above which the kinds after the first are compared on a spread subset


def _spread(p: Prober, order: Order) -> np.ndarray | None:
    """The output positions where the kinds after the first are compared (the first kind: every position), None
    for every position: where a draw has more than SPREAD outputs, every row and every column of a matmul's output
    (positions (i mod M, i mod N)) or SPREAD rows of a batched sum spread evenly, and the first and last position
    of every distinct tree of a PerPosition order. Each output position's tree is checked on the first kind's draw;
    each tree's arithmetic under every kind, on many outputs each (a draw of fewer outputs is compared whole)."""
    if p.npos <= SPREAD:
        return None
    if p.op == "matmul":
        M, N = p.out_shape
        i = np.arange(max(M, N))
        pos = set(((i % M) * N + i % N).tolist())
    else:
        pos = set(np.linspace(0, p.npos - 1, SPREAD).round().astype(np.int64).tolist())
    if getattr(order, "per_position", False):
        index = np.asarray(order.index, np.int64)
        for j in range(len(order.orders)):
            at = np.flatnonzero(index == j)
            pos |= {int(at[0]), int(at[-1])} if at.size else set()
    return np.array(sorted(pos), np.int64)


def _verify(p: Prober, order: Order, rng: np.random.Generator, kinds: tuple, draws: int) -> tuple[dict, bool, int]:
    """(kind -> (mismatching, compared), deterministic, calls) on fresh random data; the first draw is called
    twice. The first kind is compared at every output position, the others where :func:`_spread` says."""
    c0 = p.calls
    det = True
    ins, wants = [], []
    for kind in kinds:
        ins += [p.inputs_of(rng, kind) for _ in range(draws)]
        wants += [_run(p, i) for i in ins[-draws:]]
        if not _same(wants[-draws], _run(p, ins[-draws])).all():
            det = False
    spread = _spread(p, order)
    at = [None if k == 0 or spread is None else spread for k in range(len(kinds)) for _ in range(draws)]
    gots = replay(p.op, ins, order, p.fmt, at=at)   # every draw of every kind in one batch (reveal/replay.py)
    mism: dict[str, tuple[int, int]] = {}
    for k, kind in enumerate(kinds):
        g, w = gots[k * draws:(k + 1) * draws], wants[k * draws:(k + 1) * draws]
        q = slice(None) if k == 0 or spread is None else spread
        mism[kind] = (sum(int((~_same(a[q], b[q])).sum()) for a, b in zip(g, w)), sum(b[q].size for b in w))
    return mism, det, p.calls - c0


@dataclass
class _Found:
    """The tree search's outcome: the order, the calls it took, how many probes each call carried."""

    order: Order
    trees: int
    tree_calls: int
    node_calls: int
    per_call: float
    mode: str
    classes: tuple = ()


def _search_order(p: Prober, mask: Masking, rng: np.random.Generator, notes: list, packed: bool = True,
                  check: bool = False) -> _Found:
    """The trees (several probes per call where the kernel maps rows, unless ``packed`` is False), their nodes,
    and the order. Packed probes assume one tree per lane: the verification checks it (the caller searches again
    unpacked where it fails); ``check``: on random data here (no verification follows)."""
    c0 = p.calls
    res = search_tree(p, mask, packed=packed)
    tree_calls = p.calls - c0
    c0 = p.calls
    data = _Data(p, rng, ("normal", "mixed"), 3 if p.op == "matmul" or p.rows else 4)
    order = _order_of(p, res.found, data, notes, mask.eM)
    lanes = {"rows": "row of A" if p.op == "matmul" else "row", "cols": "column of B"}.get(res.mode)
    if lanes and check and data.score(p, order, np.arange(data.items[0][2].size)):
        notes.append(_UNPACK.format(lanes))
        return _search_order(p, mask, rng, notes, packed=False)
    if lanes:
        notes.append(f"packed probes: one pair per {lanes}, {res.per_call:.1f} probes per call on average")
    if lanes and len(res.classes) > 1:
        sizes = ", ".join(str(len(c)) for c in res.classes[:8]) + (", ..." if len(res.classes) > 8 else "")
        what = _PLURAL[res.mode] if p.op == "matmul" else "rows"
        notes.append(f"lane classes: the {what} fall in {len(res.classes)} classes of {sizes} by "
                     f"{FINGERPRINTS} fingerprint probes (reveal/classes.py); one search each, its probes packed "
                     "in its own lanes; equal trees merged")
    if mask.sign < 0:
        notes.append("masking with negative units: the kernel rounds upward or toward zero (module tree.py)")
    return _Found(order, len(res.found), tree_calls, p.calls - c0, res.per_call, res.mode,
                  tuple(tuple(c) for c in res.classes))


_PLURAL = {"rows": "rows of A", "cols": "columns of B"}
_UNPACK = ("packed probes (one pair per {}) assumed one tree for every lane; the random data says otherwise: "
           "searched again with every output seeing every probe")


def reveal_order(fn: Callable, op: str, *, n: int | None = None, shape: tuple | None = None, dtype: Any = "fp32",
                 max_calls: int = 5_000_000, max_seconds: float = 600.0, verify: bool = True,
                 kinds: tuple = KINDS, draws: int | None = None, seed: int = 0,
                 rows: int | None = None) -> RevealReport:
    """The exact accumulation order of a black-box kernel, found by calling it on crafted inputs.

    fn: ``fn(x[n]) -> scalar`` (op "sum"), ``fn(a[n], b[n]) -> scalar`` ("dot") or ``fn(A[M, K], B[K, N]) ->
    [M, N]`` ("matmul", ``shape=(M, K, N)``, K >= 2); with ``rows=R``, op "sum" is ``fn(x[R, n]) -> [R]`` (a sum
    over the last axis: one probe per row in each call). It receives numpy arrays of ``dtype`` (ml_dtypes for bf16
    / FP8) and may return anything array-like. ``max_calls`` / ``max_seconds``: budgets (a
    :class:`BudgetExhausted` error past them). ``verify``: simulate the order on ``draws`` fresh random inputs of
    each of ``kinds`` and compare bit for bit. Raises :class:`RevealError` when fn raises or returns a wrong
    shape, type or NaN; a kernel that is not deterministic or not a summation tree gets a report with that
    verdict and ``order=None``.
    """
    K, shape = _check_args(op, n, shape, rows)
    max_calls, max_seconds, verify, kinds, draws, seed = _check_budgets(fn, max_calls, max_seconds, verify, kinds,
                                                                        draws, seed)
    fmt = input_format(dtype)
    p = Prober(fn, op, K, shape, fmt, max_calls, max_seconds)
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    outs = rows or (shape[0] * shape[2] if op == "matmul" else 1)  # type: ignore[index]
    draws = draws or (1 if outs >= 8 else 2 if op == "matmul" or rows else 6)   # many outputs per draw: fewer

    def report(order, verdict, **kw) -> RevealReport:
        return RevealReport(op, K, shape, fmt.name, order, p.calls, time.perf_counter() - t0, verdict,
                            out_format=getattr(p.out_fmt, "name", None), **kw)

    ones = np.ones(K)
    first, second = p.terms(ones), p.terms(ones)
    if not _same(first, second).all():
        return report(None, "not deterministic", notes=["two calls on the same inputs (all ones) gave different "
                                                         "outputs"])
    if not np.isfinite(first).all():
        raise RevealError(f"fn returned {first[~np.isfinite(first)][0]} for inputs of all ones")
    mask = Masking(p)
    notes: list[str] = [f"masking: +-2^{mask.eM} against units 2^{mask.eu} (masks accumulators of up to "
                        f"{mask.absorbs} bits)"]
    try:
        f = _search_order(p, mask, rng, notes, check=not verify)
        if not verify:
            return report(f.order, "not verified", notes=notes, **_counts(f))
        mism, det, vcalls = _verify(p, f.order, rng, tuple(kinds), draws)
        if f.mode != "all" and det and any(b for b, _ in mism.values()):
            notes.append(_UNPACK.format("lane"))
            f0, f = f, _search_order(p, mask, rng, notes, packed=False)
            f.tree_calls, f.node_calls = f.tree_calls + f0.tree_calls, f.node_calls + f0.node_calls + vcalls
            mism, det, vcalls = _verify(p, f.order, rng, tuple(kinds), draws)
    except NotATree as e:
        if mask.last is not None and not mask.last.deterministic():
            return report(None, "not deterministic", notes=["the same masking probes, called again, gave "
                                                             f"different outputs ({e})"], tree_calls=p.calls)
        rec = recovers_units(p, mask)
        return report(None, "not a tree", notes=[str(e)] + ([rec] if rec else []), tree_calls=p.calls)
    spread = _spread(p, f.order)
    where = "every row and column of the output" if p.op == "matmul" else "spread evenly"
    notes.append(f"verified on {draws} random inputs of each kind ({', '.join(kinds)}): a check on a sample, "
                 "not a proof" + ("" if spread is None or len(kinds) < 2 else
                                  f"; {kinds[0]} compared at every output position, the other kinds at {spread.size} "
                                  f"of the {p.npos} ({where}, every tree)"))
    carry_calls = 0
    if det and any(b for b, _ in mism.values()) and p.op == "sum" and isinstance(f.order, TreeOrder):
        comp = _compensated(p, f.order, mask, rng, notes, tuple(kinds), draws, mism)
        carry_calls = comp.calls
        if comp.order is not None:
            f.order, mism, det = comp.order, comp.mismatches, comp.deterministic
            vcalls += comp.verify_calls
    verdict = "not deterministic" if not det else "reproduced" if all(b == 0 for b, _ in mism.values()) else "differs"
    if verdict == "differs":
        notes.append("the order differs from fn on some random data: fn's order may depend on the data, or a "
                     "node does what no probed model does")
    return report(f.order, verdict, mismatches=mism, verify_calls=vcalls, notes=notes, carry_calls=carry_calls,
                  **_counts(f))


@dataclass
class _Comp:
    """The compensated model the carry probes led to (order None: keep the tree), and what it cost."""

    order: Order | None
    mismatches: dict
    deterministic: bool
    calls: int
    verify_calls: int


def _compensated(p: Prober, tree: TreeOrder, mask: Masking, rng: np.random.Generator, notes: list, kinds: tuple,
                 draws: int, mism: dict) -> _Comp:
    """A tree that differs from fn: carry probes at its nodes (reveal/compensation.py); where some node carries its
    rounding error into the next addition, the compensated models fitted on random data and verified."""
    c0 = p.calls
    try:
        carry = carry_probes(p, tree, 0, mask.eM)
    except BudgetExhausted:
        raise
    except RevealError as e:          # the probe's values are not inputs of this format
        notes.append(f"carry probes not made: {e}")
        return _Comp(None, mism, True, p.calls - c0, 0)
    if carry.candidates > carry.probes:
        notes.append(f"carry probes at the {carry.probes} of {carry.candidates} candidate probes over the most "
                     "terms (a budget on their simulation)")
    if not carry.flagged:
        notes.append(f"carry probes at {carry.probes} nodes: none carries its rounding error into the next addition "
                     "(no compensated level)")
        return _Comp(None, mism, True, p.calls - c0, 0)
    where = describe(carry)
    data = _Data(p, rng, ("normal", "mixed", "cancelling"), 3)
    cands = compensated_candidates(carry)
    scores = [data.score(p, c, np.arange(p.npos)) for c in cands]
    ranked = [cands[int(k)] for k in np.argsort(scores, kind="stable")]
    tied = sum(sc == min(scores) for sc in scores)
    tie_note = ""
    if tied > 1:       # equal fits: inputs where they disagree, drawn at random, asked of fn
        head, rows, split = discriminate(p, ranked[:tied], rng)
        ranked = head + ranked[tied:]
        tie_note = (f"; {tied} models fit the same random data: {split} of {rows} further random inputs tell them "
                    "apart, and fn's outputs on them chose this one" if split else
                    f"; {tied} models (with and without folding the error term in, or its format) agree on every "
                    f"one of {rows} random inputs: indistinguishable here, the first is reported")
    calls = p.calls - c0
    vcalls = 0
    tried = []
    for best in ranked:     # the best fit first; the next where it fails the verification
        m2, det, vc = _verify(p, best, rng, kinds, draws)
        vcalls += vc
        tried.append((sum(b for b, _ in m2.values()), best, m2, det))
        if tried[-1][0] == 0:
            break
    _, best, m2, det = min(tried, key=lambda x: x[0])
    flagged = f"carry probes: {carry.flagged} of {carry.probes} probed nodes carry their rounding error into the " \
              f"next addition"
    how = ("with the error term folded in at the end" if best.flush else "the error term never added to the "
           "result") + (f", the error term in {best.err.name}" if best.err is not None else "")
    if all(b == 0 for b, _ in m2.values()):
        odd = [x for x in notes if x.startswith("nodes keep ") and "no known format" in x]
        for x in odd:
            notes.remove(x)
        wider = (" (the compensated nodes read one bit wider in the node probes: their error term restores the "
                 "probed bit)" if odd else "")
        notes.append(f"{flagged}: a compensated (Kahan) level, {where}; modelled as Kahan summation ({how}): "
                     f"CompensatedTree{tie_note}{wider}")
        return _Comp(best, m2, det, calls, vcalls)
    notes.append(f"carry probes: {carry.flagged} of {carry.probes} probed nodes answer as an addition that carries "
                 f"its rounding error into the next one (a compensated sum's signature), {where}; but no Kahan model "
                 f"of these chains reproduces fn (the closest, {how}, is off on {sum(b for b, _ in m2.values())} "
                 "random outputs): a compensated level of another kind, or an order that depends on the data. The "
                 "tree is returned")
    return _Comp(None, mism, True, calls, vcalls)


def _counts(f: _Found) -> dict:
    return {"tree_calls": f.tree_calls, "node_calls": f.node_calls, "trees": f.trees, "probes_per_call": f.per_call,
            "lane_classes": f.classes}
