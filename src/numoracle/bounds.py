"""Guaranteed (and probabilistic) error bounds for sums, dot products and matrix products.

``expected_error_bound(op, dtype, K, ...)`` returns an :class:`ErrorBound`: per output element

    |y_hat - y| <= c * sum_i |t_i|  +  u_out * |y|  +  a

where ``t_i`` are the exact terms (``a_i b_i`` for dot/matmul, ``x_i`` for sum) of the exact
result ``y``, ``c`` is :attr:`ErrorBound.coefficient`, the ``u_out`` term is present when the
result is stored in a narrower ``out`` format, and ``a`` is a tiny absolute term for underflow
(gradual underflow makes additions exact, but products, FMAs, block roundings and input
roundings into the subnormal range lose absolute, not relative, accuracy).

Worst case (the default) uses THEORY.md §2's *master rule*: the leaf on the deepest path of the
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
  term and one rounding of the block result (THEORY §4). H100 FP8: ``"blockfma:32:13:13"``.
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
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .errors import ArgumentTypeError
from .formats import AnyFormat, format_of
from .orderspec import OrderSpec, parse_order
from .rounding import Rounding
from .tolerance import (
    _cdiv,
    _ceil_log2,
    _eta,
    _fup,
    _hm2019,
    _pow2,
    _prod_pow,
    _products_exact,
    _products_on_grid,
    nested,
    sci,
)

__all__ = ["expected_error_bound", "ErrorBound", "Component", "parse_order", "OrderSpec", "OPS", "KINDS"]

OPS = ("sum", "dot", "matmul", "quantized_matmul")
KINDS = ("worst", "probabilistic")
_UNBIASED = ("rne", "rna", "sr")
_H = "THEORY.md §2 master rule [D]"


def _innermost(o: OrderSpec) -> OrderSpec:
    return _innermost(o.inner) if o.kind in ("blocked", "splitk", "promoted") and o.inner else o


def _final_acc(o: OrderSpec, acc: AnyFormat) -> AnyFormat:
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


# ---- components --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Component:
    """``count`` roundings of relative size ``u`` on the deepest leaf's path; factor (1+u)^count - 1."""

    name: str
    u: Fraction
    count: int
    formula: str
    source: str
    mean_zero: bool = True  # unbiased errors (the probabilistic model may apply)

    @property
    def factor(self) -> Fraction:
        return _prod_pow([(1 + self.u, self.count)])[0] - 1

    def describe(self) -> str:
        if self.count == 0:
            return f"{self.name}: none. {self.formula} [{self.source}]"
        return (f"{self.name}: {self.count} x u = {_pow2(self.u)} -> (1+u)^{self.count} - 1 = {sci(self.factor)}. "
                f"{self.formula} [{self.source}]")


@dataclass(frozen=True)
class _Site:
    label: str
    sites: int  # per output element
    eta: Fraction


def _u(fmt: AnyFormat, mode: str) -> Fraction:
    return Fraction(0) if fmt.is_integer else fmt.unit_roundoff(mode)


def _conv(comps: list[Component], sites: list[_Site], a: AnyFormat, b: AnyFormat, mode: str, count: int,
          what: str, src: str) -> None:
    if not nested(a, b):
        comps.append(Component(f"{what} conversion", _u(b, mode), 1, f"each {what} rounded from {a.name} to {b.name}",
                               src, mode in _UNBIASED))
        sites.append(_Site(f"{what}s rounded to {b.name}", count, _eta(b, mode)))


