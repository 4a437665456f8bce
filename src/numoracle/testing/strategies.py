"""Hypothesis strategies for numoracle formats: codes, values, ties, near-overflow values, subnormals.

This module imports ``hypothesis`` (``import numoracle`` does not); use it in tests::

    from hypothesis import given
    from numoracle import strategies as nst

    @given(nst.ties("fp32", "fp16"))             # float32 values exactly at FP16 rounding ties
    def test_my_cast(x): ...

Every strategy is boundary-weighted by default: with probability ``boundary_weight`` (0.5, as
Hypothesis itself mixes edge cases into its numbers) a draw is one of the codes that
:func:`numoracle.conformance.boundary_values` lists (max finite, thresholds, ties, subnormal edges,
specials ...), otherwise it is uniform over the codes the strategy allows. Draws shrink toward
simple values: +0 and small magnitudes first, positives before negatives, NaN last.

Values come as numpy scalars of the format's numpy / ml_dtypes dtype (``values``, ``ties``,
``near_overflow``, ``subnormals``; TF32 in its float32 container); formats with no native dtype
(INT4, UINT4) give their exact values as int64 (floats would give float64). Pass
``as_codes=True`` for integer codes instead. Arguments are checked when the strategy is built.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from hypothesis.strategies import SearchStrategy

from ..conformance.boundary import (
    boundary_values,
    ceil_key,
    finite_key_range,
    floor_key,
    key_code,
    key_value,
    overflow_threshold,
)
from ..core import scalar as exact
from ..core.engine.codekeys import binades
from ..core.formats.format import FP32, FP64, AnyFormat, Format, IntFormat, format_of
from ..core.formats.interop import native_dtype
from ..core.formats.policy import Rounding
from ..core.scalar import floor_log2, pow2
from .printers import register_printers

__all__ = ["codes", "values", "code_arrays", "value_arrays", "ties", "near_overflow", "subnormals"]


# ---- helpers -------------------------------------------------------------------------------------------
def _fmt(x: Any) -> AnyFormat:
    try:
        return format_of(x)
    except TypeError as e:
        raise TypeError(f"{e}; give a format name ('fp16'), a numoracle Format or a dtype") from None


def _weight(w: Any) -> float:
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w <= 1:
        raise ValueError(f"boundary_weight must be a number in [0, 1] (the share of boundary draws), got {w!r}")
    return float(w)


def _mixed(pool: list[int], uniform: SearchStrategy[int], weight: float) -> SearchStrategy[int]:
    """Draw from ``pool`` with probability ``weight``, else from ``uniform``.

    Shrinking tries the uniform branch first (its index shrinks toward +0 and small magnitudes), so a
    failure that any small value shows shrinks to it, and one that needs a boundary value keeps it.
    """
    if not pool or weight == 0:
        return uniform
    pool_st = st.sampled_from(pool)
    if weight == 1:
        return pool_st
    cut = 1024 - round(weight * 1024)

    @st.composite
    def mixed(draw: Any) -> int:
        # both are drawn, so that the shrinker can flip the branch and keep a value that still fails
        use_pool = draw(st.integers(0, 1023)) >= cut
        u, b = draw(uniform), draw(pool_st)
        return b if use_pool else u

    return mixed()


def _simplicity(code: int, fmt: AnyFormat) -> tuple:
    """Sort key for shrinking: finite before inf before NaN, small magnitudes first, + before -."""
    v = exact.value_of(code, fmt)
    if isinstance(v, exact.Special):
        rank = {"zero": 0, "inf": 1, "nan": 2}[v.kind]
        return (rank, Fraction(0), v.negative, code)
    return (0, abs(Fraction(v)), v < 0, code)


def _scalar(code: int, fmt: AnyFormat) -> Any:
    return _as_values(np.array([code], dtype=np.dtype(fmt.code_dtype)), fmt)[0]


def _as_values(c: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Codes -> values in the format's native dtype, or exact int64 / float64 where it has none."""
    from ..core.engine.convert import decode
    from ..core.formats.interop import as_native

    c = np.asarray(c, dtype=np.dtype(fmt.code_dtype))
    if fmt.name == "tf32" or native_dtype(fmt) is not None:
        return as_native(c, fmt)
    return decode(c, fmt)


