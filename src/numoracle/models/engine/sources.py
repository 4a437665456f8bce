"""simulate's inputs: exact values, their labels and the sources that hand each step its operands."""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import numpy as np

from ...core import jit
from ...core.formats.format import FP32, Format
from ...core.inputs import exact_float32, exact_float64
from .accumulate import native_fp32_ok, triple

_OPS = ("sum", "dot", "matmul")
_MAG, _INF = 0x7FFF_FFFF_FFFF_FFFF, 0x7FF0_0000_0000_0000   # float64 bits: magnitude mask, +inf
_BLOCK = 1 << 15      # elements per block of _stats
ZERO_LABEL = -16000   # label of a zero input: far below every real label, and int16 sums stay in range
FP32_TRIPLE = triple(FP32)


def triple_fits(src: tuple, dst: tuple) -> bool:
    return src[0] <= dst[0] and src[1] >= dst[1] and src[2] <= dst[2]


class _Stats(NamedTuple):
    q: int           # the finite nonzero values are multiples of 2^q ...
    h: int           # ... and below 2^h
    sub: bool        # some value is below the format's smallest normal
    finite: bool     # no inf or NaN among the values
    p: int           # ... and have at most p significant bits (<= the format's precision)
    labels: tuple[int, int]   # the least and the greatest label of the nonzero ones (none: (1, 0))


# float bits by word: (signed word, magnitude mask, the infinity's pattern, unsigned word, float)
_WORDS = {np.dtype(np.float64): (np.int64, _MAG, _INF, np.uint64, np.float64),
          np.dtype(np.float32): (np.int32, 0x7FFF_FFFF, 0x7F80_0000, np.uint32, np.float32)}


def _scan_kernels():
    from ..kernels import sources
    return sources


def _stats(v: np.ndarray, fmt: Format) -> _Stats:
    """The values' _Stats (float64 or float32 v).

    q = floor(log2 min|v|) - (p - 1), floored at the format's quantum: a value with at most p
    significant bits has its lowest bit at or above floor(log2|v|) - (p - 1). min and max are read on
    the bits: the bit patterns of |v| order as the values, so the largest pattern below the infinity's
    is max |v| over the finite values, and the smallest pattern - 1 as an unsigned word (a zero's wraps
    around to the top) is min |v| over the finite nonzero ones (inf and NaN lie above both).

    p: the format's precision, or fewer where every finite value's float32 fraction field ends in zeros (read
    for float32 values of formats wider than 12 bits of precision, where a product of two may then fit FP32:
    FP32 arrays holding TF32 or BF16 values, say). A normal float32's significand is the hidden bit over its 23
    field bits, so a field with z trailing zeros leaves at most 24 - z significant bits; a subnormal's significand
    is its field alone, fewer still; the OR of all fields has the fewest trailing zeros of any (an all-zero OR:
    powers of two, one bit each). p = min(the format's precision, 24 - z).
    """
    word, _, inf, _, flt = _WORDS[v.dtype]
    fields = (1 << 23) - 1 if v.dtype == np.float32 and fmt.precision > 12 else 0
    kern = jit.kernel_for(v.dtype, _scan_kernels)
    top, low, ored, finite = _scan(v, fields) if kern is None else kern.run(v, fields)
    if top == 0 or low >= inf:                  # no finite nonzero value (or no value)
        return _Stats(10**6, -(10**6), False, finite, fmt.precision, (1, 0))
    p = fmt.precision if not fields else min(fmt.precision, 1 if ored == 0 else 24 - ((ored & -ored).bit_length() - 1))
    mn, mx = (float(word(w).view(flt)) for w in (low, top))
    e_mn, e_mx = int(np.frexp(mn)[1]), int(np.frexp(mx)[1])      # floor(log2 |x|) + 1
    q = max(e_mn - p, fmt.emin - fmt.man_bits)
    labels = (max(e_mn - 1, fmt.emin), max(e_mx - 1, fmt.emin))
    return _Stats(q, e_mx, bool(mn < 2.0**fmt.emin), finite, p, labels)


