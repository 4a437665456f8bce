"""Error bound of a quantized matrix product: operand quantisation + scaled accumulation + output rounding.

``expected_error_bound("quantized_matmul", dtype, K, acc=..., order=..., ...)`` returns a
:class:`QuantMatmulBound`. For C = A @ B with A (M, K) and B (K, N) quantised (element codes q, scales
s per K-block of G elements, optional zero points and global scales), the modelled kernel is the
common one:

1. per K-block, the element products (q_a - z_a)(q_b - z_b) accumulated in ``acc`` along ``order``
   (INT32 for integer elements: exact; FP32 for FP8/FP4: the ``expected_error_bound("matmul", ...)``
   components, reused as they are);
2. the block result converted to ``scale_acc`` (FP32; exact when it fits), multiplied by
   fl(s_a s_b) (each product rounded unless exact: powers of two, or few enough bits);
3. the m = ceil(K/G) scaled block results added in ``scale_acc`` (``outer_order``, default sequential);
4. global scales (NVFP4 style): fl(g_a g_b) and one more multiply; then the output rounding ``out``.

With A^ = dequantize(q_a), B^ likewise (exact), y = A^ B^ and Y = A B (the original operands):

    |C_hat - Y| <= E_A |B| + |A| E_B + E_A E_B          (quantisation: |A^ - A| <= E_A elementwise)
                 + c |A^| |B^| + (1 + u_out) a + u_out |y|   (the kernel on the quantised operands)

E_A, E_B from :func:`numoracle.quant.bounds.error.quantization_error_bound`; c = prod over the deepest leaf's
roundings (1 + u_j) - 1 (master rule, docs/theory.md §2) including (1 + u_out); a = underflow terms (scale
products and multiplies into FP32's subnormal range, the accumulation's own). An operand given
without quantisation (plain FP32 activations, weight-only quantisation) has scale 1 and E = 0.
``.tolerance(A, B, qa=, qb=)`` evaluates it elementwise in float64 rounded upward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ...bounds.boundmath import Component, add_up, check_member, fup, margin, mul_up, nested, pow2_text, prod_pow, sci
from ...bounds.expected import ErrorBound, expected_error_bound, register_bound_op
from ...core.formats.format import FP32, AnyFormat, IntFormat, format_of
from ...core.formats.interop import to_codes
from ...core.formats.policy import Rounding
from ..recipe import QuantRecipe

__all__ = ["QuantMatmulBound", "quantized_matmul_error_bound", "quantized_matmul_bound"]

_Q = "docs/theory.md §2.1; quantmatmul model"


def _fmt_opt(f: Any) -> AnyFormat | None:
    return None if f is None else format_of(f)


def _scale_product_exact(fa: AnyFormat | None, fb: AnyFormat | None, acc: AnyFormat) -> bool:
    """s_a * s_b exact in acc (underflow aside): one side unscaled, or few enough significant bits."""
    if fa is None or fb is None:
        return True
    return fa.precision + fb.precision <= acc.precision if not (fa.is_integer or fb.is_integer) else False


def _pow2_scales(fa: AnyFormat | None, fb: AnyFormat | None) -> bool:
    """Every scale product is a power of two (E8M0 scales, or sides without a scale)."""
    return all(f is None or (not f.is_integer and f.man_bits == 0) for f in (fa, fb))


@dataclass(frozen=True, eq=False)
class QuantMatmulBound:
    """A priori part of the quantized-matmul bound: the kernel coefficient and its components.

    ``coefficient`` c multiplies sum_k |a^_k b^_k| (the dequantised operands) and includes (1 + u_out);
    the operands' quantisation errors are data-dependent: see :meth:`tolerance`.
    """

    dtype: AnyFormat
    dtype_b: AnyFormat
    K: int
    block: int
    acc: AnyFormat
    scale_acc: AnyFormat
    order: str
    outer_order: str
    rounding: str
    out: AnyFormat | None
    scale_fmt: AnyFormat | None
    scale_fmt_b: AnyFormat | None
    global_scale: bool
    asymmetric: bool
    inner: ErrorBound
    components: tuple[Component, ...]
    coefficient: Fraction
    kernel_coefficient: Fraction  # c without the output factor
    u_out: Fraction | None
    eta_scale: Fraction
    eta_out: Fraction
    a_params: dict | QuantRecipe | None = None
    b_params: dict | QuantRecipe | None = None
    notes: tuple[str, ...] = field(default=())

    op = "quantized_matmul"
    kind = "worst"

    @property
    def m(self) -> int:
        """Number of K-blocks (scaled partial results per output element)."""
        return -(-self.K // self.block)

    @property
    def vacuous(self) -> bool:
        return self.coefficient >= 1

    @property
    def coefficient_float(self) -> float:
        return fup(self.coefficient)

    def _head(self) -> str:
        b = f"K-blocks of {self.block}" if self.block < self.K else "scales constant along K"
        fb = f" x {self.dtype_b.name}" if self.dtype_b != self.dtype else ""
        return (f"quantized_matmul: elements {self.dtype.name}{fb}, K = {self.K} ({b}), accumulator {self.acc.name} "
                f"({self.rounding}), order {self.order}, scales applied in {self.scale_acc.name}"
                + (f", out={self.out.name}" if self.out else ""))

    def __repr__(self) -> str:
        return f"<QuantMatmulBound {self._head()}: c = {sci(self.coefficient)}>"

    def __str__(self) -> str:
        lines = [f"QuantMatmulBound  {self._head()}",
                 "  |C_hat - A B| <= E_A|B| + |A|E_B + E_A E_B + c * |A^||B^| + (1+u_out) a" + (" + u_out |A^B^|"
                                                                                               if self.u_out else ""),
                 "    (per output element; A^, B^ = dequantised operands, E = elementwise quantisation bounds)",
                 f"  c = {sci(self.coefficient, 8)} (master rule over the deepest leaf; exact rational)"]
        if self.vacuous:
            lines.append("  VACUOUS: c >= 1; use a wider accumulator or a shallower order")
        lines.append("  components:")
        lines.append("    - A quantisation: |A^ - A| <= E_A elementwise (quantization_error_bound; data-dependent): "
                     "E_A |B|")
        lines.append("    - B quantisation: |B^ - B| <= E_B: |A| E_B")
        lines.append("    - cross term: E_A E_B")
        lines += [f"    - {c.describe()}" for c in self.components]
        if self.u_out:
            lines.append(f"    - output rounding to {self.out.name}: + u_out |y| with u_out = "
                         f"{pow2_text(self.u_out)}, and (1+u_out) times the rest")
        lines.append(f"  underflow (absolute): {pow2_text(self.eta_scale)} per scale product / multiply into "
                     f"{self.scale_acc.name}'s subnormal range"
                     + (f", {pow2_text(self.eta_out)} output" if self.out else ""))
        lines += [f"  assumes: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "dtype": self.dtype.name, "dtype_b": self.dtype_b.name, "K": self.K,
                "block": self.block, "acc": self.acc.name, "scale_acc": self.scale_acc.name, "order": self.order,
                "outer_order": self.outer_order, "rounding": self.rounding,
                "out": self.out.name if self.out else None, "coefficient": sci(self.coefficient, 17),
                "kernel_coefficient": sci(self.kernel_coefficient, 17), "vacuous": self.vacuous,
                "components": [{"name": c.name, "u": str(c.u), "count": c.count, "factor": sci(c.factor, 17),
                                "formula": c.formula, "source": c.source} for c in self.components],
                "assumptions": list(self.notes)}

    def rtol_atol(self, *args: Any, **kw: Any) -> Any:
        raise ValueError("a quantized matmul's tolerance depends on the operands' quantisation errors, which "
                         "depend on the data: use bound.tolerance(A, B, qa=..., qb=...) for elementwise bounds")

    # -- data ------------------------------------------------------------------------------------
    def tolerance(self, A: Any, B: Any, *, qa: Any = None, qb: Any = None, parts: bool = False) -> Any:
        """Elementwise bound on |C_hat - A @ B| (float64, rounded up) for the original operands A (M, K), B (K, N).

        qa, qb: their Quantized (default: quantised here with ``a_params`` / ``b_params``; an operand with
        neither is plain: its values must be ``dtype`` values, scale 1). ``parts=True`` returns a dict of
        the arrays "quantization", "kernel", "output" and "total".
        """
        return _evaluate(self, A, B, qa, qb, parts)


def _inner_dtype(fa: AnyFormat, fb: AnyFormat, asymmetric: bool) -> AnyFormat:
    """Step 1: one format holding both operands' (q - zp) values (zero points add a bit to integers)."""
    ia, ib = fa, fb
    if asymmetric:
        ia, ib = (IntFormat(f.bits + 1, True) if f.is_integer else f for f in (fa, fb))
    if nested(ia, ib):
        return ib
    if nested(ib, ia):
        return ia
    raise ValueError(f"element formats {fa.name} and {fb.name}: neither holds every value of the other; "
                     "the accumulation model needs one format for both")


