"""Documented error of elementwise functions (exp, log, rsqrt, division): a settable table, each entry with its source.

An entry's ``ulps`` k means: the function's result differs from the correctly rounded result by at most k units in
the last place (the CUDA C Programming Guide's convention, Appendix "Mathematical Functions": "the maximum error is
stated as the absolute value of the difference in ulps between the correctly rounded single-precision result and
the result returned by the CUDA library function"), so its relative error against the exact value is at most
(k + 1/2) 2^(1-p) for a result in the normal range of a p-bit format. ``per_arg`` adds that many ulps per unit of
|argument| (CUDA's fast ``__expf``: 2 + floor(|1.173 x|)). Values are maxima from the vendors' (not exhaustive)
tests; a kernel using another implementation passes its own ``ElementwiseError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..core.formats.format import AnyFormat

__all__ = ["ElementwiseError", "ELEMENTWISE", "elementwise_error", "relative_error"]

_CUDA = "CUDA C++ Programming Guide, Appendix Mathematical Functions, single-precision tables (CUDA 12)"


@dataclass(frozen=True)
class ElementwiseError:
    """At most ``ulps + per_arg |x|`` ulps from the correctly rounded result (0: correctly rounded)."""

    name: str
    ulps: Fraction
    per_arg: Fraction = Fraction(0)
    source: str = ""

    def relative(self, fmt: AnyFormat, arg_bound: Any = 0) -> Fraction:
        """Relative error bound against the exact value, in ``fmt``'s normal range, for |argument| <= arg_bound."""
        k = self.ulps + self.per_arg * Fraction(arg_bound)
        return (k + Fraction(1, 2)) * Fraction(2) ** (1 - fmt.precision)


ELEMENTWISE: dict[str, ElementwiseError] = {e.name: e for e in (
    ElementwiseError("correctly_rounded", Fraction(0), source="IEEE 754 (the default: numoracle's models round once)"),
    ElementwiseError("cuda_expf", Fraction(2), source=_CUDA + ": expf(x), 2 ulp"),
    ElementwiseError("cuda___expf", Fraction(2), Fraction(1173, 1000),
                     source=_CUDA + ", intrinsic functions: __expf(x), 2 + floor(|1.173 x|) ulp"),
    ElementwiseError("cuda_logf", Fraction(1), source=_CUDA + ": logf(x), 1 ulp"),
    ElementwiseError("cuda_rsqrtf", Fraction(2), source=_CUDA + ": rsqrtf(x), 2 ulp"),
    ElementwiseError("cuda_sqrtf", Fraction(0), source=_CUDA + ": sqrtf(x), 0 ulp with -prec-sqrt=true (default)"),
    ElementwiseError("cuda_fdiv", Fraction(0), source=_CUDA + ": x/y, 0 ulp with -prec-div=true (default)"),
    ElementwiseError("sleef_u10", Fraction(1), source="SLEEF documentation: functions with suffix _u10 have a maximum "
                     "error of 1.0 ulp (1 ulp from the correctly rounded result is a superset)"),
    ElementwiseError("sleef_u35", Fraction(4), source="SLEEF documentation: functions with suffix _u35 have a maximum "
                     "error of 3.5 ulp"),
    ElementwiseError("cuda___fdividef", Fraction(2),
                     source=_CUDA + ", intrinsic functions: __fdividef(x, y), 2 ulp for 2^-126 <= |y| <= 2^126"),
)}


def elementwise_error(spec: Any) -> ElementwiseError:
    """An entry of the table by name, an ElementwiseError as given, or a number of ulps (from the CR result)."""
    if isinstance(spec, ElementwiseError):
        return spec
    if isinstance(spec, str):
        try:
            return ELEMENTWISE[spec]
        except KeyError:
            raise ValueError(f"unknown elementwise function {spec!r}; known: {', '.join(ELEMENTWISE)} (or pass a "
                             "number of ulps, or an ElementwiseError)") from None
    if isinstance(spec, bool) or not isinstance(spec, (int, float, Fraction)) or not spec >= 0:
        raise ValueError(f"an elementwise error is a name, an ElementwiseError or ulps >= 0, got {spec!r}")
    return ElementwiseError(f"{spec} ulp", Fraction(spec), source="given")


def relative_error(spec: Any, fmt: AnyFormat, arg_bound: Any = 0) -> Fraction:
    return elementwise_error(spec).relative(fmt, arg_bound)
