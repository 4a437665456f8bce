"""Numbers for error bounds: exact helpers, the Higham-Mary probabilistic factor, and tolerances from data.

``tolerance(bound, *inputs, reference=None)`` turns an :class:`~numoracle.bounds.ErrorBound` into an
elementwise absolute bound for concrete inputs, computed in float64 *rounded upward*: every
float64 operation on non-negative values errs by at most half an ulp, so each product or sum is
followed by ``nextafter(+inf)``, and sums of K non-negative terms computed by numpy/BLAS in any
order (each term passes at most K roundings, no Strassen) are multiplied by the margin
``1 + (K+2) 2^-52 >= (1 - 2^-53)^-(K+1)``. So the tolerance is never smaller than the exact
bound evaluated on the exact inputs.

``rtol_atol`` gives (rtol, atol) for ``assert_close``-style checks (|actual - expected| <= atol +
rtol |expected|), with the assumptions that make it valid in ``.assumptions``.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, Decimal, localcontext
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from .convert import cast, decode
from .formats import AnyFormat
from .interop import to_codes
from .parse import read_exact
from .rounding import Flags

if TYPE_CHECKING:
    from .bounds import Component, ErrorBound

__all__ = ["tolerance", "rtol_atol", "recommended_tolerance", "Tolerance", "sci", "describe_bound", "bound_dict"]

_EXACT_BITS = 1 << 17  # exact rationals up to this many bits; beyond, rounded upward (relative ~2^-180)
_UP_BITS = 192
_INF_LOG2 = 1 << 20  # products past 2^(2^20) are bounded by +inf (closed form, O(1) for any K)


# ---- exact helpers ---------------------------------------------------------------------------
def _round_up(x: Fraction, bits: int = _UP_BITS) -> Fraction:
    """A dyadic >= x with ``bits`` significant bits (x > 0)."""
    if x <= 0:
        return x
    shift = bits - (x.numerator.bit_length() - x.denominator.bit_length())
    if shift >= 0:
        return Fraction(-((-x.numerator << shift) // x.denominator), 1 << shift)
    d = x.denominator << -shift
    return Fraction(-(-x.numerator // d) << -shift)


def _prod_pow(factors: list[tuple[Fraction, int]]) -> tuple[Fraction, bool]:
    """prod base**n (every base >= 1): exact when small, else an upper bound; (value, exact)."""
    factors = [(b, n) for b, n in factors if n > 0 and b != 1]
    log2 = sum(n * math.log1p(float(b - 1)) for b, n in factors) / math.log(2)  # relative error ~1e-15
    if log2 > _INF_LOG2:  # such a relative bound says nothing; +inf bounds it, in O(1) for any K
        return math.inf, False
    bits = sum(n * max(b.numerator.bit_length(), b.denominator.bit_length()) for b, n in factors)
    if bits <= _EXACT_BITS:
        out = Fraction(1)
        for b, n in factors:
            out *= b**n
        return out, True
    out = Fraction(1)
    for b, n in factors:
        r, sq = Fraction(1), b
        while n:
            if n & 1:
                r = _round_up(r * sq)
            n >>= 1
            if n:
                sq = _round_up(sq * sq)
        out = _round_up(out * r)
    return out, False


def _fup(x: Fraction) -> float:
    """The smallest float >= x (inf if it overflows)."""
    try:
        f = float(x)
    except OverflowError:
        return math.inf
    if math.isinf(f):
        return f
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def sci(x: Fraction | float | int, digits: int = 6) -> str:
    """``x`` rounded UP (toward +inf) to ``digits`` significant digits, as text (deterministic)."""
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    x = Fraction(x)
    if x == 0:
        return "0"
    if max(x.numerator.bit_length(), x.denominator.bit_length()) > 3000:
        return _sci_big(x, digits)  # (Decimal's conversion of huge ints is quadratic)
    with localcontext() as ctx:
        ctx.prec = digits
        ctx.rounding = ROUND_CEILING
        d = Decimal(x.numerator) / Decimal(x.denominator)
    return f"{d:f}" if Fraction(1, 1000) <= abs(x) < 10**digits else f"{d:.{digits - 1}e}"


def _sci_big(x: Fraction, digits: int) -> str:
    """``sci`` of a huge or tiny x: the same text (rounded up, exponent form), in time linear in its size."""
    n, d = abs(x.numerator), x.denominator
    s = digits - 1 - int((n.bit_length() - d.bit_length()) * 0.30102999566398)  # 10^s x has ~digits digits
    while True:
        num, den = (n * 10**s, d) if s >= 0 else (n, d * 10**-s)
        q = -(-num // den) if x > 0 else num // den  # toward +inf
        if q >= 10**digits:
            s -= 1
        elif q < 10 ** (digits - 1):
            s += 1
        else:
            break
    m, e, sign = str(q), digits - 1 - s, "-" if x < 0 else ""
    if Fraction(1, 1000) <= abs(x) < 10**digits:  # fixed point, as Decimal's "f" format writes it
        return sign + (m if e == digits - 1 else f"{m[:e + 1]}.{m[e + 1:]}" if e >= 0 else f"0.{'0' * (-e - 1)}{m}")
    return f"{sign}{m[0]}.{m[1:]}e{e:+d}"


def _pow2(x: Fraction) -> str:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return f"2^{e}" if x == Fraction(2) ** e else sci(x)


def _mpf_frac(x: Any) -> Fraction:
    man, exp = x.man_exp
    return Fraction(man) * Fraction(2) ** exp


def _hm2019(comps: list[Component], events: int, confidence: float) -> tuple[Fraction, Fraction, float]:
    """Higham & Mary 2019, Theorem 2.4 form, with mixed u_j [D]: (gamma_tilde upper bound, lambda, probability).

    With X_k = log(1+delta_k) in [log(1-u_k), log(1+u_k)] (width <= 2u_k/(1-u_max)), |E X_k| <= u_k^2/(1-u_k)
    (u_k <= 1/2), Hoeffding gives |sum X_k| <= lambda sqrt(sum u_k^2) + sum u_k^2/(1-u_k) with probability
    >= 1 - 2 exp(-lambda^2 (1-u_max)^2 / 2); for one u this is HM2019's gamma_tilde_n(lambda) and P(lambda).
    lambda is chosen so that ``events`` such products all hold with probability >= confidence (union bound).
    """
    import mpmath

    live = [c for c in comps if c.count]
    if not live:
        return Fraction(0), Fraction(0), 1.0
    umax = max(c.u for c in live)
    if umax > Fraction(1, 2):
        raise ValueError(f"kind='probabilistic' needs u <= 1/2 on every rounding (got {umax}); use kind='worst'")
    s2 = sum(c.count * c.u**2 for c in live)
    mean = sum(c.count * c.u**2 / (1 - c.u) for c in live)

    def mp(f: Fraction) -> Any:
        return mpmath.mpf(f.numerator) / f.denominator

    with mpmath.workdps(60):
        one_u = 1 - mp(umax)
        lam = mpmath.sqrt(2 * mpmath.log(2 * events / (1 - mp(Fraction(confidence))))) / one_u
        lam_f = _round_up(_mpf_frac(lam), 40)  # rounded up: the probability only grows
        fail = events * 2 * mpmath.exp(-(mp(lam_f) ** 2) * one_u**2 / 2)
        g = mpmath.expm1(mp(lam_f) * mpmath.sqrt(mp(s2)) + mp(mean))
        big = g > mpmath.mpf(2) ** _INF_LOG2  # past every float: +inf bounds it (closed form, any K)
        g_f = math.inf if big else _mpf_frac(g) * (1 + Fraction(1, 10**45))  # covers the 60-digit error
        prob = float(1 - fail)
    if prob < confidence * (1 - 1e-15):
        raise AssertionError(f"lambda {lam_f} misses confidence {confidence}: {prob}")  # cannot happen
    return (g_f if big else _round_up(g_f)), lam_f, prob


# ---- format facts ------------------------------------------------------------------------------
def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _ceil_log2(n: int) -> int:
    return (n - 1).bit_length() if n > 0 else 0


def _eta(fmt: AnyFormat, mode: str) -> Fraction:
    """Largest absolute error of one rounding into fmt's subnormal range (gradual underflow)."""
    if fmt.is_integer:
        return Fraction(0)
    return fmt.min_subnormal / 2 if mode in ("rne", "rna") else fmt.min_subnormal


