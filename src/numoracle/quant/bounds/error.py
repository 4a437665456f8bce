"""Quantization error: elementwise bounds, what they imply for SQNR and cosine, and the metrics themselves.

``quantization_error_bound(q, x)`` bounds ``|x - dequantize(quantize(x))|`` element by element, for
the :class:`~numoracle.quant.Quantized` ``q`` of ``x`` (or quantize parameters). With S the
element's effective scale (block scale times the global scale), t* = x / S exactly, and t the value
the kernel casts (t* rounded in ``compute``, once for a division, twice with ``reciprocal=True``):

* inside the range, |x - S (q - zp)| <= S (|t - t*| + |t' - q'|) where |t - t*| <= |t*| (F - 1) + A
  (F = prod (1+u_c)^(+-1) over the compute roundings, A the absolute underflow terms of the
  compute format) and the element rounding error |t' - q'| <= ulp_elem(|t|)/2 for nearest modes
  (< ulp_elem(|t|) for directed, odd and stochastic ones); ulp_elem is 1 for integer formats and the
  element format's spacing at |t| for floating ones (subnormal spacing below its min normal). The
  compute term is what moves t across a tie of the element grid;
* beyond the range (t outside [lo, hi], lo/hi the smallest and largest element values minus the
  zero point), the element saturates and the error is exactly x - hi S (or lo S - x);
* where the compute rounding could put t on either side of a range end, the larger of the two.

Every number is computed in float64 rounded upward (``nextafter`` after each operation on
non-negative operands, as :mod:`numoracle.bounds.errorbound` does), so the bound is never below the exact
one. ``sqnr(x, y)`` and ``cosine(x, y)`` use exact dot products (``numoracle.exact_dot``) of
power-of-two-scaled data; ``sqnr_bound`` / ``cosine_bound`` give the values an elementwise bound
guarantees: measured SQNR >= sqnr_bound and measured cosine >= cosine_bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ...bounds.boundmath import add_up, fup, mul_up, pow2_text, up
from ...core.eft import two_sum
from ...core.formats.format import AnyFormat, Format
from ...core.formats.policy import Rounding
from .metrics import _as_values, _dn, cosine, cosine_bound, sqnr, sqnr_bound

__all__ = ["quantization_error_bound", "QuantErrorReport", "sqnr", "cosine", "sqnr_bound", "cosine_bound",
           "ComputeModel"]

_INF = np.float64(np.inf)


# ---- the compute model -------------------------------------------------------------------------
@dataclass(frozen=True)
class ComputeModel:
    """How the kernel computes t: one rounding (mode ``mode``) in ``fmt`` of x / D (``recip=False``) or x * R.

    D (the divisor) and R (the rounded reciprocal) come from the quantisation; t* = x / S with S the
    dequantisation scale. With eps = S/D - 1 (or S R - 1), |t - t*| <= |t*| (|eps| (1+u) + u) + eta.
    """

    fmt: Format
    mode: str = "rne"
    recip: bool = False

    @property
    def u(self) -> Fraction:
        return self.fmt.unit_roundoff(self.mode)

    @property
    def eta(self) -> Fraction:
        """Largest absolute error of one rounding into fmt's subnormal range."""
        return self.fmt.min_subnormal / 2 if Rounding.of(self.mode).is_nearest else self.fmt.min_subnormal

    @property
    def describe(self) -> str:
        return (f"t = fl(x * R), R = fl(1 / D) (reciprocal), {self.mode}" if self.recip else
                f"t = fl(x / D), {self.mode}")


