"""The rounding engine: ``unpack`` (codes -> exact triple) and ``round_pack`` (triple -> codes).

Every conversion in numoracle goes through these two vectorised functions;
there is no per-pair code. The exact triple of an element is

    value = (-1)^sign * sig * 2^(E - (W-1))

with ``sig`` a W-bit unsigned integer whose top bit is set (W = 32 when both
formats fit, else 64), ``E = floor(log2 |value|)``, plus a class for zeros,
infinities and NaNs. Every source format up to FP64 and INT64/UINT64 fits
exactly. The common case (finite, normal in both formats) runs as a handful
of whole-chunk integer operations; zeros, infinities, NaNs, subnormals and
overflows are fixed up with masks over the few elements that need them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .formats import AnyFormat, Format, IntFormat
from .rounding import Flags, NanTo, Overflow, Policy, Rounding

__all__ = ["Unpacked", "unpack", "round_pack", "word_bits", "ZERO", "FINITE", "INF", "NAN", "bit_length"]

ZERO, FINITE, INF, NAN = 0, 1, 2, 3
_ZERO_E = -(1 << 20)  # exponent given to zeros: far below every format's range


def word_bits(src: AnyFormat, dst: AnyFormat) -> int:
    """32 when the source significand and the destination precision fit a uint32, else 64."""
    return 32 if src.precision <= 32 and dst.precision <= 32 and src.bits <= 32 else 64


@dataclass
class Unpacked:
    """Exact triple of a chunk. ``cls`` is None when every element is finite and nonzero."""

    sign: np.ndarray  # bool
    sig: np.ndarray  # uintW, top bit set for finite nonzero elements
    E: np.ndarray  # int32 (int64 never needed: |E| < 2^20)
    cls: np.ndarray | None
    W: int


def bit_length(a: np.ndarray) -> np.ndarray:
    """Exact bit length of each element of an unsigned array (0 for 0), as int32."""
    a64 = a.astype(np.uint64, copy=False)
    _, e = np.frexp(a64.astype(np.float64))
    e = np.minimum(e, 64).astype(np.int32)
    if a64.size and a.dtype.itemsize == 8:
        big = a64 >= np.uint64(1 << 53)
        if big.any():
            eb = e[big]
            shifted = a64[big] >> (eb - 1).astype(np.uint64)
            e[big] = eb - (shifted == 0)
    return e


def _normalise(mag: np.ndarray, W: int, udt: type) -> tuple[np.ndarray, np.ndarray]:
    """(sig with top bit set, floor(log2)) of nonzero unsigned integers."""
    nb = bit_length(mag)
    sig = mag.astype(udt) << (W - nb).astype(udt)
    return sig, nb - 1


def unpack(codes: np.ndarray, fmt: AnyFormat, W: int, daz: bool = False) -> Unpacked:
    """Codes (unsigned ints) of ``fmt`` -> exact triple in W-bit words."""
    udt = np.uint32 if W == 32 else np.uint64
    if fmt.is_integer:
        return _unpack_int(codes, fmt, W, udt)
    assert isinstance(fmt, Format)
    c = codes.astype(udt, copy=False)
    m, top = fmt.man_bits, (1 << fmt.exp_bits) - 1
    if fmt.signed:
        sign = (c >> udt(fmt.bits - 1)).astype(bool)
        mag = c & udt(fmt.mag_mask)
    else:
        sign = np.zeros(c.shape, bool)
        mag = c
    ef = mag >> udt(m)
    sig = ((mag & udt((1 << m) - 1)) | udt(1 << m)) << udt(W - 1 - m)
    E = ef.astype(np.int32) - np.int32(fmt.bias)
    cls = None
    # rare classes: exponent field all zeros (zero/subnormal) or all ones (inf/NaN/FN top binade)
    maybe = (ef - udt(1)) >= udt(top - 1) if top > 1 else np.ones(c.shape, bool)
    if fmt.nan == "fnuz":
        maybe |= c == udt(fmt.sign_bit)
    if maybe.any():
        idx = np.flatnonzero(maybe)
        cls = np.full(c.shape, FINITE, np.uint8)
        e_i, mag_i, c_i = ef.ravel()[idx], mag.ravel()[idx], c.ravel()[idx]
        m_i = mag_i & udt((1 << m) - 1)
        k = np.full(idx.size, FINITE, np.uint8)
        if fmt.has_subnormals:
            low = e_i == 0
            k[low & (m_i == 0)] = ZERO
            sub = low & (m_i != 0)
            if sub.any():
                if daz:
                    k[sub] = ZERO
                else:
                    s_sig, s_e = _normalise(m_i[sub], W, udt)
                    sig.ravel()[idx[sub]] = s_sig
                    E.ravel()[idx[sub]] = s_e + np.int32(1 - fmt.bias - m)
        if fmt.nan == "ieee":
            hi = e_i == top
            k[hi & (m_i == 0)] = INF
            k[hi & (m_i != 0)] = NAN
        elif fmt.nan == "fn":
            k[mag_i == fmt.mag_mask] = NAN
        elif fmt.nan == "fnuz":
            k[c_i == fmt.sign_bit] = NAN
            if fmt.has_inf:
                k[mag_i == fmt.mag_mask] = INF
        cls.ravel()[idx] = k
        if (k == FINITE).all():
            cls = None
    if cls is not None:
        E[cls == ZERO] = _ZERO_E
    return Unpacked(sign, sig, E, cls, W)


def _unpack_int(codes: np.ndarray, fmt: IntFormat, W: int, udt: type) -> Unpacked:
    c = codes.astype(np.uint64, copy=False)
    if fmt.signed:
        neg = (c >> np.uint64(fmt.bits - 1)).astype(bool)
        mag = np.where(neg, (~c + np.uint64(1)) & np.uint64((1 << fmt.bits) - 1) if fmt.bits < 64
                       else ~c + np.uint64(1), c)
    else:
        neg = np.zeros(c.shape, bool)
        mag = c
    zero = mag == 0
    sig, E = _normalise(np.where(zero, np.uint64(1), mag), W, udt) if W == 64 else _normalise(
        np.where(zero, 1, mag).astype(udt), W, udt)
    cls = None
    if zero.any():
        cls = np.where(zero, ZERO, FINITE).astype(np.uint8)
        E[zero] = _ZERO_E
        sig[zero] = 0
    return Unpacked(neg, sig, E.astype(np.int32), cls, W)


# ---------------------------------------------------------------------------------------
def _shift_out(sig: np.ndarray, s, W: int, udt: type):
    """Split sig into kept = sig >> s and the discarded bits as a W-bit fraction.

    Returns (kept, frac, lost): frac holds the discarded bits left-aligned (its top bit is
    the guard bit), lost is True where nonzero bits fell off even the fraction (s >= 2W).
    s may be a scalar or an int array; any value (negative only for integer overflow).
    """
    if np.isscalar(s):
        s = int(s)
        if 1 <= s <= W - 1:
            return sig >> udt(s), sig << udt(W - s), False
        if s <= 0:
            return sig, np.zeros_like(sig), False
        s = np.full(sig.shape, s, np.int32)
    sc = np.clip(s, 1, W - 1).astype(udt)
    kept = sig >> sc
    frac = sig << (udt(W) - sc)
    wide = s >= W
    lost: np.ndarray | bool = False
    if wide.any():
        kept[wide] = 0
        d = s[wide] - W
        frac[wide] = np.where(d < W, sig[wide] >> np.minimum(d, W - 1).astype(udt), 0)
        lost = np.zeros(sig.shape, bool)
        lost[wide] = d >= W
    low = s <= 0
    if low.any():
        kept[low] = sig[low]
        frac[low] = 0
    return kept, frac, lost


def _increment(mode: Rounding, sign, kept, frac, lost, W: int, udt: type, rand, sr_bits):
    """Steps 5-6: the rounding decision. Returns (kept after rounding, inexact mask)."""
    half = udt(1 << (W - 1))
    if mode is Rounding.NEAREST_EVEN:
        g = frac >= half
        st = (frac & udt((1 << (W - 1)) - 1)) != 0
        if lost is not False:
            st |= lost
        inc = g & (st | (kept & udt(1)).astype(bool))
    elif mode is Rounding.NEAREST_AWAY:
        inc = frac >= half
    elif mode is Rounding.TOWARD_ZERO:
        inc = None
    elif mode in (Rounding.UP, Rounding.DOWN, Rounding.TO_ODD):
        nz = frac != 0
        if lost is not False:
            nz |= lost
        if mode is Rounding.TO_ODD:
            return kept | nz.astype(udt), nz
        inc = nz & (~sign if mode is Rounding.UP else sign)
    else:  # STOCHASTIC: the top sr_bits of the discarded part plus the random bits, carry out
        r = sr_bits
        top = frac >> udt(W - r)
        inc = rand.astype(udt, copy=False) > (udt((1 << r) - 1) - top)
    if inc is not None:
        kept = kept + inc.astype(udt)
    return kept, None


def round_pack(u: Unpacked, dst: AnyFormat, pol: Policy, rand: np.ndarray | None = None,
               want_flags: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Exact triple -> destination codes (uint8/16/32/64), and per-element Flags if asked."""
    if dst.is_integer:
        return _round_pack_int(u, dst, pol, rand, want_flags)
    assert isinstance(dst, Format)
    W = u.W
    udt = np.uint32 if W == 32 else np.uint64
    p, m, emin = dst.precision, dst.man_bits, dst.emin
    sign, sig, E = u.sign, u.sig, u.E
    # steps 1-3: destination exponent, clamped at emin where the format has subnormals
    lo, hi = (int(E.min()), int(E.max())) if E.size else (emin, emin)
    if u.cls is not None:
        fin = u.cls == FINITE
        lo = int(E[fin].min()) if fin.any() else emin
    sub_possible = dst.has_subnormals and lo < emin
    if sub_possible:
        e_d = np.maximum(E, np.int32(emin))
        s = np.int32(W - p) + (e_d - E)
    else:
        e_d = E
        s = W - p
    # step 4: shift right keeping the discarded bits; steps 5-6: increment
    kept, frac, lost = _shift_out(sig, s, W, udt)
    kept, odd_nz = _increment(pol.rounding, sign, kept, frac, lost, W, udt, rand, pol.sr_bits)
    # step 7: pack magnitude; the carry out of the significand moves into the exponent field
    eb = e_d - np.int32(emin)
    top_e = (dst.mag_mask >> m) + 1
    if hi - emin > top_e:
        eb = np.minimum(eb, top_e)
    if not dst.has_subnormals:
        eb = np.maximum(eb, 0)  # values below the smallest (zero-less format) are fixed up below
        mag = (eb.astype(udt) << udt(m)) + kept - udt(1 << m)
    else:
        mag = (eb.astype(udt) << udt(m)) + kept
    flags = np.zeros(sig.shape, np.uint8) if want_flags else None
    if want_flags:
        nz = odd_nz if odd_nz is not None else ((frac != 0) | lost)
        flags |= np.where(nz, np.uint8(Flags.INEXACT), np.uint8(0))
        flags |= np.where((E < emin) & nz, np.uint8(Flags.UNDERFLOW), np.uint8(0))
    finite = None if u.cls is None else (u.cls == FINITE)
    nan_out = None if u.cls is None else (u.cls == NAN)
    # step 8: overflow, decided after rounding with an unbounded exponent
    ovf = mag > udt(dst.max_mag_code)
    if finite is not None:
        ovf &= finite
    if ovf.any():
        to_max = _overflow_to_max(pol, sign[ovf])
        mag[ovf] = np.where(to_max, udt(dst.max_mag_code), udt(_inf_mag(dst) if dst.has_inf else 0))
        if pol.overflow is Overflow.NAN:
            nan_out = _set(nan_out, ovf, ~to_max)
        if want_flags:
            flags[ovf] |= np.uint8(Flags.OVERFLOW | Flags.INEXACT)
    # step 9: underflow: zero-less formats clamp to the smallest value; ftz flushes subnormals
    if not dst.has_subnormals and lo < emin:
        under = E < emin if finite is None else (E < emin) & finite
        mag[under] = 0
        if want_flags:
            flags[under] |= np.uint8(Flags.UNDERFLOW | Flags.INEXACT)
    if pol.ftz and sub_possible:
        flush = (mag < udt(1 << m)) & (mag != 0)
        if finite is not None:
            flush &= finite
        mag[flush] = 0
        if want_flags:
            flags[flush] |= np.uint8(Flags.UNDERFLOW | Flags.INEXACT)
    # step 10: specials of the source: zeros, infinities (NaNs are written in step 12)
    if u.cls is not None:
        mag[u.cls == ZERO] = 0
        infm = u.cls == INF
        if infm.any():
            if pol.overflow is Overflow.IEEE:
                mag[infm] = _inf_mag(dst)
            elif pol.overflow is Overflow.SATURATE:
                mag[infm] = dst.max_mag_code
            else:
                nan_out |= infm
    # step 11: sign; formats without -0 give +0; unsigned formats reject negatives (and zero-less ones zero)
    if dst.signed:
        s_bit = sign if dst.has_negative_zero else sign & (mag != 0)
        code = mag | (s_bit.astype(udt) << udt(dst.bits - 1))
    else:
        code = mag
        bad = sign if u.cls is None else sign & (u.cls != ZERO)
        if not dst.has_zero and u.cls is not None:
            bad = bad | (u.cls == ZERO)
        if np.any(bad):
            nan_out = _set(nan_out, bad, True)
            if want_flags:
                flags[bad] |= np.uint8(Flags.INVALID)
    # step 12: NaN results: the canonical NaN, or the nan_to policy where the format has none
    if nan_out is not None and nan_out.any():
        code[nan_out] = _invalid_code(dst, pol)
        if want_flags and not dst.has_nan:
            flags[nan_out] |= np.uint8(Flags.INVALID)
    return code.astype(np.dtype(dst.code_dtype), copy=False), flags


