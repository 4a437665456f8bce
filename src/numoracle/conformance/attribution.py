"""Which known deviation explains each element where a library's cast differs from numoracle's: one predicate per
deviation kind (``KINDS`` of :mod:`numoracle.conformance.deviations`), applied by :func:`classify`.

>>> import numpy as np
>>> codes = np.array([0x3FF0100000400000], np.uint64)  # 1 + 2^-8 + 2^-30, just above a BF16 midpoint
>>> str(classify("ml_dtypes", "fp64", "bf16", codes, [0x3F80], version="0.6.0")[0])  # 0.6 rounded via float32
'double_rounding'
>>> str(classify("ml_dtypes", "fp64", "bf16", codes, [0x3F80], version="0.7.0")[0])  # 0.7 does not
'unexplained'
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..core.engine.codekeys import is_nan
from ..core.engine.convert import cast as _engine_cast
from ..core.engine.convert import decode
from ..core.formats.format import FP32, UINT64, AnyFormat, format_of
from .deviations import deviations_for

__all__ = ["classify", "classify_ids"]

_NARROW = ("fp6_e3m2fn", "fp6_e2m3fn", "fp4_e2m1fn")


# ---------------------------------------------------------------------------------------
# classification: why does the library's code differ from numoracle's?
def _cast(x, dst, **kw) -> np.ndarray:
    """numoracle.cast on a private copy (the engine writes into uint64 source arrays it is given)."""
    return _engine_cast(np.array(x, copy=True), dst, **kw)


def _values(codes: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Exact values as float64 (floats) or int64/uint64 (integers)."""
    return decode(codes, fmt)