def _scan(v: np.ndarray, fields: int) -> tuple[int, int, int, bool]:
    """(largest finite |bit pattern|, smallest finite nonzero |bit pattern| (at or above the infinity's where there is
    none), OR of the finite patterns' ``fields`` bits, all finite) of float32 / float64 v, in cache-sized blocks
    (no array-sized temporaries); the compiled twin: models/kernels/sources.py."""
    word, mag, inf, uword, flt = _WORDS[v.dtype]
    bits = np.ascontiguousarray(v).reshape(-1).view(word)
    top, low, finite, ored = 0, 1 << 64, True, 0
    for i in range(0, bits.size, _BLOCK):
        b = bits[i:i + _BLOCK] & mag
        t = int(b.max())
        special = t >= inf
        if special:                             # inf / NaN among them: the largest finite pattern
            t, finite = int(b.max(where=b < inf, initial=0)), False
        if fields and ored & 1 == 0:            # (an odd OR: no trailing zero, nothing more to learn)
            f = b & word(fields)
            if special:
                f[b >= inf] = 0                 # (a NaN's payload is no value's bits)
            ored |= int(np.bitwise_or.reduce(f))
        b -= 1
        top, low = max(top, t), min(low, int(b.view(uword).min()) + 1)
    return top, low, ored, finite


def _exact(x: Any, what: str) -> tuple[np.ndarray, Format, _Stats]:
    """An input's exact values, format and _Stats: float32 values where its format fits FP32 and every value is
    finite (half the memory and no float64 copy: the kernels read float32), else float64."""
    v, fmt = exact_float32(x, what)
    if v is not None and isinstance(fmt, Format):
        st = _stats(v, fmt)
        if st.finite:
            return v, fmt, st
    v, fmt = exact_float64(x, what)             # (NaN / inf: the float64 reading's NaNs, as always)
    if not isinstance(fmt, Format):
        raise TypeError(f"{what} has integer format {fmt.name}; simulate models floating-point accumulation")
    return v, fmt, _stats(v, fmt)


# the top 16 bits of float bits by word: (their index in uint16 views, exponent mask, shift, bias)
_TOP16 = {np.dtype(np.float64): (3 if sys.byteorder == "little" else 0, 4, 0x7FF0, 4, 1023),
          np.dtype(np.float32): (1 if sys.byteorder == "little" else 0, 2, 0x7F80, 7, 127)}


def _labels(v: np.ndarray, fmt: Format) -> np.ndarray:
    """BlockFMA labels: max(floor(log2|v|), fmt.emin); zeros ZERO_LABEL; inf/NaN 0 (unused).

    floor(log2|v|) of a normal float is its biased exponent field - bias; a subnormal float's field (0) gives
    1 - bias - 1, below the emin of every format held in that float (float64: >= -1022 here; float32: the
    formats that fit FP32), so the clamp gives emin as for its true exponent."""
    if fmt.emin < -1022:                        # (no format simulate takes: its values are normal float64)
        fin = np.isfinite(v) & (v != 0)
        e = np.frexp(np.where(fin, v, 1.0))[1] - 1
        return np.where(v == 0, ZERO_LABEL, np.where(fin, np.maximum(e, fmt.emin), 0)).astype(np.int16)
    v = np.ascontiguousarray(v)
    at, step, mask, shift, bias = _TOP16[v.dtype]
    e = v.view(np.uint16)[..., at::step] & mask    # the top 16 bits: sign, exponent field, fraction bits
    e >>= shift
    e = e.view(np.int16)
    e -= bias
    zeros = e.size and e.min() == -bias         # zeros (or subnormals: emin after the clamp)
    special = e.size and e.max() == bias + 1    # inf / NaN
    marks = (e == -bias) & (v == 0) if zeros else None, e == bias + 1 if special else None
    np.maximum(e, fmt.emin, out=e)
    for m, label in zip(marks, (ZERO_LABEL, 0)):
        if m is not None:
            e[m] = label
    return e


class _Exact:
    """One input's exact values (as the kernels read them, transposed where they do): float64 and float32, each
    made from the other on first use and kept (views of a source share it). float32 only for formats that
    fit FP32 (simulate's float32 paths ask for it only then)."""

    __slots__ = ("held", "_f64", "_f32")

    def __init__(self, v: np.ndarray):
        self.held = v                           # the one read (float32 or float64)
        self._f64 = v if v.dtype == np.float64 else None
        self._f32 = v if v.dtype == np.float32 else None

    @property
    def f64(self) -> np.ndarray:
        if self._f64 is None:
            self._f64 = self._f32.astype(np.float64)      # exact widening
        return self._f64

    def make_f32(self) -> np.ndarray:
        if self._f32 is None:
            self._f32 = self._f64.astype(np.float32)      # exact: the format fits FP32
        return self._f32

    f32 = property(make_f32)


