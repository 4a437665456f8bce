"""The one reader of numbers that come in as text or as Python / numpy scalars, exactly.

:func:`parse_number` reads a decimal (``65519``, ``-1.5e-7``, ``1_000``), a fraction (``1/3``),
a hex float (``0x1.8p3``, IEEE 754-2019 §5.12.3 syntax) or ``inf`` / ``infinity`` / ``nan``
(any case, optional sign) into its exact rational value. The work is linear in the length of
the text:

* at most :data:`MAX_DIGITS` significant digits (decimal or hex; trailing zeros do not count:
  they move into the exponent) and :data:`MAX_CHARS` characters; longer text is refused with
  the limit in the message;
* exponents of any size. A value whose binary exponent lies beyond +-:data:`RANGE_EXP`
  (``1e99999999``, ``0x1p-999999999``) is not expanded: it is read as ``kind="huge"`` or
  ``"tiny"`` and rounds through a stand-in (:meth:`Number.rounding_value`, a power of two
  farther out still) that every format numoracle carries (docs/formats.md: all of them lie
  inside FP64's range) rounds exactly as it rounds the real value, in every mode and with
  the same flags. Callers that need the value itself (:func:`read_exact`) refuse it.

:func:`read_exact` takes any one number (text, ``int``, ``Fraction``, ``float``, ``Decimal``,
numpy / ml_dtypes scalars, ``np.longdouble`` included) and returns its exact ``Fraction``,
naming the argument in every refusal.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from .errors import ParseError

__all__ = ["Number", "parse_number", "read_exact", "MAX_DIGITS", "MAX_CHARS", "RANGE_EXP", "STAND_IN_EXP"]

MAX_DIGITS = 4000  # significant digits of one number (below Python's 4300-digit int/str limit)
MAX_CHARS = 20000  # characters of one number's text
RANGE_EXP = 1 << 14  # |binary exponent| up to which values are read exactly (FP64's range is 2^+-1075)
STAND_IN_EXP = 1 << 15  # the stand-ins 2^+-STAND_IN_EXP of values beyond RANGE_EXP

_DEC = re.compile(r"(?P<int>\d(?:_?\d)*)?(?:\.(?P<frac>\d(?:_?\d)*)?)?(?:e(?P<exp>[+-]?\d(?:_?\d)*))?")
_HEX = re.compile(r"0x(?P<int>[0-9a-f](?:_?[0-9a-f])*)?(?:\.(?P<frac>[0-9a-f](?:_?[0-9a-f])*)?)?"
                  r"p(?P<exp>[+-]?\d(?:_?\d)*)")
_FRAC = re.compile(r"(?P<num>\d(?:_?\d)*)\s*/\s*(?P<den>\d(?:_?\d)*)")
_SYNTAX = ("give a decimal (65519, 1e9, -0.5), a fraction (1/3), a hex float (0x1.8p3), inf or nan")


@dataclass(frozen=True)
class Number:
    """One number read from text.

    ``kind`` is ``"finite"`` (``value`` is exact, 0 for both zeros), ``"inf"``, ``"nan"``, or
    ``"huge"`` / ``"tiny"``: a nonzero value beyond 2^+-RANGE_EXP, kept only by its sign.
    ``negative`` is the sign (of zeros, infinities and beyond-range values too).
    """

    value: Fraction | None
    negative: bool
    kind: str
    text: str

    @property
    def exact(self) -> bool:
        """Whether the exact value is known (finite, inf or nan), not only its side of the range."""
        return self.kind in ("finite", "inf", "nan")

    def rounding_value(self) -> Fraction | float:
        """What to round: the exact Fraction, float ``inf`` / ``nan`` / ``-0.0``, or for ``huge`` and
        ``tiny`` the stand-in +-2^(+-STAND_IN_EXP), which rounds to every carried format as the value does."""
        s = -1 if self.negative else 1
        if self.kind == "nan":
            return math.nan
        if self.kind == "inf":
            return s * math.inf
        if self.kind == "huge":
            return s * Fraction(2) ** STAND_IN_EXP
        if self.kind == "tiny":
            return s * Fraction(1, 2**STAND_IN_EXP)
        assert self.value is not None
        return -0.0 if self.value == 0 and self.negative else self.value


def _digits(s: str | None) -> str:
    return (s or "").replace("_", "")


def _exponent(s: str | None) -> int | None:
    """The exponent's value, or None when it has more than 9 digits (beyond every range either way)."""
    if s is None:
        return 0
    neg = s.startswith("-")
    d = _digits(s.lstrip("+-")).lstrip("0") or "0"
    if len(d) > 9:
        return None if not neg else -(10**10)  # a marker far beyond RANGE_EXP in the right direction
    return -int(d) if neg else int(d)


def _check_digits(n: int, what: str, text: str) -> None:
    if n > MAX_DIGITS:
        raise ParseError(f"{what}: {_clip(text)} has {n} significant digits; numoracle reads at most "
                         f"{MAX_DIGITS} (parse.MAX_DIGITS)")


def _clip(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:30] + "..." + text[-6:])


