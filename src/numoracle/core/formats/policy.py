"""Rounding modes and overflow / NaN policies (enums that accept short string aliases).

Every function that takes a policy accepts the enum member or its string
(``"rne"``, ``"saturate"`` ...); a typo raises with the valid choices listed.
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass
from typing import Protocol

from ..args import check_bool

__all__ = ["Rounding", "Overflow", "NanTo", "Tininess", "Flags", "Policy", "resolve_policy", "Destination"]


class Destination(Protocol):
    """What a policy reads of its destination format (Format and IntFormat both have it): formats.py builds on
    this module, so the policy names the properties it needs instead of importing the format classes."""

    @property
    def name(self) -> str: ...
    @property
    def is_integer(self) -> bool: ...
    @property
    def has_nan(self) -> bool: ...
    @property
    def has_inf(self) -> bool: ...


# Each policy enum's name in messages and the other spellings ``of`` accepts, in one table.
_NAMES: dict[str, tuple[str, dict[str, str]]] = {
    "Rounding": ("rounding mode", {
        "rn": "rne", "nearest": "rne", "round_nearest_even": "rne", "trunc": "rtz", "rz": "rtz",
        "truncate": "rtz", "ceil": "ru", "floor": "rd", "odd": "rto", "ro": "rto", "rs": "sr",
        "rnd": "rd", "rup": "ru"}),
    "Overflow": ("overflow policy", {
        "sat": "saturate", "satfinite": "saturate", "inf": "ieee", "clamp": "saturate", "modular": "wrap"}),
    "NanTo": ("nan_to policy", {}),
    "Tininess": ("tininess", {"before_rounding": "before", "after_rounding": "after"}),
}


class _Choice(str, enum.Enum):
    """A str enum whose ``of`` accepts members, values and long names, and explains typos."""

    @classmethod
    def _aliases(cls) -> dict[str, str]:
        return _NAMES.get(cls.__name__, ("", {}))[1]

    @classmethod
    def of(cls, x: object) -> _Choice:
        if isinstance(x, cls):
            return x
        if isinstance(x, str):
            k = x.strip().lower().replace("-", "_")
            for m in cls:
                if k in (m.value, m.name.lower()):
                    return m
            alias = cls._aliases().get(k)
            if alias is not None:
                return cls(alias)
            valid = [m.value for m in cls]
            close = difflib.get_close_matches(k, valid + [m.name.lower() for m in cls], n=2, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown {cls._label()} {x!r}{hint}; valid: {', '.join(valid)}")
        raise TypeError(f"{cls._label()} must be a string or {cls.__name__}, got {type(x).__name__}")

    @classmethod
    def _label(cls) -> str:
        return _NAMES.get(cls.__name__, (cls.__name__.lower(), {}))[0]

    def __str__(self) -> str:
        return self.value


class Rounding(_Choice):
    """How an inexact value picks one of its two neighbours."""

    NEAREST_EVEN = "rne"
    NEAREST_AWAY = "rna"
    TOWARD_ZERO = "rtz"
    UP = "ru"
    DOWN = "rd"
    TO_ODD = "rto"
    STOCHASTIC = "sr"

    @property
    def is_nearest(self) -> bool:
        return self in (Rounding.NEAREST_EVEN, Rounding.NEAREST_AWAY)

    @property
    def is_unbiased(self) -> bool:
        """The error of one rounding has mean zero (nearest modes; stochastic rounding in expectation)."""
        return self.is_nearest or self is Rounding.STOCHASTIC

    @property
    def is_monotone(self) -> bool:
        return self is not Rounding.STOCHASTIC


class Overflow(_Choice):
    """What a value beyond the largest finite one becomes (decided after rounding)."""

    IEEE = "ieee"
    SATURATE = "saturate"
    NAN = "nan"
    WRAP = "wrap"


class NanTo(_Choice):
    """What NaN becomes in a format that has no NaN (integers, FP6, FP4)."""

    MAX = "max"
    ZERO = "zero"
    MIN = "min"
    RAISE = "raise"


class Tininess(_Choice):
    """When UNDERFLOW's "tiny" is judged (IEEE 754-2019 §7.5 leaves the choice to the implementation).

    ``before``: |x| < 2^emin before rounding (ARM, and numoracle's default). ``after``: the value
    rounded to the destination's precision with an unbounded exponent is below 2^emin (x86 SSE/AVX).
    The two differ only for values just below 2^emin that round up to it. Codes never depend on it.
    """

    BEFORE = "before"
    AFTER = "after"


class Flags(enum.IntFlag):
    """IEEE-style exception flags, returned per element (never global state)."""

    NONE = 0
    INEXACT = 1
    UNDERFLOW = 2
    OVERFLOW = 4
    INVALID = 8

    def __str__(self) -> str:
        names = [f.name for f in (Flags.INEXACT, Flags.UNDERFLOW, Flags.OVERFLOW, Flags.INVALID) if f in self]
        return "|".join(n for n in names if n) or "NONE"


@dataclass(frozen=True)
class Policy:
    """A complete, validated conversion policy for one destination format."""

    rounding: Rounding
    overflow: Overflow
    nan_to: NanTo | None
    ftz: bool = False
    daz: bool = False
    sr_bits: int | None = None
    tininess: Tininess = Tininess.BEFORE

    def __str__(self) -> str:
        parts = [self.rounding.value, f"overflow={self.overflow.value}"]
        if self.nan_to is not None:
            parts.append(f"nan_to={self.nan_to.value}")
        if self.ftz:
            parts.append("ftz")
        if self.daz:
            parts.append("daz")
        if self.sr_bits is not None:
            parts.append(f"sr_bits={self.sr_bits}")
        if self.tininess is not Tininess.BEFORE:
            parts.append(f"tininess={self.tininess.value}")
        return ", ".join(parts)


def default_overflow(dst: Destination) -> Overflow:
    """IEEE formats: ieee; FN/FNUZ (and E8M0): nan; formats without NaN (FP6/FP4) and integers: saturate."""
    if dst.is_integer or not dst.has_nan:
        return Overflow.SATURATE
    return Overflow.IEEE if dst.has_inf else Overflow.NAN


def _overflow_choices(dst: Destination) -> list[Overflow]:
    """The overflow policies ``dst`` takes, its default first: saturate always; ieee with infinities; nan with a
    NaN and no infinities; wrap for integers."""
    ok = [Overflow.SATURATE]
    if dst.is_integer:
        ok.append(Overflow.WRAP)
    elif dst.has_inf:
        ok.append(Overflow.IEEE)
    elif dst.has_nan:
        ok.append(Overflow.NAN)
    d = default_overflow(dst)
    return [d] + [o for o in ok if o is not d]


def _use(choices: list[Overflow]) -> str:
    """``'a'``, ``'a' or 'b'``: the policies to suggest."""
    names = [repr(o.value) for o in choices]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _check_overflow(o: _Choice, dst: Destination) -> None:
    """Refuse an overflow policy ``dst`` cannot apply, naming the ones it can."""
    if o is Overflow.WRAP and not dst.is_integer:
        why = f"applies to integer destinations only, not {dst.name};"
    elif o is Overflow.IEEE and not dst.has_inf:
        why = f"needs infinities, which {dst.name} lacks;"
    elif o is Overflow.NAN and not dst.has_nan:
        why = f"needs a NaN, which {dst.name} lacks;"
    elif o is Overflow.NAN and dst.has_inf:
        why = f"is for formats without infinities; {dst.name} has them:"
    else:
        return
    raise ValueError(f"overflow={o.value!r} {why} use {_use(_overflow_choices(dst))}")


def resolve_policy(
    dst: Destination,
    rounding: object = "rne",
    overflow: object = None,
    nan_to: object = None,
    ftz: bool = False,
    daz: bool = False,
    sr_bits: int | None = None,
    tininess: object = "before",
) -> Policy:
    """Validate a policy against its destination; fill in the destination's defaults."""
    ftz, daz = check_bool(ftz, "ftz"), check_bool(daz, "daz")
    r = Rounding.of(rounding)
    o = default_overflow(dst) if overflow is None else Overflow.of(overflow)
    if o is not default_overflow(dst):
        _check_overflow(o, dst)
    n = None
    if dst.is_integer or not dst.has_nan:
        n = NanTo.of(nan_to) if nan_to is not None else (NanTo.ZERO if dst.is_integer else NanTo.MAX)
    elif nan_to is not None:
        raise ValueError(f"nan_to applies to formats without NaN; {dst.name} has a NaN (NaN stays NaN)")
    if ftz and dst.is_integer:
        raise ValueError(f"ftz flushes subnormal results, which {dst.name} does not have; drop ftz=True "
                         "(daz=True still reads subnormal inputs as zero)")
    if r is Rounding.STOCHASTIC:
        if sr_bits is None:
            raise ValueError("rounding='sr' needs sr_bits (how many random bits each element gets) "
                             "and random_bits (an array of them), so the result is reproducible")
        if not isinstance(sr_bits, int) or isinstance(sr_bits, bool) or not 1 <= sr_bits <= 32:
            raise ValueError(f"sr_bits must be an int in 1..32, got {sr_bits!r}")
    elif sr_bits is not None:
        raise ValueError(f"sr_bits is only used with rounding='sr', not {r.value!r}")
    t = Tininess.of(tininess)
    if t is Tininess.AFTER and r is Rounding.STOCHASTIC:
        raise ValueError("tininess='after' rounds to the destination's precision with an unbounded exponent, "
                         "which IEEE 754 defines for its own rounding modes only; with rounding='sr' use "
                         "tininess='before'")
    return Policy(r, o, n, bool(ftz), bool(daz), sr_bits, t)