class _Source:
    """Terms of one reduction per output, the outputs flattened to a batch and cut into units."""

    units: int
    unit: int = 1

    def info(self) -> tuple[int, int, int]:
        return self.p, self.q, self.h

    def inputs_fit(self, t: tuple) -> bool:
        """Are the inputs' formats' values all values of a format with triple t (p, q, h)?"""
        return all(triple_fits(x, t) for x in self.input_triples)

    def terms_fp32(self) -> bool:
        """The inputs and every term (input or exact product) are FP32 numbers, and float32 arithmetic
        has gradual underflow here: float32 multiplication then gives the terms exactly."""
        return native_fp32_ok() and self.inputs_fit_fp32 and triple_fits(self.info(), FP32_TRIPLE)

    def prepare_f32(self):
        for e in self._values:                  # (views share them: made once either way)
            e.make_f32()

    def view(self, lo, hi):
        s = object.__new__(type(self))
        s.__dict__.update(self.__dict__, lo=lo, hi=hi)
        return s


class _SumSource(_Source):
    xt = property(lambda s: s._x.f64)           # (K, batch)
    xt32 = property(lambda s: s._x.f32)

    def __init__(self, x: np.ndarray, fmt: Format, p: int, q: int, h: int):
        self._x = _Exact(np.ascontiguousarray(x.reshape(-1, x.shape[-1]).T))
        self._values = (self._x,)
        self.K = self._x.held.shape[0]
        self.fmt = fmt
        self.units = self._x.held.shape[1]
        self.p, self.q, self.h = p, q, h
        self.lo, self.hi = 0, self.units

    def prepare_labels(self):
        self.lt = _labels(self._x.held, self.fmt)

    def operands(self) -> tuple:
        """((values, format), ...) as the kernels read them: the inputs (K, batch), float32 or float64."""
        return ((self._x.held, self.fmt),)

    def terms(self, ids):
        return self.xt[ids, self.lo:self.hi]

    def terms32(self, ids):
        return self.xt32[ids, self.lo:self.hi]

    def terms_copy(self, ids):
        return self.xt[ids, self.lo:self.hi].copy()     # block_fma overwrites its terms

    def terms32_copy(self, ids):
        return self.xt32[ids, self.lo:self.hi].copy()

    def labels(self, ids):
        return self.lt[ids, self.lo:self.hi]


class MatSource(_Source):
    """Terms t[k] of output (i, j): A[i, k] * B[k, j], exact in float64 (checked by the caller)."""

    a, b = property(lambda s: s._a.f64), property(lambda s: s._b.f64)      # (m, K), (K, n): the kernels'
    a32, b32 = property(lambda s: s._a.f32), property(lambda s: s._b.f32)
    at = property(lambda s: s._transposed(np.float64))                     # A^T (K, m): the numpy steps'
    at32 = property(lambda s: s._transposed(np.float32))

    def __init__(self, a, b, fa, fb, p, q, h):
        self._a, self._b = _Exact(np.ascontiguousarray(a)), _Exact(np.ascontiguousarray(b))
        self._values = (self._a, self._b)
        self._t: dict = {}          # A^T by dtype, made on first use (shared by views)
        self.fa, self.fb = fa, fb
        self.units, self.unit = self._a.held.shape[0], self._b.held.shape[1]
        self.p, self.q, self.h = p, q, h
        self.lo, self.hi = 0, self.units

    def _transposed(self, dt) -> np.ndarray:
        """A^T (K, m) as a contiguous array of dt: the numpy steps gather its rows (the kernels read A's rows
        as they are, and need no copy)."""
        if dt not in self._t:
            self._t[dt] = np.ascontiguousarray((self._a.f32 if dt == np.float32 else self._a.f64).T)
        return self._t[dt]

    def prepare_labels(self):
        self.lat, self.lb = np.ascontiguousarray(_labels(self._a.held, self.fa).T), _labels(self._b.held, self.fb)

    def operands(self) -> tuple:
        """((values, format), ...) as the kernels read them: A (m, K) and B (K, n), float32 or float64."""
        return (self._a.held, self.fa), (self._b.held, self.fb)

    def terms(self, ids):
        a = self.at[ids, self.lo:self.hi]
        t = a[..., None] * self.b[ids][..., None, :]
        return t.reshape(t.shape[:-2] + (-1,))

    terms_copy = terms      # a fresh array already

    def terms32(self, ids):
        """Products in float32 arithmetic: IEEE binary32 multiplication, i.e. the exact product rounded
        once to FP32 (RNE): exact when it fits FP32, else what fma=False asks for."""
        a = self.at32[ids, self.lo:self.hi]
        t = a[..., None] * self.b32[ids][..., None, :]
        return t.reshape(t.shape[:-2] + (-1,))

    def terms32_copy(self, ids):
        return self.terms32(ids)    # a fresh array already

    def labels(self, ids):
        la = self.lat[ids, self.lo:self.hi]     # int16: sums of two labels stay in range (see ZERO_LABEL)
        t = la[..., None] + self.lb[ids][..., None, :]
        return t.reshape(t.shape[:-2] + (-1,))