def _ulp_elem(T: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """The element format's spacing at magnitude T (an upper bound of |t|): 1 for integers."""
    if fmt.is_integer:
        return np.ones_like(T)
    assert isinstance(fmt, Format)
    _, E = np.frexp(T)  # T = m 2^E, m in [0.5, 1): floor(log2 T) = E - 1
    e = np.maximum(np.where(T > 0, E - 1, fmt.emin), fmt.emin)
    if not fmt.has_subnormals:
        return np.where(T < float(fmt.min_normal), float(fmt.min_normal), np.ldexp(1.0, e - fmt.man_bits))
    return np.ldexp(1.0, (e - fmt.man_bits).astype(np.int64))


def _expand(grid: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A block grid (keepdims) expanded to the element shape (the last block of an axis may be short)."""
    g = np.asarray(grid)
    if g.ndim != len(shape):
        g = g.reshape((1,) * (len(shape) - g.ndim) + g.shape) if g.ndim < len(shape) else g
    for ax, (n, k) in enumerate(zip(shape, g.shape)):
        if k not in (1, n):
            g = np.repeat(g, -(-n // k), axis=ax).take(np.arange(n), axis=ax)
    return np.broadcast_to(g, shape)


def _elem_range(fmt: AnyFormat, params: Any) -> tuple[float, float]:
    """(smallest, largest) element value a quantisation may produce (integers: the clip range)."""
    qmin, qmax = getattr(params, "qmin", 0.0), getattr(params, "qmax", 0.0)
    if qmax > qmin:
        return float(qmin), float(qmax)
    if fmt.is_integer:
        narrow = str(getattr(params, "clip", "narrow")) == "narrow"
        lo, hi = fmt.min_value, fmt.max_value
        if narrow and fmt.signed:
            lo = -hi
        return float(lo), float(hi)
    mx = float(fmt.max_finite)
    return (-mx if fmt.signed else 0.0), mx


# ---- the report --------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class QuantErrorReport:
    """Elementwise bounds on |x - dequantize(quantize(x))| with their parts (arrays of x's shape).

    ``bound`` = the total bound (float64, rounded up; NaN where x is NaN/inf: no bound); ``step`` = the
    element's effective step S * ulp_elem(t); ``rounding_term`` = S * ulp/2 (nearest) or S * ulp;
    ``compute_term`` = S * |t - t*| bound; ``clip_error`` = the exact saturation error where the element
    may clip; masks ``clipped`` (certainly saturated), ``edge`` (the compute rounding decides),
    ``nonfinite`` (x NaN/inf), ``void`` (no finite bound: e.g. a non-saturating overflow, a NaN scale),
    ``zero_scale`` (a zero scale: the bound is |x|, exactly).
    """

    fmt: AnyFormat
    rounding: str
    compute: ComputeModel
    x: np.ndarray
    scale: np.ndarray
    bound: np.ndarray
    step: np.ndarray
    rounding_term: np.ndarray
    compute_term: np.ndarray
    clip_error: np.ndarray
    clipped: np.ndarray
    edge: np.ndarray
    nonfinite: np.ndarray
    void: np.ndarray
    zero_scale: np.ndarray  # the scale is 0: the element dequantises to 0 and the error is |x|
    notes: tuple[str, ...] = field(default=())

    @property
    def shape(self) -> tuple[int, ...]:
        return self.x.shape

    @property
    def in_range(self) -> np.ndarray:
        return ~(self.clipped | self.edge | self.nonfinite | self.void | self.zero_scale)

    @property
    def max_bound(self) -> float:
        ok = ~(self.nonfinite | self.void)
        return float(self.bound[ok].max()) if ok.any() else 0.0

    def errors(self, values: Any) -> np.ndarray:
        """|x - values| rounded up (values: dequantized float64 values, or a Quantized)."""
        v = self._values(values)
        s, e = two_sum(self.x, -v)
        return up(np.abs(s) + np.abs(e))

    def exceeded(self, values: Any) -> np.ndarray:
        """Where |x - values| > bound, decided exactly (TwoSum); NaN/inf x excluded, void bounds never exceed."""
        v = self._values(values)
        fin = ~self.nonfinite & np.isfinite(v)
        xs, vs = np.where(fin, self.x, 0.0), np.where(fin, v, 0.0)
        s, e = two_sum(xs, -vs)
        a, b = np.abs(s), self.bound
        over = (a > b) | ((a == b) & (e * np.sign(s) > 0))
        bad_v = ~self.nonfinite & ~np.isfinite(v)
        return ((over & fin) | bad_v) & ~self.void

    def ratio(self, values: Any) -> np.ndarray:
        """|x - values| / bound per element (0 where both are 0; NaN where x is NaN/inf)."""
        err = self.errors(values)
        with np.errstate(all="ignore"):
            r = np.where(err == 0, 0.0, err / self.bound)
        return np.where(self.nonfinite, np.nan, r)

    def _values(self, values: Any) -> np.ndarray:
        if hasattr(values, "dequantize") and hasattr(values, "codes"):
            values = values.dequantize()
        v = _as_values(values, "values")
        if v.shape != self.x.shape:
            raise ValueError(f"values have shape {v.shape}, but x has shape {self.x.shape}")
        return v

    def sqnr_bound(self) -> float:
        """The SQNR (dB) these bounds guarantee (finite elements; see :func:`sqnr_bound`)."""
        ok = ~self.nonfinite
        if self.void[ok].any():
            return -math.inf
        return sqnr_bound(self.x[ok], self.bound[ok])

    def cosine_bound(self) -> float:
        """The cosine similarity these bounds guarantee (see :func:`cosine_bound`)."""
        ok = ~self.nonfinite
        if self.void[ok].any():
            return -1.0
        return cosine_bound(self.x[ok], self.bound[ok])

    def __str__(self) -> str:
        n = self.x.size
        c = self.compute
        u = "1/2 ulp" if Rounding.of(self.rounding).is_nearest else "1 ulp (strict)"
        ir, cl, ed = self.in_range, self.clipped, self.edge
        lines = [f"QuantErrorReport: {n} element(s) of {self.fmt.name} ({self.rounding}), compute "
                 f"{c.fmt.name}: {c.describe}",
                 "  |x - dequantize(quantize(x))| <= S*(|t - x/S| + err_elem(t)) inside the range; |x| - max*S "
                 "(exact) where the element saturates",
                 f"  - element rounding: {u} of {self.fmt.name} at |t| (ulp = 1 for integers), times S"
                 + (f"; max {float(self.rounding_term[ir].max()):.6g}" if ir.any() else ""),
                 f"  - compute rounding: |t - x/S| <= |x/S| (|eps| (1+u) + u) + eta, u = {pow2_text(c.u)}, eta = "
                 f"{pow2_text(c.eta)}, eps = {'S R' if c.recip else 'S/D'} - 1 (0 when the divisor is the scale)"
                 + (f"; max {float(self.compute_term[ir].max()):.6g}" if ir.any() else ""),
                 f"  - clipped (saturated): {int(cl.sum())} element(s)"
                 + (f", max error {float(self.clip_error[cl].max()):.6g}" if cl.any() else "")
                 + (f"; at the range edge (compute rounding decides): {int(ed.sum())}" if ed.any() else "")]
        if self.zero_scale.any():
            lines.append(f"  - zero scale (dequantised to 0, error |x| exactly): {int(self.zero_scale.sum())}")
        if self.nonfinite.any():
            lines.append(f"  - NaN/inf inputs (no bound): {int(self.nonfinite.sum())}")
        if self.void.any():
            lines.append(f"  - VOID (no finite bound): {int(self.void.sum())} element(s)")
        if n and not self.void.any() and (~self.nonfinite).any():
            lines.append(f"  max bound {self.max_bound:.6g}; implied SQNR >= {self.sqnr_bound():.4f} dB, cosine >= "
                         f"{self.cosine_bound():.8f}")
        lines += [f"  note: {t}" for t in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<QuantErrorReport {self.fmt.name} {self.shape}: max bound {self.max_bound:.6g}, "
                f"{int(self.clipped.sum())} clipped>")


# ---- the core ----------------------------------------------------------------------------------
def _core(x: np.ndarray, S: np.ndarray, fmt: AnyFormat, lo: np.ndarray, hi: np.ndarray, mode: str,
          cm: ComputeModel, eps: np.ndarray, *, rinf: np.ndarray | None = None, saturating: bool = True,
          notes: tuple[str, ...] = ()) -> QuantErrorReport:
    """Elementwise bounds for x quantised with scales S into [lo, hi] (t-space: zero point removed).

    eps: upper bounds of |S/D - 1| (or |S R - 1|) per element; rinf: where the reciprocal is infinite
    (t = +-inf for x != 0). A zero scale dequantises everything to 0 (error |x|); a NaN scale is void.
    """
    x = np.asarray(x, np.float64)
    shape = x.shape
    S, lo, hi, eps = (np.broadcast_to(np.asarray(v, np.float64), shape) for v in (S, lo, hi, eps))
    nonfinite = ~np.isfinite(x)
    xf = np.where(nonfinite, 0.0, x)
    ax = np.abs(xf)
    zero_s = S == 0
    bad_s = ~np.isfinite(S) | (S < 0)
    with np.errstate(all="ignore"):
        q = ax / np.where(zero_s | bad_s, 1.0, S)
    t_up, t_dn = up(q), _dn(q)  # |t*| in [t_dn, t_up]
    u, eta = fup(cm.u), fup(cm.eta)
    rel = add_up(mul_up(eps, fup(1 + cm.u)), u)
    with np.errstate(all="ignore"):
        D = add_up(up(t_up * rel), eta)  # |t - t*| <= D
    t_hi = add_up(t_up, D)
    t_lo = np.maximum(np.where(np.isfinite(t_dn - D), _dn_signed(t_dn - D), 0.0), 0.0)
    if rinf is not None:
        r = np.broadcast_to(rinf, shape) & (ax > 0)
        t_hi, t_lo = np.where(r, np.inf, t_hi), np.where(r, np.inf, t_lo)
    neg = np.signbit(xf)
    tl, th = np.where(neg, -t_hi, t_lo), np.where(neg, -t_lo, t_hi)  # t keeps x's sign
    with np.errstate(all="ignore"):
        above, below = tl > hi, th < lo
        edge_hi, edge_lo = (th > hi) & ~above, (tl < lo) & ~below
        T = np.maximum(np.abs(tl), np.abs(th))
        ulp = _ulp_elem(np.where(np.isfinite(T), T, 0.0), fmt)
        half = 0.5 if Rounding.of(mode).is_nearest else 1.0
        rterm = up(S * (ulp * half))
        cterm = up(S * D)
        inside = add_up(rterm, cterm)
        hs, ls = hi * S, lo * S  # |x - hi S| (the exact saturation error), |x - lo S|
        top = up(np.maximum(xf - _dn_signed(hs), _up_signed(hs) - xf))
        bot = up(np.maximum(xf - _dn_signed(ls), _up_signed(ls) - xf))
    clip_err = np.where(above | edge_hi, top, 0.0) + np.where(below | edge_lo, bot, 0.0)
    clipped = above | below
    edge = (edge_hi | edge_lo) & ~clipped
    bound = np.where(clipped, clip_err, np.where(edge, np.maximum(inside, clip_err), inside))
    void = np.zeros(shape, bool) if saturating else (clipped | edge)
    if rinf is not None:
        void |= np.broadcast_to(rinf, shape) & (ax == 0)  # 0 * inf = NaN
    bound = np.where(zero_s, ax, bound)  # (q - zp) * 0 = 0
    clipped &= ~zero_s
    edge &= ~zero_s
    void |= bad_s | (~np.isfinite(bound) & ~zero_s)
    void &= ~nonfinite
    bound = np.where(nonfinite, np.nan, np.where(void, np.inf, bound))
    return QuantErrorReport(fmt, mode, cm, x, np.asarray(S), bound, up(S * ulp), rterm, cterm, clip_err,
                            clipped & ~nonfinite & ~void, edge & ~nonfinite & ~void, nonfinite, void,
                            zero_s & ~nonfinite & ~void, notes)


def _dn_signed(v: np.ndarray) -> np.ndarray:
    """A lower bound of the exact value of one RN operation (any sign)."""
    return np.where(np.isfinite(v), np.nextafter(v, -_INF), v)


def _up_signed(v: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(v), np.nextafter(v, _INF), v)


def quantization_error_bound(q: Any, x: Any, **quantize_params: Any) -> QuantErrorReport:
    """Elementwise bounds on |x - dequantize(quantize(x))| (see the module docstring).

    ``q``: the :class:`~numoracle.quant.Quantized` of ``x``; or the element format (then
    ``quantize(x, q, **quantize_params)`` is computed); or a mapping of quantize's keyword arguments
    including ``fmt``. ``x``: the original values (numpy / ml_dtypes / torch; NaN/inf get no bound).
    Returns a :class:`QuantErrorReport`; ``report.exceeded(q.dequantize())`` is all False by the theory.
    """
    from ..quantizer import Quantized, quantize

    xv = _as_values(x, "x")
    if isinstance(q, np.ndarray) or hasattr(q, "__array__") and not isinstance(q, Quantized):
        raise TypeError(f"q must be the Quantized of x, an element format or quantize's keyword arguments, not an "
                        f"array ({type(q).__name__}); the values go in x")
    if isinstance(q, Mapping):
        q = quantize(x, **{**q, **quantize_params})
    elif not isinstance(q, Quantized):
        q = quantize(x, q, **quantize_params)
    elif quantize_params:
        raise TypeError("quantization_error_bound(q, x): with a Quantized, give no quantize parameters "
                        f"(got {', '.join(quantize_params)})")
    return _from_quantized(q, xv)


def _from_quantized(q: Any, x: np.ndarray) -> QuantErrorReport:
    """The bound of one Quantized: its scales, divisors / reciprocals, zero points, range and modes."""
    if tuple(x.shape) != tuple(q.shape):
        raise ValueError(f"x has shape {x.shape}, but the Quantized has shape {tuple(q.shape)}; pass the values "
                         "that were quantised")
    p, lay = q.params, q.layout
    S = np.asarray(q.scale_per_element(), np.float64)
    zp = 0.0 if q.zero_points is None else lay.expand(np.asarray(q.zero_points, np.float64))
    lo, hi = _elem_range(q.fmt, p)
    lo, hi = lo - zp, hi - zp
    cm = ComputeModel(p.compute, p.compute_rounding, bool(p.reciprocal))
    rinf = None
    with np.errstate(all="ignore"):
        if p.reciprocal:
            R = lay.expand(np.asarray(q.reciprocals, np.float64))
            rinf = np.isinf(R)
            prod = S * np.where(rinf, 0.0, R)
            eps = add_up(np.abs(1.0 - prod), mul_up(np.abs(prod), 2.0**-52))  # |1 - S R| (S R rounded once)
        else:
            Dv = lay.expand(np.asarray(q.divisors, np.float64))
            same = Dv == S
            eps = np.where(same, 0.0, up(add_up(np.abs(S - Dv), 0.0) / np.where(Dv == 0, 1.0, np.abs(Dv))))
            eps = np.where(same, 0.0, mul_up(eps, 1.0 + 2.0**-51))
    eps = np.where(np.isfinite(eps), eps, np.inf)
    notes = []
    sat = p.overflow == "saturate"
    if not sat:
        notes.append(f"overflow={p.overflow!r}: elements that may leave the range get no finite bound (void)")
    if p.scale_rule == "nvfp4":
        notes.append("NVFP4: t is computed with the divisor fl(d * S_dec), not the dequantisation scale d * S_dec "
                     "(eps = S/D - 1 accounts for it)")
    return _core(x, S, q.fmt, lo, hi, p.rounding, cm, eps, rinf=rinf, saturating=sat, notes=tuple(notes))