def _scaled(mant: int, exp2: int | None, exp10: int, neg: bool, text: str) -> Number:
    """mant * 2^exp2 * 10^exp10 (exp2 None: beyond range upward), as a Number."""
    if mant == 0:
        return Number(Fraction(0), neg, "finite", text)
    if exp2 is None:
        return Number(None, neg, "huge", text)
    # log2 of the value lies in [lo, hi]; 10^k is between 2^(3.32k) and 2^(3.33k)
    lead = mant.bit_length() + exp2
    k_lo, k_hi = sorted((exp10 * 3321928, exp10 * 3321929))  # 3.321928 < log2(10) < 3.321929
    lo = lead - 1 + k_lo // 1000000
    hi = lead - (-k_hi // 1000000)
    if lo > RANGE_EXP:
        return Number(None, neg, "huge", text)
    if hi < -RANGE_EXP:
        return Number(None, neg, "tiny", text)
    v = Fraction(mant) * (Fraction(2) ** exp2) * (Fraction(10) ** exp10)
    return Number(-v if neg else v, neg, "finite", text)


def parse_number(text: str, what: str = "value") -> Number:
    """Read one number from text exactly (see the module docstring); ``what`` names it in errors."""
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a string to parse, got {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise ParseError(f"{what}: the text has {len(text)} characters; numoracle reads at most {MAX_CHARS} "
                         "(parse.MAX_CHARS)")
    t = text.strip().lower()
    neg = t.startswith("-")
    body = t[1:] if t[:1] in "+-" else t
    if body in ("inf", "infinity"):
        return Number(None, neg, "inf", text)
    if body == "nan":
        return Number(None, neg, "nan", text)
    m = _FRAC.fullmatch(body)
    if m:
        num, den = _digits(m["num"]).lstrip("0") or "0", _digits(m["den"]).lstrip("0") or "0"
        _check_digits(max(len(num), len(den)), what, text)
        if den == "0":
            raise ParseError(f"{what}: {_clip(text)} divides by zero")
        v = Fraction(int(num), int(den))
        return Number(-v if neg else v, neg, "finite", text)
    m = _HEX.fullmatch(body)
    if m and (m["int"] or m["frac"]):
        ip, fp = _digits(m["int"]), _digits(m["frac"])
        digits = (ip + fp).lstrip("0")
        _check_digits(len(digits.rstrip("0")), what, text)
        e = _exponent(m["exp"])
        mant = int(ip + fp, 16) if ip + fp else 0
        return _scaled(mant, None if e is None else e - 4 * len(fp), 0, neg, text)
    if body.startswith("0x"):
        raise ParseError(f"{what}: cannot parse {_clip(text)}: a hex float needs hex digits and a binary "
                         "exponent (0x1.8p3)")
    m = _DEC.fullmatch(body)
    if m and (m["int"] or m["frac"]):
        ip, fp = _digits(m["int"]), _digits(m["frac"])
        e = _exponent(m["exp"])
        digits = (ip + fp).lstrip("0")
        stripped = digits.rstrip("0")
        _check_digits(len(stripped), what, text)
        if not stripped:
            return Number(Fraction(0), neg, "finite", text)
        exp10 = None if e is None else e - len(fp) + (len(digits) - len(stripped))
        if exp10 is None:
            return Number(None, neg, "huge", text)
        return _scaled(int(stripped), 0, exp10, neg, text)
    raise ParseError(f"{what}: cannot parse {_clip(text)}: {_SYNTAX}")


def read_exact(x: Any, what: str = "value", *, finite: bool = True) -> Fraction | float:
    """The exact value of one number: text (``parse_number``), int, Fraction, float, Decimal,
    numpy / ml_dtypes scalars (``np.longdouble`` included). Refuses bools, complex numbers,
    None, arrays and values past the reader's range; with ``finite=False`` float inf/nan pass
    through as floats.
    """
    if isinstance(x, bool) or type(x).__name__ in ("bool", "bool_"):
        raise TypeError(f"{what} must be a number, got a bool ({x!r})")
    if isinstance(x, str):
        n = parse_number(x, what)
        if not n.exact:
            raise ParseError(f"{what}: {_clip(x)} lies beyond 2^{'' if n.kind == 'huge' else '-'}{RANGE_EXP}, "
                             "past the range numoracle reads exactly (parse.RANGE_EXP)")
        v = n.rounding_value()
    elif isinstance(x, (numbers.Rational)):
        v = Fraction(int(x)) if isinstance(x, numbers.Integral) else Fraction(x.numerator, x.denominator)
    elif isinstance(x, Decimal):
        if not x.is_finite():
            v = math.nan if x.is_nan() else (-math.inf if x < 0 else math.inf)
        else:
            return read_exact(str(x), what, finite=finite)
    elif isinstance(x, numbers.Complex) and not isinstance(x, numbers.Real):
        raise TypeError(f"{what} must be a real number, got {type(x).__name__} {x!r}")
    elif hasattr(x, "as_integer_ratio") or isinstance(x, numbers.Real) or hasattr(x, "__float__"):
        v = _float_like(x, what)
    else:
        raise TypeError(f"{what} must be a number, got {type(x).__name__}")
    if isinstance(v, float):
        if finite and not math.isfinite(v):
            raise ParseError(f"{what} must be finite, got {v!r}")
        if v == 0:
            return Fraction(0)
    return v


def _float_like(x: Any, what: str) -> Fraction | float:
    """A float-like scalar (float, np.floating incl. longdouble, ml_dtypes scalars) exactly; inf/nan as floats."""
    try:
        p, q = x.as_integer_ratio()  # exact, long doubles included
        return Fraction(int(p), int(q))
    except (ValueError, OverflowError):  # inf or nan
        return float(x)
    except (AttributeError, TypeError):  # no as_integer_ratio (ml_dtypes scalars): float64 holds them
        pass
    try:
        f = float(x)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{what} must be a real number, got {type(x).__name__}") from None
    return Fraction(f) if math.isfinite(f) else f
