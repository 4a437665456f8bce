"""Guaranteed (and probabilistic) error bounds for sums, dot products and matrix products.

``expected_error_bound(op, dtype, K, ...)`` returns an :class:`ErrorBound`: per output element

    |y_hat - y| <= c * sum_i |t_i|  +  u_out * |y|  +  a

where ``t_i`` are the exact terms (``a_i b_i`` for dot/matmul, ``x_i`` for sum) of the exact
result ``y``, ``c`` is :attr:`ErrorBound.coefficient`, the ``u_out`` term is present when the
result is stored in a narrower ``out`` format, and ``a`` is a tiny absolute term for underflow
(gradual underflow makes additions exact, but products, FMAs, block roundings and input
roundings into the subnormal range lose absolute, not relative, accuracy).

Worst case (the default) uses docs/theory.md §2's *master rule*: the leaf on the deepest path of the
evaluation tree passes roundings with unit roundoffs u_j, and c = prod_j (1 + u_j) - 1, computed
exactly with Fractions (or rounded upward when the exact rational would be huge). It needs no
``n*u < 1`` condition. The classical gamma form (sum_j u_j) / (1 - sum_j u_j) (= gamma_h for one
precision) is offered by :meth:`ErrorBound.gamma`, which refuses ``n*u >= 1``.

Orders (``order=``): strings, or objects duck-typed by class name and fields (``numoracle.orders``
is not imported). Depth = roundings on the deepest leaf's path when summing n terms:

* ``"any"`` (default, ``None``): n - 1 (every binary tree of n leaves has depth <= n - 1).
* ``"sequential"`` / ``Sequential()``: n - 1 (recursive summation, Higham §4.2).
* ``"pairwise"`` / ``Pairwise()``: ceil(log2 n); ``"pairwise:<B>"`` (or an int ``base`` field): leaf
  blocks of <= B terms in any order, (B-1) + ceil(log2 ceil(n/B)).
* ``"blocked:<b>"`` / ``Blocked(b, inner, outer, outer_acc)``: inner(b) + outer(ceil(n/b)), e.g.
  (b-1) + (m-1); one more rounding where partials convert to a narrower ``outer_acc``.
* ``"splitk:<s>[:pairwise]"`` / ``SplitK(s, inner, combine, permutation, combine_acc)``: inner(ceil(n/s))
  + combine(min(s, n)): (L-1) + (s-1) or ceil(log2 s); the permutation does not change the depth.
* ``"blockfma:<N>:<F>[:<out_frac_bits>][:round]"`` / ``BlockFMA(n, frac_bits, truncate, out_rounding,
  out_frac_bits, acc)``: ceil(n/N) blocks, each an alignment error (N+1) 2^-F relative to its largest
  term and one rounding of the block result (docs/theory.md §4). H100 FP8: ``"blockfma:32:13:13"``.
* ``"promoted:<G>:<N>:<F>"`` / ``Promoted(every, inner, outer_acc)``: inner(G) + 1 scale multiply +
  (ceil(n/G) - 1) additions in outer_acc; the string's inner is ``blockfma:N:F:F`` (DeepSeek-V3's FP8 GEMM).
* ``"numpy"`` / ``NumpyPairwise(chunk, acc, carry)``: numpy's pairwise_sum (8 accumulators up to 128
  terms, halving above), plus chunk additions and carry roundings.

Products (dot/matmul): a product is rounded at most once, to the accumulator, and only when
``2 p_in > p_acc``; with ``fma=True`` it is rounded inside the FMA that adds it. The deepest leaf
of an FMA chain (s_1 = fl(a_1 b_1)) still sees that rounding, so ``fma`` does not change h_max
(Higham §3.1: "same gamma_n worst case"); every other leaf is one rounding shallower.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..core.errors import ArgumentTypeError
from ..core.formats.format import AnyFormat, format_of
from ..core.formats.policy import Rounding
from ..models.arithmetic import Arithmetic, takes_arithmetic
from ..models.orders.spec import OrderSpec
from ..models.orders.text import parse_order
from .boundmath import (
    Component,
    hm2019,
    nested,
    prod_pow,
    products_exact,
    products_on_grid,
    underflow_eta,
)
from .boundpath import Site, final_acc, innermost, leaf_path, tree_underflow_sites, unit_roundoff
from .errorbound import ErrorBound, Tolerance

__all__ = ["register_bound_op", "recommended_tolerance", "expected_error_bound", "ErrorBound", "Component",
           "parse_order", "OrderSpec", "OPS", "KINDS"]

OPS = ("sum", "dot", "matmul", "quantized_matmul", "softmax", "log_softmax", "logsumexp", "cross_entropy", "layernorm",
       "rmsnorm", "attention")
# who registers each op computed above this layer (importing numoracle imports them all; a caller of this module
# alone must import the registering module first)
REGISTERED_BY = {"quantized_matmul": "numoracle.quant.bounds.matmul", **{op: "numoracle.composite" for op in OPS[4:]}}

# Ops whose bound a higher layer computes, registered by name when that layer is imported (importing numoracle
# imports them all): the dispatch stays here while the imports go only down the layers.
EXTRA_OPS: dict[str, Any] = {}


def register_bound_op(name: str, fn: Any) -> None:
    """Make ``expected_error_bound(name, dtype, K, **kw)`` call ``fn(dtype, K, **kw)``."""
    if name not in OPS:
        raise ValueError(f"register {name!r} in OPS too, so that argument checks know it")
    EXTRA_OPS[name] = fn
KINDS = ("worst", "probabilistic")


# ---- the builder ---------------------------------------------------------------------------------
def _check(op: Any, K: Any, kind: Any, confidence: Any) -> tuple[str, int, str, float]:
    if not isinstance(op, str) or op.lower() not in OPS:
        raise ValueError(f"unknown op {op!r}; ops: {', '.join(OPS)}")
    if op.lower() in REGISTERED_BY and op.lower() not in EXTRA_OPS:
        raise ValueError(f"op {op!r} is computed by {REGISTERED_BY[op.lower()]}: import that module first (it "
                         "registers the op)")
    if isinstance(K, bool) or not isinstance(K, numbers.Integral):
        raise ArgumentTypeError(f"K (the reduction length) must be an integer >= 1, got {type(K).__name__} {K!r:.40}")
    K = int(K)
    if K < 1:
        raise ValueError(f"K (the reduction length) must be >= 1, got {K}")
    if not isinstance(kind, str) or kind.lower() not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
    try:
        c = float(confidence)
    except (TypeError, ValueError):
        c = math.nan
    if not 0 < c < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    return op.lower(), K, kind.lower(), c


@takes_arithmetic
def expected_error_bound(op: str, dtype: Any, K: int, arith: Arithmetic | None = None, *, acc: Any = None,
                         order: Any = None, fma: bool = True, kind: str = "worst", confidence: float = 0.999,
                         out: Any = None, inputs_rounded_from: Any = None, shape: Any = None, rounding: Any = "rne",
                         out_rounding: Any = None, tight_rn: bool = False, ftz: bool = False,
                         **quant: Any) -> ErrorBound:
    """The error bound of ``op`` ("sum", "dot", "matmul") over K terms of ``dtype`` accumulated in ``acc``.

    arith: a numoracle.Arithmetic for the keywords acc ... out_rounding (its operands: dtype, from the one given).
    dtype: the format of the values the kernel reads (for matmul: of A and B). acc: the accumulator
    (default dtype); rounding: its rounding mode (default "rne"). order: see the module docstring
    (default None = any order, depth K-1). out: the output storage format, rounded once at the end
    with out_rounding (default: rounding, as in ``simulate``). inputs_rounded_from: the format the
    inputs were rounded (RN) from into dtype; the bound is then against the exact result of the
    unrounded inputs. kind: "worst" (guaranteed) or "probabilistic" (Higham & Mary 2019: holds with
    probability >= confidence, union bound over the K error products of an element and over the
    elements of ``shape`` when given). tight_rn: also try the Rump / Jeannerod-Rump bound k*u (RN,
    one precision, sequential) and keep the smaller. ftz: the accumulator flushes subnormal results
    to zero (``numoracle.ftzbound``: each operation may err by min normal, absolutely).

    Raises ValueError for an unknown op/kind/order, K < 1, an accumulator that cannot hold the
    inputs of a sum, probabilistic bounds on biased (directed, truncating) roundings.
    """
    op, K, kind, conf = _check(op, K, kind, confidence)
    if ftz and op in REGISTERED_BY:
        raise ValueError(f"ftz=True is not modelled for {op}; pass ftz=False (gradual underflow)")
    if op in EXTRA_OPS:  # an op a higher layer registered (quantized_matmul: numoracle.quant.bounds.matmul)
        return EXTRA_OPS[op](dtype, K, acc=acc, order=order, fma=fma, kind=kind, confidence=conf, out=out,
                             shape=shape, inputs_rounded_from=inputs_rounded_from, rounding=rounding,
                             out_rounding=out_rounding, tight_rn=tight_rn, **quant)
    if quant:
        raise TypeError(f"expected_error_bound got unexpected keyword(s) {', '.join(quant)} for op={op!r}")
    # 1. the setting: formats, modes, order, checked together
    st = _setting(op, K, dtype, acc, order, out, inputs_rounded_from, shape, rounding, out_rounding, ftz)
    # 2. the roundings on the deepest leaf's path: inputs, products, the order's accumulation
    comps, sites, h_prod = _leaf_components(st, fma)
    path, psites = leaf_path(st.order, K, st.acc, st.mode)
    comps, sites = comps + path, sites + psites + tree_underflow_sites(st.order, op, st.dtype, st.acc, st.mode)
    if ftz:
        from .ftzbound import ftz_sites

        sites += [Site(*t) for t in ftz_sites(op, K, st.acc, st.order, st.out)]
    acc_comps = [c for c in comps if c.name != "input rounding"]
    p_path, ex1 = prod_pow([(1 + c.u, c.count) for c in acc_comps])
    p_all, ex2 = prod_pow([(1 + c.u, c.count) for c in comps])
    worst, exact, method = p_all - 1, ex1 and ex2, "worst case, master rule (guaranteed)"
    # 3. the tighter forms: k*u under RN, or the probabilistic bound
    needs = False
    if tight_rn:
        worst, exact, method, needs = _tight_rn(st, kind, h_prod, fma, bool(sites), worst, exact, method)
    coef, exact, method, lam, prob, events = (_probabilistic(st, comps, conf, worst, exact) if kind == "probabilistic"
                                              else (worst, exact, method, None, None, None))
    # 4. the output rounding and the absolute (underflow) terms
    fin = final_acc(st.order, st.acc)
    u_out = None if st.out is None or nested(fin, st.out) else st.out.unit_roundoff(st.omode)
    if st.out is not None and u_out is None:
        st.notes.append(f"every {fin.name} value is a {st.out.name} value: storing the result is exact")
    amp = p_path * (1 + u_out) if u_out else p_path
    atol = sum((s.sites * s.eta for s in sites), Fraction(0))
    atol = atol * amp if atol else atol  # (0 times an infinite amplification is 0)
    if u_out:
        coef, worst = coef * (1 + u_out), worst * (1 + u_out)
        atol += underflow_eta(st.out, st.omode)
    in_uf = None
    if not st.in_exact and st.src is not None and st.src.min_subnormal < st.dtype.min_normal:
        in_uf = (st.dtype.min_subnormal / 2, st.u_in, amp)
    label = None
    if st.blockfma is not None:
        label = (Fraction(st.blockfma.n + 1, 2**st.blockfma.frac_bits) * amp, st.dtype.min_normal)
        st.notes.append("block FMA exponent labels of subnormal inputs are clamped at emin (Khattak & Mikaitis): "
                        ".tolerance adds (N+1) 2^-F min_normal (|other factor| + min_normal) per such product")
    if needs:
        st.notes.append("tight_rn: no product underflows (Jeannerod & Rump assume none); .tolerance checks it")
    return ErrorBound(
        op=op, dtype=st.dtype, acc=st.acc, K=K, order=str(st.order), kind=kind, rounding=st.mode, fma=bool(fma),
        out=st.out, inputs_rounded_from=st.src, shape=st.shape,
        confidence=conf if kind == "probabilistic" else None, components=tuple(comps), coefficient=coef,
        exact=exact, worst_coefficient=worst, depth=sum(c.count for c in acc_comps), method=method, u_out=u_out,
        atol_const=atol, input_underflow=in_uf, sites=tuple(sites), lambda_=lam, probability=prob, events=events,
        notes=tuple(st.notes), needs_no_product_underflow=needs,
        sigma=sum((c.count * c.u for c in comps), Fraction(0)), block_label=label)


@dataclass
class _Setting:
    """Everything step 1 resolved: the formats, modes and order of one bound, and its notes so far."""

    op: str
    K: int
    dtype: AnyFormat
    acc: AnyFormat
    out: AnyFormat | None
    src: AnyFormat | None
    mode: str
    omode: str
    order: OrderSpec
    shape: tuple[int, ...] | None
    outputs: int
    blockfma: OrderSpec | None
    in_exact: bool
    u_in: Fraction
    notes: list[str]


def _setting(op: str, K: int, dtype: Any, acc: Any, order: Any, out: Any, inputs_rounded_from: Any, shape: Any,
             rounding: Any, out_rounding: Any, ftz: bool) -> _Setting:
    """Step 1: resolve and check the arguments together (each refusal says what to pass instead)."""
    dtype = format_of(dtype)
    acc = dtype if acc is None else format_of(acc)
    out = None if out is None else format_of(out)
    src = None if inputs_rounded_from is None else format_of(inputs_rounded_from)
    mode = Rounding.of(rounding).value
    omode = mode if out_rounding is None else Rounding.of(out_rounding).value
    o = parse_order(order, dtype)
    outputs = 1
    if shape is not None:
        shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
        if any(s < 1 for s in shape):
            raise ValueError(f"shape must hold positive sizes, got {shape}")
        outputs = math.prod(shape)
    if acc.is_integer and not dtype.is_integer:
        raise ValueError(f"an integer accumulator ({acc.name}) needs integer inputs, not {dtype.name}")
    if op == "sum" and not nested(dtype, acc):
        raise ValueError(f"a sum accumulates its inputs in the accumulator, so every {dtype.name} value must be a "
                         f"{acc.name} value, and it is not (accumulator narrower than the inputs); to model a "
                         f"conversion first, use dtype={acc.name}, inputs_rounded_from={dtype.name}")
    if src is not None and dtype.is_integer:
        raise ValueError("inputs_rounded_from with an integer dtype is quantisation (absolute error), not a "
                         "relative rounding; bound the quantisation separately")
    if out is not None and out.is_integer:
        raise ValueError(f"out={out.name}: rounding to an integer is not a relative rounding; use a float format")
    bf = innermost(o) if innermost(o).kind == "blockfma" else None
    if bf is not None and (acc.is_integer or dtype.is_integer):
        raise ValueError("block-FMA orders need floating-point inputs and accumulator")
    inner = innermost(o)
    if inner.kind in ("numpy", "gpureduce", "tree") and inner.acc is not None:
        acc = inner.acc  # the order fixes its accumulator (a TreeOrder's own: its nodes' default format)
    notes = ["no overflow anywhere (an overflow gives inf/NaN, which no finite tolerance accepts)",
             "FTZ: results below min normal are flushed to zero (each operation may err by min normal, counted in "
             "a); inputs are read as given (no DAZ)" if ftz else
             "gradual underflow (no FTZ/DAZ): additions are then exact in the subnormal range",
             f"the kernel reads {dtype.name} values" + (f" rounded (RN) from {src.name} values" if src else "")]
    if out is not None:
        notes.append(f"the result is rounded once ({omode}) to {out.name}")
    in_exact = src is None or nested(src, dtype)
    u_in = Fraction(0) if in_exact else dtype.unit_roundoff("rne")
    return _Setting(op, K, dtype, acc, out, src, mode, omode, o, shape, outputs, bf, in_exact, u_in, notes)


def _leaf_components(st: _Setting, fma: bool) -> tuple[list[Component], list[Site], int]:
    """Step 2a: the input rounding and the product rounding of a leaf; (components, underflow sites, h_prod)."""
    comps: list[Component] = []
    sites: list[Site] = []
    n_in = 1 if st.op == "sum" else 2
    dtype, acc, mode = st.dtype, st.acc, st.mode
    if st.src is not None:
        comps.append(Component("input rounding", st.u_in, 0 if st.in_exact else n_in,
                               f"every {st.src.name} value is a {dtype.name} value (exact)" if st.in_exact else
                               f"each {'term' if st.op == 'sum' else 'factor'} rounded {st.src.name} -> {dtype.name} "
                               f"(RN): {'(1+u_in)' if st.op == 'sum' else '(1+u_in)^2'} per leaf",
                               "docs/theory.md §2.5; Blanchard et al. 2020"))
    if st.op == "sum":
        return comps, sites, 0
    h_prod = 0
    inner = innermost(st.order)
    if inner.kind == "tree":      # TreeOrder: terms enter its nodes exact; its leaf format (on the path) rounds them
        comps.append(Component("products", Fraction(0), 0, "exact: a tree's terms enter its nodes exact (a leaf "
                               "format, where the tree has one, rounds them: counted on the path)",
                               "numoracle.orders.TreeOrder"))
        return comps, sites, h_prod
    if inner.kind == "blockfma":
        comps.append(Component("products", Fraction(0), 0, "exact inside the block FMA", "docs/theory.md §4.1"))
    elif products_exact(dtype, acc):
        comps.append(Component("products", Fraction(0), 0, f"exact in {acc.name}: 2 p_in = "
                               f"{2 * dtype.precision} <= p_acc = {acc.precision}", "docs/theory.md §2"))
    else:
        h_prod = 1
        how = ("rounded inside the FMA that adds it; s_1 = fl(a_1 b_1) makes the first leaf the deepest, so "
               "h_max is as without FMA and other leaves are one rounding shallower" if fma else
               f"each product rounded once to {acc.name}")
        comps.append(Component("products", unit_roundoff(acc, mode), 1, f"2 p_in = {2 * dtype.precision} > p_acc = "
                               f"{acc.precision}: {how}", "Higham 2002 §3.1; docs/theory.md §2",
                               Rounding.of(mode).is_unbiased))
    if inner.kind != "blockfma" and not products_on_grid(dtype, acc):
        sites.append(Site(f"products {'in FMAs ' if fma else ''}rounded into {acc.name}'s subnormal range",
                           st.K, underflow_eta(acc, mode)))
    return comps, sites, h_prod


def _tight_rn(st: _Setting, kind: str, h_prod: int, fma: bool, has_sites: bool, worst: Fraction, exact: bool,
              method: str) -> tuple[Fraction, bool, str, bool]:
    """Step 3a: k*u under RN (Rump 2012; Jeannerod & Rump 2013) where it applies and is smaller."""
    why = []
    if kind != "worst" or not Rounding.of(st.mode).is_nearest or st.order.kind != "sequential":
        why.append("kind='worst', rounding to nearest and order='sequential'")
    if st.src is not None:
        why.append("no inputs_rounded_from")
    if st.op != "sum" and h_prod and fma:
        why.append("fma=False when products round (Jeannerod & Rump analyse separately rounded products)")
    if st.acc.is_integer:
        why.append("a floating-point accumulator")
    if why:
        raise ValueError("tight_rn (Rump 2012 / Jeannerod & Rump 2013 / Rump, Bunger & Jeannerod 2016: k*u "
                         "under RN) needs " + "; ".join(why))
    k = (st.K - 1) + h_prod
    rbj = k * unit_roundoff(st.acc, st.mode)
    if rbj < worst:
        worst, exact = rbj, True
        method = (f"worst case, k*u with k = {k} (Rump 2012 for sums, Jeannerod & Rump 2013 for dot products; "
                  "RN, recursive, no restriction on k; guaranteed)")
    return worst, exact, method, st.op != "sum" and has_sites


def _probabilistic(st: _Setting, comps: list[Component], conf: float, worst: Fraction, exact: bool) -> tuple:
    """Step 3b: Higham & Mary 2019 over the path's roundings (refused for biased roundings)."""
    bad = [c.name for c in comps if c.count and not c.mean_zero]
    if bad or not Rounding.of(st.mode).is_unbiased:
        why = f"{st.mode} rounding" if not Rounding.of(st.mode).is_unbiased else \
            f"{bad[0]} (truncation / round toward zero)"
        raise ValueError(f"kind='probabilistic' (Higham & Mary 2019) needs mean-zero rounding errors, but {why} "
                         "errs with a bias (docs/theory.md §3.4; use kind='worst'")
    events = st.K * st.outputs
    g, lam, prob = hm2019(comps, events, conf)
    coef = worst
    if g < worst:
        coef, exact = g, False
    method = ("probabilistic, Higham & Mary 2019 with sqrt(sum_j u_j^2) over the path; min with the worst "
              "case; " + ("Connolly, Higham & Mary 2021 (SR: no independence assumption)" if st.mode == "sr" else
                           "assumes independent mean-zero rounding errors (fails under stagnation)"))
    return coef, exact, method, lam, prob, events


def recommended_tolerance(op: str, dtype: Any, K: int, *, inputs: tuple[Any, ...] | None = None,
                          max_abs: Any = None, kappa: float | None = None, **kw: Any) -> Tolerance:
    """``expected_error_bound(op, dtype, K, **kw).rtol_atol(...)``: (rtol, atol) with ``.assumptions``."""
    b = expected_error_bound(op, dtype, K, **kw)
    return b.rtol_atol(*(inputs or ()), max_abs=max_abs, kappa=kappa)
