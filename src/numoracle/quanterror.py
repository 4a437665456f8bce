"""Quantization error: elementwise bounds, what they imply for SQNR and cosine, and the metrics themselves.

``quantization_error_bound(q, x)`` bounds ``|x - dequantize(quantize(x))|`` element by element, for
the :class:`~numoracle.quantize.Quantized` ``q`` of ``x`` (or quantize parameters). With S the
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
non-negative operands, as :mod:`numoracle.tolerance` does), so the bound is never below the exact
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

from .convert import decode
from .formats import AnyFormat, Format
from .interop import to_codes
from .quantscale import two_sum
from .reference import exact_dot
from .tolerance import _add_up, _fup, _mul_up, _pow2, _up

__all__ = ["quantization_error_bound", "QuantErrorReport", "sqnr", "cosine", "sqnr_bound", "cosine_bound",
           "ComputeModel"]

_INF = np.float64(np.inf)
_NEAREST = ("rne", "rna")


# ---- float64 helpers ---------------------------------------------------------------------------
def _dn(r: np.ndarray) -> np.ndarray:
    """A lower bound of the exact result of one RN operation on non-negative exact operands."""
    r = np.asarray(r, np.float64)
    return np.where(r > 0, np.nextafter(r, -_INF), r)


def _as_values(x: Any, name: str) -> np.ndarray:
    """Exact float64 values of an array (numpy, ml_dtypes, torch, lists); NaN/inf kept."""
    if isinstance(x, np.ndarray) and x.dtype in (np.float64, np.float32, np.float16):
        return x.astype(np.float64)
    try:
        codes, fmt = to_codes(x)
    except TypeError as e:
        raise TypeError(f"{name}: {e}") from None
    v = decode(codes, fmt)
    if v.dtype != np.float64:
        if v.size and np.abs(v.astype(np.float64)).max() > 2**53:
            raise ValueError(f"{name}: integers beyond 2^53 are not exact in float64")
        v = v.astype(np.float64)
    return v


def _exact_sq_sum(v: np.ndarray) -> tuple[float, int]:
    """(m, e) with sum v^2 ~= m * 4^e, m the correctly rounded sum of (v 2^-e)^2 (no overflow)."""
    v = v.ravel()
    if v.size == 0:
        return 0.0, 0
    big = float(np.max(np.abs(v)))
    if big == 0:
        return 0.0, 0
    e = math.frexp(big)[1]
    w = np.ldexp(v, -e)  # exact unless |v 2^-e| underflows: those squares are < 2^-2000 of the largest
    return float(exact_dot(w, w)), e


def _flat_pair(x: Any, y: Any, who: str) -> tuple[np.ndarray, np.ndarray]:
    a, b = _as_values(x, "x"), _as_values(y, "y")
    if a.shape != b.shape:
        raise ValueError(f"{who}: x has shape {a.shape} and y has shape {b.shape}; give arrays of one shape")
    bad = ~(np.isfinite(a) & np.isfinite(b))
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"{who}: {int(bad.sum())} NaN/inf value(s) (first at flat index {i}: x = {a.ravel()[i]}, "
                         f"y = {b.ravel()[i]}); these metrics need finite data (mask them out first)")
    return a.ravel(), b.ravel()


# ---- metrics -----------------------------------------------------------------------------------
def sqnr(x: Any, y: Any) -> float:
    """Signal-to-quantization-noise ratio in dB: 10 log10(sum x^2 / sum (x - y)^2).

    ``x`` is the reference signal, ``y`` its approximation (e.g. ``dequantize(quantize(x))``). Both
    sums are exact (TwoSum differences, exact dot products of power-of-two-scaled data), so only the
    final logarithms round. ``inf`` when x and y are identical (all-zero included), ``-inf`` when x is
    all zero and y is not. Raises ValueError for NaN/inf or different shapes.

    >>> round(sqnr([1.0, 2.0], [1.0, 2.5]), 6)   # 10 log10(5 / 0.25)
    13.0103
    """
    a, b = _flat_pair(x, y, "sqnr")
    s, e = two_sum(a, -b)
    if not (s.any() or e.any()):
        return math.inf
    sig, es = _exact_sq_sum(a)
    if sig == 0:
        return -math.inf
    k = math.frexp(float(np.max(np.abs(s))))[1] if s.any() else math.frexp(float(np.max(np.abs(e))))[1]
    ss, ee = np.ldexp(s, -k), np.ldexp(e, -k)
    noise = float(exact_dot(np.concatenate([ss, 2 * ss, ee]), np.concatenate([ss, ee, ee])))
    if abs(es - k) <= 1:  # ratio near 1: 10 log10(1 + (sig - noise)/noise) with the difference exact
        xs = np.ldexp(a, -k)
        diff = float(exact_dot(np.concatenate([xs, ss, 2 * ss, ee]), np.concatenate([xs, -ss, -ee, -ee])))
        if abs(diff) < noise / 2:
            return 10.0 * math.log1p(diff / noise) / math.log(10.0)
    return 10.0 * (math.log10(sig) - math.log10(noise)) + 20.0 * (es - k) * math.log10(2.0)


def cosine(x: Any, y: Any) -> float:
    """Cosine similarity sum(x y) / sqrt(sum x^2 sum y^2), from exact dot products (clamped to [-1, 1]).

    1.0 exactly when x and y are identical and nonzero; NaN when either is all zero (the angle is
    undefined, and NaN fails every threshold comparison). Raises ValueError for NaN/inf or shapes.
    """
    a, b = _flat_pair(x, y, "cosine")
    if not a.any() or not b.any():
        return math.nan
    ka = math.frexp(float(np.max(np.abs(a))))[1]
    kb = math.frexp(float(np.max(np.abs(b))))[1]
    sa, sb = np.ldexp(a, -ka), np.ldexp(b, -kb)
    num = float(exact_dot(sa, sb))
    na, nb = float(exact_dot(sa, sa)), float(exact_dot(sb, sb))
    if np.array_equal(a, b):
        return 1.0
    return max(-1.0, min(1.0, num / math.sqrt(na) / math.sqrt(nb)))


def _bound_array(bound: Any, x: np.ndarray | None) -> np.ndarray:
    if isinstance(bound, QuantErrorReport):
        return bound.bound
    try:
        b = np.asarray(bound, np.float64)
        if x is not None and b.shape != x.shape:
            b = np.broadcast_to(b, x.shape)
    except (ValueError, TypeError) as e:
        like = "" if x is None else f" {x.shape}"
        raise ValueError(f"bound must be a QuantErrorReport or an array of bounds shaped like x{like} "
                         f"({str(e).split('.')[0]})") from None
    return b


def sqnr_bound(x: Any, bound: Any) -> float:
    """The SQNR (dB) that an elementwise error bound guarantees: 10 log10(sum x^2 / sum bound^2), rounded down.

    ``bound``: a :class:`QuantErrorReport` (from :func:`quantization_error_bound`) or an array of
    elementwise bounds |x_i - y_i| <= bound_i. Then sum (x - y)^2 <= sum bound^2, so
    ``sqnr(x, y) >= sqnr_bound(x, bound)`` for every y within the bound (the sums here are rounded
    outward and the result pushed down past the logarithms' rounding). ``inf`` when every bound is 0.
    """
    a = _as_values(x, "x")
    b = _bound_array(bound, a)
    if b.shape != a.shape:
        raise ValueError(f"sqnr_bound: x has shape {a.shape} and the bound {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()) or (b < 0).any():
        raise ValueError("sqnr_bound needs finite x and finite non-negative bounds (a NaN/inf element or a "
                         "void bound has no SQNR guarantee)")
    if not b.any():
        return math.inf
    sig, es = _exact_sq_sum(a)
    if sig == 0:
        return -math.inf
    noise, eb = _exact_sq_sum(b)
    sig, noise = math.nextafter(sig, 0.0), math.nextafter(noise, math.inf)
    r = 10.0 * (math.log10(sig) - math.log10(noise)) + 20.0 * (es - eb) * math.log10(2.0)
    return r - (abs(r) + 100.0) * 2.0**-48


def cosine_bound(x: Any, bound: Any) -> float:
    """The cosine similarity an elementwise bound guarantees: sqrt(1 - sum bound^2 / sum x^2), rounded down.

    With ||y - x|| <= r < ||x|| the angle between x and y is at most arcsin(r / ||x||), so
    ``cosine(x, y) >= cosine_bound(x, bound)``; -1.0 when r >= ||x|| (no guarantee).
    """
    s = sqnr_bound(x, bound)
    if s == math.inf:
        return 1.0
    ratio = 10.0 ** (-s / 10.0)  # >= sum b^2 / sum x^2 (s rounded down), up to 1 ulp of the power
    ratio = math.nextafter(ratio, math.inf)
    if ratio >= 1.0:
        return -1.0
    c = math.sqrt(1.0 - ratio)
    return math.nextafter(math.nextafter(c, 0.0), 0.0)


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
        return self.fmt.min_subnormal / 2 if self.mode in _NEAREST else self.fmt.min_subnormal

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
        return _up(np.abs(s) + np.abs(e))

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
        u = "1/2 ulp" if self.rounding in _NEAREST else "1 ulp (strict)"
        ir, cl, ed = self.in_range, self.clipped, self.edge
        lines = [f"QuantErrorReport: {n} element(s) of {self.fmt.name} ({self.rounding}), compute "
                 f"{c.fmt.name}: {c.describe}",
                 "  |x - dequantize(quantize(x))| <= S*(|t - x/S| + err_elem(t)) inside the range; |x| - max*S "
                 "(exact) where the element saturates",
                 f"  - element rounding: {u} of {self.fmt.name} at |t| (ulp = 1 for integers), times S"
                 + (f"; max {float(self.rounding_term[ir].max()):.6g}" if ir.any() else ""),
                 f"  - compute rounding: |t - x/S| <= |x/S| (|eps| (1+u) + u) + eta, u = {_pow2(c.u)}, eta = "
                 f"{_pow2(c.eta)}, eps = {'S R' if c.recip else 'S/D'} - 1 (0 when the divisor is the scale)"
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
    t_up, t_dn = _up(q), _dn(q)  # |t*| in [t_dn, t_up]
    u, eta = _fup(cm.u), _fup(cm.eta)
    rel = _add_up(_mul_up(eps, _fup(1 + cm.u)), u)
    with np.errstate(all="ignore"):
        D = _add_up(_up(t_up * rel), eta)  # |t - t*| <= D
    t_hi = _add_up(t_up, D)
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
        half = 0.5 if mode in _NEAREST else 1.0
        rterm = _up(S * (ulp * half))
        cterm = _up(S * D)
        inside = _add_up(rterm, cterm)
        hs, ls = hi * S, lo * S  # |x - hi S| (the exact saturation error), |x - lo S|
        top = _up(np.maximum(xf - _dn_signed(hs), _up_signed(hs) - xf))
        bot = _up(np.maximum(xf - _dn_signed(ls), _up_signed(ls) - xf))
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
    return QuantErrorReport(fmt, mode, cm, x, np.asarray(S), bound, _up(S * ulp), rterm, cterm, clip_err,
                            clipped & ~nonfinite & ~void, edge & ~nonfinite & ~void, nonfinite, void,
                            zero_s & ~nonfinite & ~void, notes)


def _dn_signed(v: np.ndarray) -> np.ndarray:
    """A lower bound of the exact value of one RN operation (any sign)."""
    return np.where(np.isfinite(v), np.nextafter(v, -_INF), v)


def _up_signed(v: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(v), np.nextafter(v, _INF), v)


def quantization_error_bound(q: Any, x: Any, **quantize_params: Any) -> QuantErrorReport:
    """Elementwise bounds on |x - dequantize(quantize(x))| (see the module docstring).

    ``q``: the :class:`~numoracle.quantize.Quantized` of ``x``; or the element format (then
    ``quantize(x, q, **quantize_params)`` is computed); or a mapping of quantize's keyword arguments
    including ``fmt``. ``x``: the original values (numpy / ml_dtypes / torch; NaN/inf get no bound).
    Returns a :class:`QuantErrorReport`; ``report.exceeded(q.dequantize())`` is all False by the theory.
    """
    from .quantize import Quantized, quantize

    xv = _as_values(x, "x")
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
            eps = _add_up(np.abs(1.0 - prod), _mul_up(np.abs(prod), 2.0**-52))  # |1 - S R| (S R rounded once)
        else:
            Dv = lay.expand(np.asarray(q.divisors, np.float64))
            same = Dv == S
            eps = np.where(same, 0.0, _up(_add_up(np.abs(S - Dv), 0.0) / np.where(Dv == 0, 1.0, np.abs(Dv))))
            eps = np.where(same, 0.0, _mul_up(eps, 1.0 + 2.0**-51))
    eps = np.where(np.isfinite(eps), eps, np.inf)
    notes = []
    sat = p.overflow == "saturate"
    if not sat:
        notes.append(f"overflow={p.overflow!r}: elements that may leave the range get no finite bound (void)")
    if p.scale_rule == "nvfp4":
        notes.append("NVFP4: t is computed with the divisor fl(d * S_dec), not the dequantisation scale d * S_dec "
                     "(eps = S/D - 1 accounts for it)")
    return _core(x, S, q.fmt, lo, hi, p.rounding, cm, eps, rinf=rinf, saturating=sat, notes=tuple(notes))