def _set(mask: np.ndarray | None, where: np.ndarray, value) -> np.ndarray:
    """mask[where] = value, creating an all-False mask first when there is none."""
    if mask is None:
        mask = np.zeros(where.shape, bool)
    mask[where] = value
    return mask


def _overflow_to_max(pol: Policy, sign: np.ndarray) -> np.ndarray:
    """True where an overflow gives +-max finite (else +-inf or NaN), by policy and mode."""
    mode = pol.rounding
    if pol.overflow is Overflow.SATURATE or mode in (Rounding.TOWARD_ZERO, Rounding.TO_ODD):
        return np.ones(sign.shape, bool)
    if mode is Rounding.UP:
        return sign.copy()
    if mode is Rounding.DOWN:
        return ~sign
    return np.zeros(sign.shape, bool)


def canonical_nan(dst: Format) -> int:
    """The NaN code numoracle produces: positive, quiet (top mantissa bit set)."""
    if dst.nan == "ieee":
        return (((1 << dst.exp_bits) - 1) << dst.man_bits) | (1 << (dst.man_bits - 1))
    if dst.nan == "fn":
        return dst.mag_mask
    return dst.sign_bit  # fnuz


def _inf_mag(dst: Format) -> int:
    return ((1 << dst.exp_bits) - 1) << dst.man_bits if dst.nan == "ieee" else dst.mag_mask


