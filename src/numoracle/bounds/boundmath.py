"""Exact and upward-rounded arithmetic for error bounds: the one place bound numbers are computed.

Bounds are exact rationals (``Fraction``) while small and rounded *upward* past a size limit, so a printed or
evaluated bound is never below the true one. The float64 helpers at the end evaluate a bound elementwise with
every operation pushed up by one ULP (non-negative operands), so a tolerance array is an upper bound too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.engine.convert import cast
from ..core.formats.format import AnyFormat
from ..core.formats.policy import Flags, Rounding
from ..core.inputs import exact_float64

__all__ = ["TINY", "add_up", "cdiv", "ceil_log2", "check_member", "underflow_eta", "f64_products_exact",
           "finite_values", "fup", "hm2019", "margin", "mpf_frac", "mul_up", "nested", "pow2_text", "prod_pow",
           "products_exact", "products_on_grid", "round_up", "sci", "up"]

_EXACT_BITS = 1 << 17  # exact rationals up to this many bits; beyond, rounded upward (relative ~2^-180)
_UP_BITS = 192
_INF_LOG2 = 1 << 20  # products past 2^(2^20) are bounded by +inf (closed form, O(1) for any K)


# ---- exact helpers ---------------------------------------------------------------------------
def round_up(x: Fraction, bits: int = _UP_BITS) -> Fraction:
    """A dyadic >= x with ``bits`` significant bits (x > 0)."""
    if x <= 0:
        return x
    shift = bits - (x.numerator.bit_length() - x.denominator.bit_length())
    if shift >= 0:
        return Fraction(-((-x.numerator << shift) // x.denominator), 1 << shift)
    d = x.denominator << -shift
    return Fraction(-(-x.numerator // d) << -shift)


def prod_pow(factors: list[tuple[Fraction, int]]) -> tuple[Fraction, bool]:
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
                r = round_up(r * sq)
            n >>= 1
            if n:
                sq = round_up(sq * sq)
        out = round_up(out * r)
    return out, False


def fup(x: Fraction) -> float:
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


def pow2_text(x: Fraction) -> str:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return f"2^{e}" if x == Fraction(2) ** e else sci(x)


def mpf_frac(x: Any) -> Fraction:
    man, exp = x.man_exp
    return Fraction(man) * Fraction(2) ** exp


# ---- components: roundings on a leaf's path ---------------------------------------------------
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
        return prod_pow([(1 + self.u, self.count)])[0] - 1

    def describe(self) -> str:
        if self.count == 0:
            return f"{self.name}: none. {self.formula} [{self.source}]"
        return (f"{self.name}: {self.count} x u = {pow2_text(self.u)} -> (1+u)^{self.count} - 1 = {sci(self.factor)}. "
                f"{self.formula} [{self.source}]")



@dataclass(frozen=True)
class Site:
    """Absolute-error sites (underflow) on one output element: ``sites`` of size ``eta`` each."""

    label: str
    sites: int  # per output element
    eta: Fraction


def hm2019(comps: list[Component], events: int, confidence: float) -> tuple[Fraction, Fraction, float]:
    """Higham & Mary 2019, Theorem 2.4 form, with mixed u_j: (gamma_tilde upper bound, lambda, probability).

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
        lam_f = round_up(mpf_frac(lam), 40)  # rounded up: the probability only grows
        fail = events * 2 * mpmath.exp(-(mp(lam_f) ** 2) * one_u**2 / 2)
        g = mpmath.expm1(mp(lam_f) * mpmath.sqrt(mp(s2)) + mp(mean))
        big = g > mpmath.mpf(2) ** _INF_LOG2  # past every float: +inf bounds it (closed form, any K)
        g_f = math.inf if big else mpf_frac(g) * (1 + Fraction(1, 10**45))  # covers the 60-digit error
        prob = float(1 - fail)
    if prob < confidence * (1 - 1e-15):
        raise AssertionError(f"lambda {lam_f} misses confidence {confidence}: {prob}")  # cannot happen
    return (g_f if big else round_up(g_f)), lam_f, prob