def nested(a: AnyFormat, b: AnyFormat) -> bool:
    """Every value of ``a`` is a value of ``b`` (so converting a -> b is exact)."""
    if a.signed and not b.signed:
        return False
    if a.is_integer:
        if b.is_integer:
            return b.min_value <= a.min_value and a.max_value <= b.max_value
        return a.precision <= b.precision and a.max_finite <= b.max_finite
    if b.is_integer:
        return False
    return (a.precision <= b.precision and a.min_subnormal >= b.min_subnormal
            and a.max_finite <= b.max_finite and (b.has_zero or not a.has_zero))


def _products_exact(dtype: AnyFormat, acc: AnyFormat) -> bool:
    return acc.is_integer or 2 * dtype.precision <= acc.precision


def _products_on_grid(dtype: AnyFormat, acc: AnyFormat) -> bool:
    """Products of dtype values are multiples of acc's smallest subnormal (so no inexact underflow)."""
    if dtype.is_integer or acc.is_integer:
        return True
    return dtype.min_subnormal ** 2 >= acc.min_subnormal


# ---- float64 arithmetic rounded upward (non-negative operands) ------------------------------
_INF = np.float64(np.inf)
_TINY = 5e-324


def _up(r: np.ndarray) -> np.ndarray:
    """Each float64 result of one RN operation on non-negative exact operands, pushed to an upper bound."""
    r = np.asarray(r, np.float64)
    return np.where(r > 0, np.nextafter(r, _INF), r)