@st.composite
def _drawn(draw: Any, inner: SearchStrategy[Any], convert: Any) -> Any:
    """``convert(draw(inner))`` as a plain value: a failing example then shows the value's own repr
    (``np.float16(1.0)``, ``ml_dtypes.bfloat16(1.5)``, ``15360``), which pastes into ``@example``,
    rather than the call that made it (which ``.map`` would show)."""
    return convert(draw(inner))


def _as_int(c: Any) -> int:
    return int(c)


def _emit(codes_st: SearchStrategy[int], fmt: AnyFormat, as_codes: bool) -> SearchStrategy[Any]:
    return _drawn(codes_st, _as_int if as_codes else (lambda c: _scalar(c, fmt)))


register_printers()


@dataclass(frozen=True)
class _Ranges:
    """A union of code ranges (start, count, step), in shrink order; index -> code."""

    parts: tuple[tuple[int, int, int], ...]

    @property
    def total(self) -> int:
        return sum(n for _, n, _ in self.parts)

    def code(self, i: int) -> int:
        offs = self._offsets()
        j = bisect.bisect_right(offs, i) - 1
        start, _, step = self.parts[j]
        return start + step * (i - offs[j])

    def _offsets(self) -> list[int]:
        out, acc = [], 0
        for _, n, _ in self.parts:
            out.append(acc)
            acc += n
        return out

    def __contains__(self, code: int) -> bool:
        for start, n, step in self.parts:
            k, r = divmod(code - start, step)
            if r == 0 and 0 <= k < n:
                return True
        return False

    def strategy(self) -> SearchStrategy[int]:
        return st.integers(0, self.total - 1).map(self.code)


def _code_ranges(fmt: AnyFormat, finite: bool | None, nan: bool, inf: bool, sub: bool, neg: bool,
                 only_sub: bool = False) -> _Ranges:
    parts: list[tuple[int, int, int]] = []
    if isinstance(fmt, IntFormat):
        if finite is not False:
            parts.append((0, fmt.max_value + 1, 1))
            if fmt.signed and neg:
                parts.append(((1 << fmt.bits) - 1, 1 << (fmt.bits - 1), -1))  # -1, -2, ... min
        return _Ranges(tuple(parts))
    m = fmt.man_bits
    signs = (0, fmt.sign_bit) if (fmt.signed and neg) else (0,)
    if finite is not False:
        for sb in signs:
            if fmt.has_zero and not only_sub and (sb == 0 or fmt.has_negative_zero):
                parts.append((sb, 1, 1))
            if fmt.has_subnormals and m and (sub or only_sub):
                parts.append((sb | 1, (1 << m) - 1, 1))
            if not only_sub:
                first = (1 << m) if fmt.has_subnormals else 0
                parts.append((sb | first, fmt.max_mag_code - first + 1, 1))
    if finite is not True:
        if inf and fmt.has_inf:
            mag = ((1 << fmt.exp_bits) - 1) << m if fmt.nan == "ieee" else fmt.mag_mask
            parts += [(sb | mag, 1, 1) for sb in signs]
        if nan:
            if fmt.nan == "ieee":
                first = (((1 << fmt.exp_bits) - 1) << m) + 1
                parts += [(sb | first, (1 << m) - 1, 1) for sb in (0, fmt.sign_bit)]
            elif fmt.nan == "fn":
                parts += [(sb | fmt.mag_mask, 1, 1) for sb in ((0, fmt.sign_bit) if fmt.signed else (0,))]
            elif fmt.nan == "fnuz":
                parts.append((fmt.sign_bit, 1, 1))
    return _Ranges(tuple(parts))