def _block_and_scale_components(comps: list, inner: Any, acc_f: AnyFormat, sacc: AnyFormat, sa: Any, sb: Any,
                                m: int, mode: str, outer_order: Any, global_scale: bool) -> tuple[list, str]:
    """Step 2: the roundings after each K-block's accumulation.

    Conversion, scale product and multiply, the sum of the m scaled block results (in its order) and the
    global scales. Returns (components, the outer order's text).
    """
    us = sacc.unit_roundoff(mode)
    if acc_f.is_integer:
        comps.append(Component("integer result conversion", us, 1, f"each {acc_f.name} block result converted to "
                               f"{sacc.name} (exact when |D| <= 2^{sacc.precision}; counted)", _Q))
    elif not nested(inner.acc, sacc):
        comps.append(Component("partial conversion", us, 1, f"each {inner.acc.name} block result rounded to "
                               f"{sacc.name}", _Q))
    pexact = _scale_product_exact(sa, sb, sacc)
    comps.append(Component("scale product s_a*s_b", us, 0 if pexact else 1,
                           "exact (one side unscaled, or p_a + p_b <= p_acc)" if pexact else
                           f"fl(s_a s_b) in {sacc.name}", _Q))
    p2 = _pow2_scales(sa, sb)
    comps.append(Component("scale multiply", us, 0 if p2 else 1, "block result times a power of two: exact" if p2
                           else f"fl(D * fl(s_a s_b)) in {sacc.name}, once per K-block", _Q))
    ostr = "sequential"
    if m > 1:
        ob = expected_error_bound("sum", sacc, m, acc=sacc, order=outer_order, rounding=mode)
        ostr = ob.order
        comps += [Component(c.name + f" (of the {m} scaled block results)", c.u, c.count, c.formula, c.source,
                            c.mean_zero) for c in ob.components]
    if global_scale:
        comps.append(Component("global scales", us, 2, f"fl(g_a g_b) and the final multiply in {sacc.name}", _Q))
    return comps, ostr


