"""The rounding engine: ``unpack`` (codes -> exact triple) and ``round_pack`` (triple -> codes).

Every conversion is defined by these two functions (fastpaths.py's lanes are tested bit-identical). The triple is

    value = (-1)^sign * sig * 2^(E - (W-1))

with ``sig`` a W-bit unsigned integer whose top bit is set (W = 32 when both
formats fit, else 64) and ``E = floor(log2 |value|)``. Every source format up to
FP64 and INT64/UINT64 fits exactly. Zeros, infinities and NaNs are listed sparsely (``spec_idx``,
``spec_cls``) and fixed up at the end: the common case is a few dozen whole-chunk integer operations.
The steps of ``round_pack`` are numbered as in docs/semantics.md.
"""

from __future__ import annotations

import numpy as np

from ..formats.format import AnyFormat, Format, IntFormat
from ..formats.policy import Flags, NanTo, Overflow, Policy, Rounding, Tininess
from .bits import assign, bit_length, blend
from .specialize import _invalid_code, _overflow, _overflow_to_max, _special_codes, canonical_nan
from .unpacked import FINITE, INF, NAN, SNAN, ZERO, Unpacked

__all__ = ["Unpacked", "unpack", "round_pack", "word_bits", "bit_length", "canonical_nan",
           "ZERO", "FINITE", "INF", "NAN", "SNAN"]



def word_bits(src: AnyFormat, dst: AnyFormat, sr_bits: int | None = None) -> int:
    """32 when the source significand and the destination precision fit a uint32, else 64.

    Stochastic rounding with more than 30 random bits also takes 64-bit words (the fold of
    very deep shifts in ``_shift_out`` keeps 30 exact fraction bits in a 32-bit word).
    """
    fits = src.precision <= 32 and dst.precision <= 32 and src.bits <= 32
    return 32 if fits and (sr_bits is None or sr_bits <= 30) else 64


def _normalise(mag: np.ndarray, W: int, udt: type) -> tuple[np.ndarray, np.ndarray]:
    """(sig with top bit set, floor(log2)) of nonzero unsigned integers."""
    nb = bit_length(mag)
    return mag.astype(udt) << (W - nb).astype(udt), nb - 1


# ---- unpack ---------------------------------------------------------------------------
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
    # the shift puts the mantissa under the top bit and the exponent's low bit on it (the bits above
    # fall off the word); OR-ing the top bit makes it the implicit one
    sig = (c << udt(W - 1 - m)) | udt(1 << (W - 1))
    E = (ef - udt(fmt.bias & ((1 << W) - 1))).view(np.int32 if W == 32 else np.int64).astype(np.int32, copy=False)
    # rare elements: exponent field all zeros (zero/subnormal) or all ones (inf/NaN/FN top binade)
    maybe = (ef - udt(1)) >= udt(top - 1) if top > 1 else np.ones(c.shape, bool)
    if fmt.nan == "fnuz":
        maybe |= c == udt(fmt.sign_bit)
    idx = np.flatnonzero(maybe)
    e_i, mag_i, c_i = ef.ravel()[idx], mag.ravel()[idx], c.ravel()[idx]
    m_i = mag_i & udt((1 << m) - 1)
    k = np.full(idx.size, FINITE, np.uint8)
    if fmt.has_subnormals:
        low = e_i == 0
        k[low & (m_i == 0)] = ZERO
        sub = low & (m_i != 0)
        if daz:
            k[sub] = ZERO
        elif sub.any():
            s_sig, s_e = _normalise(m_i[sub], W, udt)
            sig.ravel()[idx[sub]] = s_sig
            E.ravel()[idx[sub]] = s_e + np.int32(1 - fmt.bias - m)
    if fmt.nan == "ieee":
        hi = e_i == top
        k[hi] = np.where(m_i[hi] == 0, INF, NAN)
        k[hi & (m_i != 0) & ((m_i & udt(fmt.quiet_bit)) == 0)] = SNAN if fmt.quiet_bit else NAN
    elif fmt.nan == "fn":
        k[mag_i == fmt.mag_mask] = NAN
    elif fmt.nan == "fnuz":
        k[c_i == fmt.sign_bit] = NAN
        if fmt.has_inf:
            k[mag_i == fmt.mag_mask] = INF
    spec = k != FINITE
    return _with_specials(sign, sig, E, idx[spec], k[spec], W)


