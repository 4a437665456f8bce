"""Boundary values: the source codes that matter for a conversion ``src -> [via ...] -> dst``.

:func:`boundary_values` lists, for a source format and a destination (optionally reached through
intermediate formats), the source codes where a conversion's behaviour changes or is most often
implemented wrongly, each with a label saying why it is there:

* the specials of the source: +-0, +-inf, NaNs (quiet, signalling, negative, other payloads);
* the source's own edges: +-max finite, min normal, min subnormal, 1 (integers: min, max, +-1);
* for the destination and every ``via`` format F: +-max finite, the overflow threshold under the
  rounding mode (and the first one-digit decimal past it, which catches clamp-before-round),
  min normal, min subnormal, the underflow-to-zero threshold, and F's rounding ties: in the
  subnormal range, at the smallest normals, around 1, around the exactness limits 2^p of every
  format involved, and near max finite (the top tie is the overflow threshold);
* the exactness limits 2^p, 2^p + 1 and 2^(p+1) of every float format involved;
* for nearest modes, the ties of each intermediate format I adjacent to each tie T of F
  (``T +- ulp_I(T) / 2``) and the source codes next to them: values that a cast rounding first
  to I may move onto T. On the side of T away from the neighbour T's tie-break picks, the
  second rounding then goes the wrong way (double rounding); the other side is kept as the
  control point, where both paths agree (kind ``double_rounding`` marks both). ``intermediates``
  (FP32 by default, the format numpy, ml_dtypes and torch round through) are considered along
  with the ``via`` formats;
* for integer sources, every power of two; for directed modes, F's values themselves (steps).

Each target value is exact (``fractions.Fraction``). Where the source represents it, the
target's code and the codes one source ULP below and above are listed ("... - 1 ulp(src)");
where it does not, the nearest source codes on both sides ("..., nearest below in src").
Negative targets mirror the positive ones where the source is signed (thresholds of directed
modes and of integers are computed per sign). Nothing here runs the conversion engine.

    >>> bv = boundary_values("int32", "fp16")
    >>> [lab for c, lab in bv if c == 65520]
    ['fp16 overflow threshold (rne); tie of fp16 between 65504 and 65536 (past max finite)']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ..core.formats.format import FP32, AnyFormat, Format, IntFormat, format_of
from ..core.formats.policy import Overflow, Rounding, resolve_policy
from ..core.scalar import pow2
from ..core.text import format_value, hex_width
from .grid import (
    _neg_zero,
    _representable,
    ceil_key,
    finite_key_range,
    floor_key,
    key_code,
    key_value,
)

__all__ = [
    "boundary_values", "BoundaryValues", "BoundaryPoint", "overflow_threshold", "underflow_threshold",
    "floor_key", "ceil_key", "key_value", "key_code", "finite_key_range", "format_value",
]


def overflow_threshold(fmt: Any, rounding: Any = "rne", sign: int = 1) -> tuple[Fraction, bool]:
    """``(t, inclusive)``: a value of sign ``sign`` overflows ``fmt`` iff ``|x| > t`` (or ``== t`` and inclusive).

    Floats: ``Format.overflow_threshold``. Integers: the same rule with spacing 1 around ``max``
    (``sign=+1``) or ``|min|`` (``sign=-1``; unsigned: 0, so INT8 rne gives (127.5, True) and
    (128.5, False), UINT8 below zero (0.5, False)).
    """
    return format_of(fmt).overflow_threshold(Rounding.of(rounding), sign=sign)


def underflow_threshold(fmt: Any, rounding: Any = "rne", sign: int = 1) -> tuple[Fraction, bool]:
    """``(t, inclusive)``: a nonzero value of sign ``sign`` rounds to a nonzero value of ``fmt`` iff
    ``|x| > t`` (or ``== t`` and inclusive). FP16 rne: (2^-25, False); rtz: (2^-24, True); ru: (0, False).
    """
    fmt, mode = format_of(fmt), Rounding.of(rounding)
    if fmt.is_integer or not fmt.has_zero:
        raise ValueError(f"{fmt.name} has no subnormal range (no underflow to zero)")
    tiny = fmt.min_subnormal
    toward_inf = (mode is Rounding.UP and sign > 0) or (mode is Rounding.DOWN and sign < 0)
    if mode is Rounding.NEAREST_EVEN:
        return tiny / 2, False
    if mode is Rounding.NEAREST_AWAY:
        return tiny / 2, True
    if mode in (Rounding.TO_ODD, Rounding.STOCHASTIC) or toward_inf:
        return Fraction(0), False
    return tiny, True


# ---- labels -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BoundaryPoint:
    """Why a code is in a boundary set: one claim about one target value.

    ``kind``: ``zero``, ``inf``, ``nan``, ``source_edge``, ``power_of_two``, ``max_finite``,
    ``overflow``, ``past_max`` (the next value past max finite, or before min, with an unbounded
    exponent: overflows in every mode), ``round_number``, ``min_normal``, ``min_subnormal``, ``underflow``,
    ``exact_limit`` (2^p or 2^(p+1): representable in ``fmt``), ``first_inexact`` (2^p + 1: not
    representable), ``tie`` (the midpoint of ``fmt``'s neighbours ``lo`` < ``hi``; ``hi`` past max
    finite for the top tie), ``step`` (a value of ``fmt``: where directed modes change result),
    ``double_rounding`` (a tie of the intermediate ``via`` adjacent to ``fmt``'s tie ``tie``).
    ``offset``: -1 / 0 / +1 when the code is the target's nearest source value below / the
    target itself / nearest above (one source ULP away when ``exact``, the target being
    representable in the source). ``inclusive``: for thresholds, whether ``|x| == t`` crosses.
    """

    kind: str
    text: str
    fmt: str | None = None
    target: Fraction | None = None
    offset: int = 0
    exact: bool = True
    lo: Fraction | None = None
    hi: Fraction | None = None
    inclusive: bool | None = None
    via: str | None = None
    tie: Fraction | None = None

    @property
    def label(self) -> str:
        if self.offset == 0:
            return self.text
        if self.exact:
            return f"{self.text} {'-' if self.offset < 0 else '+'} 1 ulp(src)"
        return f"{self.text}, nearest {'below' if self.offset < 0 else 'above'} in src"


class _Collector:
    """Target values -> source keys, with the points that put each key there."""

    def __init__(self, src: AnyFormat):
        self.src = src
        self.klo, self.khi = finite_key_range(src)
        self.vlo, self.vhi = key_value(self.klo, src), key_value(self.khi, src)
        self.finite: dict[int, list[BoundaryPoint]] = {}
        self.special: dict[int, tuple[Any, tuple[int, int], list[BoundaryPoint]]] = {}  # code -> value, order, why

    def _put(self, k: int, p: BoundaryPoint) -> None:
        if self.klo <= k <= self.khi:
            self.finite.setdefault(k, []).append(p)

    def add(self, v: Fraction, kind: str, text: str, *, spread: bool = True, **info: Any) -> None:
        v = Fraction(v)
        if not self.vlo <= v <= self.vhi:
            return
        fk = floor_key(v, self.src)
        if fk is not None and key_value(fk, self.src) == v:
            self._put(fk, BoundaryPoint(kind, text, target=v, offset=0, **info))
            if spread:
                below = fk - 1 - (_neg_zero(self.src) if fk == 0 else 0)  # skip -0: below 0 is -min
                self._put(below, BoundaryPoint(kind, text, target=v, offset=-1, **info))
                self._put(fk + 1, BoundaryPoint(kind, text, target=v, offset=1, **info))
            return
        ck = ceil_key(v, self.src)
        for k, off in ((fk, -1), (ck, 1)):
            if k is not None:
                self._put(k, BoundaryPoint(kind, text, target=v, offset=off, exact=False, **info))

    def add_special(self, code: int, value: Any, sort_key: tuple[int, int], kind: str, text: str) -> None:
        self.special.setdefault(code, (value, sort_key, []))[2].append(BoundaryPoint(kind, text))


# ---- what each format contributes ---------------------------------------------------------------------
def _specials_and_edges(c: _Collector, src: AnyFormat) -> None:
    if isinstance(src, IntFormat):
        c.add(Fraction(0), "zero", "0", spread=False)
        for v, t in ((src.max_value, f"max of {src}"), (src.min_value, f"min of {src}"), (1, "1"), (-1, "-1")):
            c.add(Fraction(v), "source_edge", t)
        return
    top = 1 << 70  # beyond every finite key
    c.add(Fraction(0), "zero", "+0", spread=False)
    if src.has_negative_zero:
        c._put(-1, BoundaryPoint("zero", "-0"))
    if src.has_inf:
        inf = (((1 << src.exp_bits) - 1) << src.man_bits) if src.nan == "ieee" else src.mag_mask
        c.add_special(inf, float("inf"), (0, top), "inf", "+inf")
        if src.signed:
            c.add_special(inf | src.sign_bit, float("-inf"), (0, -top), "inf", "-inf")
    nans: list[tuple[int, str]] = []
    if src.nan == "ieee":
        allones = ((1 << src.exp_bits) - 1) << src.man_bits
        q = allones | (1 << (src.man_bits - 1))
        nans.append((q, "NaN (quiet)"))
        if src.man_bits >= 2:
            nans += [(allones | 1, "NaN (signalling)"), (allones | ((1 << src.man_bits) - 1), "NaN (all-ones payload)")]
        if src.signed:
            nans += [(code | src.sign_bit, "-" + t) for code, t in list(nans)]
    elif src.nan == "fn":
        nans.append((src.mag_mask, "NaN (all-ones magnitude)"))
        if src.signed:
            nans.append((src.mag_mask | src.sign_bit, "-NaN (all-ones magnitude)"))
    elif src.nan == "fnuz":
        nans.append((src.sign_bit, "NaN (the sign bit alone; there is no -0)"))
    for code, t in nans:
        c.add_special(code, float("nan"), (1, code), "nan", t)
    mx = src.max_finite
    edges = [(mx, f"max finite of {src}"), (src.min_normal, f"min normal of {src}"), (Fraction(1), "1")]
    if src.has_subnormals:
        edges.append((src.min_subnormal, f"min subnormal of {src}"))
    for v, t in edges:
        c.add(v, "source_edge", t)
        if src.signed:
            c.add(-v, "source_edge", "-" + t if t != "1" else "-1")


def _ties(F: AnyFormat, anchors: Iterable[Fraction]) -> list[tuple[Fraction, Fraction, bool]]:
    """(lo, hi, hi_past_max) pairs of neighbouring values of F whose midpoints are boundaries."""
    pairs: set[tuple[Fraction, Fraction, bool]] = set()
    if isinstance(F, IntFormat):
        mx, mn = F.max_value, F.min_value
        for k in (0, 1, 2, mx - 1, mx):
            if mn <= k <= mx:
                pairs.add((Fraction(k), Fraction(k + 1), k == mx))
        for k in ((0, -1, -2, mn + 1, mn) if F.signed else (0,)):
            if mn <= k <= mx:
                pairs.add((Fraction(k - 1), Fraction(k), k == mn))
        return sorted(pairs)
    klo, khi = finite_key_range(F)
    top_ulp = pow2(F.emax - F.man_bits)

    def nxt(k: int) -> tuple[Fraction, bool] | None:
        if k < khi:
            return key_value(k + 1, F), False
        return (F.max_finite + top_ulp, True) if k == khi else None

    keys: set[int] = set()
    if F.has_zero:
        keys.update({0, 1})  # ties (0, min_sub) and (min_sub, 2 min_sub)
    for a in anchors:
        if F.min_normal <= a <= F.max_finite:
            k = floor_key(a, F)
            keys.update({k - 1, k, k + 1})
    keys.update({khi - 1, khi})
    for k in keys:
        if 0 <= k <= khi and (n := nxt(k)) is not None:
            pairs.add((key_value(k, F), n[0], n[1]))
    if F.signed:
        pairs |= {(-hi, -lo, past) for lo, hi, past in pairs}
    return sorted(pairs)


def _format_targets(c: _Collector, F: AnyFormat, mode: Rounding, anchors: list[Fraction],
                    inters: list[AnyFormat], src_prec: int) -> None:
    name = F.name
    signs = (1, -1) if F.signed else (1,)
    for s in (1, -1) if (F.signed or F.is_integer) else (1,):  # range ends and overflow
        if F.is_integer:
            end = Fraction(F.max_value if s > 0 else F.min_value)
            what, over = ("max" if s > 0 else "min"), end + s
        else:
            end, what = s * F.max_finite, ("max finite" if s > 0 else "-max finite")
            over = s * (F.max_finite + pow2(F.emax - F.man_bits))
        c.add(end, "max_finite", f"{what} of {name}", fmt=name)
        c.add(over, "past_max", f"{format_value(over)}: next value past {what} of {name} (overflows in every mode)",
              fmt=name)
        t, inc = overflow_threshold(F, mode, s)
        text = f"{name} overflow threshold ({mode.value})"
        c.add(s * t, "overflow", text if s > 0 else f"-({text})", fmt=name, inclusive=inc)
        if s > 0 or F.signed:  # (below an unsigned format's 0 every negative value is past it)
            r = _round_number_above(t)
            c.add(s * r, "round_number", f"{format_value(s * r)}: first 1-digit decimal past the "
                  f"{name} overflow threshold", fmt=name, spread=False)
    if not F.is_integer:
        for s in signs:
            sg = "" if s > 0 else "-"
            if F.has_subnormals:
                c.add(s * F.min_normal, "min_normal", f"{sg}min normal of {name}", fmt=name)
                c.add(s * F.min_subnormal, "min_subnormal", f"{sg}min subnormal of {name}", fmt=name)
                t, inc = underflow_threshold(F, mode, s)
                if t > 0:
                    c.add(s * t, "underflow", f"{sg}{name} underflow-to-zero threshold ({mode.value})",
                          fmt=name, inclusive=inc)
            else:
                c.add(s * F.min_normal, "min_normal", f"{sg}smallest value of {name}", fmt=name)
    # ties, steps and double rounding
    for lo, hi, past in _ties(F, anchors):
        T = (lo + hi) / 2
        hs = format_value(hi) + (" (past max finite)" if past and hi > 0 else "")
        ls = format_value(lo) + (" (past min)" if past and lo < 0 else "")
        text = f"tie of {name} between {ls} and {hs}"
        c.add(T, "tie", text, fmt=name, lo=lo, hi=hi)
        if not mode.is_nearest:
            for v in (lo, hi) if not past else ((hi,) if lo < 0 else (lo,)):
                c.add(v, "step", f"{name} value {format_value(v)} ({mode.value} step)", fmt=name)
            continue
        for inter in inters:
            if inter.is_integer or inter.precision >= src_prec or not _representable(T, inter):
                continue
            k = floor_key(T, inter)
            ilo, ihi = finite_key_range(inter)
            for nk, side in ((k - 1, "below"), (k + 1, "above")):
                if ilo <= nk <= ihi:
                    it = (key_value(nk, inter) + T) / 2
                    if not _between(c.src, T, it):
                        continue  # no source value rounds onto T in the intermediate but not in dst
                    c.add(it, "double_rounding", f"{inter} tie just {side} the {text}", fmt=name, lo=lo,
                          hi=hi, via=inter.name, tie=T)


def _between(src: AnyFormat, T: Fraction, it: Fraction) -> bool:
    """Does ``src`` hold a value x with T < x <= it (it > T) or it <= x < T (it < T)?"""
    k = floor_key(it, src) if it > T else ceil_key(it, src)
    return k is not None and (T < key_value(k, src) <= it if it > T else it <= key_value(k, src) < T)


def _round_number_above(t: Fraction) -> Fraction:
    """The smallest d * 10^k (d = 1..9) greater than t > 0."""
    k = len(str(t.numerator // t.denominator)) - 1 if t >= 1 else -1
    while Fraction(10) ** k > t:
        k -= 1
    return (t // Fraction(10) ** k + 1) * Fraction(10) ** k


def _exactness(c: _Collector, X: Format) -> None:
    p, name = X.precision, X.name
    for s in (1, -1) if X.signed else (1,):
        sg = "" if s > 0 else "-"
        lim = pow2(p)
        if lim > X.max_finite:
            return
        c.add(s * lim, "exact_limit", f"{sg}2^{p} = 2^p exactness limit of {name}", fmt=name)
        if lim + 1 <= X.max_finite:
            v = f"-(2^{p} + 1)" if s < 0 else f"2^{p} + 1"
            c.add(s * (lim + 1), "first_inexact", f"{v}, the first integer {name} cannot hold", fmt=name)
        if 2 * lim <= X.max_finite:
            c.add(s * 2 * lim, "exact_limit", f"{sg}2^{p + 1} = 2^(p+1) of {name} (spacing 4 above)", fmt=name)


# ---- the result ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class BoundaryValues:
    """The boundary source codes of a conversion, sorted by value (NaNs last), one label per code.

    ``codes``: a fresh numpy array of source codes (``src.code_dtype``); ``labels``: why each is
    there ("; "-joined when several reasons coincide); ``points``: the structured claims behind each
    label (:class:`BoundaryPoint`). Iterating gives ``(code, label)``; ``values()`` the exact values;
    ``native()`` the values in the source's numpy / ml_dtypes dtype; ``table()`` a listing.
    """

    src: AnyFormat
    dst: AnyFormat
    via: tuple[AnyFormat, ...]
    rounding: Rounding
    overflow: Overflow
    labels: tuple[str, ...]
    points: tuple[tuple[BoundaryPoint, ...], ...]
    _codes: np.ndarray = field(repr=False)
    _values: tuple[Any, ...] = field(repr=False)

    @property
    def codes(self) -> np.ndarray:
        return self._codes.copy()

    def values(self) -> list[Fraction | float]:
        """Exact values: Fractions for finite values (+0 included), floats for -0.0, +-inf and NaN."""
        return list(self._values)

    def native(self) -> np.ndarray:
        """The codes as values of the source's numpy / ml_dtypes dtype (raises where it has none)."""
        from ..core.formats.interop import as_native

        return as_native(self.codes, self.src)

    def __len__(self) -> int:
        return len(self.labels)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        return iter(zip((int(c) for c in self._codes), self.labels))

    def describe(self) -> str:
        chain = " -> ".join(f.name for f in (self.src, *self.via, self.dst))
        return f"boundary values of {chain} ({self.rounding.value}, overflow={self.overflow.value}): {len(self)} codes"

    def rows(self) -> list[dict[str, str]]:
        """One dict per code: ``code`` (hex), ``value`` (``str(Fraction)``, ``-0``, ``inf``, ``nan`` ...), ``label``."""
        w = hex_width(self.src)
        return [{"code": f"0x{int(c):0{w}x}", "value": _value_text(v), "label": lab}
                for c, v, lab in zip(self._codes, self._values, self.labels)]

    def table(self) -> str:
        rows = self.rows()
        shown = [_value_text(v, short=True) for v in self._values]
        wv = max((len(v) for v in shown), default=5)
        lines = [self.describe()]
        lines += [f"  {r['code']}  {v:>{wv}}  {r['label']}" for r, v in zip(rows, shown)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _label(points: list[BoundaryPoint], most: int = 3) -> str:
    """The label of one code: its exact targets first (else the 1-ulp ones, else the nearest ones), at most ``most``."""
    for tier in ([p for p in points if p.offset == 0], [p for p in points if p.exact], points):
        if tier:
            texts = list(dict.fromkeys(p.label for p in tier))
            more = len(dict.fromkeys(p.label for p in points)) - min(len(texts), most)
            return "; ".join(texts[:most]) + (f" (+{more} more)" if more > 0 else "")
    raise AssertionError("a code without a reason")


def _value_text(v: Any, short: bool = False) -> str:
    if isinstance(v, float):
        if v != v:
            return "nan"
        return "-0" if v == 0 else ("inf" if v > 0 else "-inf")
    return format_value(v) if short else str(v)


def boundary_values(src: Any, dst: Any, *, via: Any = (), rounding: Any = "rne", overflow: Any = None,
                    intermediates: Any = (FP32,)) -> BoundaryValues:
    """The source codes that matter for converting ``src`` to ``dst`` (through ``via`` formats).

    ``rounding`` / ``overflow``: the policy of the conversion (every hop rounds with ``rounding``;
    ``overflow`` applies to ``dst``, intermediate hops use their default). ``intermediates``: formats
    an implementation may round through first (FP32 by default: numpy, ml_dtypes and torch do); the
    ties of each next to the destination's ties are included so that double rounding is caught.
    Formats are names, ``Format`` objects or dtypes. See the module docstring for the full list.
    """
    s, d = format_of(src), format_of(dst)
    vs = tuple(via) if isinstance(via, (list, tuple)) else (via,)  # one format (a name, Format, dtype) or several
    ins = () if intermediates is None else tuple(intermediates) if isinstance(intermediates, (list, tuple)) \
        else (intermediates,)
    mode = Rounding.of(rounding)
    sr_bits = 8 if mode is Rounding.STOCHASTIC else None
    pol = resolve_policy(d, mode, overflow, sr_bits=sr_bits)
    vf, inf_ = tuple(format_of(f) for f in vs), tuple(format_of(f) for f in ins)
    # Format equality is structural; the names go into the cache key too, since labels carry them
    names = tuple(f.name for f in (s, d, *vf, *inf_))
    return _build(s, d, vf, mode, pol.overflow, inf_, names)


@lru_cache(maxsize=256)
def _build(src: AnyFormat, dst: AnyFormat, via: tuple[AnyFormat, ...], mode: Rounding, overflow: Overflow,
           inters: tuple[AnyFormat, ...], names: tuple[str, ...] = ()) -> BoundaryValues:
    c = _Collector(src)
    _specials_and_edges(c, src)
    chain = [*via, dst]
    involved = list(dict.fromkeys([src, *chain, *inters]))
    anchors = [Fraction(1)] + [pow2(f.precision) for f in involved]
    if isinstance(src, IntFormat):
        anchors.append(pow2(src.max_value.bit_length() - 1))
    for i, F in enumerate(chain):
        fa = anchors + ([F.min_normal, pow2(F.emax)] if isinstance(F, Format) else [])
        before = [f for f in dict.fromkeys([*chain[:i], *inters]) if f != F and f != src]
        _format_targets(c, F, mode, fa, before, src.precision)
    for f in involved:
        if isinstance(f, Format):
            _exactness(c, f)
    if isinstance(src, IntFormat):
        for e in range(1, src.bits):
            for s in (1, -1):
                c.add(Fraction(s << e), "power_of_two", f"{'-' if s < 0 else ''}2^{e}", spread=False)
    entries: list[tuple[tuple[int, int], int, Any, list[BoundaryPoint]]] = []
    for k, pts in c.finite.items():
        v = -0.0 if (k == -1 and src.has_negative_zero) else key_value(k, src)
        entries.append(((0, k), key_code(k, src), v, pts))
    for code, (value, sk, pts) in c.special.items():
        entries.append((sk, code, value, pts))
    entries.sort(key=lambda e: e[0])
    labels = tuple(_label(e[3]) for e in entries)
    codes = np.array([e[1] for e in entries], dtype=np.dtype(src.code_dtype))
    codes.setflags(write=False)
    return BoundaryValues(src, dst, via, mode, overflow, labels, tuple(tuple(e[3]) for e in entries), codes,
                          tuple(e[2] for e in entries))
