"""``explain``: why one value converts to the code it does (neighbours, distances, decision, bits).

Built on the Fraction twin (``exact.py``) and checked against the engine on every call, so an
explanation can never contradict ``cast``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .. import scalar as exact
from ..formats.format import FP64, INT64, UINT64, AnyFormat, Format, format_of
from ..formats.interop import to_codes
from ..formats.policy import Flags, Policy, Rounding, resolve_policy
from ..scalar import Special
from ..text import hex_width
from .convert import cast_codes, check_codes

__all__ = ["explain", "Explanation", "bits_of"]


def bits_of(code: int, fmt: AnyFormat) -> str:
    """The code's bit fields: ``s eeeee mmmmmmmmmm`` (integers: plain binary)."""
    b = format(int(code), f"0{fmt.bits}b")
    if fmt.is_integer:
        return b
    assert isinstance(fmt, Format)
    parts = ([b[0]] if fmt.signed else []) + [b[int(fmt.signed):int(fmt.signed) + fmt.exp_bits]]
    if fmt.man_bits:
        parts.append(b[int(fmt.signed) + fmt.exp_bits:])
    return " ".join(parts)


def _show(v: Any) -> str:
    if isinstance(v, Special):
        return str(v)
    v = Fraction(v)
    if v.denominator == 1:
        return str(v.numerator)
    f = float(v)
    return repr(f) if Fraction(f) == v else f"{v} (~{f:.17g})"


@dataclass(frozen=True)
class Explanation:
    """What :func:`explain` returns: the value, its two neighbours in ``dst`` with their distances, the decision,
    the resulting code and the flags (``str()`` gives the text)."""

    value: Any  # Fraction, int or exact.Special
    dst: AnyFormat
    policy: Policy
    lower: tuple[Fraction, int | None] | None  # (value, code); code None for the virtual value past max
    upper: tuple[Fraction, int | None] | None
    decision: str
    code: int
    flags: Flags

    @property
    def result(self) -> Any:
        return exact.value_of(self.code, self.dst)

    def __str__(self) -> str:
        w = hex_width(self.dst)
        lines = [f"{_show(self.value)} -> {self.dst.name} ({self.policy})"]
        for name, nb in (("lower", self.lower), ("upper", self.upper)):
            if nb is None:
                continue
            v, c = nb
            dist = abs(Fraction(self.value) - v) if not isinstance(self.value, Special) else Fraction(0)
            where = f"0x{c:0{w}x}" if c is not None else "not a value of the format (one step past max)"
            lines.append(f"  {name} neighbour: {_show(v)}  {where}  distance {_show(dist)}")
        lines.append(f"  decision: {self.decision}")
        lines.append(f"  result: 0x{self.code:0{w}x} = {_show(self.result)}   bits {bits_of(self.code, self.dst)}")
        lines.append(f"  flags: {self.flags}")
        return "\n".join(lines)


def _exact_input(value: Any, src: Any) -> tuple[Any, np.ndarray, AnyFormat]:
    """(exact value, its code, its format) of what the user passed."""
    if src is not None:
        fmt = format_of(src)
        codes = check_codes(value, fmt, what="value", hint="pass the value without src= (its dtype names the "
                            "format), or its code as an int")
        if codes.size != 1:
            raise ValueError(f"explain takes one code, got an array of {codes.size}; index it first")
        codes = codes.reshape(1)
        return exact.value_of(int(codes[0]), fmt), codes, fmt
    if isinstance(value, (str, Fraction)) or (isinstance(value, int) and not -(1 << 63) <= value < (1 << 64)):
        raise TypeError("explain takes a number with a dtype (Python float/int, numpy scalar, 1-element array) "
                        "or a code with src=FORMAT; for exact decimals use the CLI: numoracle cast VALUE --to FMT")
    if isinstance(value, int) and not isinstance(value, bool):
        fmt = INT64 if value < (1 << 63) else UINT64
        codes = np.array([value % (1 << 64)], np.uint64)
        return exact.value_of(int(codes[0]), fmt), codes, fmt
    if isinstance(value, float):
        codes = np.array([value], np.float64).view(np.uint64)
        return exact.value_of(int(codes[0]), FP64), codes, FP64
    codes, fmt = to_codes(value, "value")
    if codes.size != 1:
        raise ValueError(f"explain takes one value, got an array of {codes.size}; index it first")
    codes = codes.reshape(1)
    return exact.value_of(int(codes[0]), fmt), codes, fmt