def _with_specials(sign, sig, E, spec_idx, spec_cls, W: int) -> Unpacked:
    sig.ravel()[spec_idx] = 0
    E.ravel()[spec_idx] = 0
    return Unpacked(sign, sig, E, spec_idx, spec_cls, W)


def _unpack_int(codes: np.ndarray, fmt: IntFormat, W: int, udt: type) -> Unpacked:
    c = codes.astype(np.uint64, copy=False)
    if fmt.signed:
        neg = (c >> np.uint64(fmt.bits - 1)).astype(bool)
        two = ~c + np.uint64(1)
        if fmt.bits < 64:
            two &= np.uint64((1 << fmt.bits) - 1)
        mag = np.where(neg, two, c)
    else:
        neg = np.zeros(c.shape, bool)
        mag = c.copy()  # the zeros are patched below: never write into the caller's array
    zero_idx = np.flatnonzero(mag == 0)
    mag.ravel()[zero_idx] = 1
    sig, E = _normalise(mag, W, udt)
    return _with_specials(neg, sig, E, zero_idx, np.full(zero_idx.size, ZERO, np.uint8), W)


# ---- shifting and the rounding decision (steps 4-6) -----------------------------------
def _shift_out(sig: np.ndarray, s, W: int, udt: type, may_be_flat: bool = False):
    """Split sig into kept = sig >> s and the discarded bits as a W-bit fraction.

    Returns (kept, frac): frac holds the discarded bits left-aligned, so its top bit is the
    guard bit and the rest is the sticky part (exact: no discarded bit is lost). ``s`` is a
    scalar or an int array (values <= 0 only for integer destinations, which say ``may_be_flat``:
    nothing is discarded there).
    Shifts of W or more are folded into the significand so every numpy shift stays below the
    word width: with d = s - (W-1) > 0 the significand becomes (sig >> d) | sticky(low d bits)
    and s becomes W-1; guard and sticky are unchanged, and so is every rounding decision
    (stochastic rounding reads at most the top 32 bits of a fraction whose top d bits are 0).
    """
    if np.isscalar(s):
        s = int(s)
        if s <= 0:
            return sig, np.zeros_like(sig)
        if s < W:
            return sig >> udt(s), sig << udt(W - s)
        s = np.full(sig.shape, s, np.int32)
    deep_m = s > W - 1
    n_deep = np.count_nonzero(deep_m)
    if n_deep:
        if n_deep * 8 < s.size:  # few: fold just those
            deep = np.flatnonzero(deep_m)
            s = s.copy()
            d = np.minimum(s.ravel()[deep] - (W - 1), W - 1).astype(udt)
            sd = sig.ravel()[deep]
            sig = sig.copy()
            sig.ravel()[deep] = (sd >> d) | ((sd & ((udt(1) << d) - udt(1))) != 0).astype(udt)
            s.ravel()[deep] = W - 1
        else:
            d = np.minimum(np.maximum(s - np.int32(W - 1), 0), W - 1).astype(udt)
            sig = (sig >> d) | ((sig & ((udt(1) << d) - udt(1))) != 0).astype(udt)
            s = np.minimum(s, np.int32(W - 1))
    if not may_be_flat:
        su = s.astype(udt)
        return sig >> su, sig << (udt(W) - su)
    flat = s <= 0
    if flat.any():  # integer destinations near the top of the word: nothing is discarded
        s = np.maximum(s, 1)
        su = s.astype(udt)
        kept = np.where(flat, sig, sig >> su)
        return kept, np.where(flat, udt(0), sig << (udt(W) - su))
    su = s.astype(udt)
    return sig >> su, sig << (udt(W) - su)


