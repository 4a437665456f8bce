"""Classification of a converter's mismatches and the :class:`SweepReport` of a conformance sweep.

A mismatch is an input whose code from the converter under test (``fn``) differs from the
engine's (``numoracle.cast`` with the sweep's policy). :func:`classify_mismatches` puts each one
into the first class of :data:`CLASSES` (this order is the precedence) whose test it passes:

1. ``nan_payload_or_sign``: both results are NaN (different NaN codes: sign or payload).
2. ``nan_to_policy``: the source is NaN or +-inf and the destination has no NaN (FP6, FP4,
   integers): the converter maps the special to another finite value than the ``nan_to`` /
   overflow policy says.
3. ``saturation_vs_inf_nan``: one side is +-inf or NaN, the other finite, and the converter's
   code equals the engine's with the other overflow choice (``overflow='saturate'`` when the
   sweep's policy is IEEE/NaN, the destination's IEEE/NaN default when it is saturate).
4. ``signed_zero``: both results are zeros of different signs.
5. ``double_rounding``: the converter's code equals the engine's cast of the source first rounded
   (RNE) to an intermediate format I, tried in the order FP32, FP16, BF16, TF32, where I holds
   every destination value (``I`` wider than ``dst``) and not every source value (narrower than
   ``src``); the second hop uses the sweep's policy or its other overflow choice. Checked before
   flush-to-zero because rounding through FP32 can itself give 0 next to the smallest subnormal.
6. ``flush_to_zero``: the converter gives +-0 where the source is nonzero and below the
   destination's smallest normal, or its code equals the engine's with ``ftz`` and/or ``daz``
   toggled.
7. ``off_by_one_ulp``: both results are numbers one step apart in the destination's order;
   whether the source lies exactly at a rounding tie (a midpoint of two destination values, or
   ``k + 1/2`` for integer destinations) is counted.
8. ``other``: anything else.

Separately from these classes, a sample of every chunk is converted twice; elements whose two
codes differ are counted as ``non_deterministic``.

Each element is classified on its own, so one cause can show under several classes: a converter
that truncates (or uses any other rounding mode) differs from RNE next to destination ties exactly
as a double rounding through FP32 does, and is counted there, and elsewhere as ``off_by_one_ulp``
not at a tie; a double rounding that lands on the overflow threshold counts as saturation. To test
such a hypothesis, sweep again with the suspected policy (``rounding='rtz'``, ``overflow='wrap'``
...): the classes it explains disappear.

With a known library (``fn`` one of numpy / ml_dtypes / torch, or a callable with such a
``library`` attribute) each mismatch is also checked against ``deviations.KNOWN_DEVIATIONS``
(per element, see :func:`known_labels`), under the library's default policy only.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .chainreport import fmt_value, values_subset
from .codekeys import is_nan, to_key
from .convert import cast_codes, decode
from .deviations import classify_ids, deviations_for
from .exact import value_of
from .formats import BF16, FP16, FP32, TF32, AnyFormat, Format
from .rounding import Flags, Overflow, Policy, Rounding, default_overflow, resolve_policy

__all__ = ["CLASSES", "SweepReport", "Witness", "ClassStats", "SweepError", "classify_mismatches",
           "intermediates", "tie_mask"]

CLASSES = ("nan_payload_or_sign", "nan_to_policy", "saturation_vs_inf_nan", "signed_zero", "double_rounding",
           "flush_to_zero", "off_by_one_ulp", "other")
_INTERMEDIATES = (FP32, FP16, BF16, TF32)
_NONE = -1


# ---- classification -------------------------------------------------------------------------
def intermediates(src: AnyFormat, dst: AnyFormat) -> tuple[Format, ...]:
    """Formats tried for double rounding: wider than ``dst`` (hold all its values), narrower than ``src``."""
    return tuple(f for f in _INTERMEDIATES
                 if f != src and f != dst and values_subset(dst, f) and not values_subset(src, f))


def alternative_overflow(dst: AnyFormat, pol: Policy) -> Policy | None:
    """The policy with the other overflow choice (saturate <-> the IEEE/NaN default), None if there is none."""
    if dst.is_integer or not dst.has_nan:
        return None
    if pol.overflow is Overflow.SATURATE:
        return dataclasses.replace(pol, overflow=default_overflow(dst))
    return dataclasses.replace(pol, overflow=Overflow.SATURATE)


def inf_mask(codes: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Where codes are +-inf of ``fmt``."""
    codes = np.asarray(codes)
    if fmt.is_integer or not fmt.has_inf:
        return np.zeros(codes.shape, bool)
    assert isinstance(fmt, Format)
    t = codes.dtype.type
    mag = codes & t(fmt.mag_mask)
    if fmt.nan == "fnuz":  # P3109-style: inf at the top magnitude
        return mag == t(fmt.mag_mask)
    return mag == t(((1 << fmt.exp_bits) - 1) << fmt.man_bits)