def explain(value: Any, dst: Any, *, src: Any = None, rounding: Any = "rne", overflow: Any = None,
            nan_to: Any = None, ftz: bool = False, daz: bool = False, tininess: Any = "before") -> Explanation:
    """Explain the conversion of one value: its neighbours in ``dst``, the distances, the rounding
    decision, the resulting code and its bits, and the flags.

    >>> print(explain(65520.0, "fp16").decision)  # doctest: +ELLIPSIS
    exactly halfway between 65504 and 65536...
    """
    dst = format_of(dst)
    pol = resolve_policy(dst, rounding, overflow, nan_to, ftz, daz, tininess=tininess)
    if pol.rounding is Rounding.STOCHASTIC:
        raise ValueError("explain does not take rounding='sr' (the result depends on random bits); "
                         "use cast(..., rounding='sr', sr_bits=..., random_bits=...)")
    x, codes, fmt = _exact_input(value, src)
    if daz and not fmt.is_integer:  # subnormal inputs read as zeros of their sign (FNUZ: the sign bit alone is NaN)
        x = exact.value_of(int(codes[0]), fmt, daz=True)
    code, fl = exact.round_value(x, dst, rounding=pol.rounding, overflow=pol.overflow, nan_to=pol.nan_to,
                                 ftz=pol.ftz, tininess=pol.tininess, flags=True)
    snan = not fmt.is_integer and fmt.is_signalling_nan(int(codes[0]))
    if snan:
        fl |= Flags.INVALID  # IEEE 754-2019 §7.2
    engine = int(cast_codes(codes, fmt, dst, pol)[0])
    if engine != code:  # pragma: no cover - the twins are held to each other by the test suite
        raise RuntimeError(f"internal error: engine gives {engine:#x}, the Fraction twin {code:#x}; please report")
    if isinstance(x, Special) and x.kind != "zero":
        what = "a signalling NaN (invalid operation; the result is quiet)" if snan else f"{x} is special"
        return Explanation(x, dst, pol, None, None, f"{what}: handled by the overflow/nan_to policy "
                           f"({pol.overflow.value}{', nan_to=' + pol.nan_to.value if pol.nan_to else ''}) -> "
                           f"{_show(exact.value_of(code, dst))}", code, fl)
    xv = Fraction(0) if isinstance(x, Special) else Fraction(x)
    if xv == 0 or dst.is_integer or not isinstance(dst, Format):
        nb = exact.neighbours(xv, dst)
        lo = (nb.lower.value, nb.lower.code) if nb.lower else None
        hi = (nb.upper.value, nb.upper.code) if nb.upper else None
    else:
        lo, hi = _float_neighbours(xv, dst)
    return Explanation(x, dst, pol, lo, hi, _decision(xv, dst, pol, lo, hi, code, fl), code, fl)


def _float_neighbours(x: Fraction, dst: Format):
    nb = exact.neighbours(x, dst)
    lo = (nb.lower.value, nb.lower.code) if nb.lower else None
    hi = (nb.upper.value, nb.upper.code) if nb.upper else None
    step = Fraction(2) ** (dst.emax - dst.man_bits)
    if x > dst.max_finite:
        hi = (dst.max_finite + step, None)
    elif x < -dst.max_finite and dst.signed:
        lo = (-dst.max_finite - step, None)
    return lo, hi


def _decision(x: Fraction, dst: AnyFormat, pol: Policy, lo, hi, code: int, fl: Flags) -> str:
    """The rounding decision in words; the text after its last ``->`` is always the result."""
    res = _show(exact.value_of(code, dst))
    if fl & Flags.INVALID:  # a negative or zero value into an unsigned or zero-less float (E8M0)
        return f"{_show(x)} has no representation in {dst.name} (invalid operation) -> {res}"
    if lo is not None and hi is not None and lo[0] == hi[0]:
        if fl & Flags.UNDERFLOW:  # ftz flushes the subnormal value itself
            return f"{_show(x)} is a value of {dst.name}, a subnormal: ftz flushes it -> {res}"
        return f"{_show(x)} is a value of {dst.name}: exact -> {res}"
    mode = pol.rounding
    if lo is None or hi is None:
        how = f"overflow={pol.overflow.value}" if fl & Flags.OVERFLOW else "the nearest one is taken"
        return f"{_show(x)} lies beyond every value of {dst.name} on that side: {how} -> {res}"
    a, b = lo[0], hi[0]
    t = (x - a) / (b - a)
    where = ("exactly halfway" if t == Fraction(1, 2) else
             f"{'below' if t < Fraction(1, 2) else 'above'} halfway (at {float(t):.6g} of the gap)")
    head = f"{where} between {_show(a)} and {_show(b)}"
    if mode is Rounding.NEAREST_EVEN:
        rule = "ties go to the even significand" if t == Fraction(1, 2) else "the nearer one"
    elif mode is Rounding.NEAREST_AWAY:
        rule = "ties go away from zero" if t == Fraction(1, 2) else "the nearer one"
    else:
        rule = {Rounding.TOWARD_ZERO: "toward zero", Rounding.UP: "toward +inf", Rounding.DOWN: "toward -inf",
                Rounding.TO_ODD: "the one with an odd last bit (round to odd)"}[mode]
    # the rounding before ftz: which neighbour the mode picks
    pre = exact.round_value(x, dst, rounding=mode, overflow=pol.overflow, nan_to=pol.nan_to)
    chosen = next((c for c in (lo, hi) if c[1] is not None and c[1] == pre), None)
    if chosen is None:  # past max finite: the virtual neighbour one step beyond it was picked
        past = hi if hi[1] is None else lo
        return (f"{head}; {mode.value}: {rule} -> {_show(past[0])}, past max finite: overflow={pol.overflow.value} "
                f"-> {res}")
    text = f"{head}; {mode.value}: {rule} -> {_show(exact.value_of(chosen[1], dst))}"  # a zero with its sign
    if pre != code:  # ftz: the rounded result is subnormal and is flushed to a zero of the same sign
        text += f", a subnormal: ftz flushes it -> {res}"
    return text