def _increment(mode: Rounding, sign, kept, frac, W: int, udt: type, rand, sr_bits):
    """Steps 5-6: the rounding decision from (mode, sign, lsb, guard, sticky). Returns kept."""
    half = udt(1 << (W - 1))
    if mode is Rounding.NEAREST_EVEN:
        # frac's lowest bit is always 0 (s <= W-1), so frac + lsb cannot wrap:
        # frac + lsb > half  <=>  guard and (sticky or lsb)
        inc = (frac + (kept & udt(1))) > half
    elif mode is Rounding.NEAREST_AWAY:
        inc = frac >= half
    elif mode is Rounding.TOWARD_ZERO:
        return kept
    elif mode is Rounding.TO_ODD:
        return kept | (frac != 0).astype(udt)
    elif mode is Rounding.UP:
        inc = (frac != 0) & ~sign
    elif mode is Rounding.DOWN:
        inc = (frac != 0) & sign
    else:  # STOCHASTIC: the top sr_bits of the discarded part plus the random bits, carry out
        # top + rand < 2^(r+1) fits the word (r <= 30 for W = 32, see word_bits): its bit r is the carry
        return kept + (((frac >> udt(W - sr_bits)) + rand.astype(udt, copy=False)) >> udt(sr_bits))
    return kept + inc.astype(udt)


