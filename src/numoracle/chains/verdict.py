"""The verdict of a cast-chain classification: witness, region table, reason, and how it reads."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.formats.format import AnyFormat, Format
from ..core.scalar import Special, value_of
from ..core.text import hex_width

if TYPE_CHECKING:  # pragma: no cover
    from ..core.formats.policy import Policy
    from .spec import ChainSpec

__all__ = ["ChainVerdict", "Witness", "Region", "Proof", "REASONS", "values_subset"]

REASONS = {
    "EXACT_INTERMEDIATE": "every intermediate hop is exact for every source value",
    "EXACT_WHERE_FINITE": "the intermediate hops round only where the destination overflows anyway",
    "INNOCUOUS_DOUBLE_ROUNDING": "an intermediate hop rounds, but never onto a value the final rounding treats "
                                 "differently",
    "DOUBLE_ROUNDING": "the intermediate rounding moves a value onto a different side of a destination "
                       "rounding boundary",
    "RANGE": "an intermediate overflows, saturates or underflows where the direct conversion does not",
    "SPECIALS": "zeros, infinities or NaNs are carried differently",
}


def fmt_value(v: Any) -> str:
    """A value as a person reads it: integers whole, dyadic fractions by their float64 repr."""
    if isinstance(v, Special):
        return str(v)
    f = float(v)
    if (isinstance(v, int) or v.denominator == 1) and (abs(v) < 1 << 53 or Fraction(f) != v):
        return str(int(v))
    if Fraction(f) == v:
        return repr(f)
    return f"{v.numerator}/{v.denominator}"


def _code_str(code: int, fmt: AnyFormat) -> str:
    width = hex_width(fmt)
    return f"0x{code:0{width}x}"


@dataclass(frozen=True)
class Witness:
    """The smallest-magnitude source value where chain and direct differ, with every hop's result."""

    source_code: int
    source_value: str
    hop_codes: tuple[int, ...]
    hop_values: tuple[str, ...]
    chain_code: int
    direct_code: int
    chain_value: str
    direct_value: str

    @classmethod
    def build(cls, spec: ChainSpec, code: int) -> Witness:
        src = spec.src
        c = np.array([code], np.uint64).astype(src.code_dtype)
        hops = [int(h[0]) for h in spec.hops(c)]
        direct = int(spec.direct_cast(c)[0])
        hv = tuple(fmt_value(value_of(h, f)) for h, f in zip(hops, spec.formats[1:]))
        return cls(code, fmt_value(value_of(code, src)), tuple(hops), hv, hops[-1], direct, hv[-1],
                   fmt_value(value_of(direct, spec.dst)))

    def describe(self, spec: ChainSpec) -> str:
        steps = [f"{spec.src.name} {self.source_value} ({_code_str(self.source_code, spec.src)})"]
        for f, c, v in zip(spec.formats[1:], self.hop_codes, self.hop_values):
            steps.append(f"{f.name} {v} ({_code_str(c, f)})")
        return (" -> ".join(steps) + f"; direct: {spec.dst.name} {self.direct_value} "
                f"({_code_str(self.direct_code, spec.dst)})")


@dataclass(frozen=True)
class Region:
    """A source range (by magnitude, on one or both halves) where every hop behaves one way."""

    side: str  # "|x|", "x>0" or "x<0"
    low: str
    high: str
    low_open: bool
    high_open: bool
    hops: tuple[str, ...]  # per hop: exact / rounds / overflows / underflows / ...
    agree: bool

    def range_text(self) -> str:
        var = "|x|"
        lo = "" if (self.low == "0" and not self.low_open) else f"{self.low} {'<' if self.low_open else '<='} "
        hi = "" if self.high == "inf" else f" {'<' if self.high_open else '<='} {self.high}"
        side = {"x>0": " (x > 0)", "x<0": " (x < 0)"}.get(self.side, "")
        return f"{lo}{var}{hi}{side}"


