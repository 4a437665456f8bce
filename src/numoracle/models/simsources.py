"""simulate's inputs: exact values, their labels and the sources that hand each step its operands."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..core.formats import FP32, Format
from ..core.inputs import exact_float64
from .accumulate import native_fp32_ok, triple

_OPS = ("sum", "dot", "matmul")
_MAG, _INF = 0x7FFF_FFFF_FFFF_FFFF, 0x7FF0_0000_0000_0000   # float64 bits: magnitude mask, +inf
_BLOCK = 1 << 15      # elements per block of _stats
_ZERO_LABEL = -16000  # label of a zero input: far below every real label, and int16 sums stay in range
FP32_TRIPLE = triple(FP32)


def triple_fits(src: tuple, dst: tuple) -> bool:
    return src[0] <= dst[0] and src[1] >= dst[1] and src[2] <= dst[2]


def _exact(x: Any, what: str) -> tuple[np.ndarray, Format]:
    v, fmt = exact_float64(x, what)
    if not isinstance(fmt, Format):
        raise TypeError(f"{what} has integer format {fmt.name}; simulate models floating-point accumulation")
    return v, fmt


def _stats(v: np.ndarray, fmt: Format) -> tuple[int, int, bool, bool]:
    """(q, h, subnormals, finite): the finite nonzero values are multiples of 2^q and below 2^h; finite:
    no inf or NaN among the values.

    q = floor(log2 min|v|) - (p - 1), floored at the format's quantum: a value with at most p
    significant bits has its lowest bit at or above floor(log2|v|) - (p - 1). min and max are read on
    the bits: the bit patterns of |v| order as the values, so the largest pattern below the infinity's
    is max |v| over the finite values, and the smallest pattern - 1 as an unsigned word (a zero's wraps
    around to the top) is min |v| over the finite nonzero ones (inf and NaN lie above both).
    """
    bits = np.ascontiguousarray(v).reshape(-1).view(np.int64)
    top, low, finite = 0, 1 << 64, True
    for i in range(0, bits.size, _BLOCK):       # blocks that stay in cache (no array-sized temporaries)
        b = bits[i:i + _BLOCK] & _MAG
        t = int(b.max())
        if t >= _INF:                           # inf / NaN among them: the largest finite pattern
            t, finite = int(b.max(where=b < _INF, initial=0)), False
        b -= 1
        top, low = max(top, t), min(low, int(b.view(np.uint64).min()) + 1)
    if top == 0 or low >= _INF:                 # no finite nonzero value (or no value)
        return 10**6, -(10**6), False, finite
    mn, mx = (float(np.int64(w).view(np.float64)) for w in (low, top))
    q = max(int(np.frexp(mn)[1]) - fmt.precision, fmt.emin - fmt.man_bits)
    return q, int(np.frexp(mx)[1]), bool(mn < 2.0**fmt.emin), finite


def _labels(v: np.ndarray, fmt: Format) -> np.ndarray:
    """BlockFMA labels: max(floor(log2|v|), fmt.emin); zeros _ZERO_LABEL; inf/NaN 0 (unused).

    floor(log2|v|) of a normal float64 is its biased exponent field - 1023; a subnormal float64's field
    (0) gives -1023, below every format's emin (>= -1022 here), so the clamp gives emin as for its
    true exponent."""
    if fmt.emin < -1022:                        # (no format simulate takes: its values are normal float64)
        fin = np.isfinite(v) & (v != 0)
        e = np.frexp(np.where(fin, v, 1.0))[1] - 1
        return np.where(v == 0, _ZERO_LABEL, np.where(fin, np.maximum(e, fmt.emin), 0)).astype(np.int16)
    v = np.ascontiguousarray(v)
    top = v.view(np.uint16)[..., 3::4] if sys.byteorder == "little" else v.view(np.uint16)[..., 0::4]
    e = top & 0x7FF0                            # the top 16 bits: sign, exponent field, 4 fraction bits
    e >>= 4
    e = e.view(np.int16)
    e -= 1023
    zeros = e.size and e.min() == -1023         # zeros (or float64 subnormals: emin after the clamp)
    special = e.size and e.max() == 1024        # inf / NaN
    marks = (e == -1023) & (v == 0) if zeros else None, e == 1024 if special else None
    np.maximum(e, fmt.emin, out=e)
    for m, label in zip(marks, (_ZERO_LABEL, 0)):
        if m is not None:
            e[m] = label
    return e


class _Source:
    """Terms of one reduction per output, the outputs flattened to a batch and cut into units."""

    units: int
    unit: int = 1

    def info(self) -> tuple[int, int, int]:
        return self.p, self.q, self.h

    def terms_fp32(self) -> bool:
        """The inputs and every term (input or exact product) are FP32 numbers, and float32 arithmetic
        has gradual underflow here: float32 multiplication then gives the terms exactly."""
        return native_fp32_ok() and self.inputs_fit_fp32 and triple_fits(self.info(), FP32_TRIPLE)

    def view(self, lo, hi):
        s = object.__new__(type(self))
        s.__dict__.update(self.__dict__, lo=lo, hi=hi)
        return s


class _SumSource(_Source):
    def __init__(self, x: np.ndarray, fmt: Format, q: int, h: int):
        self.xt = np.ascontiguousarray(x.reshape(-1, x.shape[-1]).T)      # (K, batch)
        self.fmt = fmt
        self.units = self.xt.shape[1]
        self.p, self.q, self.h = fmt.precision, q, h
        self.lo, self.hi = 0, self.units

    def prepare_labels(self):
        self.lt = _labels(self.xt, self.fmt)

    def prepare_f32(self):
        self.xt32 = self.xt.astype(np.float32)      # exact: only called when the format fits FP32

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

    def __init__(self, a, b, fa, fb, p, q, h):
        self.at, self.b = np.ascontiguousarray(a.T), np.ascontiguousarray(b)    # (K, m), (K, n)
        self.fa, self.fb = fa, fb
        self.units, self.unit = self.at.shape[1], self.b.shape[1]
        self.p, self.q, self.h = p, q, h
        self.lo, self.hi = 0, self.units

    def prepare_labels(self):
        self.lat, self.lb = _labels(self.at, self.fa), _labels(self.b, self.fb)

    def prepare_f32(self):
        self.at32, self.b32 = self.at.astype(np.float32), self.b.astype(np.float32)   # exact (formats fit FP32)

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
        la = self.lat[ids, self.lo:self.hi]     # int16: sums of two labels stay in range (see _ZERO_LABEL)
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
        (x, fmt), = vals
        if x.ndim == 0:
            raise ValueError("simulate('sum') reduces the last axis; got a 0-d input")
        if x.shape[-1] < 1:
            raise ValueError(f"cannot reduce an empty axis (K = {x.shape[-1]}); K must be >= 1")
        q, h, sub, src_finite = _stats(x, fmt)
        src = _SumSource(x, fmt, q, h)
        src.finite = src_finite
        src.inputs_fit_fp32 = triple_fits(triple(fmt), FP32_TRIPLE)
        return src, x.shape[:-1], x.shape[-1], [fmt], sub
    (a, fa), (b, fb) = vals
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
    qa, ha, sa, fin_a = _stats(a, fa)
    qb, hb, sb, fin_b = _stats(b, fb)
    if (fa.emin - fa.man_bits) + (fb.emin - fb.man_bits) < -1074 or fa.emax + fb.emax > 1021:
        raise ValueError(f"products of {fa.name} x {fb.name} can leave float64's exponent range")
    src = MatSource(a, b, fa, fb, fa.precision + fb.precision, qa + qb, ha + hb)
    src.finite = fin_a and fin_b                # no inf / NaN among the inputs (the kernels read it)
    src.inputs_fit_fp32 = triple_fits(triple(fa), FP32_TRIPLE) and triple_fits(triple(fb), FP32_TRIPLE)
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