# ---- round_pack ------------------------------------------------------------------------
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
    # steps 1-3: the destination exponent, clamped at emin where the format has subnormals
    lo, hi = (int(E.min()), int(E.max())) if E.size else (0, 0)
    sub = dst.has_subnormals and lo < emin
    # few subnormal results (judged on a sample first): round the rest with one scalar shift
    if sub and E.size >= 64 and np.count_nonzero(E[::16] < emin) * 8 < E[::16].size:
        tiny = E < emin
        tiny.ravel()[u.spec_idx] = False  # specials carry E = 0, below emin where emin > 0: step 12 codes them
        if 0 < np.count_nonzero(tiny) * 8 < E.size:
            return _split_tiny(u, dst, pol, rand, want_flags, np.flatnonzero(tiny))
    e_d = np.maximum(E, np.int32(emin)) if sub else E
    s = np.int32(W - p) + (e_d - E) if sub else W - p
    # step 4: shift right keeping the discarded bits; steps 5-6: the increment
    kept, frac = _shift_out(sig, s, W, udt)
    kept = _increment(pol.rounding, sign, kept, frac, W, udt, rand, pol.sr_bits)
    # step 7: pack the magnitude; a carry out of the significand moves into the exponent field
    eb = e_d - np.int32(emin)
    top_e = (dst.mag_mask >> m) + 1
    if hi - emin > top_e:
        eb = np.minimum(eb, np.int32(top_e))
    if dst.has_subnormals:
        mag = (eb.astype(udt) << udt(m)) + kept
    else:  # no subnormal binade: the exponent field of the smallest value is 0
        if lo < emin:
            eb = np.maximum(eb, np.int32(0))
        mag = (eb.astype(udt) << udt(m)) + kept - udt(1 << m)
    flags = None
    if want_flags:
        nz = frac != 0
        flags = nz.astype(np.uint8) * np.uint8(Flags.INEXACT)
        tiny = _tiny_after(u, dst, pol) if pol.tininess is Tininess.AFTER and sub else E < emin
        flags |= (tiny & nz).astype(np.uint8) * np.uint8(Flags.UNDERFLOW)
    nan_out = None
    max_mag = udt(dst.max_mag_code)
    overflowed = False
    # ftz (step 9) flushes results that are subnormal as rounded, before step 8 clamps an overflow to a max
    # finite that may itself be subnormal (exp_bits=1 formats): that stays, as in exact.round_value
    flush = (mag < udt(1 << m)) & (mag != 0) if pol.ftz and sub else None
    # step 8: overflow, decided after rounding with an unbounded exponent
    if hi >= dst.emax:
        to_max = _overflow_to_max(pol, sign)
        if not want_flags and isinstance(to_max, bool) and (to_max or dst.nan != "fnuz"):
            # the clamp of _overflow, without first finding which elements overflowed
            mag = np.minimum(mag, udt(dst.max_mag_code + (0 if to_max else 1)))
            overflowed = True
        else:
            ovf = mag > max_mag
            if want_flags:
                flags |= ovf.astype(np.uint8) * np.uint8(Flags.OVERFLOW | Flags.INEXACT)
            if ovf.any():
                overflowed = True
                mag, nan_out = _overflow(dst, pol, mag, ovf, sign, udt)
    # step 9: underflow: a zero-less format gives its smallest value; ftz flushes subnormal results
    if not dst.has_subnormals and lo < emin:
        under = E < emin
        mag = assign(mag, under, 0)
        if want_flags:
            flags |= under.astype(np.uint8) * np.uint8(Flags.UNDERFLOW | Flags.INEXACT)
    if flush is not None:
        mag = assign(mag, flush, 0)
        if want_flags:
            flags |= flush.astype(np.uint8) * np.uint8(Flags.UNDERFLOW | Flags.INEXACT)
    # step 10: the sign. Formats without -0 give +0; the FN NaN is written positive;
    # unsigned formats have no negative values (NaN, or nan_to where there is no NaN)
    if dst.signed:
        s_bit = sign if dst.has_negative_zero else sign & (mag != 0)
        if dst.nan == "fn" and overflowed:  # only an overflow makes the FN NaN here: keep it positive
            s_bit = s_bit & (mag != udt(dst.mag_mask))
        code = mag | (s_bit.astype(udt) << udt(dst.bits - 1))
    else:
        code = mag
        if sign.any():
            nan_out = sign if nan_out is None else nan_out | sign
            if want_flags:  # nothing was rounded: the value has no representation at all
                flags = blend(flags, np.uint8(Flags.INVALID), sign)
    # step 11: NaN results: the canonical NaN, or the nan_to policy where the format has none
    if nan_out is not None and nan_out.any():
        code = assign(code, nan_out, _invalid_code(dst, pol))
    # step 12: the source's zeros, infinities and NaNs
    if u.spec_idx.size:
        c_s, f_s = _special_codes(u, dst, pol)
        code.ravel()[u.spec_idx] = c_s
        if want_flags:
            flags.ravel()[u.spec_idx] = f_s
    return code.astype(np.dtype(dst.code_dtype), copy=False), flags


def _tiny_after(u: Unpacked, dst: Format, pol: Policy) -> np.ndarray:
    """IEEE 754-2019 §7.5 tiny after rounding (to p bits, unbounded exponent): only E = emin - 1 can
    reach 2^emin; those are rounded to p bits (steps 4-6) and stay tiny unless the significand carries."""
    W, p, emin, tiny = u.W, dst.precision, dst.emin, u.E < dst.emin
    udt = np.uint32 if W == 32 else np.uint64
    edge = np.flatnonzero(u.E == emin - 1)
    if edge.size:
        kept, frac = _shift_out(u.sig.ravel()[edge], W - p, W, udt)
        kept = _increment(pol.rounding, u.sign.ravel()[edge], kept, frac, W, udt, None, None)
        tiny.ravel()[edge] = (kept >> udt(p)) == 0
    return tiny


