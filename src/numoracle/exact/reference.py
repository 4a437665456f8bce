"""Exact references for reductions: ``exact_sum``, ``exact_dot``, ``exact_matmul``.

Each returns the exact result correctly rounded ONCE: to float64 (round to nearest even) by
default, to another format with ``out=`` (also once: see below), or the exact rationals with
``exact=True``. Exact under any cancellation, for every numoracle format (FP64 and 64-bit
integers included).

Inputs are native arrays (numpy, ml_dtypes, torch; the dtype names the format) or integer
codes with ``fmt=`` / ``fmt_a=`` / ``fmt_b=``. Values are read exactly (``decode``; exact
float64 for every float format, int64/uint64 for integers).

Algorithms (the integer machinery is in ``exactsum.py``):

* Dot products, and sums of data too wide for the split below: every value (or exact product,
  see ``exactsum.product_terms``) is an integer times a power of two; the terms are added
  exactly into 32-bit integer limbs (``np.bincount``) and the limbs are rounded once. Linear
  in the number of terms, vectorised over rows, any data (~80 ns a term).
* Sums of rows whose bits fit in <= 6 digit slices (the common case; ~20 ns a term): the
  digit split described next with b = 54 - ceil(log2 n), so that n digits sum exactly in
  float64 (``np.sum``, any order); the per-slice sums are combined in integer limbs.
* Matrix products: an Ozaki-style split. Row i of A is scaled by 2^(b_A - 1 - E_i), where
  |A_ik| < 2^E_i, and cut into S_A slices of balanced integer digits |d| <= 2^(b_A - 1) with
  ``rint`` (each step exact, argued in :func:`_digits`); B's columns likewise with b_B. With
  b_A + b_B = 55 - ceil(log2 K), every slice product A_s @ B_t has integer entries, and every
  partial sum that any BLAS can form (any order, blocking or FMA) is an integer of magnitude
  <= K * 2^(b_A - 1) * 2^(b_B - 1) <= 2^53: exactly representable, so the float64 GEMM is
  exact. The S_A x S_B slice products are integers at known powers of two, added exactly into
  integer limbs and rounded once. The slice counts follow the data (each row needs
  ceil((span + 1) / b) slices, span = bits from its largest to its lowest set bit; slices are
  multiplied only for the rows/columns that have them; b_A is chosen to minimise the work).
  With b_A = b_B, 2 x 2 blocks of slices take 3 GEMMs (Karatsuba, ``ozaki._products``). K goes in
  cache-sized chunks, whose slice products are summed in float64 exactly (the bound covers all K). A
  rounded result (not ``exact=True``) is rounded from the leading slice pairs wherever a
  rigorous bound on the others cannot change it (``ozakitail.py``); the other entries are
  computed in full. The compiled twins of the non-GEMM passes are in ``jitozaki.py``.
  Where it takes fewer GEMMs (wide exponent ranges: about six against the split's nine on data spread
  over 2^+-40), the product goes by Ozaki scheme II instead (``ozaki2.py``; Ozaki, Uchino & Imamura):
  each row of A / column of B scaled to integers of P bits, their product modulo odd primes p with
  K ((p - 1)/2)^2 <= 2^53 (one exact float64 GEMM of balanced residues each), rebuilt exactly by the
  Chinese remainder theorem (Garner) into the same limbs; the bits below the integers enter through two
  plain float64 GEMMs with a rigorous error bound, and the early rounding's bracket decides as above.
  A result rounded only into narrow formats (``out=`` FP32, BF16, FP16, ...: IEEE-style, <= 51 bits) may take a
  shortcut instead (``plaingemm.py``): one plain float64 GEMM of the unsplit values (K in chunks), a rigorous
  bound on its error from the rows' and columns' sums and maxima, and the same bracket, into the destination's
  rounding; the entries it leaves (about 0.05% on standard normal FP32 data) are computed exactly.
  Rows/columns the split cannot scale exactly in float64 (FP64 data spanning > 1000 binades,
  int64 values beyond 2^53) get their entries as exact dot products instead (slower).
  The argument assumes a classical GEMM (every output a sum of the K products, in any order
  or blocking, with or without FMA), which is what OpenBLAS, MKL and BLIS compute; a
  Strassen-type BLAS would break it.

``out=FORMAT`` (precision <= 51, or an integer format of <= 32 bits): the exact result is
rounded to odd at float64 precision (truncate, then set the last bit when anything was cut),
then cast once with ``numoracle.cast(..., rounding="rne")``; by Boldo & Melquiond this equals
rounding the exact value directly. Rounding the float64 RNE result instead would round twice.
Values come back as float64; NaN/inf into a format without them follow ``cast``'s defaults for
that destination (E4M3FN: NaN; integers: saturate, NaN -> 0). ``out=(FMT1, FMT2, ...)`` returns one
result per format from a single exact computation (a check needs float64 and its output format).

Specials follow IEEE 754: any NaN operand, inf - inf, or 0 * inf gives NaN; otherwise an
infinite term gives an infinity of its sign. An exact zero is +0, except -0 when every term
is -0 (a sum of -0s; products with a zero factor and opposite signs), as IEEE addition gives.
An empty reduction (K = 0) is +0. With ``exact=True`` the non-finite entries hold ``float('nan')`` /
``float('inf')`` / ``float('-inf')``, the others ``fractions.Fraction``. A full reduction gives a scalar.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np

from ..core import jit
from ..core.engine.convert import cast, check_codes, decode
from ..core.formats.format import FP32, FP64, AnyFormat, format_of
from ..core.formats.interop import to_codes
from ..core.fpmode import require_ieee
from ..core.inputs import value_table
from ..core.npcompat import normalize_axis_tuple
from . import ozaki, ozaki2, ozakitail, plaingemm
from .exactsum import limbs_to_fractions, product_terms, round_limbs, split_values, sum_terms

__all__ = ["exact_sum", "exact_dot", "exact_matmul"]

_BLOCK = 1 << 20  # products per block on the per-entry (dot) path
_SUM_SLICES = 6  # exact_sum: rows needing more digit slices than this use the limb accumulator


# ---- reading inputs -----------------------------------------------------------------------------
def _values(x: Any, fmt: Any, name: str, what: str = "x", keep32: bool = False) -> tuple[np.ndarray, AnyFormat]:
    """(exact values, format): float64 for float formats (and integers of <= 16 bits), else int64/uint64.

    ``keep32``: FP32 values stay float32 (a view of the codes: no copy; exact_matmul's split reads them).
    """
    if fmt is None:
        codes, f = to_codes(x, what)
    else:
        f = format_of(fmt)
        codes = check_codes(x, f, hint=f"pass the values themselves without {name}'s format argument, or codes")
    codes = np.asarray(codes)
    if f == FP64:
        return codes.astype(np.uint64, copy=False).view(np.float64), f
    if f == FP32:
        # IEEE widening float32 -> float64 is exact for every value (subnormals included)
        v32 = codes.astype(np.uint32, copy=False).view(np.float32)
        return (v32 if keep32 else v32.astype(np.float64)), f
    if f.bits <= 16:
        return np.take(value_table(f), codes), f
    return decode(codes, f), f


def _products_exact(fa: AnyFormat, fb: AnyFormat) -> bool:
    """Is every product of finite values of fa and fb exact in float64 (no rounding, no under/overflow)?"""
    if fa.is_integer or fb.is_integer:
        bits = [f.bits if f.is_integer else f.precision for f in (fa, fb)]
        if sum(bits) > 53:
            return False
    elif fa.precision + fb.precision > 53:
        return False
    tiny = [Fraction(1) if f.is_integer else f.min_subnormal for f in (fa, fb)]  # products are multiples
    huge = [Fraction(2**f.bits) if f.is_integer else f.max_finite for f in (fa, fb)]  # of tiny_a * tiny_b
    return tiny[0] * tiny[1] >= Fraction(1, 2**1074) and huge[0] * huge[1] < 2**1024


def _all_finite(v: np.ndarray) -> bool:
    """No NaN or infinity in the float64 / float32 array v (in a large call: one compiled max reduction)."""
    run = ozaki.compiled("all_finite", v)
    return run(v) if run is not None else bool(np.isfinite(v).all())


class _Classes:
    """Values with non-finite entries zeroed (``fin``); the masks are computed only when asked."""

    def __init__(self, v: np.ndarray, finite: bool = False) -> None:
        self.v = v
        self.floats = v.dtype.kind == "f"  # float64 (or float32: exact_matmul); else integers: no NaN, inf, -0
        self.all_finite = not self.floats or finite or _all_finite(v)  # finite=True: the caller knows
        self.fin = v if self.all_finite else np.where(np.isfinite(v), v, 0.0)

    def _none(self) -> np.ndarray:
        return np.zeros(self.v.shape, bool)

    @cached_property
    def nan(self) -> np.ndarray:
        return self._none() if self.all_finite else np.isnan(self.v)

    @cached_property
    def inf(self) -> np.ndarray:
        return self._none() if self.all_finite else np.isinf(self.v)

    @cached_property
    def sign(self) -> np.ndarray:
        return np.signbit(self.v) if self.floats else self.v < 0

    @cached_property
    def zero(self) -> np.ndarray:
        return self.v == 0


def _check_out(out: Any, exact: bool) -> AnyFormat | tuple[AnyFormat, ...]:
    """The destination format (a tuple of them for ``out=(fmt, ...)``: one result each, one exact sum)."""
    if isinstance(out, (tuple, list)):
        if not out:
            raise ValueError("out=() names no format; give one format or a non-empty tuple of them")
        return tuple(_check_out(o, exact) for o in out)
    dst = format_of(out)
    if exact and dst != FP64:
        raise ValueError(f"exact=True returns exact rationals; out={dst.name!r} has no effect there. Drop one of them")
    if dst != FP64:
        # round-to-odd float64 then one rounding is correct when the destination's grid, refined by
        # two bits, lies in float64's: precision <= 51, quantum >= 2^-1072, and no value >= 2^1024
        if dst.is_integer:
            wide = dst.bits > 32
        else:
            wide = dst.precision > 51 or dst.emin - dst.man_bits < -1072 or dst.emax > 1023
        if wide:
            raise ValueError(
                f"out={dst.name!r}: a single correct rounding via round-to-odd float64 needs a destination "
                "with precision <= 51 bits inside float64's range (or an integer format of <= 32 bits); use "
                "exact=True and round the Fractions with numoracle.core.scalar.round_value")
    return dst


# ---- results --------------------------------------------------------------------------------------
def _finish(rne: np.ndarray, ro: np.ndarray, fr: np.ndarray | None, nan: np.ndarray, pinf: np.ndarray,
            ninf: np.ndarray, negzero: np.ndarray, dst: Any, shape: tuple[int, ...]) -> Any:
    """Apply the IEEE special cases, round to ``dst`` once (via ``ro``) or return Fractions.

    ``dst`` a tuple of formats: a tuple of results, each rounded once from the same exact values.
    """
    if isinstance(dst, tuple):
        return tuple(_finish(rne, ro, fr, nan, pinf, ninf, negzero, d, shape) for d in dst)
    nan = nan | (pinf & ninf)  # inf + -inf
    pinf, ninf = pinf & ~nan, ninf & ~nan
    special = np.where(nan, np.nan, np.where(pinf, np.inf, -np.inf))
    nonfinite = nan | pinf | ninf
    zero = negzero & (ro == 0) & ~nonfinite  # ro == 0 exactly when the exact value is 0
    if fr is not None:
        res = fr.copy()
        for i in np.flatnonzero(nonfinite):
            res[i] = float(special[i])
    else:
        val = np.where(nonfinite, special, np.where(zero, -0.0, rne if dst == FP64 else ro))
        if dst == FP32:  # RNE, subnormals, overflow to inf: cast's bits (the entry refused an FTZ thread: fpmode)
            with np.errstate(over="ignore"):
                val = val.astype(np.float32).astype(np.float64)
        elif dst != FP64:
            codes = cast(val, dst, rounding="rne")
            val = decode(codes, dst).astype(np.float64)
        res = val
    res = res.reshape(shape)
    return res[()] if shape == () else res


# ---- exact_sum ------------------------------------------------------------------------------------
def _sum_rows(v: np.ndarray, exact: bool) -> tuple:
    """Exact row sums of finite values (R, n): (RNE, RO, Fractions or None).

    Rows whose bits fit in a few digit slices (the common case) use the split below, the rest
    the limb accumulator of ``exactsum.sum_terms`` (any data; ~3x slower on narrow data).
    """
    R, n = v.shape
    f, ok = ozaki.float_lines(v, 1)
    E, span = ozaki.line_bit_range(f, 1)
    beta = 54 - max(n - 1, 0).bit_length()  # n * 2^(beta - 1) <= 2^53
    S = ozaki.slice_counts(span, beta)
    ok &= S <= _SUM_SLICES
    rne, ro = np.zeros(R), np.zeros(R)
    fr = np.empty(R, object) if exact else None
    for rows, split in ((np.flatnonzero(ok), True), (np.flatnonzero(~ok), False)):
        if not rows.size:
            continue
        whole = rows.size == R
        if split:
            r = _sum_split(f if whole else f[rows], E[rows], int(S[rows].max()), beta, exact)
        else:
            r = sum_terms(split_values(v if whole else v[rows]), exact=exact)
        rne[rows], ro[rows] = r[0], r[1]
        if exact:
            fr[rows] = r[2]
    return rne, ro, fr


def _sum_split(f: np.ndarray, E: np.ndarray, S: int, beta: int, exact: bool) -> tuple:
    """Row sums by digit slices: the sum of one slice's digits is exact in float64.

    The digits are those of ``_digits`` (|d| <= 2^(beta - 1), exact steps; S <= _SUM_SLICES
    keeps the span <= 6 * 54 < MAX_SPAN, so the scaling is exact); a row of n of them sums to
    at most n * 2^(beta - 1) <= 2^53, and so does every partial sum that np.sum (any order) or
    the tile loop forms: each is an integer that float64 holds exactly.
    """
    R, n = f.shape
    if S == 0:  # all-zero (or empty) rows
        return np.zeros(R), np.zeros(R), np.array([Fraction(0)] * R, object) if exact else None
    sums = np.zeros((S, R))
    k = (beta - 1 - E).astype(np.int32)[:, None]
    scale = float(2 ** beta)
    rstep = max(1, (1 << 15) // max(n, 1))
    cstep = n if rstep > 1 else 1 << 15
    for r0 in range(0, R, rstep):
        r1 = min(R, r0 + rstep)
        for c0 in range(0, n, cstep):
            t = np.ldexp(f[r0:r1, c0:c0 + cstep], k[r0:r1])
            for s in range(S):
                d = np.rint(t)
                sums[s, r0:r1] += d.sum(axis=1)
                t -= d
                t *= scale
            if t.any():
                raise AssertionError("internal: sum slices did not exhaust the input")
    # row r = 2^base_r * sum_s sums[s, r] * 2^((S - 1 - s) beta), base_r = E_r - beta + 1 - (S - 1) beta
    base = E - beta + 1 - (S - 1) * beta
    nl = ((S - 1) * beta + 54 + 32) // 32 + 3
    limbs = np.zeros((nl, R), np.int64)
    for s in range(S):
        ozaki.add_shifted(limbs, sums[s].astype(np.int64), (S - 1 - s) * beta, None)  # |sum| <= 2^53: exact
    fr = limbs_to_fractions(limbs, base) if exact else None
    rne, ro = round_limbs(limbs, base)
    return rne, ro, fr


def exact_sum(x: Any, axis: Any = None, *, fmt: Any = None, out: Any = "fp64", exact: bool = False) -> Any:
    """The exact sum of ``x`` (over ``axis``: None for all, an int or a tuple), rounded once.

    >>> float(exact_sum(np.array([1e30, 1.0, -1e30])))
    1.0
    """
    require_ieee("exact_sum")
    dst = _check_out(out, exact)
    v, _ = _values(x, fmt, "fmt")
    if axis is None:
        v2, shape = v.reshape(1, -1), ()
    else:
        try:
            axes = normalize_axis_tuple(axis, v.ndim)
        except (OverflowError, TypeError, ValueError) as e:  # numpy's AxisError is a ValueError
            raise ValueError(f"axis {axis!r} is not an axis of an array with {v.ndim} dimensions ({e})") from None
        keep = [d for d in range(v.ndim) if d not in axes]
        shape = tuple(v.shape[d] for d in keep)
        n = int(np.prod([v.shape[d] for d in axes], dtype=np.int64))
        v2 = np.transpose(v, keep + list(axes)).reshape(int(np.prod(shape, dtype=np.int64)), n)
    with jit.for_work(v2.size):  # compiled passes only for large sums (core/jit.py)
        c = _Classes(v2)
        rne, ro, fr = _sum_rows(c.fin, exact)
    R, n = v2.shape
    negzero = np.zeros(R, bool)
    rows = np.flatnonzero(ro == 0) if n else np.zeros(0, np.intp)  # exact zeros: is every term -0?
    if rows.size and c.floats:
        negzero[rows] = (c.zero[rows] & c.sign[rows]).all(axis=1)
    if c.all_finite:
        none = np.zeros(R, bool)
        return _finish(rne, ro, fr, none, none, none, negzero, dst, shape)
    return _finish(rne, ro, fr, c.nan.any(1), (c.inf & ~c.sign).any(1), (c.inf & c.sign).any(1), negzero, dst, shape)


# ---- exact_dot ------------------------------------------------------------------------------------
def _dot_rows(fa: np.ndarray, fb: np.ndarray, exact: bool) -> tuple:
    """Exact dot products of finite rows (R, K) x (R, K), in blocks of <= _BLOCK products."""
    R, K = fa.shape
    rne, ro = np.zeros(R), np.zeros(R)
    fr = np.empty(R, object) if exact else None
    step = max(1, _BLOCK // max(K, 1))
    for r0 in range(0, R, step):
        sl = slice(r0, r0 + step)
        terms = product_terms(split_values(fa[sl], strip=True), split_values(fb[sl], strip=True))
        a, b, c = sum_terms(terms, exact=exact)
        rne[sl], ro[sl] = a, b
        if exact:
            fr[sl] = c
    return rne, ro, fr


def _product_specials(ca: _Classes, cb: _Classes, ro: np.ndarray) -> tuple:
    """Per row of products a_k * b_k: (any NaN product, any +inf, any -inf, every product -0)."""
    R, K = ca.v.shape
    negzero = np.zeros(R, bool)
    rows = np.flatnonzero(ro == 0) if K else np.zeros(0, np.intp)  # exact zeros: is every product -0?
    if rows.size and (ca.floats or cb.floats):
        negzero[rows] = ((ca.zero[rows] | cb.zero[rows]) & (ca.sign[rows] ^ cb.sign[rows])).all(axis=1)
    if ca.all_finite and cb.all_finite:
        none = np.zeros(R, bool)
        return none, none, none, negzero
    pnan = ca.nan | cb.nan | (ca.inf & cb.zero) | (ca.zero & cb.inf)  # NaN operand, or 0 * inf
    sign = ca.sign ^ cb.sign
    pinf = (ca.inf | cb.inf) & ~pnan
    return pnan.any(-1), (pinf & ~sign).any(-1), (pinf & sign).any(-1), negzero


def exact_dot(a: Any, b: Any, *, fmt_a: Any = None, fmt_b: Any = None, out: Any = "fp64", exact: bool = False) -> Any:
    """The exact dot product over the last axis of ``a`` and ``b``, rounded once.

    Leading axes broadcast (a batch of dot products); the last axes must have equal length K.
    """
    require_ieee("exact_dot")
    dst = _check_out(out, exact)
    (va, fa), (vb, fb) = _values(a, fmt_a, "fmt_a", "a"), _values(b, fmt_b, "fmt_b", "b")
    if va.ndim == 0 or vb.ndim == 0:
        raise ValueError(f"exact_dot takes vectors (or stacks of them); got shapes {va.shape} and {vb.shape}. "
                         "For a scaled sum use exact_sum")
    if va.shape[-1] != vb.shape[-1]:
        raise ValueError(f"exact_dot: a has shape {va.shape} and b has shape {vb.shape}; the last axes (K) must "
                         f"have equal length ({va.shape[-1]} != {vb.shape[-1]}). Slice or pad one of them")
    try:
        lead = np.broadcast_shapes(va.shape[:-1], vb.shape[:-1])
    except ValueError:
        raise ValueError(f"exact_dot: the leading axes of a {va.shape} and b {vb.shape} do not broadcast; give "
                         "equal batch shapes (or 1-D vectors)") from None
    K = va.shape[-1]
    R = int(np.prod(lead, dtype=np.int64))
    va = np.broadcast_to(va, lead + (K,)).reshape(R, K)
    vb = np.broadcast_to(vb, lead + (K,)).reshape(R, K)
    with jit.for_work(R * K):  # compiled passes only for large products (core/jit.py)
        ca, cb = _Classes(va), _Classes(vb)
        if _products_exact(fa, fb):  # float64 products are exact: an exact sum of them
            rne, ro, fr = _sum_rows(ca.fin.astype(np.float64) * cb.fin.astype(np.float64), exact)
        else:
            rne, ro, fr = _dot_rows(ca.fin, cb.fin, exact)
    return _finish(rne, ro, fr, *_product_specials(ca, cb, ro), dst, lead)


def _matmul_2d(va: np.ndarray, vb: np.ndarray, exact: bool, narrow: tuple | None = None) -> tuple:
    """Exact 2-D product of value arrays; returns raveled (rne, ro, fr, nan, pinf, ninf, negzero).

    Rows of A and columns of B that the Ozaki split handles (spans <= ozaki.MAX_SPAN, values exact in
    float64) go through it (or through plaingemm's shortcut, where every destination is ``narrow``: then
    only ``ro`` is meaningful, ``rne`` a stand-in); the entries of any other row or column are exact dot products.
    """
    M, K = va.shape
    N = vb.shape[1]
    pa, pb = ozaki.scan_finite(va, 1), ozaki.scan_finite(vb, 0)  # bit ranges and finiteness in one pass, where it can
    ca, cb = _Classes(va, pa is not None), _Classes(vb, pb is not None)
    A, rows_ok = ozaki.float_lines(ca.fin, 1)
    B, cols_ok = ozaki.float_lines(cb.fin, 0)
    EA, sA = pa or ozaki.line_bit_range(A, 1)
    EB, sB = pb or ozaki.line_bit_range(B, 0)
    rows_ok &= sA <= ozaki.MAX_SPAN
    cols_ok &= sB <= ozaki.MAX_SPAN
    rne, ro = np.zeros((M, N)), np.zeros((M, N))
    fr = np.empty((M, N), object) if exact else None
    ri, ci = np.flatnonzero(rows_ok), np.flatnonzero(cols_ok)
    if ri.size and ci.size:
        whole = ri.size == M and ci.size == N
        a, b, c = _engine(A if whole else A[ri], B if whole else B[:, ci], EA[ri], sA[ri], EB[ci], sB[ci], exact,
                          narrow)
        a, b = a.reshape(ri.size, ci.size), b.reshape(ri.size, ci.size)
        if whole:  # every entry from the split: its arrays as they are
            rne, ro, fr = a, b, None if c is None else c.reshape(M, N)
        else:
            idx = np.ix_(ri, ci)
            rne[idx], ro[idx] = a, b
            if exact:
                fr[idx] = c.reshape(ri.size, ci.size)
    rest = ~(rows_ok[:, None] & cols_ok[None, :]) if ri.size < M or ci.size < N else np.zeros((0, 0), bool)
    ii, jj = np.nonzero(rest)  # the rest: per-entry exact dot products
    step = max(1, _BLOCK // max(K, 1))
    for p0 in range(0, ii.size, step):
        i, j = ii[p0:p0 + step], jj[p0:p0 + step]
        a, b, c = _dot_rows(_wide(ca.fin[i]), _wide(cb.fin[:, j].T), exact)
        rne[i, j], ro[i, j] = a, b
        if exact:
            fr[i, j] = c
    return (rne.ravel(), ro.ravel(), None if fr is None else fr.ravel()) + _matmul_specials(ca, cb, ro)


def _engine(A: np.ndarray, B: np.ndarray, EA, sA, EB, sB, exact: bool, narrow: tuple | None) -> tuple:
    """(rne, ro, fr) of A @ B (finite, spans <= MAX_SPAN): plaingemm's shortcut into ``narrow`` destinations where
    it pays (``rne`` then a stand-in), else the exact engines (ozaki2.exact_product)."""
    kern = ozaki.compiled("split", A)
    b_side = plaingemm.choose(A, B, EA, sA, EB, sB, narrow, kern) if narrow is not None else None
    if b_side is not None:
        got = plaingemm.shortcut(A, B, EA, sA, EB, sB, narrow, kern, b_side)
        ro, und = got.ro, got.undecided
        M, K = A.shape
        N = B.shape[1]
        if und.size and ozakitail.affordable(und.size, K, 1, M, N, ozakitail.compiled_entries(A, B, kern)):
            ro[und] = ozakitail.entries(A, B, und // N, und % N, kern)[1]  # fewer than a GEMM's work
        elif und.size:
            ro[und] = ozaki2.undecided(A, B, EA, sA, EB, sB, und, N, kern)[1]
        return ro, ro, None
    return ozaki2.exact_product(A, B, EA, sA, EB, sB, exact)


def _wide(v: np.ndarray) -> np.ndarray:
    """float32 values widened to float64 (exact); other arrays as they are."""
    return v.astype(np.float64) if v.dtype == np.float32 else v


def _ind(m: np.ndarray) -> np.ndarray:
    return m.astype(np.float64)


def _matmul_specials(ca: _Classes, cb: _Classes, ro: np.ndarray) -> tuple:
    """(NaN, +inf, -inf, all products -0), raveled, from 0/1 indicator GEMMs.

    The indicator GEMMs count terms: integers <= 4K, exact in float64.
    """
    M, N = ro.shape
    K = ca.v.shape[1]
    nan = np.zeros((M, N), bool)
    pinf, ninf, negzero = nan.copy(), nan.copy(), nan.copy()
    if not (ca.all_finite and cb.all_finite):
        nan_a, inf_a, s_a, z_a = ca.nan, ca.inf, ca.sign, ca.zero
        nan_b, inf_b, s_b, z_b = cb.nan, cb.inf, cb.sign, cb.zero
        nan |= nan_a.any(1)[:, None] | nan_b.any(0)[None, :]
        nan |= (np.hstack([_ind(inf_a), _ind(z_a)]) @ np.vstack([_ind(z_b), _ind(inf_b)])) > 0  # 0 * inf
        pos_a, neg_a = ~s_a & ~z_a & ~nan_a, s_a & ~z_a & ~nan_a  # nonzero, infinities included
        pos_b, neg_b = ~s_b & ~z_b & ~nan_b, s_b & ~z_b & ~nan_b
        pi_a, ni_a, pi_b, ni_b = inf_a & ~s_a, inf_a & s_a, inf_b & ~s_b, inf_b & s_b
        left = np.hstack([_ind(pi_a), _ind(ni_a), _ind(pos_a), _ind(neg_a)])
        pinf = (left @ np.vstack([_ind(pos_b), _ind(neg_b), _ind(pi_b), _ind(ni_b)])) > 0
        ninf = (left @ np.vstack([_ind(neg_b), _ind(pos_b), _ind(ni_b), _ind(pi_b)])) > 0
    zero = ro == 0
    if K > 0 and zero.any() and (ca.floats or cb.floats):
        s_a, z_a, s_b, z_b = ca.sign, ca.zero, cb.sign, cb.zero
        rows, cols = np.flatnonzero(zero.any(1)), np.flatnonzero(zero.any(0))
        # every product -0 <=> no k with both factors nonzero and none with equal signs
        left = np.hstack([_ind(~z_a[rows]), _ind(s_a[rows]), _ind(~s_a[rows])])
        right = np.vstack([_ind(~z_b[:, cols]), _ind(s_b[:, cols]), _ind(~s_b[:, cols])])
        negzero[np.ix_(rows, cols)] = (left @ right) == 0
    return nan.ravel(), pinf.ravel(), ninf.ravel(), negzero.ravel()


def exact_matmul(A: Any, B: Any, *, fmt_a: Any = None, fmt_b: Any = None, out: Any = "fp64",
                 exact: bool = False) -> Any:
    """The exact matrix product ``A @ B`` (numpy matmul shapes: 1-D operands and batches), rounded once.

    Exact integer products of digit slices or residues (float64 GEMMs; where the process has loaded torch, also
    its exact int8 GEMM, exact/intgemm.py: faster, the same bits) give every entry's exact value or a rigorous
    bracket that decides its rounding.

    >>> a = np.array([[1e30, 1.0, -1e30]]); b = np.ones((3, 1))
    >>> float(exact_matmul(a, b)[0, 0])
    1.0
    """
    require_ieee("exact_matmul")
    sa, sb = np.shape(A), np.shape(B)   # ozaki.compiled kernels only where the work repays them (core/jit.py)
    with jit.for_work(int(np.prod(sa, dtype=np.int64)) * (sb[-1] if len(sb) > 1 else 1)):
        return _exact_matmul(A, B, fmt_a, fmt_b, out, exact)


def _exact_matmul(A: Any, B: Any, fmt_a: Any, fmt_b: Any, out: Any, exact: bool) -> Any:
    dst = _check_out(out, exact)
    (va, _), (vb, _) = _values(A, fmt_a, "fmt_a", "A", True), _values(B, fmt_b, "fmt_b", "B", True)
    if va.ndim == 0 or vb.ndim == 0:
        raise ValueError(f"exact_matmul takes arrays of >= 1 dimension; got shapes {va.shape} and {vb.shape}. "
                         "For a scalar multiple use exact_dot or exact_sum")
    a2 = va[None, :] if va.ndim == 1 else va
    b2 = vb[:, None] if vb.ndim == 1 else vb
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError(
            f"exact_matmul: A has shape {va.shape} and B has shape {vb.shape}; A @ B needs A.shape[-1] == "
            f"B.shape[-2] ({a2.shape[-1]} != {b2.shape[-2]}). Transpose one of them (e.g. B.T) or fix K")
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise ValueError(f"exact_matmul: the batch axes of A {va.shape} and B {vb.shape} do not broadcast") from None
    M, N = a2.shape[-2], b2.shape[-1]
    nb = int(np.prod(batch, dtype=np.int64))
    a3 = np.broadcast_to(a2, batch + a2.shape[-2:]).reshape((nb,) + a2.shape[-2:])
    b3 = np.broadcast_to(b2, batch + b2.shape[-2:]).reshape((nb,) + b2.shape[-2:])
    narrow = plaingemm.qualifies(dst, exact)
    parts = [_matmul_2d(np.ascontiguousarray(x), np.ascontiguousarray(y), exact, narrow) for x, y in zip(a3, b3)]

    def cat(k: int, dtype: Any) -> np.ndarray:
        return np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, dtype)

    shape = batch + (M, N)
    if vb.ndim == 1:
        shape = shape[:-1]
    if va.ndim == 1:
        shape = shape[:-2] + shape[-1:] if vb.ndim > 1 else shape[:-1]
    return _finish(cat(0, float), cat(1, float), cat(2, object) if exact else None,
                   *[cat(k, bool) for k in range(3, 7)], dst, shape)