@dataclass(frozen=True)
class Proof:
    method: str
    points: int
    seconds: float


@dataclass
class ChainVerdict:
    """Whether a cast chain equals the direct cast for every source value, and why."""

    spec: Any = field(repr=False)
    equivalent: bool
    reason: str
    witness: Witness | None
    proof: Proof
    segments: tuple[np.ndarray, np.ndarray] = field(repr=False, default=(np.zeros(0, np.int64),) * 2)
    _regions: list[Region] | None = field(default=None, repr=False, compare=False)

    @property
    def regions(self) -> list[Region]:
        """The source range split where any hop's behaviour changes (computed on first use)."""
        if self._regions is None:
            self._regions = describe_regions(self.spec, self.segments)
        return self._regions

    def __bool__(self) -> bool:
        return self.equivalent

    @property
    def chain(self) -> str:
        return self.spec.label()

    def summary(self) -> str:
        """One line: what was checked and the verdict (every numoracle report has summary())."""
        direct = f"{self.spec.src.name} -({self.spec.direct.rounding.value})-> {self.spec.dst.name}"
        if self.equivalent:
            return f"{self.chain} EQUALS {direct} for every source value ({self.reason})"
        return f"{self.chain} DIFFERS from {direct} ({self.reason})"

    def table_rows(self) -> list[list[str]]:
        head = ["source range"] + [f"hop {j + 1} -> {f.name}" for j, f in enumerate(self.spec.formats[1:])]
        rows = [head + ["chain = direct"]]
        for r in self.regions:
            rows.append([r.range_text(), *r.hops, "yes" if r.agree else "NO"])
        return rows

    def why(self) -> str:
        """The reason in words (a chain with no intermediate format is the direct cast itself)."""
        if len(self.spec.formats) == 2:
            return "there is no intermediate format: the chain is the direct cast"
        return REASONS[self.reason]

    def __str__(self) -> str:
        lines = [self.summary(), f"  why: {self.why()}"]
        if self.witness is not None:
            lines.append(f"  smallest witness: {self.witness.describe(self.spec)}")
        rows = self.table_rows()
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        lines.append(f"  proof: {self.proof.method}; {self.proof.points} points; {self.proof.seconds:.3f} s")
        return "\n".join(lines)

    def to_markdown(self) -> str:
        rows = self.table_rows()
        out = [f"**{self.summary()}**", "", self.why() + ".", ""]
        if self.witness is not None:
            out += [f"Smallest witness: {self.witness.describe(self.spec)}", ""]
        out.append("| " + " | ".join(rows[0]) + " |")
        out.append("|" + "---|" * len(rows[0]))
        out += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        out += ["", f"Proof: {self.proof.method}; {self.proof.points} points; {self.proof.seconds:.3f} s."]
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        w = self.witness
        return {
            "chain": self.chain,
            "formats": [f.name for f in self.spec.formats],
            "rounding": [p.rounding.value for p in self.spec.policies],
            "overflow": [p.overflow.value for p in self.spec.policies],
            "equivalent": self.equivalent,
            "reason": self.reason,
            "witness": None if w is None else {
                "source_code": _code_str(w.source_code, self.spec.src), "source_value": w.source_value,
                "hop_codes": [_code_str(c, f) for c, f in zip(w.hop_codes, self.spec.formats[1:])],
                "hop_values": list(w.hop_values),
                "chain_code": _code_str(w.chain_code, self.spec.dst), "chain_value": w.chain_value,
                "direct_code": _code_str(w.direct_code, self.spec.dst), "direct_value": w.direct_value,
            },
            "regions": [{"range": r.range_text(), "hops": list(r.hops), "agree": r.agree} for r in self.regions],
            "proof": {"method": self.proof.method, "points": self.proof.points, "seconds": self.proof.seconds},
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def values_subset(a: AnyFormat, b: AnyFormat) -> bool:
    """Every finite value of ``a`` is a value of ``b`` (so a conversion a -> b never rounds)."""
    if a.is_integer:
        lo, hi = a.min_value, a.max_value
        if b.is_integer:
            return b.min_value <= lo and hi <= b.max_value
        top = max(abs(lo), hi)  # every integer up to 2^p is a value of a p-bit float format
        return (lo >= 0 or b.signed) and top <= b.max_finite and top <= (1 << b.precision)
    assert isinstance(a, Format)
    if b.is_integer:
        return False
    assert isinstance(b, Format)
    if a.signed and not b.signed:
        return False
    if a.has_negative_zero and not b.has_negative_zero:
        return False
    return (b.precision >= a.precision and b.min_subnormal <= a.min_subnormal and b.max_finite >= a.max_finite
            and (b.has_subnormals or not a.has_subnormals or a.min_subnormal >= b.min_normal)
            and _grid_contains(a, b))


def _grid_contains(a: Format, b: Format) -> bool:
    """a's quantum is a multiple of b's in every binade of a (b at least as fine everywhere)."""
    for e in range(a.emin - (a.man_bits if a.has_subnormals else 0), a.emax + 1):
        qa = max(e, a.emin) - a.man_bits
        qb = max(e, b.emin) - b.man_bits if b.has_subnormals else e - b.man_bits
        if not b.has_subnormals and e < b.emin:
            return False
        if qb > qa:
            return False
    return True


# ---- regions: the argument as a table ---------------------------------------------------
def _breakpoints(spec: ChainSpec) -> list[tuple[Fraction, bool]]:
    """Magnitudes where a hop's behaviour may change: (b, split_at) with split_at meaning the new
    region starts at |x| >= b, else at |x| > b."""
    last = len(spec.policies) - 1
    pts = [p for j, (f, pol) in enumerate(zip(spec.formats[1:], spec.policies))
           for p in _hop_breakpoints(f, pol, j < last)]
    return sorted(set(pts))


@functools.lru_cache(maxsize=1024)
def _hop_breakpoints(f: AnyFormat, pol: Policy, intermediate: bool) -> tuple[tuple[Fraction, bool], ...]:
    """One hop's breakpoints (cached: the chain table meets each (format, policy) thousands of times)."""
    if f.is_integer:
        return ((Fraction(f.max_value), False), (Fraction(-f.min_value), False))
    assert isinstance(f, Format)
    pts = [f.overflow_threshold(pol.rounding.value, sign=sign) for sign in (1, -1)]
    pts += [(f.max_finite, False), (f.min_normal, True), (f.min_subnormal, True)]
    if intermediate:  # where an intermediate stops holding every integer
        pts.append((Fraction(2) ** f.precision, False))
    return tuple(pts)


def _hop_behaviour(spec: ChainSpec, codes: np.ndarray) -> list[set[str]]:
    """Per hop, the set of things it does to these source codes."""
    hop_codes = [[int(c) for c in codes]] + [[int(c) for c in h] for h in spec.hops(codes)]
    out = []
    for j, (f, pol) in enumerate(zip(spec.formats[1:], spec.policies)):
        seen = {_code_behaviour(spec.formats[j], a, f, b, pol.rounding.value)
                for a, b in zip(hop_codes[j], hop_codes[j + 1])}
        out.append(seen)
    return out


@functools.lru_cache(maxsize=1 << 16)
def _code_behaviour(fa: AnyFormat, a: int, fb: AnyFormat, b: int, mode: str) -> str:
    """``_one_behaviour`` of the hop fa -> fb taking code a to code b (cached: a chain table asks
    the same question for every chain sharing the hop)."""
    return _one_behaviour(value_of(a, fa), value_of(b, fb), fb, mode)


def _one_behaviour(a: Any, b: Any, f: AnyFormat, mode: str = "rne") -> str:
    """What one hop did to one value: exact, rounds, overflows, saturates, underflows, special."""
    if isinstance(a, Special) and a.kind != "zero":
        return "special"
    if isinstance(b, Special) and b.kind in ("inf", "nan"):
        return "overflows"
    fa = Fraction(0) if isinstance(a, Special) else Fraction(a)
    fb = Fraction(0) if isinstance(b, Special) else Fraction(b)
    if fa == fb:
        return "exact"
    if f.is_integer:
        if fa > f.max_value or fa < f.min_value:
            return "saturates"
    else:
        assert isinstance(f, Format)
        t, inclusive = f.overflow_threshold(mode, sign=1 if fa > 0 else -1)
        if abs(fa) > t or (abs(fa) == t and inclusive):
            return "saturates"
        if abs(fa) < f.min_normal:
            return "underflows" if fb == 0 else "rounds (subnormal)"
    return "rounds"


def _region_cuts(spec: ChainSpec, negative: bool) -> list[tuple[int, int, Fraction, bool, tuple | None]]:
    """One half's source range cut where a hop's behaviour may change: (lo_key, hi_key, low bound,
    low closed, next cut) per piece, before merging pieces that behave alike."""
    from ..core.engine.codekeys import binades, from_key

    bins = binades(spec.src, negative)
    if not bins:
        return []
    sgn = -1 if negative else 1
    first = bins[0][2] if negative else bins[0][1]
    last = bins[-1][1] if negative else bins[-1][2]
    lo_k, hi_k = (last, first) if negative else (first, last)
    src_codes = from_key(np.array([lo_k, hi_k]), spec.src)
    lo_mag, hi_mag = sorted(abs(Fraction(value_of(int(c), spec.src))) for c in src_codes)
    cuts = [(b, at) for b, at in _breakpoints(spec) if lo_mag < b <= hi_mag or (b == lo_mag and not at)]
    # region boundaries as source keys (by magnitude): the first source value in each region
    starts = [hi_k if negative else lo_k]
    labels: list[tuple[Fraction, bool]] = [(Fraction(0), True)]
    for b, at in cuts:
        k = _first_key_at(spec.src, b, at, negative)
        if lo_k <= k <= hi_k:
            starts.append(k)
            labels.append((b, at))
    order = sorted(range(len(starts)), key=lambda i: sgn * starts[i])
    uniq: list[tuple[int, tuple[Fraction, bool]]] = []
    for i in order:
        if uniq and uniq[-1][0] == starts[i]:
            uniq[-1] = (starts[i], labels[i])
        else:
            uniq.append((starts[i], labels[i]))
    end_key = lo_k if negative else hi_k
    out = []
    for n, (k, (b, at)) in enumerate(uniq):
        nk = (uniq[n + 1][0] - sgn) if n + 1 < len(uniq) else end_key
        nxt = uniq[n + 1][1] if n + 1 < len(uniq) else None
        out.append((min(k, nk), max(k, nk), b, at, nxt))
    return out


@functools.lru_cache(maxsize=8192)
def _first_key_at(src: AnyFormat, b: Fraction, at: bool, negative: bool) -> int:
    """The source key of the first value of magnitude >= b (at) or > b (not at) on one side."""
    from ..core.engine.codekeys import to_key
    from ..core.scalar import round_value

    sgn = -1 if negative else 1
    c = round_value(sgn * b, src, rounding="rd" if negative else "ru",
                    overflow="saturate" if not src.has_inf else None)
    k = int(to_key(np.array([c], np.uint64), src)[0])
    v = value_of(c, src)
    if not isinstance(v, Special) and abs(Fraction(v)) == b and not at:
        k += sgn
    return k


def region_key_ranges(spec: ChainSpec) -> np.ndarray:
    """(lo_key, hi_key) of every region piece of both halves, sorted (for counting differences)."""
    pieces = [(a, z) for neg in (False, True) for a, z, *_ in _region_cuts(spec, neg)]
    return np.array(sorted(pieces), np.int64).reshape(-1, 2)


def _side_regions(spec: ChainSpec, negative: bool, segments: tuple[np.ndarray, np.ndarray]) -> list[Region]:
    from ..core.engine.codekeys import from_key

    regions: list[Region] = []
    for lo_r, hi_r, b, at, nxt in _region_cuts(spec, negative):
        q = (hi_r - lo_r) // 4
        span = sorted({lo_r, hi_r, lo_r + q, lo_r + 2 * q, lo_r + 3 * q, min(lo_r + 1, hi_r), max(hi_r - 1, lo_r)})
        codes = from_key(np.array(span, np.int64), spec.src).astype(spec.src.code_dtype)
        beh = _hop_behaviour(spec, codes)
        agree = not bool(np.any((segments[0] <= hi_r) & (segments[1] >= lo_r)))
        regions.append(Region("x<0" if negative else "x>0", fmt_value(b), "inf" if nxt is None else fmt_value(nxt[0]),
                              low_open=not at, high_open=(nxt[1] if nxt is not None else False),
                              hops=tuple(" / ".join(sorted(x)) for x in beh), agree=agree))
    return _merge(regions)


def _merge(regions: list[Region]) -> list[Region]:
    out: list[Region] = []
    for r in regions:
        if out and out[-1].hops == r.hops and out[-1].agree == r.agree:
            p = out[-1]
            out[-1] = Region(p.side, p.low, r.high, p.low_open, r.high_open, p.hops, p.agree)
        else:
            out.append(r)
    return out


def describe_regions(spec: ChainSpec, segments: tuple[np.ndarray, np.ndarray]) -> list[Region]:
    """The source range split where any hop's behaviour changes, with agreement per range.

    ``segments``: (starts, ends) of the source-key ranges where chain and direct differ."""
    pos = _side_regions(spec, False, segments)
    neg = _side_regions(spec, True, segments)
    if neg and [(r.low, r.high, r.hops, r.agree) for r in neg] == [(r.low, r.high, r.hops, r.agree) for r in pos]:
        return [Region("|x|", r.low, r.high, r.low_open, r.high_open, r.hops, r.agree) for r in pos]
    return pos + neg


def classify_reason(spec: ChainSpec, witness: Witness | None, segments: tuple[np.ndarray, np.ndarray],
                    finite: Witness | None = None) -> str:
    """The verdict's reason, from the witness; where that is a zero, an infinity or a NaN, from
    ``finite`` (the least nonzero finite differing source) if any, else SPECIALS."""
    if witness is None:
        inter = spec.formats[:-1]
        if all(values_subset(inter[j], inter[j + 1]) for j in range(len(inter) - 1)):
            return "EXACT_INTERMEDIATE"
        for r in describe_regions(spec, segments):
            mids = r.hops[:-1]
            if any("exact" != h for h in mids) and not all(w in ("overflows", "saturates") for w in
                                                          r.hops[-1].split(" / ")):
                return "INNOCUOUS_DOUBLE_ROUNDING"
        return "EXACT_WHERE_FINITE"
    src_v = value_of(witness.source_code, spec.src)
    if (isinstance(src_v, Special) or src_v == 0) and finite is not None:
        witness, src_v = finite, value_of(finite.source_code, spec.src)
    if isinstance(src_v, Special) or src_v == 0:
        return "SPECIALS"
    vals = [src_v] + [value_of(c, f) for c, f in zip(witness.hop_codes, spec.formats[1:])]
    for j, f in enumerate(spec.formats[1:-1]):
        b = _one_behaviour(vals[j], vals[j + 1], f, spec.policies[j].rounding.value)
        if b in ("overflows", "saturates", "underflows"):
            return "RANGE"
    d = value_of(witness.direct_code, spec.dst)
    c = value_of(witness.chain_code, spec.dst)
    if isinstance(c, Special) != isinstance(d, Special) and (
            isinstance(c, Special) and c.kind != "zero" or isinstance(d, Special) and d.kind != "zero"):
        return "RANGE"
    return "DOUBLE_ROUNDING"