def _pool(src: AnyFormat, dst: AnyFormat, allowed: _Ranges, mode: Any = "rne") -> list[int]:
    bv = boundary_values(src, dst, rounding=mode, intermediates=())
    pool = [c for c in bv.codes.tolist() if c in allowed]
    return sorted(pool, key=lambda c: _simplicity(c, src))


# ---- codes and values ----------------------------------------------------------------------------------
def codes(fmt: Any, *, finite: bool | None = None, allow_nan: bool | None = None, allow_infinity: bool | None = None,
          allow_subnormal: bool = True, allow_negative: bool = True, boundary_weight: float = 0.5,
          against: Any = None) -> SearchStrategy[int]:
    """Codes (unsigned bit patterns, Python ints) of ``fmt``.

    ``finite``: None (default) any code; True only finite values; False only infinities and NaNs.
    ``allow_nan`` / ``allow_infinity``: default True where the format has them and ``finite`` is not
    True. ``allow_subnormal=False`` leaves out subnormals (for flush-to-zero hardware);
    ``allow_negative=False`` leaves out negative values and -0 (NaNs follow ``allow_nan``). The boundary draws are
    ``boundary_values(fmt, against)`` (``against`` defaults to ``fmt`` itself: its own edges).
    """
    f = _fmt(fmt)
    if finite not in (None, True, False):
        raise TypeError(f"finite must be None, True or False, got {finite!r}")
    w = _weight(boundary_weight)
    has_nan, has_inf = (not f.is_integer and f.has_nan), f.has_inf
    for name, asked, has in (("allow_nan", allow_nan, has_nan), ("allow_infinity", allow_infinity, has_inf)):
        if asked and finite is True:
            raise ValueError(f"{name}=True contradicts finite=True; drop one of them")
        if asked and not has:
            raise ValueError(f"{name}=True, but {f.name} has no {'NaN' if name == 'allow_nan' else 'infinities'}")
    nan = has_nan if allow_nan is None else bool(allow_nan)
    inf = has_inf if allow_infinity is None else bool(allow_infinity)
    allowed = _code_ranges(f, finite, nan, inf, allow_subnormal, allow_negative)
    if allowed.total == 0:
        raise ValueError(f"no code of {f.name} satisfies finite={finite}, allow_nan={nan}, allow_infinity={inf}")
    dst = f if against is None else _fmt(against)
    return _mixed(_pool(f, dst, allowed), allowed.strategy(), w)


def values(fmt: Any, **kwargs: Any) -> SearchStrategy[Any]:
    """Values of ``fmt`` as numpy scalars of its dtype (keywords as :func:`codes`)."""
    f = _fmt(fmt)
    return _emit(codes(f, **kwargs), f, False)


def code_arrays(fmt: Any, shape: Any, *, unique: bool = False, elements: SearchStrategy[int] | None = None,
                **kwargs: Any) -> SearchStrategy[np.ndarray]:
    """Arrays of codes of ``fmt`` (dtype ``fmt.code_dtype``); ``shape`` an int, tuple or strategy of them.

    Elements are ``codes(fmt, **kwargs)``, or ``elements``: any strategy of codes of ``fmt``, such as
    ``ties(fmt, dst, as_codes=True)`` or ``near_overflow(dst, src=fmt, as_codes=True)``.
    """
    f = _fmt(fmt)
    if elements is None:
        elements = codes(f, **kwargs)
    elif kwargs:
        raise TypeError(f"pass either elements= or codes() keywords ({', '.join(kwargs)}), not both")
    elif not isinstance(elements, SearchStrategy):
        raise TypeError(f"elements must be a hypothesis strategy of {f.name} codes, got {type(elements).__name__}")
    return hnp.arrays(np.dtype(f.code_dtype), shape, elements=elements, unique=unique)