def _mul_up(a: np.ndarray, s: float) -> np.ndarray:
    if s == 0:
        return np.zeros_like(np.asarray(a, np.float64))
    r = np.asarray(a, np.float64) * s
    return np.where(np.asarray(a) > 0, np.nextafter(r, _INF), r)


def _add_up(a: Any, b: Any) -> np.ndarray:
    return _up(np.asarray(a, np.float64) + np.asarray(b, np.float64))


def _margin(K: int) -> float:
    """1 + (K+2) 2^-52: bounds (1 - 2^-53)^-(K+1) for K < 2^40 (sums of K products, any order)."""
    return 1.0 + (K + 2) * 2.0**-52


def _f64_products_exact(fmt: AnyFormat) -> bool:
    if fmt.is_integer:
        return 2 * fmt.precision <= 53
    return 2 * fmt.precision <= 53 and fmt.min_subnormal**2 >= Fraction(2) ** -1074 \
        and fmt.max_finite**2 < Fraction(2) ** 1023


# ---- inputs ---------------------------------------------------------------------------------
def _values(x: Any, name: str) -> np.ndarray:
    """Exact float64 values of an array (numpy, ml_dtypes, torch, lists); inf/NaN refused."""
    if isinstance(x, np.ndarray) and x.dtype in (np.float64, np.float32, np.float16):
        v = x.astype(np.float64)
    else:
        codes, fmt = to_codes(x)
        v = decode(codes, fmt)
        if v.dtype != np.float64:
            if v.size and np.abs(v).max() > 2**53:
                raise ValueError(f"{name}: integers beyond 2^53 are not exact in float64")
            v = v.astype(np.float64)
    bad = ~np.isfinite(v)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"{name} holds {int(bad.sum())} non-finite values (inf/NaN; first at flat index {i}: "
                         f"{v.ravel()[i]}); error bounds hold for finite inputs only")
    return v


def _check_member(v: np.ndarray, fmt: AnyFormat, name: str, hint: str) -> None:
    _, fl = cast(v, fmt, flags=True)
    bad = (fl & (Flags.INEXACT | Flags.OVERFLOW | Flags.INVALID)) != 0
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"{name}: {v.ravel()[i]!r} (flat index {i}) is not a {fmt.name} value, but the bound "
                         f"assumes {fmt.name} inputs; {hint}")