def _split_tiny(u: Unpacked, dst: Format, pol: Policy, rand, want_flags: bool, tiny: np.ndarray):
    """round_pack of a chunk whose few elements below emin are done apart (same steps, both parts)."""
    flat = lambda a: a.ravel()[tiny]  # noqa: E731
    part = Unpacked(flat(u.sign), flat(u.sig), flat(u.E), np.zeros(0, np.intp), np.zeros(0, np.uint8), u.W)
    u.sig.ravel()[tiny] = 0  # the triple is round_pack's alone (unpack made it): no copy needed
    u.E.ravel()[tiny] = max(0, dst.emin)  # at or above emin, so the main part has no tiny element left
    main = u
    code, flags = round_pack(main, dst, pol, rand, want_flags)
    c_t, f_t = round_pack(part, dst, pol, None if rand is None else flat(rand), want_flags)
    code.ravel()[tiny] = c_t
    if want_flags:
        flags.ravel()[tiny] = f_t
    return code, flags


# ---- integers --------------------------------------------------------------------------
def _round_pack_int(u: Unpacked, dst: IntFormat, pol: Policy, rand, want_flags: bool):
    W = u.W
    udt = np.uint32 if W == 32 else np.uint64
    sign, sig, E = u.sign, u.sig, u.E
    b = dst.bits
    mask = udt((1 << b) - 1)
    # steps 1-6: the quantum is 1; |x| >= 2^W is out of every W-bit range ("big")
    s = np.int32(W - 1) - E
    big = (E > W - 1) if int(E.max(initial=0)) > W - 1 else None
    kept, frac = _shift_out(sig, s, W, udt, may_be_flat=True)
    kept = _increment(pol.rounding, sign, kept, frac, W, udt, rand, pol.sr_bits)
    # step 7: two's complement
    code = blend(kept, ~kept + udt(1), sign) & mask
    # step 8: overflow
    over = ((kept > udt(dst.max_value)) & ~sign) | ((kept > udt(-dst.min_value)) & sign)
    if big is not None:
        over |= big
    flags = None
    if want_flags:  # IEEE 754-2019 §5.8: out of range is invalid (not overflow, not inexact)
        flags = ((frac != 0) & ~over).astype(np.uint8) * np.uint8(Flags.INEXACT)
        flags |= over.astype(np.uint8) * np.uint8(Flags.INVALID)
    if over.any():
        if pol.overflow is Overflow.WRAP:
            if big is not None and big.any():  # the low bits of a huge integer come from sig
                bi = np.flatnonzero(big)
                sh = (E.ravel()[bi] - (W - 1)).astype(np.int64)
                sg = sig.ravel()[bi]
                low = np.where(sh < W, sg << np.minimum(sh, W - 1).astype(udt), udt(0)) & mask
                code.ravel()[bi] = np.where(sign.ravel()[bi], (~low + udt(1)) & mask, low)
        else:
            code = blend(code, udt(dst.max_value), over & ~sign)
            code = blend(code, udt(dst.min_value & ((1 << b) - 1)), over & sign)
    # step 12: zeros, infinities, NaNs
    if u.spec_idx.size:
        cls, neg = u.spec_cls, sign.ravel()[u.spec_idx]
        cls = np.where(cls == SNAN, np.uint8(NAN), cls)
        c_s = np.zeros(cls.size, np.uint64)
        inf = (cls == INF) & (pol.overflow is not Overflow.WRAP)
        c_s[inf & ~neg] = dst.max_value
        c_s[inf & neg] = dst.min_value & ((1 << b) - 1)
        bad = (cls == NAN) | ((cls == INF) & ~inf)
        if bad.any():
            if pol.nan_to is NanTo.RAISE:
                raise ValueError(f"NaN has no representation in {dst.name} and nan_to='raise'; "
                                 "pass nan_to='zero', 'max' or 'min', or remove the NaNs")
            val = {NanTo.ZERO: 0, NanTo.MAX: dst.max_value, NanTo.MIN: dst.min_value}[pol.nan_to]
            c_s[bad] = val & ((1 << b) - 1)
        code.ravel()[u.spec_idx] = c_s
        if want_flags:
            flags.ravel()[u.spec_idx] = np.where(bad | inf, np.uint8(Flags.INVALID), np.uint8(0))
    return code.astype(np.dtype(dst.code_dtype), copy=False), flags