def value_arrays(fmt: Any, shape: Any, *, unique: bool = False, elements: SearchStrategy[Any] | None = None,
                 **kwargs: Any) -> SearchStrategy[np.ndarray]:
    """Arrays of values of ``fmt`` in its numpy / ml_dtypes dtype; ``shape`` as :func:`code_arrays`.

    Elements are ``values(fmt, **kwargs)``, or ``elements``: a strategy of values, as
    ``hypothesis.extra.numpy.arrays`` takes it: numoracle's own value strategies (``values``, ``ties``,
    ``near_overflow`` ... without ``as_codes``), or any strategy of numbers (``st.floats(-2, 2)``,
    ``st.integers(-8, 7)``), each value rounded into ``fmt`` (round to nearest even). A value that
    overflows ``fmt``, or has no value in it at all (NaN into a format without NaN), raises
    ``InvalidArgument`` naming it: bound the element strategy. Codes go to :func:`code_arrays`.
    """
    f = _fmt(fmt)
    if elements is None:
        codes_arrays = code_arrays(f, shape, unique=unique, **kwargs)
    elif kwargs:
        raise TypeError(f"pass either elements= or values() keywords ({', '.join(kwargs)}), not both")
    elif not isinstance(elements, SearchStrategy):
        raise TypeError(f"elements must be a hypothesis strategy of values, got {type(elements).__name__}")
    else:
        codes_arrays = hnp.arrays(np.dtype(f.code_dtype), shape, unique=unique,
                                  elements=_drawn(elements, lambda v: _value_code(v, f)))
    return _drawn(codes_arrays, lambda a: _as_values(a, f))


def _value_code(v: Any, f: AnyFormat) -> int:
    """The code of ``v`` rounded into ``f`` (RNE); InvalidArgument when it overflows or has no value there."""
    from hypothesis.errors import InvalidArgument

    from ..core.engine.convert import cast
    from ..core.formats.interop import to_codes
    from ..core.formats.policy import Flags

    a = np.asarray(v)
    if a.ndim or a.dtype.kind not in "iufV" or isinstance(v, (bool, np.bool_)):
        raise InvalidArgument(f"value_arrays(elements=...) drew {v!r}, which is not a number: give a strategy of "
                              f"numbers (st.floats(), st.integers(), numoracle.strategies.values({f.name!r}))")
    c, src = to_codes(a)
    if src == f:
        return int(c)
    code, flags = cast(np.asarray(c), f, src=src, rounding="rne", flags=True)
    if int(flags) & int(Flags.OVERFLOW | Flags.INVALID):
        raise InvalidArgument(f"value_arrays(elements=...) drew {v!r}, which {f.name} cannot hold (it overflows or "
                              f"has no value there); bound the strategy to {f.name}'s range, e.g. "
                              f"st.floats({-_max_of(f)}, {_max_of(f)})")
    return int(code)


def _max_of(f: AnyFormat) -> float:
    return float(f.max_value if isinstance(f, IntFormat) else f.max_finite)


# ---- ties ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Segment:
    """Points sign * (start + i * step), i in [0, n)."""

    sign: int
    start: Fraction
    step: Fraction
    n: int


def _src_quantum(src: AnyFormat, e: int) -> Fraction | None:
    """Spacing of ``src`` values in binade e (None when src has no value there)."""
    if isinstance(src, IntFormat):
        return Fraction(1) if e >= 0 else None
    if e > src.emax:
        return None
    if src.has_subnormals:
        return pow2(max(e, src.emin) - src.man_bits)
    return pow2(e - src.man_bits) if e >= src.emin else None


def _neighbour_runs(dst: AnyFormat, negative: bool, nearest: bool) -> list[tuple[Fraction, Fraction, int]]:
    """(lo0, q, count): magnitudes lo0 + j*q (j < count) whose upper neighbour is one step q above."""
    if isinstance(dst, IntFormat):
        top = -dst.min_value if negative else dst.max_value
        if nearest:  # ties j + 1/2, j = 0 .. top (the last is the overflow tie)
            return [(Fraction(0), Fraction(1), top + 1)] if (dst.signed or not negative or top == 0) else []
        return [(Fraction(1), Fraction(1), top)] if top > 0 else []
    assert isinstance(dst, Format)
    if negative and not dst.signed:
        return []
    runs = [(Fraction(0), dst.min_subnormal, 1)] if (nearest and dst.has_zero) else []
    for e, klo, khi in binades(dst, False):
        q = pow2((max(e, dst.emin) if dst.has_subnormals else e) - dst.man_bits)
        runs.append((key_value(int(klo), dst), q, int(khi) - int(klo) + 1))
    return runs