def _path(o: OrderSpec, n: int, acc: AnyFormat, mode: str, where: str = "") -> tuple[list[Component], list[_Site]]:
    """Components on the deepest path of summing n terms in acc, and the underflow sites of the whole tree."""
    u, unb = _u(acc, mode), mode in _UNBIASED
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
        h = (min(o.n, n) - 1) + _ceil_log2(_cdiv(n, o.n))
        f = (f"pairwise (tree) summation of n = {n} terms: h = ceil(log2 n) = {h}" if o.n <= 1 else
             f"pairwise with leaf blocks of <= B = {o.n} terms in any order: h = (B-1) + ceil(log2 ceil(n/B)) = {h}")
        return [Component("accumulation" + where, u, h, f + f" in {acc.name} ({mode})", src, unb)], []
    if o.kind == "numpy":
        a = o.acc or acc
        chunk = o.n or n
        c = _cdiv(n, chunk)
        h = _numpy_depth(min(chunk, n)) + (c - 1)
        comps = [Component("accumulation" + where, _u(a, "rne"), h,
                           f"numpy pairwise_sum of chunks of {min(chunk, n)} (8 interleaved accumulators up to 128 "
                           f"terms, halving above) plus {c - 1} chunk additions, in {a.name}: h = {h}",
                           "numpy loops_utils.h.src via numoracle.orders.NumpyPairwise; " + _H)]
        sites: list[_Site] = []
        if o.outer_acc is not None and not nested(a, o.outer_acc):
            comps.append(Component("carry rounding" + where, _u(o.outer_acc, "rne"), c,
                                   f"the running result stored in {o.outer_acc.name} after each of the {c} chunks",
                                   "numoracle.orders.NumpyPairwise", True))
            sites.append(_Site(f"carries rounded to {o.outer_acc.name}", c, _eta(o.outer_acc, "rne")))
        return comps, sites
    if o.kind == "blockfma":
        bacc = o.acc or acc
        m, F, N = _cdiv(n, o.n), o.frac_bits, o.n
        beta = Fraction(N + 1, 2**F)
        p_out = (bacc.man_bits if o.out_frac_bits is None else o.out_frac_bits) + 1
        nearest = o.out_rounding in ("rne", "rna")
        ur = Fraction(1, 2 ** (p_out if nearest else p_out - 1))
        eta = Fraction(2) ** (bacc.emin - p_out + 1) / (2 if nearest else 1)
        al = "truncated" if o.truncate else "rounded (any mode)"
        return [
            Component("block alignment" + where, beta, m,
                      f"each block FMA aligns its N + 1 = {N + 1} terms (N = {N} exact products and the running "
                      f"accumulator) to the largest exponent label E and keeps F = {F} fraction bits ({al}): error < "
                      f"(N+1) 2^(E-F) <= (N+1) 2^-F max|t| for normal inputs. Chained over m = ceil(n/N) = {m} "
                      f"blocks, |e_j| <= (1+u)(1+beta)|e_(j-1)| + (u + (1+u) beta) S_j telescopes to "
                      f"((1+beta)(1+u))^m - 1", "THEORY.md §4 per-block bound [D]; Fasi et al. 2021; Khattak & "
                      "Mikaitis 2025", False),
            Component("block normalisation" + where, ur, m,
                      f"each block result rounded ({o.out_rounding}) to {p_out} bits in {bacc.name}'s range"
                      + (" (u = 2^(1-p): directed)" if not nearest else ""), "THEORY.md §4 step 5", nearest),
        ], [_Site(f"block results rounded to {p_out} bits", m, eta),
            _Site("accumulator labels clamped at 2^-126", m, Fraction(N + 1, 2**F) * Fraction(2) ** -126)]
    if o.kind in ("blocked", "splitk"):
        if o.kind == "blocked":
            b, m = min(o.n, n), _cdiv(n, o.n)
            wi, wo = f" (inside blocks of {b})", f" (over {m} block sums)"
        else:  # slices of at most ceil(n/s) terms, at most min(s, n) of them (any slicing)
            b, m = _cdiv(n, o.n), min(o.n, n)
            wi, wo = f" (inside {m} slices of <= {b})", f" (combining {m} slice sums)"
        oacc = o.outer_acc or acc
        ci, si = _path(o.inner or OrderSpec("sequential"), b, acc, mode, where + wi)
        comps, sites = list(ci), [_Site(s.label, s.sites * m, s.eta) for s in si]
        _conv(comps, sites, _final_acc(o.inner or OrderSpec("sequential"), acc), oacc, mode, m, "partial", _H)
        co, so = _path(o.outer or OrderSpec("sequential"), m, oacc, mode, where + wo)
        src2 = ("Blanchard, Higham & Mary 2020; " if o.kind == "blocked" else "") + "THEORY.md §2 [D]"
        return comps + [Component(c.name, c.u, c.count, c.formula, src2, c.mean_zero) for c in co], sites + so
    # promoted: Blocked(every, inner, Sequential(), outer_acc)
    G, M = min(o.n, n), _cdiv(n, o.n)
    oacc = o.outer_acc or acc
    uo = _u(oacc, mode)
    ci, si = _path(o.inner or OrderSpec("sequential"), G, acc, mode, where + f" (inside groups of {G})")
    comps, sites = list(ci), [_Site(s.label, s.sites * M, s.eta) for s in si]
    src = "DeepSeek-V3 report §3.3.2; THEORY.md §4 software model [D]"
    _conv(comps, sites, _final_acc(o.inner or OrderSpec("sequential"), acc), oacc, mode, M, "group result", src)
    comps.append(Component("promotion scale multiply" + where, uo, 1,
                           "the group result times its per-group scales: one rounding (exact without scales; "
                           "counted to stay guaranteed)", src, mode in _UNBIASED))
    sites.append(_Site("promotion scale multiplies", M, _eta(oacc, mode)))
    comps.append(Component("promotion accumulation" + where, uo, M - 1,
                           f"the {M} promoted group results added sequentially in {oacc.name} ({mode}): h = {M - 1}",
                           src, mode in _UNBIASED))
    return comps, sites