def _inputs(b: ErrorBound, inputs: tuple[Any, ...]) -> list[np.ndarray]:
    need = 1 if b.op == "sum" else 2
    if len(inputs) != need:
        names = "x" if need == 1 else ("x, y" if b.op == "dot" else "A, B")
        raise ValueError(f"{b.op} takes {need} input array(s) ({names}), got {len(inputs)}")
    vs = [_values(x, n) for x, n in zip(inputs, ("A", "B") if b.op == "matmul" else ("x", "y"))]
    if b.op == "matmul":
        if any(v.ndim < 2 for v in vs):
            raise ValueError("matmul inputs need at least 2 dimensions (A: ..., M, K and B: ..., K, N); use op='dot' "
                             "for vectors")
        k = (vs[0].shape[-1], vs[1].shape[-2])
    else:
        if any(v.ndim < 1 for v in vs):
            raise ValueError(f"{b.op} inputs need at least 1 dimension (the reduction runs over the last axis)")
        k = tuple(v.shape[-1] for v in vs)
    if any(kk != b.K for kk in k):
        raise ValueError(f"the reduction length of the inputs is {k[0] if len(set(k)) == 1 else k}, but the bound "
                         f"is for K = {b.K}")
    fmt = b.inputs_rounded_from or b.dtype
    hint = ("pass the values before rounding (the reference is computed from them)" if b.inputs_rounded_from else
            "round them first, or describe the rounding with inputs_rounded_from=...")
    for v, n in zip(vs, ("A", "B") if b.op == "matmul" else ("x", "y")):
        _check_member(v, fmt, n, hint)
    return vs


def _contract(op: str, x: np.ndarray, y: np.ndarray | None) -> np.ndarray:
    if op == "sum":
        return np.sum(x, axis=-1)
    if op == "dot":
        return np.sum(x * y, axis=-1)
    return np.matmul(x, y)


def _abs_sum_up(b: ErrorBound, vs: list[np.ndarray]) -> np.ndarray:
    """An upper bound of sum_k |t_k| per output element."""
    y = None if b.op == "sum" else np.abs(vs[1])
    s = _mul_up(_contract(b.op, np.abs(vs[0]), y), _margin(b.K))
    fmt = b.inputs_rounded_from or b.dtype
    if b.op != "sum" and not _f64_products_exact(fmt):
        s = _add_up(s, b.K * _TINY)  # products that underflow float64
    return s


def _input_underflow_up(b: ErrorBound, vs: list[np.ndarray]) -> np.ndarray:
    """sum_k of the absolute input-rounding underflow terms (THEORY §1: fl(x) = x(1+d) + e, d*e = 0)."""
    eta, u_in, _ = b.input_underflow
    e, one_u = float(eta), _fup(1 + u_in)
    small = [np.where((np.abs(v) < float(b.dtype.min_normal)) & (v != 0), e, 0.0) for v in vs]
    if b.op == "sum":
        return _mul_up(np.sum(small[0], axis=-1), _margin(b.K))
    ax, ay = (_mul_up(np.abs(v), one_u) for v in vs)
    # |x^y^ - xy(1+d)(1+d')| <= e_x (|y|(1+u) + e_y) + |x|(1+u) e_y
    t = _add_up(_contract(b.op, small[0], _add_up(ay, small[1])), _contract(b.op, ax, small[1]))
    return _mul_up(t, _margin(b.K))


def _label_term_up(b: ErrorBound, vs: list[np.ndarray]) -> np.ndarray:
    """Block FMA with subnormal inputs: their exponent label is clamped at emin, so 2^E can exceed max|t|;
    2^label <= mn (|other factor| + mn) for a product with a subnormal factor (mn for a subnormal sum term)."""
    mn = float(b.block_label[1])
    if b.inputs_rounded_from is not None:  # the kernel reads the rounded values
        vs = [decode(cast(v, b.dtype), b.dtype) for v in vs]
    sub = [np.where((np.abs(v) < mn) & (v != 0), mn, 0.0) for v in vs]
    if b.op == "sum":
        return _mul_up(np.sum(sub[0], axis=-1), _margin(b.K))
    a0, a1 = (_add_up(np.abs(v), mn) for v in vs)
    return _mul_up(_add_up(_contract(b.op, sub[0], a1), _contract(b.op, a0, sub[1])), _margin(b.K))