def zero_mask(codes: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Where codes are +-0 of ``fmt``."""
    codes = np.asarray(codes)
    if fmt.is_integer:
        return codes == 0
    assert isinstance(fmt, Format)
    if not fmt.has_zero:
        return np.zeros(codes.shape, bool)
    t = codes.dtype.type
    z = (codes & t(fmt.mag_mask)) == 0
    return z & (codes != t(fmt.sign_bit)) if fmt.nan == "fnuz" else z


def _tie_format(dst: Format) -> Format | None:
    """dst with one more significand bit (same smallest exponent): its values are dst's values and midpoints."""
    if dst.bits + 2 > 64:
        return None
    try:
        return Format(f"{dst.name}_ties", dst.exp_bits + 1, dst.man_bits + 1, 1 - dst.emin)
    except ValueError:  # wider than the engine carries (formats.MAX_EMAX ...): undecided, like FP64
        return None


def tie_mask(x: np.ndarray, src: AnyFormat, dst: AnyFormat) -> np.ndarray | None:
    """Where source codes lie exactly at a rounding tie of ``dst``; None where that cannot be decided (FP64).

    A tie is the midpoint of two neighbouring ``dst`` values (0 and the smallest subnormal included) or
    the overflow threshold max_finite + ulp/2; for integer destinations ``k + 1/2``.
    """
    x = np.asarray(x)
    if src.is_integer and dst.is_integer:
        return np.zeros(x.shape, bool)
    if dst.is_integer:
        v = decode(x, src).astype(np.float64)
        with np.errstate(invalid="ignore"):
            return np.isfinite(v) & (np.floor(v) != v) & (np.floor(2 * v) == 2 * v)
    assert isinstance(dst, Format)
    tf = _tie_format(dst)
    if tf is None:
        return None
    _, fl_t = cast_codes(x, src, tf, resolve_policy(tf), flags=True)
    _, fl_d = cast_codes(x, src, dst, resolve_policy(dst), flags=True)
    bad = np.uint8(Flags.INEXACT | Flags.OVERFLOW | Flags.INVALID)
    tie = ((fl_t & bad) == 0) & ((fl_d & np.uint8(Flags.INEXACT)) != 0)
    if tie.any():  # the last tie is the overflow threshold, midway from max finite to the next power step
        top = float(dst.max_finite) + 2.0 ** (dst.emax - dst.man_bits - 1)
        tie[tie] = np.abs(decode(x[tie], src).astype(np.float64)) <= top
    return tie


def classify_mismatches(src: AnyFormat, dst: AnyFormat, pol: Policy, x: np.ndarray, a: np.ndarray,
                        r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class of each mismatch (index into :data:`CLASSES`) and a detail per element.

    ``x``: source codes, ``a``: the converter's codes, ``r``: the engine's codes (``a != r``
    everywhere). The detail is the index into :func:`intermediates` for ``double_rounding`` and
    1 for an ``off_by_one_ulp`` element at an exact tie (0 otherwise, -1 when undecidable).
    """
    n = x.size
    cls = np.full(n, _NONE, np.int8)
    det = np.zeros(n, np.int8)
    nan_a, nan_r = is_nan(a, dst), is_nan(r, dst)
    both = nan_a & nan_r
    cls[both] = CLASSES.index("nan_payload_or_sign")
    open_ = ~both  # not classified yet

    def assign(where: np.ndarray, name: str, detail: Any = None) -> None:
        cls[where] = CLASSES.index(name)
        if detail is not None:
            det[where] = detail
        open_[where] = False

    def eng(p: Policy, xs: np.ndarray, s: AnyFormat = src) -> np.ndarray:
        return cast_codes(xs, s, dst, p)

    src_nan = is_nan(x, src)
    if not dst.has_nan and not src.is_integer:
        assign(open_ & (src_nan | inf_mask(x, src)), "nan_to_policy")
    alt = alternative_overflow(dst, pol)
    if alt is not None:
        nonfin_a, nonfin_r = nan_a | inf_mask(a, dst), nan_r | inf_mask(r, dst)
        cand = open_ & (nonfin_a != nonfin_r) & ~src_nan
        if cand.any():
            assign(_scatter(cand, eng(alt, x[cand]) == a[cand]), "saturation_vs_inf_nan")
    if dst.has_negative_zero:
        assign(open_ & zero_mask(a, dst) & zero_mask(r, dst), "signed_zero")
    pols = [pol] + ([alt] if alt is not None else [])
    for i, inter in enumerate(intermediates(src, dst)):
        cand = open_.copy()
        if not cand.any():
            break
        y = cast_codes(x[cand], src, inter, Policy(Rounding.NEAREST_EVEN, Overflow.IEEE, None))
        ac = a[cand]
        m = np.zeros(ac.size, bool)
        for p in pols:
            m |= eng(p, y, inter) == ac
        assign(_scatter(cand, m), "double_rounding", np.int8(i))
    cand = open_.copy()
    if cand.any() and not dst.is_integer and dst.has_subnormals and not src.is_integer:
        xs, ac = x[cand], a[cand]
        with np.errstate(invalid="ignore"):
            v = np.abs(decode(xs, src).astype(np.float64))
        m = zero_mask(ac, dst) & (v > 0) & (v < float(dst.min_normal))
        toggles = [dataclasses.replace(pol, ftz=not pol.ftz)]
        if isinstance(src, Format) and src.has_subnormals:
            toggles += [dataclasses.replace(pol, daz=not pol.daz),
                        dataclasses.replace(pol, ftz=not pol.ftz, daz=not pol.daz)]
        for p in toggles:
            m |= eng(p, xs) == ac
        assign(_scatter(cand, m), "flush_to_zero")
    cand = open_ & ~nan_a & ~nan_r
    if cand.any():
        ka, kr = to_key(a[cand], dst), to_key(r[cand], dst)
        with np.errstate(over="ignore"):
            one = ((ka > kr) & (ka - kr == 1)) | ((kr > ka) & (kr - ka == 1))
        hit = _scatter(cand, one)
        if one.any():
            t = tie_mask(x[hit], src, dst)
            assign(hit, "off_by_one_ulp", np.int8(-1) if t is None else t.astype(np.int8))
    assign(open_.copy(), "other")
    return cls, det


def _scatter(cand: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """A full-length mask from a mask over the ``cand`` elements."""
    out = np.zeros(cand.shape, bool)
    out[cand] = hit
    return out


def first_true(mask: np.ndarray, k: int) -> np.ndarray:
    """Positions of the first ``k`` True elements (scanning growing windows: no full pass when they come early)."""
    got: list[np.ndarray] = []
    lo, step, n = 0, 4096, 0
    while lo < mask.size and n < k:
        p = np.flatnonzero(mask[lo:lo + step]) + lo
        got.append(p[: k - n])
        n += got[-1].size
        lo, step = lo + step, step * 4
    return np.concatenate(got) if got else np.zeros(0, np.int64)


def smallest(codes: np.ndarray, k: int) -> np.ndarray:
    """Positions of the first occurrences of the ``k`` smallest distinct codes."""
    if k <= 0 or not codes.size:
        return np.zeros(0, np.int64)
    if codes.size > 8 * k:
        cand = np.argpartition(codes, 8 * k)[: 8 * k]
        order = cand[np.lexsort((cand, codes[cand]))]
        _, first = np.unique(codes[order], return_index=True)
        if first.size >= k:
            return order[first[:k]]
    _, first = np.unique(codes, return_index=True)
    return first[:k]


def known_labels(library: str, src: AnyFormat, dst: AnyFormat, pol: Policy, cls: np.ndarray, x: np.ndarray,
                 a: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Per mismatch, the label of the known deviation of ``library`` that covers it (id 0: none).

    ``deviations.classify_ids`` decides, except for two mass classes whose deviation predicate is
    evaluated directly (same coverage; the label is the kind alone, without a ``kind+kind`` chain):
    both results NaN (``nan_payload_or_sign``) and, when the sweep's policy does not saturate, a
    saturated result where the engine gives NaN (``saturation_vs_nan``).
    """
    kinds = {d.kind for d in deviations_for(library, src, dst)}
    ids = np.zeros(x.size, np.int16)
    labels = ["", "unexplained"]
    done = np.zeros(x.size, bool)
    if "nan_payload_or_sign" in kinds:
        done |= cls == CLASSES.index("nan_payload_or_sign")
        ids[done] = len(labels)
        labels.append("nan_payload_or_sign")
    if "saturation_vs_nan" in kinds and pol.overflow is not Overflow.SATURATE:
        sat = (cls == CLASSES.index("saturation_vs_inf_nan")) & is_nan(r, dst)
        ids[sat] = len(labels)
        labels.append("saturation_vs_nan")
        done |= sat
    rest = ~done
    if rest.any():
        sub, sub_labels = classify_ids(library, src, dst, x[rest], a[rest], rounding=pol.rounding.value,
                                       overflow=pol.overflow.value)
        remap = np.array([0, 0] + [len(labels) + i for i in range(len(sub_labels) - 2)], np.int16)
        labels += list(sub_labels[2:])
        ids[rest] = remap[sub]
    return ids, labels


def summarise(src: AnyFormat, dst: AnyFormat, pol: Policy, library: str | None, k: int, x: np.ndarray,
              a: np.ndarray, r: np.ndarray, ascending: bool = False) -> dict[str, Any]:
    """Counts per class, known-deviation coverage and labels, ties and the ``k`` smallest witnesses per class.

    ``ascending``: ``x`` holds distinct codes in increasing order (an exhaustive range).
    """
    cls, det = classify_mismatches(src, dst, pol, x, a, r)
    counts = np.bincount(cls, minlength=len(CLASSES))
    out: dict[str, Any] = {"counts": Counter(), "known": Counter(), "labels": Counter(), "ties": Counter(),
                           "witnesses": {}}
    ids, labels = (None, []) if library is None else known_labels(library, src, dst, pol, cls, x, a, r)
    if ids is not None:
        L = len(labels)
        pair = np.bincount(cls.astype(np.int32) * L + ids, minlength=len(CLASSES) * L).reshape(len(CLASSES), L)
        known = pair[:, 2:].sum(axis=1)  # label ids 0 ("" ) and 1 ("unexplained") are not known
        for c, j in zip(*np.nonzero(pair[:, 2:])):
            out["labels"][(CLASSES[c], labels[j + 2])] += int(pair[c, j + 2])
    inters = intermediates(src, dst)
    for c in np.flatnonzero(counts):
        name = CLASSES[c]
        out["counts"][name] += int(counts[c])
        if ids is not None:
            out["known"][name] += int(known[c])
        mask = cls == c
        if name == "off_by_one_ulp":
            d = det[mask]
            out["ties"][name] += -1 if (d < 0).any() else int(np.count_nonzero(d == 1))
        if ascending:  # distinct codes in increasing order: the first k are the smallest
            pos = first_true(mask, k)
        else:
            sel = np.flatnonzero(mask)
            pos = sel[smallest(x[sel], k)]
        ws = []
        for i in pos:
            note = ""
            if name == "double_rounding":
                note = f"via {inters[det[i]].name}"
            elif name == "off_by_one_ulp":
                note = {1: "at an exact tie", 0: "not at a tie"}.get(int(det[i]), "")
            elif name == "saturation_vs_inf_nan":
                fin = not (is_nan(a[i:i + 1], dst)[0] or inf_mask(a[i:i + 1], dst)[0])
                note = "fn saturates" if fin else "fn gives inf/NaN"
            ws.append(Witness(int(x[i]), int(a[i]), int(r[i]), note, labels[ids[i]] if ids is not None else ""))
        out["witnesses"][name] = tuple(ws)
    return out


# ---- the report ---------------------------------------------------------------------------------
def code_hex(code: int, fmt: AnyFormat) -> str:
    return f"0x{int(code):0{(fmt.bits + 3) // 4}x}"


def show_code(code: int, fmt: AnyFormat) -> str:
    """``0x3f81 (1.0078125)``: the code and its exact value (dyadic values by their float64 repr)."""
    return f"{code_hex(code, fmt)} ({fmt_value(value_of(int(code), fmt))})"


@dataclass(frozen=True, order=True)
class Witness:
    """One input of a class: the source code, the converter's and the engine's codes, a note."""

    source: int
    fn_code: int
    engine_code: int
    note: str = ""
    known: str = ""  # the known deviation's label (library sweeps), "" if none

    def describe(self, src: AnyFormat, dst: AnyFormat, fn_name: str = "fn") -> str:
        extra = "; ".join(t for t in (self.note, f"known: {self.known}" if self.known else "") if t)
        return (f"{src.name} {show_code(self.source, src)} -> {fn_name} {show_code(self.fn_code, dst)}, "
                f"numoracle {show_code(self.engine_code, dst)}" + (f"  [{extra}]" if extra else ""))

    def describe_calls(self, src: AnyFormat, dst: AnyFormat) -> str:
        """A non-determinism witness: ``fn_code`` and ``engine_code`` hold fn's first and second result."""
        return (f"{src.name} {show_code(self.source, src)}: call 1 {show_code(self.fn_code, dst)}, "
                f"call 2 {show_code(self.engine_code, dst)}")

    def to_dict(self, src: AnyFormat, dst: AnyFormat) -> dict[str, Any]:
        return {"source": code_hex(self.source, src), "source_value": fmt_value(value_of(self.source, src)),
                "fn": code_hex(self.fn_code, dst), "fn_value": fmt_value(value_of(self.fn_code, dst)),
                "engine": code_hex(self.engine_code, dst), "engine_value": fmt_value(value_of(self.engine_code, dst)),
                "note": self.note, "known": self.known}


@dataclass
class ClassStats:
    """Count of one mismatch class, how many a known deviation covers (None: not a library sweep), witnesses."""

    name: str
    count: int
    known: int | None
    labels: dict[str, int] = field(default_factory=dict)  # known-deviation label -> count
    ties: int | None = None  # off_by_one_ulp: how many at an exact tie (None: undecidable / other class)
    witnesses: tuple[Witness, ...] = ()

    @property
    def unexplained(self) -> int:
        return self.count - (self.known or 0)

    def coverage(self) -> str:
        if self.known is None:
            return "known deviations not checked"
        if self.known == self.count:
            return "all covered by known deviations"
        if self.known == 0:
            return "NOT covered by known deviations"
        return f"{self.known} covered, {self.count - self.known} NOT covered by known deviations"


@dataclass(frozen=True)
class SweepError:
    """A problem with the converter itself (an exception, a wrong shape or dtype) or with the executor."""

    kind: str  # "exception" | "wrong_shape" | "wrong_dtype" | "executor"
    message: str
    first_range: tuple[int, int]  # input positions [lo, hi) of the first chunk where it happened
    first_codes: tuple[int, int]  # the first and last source code of that chunk
    chunks: int = 1
    elements: int = 0  # inputs not compared because of it
    compared: bool = False  # wrong_dtype: the values were converted exactly and compared anyway


@dataclass
class SweepReport:
    """Result of :func:`numoracle.sweep`. Equal inputs give equal reports (timings are not compared).

    ``verdict``: ``"clean"`` (every input gives the engine's code), ``"explained"`` (every mismatch
    is covered by a known deviation of the library), ``"unexplained"`` (some mismatch is not, or
    the converter is non-deterministic) or ``"error"`` (on some chunk the converter raised,
    returned a wrong shape or dtype, or the executor failed; see ``errors``: a wrong but exactly
    convertible dtype is still compared, and still an error). ``ok`` is True for clean and
    explained, ``clean`` for clean only. ``unexplained`` counts the mismatches no known deviation
    covers (all of them for a converter that is not a known library, or when the policy is not
    the library's default one: ``known_note`` says so). ``classes`` maps each occurring class
    (in :data:`CLASSES` order) to its :class:`ClassStats`; ``counts()`` to its count.
    """

    src: AnyFormat
    dst: AnyFormat
    against: str
    library: str | None
    policy: str
    inputs: str
    n_inputs: int
    compared: int
    matching: int
    classes: dict[str, ClassStats]
    non_deterministic: int = 0
    non_deterministic_witnesses: tuple[Witness, ...] = ()
    errors: tuple[SweepError, ...] = ()
    known_note: str = ""  # why known deviations were not checked ("" when they were)
    seconds: float = field(default=0.0, compare=False)
    cpu_seconds: float = field(default=0.0, compare=False)
    workers: int = field(default=1, compare=False)
    chunks: int = field(default=1, compare=False)
    executor: str = field(default="", compare=False)

    # ---- verdict ----
    @property
    def mismatches(self) -> int:
        return self.compared - self.matching

    @property
    def unexplained(self) -> int:
        return sum(c.unexplained for c in self.classes.values())

    @property
    def status(self) -> str:
        return "error" if self.errors else "ok"

    @property
    def verdict(self) -> str:
        if self.status == "error":
            return "error"
        if self.unexplained or self.non_deterministic:
            return "unexplained"
        return "explained" if self.mismatches else "clean"

    @property
    def ok(self) -> bool:
        return self.verdict in ("clean", "explained")

    @property
    def clean(self) -> bool:
        return self.verdict == "clean"

    def counts(self) -> dict[str, int]:
        """Mismatches per class (only classes that occur)."""
        return {k: c.count for k, c in self.classes.items()}

    # ---- text ----
    def headline(self) -> str:
        lib = f" ({self.policy})" if self.policy else ""
        return f"sweep {self.src.name} -> {self.dst.name} against {self.against}{lib}; inputs: {self.inputs}"

    def verdict_text(self) -> str:
        v = self.verdict
        mm = self.mismatches
        if v == "error":
            n = sum(e.elements for e in self.errors)
            ch = sum(e.chunks for e in self.errors)
            return (f"ERROR: {ch} chunk(s) failed ({', '.join(sorted({e.kind for e in self.errors}))}), {n} inputs "
                    f"not compared; {self.compared} compared, {mm} mismatching")
        nd = (f"; NON-DETERMINISTIC: {self.non_deterministic} sampled inputs gave different codes on a second call"
              if self.non_deterministic else "")
        if v == "clean":
            return f"CLEAN: all {self.compared} inputs give numoracle's codes"
        if self.unexplained:
            return f"UNEXPLAINED: {self.unexplained} of {mm} mismatches are not covered by a known deviation{nd}"
        if v == "unexplained":
            return f"UNEXPLAINED{nd} ({mm} mismatches, all covered by known deviations)"
        return f"EXPLAINED: {mm} mismatches, all covered by known deviations of {self.library}"

    def _timing(self) -> str:
        return (f"{self.seconds:.1f} s wall, {self.cpu_seconds:.1f} s CPU in chunks; {self.chunks} chunk(s) on "
                f"{self.workers or '?'} worker(s) ({self.executor})")

    def __str__(self) -> str:
        lines = [self.headline(), self.verdict_text(),
                 f"compared {self.compared} of {self.n_inputs} inputs: {self.matching} match, {self.mismatches} differ"]
        if self.known_note:
            lines.append(f"note: {self.known_note}")
        for c in self.classes.values():
            tie = f", {c.ties} at an exact tie" if c.ties is not None else ""
            lab = ", ".join(f"{k}: {n}" for k, n in sorted(c.labels.items()))
            lines.append(f"  {c.name}: {c.count}{tie}; {c.coverage()}" + (f" ({lab})" if lab else ""))
            lines += [f"    {w.describe(self.src, self.dst, self._fn())}" for w in c.witnesses]
        if self.non_deterministic:
            lines.append(f"  non_deterministic: {self.non_deterministic} sampled inputs (a second call on the same "
                         "inputs gave other codes)")
            lines += [f"    {w.describe_calls(self.src, self.dst)}" for w in self.non_deterministic_witnesses]
        for e in self.errors:
            lines.append(f"  {e.kind}: {e.message} (first in inputs [{e.first_range[0]}, {e.first_range[1]}): "
                         f"codes {code_hex(e.first_codes[0], self.src)}..{code_hex(e.first_codes[1], self.src)}; "
                         f"{e.chunks} chunk(s), {e.elements} inputs not compared)")
        lines.append(f"time: {self._timing()}")
        return "\n".join(lines)

    def _fn(self) -> str:
        return self.library or "fn"

    def to_markdown(self) -> str:
        out = [f"### {self.headline()}", "", f"**{self.verdict_text()}**", "",
               f"{self.compared} of {self.n_inputs} inputs compared: {self.matching} match, {self.mismatches} differ."
               + (f" Note: {self.known_note}." if self.known_note else ""), ""]
        if self.classes:
            out += ["| class | count | at a tie | known deviations |", "|---|---:|---:|---|"]
            for c in self.classes.values():
                out.append(f"| {c.name} | {c.count} | {'' if c.ties is None else c.ties} | {c.coverage()} |")
            out.append("")
            out += ["| class | source | fn | numoracle | note |", "|---|---|---|---|---|"]
            for c in self.classes.values():
                for w in c.witnesses:
                    note = "; ".join(t for t in (w.note, f"known: {w.known}" if w.known else "") if t)
                    out.append(f"| {c.name} | `{show_code(w.source, self.src)}` | `{show_code(w.fn_code, self.dst)}` | "
                               f"`{show_code(w.engine_code, self.dst)}` | {note} |")
            out.append("")
        if self.non_deterministic:
            out += [f"Non-deterministic: {self.non_deterministic} sampled inputs gave different codes on a second "
                    "call.", ""]
        for e in self.errors:
            out.append(f"- **{e.kind}**: {e.message} (first in inputs [{e.first_range[0]}, {e.first_range[1]}); "
                       f"{e.chunks} chunk(s), {e.elements} inputs not compared)")
        if self.errors:
            out.append("")
        out.append(f"Time: {self._timing()}.")
        return "\n".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "src": self.src.name, "dst": self.dst.name, "against": self.against, "library": self.library,
            "policy": self.policy, "inputs": self.inputs, "n_inputs": self.n_inputs, "verdict": self.verdict,
            "ok": self.ok, "status": self.status, "compared": self.compared, "matching": self.matching,
            "mismatches": self.mismatches, "unexplained": self.unexplained, "known_note": self.known_note,
            "classes": {k: {"count": c.count, "known": c.known, "labels": dict(sorted(c.labels.items())),
                            "ties": c.ties, "witnesses": [w.to_dict(self.src, self.dst) for w in c.witnesses]}
                        for k, c in self.classes.items()},
            "non_deterministic": self.non_deterministic,
            "non_deterministic_witnesses": [
                {"source": code_hex(w.source, self.src), "call_1": code_hex(w.fn_code, self.dst),
                 "call_2": code_hex(w.engine_code, self.dst)} for w in self.non_deterministic_witnesses],
            "errors": [dataclasses.asdict(e) for e in self.errors],
            "seconds": self.seconds, "cpu_seconds": self.cpu_seconds, "workers": self.workers,
            "chunks": self.chunks, "executor": self.executor,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def merge_witnesses(a: tuple[Witness, ...] | list[Witness], b: tuple[Witness, ...] | list[Witness],
                    k: int) -> tuple[Witness, ...]:
    """The ``k`` witnesses with the smallest source codes of both lists (one per source code)."""
    seen: dict[int, Witness] = {}
    for w in sorted([*a, *b]):
        if len(seen) >= k:
            break
        seen.setdefault(w.source, w)
    return tuple(seen.values())

