"""Mismatch classification of a sweep: which class each mismatching code falls in, and which are known deviations."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..chains.verdict import values_subset
from ..core.engine.codekeys import is_nan, to_key
from ..core.engine.convert import cast_codes, decode
from ..core.formats.format import BF16, FP16, FP32, TF32, AnyFormat, Format
from ..core.formats.policy import Flags, Overflow, Policy, Rounding, default_overflow, resolve_policy
from .attribution import classify_ids
from .deviations import deviations_for

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

    ``attribution.classify_ids`` decides, except for two mass classes whose deviation predicate is
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