def _invalid_code(dst: Format, pol: Policy) -> int:
    """Code of a NaN result: the canonical NaN, or by nan_to where the format has no NaN."""
    if dst.has_nan:
        return canonical_nan(dst)
    if pol.nan_to is NanTo.RAISE:
        raise ValueError(f"NaN has no representation in {dst.name} and nan_to='raise'; "
                         "pass nan_to='max', 'zero' or 'min', or remove the NaNs")
    if pol.nan_to is NanTo.ZERO:
        return 0
    if pol.nan_to is NanTo.MIN:
        return dst.max_mag_code | dst.sign_bit
    return dst.max_mag_code


# ---------------------------------------------------------------------------------------
def _round_pack_int(u: Unpacked, dst: IntFormat, pol: Policy, rand, want_flags: bool):
    W = u.W
    udt = np.uint32 if W == 32 else np.uint64
    sign, sig, E = u.sign, u.sig, u.E
    b = dst.bits
    s = np.int32(W - 1) - E  # value = sig >> s
    big = s < 0  # |x| >= 2^W: out of every W-bit range
    kept, frac, lost = _shift_out(sig, s, W, udt)
    kept, odd_nz = _increment(pol.rounding, sign, kept, frac, lost, W, udt, rand, pol.sr_bits)
    pos_max = udt(dst.max_value)
    neg_max = udt(-dst.min_value) if dst.signed else udt(0)
    over = big | np.where(sign, kept > neg_max, kept > pos_max)
    if u.cls is not None:
        over &= u.cls == FINITE
    mask = udt((1 << b) - 1) if b < W else udt((1 << W) - 1)
    code = np.where(sign, (~kept + udt(1)) & mask, kept & mask)
    flags = None
    if want_flags:
        nz = odd_nz if odd_nz is not None else ((frac != 0) | lost)
        flags = np.where(nz, np.uint8(Flags.INEXACT), np.uint8(0))
    if over.any():
        if pol.overflow is Overflow.WRAP:
            # the low bits of the rounded integer; for |x| >= 2^W they come straight from sig
            bi = big & (u.cls == FINITE if u.cls is not None else True)
            if np.any(bi):
                sh = (E[bi] - (W - 1)).astype(np.int64)
                low = np.where(sh < W, sig[bi] << np.minimum(sh, W - 1).astype(udt), udt(0)) & mask
                code[bi] = np.where(sign[bi], (~low + udt(1)) & mask, low)
        else:
            code[over] = np.where(sign[over], udt(dst.min_value & ((1 << b) - 1)), pos_max)
        if want_flags:
            flags[over] |= np.uint8(Flags.OVERFLOW)
    if u.cls is not None:
        code[u.cls == ZERO] = 0
        bad = (u.cls == NAN) | ((u.cls == INF) & (pol.overflow is Overflow.WRAP))
        infm = (u.cls == INF) & (pol.overflow is not Overflow.WRAP)
        if infm.any():
            code[infm] = np.where(sign[infm], udt(dst.min_value & ((1 << b) - 1)), pos_max)
        if bad.any():
            nt = pol.nan_to
            if nt is NanTo.RAISE:
                raise ValueError(f"NaN has no representation in {dst.name} and nan_to='raise'; "
                                 "pass nan_to='zero', 'max' or 'min', or remove the NaNs")
            val = {NanTo.ZERO: 0, NanTo.MAX: dst.max_value, NanTo.MIN: dst.min_value}[nt]
            code[bad] = val & ((1 << b) - 1)
        if want_flags:
            flags[bad | infm] = np.uint8(Flags.INVALID)
    return code.astype(np.dtype(dst.code_dtype), copy=False), flags