def _weight_only(dtype: Any, dtype_b: Any, K: int, scaled: dict, kw: dict) -> Any:
    """The dequantise-then-accumulate bound when dtype_b names weight-only weights (None otherwise)."""
    from .weightonly import dequant_matmul_bound, weight_only_kind

    if not isinstance(dtype, QuantRecipe) and weight_only_kind(dtype) is not None:
        raise ValueError(f"{dtype!r} holds weights: give A's format as dtype and the weights as dtype_b= (the "
                         "dequantise-then-accumulate model: weights are B)")
    if isinstance(dtype_b, QuantRecipe) or weight_only_kind(dtype_b) is None:
        return None
    extra = [k for k, v in scaled.items() if v]
    if extra:
        raise TypeError(f"weights {dtype_b!r} carry their own blocks and scales (dequantise-then-accumulate); "
                        f"do not pass {', '.join(extra)}")
    return dequant_matmul_bound(dtype, K, dtype_b, **kw)


def quantized_matmul_error_bound(dtype: Any, K: int, *, acc: Any = None, order: Any = None, fma: bool = True,
                                 kind: str = "worst", confidence: float = 0.999, out: Any = None,
                                 inputs_rounded_from: Any = None, shape: Any = None, rounding: Any = "rne",
                                 out_rounding: Any = None, tight_rn: bool = False, dtype_b: Any = None,
                                 block: int | None = None, scale_fmt: Any = "fp32", scale_fmt_b: Any = "same",
                                 scale_acc: Any = FP32, global_scale: bool = False, asymmetric: bool = False,
                                 outer_order: Any = None, a_params: Any = None,
                                 b_params: Any = None, weights_fmt: Any = None) -> QuantMatmulBound:
    """The quantized-matmul bound (see the module docstring); ``expected_error_bound`` dispatches here.

    dtype / dtype_b: element formats of A / B (dtype_b defaults to dtype); acc: accumulator of the
    element products (default INT32 for integer elements, FP32 otherwise); order: its order inside a
    K-block (bounds.py strings / orders objects); block: K-block size G of the scales along K (None = K:
    per-tensor / per-channel scales); scale_fmt / scale_fmt_b: the scale formats (None: operand not
    scaled); scale_acc: where scales are applied and block results summed (FP32); outer_order: order
    of that sum; global_scale: NVFP4-style per-tensor scales; asymmetric: zero points (integer elements
    then reach one more bit); a_params / b_params: quantize keyword arguments ``.tolerance`` uses, or a
    QuantRecipe (dtype / dtype_b may be one too: its format, and its keywords as a_params / b_params).
    dtype_b a weight-only format ("nf4" or another codebook, "gguf:Q4_0", "int4:gptq"): the dequantise-then-
    accumulate bound (quant/bounds/weightonly.py; ``weights_fmt``: the format the dequantised weights are multiplied
    in).
    """
    if kind != "worst":
        raise ValueError("quantized_matmul supports kind='worst' only (quantisation errors are deterministic)")
    wo = _weight_only(dtype, dtype_b, K, dict(block=block, asymmetric=asymmetric, global_scale=global_scale,
                                             a_params=a_params, b_params=b_params),
                      dict(acc=acc, order=order, fma=fma, out=out, rounding=rounding, weights_fmt=weights_fmt))
    if wo is not None:
        return wo
    if inputs_rounded_from is not None or tight_rn:
        raise ValueError("quantized_matmul models the inputs' rounding as quantisation (a_params / b_params, or "
                         "Quantized operands in .tolerance); inputs_rounded_from and tight_rn do not apply")
    del confidence, shape
    if isinstance(dtype, QuantRecipe):     # A's recipe: its element format, and its quantize keywords for A
        if a_params is not None:
            raise TypeError("quantized_matmul: give A's recipe as dtype or as a_params, not both")
        dtype, a_params = dtype.fmt, dtype
    if isinstance(dtype_b, QuantRecipe):
        if b_params is not None:
            raise TypeError("quantized_matmul: give B's recipe as dtype_b or as b_params, not both")
        dtype_b, b_params = dtype_b.fmt, dtype_b
    fa, fb = format_of(dtype), format_of(dtype if dtype_b is None else dtype_b)
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise ValueError(f"K (the reduction length) must be an integer >= 1, got {K!r}")
    G = K if block is None else int(block)
    if G < 1 or G > K:
        raise ValueError(f"block (the K-block size of the scales) must lie in 1..K = {K}, got {block!r}")
    sacc = format_of(scale_acc)
    if sacc.is_integer:
        raise ValueError(f"scale_acc must be a float format (scales are applied in it), not {sacc.name}")
    mode = Rounding.of(rounding).value
    omode = mode if out_rounding is None else Rounding.of(out_rounding).value
    sa = _fmt_opt(scale_fmt)
    sb = sa if isinstance(scale_fmt_b, str) and scale_fmt_b == "same" else _fmt_opt(scale_fmt_b)
    inner_dtype = _inner_dtype(fa, fb, asymmetric)
    acc_f = format_of(acc) if acc is not None else (IntFormat(32) if inner_dtype.is_integer else FP32)
    inner = expected_error_bound("matmul", inner_dtype, G, acc=acc_f, order=order, fma=fma, rounding=mode)
    m = -(-K // G)
    where = f" (inside K-blocks of {G})" if m > 1 else ""
    comps = [Component(c.name + where, c.u, c.count, c.formula, c.source, c.mean_zero) for c in inner.components]
    comps, ostr = _block_and_scale_components(comps, inner, acc_f, sacc, sa, sb, m, mode, outer_order,
                                              global_scale)
    kc, _ = prod_pow([(1 + inner.coefficient, 1)] + [(1 + c.u, c.count) for c in comps[len(inner.components):]])
    kc -= 1
    o = _fmt_opt(out)
    u_out = None if o is None or nested(sacc, o) else o.unit_roundoff(omode)
    coef = kc * (1 + u_out) if u_out else kc
    notes = ("no overflow anywhere (the scale products and results stay within the finite range; checked by "
             ".tolerance)", "gradual underflow (no FTZ)",
             "the kernel applies the scales after each K-block's accumulation (common INT8/FP8/MX kernels)")
    eta_o = Fraction(0) if o is None or o.is_integer else (o.min_subnormal / 2 if Rounding.of(omode).is_nearest
                                                            else o.min_subnormal)
    eta_s = sacc.min_subnormal / 2 if Rounding.of(mode).is_nearest else sacc.min_subnormal
    return QuantMatmulBound(fa, fb, K, G, acc_f, sacc, inner.order, ostr, mode, o, sa, sb, bool(global_scale),
                            bool(asymmetric), inner, tuple(comps), coef, kc, u_out, eta_s, eta_o,
                            a_params, b_params, notes)


def quantized_matmul_bound(A: Any, B: Any, qa: Any = None, qb: Any = None, *, acc: Any = None, order: Any = None,
                           out: Any = None, rounding: Any = "rne", scale_acc: Any = FP32, outer_order: Any = None,
                           fma: bool = True) -> QuantMatmulBound:
    """The bound for these operands: formats, K-blocks, scale formats and zero points read from qa / qb.

    ``qa`` / ``qb``: Quantized of A / B, or None for a plain operand (values in its own dtype, scale 1).
    ``qb`` weight-only weights (Int4Weights, CodebookQuantized, GgufWeights): the dequantise-then-accumulate
    bound, a :class:`~numoracle.quant.bounds.weightonly.DequantMatmulBound` (A plain).
    Call ``.tolerance(A, B, qa=qa, qb=qb)`` on the result for the elementwise bound.
    """
    from .weightonly import dequant_matmul_bound, is_weight_only

    if is_weight_only(qa):
        raise ValueError("qa holds weight-only weights; the dequantise-then-accumulate model has them as B: "
                         "quantized_matmul_bound(A, B, qb=weights)")
    if is_weight_only(qb):
        if qa is not None:
            raise ValueError("weight-only qb with a quantised A: the model reads A as its values; pass qa=None")
        K = np.shape(B)[0]
        return dequant_matmul_bound(to_codes(A)[1], K, qb, acc=acc, order=order, fma=fma, out=out,  # type: ignore[return-value]
                                    rounding=rounding, qb=qb)
    da = _Operand(A, qa, "A", -1)
    db = _Operand(B, qb, "B", -2)
    if da.K != db.K:
        raise ValueError(f"A @ B needs A.shape[-1] == B.shape[-2], got {da.K} and {db.K}")
    ga, gb = da.block, db.block
    if ga % gb and gb % ga:
        raise ValueError(f"the K-blocks of A's scales ({ga}) and B's ({gb}) do not nest; no kernel applies both "
                         "per block: re-quantise one of them")
    return quantized_matmul_error_bound(da.fmt, da.K, dtype_b=db.fmt, acc=acc, order=order, out=out, rounding=rounding,
                                        block=min(ga, gb), scale_fmt=da.scale_fmt, scale_fmt_b=db.scale_fmt,
                                        scale_acc=scale_acc, global_scale=da.global_ or db.global_,
                                        asymmetric=da.asym or db.asym, outer_order=outer_order, fma=fma)


# ---- data ------------------------------------------------------------------------------------------
class _Operand:
    """One operand: original values, element values (q - zp), block scales, global scale, quantisation bound."""

    def __init__(self, X: Any, q: Any, name: str, axis_k: int) -> None:
        from .error import _expand, quantization_error_bound
        from .metrics import _as_values

        self.name = name
        self.x = _as_values(X, name)
        if self.x.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix (A: M x K, B: K x N), got shape {self.x.shape}")
        if not np.isfinite(self.x).all():
            raise ValueError(f"{name} holds NaN/inf; the bound needs finite operands")
        self.K = self.x.shape[axis_k]
        self.q = q
        if q is not None and not hasattr(q, "params"):
            raise TypeError(f"q{name.lower()} is a {type(q).__name__}, not a Quantized; weight-only weights "
                            "(Int4Weights, CodebookQuantized, GgufWeights) go through "
                            "quantized_matmul_bound(A, B, qb=weights), the dequantise-then-accumulate bound")
        if q is None:
            self.fmt = to_codes(X)[1]
            self.v, self.s, self.g = self.x, np.ones_like(self.x), 1.0
            self.hat, self.err = self.x, np.zeros_like(self.x)
            self.block, self.scale_fmt, self.global_, self.asym = self.K, None, False, False
            return
        if tuple(q.codes.shape) != self.x.shape:
            raise ValueError(f"{name} has shape {self.x.shape}, but its Quantized has shape {tuple(q.codes.shape)}")
        self.fmt = q.fmt
        zp = q.zero_points
        self.asym = zp is not None and bool(np.any(np.asarray(zp) != 0))
        self.v = np.asarray(q.values(), np.float64)
        if self.asym:
            self.v = self.v - _expand(np.asarray(zp, np.float64), self.x.shape)
        grid = np.asarray(q.scales, np.float64)
        self.s = _expand(grid, self.x.shape)
        nb = grid.shape[axis_k] if grid.ndim == 2 else 1
        self.block = -(-self.K // nb)
        self.global_ = q.global_scale is not None
        if q.params.global_scale_convention != "decode":
            raise ValueError(f"{name} stores its NVFP4 global scale in global_scale_convention="
                             f"{q.params.global_scale_convention!r}; the quantized-matmul bound models 'decode' "
                             "(blocks scaled by d, the sum by S_dec): quantise with global_scale_convention='decode'")
        self.g = float(q.global_scale) if self.global_ else 1.0
        self.scale_fmt = q.params.scale_fmt
        self.hat = np.asarray(q.dequantize(), np.float64)
        rep = quantization_error_bound(q, self.x)
        if (rep.void | rep.nonfinite).any():
            raise ValueError(f"{name}: {int(rep.void.sum())} element(s) have no finite quantisation bound "
                             "(a non-saturating overflow or a NaN scale); the matmul bound is void")
        # dequantize is exact when the bits fit 53, else correctly rounded: half an ulp more covers both
        self.err = add_up(rep.bound, mul_up(np.abs(self.hat), 2.0**-53))


def _resolve(b: QuantMatmulBound, X: Any, q: Any, params: Any, fmt: AnyFormat, sfmt: AnyFormat | None,
             name: str, axis_k: int) -> _Operand:
    if q is None and params is not None:
        from ..quantizer import quantize

        q = quantize(X, params) if isinstance(params, QuantRecipe) else quantize(X, fmt, **params)
    op = _Operand(X, q, name, axis_k)
    if op.K != b.K:
        raise ValueError(f"{name}'s reduction axis has length {op.K}, but the bound is for K = {b.K}")
    if q is None:
        check_member(op.x, fmt, name, f"quantise it (qa=/qb= or a_params=/b_params=) or give the bound "
                      f"dtype={op.fmt.name}")
        return op
    if op.fmt != fmt:
        raise ValueError(f"{name} is quantised to {op.fmt.name}, but the bound is for {fmt.name} elements")
    if op.block % b.block:
        raise ValueError(f"{name}'s scales change every {op.block} elements along K, but the bound models "
                         f"K-blocks of {b.block}: build it with block={op.block} (or quantized_matmul_bound)")
    if sfmt != op.scale_fmt:
        raise ValueError(f"{name}'s scales are {op.scale_fmt.name if op.scale_fmt else None}, but the bound counts "
                         f"roundings for {sfmt.name if sfmt else None} scales")
    if op.asym and not b.asymmetric:
        raise ValueError(f"{name} has zero points; build the bound with asymmetric=True")
    if op.global_ and not b.global_scale:
        raise ValueError(f"{name} has a global scale; build the bound with global_scale=True")
    return op


def _mm_up(a: np.ndarray, b: np.ndarray, K: int) -> np.ndarray:
    """An upper bound of a @ b for non-negative a, b (any summation order)."""
    return mul_up(np.matmul(a, b), margin(K))


def _evaluate(b: QuantMatmulBound, A: Any, B: Any, qa: Any, qb: Any, parts: bool) -> Any:
    oa = _resolve(b, A, qa, b.a_params, b.dtype, b.scale_fmt, "A", -1)
    ob = _resolve(b, B, qb, b.b_params, b.dtype_b, b.scale_fmt_b, "B", -2)
    K, G, m = b.K, b.block, b.m
    ax, bx = np.abs(oa.x), np.abs(ob.x)
    quant = add_up(add_up(_mm_up(oa.err, bx, K), _mm_up(ax, ob.err, K)), _mm_up(oa.err, ob.err, K))
    S = _mm_up(np.abs(oa.hat), np.abs(ob.hat), K)  # sum |a^ b^|
    va, vb = np.abs(oa.v), np.abs(ob.v)
    if b.acc.is_integer:
        blk = max((float(np.matmul(va[:, i:i + G], vb[i:i + G, :]).max()) for i in range(0, K, G)), default=0.0)
        if blk > b.acc.max_value:
            raise ValueError(f"a K-block's sum |q_a q_b| reaches {blk:.6g} > {b.acc.name} max {b.acc.max_value}: "
                             "the integer accumulator may overflow")
    amp = fup(1 + b.kernel_coefficient)
    c_in = fup(1 + b.inner.coefficient)
    sab = _mm_up(oa.s[:, ::G], ob.s[::G, :], m)  # sum over blocks of s_a s_b
    eta = fup(b.eta_scale)
    a = mul_up(sab, fup(b.inner.atol_const)) if b.inner.atol_const else np.zeros_like(S)
    a = add_up(a, mul_up(_mm_up(va, vb, K), eta * c_in))  # fl(s_a s_b) underflow, times |block result|
    a = add_up(a, fup(m * (b.eta_scale + b.eta_scale * b.inner.atol_const)))  # the scale multiplies
    if b.global_scale:
        inv_g = fup(b.eta_scale * Fraction(amp) / (Fraction(oa.g) * Fraction(ob.g)))
        a = add_up(a, add_up(mul_up(S, inv_g), eta))
    a = mul_up(a, amp)
    big = float(np.max(add_up(mul_up(S, amp), a))) if S.size else 0.0
    smax = float(np.max(sab)) if sab.size else 0.0
    if not math.isfinite(big) or big >= float(b.scale_acc.max_finite) or smax >= float(b.scale_acc.max_finite):
        raise ValueError(f"scaled values reach {max(big, smax):.6g}, beyond {b.scale_acc.name}'s range: the kernel "
                         "may overflow, and the bound assumes it does not")
    kern = add_up(mul_up(S, fup(b.coefficient)), mul_up(a, fup(1 + (b.u_out or 0))))
    out = np.zeros_like(S)
    if b.u_out:
        y = add_up(np.abs(np.matmul(oa.hat, ob.hat)), mul_up(S, (K + 2) * 2.0**-52))
        out = add_up(mul_up(y, fup(b.u_out)), fup(b.eta_out))
    total = add_up(add_up(quant, kern), out)
    if parts:
        return {"quantization": quant, "kernel": kern, "output": out, "total": total}
    return total


register_bound_op("quantized_matmul", quantized_matmul_error_bound)