def _negative(codes: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Negative nonzero, non-NaN values (-inf included)."""
    v = _values(codes, fmt)
    return v < 0


def _abs_codes(codes: np.ndarray, fmt: AnyFormat) -> tuple[np.ndarray, AnyFormat]:
    if fmt.is_integer:
        v = _values(codes, fmt)
        if fmt.signed:
            mag = np.where(v < 0, (~v.view(np.uint64)) + np.uint64(1), v.view(np.uint64))
            return mag.astype(np.uint64), UINT64
        return codes, fmt
    if not fmt.signed:
        return codes, fmt
    return (codes & np.array(fmt.mag_mask, codes.dtype)).astype(codes.dtype), fmt


def _leaf(kind: str, src, dst, x, lib, ref, pol) -> np.ndarray:
    """Mask of elements where ``lib`` differs from ``ref`` exactly as ``kind`` says."""
    if kind == "nan_payload_or_sign":
        return is_nan(lib, dst) & is_nan(ref, dst)
    if kind == "nan_to_policy":
        if dst.is_integer or dst.has_nan or src.is_integer:
            return np.zeros(x.shape, bool)
        return is_nan(x, src) & (_values(lib, dst) == 0)
    if kind == "saturation_vs_nan":
        if dst.is_integer or not dst.has_nan:
            return np.zeros(x.shape, bool)
        sat = _cast(x, dst, src=src, rounding=pol["rounding"], overflow="saturate")
        return ~is_nan(x, src) & is_nan(ref, dst) & (lib == sat)
    if kind == "subnormal":
        if src.is_integer or dst.is_integer:
            return np.zeros(x.shape, bool)
        v = np.abs(_values(x, src))
        tiny = (v > 0) & (v < 2.0**-126)
        up = lib.astype(np.int64) == ref.astype(np.int64) + 1
        return tiny & up & ~is_nan(ref, dst)
    if kind == "zero_to_min":
        if dst.is_integer:
            return np.zeros(x.shape, bool)
        zero = (_values(x, src) == 0) & ~is_nan(x, src)
        return zero & is_nan(ref, dst) & (_values(lib, dst) == float(dst.min_subnormal))
    if kind == "tie_break":
        return _at_midpoint(x, src, lib, ref, dst)
    if kind == "flush_to_zero":
        hit = np.zeros(x.shape, bool)
        if dst.is_integer or src.is_integer:
            return hit
        for kw in ({"ftz": True}, {"daz": True}, {"ftz": True, "daz": True}):
            hit |= lib == _cast(x, dst, src=src, rounding=pol["rounding"], overflow=pol["overflow"], **kw)
        return hit & (lib != ref)
    return np.zeros(x.shape, bool)  # "other" explains nothing by itself; describe it as data only


def _at_midpoint(x: np.ndarray, src, lib: np.ndarray, ref: np.ndarray, dst) -> np.ndarray:
    """Where the source value is exactly midway between the values of ``lib`` and ``ref`` (then, with
    ``ref`` correctly rounded and ``lib != ref``, they are its two neighbours and ``x`` is a tie), or, where
    ``ref`` overflowed (inf or NaN), exactly at the overflow tie max_finite + ulp/2 with ``lib`` = +-max."""
    out = np.zeros(x.shape, bool)
    ok = ~is_nan(x, src) & ~is_nan(lib, dst) & (lib != ref)
    if not ok.any():
        return out
    idx = np.flatnonzero(ok)
    a, b, v = _values(lib[idx], dst), _values(ref[idx], dst), _values(x[idx], src)
    over = is_nan(ref[idx], dst) | (np.isinf(b) if not dst.is_integer else False)
    if src.is_integer or dst.is_integer:  # exactly, in Fractions: integers beyond 2^53 are not all float64s
        hit = np.array([all(map(math.isfinite, t)) and 2 * Fraction(t[0]) == Fraction(t[1]) + Fraction(t[2])
                        for t in zip(v.tolist(), a.tolist(), b.tolist())], bool)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            mid = a / 2 + b / 2  # exact: float64 values of formats the engine carries halve exactly
            hit = np.isfinite(v) & (v == mid)
    if np.any(over) and not dst.is_integer:
        top, mx = dst.max_finite + dst.top_ulp / 2, dst.max_finite
        for j in np.flatnonzero(over):
            vj, aj = v[j].item(), a[j].item()
            if math.isfinite(vj) and math.isfinite(aj) and Fraction(aj) in (mx, -mx):
                hit[j] = Fraction(vj) == (top if aj > 0 else -top)
    out[idx[hit]] = True
    return out


def _transform(kind: str, src, x):
    """(selected mask, new source format, new codes) for the kinds that change the input."""
    if kind == "double_rounding":
        if src.is_integer or src.bits > 32:
            return np.ones(x.shape, bool), FP32, _cast(x, FP32, src=src)
        return None
    if kind == "sign_dropped":
        sel = _negative(x, src) & ~is_nan(x, src)
        c, f = _abs_codes(x, src)
        return sel, f, c
    return None


def _explain(kinds: tuple[str, ...], src, dst, x, lib, ref, pol, labels: list[str]) -> np.ndarray:
    """Label ids per element (into ``labels``): the chain of kinds explaining lib != ref, 0 where none does."""
    out = np.zeros(x.shape, np.int16)

    def lid(name: str) -> int:
        if name not in labels:
            labels.append(name)
        return labels.index(name)

    for kind in kinds:
        idx = np.flatnonzero(out == 0)
        if not idx.size:
            break
        tr = _transform(kind, src, x[idx])
        if tr is None:
            hit = _leaf(kind, src, dst, x[idx], lib[idx], ref[idx], pol)
            out[idx[hit]] = lid(kind)
            continue
        sel, src2, x2 = tr
        idx, x2 = idx[sel], x2[sel]
        if not idx.size:
            continue
        ref2 = _cast(x2, dst, src=src2, **pol)
        same = lib[idx] == ref2
        out[idx[same]] = lid(kind)
        rest = ~same
        if rest.any():
            others = tuple(k for k in kinds if k != kind)
            sub = _explain(others, src2, dst, x2[rest], lib[idx[rest]], ref2[rest], pol, labels)
            for j in np.unique(sub[sub != 0]):
                out[idx[rest][sub == j]] = lid(f"{kind}+{labels[j]}")
    return out


def classify_ids(library: str, src, dst, src_codes, lib_codes, *, rounding: str = "rne",
                 overflow=None, version: str | None = None) -> tuple[np.ndarray, tuple[str, ...]]:
    """:func:`classify` as compact ids: (int16 array shaped like ``src_codes``, the label of each id).

    Id 0 is ``""`` (the codes agree), id 1 ``"unexplained"``; use this form for large sweeps.
    """
    src, dst = format_of(src), format_of(dst)
    x = np.asarray(src_codes).astype(src.code_dtype)
    lib = np.asarray(lib_codes).astype(dst.code_dtype)
    if x.shape != lib.shape:
        raise ValueError(f"src_codes has shape {x.shape}, lib_codes {lib.shape}")
    pol = {"rounding": rounding, "overflow": overflow}
    ref = _cast(x, dst, src=src, **pol)
    out = np.zeros(x.shape, np.int16)
    labels = ["", "unexplained"]
    mm = np.flatnonzero(lib.ravel() != ref.ravel())
    if mm.size:
        kinds = tuple(dict.fromkeys(d.kind for d in deviations_for(library, src, dst, version=version)))
        ids = _explain(kinds, src, dst, x.ravel()[mm], lib.ravel()[mm], ref.ravel()[mm], pol, labels)
        out.ravel()[mm] = np.where(ids == 0, 1, ids)
    return out, tuple(labels)


def classify(library: str, src, dst, src_codes, lib_codes, *, rounding: str = "rne", overflow=None,
             version: str | None = None) -> np.ndarray:
    """Label each element of a library-vs-numoracle comparison.

    Returns a string array shaped like ``src_codes``: ``""`` where the library's code equals
    ``numoracle.cast(src_codes, dst, src=src, rounding=rounding, overflow=overflow)``, the kind
    (or ``"kind+kind"`` chain) of the known deviation of ``library`` that explains the
    difference, or ``"unexplained"``. Only the deviations that ``library`` at ``version`` shows
    apply (None: the installed version; ``"any"``: every record, see :func:`deviations_for`).
    """
    ids, labels = classify_ids(library, src, dst, src_codes, lib_codes, rounding=rounding, overflow=overflow,
                               version=version)
    return np.array(labels)[ids]
