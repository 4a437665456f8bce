"""The rounding path of an accumulation order: which roundings each leaf of the sum goes through (bound components)."""

from __future__ import annotations

from fractions import Fraction

from ..core.formats.format import AnyFormat
from ..core.formats.policy import Rounding
from ..models.orders.cpu import schedule_depth
from ..models.orders.spec import OrderSpec
from .boundmath import (
    Component,
    Site,
    cdiv,
    ceil_log2,
    nested,
    underflow_eta,
)

_H = "docs/theory.md §2.1"


def innermost(o: OrderSpec) -> OrderSpec:
    return innermost(o.inner) if o.kind in ("blocked", "splitk", "promoted") and o.inner else o


def final_acc(o: OrderSpec, acc: AnyFormat) -> AnyFormat:
    """The format of the result: outer_acc / combine_acc / carry, else the order's own acc, else acc."""
    if o.kind in ("blocked", "promoted", "splitk", "numpy") and o.outer_acc is not None:
        return o.outer_acc
    return (o.acc or acc) if o.kind in ("blockfma", "numpy") else acc


def _numpy_depth(n: int) -> int:
    """Deepest leaf of numpy's pairwise_sum (orders.NumpyPairwise; numpy loops_utils.h.src)."""
    if n < 8:
        return max(n - 1, 0)
    if n <= 128:
        return (n // 8 - 1) + 3 + n % 8
    n2 = n // 2 - (n // 2) % 8
    return 1 + max(_numpy_depth(n2), _numpy_depth(n - n2))


def unit_roundoff(fmt: AnyFormat, mode: str) -> Fraction:
    return Fraction(0) if fmt.is_integer else fmt.unit_roundoff(mode)


def _conv(comps: list[Component], sites: list[Site], a: AnyFormat, b: AnyFormat, mode: str, count: int,
          what: str, src: str) -> None:
    if not nested(a, b):
        comps.append(Component(f"{what} conversion", unit_roundoff(b, mode), 1,
                               f"each {what} rounded from {a.name} to {b.name}", src, Rounding.of(mode).is_unbiased))
        sites.append(Site(f"{what}s rounded to {b.name}", count, underflow_eta(b, mode)))


def leaf_path(o: OrderSpec, n: int, acc: AnyFormat, mode: str, where: str = "") -> tuple[list[Component], list[Site]]:
    """Components on the deepest path of summing n terms in acc, and the underflow sites of the whole tree."""
    u, unb = unit_roundoff(acc, mode), Rounding.of(mode).is_unbiased
    src = "Higham 2002 §4.2; " + _H
    if acc.is_integer:
        return [Component("accumulation" + where, Fraction(0), 0, f"exact integer additions in {acc.name} "
                          "(no overflow assumed; .tolerance checks sum|t| <= max)", "exact arithmetic")], []
    if o.kind in ("any", "sequential"):
        what = ("any order (every binary tree with n leaves has depth <= n - 1)" if o.kind == "any"
                else "recursive (sequential) summation")
        return [Component("accumulation" + where, u, n - 1, f"{what} of n = {n} terms in {acc.name} ({mode}): "
                          f"h = n - 1 = {n - 1}", src, unb)], []
    if o.kind == "pairwise":
        h = (min(o.n, n) - 1) + ceil_log2(cdiv(n, o.n))
        f = (f"pairwise (tree) summation of n = {n} terms: h = ceil(log2 n) = {h}" if o.n <= 1 else
             f"pairwise with leaf blocks of <= B = {o.n} terms in any order: h = (B-1) + ceil(log2 ceil(n/B)) = {h}")
        return [Component("accumulation" + where, u, h, f + f" in {acc.name} ({mode})", src, unb)], []
    step = {"numpy": _path_numpy, "blockfma": _path_blockfma, "blocked": _path_nested, "splitk": _path_nested,
            "promoted": _path_promoted, "gpureduce": _path_gpureduce, "tree": _path_tree,
            "schedule": _path_schedule}[o.kind]
    return step(o, n, acc, mode, where)


def _path_schedule(o: OrderSpec, n: int, acc: AnyFormat, mode: str, where: str) -> tuple[list[Component], list[Site]]:
    """CPU kernels' orders (numoracle.orders.VectorCascade, Interleaved, ...): the deepest leaf of their schedule."""
    h = min(schedule_depth(o.params[0], n), max(n - 1, 0)) if n > 1 else 0
    return [Component("accumulation" + where, unit_roundoff(acc, mode), h,
                      f"{o} over n = {n} terms in {acc.name} ({mode}): the deepest leaf passes h <= {h} roundings",
                      "numoracle.orders (the order's schedule); Higham 2002 §4.2", Rounding.of(mode).is_unbiased)], []


def _path_gpureduce(o: OrderSpec, n: int, acc: AnyFormat, mode: str, where: str) -> tuple[list[Component], list[Site]]:
    """GPU reduction trees (vector slots, lanes, warps, blocks) and chunked scans: their deepest leaf."""
    h = gpu_reduce_depth(o.params, n)
    return [Component("accumulation" + where, unit_roundoff(acc, mode), h,
                      f"GPU tree {o} of n = {n} terms in {acc.name} ({mode}): the deepest leaf passes h <= {h} "
                      "roundings", "numoracle.orders.GpuReduce (depth of the tree); Higham 2002 §4.2",
                      Rounding.of(mode).is_unbiased)], []


def _path_tree(o: OrderSpec, n: int, acc: AnyFormat, mode: str, where: str) -> tuple[list[Component], list[Site]]:
    """An explicit tree (numoracle.orders.TreeOrder): per kind of node, the most such nodes on one leaf's path."""
    comps: list[Component] = []
    sites: list[Site] = []
    src = "numoracle.orders.TreeOrder (per-step path counts); Higham 2002 §4.2"
    for part in o.params:
        if part[0] == "nodes":      # node totals: read by tree_underflow_sites
            continue
        if part[0] == "bfma":
            c, s = _path_blockfma(part[1], part[1].n * part[2], o.acc or acc, mode, where)
            comps += c
            sites += s
            continue
        what, fmt, m, count = part
        fmt, m = fmt or o.acc or acc, m or mode
        label = {"add": "accumulation", "leaf": "term rounding", "out": "output rounding"}[what]
        comps.append(Component(label + where, unit_roundoff(fmt, m), count,
                               f"tree {o}: at most {count} {'additions' if what == 'add' else 'roundings'} in "
                               f"{fmt.name} ({m}) on one leaf's path", src, Rounding.of(m).is_unbiased))
        if what != "add":
            sites.append(Site(f"{label}s in {fmt.name}", n if what == "leaf" else 1, underflow_eta(fmt, m)))
    return comps, sites


def tree_underflow_sites(o: OrderSpec, op: str, dtype: AnyFormat, acc: AnyFormat, mode: str) -> list[Site]:
    """The absolute error sites of a tree (numoracle.orders.TreeOrder) whose nodes round to a format with a coarser
    subnormal grid than the values entering them (FP16 nodes over FP32 terms: a sum that lands in FP16's subnormal
    range rounds, by up to half its smallest subnormal, however small the terms). The terms' grid: the smallest
    subnormal of ``dtype`` (a sum's terms), squared for products. A node format whose grid divides every entering
    value (the terms', the leaf format's and every node format's grid) adds nothing: its underflowing sums are exact."""
    if o.kind != "tree" or dtype.is_integer:
        return []
    grids = [dtype.min_subnormal ** (1 if op == "sum" else 2)]
    for part in o.params:
        if part[0] == "bfma":
            grids.append((part[1].acc or o.acc or acc).min_subnormal)
        elif part[0] != "out":          # the root's output rounding enters no node
            grids.append((part[1] or o.acc or acc).min_subnormal)
    finest = min(grids)
    sites = []
    for part in o.params:
        if part[0] == "nodes":
            fmt, m = part[1] or o.acc or acc, part[2] or mode
            if not fmt.is_integer and fmt.min_subnormal > finest:
                sites.append(Site(f"tree nodes rounded into {fmt.name}'s subnormal range (finer values enter them)",
                                  part[3], underflow_eta(fmt, m)))
    return sites


def _path_numpy(o: OrderSpec, n: int, acc: AnyFormat, mode: str, where: str) -> tuple[list[Component], list[Site]]:
    """numpy's pairwise_sum over chunks, with carries stored in the outer accumulator."""
    a = o.acc or acc
    chunk = o.n or n
    c = cdiv(n, chunk)
    h = _numpy_depth(min(chunk, n)) + (c - 1)
    comps = [Component("accumulation" + where, unit_roundoff(a, "rne"), h,
                       f"numpy pairwise_sum of chunks of {min(chunk, n)} (8 interleaved accumulators up to 128 "
                       f"terms, halving above) plus {c - 1} chunk additions, in {a.name}: h = {h}",
                       "numpy loops_utils.h.src via numoracle.orders.NumpyPairwise; " + _H)]
    sites: list[Site] = []
    if o.outer_acc is not None and not nested(a, o.outer_acc):
        comps.append(Component("carry rounding" + where, unit_roundoff(o.outer_acc, "rne"), c,
                               f"the running result stored in {o.outer_acc.name} after each of the {c} chunks",
                               "numoracle.orders.NumpyPairwise", True))
        sites.append(Site(f"carries rounded to {o.outer_acc.name}", c, underflow_eta(o.outer_acc, "rne")))
    return comps, sites


def _path_blockfma(o: OrderSpec, n: int, acc: AnyFormat, mode: str, where: str) -> tuple[list[Component], list[Site]]:
    """Tensor-core block FMAs chained over K (docs/theory.md §4)."""
    bacc = o.acc or acc
    m, F, N = cdiv(n, o.n), o.frac_bits, o.n
    beta = Fraction(N + 1, 2**F)
    p_out = (bacc.man_bits if o.out_frac_bits is None else o.out_frac_bits) + 1
    nearest = Rounding.of(o.out_rounding).is_nearest
    ur = Fraction(1, 2 ** (p_out if nearest else p_out - 1))
    eta = Fraction(2) ** (bacc.emin - p_out + 1) / (2 if nearest else 1)
    al = "truncated" if o.truncate else "rounded (any mode)"
    return [
        Component("block alignment" + where, beta, m,
                  f"each block FMA aligns its N + 1 = {N + 1} terms (N = {N} exact products and the running "
                  f"accumulator) to the largest exponent label E and keeps F = {F} fraction bits ({al}): error < "
                  f"(N+1) 2^(E-F) <= (N+1) 2^-F max|t| for normal inputs. Chained over m = ceil(n/N) = {m} "
                  f"blocks, |e_j| <= (1+u)(1+beta)|e_(j-1)| + (u + (1+u) beta) S_j telescopes to "
                  f"((1+beta)(1+u))^m - 1", "docs/theory.md §4.3; Fasi et al. 2021; Khattak & "
                  "Mikaitis 2025", False),
        Component("block normalisation" + where, ur, m,
                  f"each block result rounded ({o.out_rounding}) to {p_out} bits in {bacc.name}'s range"
                  + (" (u = 2^(1-p): directed)" if not nearest else ""), "docs/theory.md §4.1", nearest),
    ], [Site(f"block results rounded to {p_out} bits", m, eta),
        Site("accumulator labels clamped at 2^-126", m, Fraction(N + 1, 2**F) * Fraction(2) ** -126)]


def _path_nested(o: OrderSpec, n: int, acc: AnyFormat, mode: str, where: str) -> tuple[list[Component], list[Site]]:
    """Blocked and split-K: an inner order inside each block or slice, an outer order over their results."""
    if o.kind == "blocked":
        b, m = min(o.n, n), cdiv(n, o.n)
        wi, wo = f" (inside blocks of {b})", f" (over {m} block sums)"
    else:  # slices of at most ceil(n/s) terms (rounded up to a multiple of tile), at most min(s, n) of them
        b = cdiv(cdiv(n, o.n), o.tile) * o.tile
        m = min(o.n, n, cdiv(n, b))
        wi, wo = f" (inside {m} slices of <= {b})", f" (combining {m} slice sums)"
    oacc = o.outer_acc or acc
    ci, si = leaf_path(o.inner or OrderSpec("sequential"), b, acc, mode, where + wi)
    comps, sites = list(ci), [Site(s.label, s.sites * m, s.eta) for s in si]
    _conv(comps, sites, final_acc(o.inner or OrderSpec("sequential"), acc), oacc, mode, m, "partial", _H)
    co, so = leaf_path(o.outer or OrderSpec("sequential"), m, oacc, mode, where + wo)
    src2 = ("Blanchard, Higham & Mary 2020; " if o.kind == "blocked" else "") + "docs/theory.md §2"
    return comps + [Component(c.name, c.u, c.count, c.formula, src2, c.mean_zero) for c in co], sites + so


def _path_promoted(o: OrderSpec, n: int, acc: AnyFormat, mode: str, where: str) -> tuple[list[Component], list[Site]]:
    """Promotion: groups accumulated inside, each group result scaled and added in the outer accumulator."""
    G, M = min(o.n, n), cdiv(n, o.n)
    oacc = o.outer_acc or acc
    uo = unit_roundoff(oacc, mode)
    ci, si = leaf_path(o.inner or OrderSpec("sequential"), G, acc, mode, where + f" (inside groups of {G})")
    comps, sites = list(ci), [Site(s.label, s.sites * M, s.eta) for s in si]
    src = "DeepSeek-V3 report §3.3.2; docs/theory.md §4.4"
    _conv(comps, sites, final_acc(o.inner or OrderSpec("sequential"), acc), oacc, mode, M, "group result", src)
    comps.append(Component("promotion scale multiply" + where, uo, 1,
                           "the group result times its per-group scales: one rounding (exact without scales; "
                           "counted to stay guaranteed)", src, Rounding.of(mode).is_unbiased))
    sites.append(Site("promotion scale multiplies", M, underflow_eta(oacc, mode)))
    comps.append(Component("promotion accumulation" + where, uo, M - 1,
                           f"the {M} promoted group results added sequentially in {oacc.name} ({mode}): h = {M - 1}",
                           src, Rounding.of(mode).is_unbiased))
    return comps, sites


def gpu_reduce_depth(params: tuple, n: int) -> int:
    """Roundings on the deepest leaf's path of ``GpuReduce(*params)`` (or ``ChunkedScan(width)``) over n terms.

    Per accumulator at most ceil(n / (vec T)) + 1 terms (T threads; +1: the tail or the unrolled
    layout's uneven share), then vec - 1 additions of the accumulators, log2(lanes * warps) tree
    levels, and with blocks > 1 at most ceil(blocks / G) partials per thread (G = lanes * warps) and
    log2 G levels again. A tree of n leaves has depth <= n - 1 (additions of the +0 starts are exact).
    """
    if len(params) == 1:   # ChunkedScan(width): per chunk, the carry addition and log2(width) tree levels
        w = params[0]
        return min(-(-n // w) * (1 + w.bit_length() - 1), max(n - 1, 0))
    vec, lanes, warps, blocks, _ = params
    threads = lanes * warps * blocks
    g = lanes * warps
    h = -(-n // (vec * threads)) + 1 + (vec - 1) + (g.bit_length() - 1)
    if blocks > 1:
        h += -(-blocks // g) + (g.bit_length() - 1)
    return min(h, max(n - 1, 0))
