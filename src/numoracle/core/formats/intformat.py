"""The integer formats and the one overflow rule every format's thresholds follow.

:class:`IntFormat` is a two's complement or unsigned integer of 1 to 64 bits; :func:`overflow_rule` is the
threshold past which rounding overflows, written once for floats and integers alike (docs/theory.md §7).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .policy import Rounding

__all__ = ["IntFormat", "overflow_rule", "code_dtype_name"]


def code_dtype_name(bits: int) -> str:
    for width in (8, 16, 32, 64):
        if bits <= width:
            return f"uint{width}"
    raise ValueError(f"formats wider than 64 bits are not supported (got {bits})")


def overflow_rule(mx: Fraction, ulp: Fraction, odd: bool, mode: Rounding, sign: int) -> tuple[Fraction, bool]:
    """The overflow threshold ``(t, inclusive)`` of a format whose largest magnitude ``mx`` has spacing ``ulp``.

    A value of sign ``sign`` overflows iff ``|x| > t`` (or ``== t`` and inclusive), rounding with an unbounded
    exponent; ``odd``: the largest significand is odd (decides ties and round-to-odd). Stochastic rounding may
    overflow anywhere above ``mx``: reported as ``(mx, False)``. The one place this rule is written.
    """
    toward_inf = (mode is Rounding.UP and sign > 0) or (mode is Rounding.DOWN and sign < 0)
    match mode:
        case Rounding.NEAREST_EVEN:
            return mx + ulp / 2, odd
        case Rounding.NEAREST_AWAY:
            return mx + ulp / 2, True
        case Rounding.STOCHASTIC:
            return mx, False
        case Rounding.TO_ODD:
            return (mx, False) if not odd else (mx + ulp, True)
        case _:  # rtz, and ru / rd: toward their infinity, or away from it
            return (mx, False) if toward_inf else (mx + ulp, True)


@dataclass(frozen=True)
class IntFormat:
    """A two's complement (signed) or unsigned binary integer format."""

    bits: int
    signed: bool = True
    aliases: tuple[str, ...] = field(default=(), compare=False)

    is_integer = True
    has_nan = False
    has_inf = False
    has_zero = True
    has_negative_zero = False
    has_subnormals = False

    def __post_init__(self) -> None:
        if not 1 <= self.bits <= 64:
            raise ValueError(f"integer formats have 1..64 bits, got {self.bits}")

    @property
    def name(self) -> str:
        return f"{'' if self.signed else 'u'}int{self.bits}"

    @property
    def code_dtype(self) -> str:
        return code_dtype_name(self.bits)

    @property
    def min_value(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def max_value(self) -> int:
        return (1 << (self.bits - (1 if self.signed else 0))) - 1

    def overflow_threshold(self, rounding: str = "rne", *, sign: int = 1) -> tuple[Fraction, bool]:
        """As Format.overflow_threshold, with spacing 1 around ``max`` (sign=+1) or ``|min|`` (sign=-1)."""
        mx = self.max_value if sign > 0 else -self.min_value
        return overflow_rule(Fraction(mx), Fraction(1), bool(mx & 1), Rounding.of(rounding), sign)

    @property
    def max_finite(self) -> Fraction:
        return Fraction(self.max_value)

    @property
    def precision(self) -> int:
        """Bits of magnitude: every integer of at most this many bits is exact."""
        return self.bits - (1 if self.signed else 0)

    def __repr__(self) -> str:
        return f"IntFormat({self.name})"

    def __str__(self) -> str:
        return self.name

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "int",
            "bits": self.bits,
            "signed": self.signed,
            "precision": self.precision,
            "min_value": self.min_value,
            "max_value": self.max_value,
        }