# ---- the bound ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ErrorBound:
    """An error bound for one output element; see the module docstring for the inequality."""

    op: str
    dtype: AnyFormat
    acc: AnyFormat
    K: int
    order: str
    kind: str
    rounding: str
    fma: bool
    out: AnyFormat | None
    inputs_rounded_from: AnyFormat | None
    shape: tuple[int, ...] | None
    confidence: float | None
    components: tuple[Component, ...]
    coefficient: Fraction  # c (includes the (1 + u_out) factor when there is an output rounding)
    exact: bool  # coefficient is the exact rational (else an upper bound)
    worst_coefficient: Fraction
    depth: int  # roundings at the accumulator(s) on the deepest leaf's path (h_max)
    method: str
    u_out: Fraction | None
    atol_const: Fraction  # absolute underflow term of the accumulation and output, per element
    input_underflow: tuple[Fraction, Fraction, Fraction] | None  # (eta_in, u_in, amplification)
    sites: tuple[_Site, ...] = ()
    lambda_: Fraction | None = None
    probability: float | None = None
    events: int | None = None
    notes: tuple[str, ...] = ()
    needs_no_product_underflow: bool = False
    sigma: Fraction = field(default=Fraction(0))  # sum of count*u (gamma form)
    block_label: tuple[Fraction, Fraction] | None = None  # ((N+1) 2^-F * amplification, dtype min normal)

    # -- numbers
    @property
    def coefficient_float(self) -> float:  # rounded upward
        return _fup(self.coefficient)

    @property
    def vacuous(self) -> bool:
        """c >= 1: the bound allows 100% error relative to sum|t_i| and says nothing useful."""
        return self.coefficient >= 1

    def gamma(self) -> Fraction:
        """The gamma form (1+u_out) * s/(1-s), s = sum_j count_j u_j (= gamma_h for one precision).

        Never smaller than the master-rule coefficient; raises ValueError when s >= 1.
        """
        if self.sigma >= 1:
            raise ValueError(f"gamma form undefined: n*u = {sci(self.sigma)} >= 1 (gamma_n = nu/(1-nu) needs "
                             f"nu < 1); the master-rule coefficient prod(1+u_j) - 1 = {sci(self.worst_coefficient)} "
                             "needs no such condition" + (" (and is vacuous: >= 1)" if self.vacuous else ""))
        g = self.sigma / (1 - self.sigma)
        return g * (1 + self.u_out) if self.u_out else g

    # -- data-dependent forms (tolerance.py)
    def tolerance(self, *inputs: Any, reference: Any = None) -> Any:
        """Elementwise absolute bound for these inputs (see :func:`numoracle.tolerance.tolerance`)."""
        from .tolerance import tolerance

        return tolerance(self, *inputs, reference=reference)

    def rtol_atol(self, *inputs: Any, max_abs: Any = None, kappa: float | None = None) -> Any:
        """(rtol, atol) for assert_close, with ``.assumptions`` (see :func:`numoracle.tolerance.rtol_atol`)."""
        from .tolerance import rtol_atol

        return rtol_atol(self, *inputs, max_abs=max_abs, kappa=kappa)

    # -- text
    def _head(self) -> str:
        acc = f"{self.acc.name} ({self.rounding})"
        extra = [f"out={self.out.name}"] if self.out else []
        extra += [f"inputs rounded from {self.inputs_rounded_from.name}"] if self.inputs_rounded_from else []
        extra += [f"shape={self.shape}"] if self.shape else []
        return (f"{self.op}: inputs {self.dtype.name}, accumulator {acc}, K = {self.K}, order {self.order}, "
                f"fma={self.fma}, kind={self.kind}" + "".join(", " + e for e in extra))

    def __repr__(self) -> str:
        return f"<ErrorBound {self._head()}: c = {sci(self.coefficient)}{' (vacuous)' if self.vacuous else ''}>"

    def __str__(self) -> str:
        from .tolerance import describe_bound

        return describe_bound(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (Fractions as exact strings where short, decimals rounded up)."""
        from .tolerance import bound_dict

        return bound_dict(self)


# ---- the builder ---------------------------------------------------------------------------------
def _check(op: Any, K: Any, kind: Any, confidence: Any) -> tuple[str, int, str, float]:
    if not isinstance(op, str) or op.lower() not in OPS:
        raise ValueError(f"unknown op {op!r}; ops: {', '.join(OPS)}")
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


def expected_error_bound(op: str, dtype: Any, K: int, *, acc: Any = None, order: Any = None, fma: bool = True,
                         kind: str = "worst", confidence: float = 0.999, out: Any = None,
                         inputs_rounded_from: Any = None, shape: Any = None, rounding: Any = "rne",
                         out_rounding: Any = None, tight_rn: bool = False, **quant: Any) -> ErrorBound:
    """The error bound of ``op`` ("sum", "dot", "matmul") over K terms of ``dtype`` accumulated in ``acc``.

    dtype: the format of the values the kernel reads (for matmul: of A and B). acc: the accumulator
    (default dtype); rounding: its rounding mode (default "rne"). order: see the module docstring
    (default None = any order, depth K-1). out: the output storage format, rounded once at the end
    with out_rounding (default: rounding, as in ``simulate``). inputs_rounded_from: the format the
    inputs were rounded (RN) from into dtype; the bound is then against the exact result of the
    unrounded inputs. kind: "worst" (guaranteed) or "probabilistic" (Higham & Mary 2019: holds with
    probability >= confidence, union bound over the K error products of an element and over the
    elements of ``shape`` when given). tight_rn: also try the Rump / Jeannerod-Rump bound k*u (RN,
    one precision, sequential) and keep the smaller.

    Raises ValueError for an unknown op/kind/order, K < 1, an accumulator that cannot hold the
    inputs of a sum, probabilistic bounds on biased (directed, truncating) roundings.
    """
    op, K, kind, conf = _check(op, K, kind, confidence)
    if op == "quantized_matmul":  # numoracle.quantmatmul (its keywords: block=, scale_fmt=, a_params= ...)
        from .quantmatmul import quantized_matmul_error_bound as qmm

        return qmm(dtype, K, acc=acc, order=order, fma=fma, kind=kind, confidence=conf, out=out, shape=shape,
                   inputs_rounded_from=inputs_rounded_from, rounding=rounding, out_rounding=out_rounding,
                   tight_rn=tight_rn, **quant)  # type: ignore[return-value]
    if quant:
        raise TypeError(f"expected_error_bound got unexpected keyword(s) {', '.join(quant)} for op={op!r}")
    dtype = format_of(dtype)
    acc = dtype if acc is None else format_of(acc)
    out = None if out is None else format_of(out)
    src = None if inputs_rounded_from is None else format_of(inputs_rounded_from)
    mode = Rounding.of(rounding).value
    omode = mode if out_rounding is None else Rounding.of(out_rounding).value
    o = parse_order(order)
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
    bf = _innermost(o) if _innermost(o).kind == "blockfma" else None
    if bf is not None and (acc.is_integer or dtype.is_integer):
        raise ValueError("block-FMA orders need floating-point inputs and accumulator")
    notes = ["no overflow anywhere (an overflow gives inf/NaN, which no finite tolerance accepts)",
             "gradual underflow (no FTZ/DAZ): additions are then exact in the subnormal range",
             f"the kernel reads {dtype.name} values" + (f" rounded (RN) from {src.name} values" if src else "")]
    if out is not None:
        notes.append(f"the result is rounded once ({omode}) to {out.name}")

    comps: list[Component] = []
    # input rounding
    n_in = 1 if op == "sum" else 2
    in_exact = src is None or nested(src, dtype)
    u_in = Fraction(0) if in_exact else dtype.unit_roundoff("rne")
    if src is not None:
        comps.append(Component("input rounding", u_in, 0 if in_exact else n_in,
                               f"every {src.name} value is a {dtype.name} value (exact)" if in_exact else
                               f"each {'term' if op == 'sum' else 'factor'} rounded {src.name} -> {dtype.name} "
                               f"(RN): {'(1+u_in)' if op == 'sum' else '(1+u_in)^2'} per leaf",
                               "THEORY.md §2 mixed precision [D]; Blanchard et al. 2020"))
    # products
    inner = _innermost(o)
    if inner.kind == "numpy" and inner.acc is not None:
        acc = inner.acc  # the order fixes its accumulator
    sites: list[_Site] = []
    h_prod = 0
    if op != "sum":
        if inner.kind == "blockfma":
            comps.append(Component("products", Fraction(0), 0, "exact inside the block FMA", "THEORY.md §4 step 1"))
        elif _products_exact(dtype, acc):
            comps.append(Component("products", Fraction(0), 0, f"exact in {acc.name}: 2 p_in = "
                                   f"{2 * dtype.precision} <= p_acc = {acc.precision}", "THEORY.md §2 [D]"))
        else:
            h_prod = 1
            how = ("rounded inside the FMA that adds it; s_1 = fl(a_1 b_1) makes the first leaf the deepest, so "
                   "h_max is as without FMA and other leaves are one rounding shallower" if fma else
                   f"each product rounded once to {acc.name}")
            comps.append(Component("products", _u(acc, mode), 1, f"2 p_in = {2 * dtype.precision} > p_acc = "
                                   f"{acc.precision}: {how}", "Higham 2002 §3.1; THEORY.md §2", mode in _UNBIASED))
        if inner.kind != "blockfma" and not _products_on_grid(dtype, acc):
            sites.append(_Site(f"products {'in FMAs ' if fma else ''}rounded into {acc.name}'s subnormal range",
                               K, _eta(acc, mode)))
    path, psites = _path(o, K, acc, mode)
    comps += path
    sites += psites
    acc_comps = [c for c in comps if c.name != "input rounding"]
    depth = sum(c.count for c in acc_comps)
    p_path, ex1 = _prod_pow([(1 + c.u, c.count) for c in acc_comps])
    p_all, ex2 = _prod_pow([(1 + c.u, c.count) for c in comps])
    worst, exact, method = p_all - 1, ex1 and ex2, "worst case, master rule (guaranteed)"
    sigma = sum((c.count * c.u for c in comps), Fraction(0))
    needs = False
    if tight_rn:
        why = []
        if kind != "worst" or mode not in ("rne", "rna") or o.kind != "sequential":
            why.append("kind='worst', rounding to nearest and order='sequential'")
        if src is not None:
            why.append("no inputs_rounded_from")
        if op != "sum" and h_prod and fma:
            why.append("fma=False when products round (Jeannerod & Rump analyse separately rounded products)")
        if acc.is_integer:
            why.append("a floating-point accumulator")
        if why:
            raise ValueError("tight_rn (Rump 2012 / Jeannerod & Rump 2013 / Rump, Bunger & Jeannerod 2016: k*u "
                             "under RN) needs " + "; ".join(why))
        k = (K - 1) + h_prod
        rbj = k * _u(acc, mode)
        if rbj < worst:
            worst, exact = rbj, True
            method = (f"worst case, k*u with k = {k} (Rump 2012 for sums, Jeannerod & Rump 2013 for dot products; "
                      "RN, recursive, no restriction on k; guaranteed)")
        needs = op != "sum" and bool(sites)
        if needs:
            notes.append("tight_rn: no product underflows (Jeannerod & Rump assume none); .tolerance checks it")
    coef, lam, prob, events = worst, None, None, None
    if kind == "probabilistic":
        bad = [c.name for c in comps if c.count and not c.mean_zero]
        if bad or mode not in _UNBIASED:
            why = f"{mode} rounding" if mode not in _UNBIASED else f"{bad[0]} (truncation / round toward zero)"
            raise ValueError(f"kind='probabilistic' (Higham & Mary 2019) needs mean-zero rounding errors, but {why} "
                             "errs with a bias (THEORY.md §3 caveat ii); use kind='worst'")
        events = K * outputs
        g, lam, prob = _hm2019(comps, events, conf)
        if g < worst:
            coef, exact = g, False
        method = ("probabilistic, Higham & Mary 2019 with sqrt(sum_j u_j^2) over the path [D]; min with the worst "
                  "case; " + ("Connolly, Higham & Mary 2021 (SR: no independence assumption)" if mode == "sr" else
                               "assumes independent mean-zero rounding errors (fails under stagnation)"))
    # output
    fin = _final_acc(o, acc)
    u_out = None if out is None or nested(fin, out) else out.unit_roundoff(omode)
    if out is not None and u_out is None:
        notes.append(f"every {fin.name} value is a {out.name} value: storing the result is exact")
    amp = p_path * (1 + u_out) if u_out else p_path
    atol = sum((s.sites * s.eta for s in sites), Fraction(0))
    atol = atol * amp if atol else atol  # (0 * an infinite amplification is 0, not NaN)
    if u_out:
        coef = coef * (1 + u_out)
        worst = worst * (1 + u_out)
        atol += _eta(out, omode)
    in_uf = None
    if not in_exact and src is not None and src.min_subnormal < dtype.min_normal:
        in_uf = (dtype.min_subnormal / 2, u_in, amp)
    label = None
    if bf is not None:
        label = (Fraction(bf.n + 1, 2**bf.frac_bits) * amp, dtype.min_normal)
        notes.append("block FMA exponent labels of subnormal inputs are clamped at emin (Khattak & Mikaitis): "
                     ".tolerance adds (N+1) 2^-F min_normal (|other factor| + min_normal) per such product")
    return ErrorBound(op, dtype, acc, K, str(o), kind, mode, bool(fma), out, src, shape,
                      conf if kind == "probabilistic" else None, tuple(comps), coef, exact, worst, depth, method,
                      u_out, atol, in_uf, tuple(sites), lam, prob, events, tuple(notes), needs, sigma, label)