def read_sources(op: str, inputs: tuple) -> tuple[_Source, tuple, int, list[Format], bool]:
    if op not in _OPS:
        raise ValueError(f"unknown op {op!r}; simulate supports {', '.join(_OPS)}")
    need = 1 if op == "sum" else 2
    if len(inputs) != need:
        raise TypeError(f"simulate({op!r}) takes {need} input array(s), got {len(inputs)}")
    vals = [_exact(x, f"input {i}") for i, x in enumerate(inputs)]
    if op == "sum":
        (x, fmt, st), = vals
        if x.ndim == 0:
            raise ValueError("simulate('sum') reduces the last axis; got a 0-d input")
        if x.shape[-1] < 1:
            raise ValueError(f"cannot reduce an empty axis (K = {x.shape[-1]}); K must be >= 1")
        q, h, sub, src_finite, p, _ = st
        src = _SumSource(x, fmt, p, q, h)
        src.finite = src_finite
        src.input_triples = (triple(fmt),)
        src.inputs_fit_fp32 = src.inputs_fit(FP32_TRIPLE)
        return src, x.shape[:-1], x.shape[-1], [fmt], sub
    (a, fa, (qa, ha, sa, fin_a, pa, labels_a)), (b, fb, (qb, hb, sb, fin_b, pb, _)) = vals
    if op == "dot":
        if a.ndim != 1 or b.ndim != 1 or a.shape != b.shape:
            raise ValueError(f"simulate('dot') takes two 1-D arrays of one length, got shapes {a.shape} and {b.shape}")
        a, b, shape = a[None, :], b[:, None], ()
    else:
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise ValueError(f"simulate('matmul') takes A (m, K) and B (K, n); got shapes {a.shape} and {b.shape}")
        shape = (a.shape[0], b.shape[1])
    K = a.shape[1]
    if K < 1:
        raise ValueError(f"cannot reduce over K = {K}; K must be >= 1")
    if fa.precision + fb.precision > 53:
        raise ValueError(f"products of {fa.name} x {fb.name} ({fa.precision} + {fb.precision} significant bits) "
                         "are not exact in float64; simulate needs p_a + p_b <= 53")
    if (fa.emin - fa.man_bits) + (fb.emin - fb.man_bits) < -1074 or fa.emax + fb.emax > 1021:
        raise ValueError(f"products of {fa.name} x {fb.name} can leave float64's exponent range")
    src = MatSource(a, b, fa, fb, pa + pb, qa + qb, ha + hb)
    src.finite = fin_a and fin_b                # no inf / NaN among the inputs (the kernels read it)
    src.labels_a = labels_a                     # A's least and greatest label (jitblock.keys_of reads them)
    src.input_triples = (triple(fa), triple(fb))
    src.inputs_fit_fp32 = src.inputs_fit(FP32_TRIPLE)
    return src, shape, K, [fa, fb], sa or sb


# ======================================================================================================
# Compiled schedule: slots (SSA values -> reusable rows of one buffer) and per-wave plans
# ======================================================================================================

def as_index(ids: np.ndarray):
    """A slice when ids are consecutive (a view, no copy), else the index array."""
    ids = np.asarray(ids, np.int64)
    if ids.size and ids[-1] - ids[0] == ids.size - 1 and (ids.size < 3 or (np.diff(ids) == 1).all()):
        return slice(int(ids[0]), int(ids[-1]) + 1)
    return ids