def _segments(src: AnyFormat, dst: AnyFormat, nearest: bool) -> list[_Segment]:
    off = Fraction(1, 2) if nearest else Fraction(0)
    out: list[_Segment] = []
    for sign in (1, -1):
        if sign < 0 and not src.signed:
            continue
        lim = key_value(finite_key_range(src)[0 if sign < 0 else 1], src) * sign  # |extreme| of src
        for lo0, q, count in _neighbour_runs(dst, sign < 0, nearest):
            j = 0
            while j < count:  # split the run by the binade of its points
                p = lo0 + (j + off) * q
                e = floor_log2(p)
                bound = (pow2(e + 1) - lo0) / q - off  # points with j < bound lie in binade e
                j_end = min(count, -((-bound.numerator) // bound.denominator))
                seg = _representable_run(src, lo0, q, off, j, j_end, e, lim)
                if seg is not None:
                    out.append(_Segment(sign, *seg))
                j = j_end
    return out


def _representable_run(src: AnyFormat, lo0: Fraction, q: Fraction, off: Fraction, j: int, j_end: int, e: int,
                       lim: Fraction) -> tuple[Fraction, Fraction, int] | None:
    """The points lo0 + (k + off) q, j <= k < j_end, that src holds: (start, step, n) or None."""
    qs = _src_quantum(src, e)
    if qs is None:
        return None
    a, b = (lo0 + off * q) / qs, q / qs  # point k is a multiple of qs iff a + k b is an integer
    if b.denominator == 1:
        if a.denominator != 1:
            return None
        stride, k0 = 1, j
    else:
        t = b.denominator  # b = 1 / t, t a power of two
        if (a * t).denominator != 1:
            return None
        stride = t
        k0 = j + (-(int(a * t) + j)) % t
    last = (lim - lo0) / q - off  # points with k <= last fit in src's range
    k_end = min(j_end, last.numerator // last.denominator + 1)
    if k0 >= k_end:
        return None
    n = (k_end - k0 + stride - 1) // stride
    return lo0 + (k0 + off) * q, stride * q, n


def _code_of(v: Fraction, src: AnyFormat) -> int:
    k = floor_key(v, src)
    assert k is not None and key_value(k, src) == v, (v, src)
    return key_code(k, src)


def ties(src: Any, dst: Any, *, rounding: Any = "rne", as_codes: bool = False,
         boundary_weight: float = 0.5) -> SearchStrategy[Any]:
    """Values of ``src`` exactly at ``dst``'s rounding boundaries: for nearest modes (rne, rna) the
    midpoints of neighbouring ``dst`` values (the top one is the overflow threshold); for the other
    modes the nonzero ``dst`` values themselves, where the result steps. Only those ``src`` represents.
    """
    s, d = _fmt(src), _fmt(dst)
    mode = Rounding.of(rounding)
    w = _weight(boundary_weight)
    segs = _segments(s, d, mode.is_nearest)
    if not segs:
        what = "tie (midpoint of two neighbouring values)" if mode.is_nearest else "value"
        raise ValueError(f"{s.name} cannot represent any {what} of {d.name} under rounding={mode.value!r}"
                         + ("; integer ties are k + 1/2: use a float source" if d.is_integer and s.is_integer else
                            "; use a source with more precision"))
    uniform = st.sampled_from(segs).flatmap(
        lambda g: st.integers(0, g.n - 1).map(lambda i: _code_of(g.sign * (g.start + i * g.step), s)))
    kinds = ("tie",) if mode.is_nearest else ("step",)
    bv = boundary_values(s, d, rounding=mode if mode is not Rounding.STOCHASTIC else "rtz", intermediates=())
    pool = [int(c) for c, v, pts in zip(bv.codes, bv.values(), bv.points)
            if v != 0 and any(p.kind in kinds and p.offset == 0 for p in pts)]
    return _emit(_mixed(sorted(pool, key=lambda c: _simplicity(c, s)), uniform, w), s, as_codes)


# ---- near overflow, subnormals ---------------------------------------------------------------------------
def near_overflow(dst: Any, *, src: Any = None, rounding: Any = "rne", ulps: int = 4, as_codes: bool = False,
                  boundary_weight: float = 0.5) -> SearchStrategy[Any]:
    """Values of ``src`` within ``ulps`` ULPs of ``dst`` (its spacing at max finite) of ``dst``'s overflow
    threshold under ``rounding``, on each side of zero where ``dst`` overflows there.

    ``src`` defaults to FP32 for destinations narrower than 32 bits, else FP64.
    """
    d = _fmt(dst)
    s = (FP32 if d.bits < 32 else FP64) if src is None else _fmt(src)
    mode = Rounding.of(rounding)
    w = _weight(boundary_weight)
    if isinstance(ulps, bool) or not isinstance(ulps, int) or ulps < 0:
        raise ValueError(f"ulps must be a non-negative int, got {ulps!r}")
    unit = Fraction(1) if d.is_integer else pow2(d.emax - d.man_bits)
    windows: list[tuple[int, int]] = []
    bounds: list[tuple[Fraction, Fraction]] = []
    for sign in (1, -1) if (d.signed or d.is_integer) else (1,):
        t = sign * overflow_threshold(d, mode, sign)[0]
        kl, kh = ceil_key(t - ulps * unit, s), floor_key(t + ulps * unit, s)
        if kl is not None and kh is not None and kl <= kh:
            windows.append((kl, kh))
            bounds.append((t - ulps * unit, t + ulps * unit))
    if not windows:
        raise ValueError(f"{s.name} holds no value within {ulps} ulp({d.name}) of the {d.name} overflow threshold "
                         f"({mode.value}); pick a wider src=")
    uniform = st.sampled_from(windows).flatmap(lambda kw: st.integers(*kw).map(lambda k: key_code(k, s)))
    bv = boundary_values(s, d, rounding=mode, intermediates=())
    pool = {key_code(k, s) for kw in windows for k in kw}  # the window's ends
    for c, v, pts in zip(bv.codes.tolist(), bv.values(), bv.points):
        if any(p.kind == "overflow" and p.fmt == d.name for p in pts) and any(lo <= v <= hi for lo, hi in bounds):
            pool.add(c)
    return _emit(_mixed(sorted(pool, key=lambda c: _simplicity(c, s)), uniform, w), s, as_codes)


def subnormals(fmt: Any, *, allow_negative: bool = True, as_codes: bool = False,
               boundary_weight: float = 0.5) -> SearchStrategy[Any]:
    """Subnormal values of ``fmt`` (nonzero, below its min normal)."""
    f = _fmt(fmt)
    w = _weight(boundary_weight)
    if f.is_integer or not f.has_subnormals or f.man_bits == 0:
        raise ValueError(f"{f.name} has no subnormal values; subnormals() needs a float format with a mantissa "
                         "and gradual underflow (not an integer or E8M0)")
    allowed = _code_ranges(f, True, False, False, True, allow_negative, only_sub=True)
    top = (1 << f.man_bits) - 1
    pool = [c for mag in dict.fromkeys((1, 2, top - 1, top)) if 0 < mag <= top
            for c in ((mag, mag | f.sign_bit) if (f.signed and allow_negative) else (mag,))]
    return _emit(_mixed(sorted(pool, key=lambda c: _simplicity(c, f)), allowed.strategy(), w), f, as_codes)