def _tolerance_parts(b: ErrorBound, vs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(the bound without the u_out |y| term, sum|t| upper bound)."""
    S = _abs_sum_up(b, vs)
    if b.acc.is_integer and S.size and float(S.max()) > float(b.acc.max_value):
        raise ValueError(f"sum|t| reaches {float(S.max()):.6g} > {b.acc.name} max {b.acc.max_value}: the integer "
                         "accumulator may overflow (wrap), and the exactness the bound assumes is lost")
    if b.needs_no_product_underflow:
        mins = [np.abs(v[v != 0]).min() if np.any(v != 0) else np.inf for v in vs]
        if Fraction(float(mins[0])) * Fraction(float(mins[1])) < b.acc.min_normal:
            raise ValueError(f"tight_rn assumes no product underflows in {b.acc.name}, but min|a| * min|b| = "
                             f"{mins[0] * mins[1]:.3g} < {float(b.acc.min_normal):.3g}; use the default bound")
    t = _mul_up(S, _fup(b.coefficient))
    if b.atol_const:
        t = _add_up(t, _fup(b.atol_const))
    if b.input_underflow is not None:
        t = _add_up(t, _mul_up(_input_underflow_up(b, vs), _fup(b.input_underflow[2])))
    if b.block_label is not None:
        t = _add_up(t, _mul_up(_label_term_up(b, vs), _fup(b.block_label[0])))
    return t, S


def tolerance(b: ErrorBound, *inputs: Any, reference: Any = None) -> np.ndarray | float:
    """Elementwise absolute bound on |kernel result - exact result| for these inputs (float64, rounded up).

    sum: x (..., K) reduced over the last axis; dot: x, y (..., K); matmul: A (..., M, K), B (..., K, N).
    The inputs are the values the kernel reads (of ``dtype``), or with ``inputs_rounded_from`` the
    values before that rounding. With an output rounding the term u_out |y| needs |y|: from
    ``reference`` (the exact result or its correctly rounded float64 value, e.g. from
    numoracle's exact references; |y| <= |ref| (1 + 2^-52)) or, when omitted, derived as
    |fl64(y)| + (K+2) 2^-52 sum|t| (float64 evaluation in any order).
    """
    vs = _inputs(b, inputs)
    t, S = _tolerance_parts(b, vs)
    if b.u_out:
        if reference is not None:
            r = _values(reference, "reference")
            Y = _mul_up(np.abs(r), 1 + 2.0**-52)
            if Y.shape != t.shape:
                Y = np.broadcast_to(Y, t.shape)
        else:
            Y = _add_up(np.abs(_contract(b.op, vs[0], vs[1] if len(vs) > 1 else None)),
                        _mul_up(S, (b.K + 2) * 2.0**-52))
            if b.op != "sum" and not _f64_products_exact(b.inputs_rounded_from or b.dtype):
                Y = _add_up(Y, b.K * _TINY)
        t = _add_up(t, _mul_up(Y, _fup(b.u_out)))
    return float(t) if t.ndim == 0 else t


# ---- rtol / atol -----------------------------------------------------------------------------
class Tolerance(tuple):
    """``(rtol, atol)`` (unpacks as a pair) with ``.assumptions``: the text that makes them valid."""

    assumptions: str

    def __new__(cls, rtol: float, atol: float, assumptions: str) -> Tolerance:
        self = super().__new__(cls, (float(rtol), float(atol)))
        self.assumptions = assumptions
        return self

    @property
    def rtol(self) -> float:
        return self[0]

    @property
    def atol(self) -> float:
        return self[1]

    @property
    def kwargs(self) -> dict[str, float]:
        """``{"rtol": ..., "atol": ...}`` for ``assert_close(actual, expected, **tol.kwargs)``."""
        return {"rtol": self[0], "atol": self[1]}

    def __str__(self) -> str:
        return f"rtol = {self[0]!r}\natol = {self[1]!r}\nassumptions:\n" + "\n".join(
            f"  - {line}" for line in self.assumptions.splitlines())


def rtol_atol(b: ErrorBound, *inputs: Any, max_abs: Any = None, kappa: float | None = None) -> Tolerance:
    """(rtol, atol) such that |actual - expected| <= atol + rtol |expected| holds under the bound's model.

    ``expected`` must be the exact result or its correctly rounded float64 value. One of:

    * ``inputs`` (the arrays .tolerance takes): atol = the largest elementwise bound without the
      output term, rtol = u_out (1 + 2^-52). Guaranteed for these inputs.
    * ``max_abs`` (max|x| for sum; (max|a|, max|b|) or one number for both, for dot/matmul):
      sum|t| <= K max|a| max|b|. Guaranteed for every input within those magnitudes.
    * ``kappa`` (default 1 when nothing is given): ASSUMES sum|t| <= kappa |y| (kappa = 1: every
      term of one sign, no cancellation); rtol = (c kappa + u_out)(1 + 2^-52), atol = the underflow
      terms. NOT a guarantee under cancellation: pass inputs or max_abs there.
    """
    given = sum(x is not None for x in (max_abs, kappa)) + bool(inputs)
    if given > 1:
        raise ValueError("give the inputs, max_abs or kappa, not several")
    one = 1 + 2.0**-52
    r_out = _fup(b.u_out) * one if b.u_out else 0.0
    common = [f"the bound's model: {b._head()}", *b.notes,
              "expected = the exact result or its correctly rounded float64 value (not a low-precision reference)"]
    if inputs:
        vs = _inputs(b, inputs)
        t, _ = _tolerance_parts(b, vs)
        atol = float(np.max(t)) if t.size else 0.0
        return Tolerance(math.nextafter(r_out, math.inf) if r_out else 0.0, atol, "\n".join(
            [f"valid for the given inputs only (atol = the largest elementwise bound c*sum|t| + a over "
             f"{t.size} elements; rtol = u_out)", *common]))
    if max_abs is not None:
        ms = [max_abs] if np.ndim(max_abs) == 0 else list(max_abs)
        if b.op != "sum" and len(ms) == 1:
            ms = ms * 2
        fm = [read_exact(m, "max_abs") for m in ms]
        if len(ms) != (1 if b.op == "sum" else 2) or any(m < 0 for m in fm):
            raise ValueError(f"max_abs must be {'one' if b.op == 'sum' else 'one or two'} finite non-negative "
                             f"number(s), got {max_abs!r}")
        S = b.K * math.prod(fm)
        a = math.inf if math.inf in (b.coefficient, b.atol_const) else b.coefficient * S + b.atol_const
        if b.input_underflow is not None:
            eta, u_in, amp = b.input_underflow
            per = eta if b.op == "sum" else eta * (1 + u_in) * (fm[0] + fm[1]) + eta**2
            a += b.K * per * amp
        if b.block_label is not None:
            lc, mn = b.block_label
            a += b.K * lc * (mn if b.op == "sum" else mn * (fm[0] + fm[1] + 2 * mn))
        return Tolerance(math.nextafter(r_out, math.inf) if r_out else 0.0, _fup(a), "\n".join(
            [f"every input element has |value| <= {', '.join(map(str, ms))}, so sum|t| <= K * "
             f"{' * '.join(map(str, ms))} = {float(S):.6g} (the worst case: no cancellation assumed or needed)",
             *common]))
    kap = Fraction(1) if kappa is None else read_exact(kappa, "kappa")
    if kap < 1:
        raise ValueError(f"kappa = sum|t| / |y| is >= 1 by the triangle inequality, got {kappa}")
    if b.input_underflow is not None or b.block_label is not None:
        raise ValueError("subnormal inputs (input rounding, or block-FMA exponent labels) add an absolute error "
                         "that kappa cannot bound; pass the inputs or max_abs")
    u_out = b.u_out or Fraction(0)
    rtol = _fup((b.coefficient * kap + u_out) * (1 + Fraction(1, 2**52)))
    return Tolerance(rtol, _fup(b.atol_const), "\n".join(
        [f"ASSUMED, not checked: sum|t| <= kappa*|y| with kappa = {kappa if kappa is not None else 1} "
         "(kappa = 1: all terms of one sign). Under cancellation this rtol is NOT a guarantee: near-zero "
         "results can fail; pass the inputs or max_abs instead", *common]))


def recommended_tolerance(op: str, dtype: Any, K: int, *, inputs: tuple[Any, ...] | None = None,
                          max_abs: Any = None, kappa: float | None = None, **kw: Any) -> Tolerance:
    """``expected_error_bound(op, dtype, K, **kw).rtol_atol(...)``: (rtol, atol) with ``.assumptions``."""
    from .bounds import expected_error_bound

    b = expected_error_bound(op, dtype, K, **kw)
    return b.rtol_atol(*(inputs or ()), max_abs=max_abs, kappa=kappa)


# ---- text -------------------------------------------------------------------------------------
def describe_bound(b: ErrorBound) -> str:
    """The text of ``str(bound)``: formula, coefficient, components with numbers and sources, assumptions."""
    t = "a_k b_k" if b.op != "sum" else "x_k"
    lines = [f"ErrorBound  {b._head()}",
             f"  |y_hat - y| <= c * sum_k |{t}|" + (" + u_out*|y|" if b.u_out else "")
             + (" + a" if b.atol_const or b.input_underflow or b.block_label else "")
             + "   (per output element; y exact)",
             f"  c = {sci(b.coefficient, 8)} ({'exact rational' if b.exact else 'rounded up'}; "
             f"{b.method})"]
    if b.vacuous:
        lines.append(f"  VACUOUS: c >= 1 allows 100% error relative to sum|{t}|; this bound says nothing. "
                     "Use a wider accumulator, a shallower order, or kind='probabilistic'.")
    lines.append(f"  deepest leaf: {b.depth} roundings (and block alignments) after the inputs (h_max)")
    lines.append("  components (per leaf: factor = prod(1+u_j) - 1 over the roundings on its path):")
    lines += [f"    - {c.describe()}" for c in b.components]
    if b.u_out:
        lines.append(f"    - output rounding to {b.out.name}: + u_out*|y| with u_out = {_pow2(b.u_out)}, and "
                     f"(1+u_out) times the rest [THEORY.md §2, mixed precision]")
    if b.kind == "probabilistic":
        lines.append(f"  probabilistic: lambda = {sci(b.lambda_, 10)}, holds with probability >= "
                     f"{b.probability:.6g} (union bound over {b.events} error products); worst case "
                     f"c = {sci(b.worst_coefficient)}")
    try:
        lines.append(f"  gamma form: (sum n_j u_j)/(1 - sum n_j u_j) = {sci(b.gamma())} "
                     f"(n*u = {sci(b.sigma)})")
    except ValueError:
        lines.append(f"  gamma form: undefined (n*u = {sci(b.sigma)} >= 1); the master rule above needs no "
                     "such condition")
    a = [f"{s.sites} x {_pow2(s.eta)} ({s.label})" for s in b.sites]
    if b.input_underflow:
        a.append(f"inputs below {b.dtype.name}'s min normal: {_pow2(b.input_underflow[0])} each, times the "
                 "other factor")
    if b.block_label:
        a.append(f"block-FMA labels of subnormal inputs: (N+1) 2^-F * {_pow2(b.block_label[1])} * (|other factor| "
                 "+ min normal) per such product")
    if a:
        lines.append("  underflow (absolute, amplified by later roundings): " + "; ".join(a))
    lines += [f"  assumes: {n}" for n in b.notes]
    return "\n".join(lines)


def bound_dict(b: ErrorBound) -> dict[str, Any]:
    """``bound.to_dict()``: JSON-ready (Fractions as exact strings where short, decimals rounded up)."""

    def frac(x: Fraction | None) -> str | None:
        if x is None or x.numerator.bit_length() + x.denominator.bit_length() > 256:
            return None
        return str(x)

    try:
        g: str | None = sci(b.gamma(), 17)
    except ValueError:
        g = None
    return {
        "op": b.op, "dtype": b.dtype.name, "acc": b.acc.name, "K": b.K, "order": b.order,
        "kind": b.kind, "rounding": b.rounding, "fma": b.fma,
        "out": b.out.name if b.out else None,
        "inputs_rounded_from": b.inputs_rounded_from.name if b.inputs_rounded_from else None,
        "shape": list(b.shape) if b.shape else None, "confidence": b.confidence,
        "coefficient": sci(b.coefficient, 17), "coefficient_fraction": frac(b.coefficient) if b.exact
        else None, "coefficient_exact": b.exact, "worst_coefficient": sci(b.worst_coefficient, 17),
        "vacuous": b.vacuous, "depth": b.depth, "method": b.method, "gamma_form": g,
        "u_out": frac(b.u_out), "atol_const": sci(b.atol_const, 17),
        "lambda": sci(b.lambda_, 12) if b.lambda_ is not None else None, "probability": b.probability,
        "events": b.events,
        "components": [{"name": c.name, "u": frac(c.u), "count": c.count, "factor": sci(c.factor, 17),
                        "formula": c.formula, "source": c.source} for c in b.components],
        "assumptions": list(b.notes),
    }