# ---- format facts ------------------------------------------------------------------------------
def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def ceil_log2(n: int) -> int:
    return (n - 1).bit_length() if n > 0 else 0


def underflow_eta(fmt: AnyFormat, mode: str) -> Fraction:
    """Largest absolute error of one rounding into fmt's subnormal range (gradual underflow)."""
    if fmt.is_integer:
        return Fraction(0)
    return fmt.min_subnormal / 2 if Rounding.of(mode).is_nearest else fmt.min_subnormal


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


def products_exact(dtype: AnyFormat, acc: AnyFormat) -> bool:
    return acc.is_integer or 2 * dtype.precision <= acc.precision


def products_on_grid(dtype: AnyFormat, acc: AnyFormat) -> bool:
    """Products of dtype values are multiples of acc's smallest subnormal (so no inexact underflow)."""
    if dtype.is_integer or acc.is_integer:
        return True
    return dtype.min_subnormal ** 2 >= acc.min_subnormal


# ---- float64 arithmetic rounded upward (non-negative operands) ------------------------------
_INF = np.float64(np.inf)
TINY = 5e-324


def up(r: np.ndarray) -> np.ndarray:
    """Each float64 result of one RN operation on non-negative exact operands, pushed to an upper bound."""
    r = np.asarray(r, np.float64)
    return np.where(r > 0, np.nextafter(r, _INF), r)


def mul_up(a: np.ndarray, s: float) -> np.ndarray:
    if s == 0:
        return np.zeros_like(np.asarray(a, np.float64))
    r = np.asarray(a, np.float64) * s
    return np.where(np.asarray(a) > 0, np.nextafter(r, _INF), r)


def add_up(a: Any, b: Any) -> np.ndarray:
    return up(np.asarray(a, np.float64) + np.asarray(b, np.float64))


def margin(K: int) -> float:
    """1 + (K+2) 2^-52: bounds (1 - 2^-53)^-(K+1) for K < 2^40 (sums of K products, any order)."""
    return 1.0 + (K + 2) * 2.0**-52


def f64_products_exact(fmt: AnyFormat) -> bool:
    if fmt.is_integer:
        return 2 * fmt.precision <= 53
    return 2 * fmt.precision <= 53 and fmt.min_subnormal**2 >= Fraction(2) ** -1074 \
        and fmt.max_finite**2 < Fraction(2) ** 1023


# ---- inputs ---------------------------------------------------------------------------------
def finite_values(x: Any, name: str) -> np.ndarray:
    """Exact float64 values of an array (numpy, ml_dtypes, torch, lists); inf/NaN refused."""
    v, _ = exact_float64(x, name)
    bad = ~np.isfinite(v)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"{name} holds {int(bad.sum())} non-finite values (inf/NaN; first at flat index {i}: "
                         f"{v.ravel()[i]}); error bounds hold for finite inputs only")
    return v


_ROUND_TRIP = {"fp32": np.float32, "fp16": np.float16}


def _members_by_round_trip(v: np.ndarray, fmt: AnyFormat) -> bool:
    """True when every value of float64 ``v`` survives float64 -> fmt -> float64 unchanged: each is then a
    value of fmt (the result of the second conversion is one, and it equals v). IEEE hardware conversions;
    anything else (False) is settled by the engine, which also names the offending value."""
    dt = _ROUND_TRIP.get(fmt.name)
    if dt is None or v.dtype != np.float64:
        return False
    with np.errstate(all="ignore"):
        return bool(np.array_equal(v.astype(dt).astype(np.float64), v))


def check_member(v: np.ndarray, fmt: AnyFormat, name: str, hint: str) -> None:
    if _members_by_round_trip(v, fmt):
        return
    _, fl = cast(v, fmt, flags=True)
    bad = (fl & (Flags.INEXACT | Flags.OVERFLOW | Flags.INVALID)) != 0
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"{name}: {v.ravel()[i]!r} (flat index {i}) is not a {fmt.name} value, but the bound "
                         f"assumes {fmt.name} inputs; {hint}")
