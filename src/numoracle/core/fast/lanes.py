"""Specialised exact paths for the hottest casts: FP32 -> BF16/FP16/E4M3FN/E5M2/FP6/FP4, BF16/FP16 -> FP32.

Each path is a few whole-chunk integer operations on uint32 words (no ``np.where``: decisions are
arithmetic), for the *regular* elements of a chunk: finite values whose result is normal (or, for
BF16, anything the plain bit shift rounds exactly). The other elements are listed and converted at
the end: signed zeros and NaNs directly, results below the destination's smallest normal by a
variable shift (``_Narrow._tiny``, where no flags apply), and everything else -- infinities, the
inputs that daz/flags make special -- by the generic engine (``softfloat.unpack`` / ``round_pack``).
A chunk with many results below the smallest normal (random bit patterns) takes the wide lane of
``fastwide.py`` instead (zeros, subnormal, normal and overflowing results in one pass); a chunk
mostly outside both goes to the engine whole. The lanes compute the engine's (mode, sign, guard,
sticky) decision on the same bits, in the same steps (docs/semantics.md);
``tests/core/test_fastpaths.py`` checks codes and flags against the engine over every 16-bit
source, every 16-bit pattern in FP32 positions and the boundary sets of the 32-bit ones.

The trick (as in ml_dtypes' float -> bfloat16): an FP32 code read as an unsigned integer is
``exponent_field * 2^23 + mantissa``; for a normal value whose result is normal in a destination
with m mantissa bits, the destination's code is that integer with the exponent re-biased and the low
``s = 23 - m`` bits rounded away. A carry out of the kept mantissa runs into the exponent field,
which is exactly the next binade (and max + 1 ulp is the infinity's code in IEEE formats).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .. import jit
from ..engine.specialize import _invalid_code
from ..formats.format import (
    BF16,
    FP4_E2M1FN,
    FP6_E2M3FN,
    FP6_E3M2FN,
    FP8_E4M3FN,
    FP8_E5M2,
    FP16,
    FP32,
    FP64,
    AnyFormat,
    Format,
)
from ..formats.policy import Flags, Overflow, Policy, Rounding, Tininess
from .widelane import round_wide, wide_sr_ok
from .wordround import round_word

__all__ = ["FAST_CHUNK", "CastStep", "select_fast_path"]

FAST_CHUNK = 1 << 16  # elements per pass: the few uint32 temporaries (256 KiB each) stay in L2 (measured: 2^14-2^16)

# generic(codes, rand) -> (codes, flags or None): the engine on a subset of the elements
Generic = Callable[[np.ndarray, "np.ndarray | None"], "tuple[np.ndarray, np.ndarray | None]"]
# rand_check(chunk): raises where random bits given to cast() lie outside [0, 2^sr_bits)
RandCheck = Callable[[np.ndarray], None]
# run(flat codes, random bits or None, want_flags, generic, rand_check or None) -> (codes, flags or None)
FastPath = Callable[..., "tuple[np.ndarray, np.ndarray | None]"]

_NARROW = (BF16, FP16, FP8_E4M3FN, FP8_E5M2, FP6_E3M2FN, FP6_E2M3FN, FP4_E2M1FN)
_WIDEN = (BF16, FP16)
_OVF_FLAGS = np.uint8(Flags.OVERFLOW | Flags.INEXACT)
_DENSE = 4  # a chunk with more than 1/_DENSE of its elements outside the lane goes to the engine whole
_NONE = np.zeros(0, np.intp)
_WIDE = 32  # ... or, with more than 1/_WIDE outside the normal lane, to the wide lane where it applies


class CastStep(NamedTuple):
    """One cast as the compiled backend's step (core/jit.py's kernel_for; core/kernels/cast.py covers it)."""

    src: AnyFormat
    dst: AnyFormat
    pol: Policy


def _cast_kernels():
    from ..kernels import cast
    return cast


def _odd_kernels():
    from ..kernels import castodd
    return castodd


def select_fast_path(src: AnyFormat, dst: AnyFormat, pol: Policy) -> FastPath | None:
    """The specialised path of (src, dst, policy), or None where only the generic engine applies: the compiled
    kernel (core/kernels/cast.py) where jit.kernel_for picks it, else a numpy lane below."""
    step = CastStep(src, dst, pol)
    kern = (jit.kernel_for(step, _odd_kernels) if src == FP64 else None) or jit.kernel_for(step, _cast_kernels)
    if kern is not None:
        def compiled(flat, rand, want_flags, generic, rand_check=None):
            return kern.run(step, flat, want_flags, rand, rand_check)   # (the random bits' range: in its loop)
        return compiled
    if src == FP32 and dst in _NARROW:
        return _Narrow(dst, pol).run
    if src in _WIDEN and dst == FP32:
        return _Widen(src, pol).run
    return None


# ---- FP32 -> BF16 / FP16 / E4M3FN / E5M2 -------------------------------------------------------------
class _Narrow:
    """FP32 -> a narrower float with the IEEE or FN encoding, or none (FP6, FP4: saturating; a NaN gives the nan_to
    value), every rounding mode and policy."""

    def __init__(self, dst: Format, pol: Policy) -> None:
        self.dst, self.pol = dst, pol
        self.s = 23 - dst.man_bits  # bits rounded away
        self.mask = (1 << self.s) - 1
        self.rebias = (127 - dst.bias) << 23  # 0 for BF16: same exponent range as FP32
        # BF16 under IEEE overflow needs no clamp (see _round), so it rounds the signed word directly
        self.direct = self.rebias == 0 and pol.overflow is Overflow.IEEE
        self.max_mag = dst.max_mag_code
        self.over = dst.max_mag_code + 1  # IEEE: the infinity; FN: the NaN
        self.fn_nan = dst.nan == "fn" and self._limit_kind() != "max"
        # the wide lane (fastwide.py) for chunks with many results below the smallest normal (field e0)
        self.e0 = dst.emin + 127
        self.wide = self.e0 > 1 and wide_sr_ok(pol.sr_bits)

    def _limit_kind(self) -> str:
        """Where an overflow goes (softfloat._overflow_to_max): 'max', 'over', or per sign ('ru'/'rd')."""
        mode = self.pol.rounding
        if self.pol.overflow is Overflow.SATURATE or mode in (Rounding.TOWARD_ZERO, Rounding.TO_ODD):
            return "max"
        return {Rounding.UP: "ru", Rounding.DOWN: "rd"}.get(mode, "over")

    def _lane(self, want_flags: bool) -> tuple[int, int]:
        """[lo, hi): the magnitudes (FP32 code & 0x7FFFFFFF) the fast lane converts; the rest go to the engine.

        lo: the smallest FP32 magnitude whose result is normal (2^emin of the destination), or 0 for
        BF16's direct lane, where FP32 subnormals shift into BF16 subnormals with the same alignment
        (kept unless daz/ftz/flags make them special). hi: the infinity (NaN excluded always; the
        infinity itself is in the direct lane, where it passes through unchanged, unless flags are asked).
        """
        pol = self.pol
        if self.direct and not (pol.daz or pol.ftz or want_flags):
            return 0, 0x7F800001
        return (self.dst.emin + 127) << 23, 0x7F800000

    def run(self, flat: np.ndarray, rand: np.ndarray | None, want_flags: bool, generic: Generic,
            rand_check: RandCheck | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        n = flat.size
        u32 = flat.astype(np.uint32, copy=False)
        out = np.empty(n, np.dtype(self.dst.code_dtype))
        fl = np.empty(n, np.uint8) if want_flags else None
        c = min(FAST_CHUNK, max(n, 1))
        tmp = tuple(np.empty(c, np.uint32) for _ in range(4)) + (np.empty(c, bool),)
        rest = []
        for i0 in range(0, n, c):
            i1 = min(i0 + c, n)
            r = None if rand is None else rand[i0:i1]
            ri = None if r is None else r.astype(np.uint32, copy=False)
            fl_c = None if fl is None else fl[i0:i1]
            lane, out_c = self._lane_of(u32[i0:i1], ri, [x[:i1 - i0] for x in tmp], fl_c)
            if lane is None:  # mostly irregular (e.g. NaNs): the engine's chunk
                if rand_check is not None:
                    rand_check(r)
                out[i0:i1], f_ = generic(flat[i0:i1], r)
                if fl_c is not None:
                    fl_c[...] = f_
                continue
            if rand_check is not None:  # the random bits' range, now that they are in cache
                rand_check(r)
            out[i0:i1] = out_c
            if lane.size:
                rest.append(lane + i0)
        idx = np.concatenate(rest) if rest else np.zeros(0, np.intp)
        if idx.size:
            self._rest(flat, u32, idx, rand, out, fl, generic)
        return out, fl

    def _lane_of(self, u, r, tmp, fl) -> tuple[np.ndarray | None, np.ndarray | None]:
        """One chunk by the normal or the wide lane: (the indices of the elements left to _rest, the
        codes, garbage there), or (None, None) where the chunk is the engine's."""
        a, t, w, v, m = tmp
        k = u.size
        lo, hi = self._lane(fl is not None)
        # 1. the magnitude, and the elements outside the normal lane (unsigned wrap: one comparison)
        np.bitwise_and(u, np.uint32(0x7FFFFFFF), out=a)
        if lo:
            np.subtract(a, np.uint32(lo), out=w)
        np.greater_equal(w if lo else a, np.uint32(hi - lo), out=m)
        n_out = np.count_nonzero(m)
        if n_out * _WIDE > k and self.wide:  # many results below the smallest normal
            self._wide_out(a, w, m, fl is not None)
            n_out = np.count_nonzero(m)
            if n_out * _DENSE <= k:
                idx = np.flatnonzero(m)
                pol = self.pol
                round_wide(pol.rounding, pol.sr_bits, self.s, self.e0, a, u, t, w, v, m, r, fl, self.max_mag)
                return idx, self._finish(u, t, w, m, fl, pol.ftz)
        if n_out * _DENSE > k:
            return None, None
        idx = np.flatnonzero(m) if n_out else _NONE
        return idx, self._chunk(u, a, t, w, m, r, fl)

    def _wide_out(self, a, w, m, want_flags: bool) -> None:
        """m = the elements outside the wide lane: inf and NaN; under daz zeros and FP32 subnormals; with
        flags and tininess after rounding, the binade under 2^emin (whose tininess the engine decides)."""
        if self.pol.daz:
            np.subtract(a, np.uint32(0x00800000), out=w)
            np.greater_equal(w, np.uint32(0x7F000000), out=m)
        else:
            np.greater_equal(a, np.uint32(0x7F800000), out=m)
        if want_flags and self.pol.tininess is Tininess.AFTER:
            np.right_shift(a, np.uint32(23), out=w)
            m |= w == np.uint32(self.e0 - 1)

    def _chunk(self, u, a, t, w, m, r, fl) -> np.ndarray:
        """Steps 2-6 on one chunk; returns the codes (garbage outside the lane, overwritten later)."""
        mask = np.uint32(self.mask)
        # 2. the word to round: the signed code (direct lane) or the re-biased magnitude; in both the
        #    destination's code is the word's top bits, its exponent field already in place
        x = u if self.direct else a
        if self.rebias:
            np.subtract(a, np.uint32(self.rebias), out=a)
        if fl is not None:  # INEXACT: a discarded bit is set
            np.bitwise_and(x, mask, out=w)
            np.not_equal(w, 0, out=m)
            fl[...] = m.view(np.uint8)
        # 3. round: the increment of docs/semantics.md steps 5-6, added below the kept bits and shifted out
        self._round(x, u, t, w, m, r)
        return self._finish(u, t, w, m, fl, False)

    def _finish(self, u, t, w, m, fl, flush: bool) -> np.ndarray:
        """Steps 4-6 on the rounded magnitudes t (or, direct lane, signed codes) of one chunk."""
        # 4. overflow (decided after rounding, as the engine does): flags, then the clamp of step 8;
        #    ftz flushes the results that are subnormal as rounded (only the wide lane has them)
        if fl is not None:
            mag = t if not self.direct else np.bitwise_and(t, np.uint32(0x7FFF), out=w)
            np.greater(mag, np.uint32(self.max_mag), out=m)
            fl |= m.view(np.uint8) * _OVF_FLAGS
        if not self.direct:
            self._clamp(u, t, w)
            if flush:  # ftz: 0 < t < 2^m flushes, with UNDERFLOW | INEXACT
                if fl is not None:
                    np.subtract(t, np.uint32(1), out=w)
                    np.less(w, np.uint32((1 << self.dst.man_bits) - 1), out=m)
                    fl |= m.view(np.uint8) * np.uint8(Flags.UNDERFLOW | Flags.INEXACT)
                np.greater_equal(t, np.uint32(1 << self.dst.man_bits), out=m)
                np.multiply(t, m, out=t)
            # 5. the sign (step 10); an FN format's NaN from an overflow is written positive
            np.right_shift(u, np.uint32(32 - self.dst.bits), out=w)
            np.bitwise_and(w, np.uint32(self.dst.sign_bit), out=w)
            if self.fn_nan:
                np.not_equal(t, np.uint32(self.over), out=m)
                np.multiply(w, m, out=w)
            np.bitwise_or(t, w, out=t)
        # 6. the code, in the destination's container (the caller writes it out)
        return t

    def _round(self, x, u, t, w, m, r) -> None:
        """t = round(x / 2^s) by the mode, x's low s bits being the discarded fraction: the one rounding step
        of the fast paths (core/fast/wordround.py), the sign read from the code u."""
        pol = self.pol
        round_word(pol.rounding, x, self.s, t, sign=u, rand=r, sr_bits=pol.sr_bits, tmp=w, flag=m)

    def _clamp(self, u, t, w) -> None:
        """Step 8: a rounded magnitude above max becomes max or the 'over' code (inf / FN NaN) by policy."""
        kind = self._limit_kind()
        if kind == "max":
            np.minimum(t, np.uint32(self.max_mag), out=t)
        elif kind == "over":
            np.minimum(t, np.uint32(self.over), out=t)
        else:  # RU: negative values stop at -max; RD: positive values at +max
            np.right_shift(u, np.uint32(31), out=w)
            if kind == "rd":
                np.bitwise_xor(w, np.uint32(1), out=w)
            np.subtract(np.uint32(self.over), w, out=w)
            np.minimum(t, w, out=t)

    def _tiny_lane(self, want_flags: bool) -> bool:
        """Do results below the smallest normal take _tiny? Not where flags (UNDERFLOW, tininess) apply."""
        return not want_flags

    def _rest(self, flat, u32, idx, rand, out, fl, generic: Generic) -> None:
        """The elements outside the lane: signed zeros and NaNs directly, tiny results by _tiny, the rest
        (infinities, and what daz or flags make special) by the engine."""
        ui = u32[idx]
        mag = ui & np.uint32(0x7FFFFFFF)
        zero = mag == 0
        if zero.any():  # +-0 -> +-0 in every mode and policy, no flags (daz and ftz leave zeros alone)
            out[idx[zero]] = ui[zero] >> np.uint32(32 - self.dst.bits)
            if fl is not None:
                fl[idx[zero]] = 0
        nan = mag > np.uint32(0x7F800000)
        if nan.any():  # step 12: the canonical NaN (nan_to without one); INVALID for a signalling one (quiet bit
            out[idx[nan]] = _invalid_code(self.dst, self.pol)  # clear), and for every NaN where there is none
            if fl is not None:
                bad = ((ui[nan] & np.uint32(0x00400000)) == 0) | (not self.dst.has_nan)
                fl[idx[nan]] = bad.astype(np.uint8) * np.uint8(Flags.INVALID)
        keep = ~(zero | nan)
        if self._tiny_lane(fl is not None):
            lo = self._lane(False)[0]
            tiny = (mag >= np.uint32(0x00800000 if self.pol.daz else 1)) & (mag < np.uint32(lo))
            if tiny.any():
                out[idx[tiny]] = self._tiny(ui[tiny], None if rand is None else rand[idx[tiny]])
                keep &= ~tiny
        idx = idx[keep]
        if idx.size:
            c, f = generic(flat[idx], None if rand is None else rand[idx])
            out[idx] = c
            if fl is not None:
                fl[idx] = f


    def _tiny(self, ui: np.ndarray, r: np.ndarray | None) -> np.ndarray:
        """Codes of nonzero FP32 values below the destination's smallest normal (no flags).

        1. value = sig * 2^(e - 150) with sig = mantissa | 2^23 (e = the exponent field, 1 for FP32
           subnormals, whose sig has no implicit bit); in units of the destination's quantum
           2^(emin - m) it is sig / 2^sh, sh = 150 + emin - m - e >= s + 1.
        2. Round sig / 2^sh by the one rounding step (core/fast/wordround.py) at each element's shift;
           stochastic rounding on 64-bit words, where sig + rand cannot leave the word.
        3. The kept value is the subnormal's code; a carry lands on the smallest normal's code; ftz
           flushes the subnormal ones (as rounded) to zero. The sign.
        """
        d, pol = self.dst, self.pol
        ef = (ui >> np.uint32(23)) & np.uint32(0xFF)
        sig = (ui & np.uint32(0x7FFFFF)) | ((ef != 0).astype(np.uint32) << np.uint32(23))
        sh = np.uint32(150 + d.emin - d.man_bits) - np.maximum(ef, np.uint32(1))
        if pol.rounding is Rounding.STOCHASTIC:
            t = round_word(pol.rounding, sig.astype(np.uint64), sh.astype(np.uint64), rand=r.astype(np.uint64),
                           sr_bits=pol.sr_bits).astype(np.uint32)
        else:
            t = round_word(pol.rounding, sig, sh, sign=ui)
        if pol.ftz:
            t[t < np.uint32(1 << d.man_bits)] = 0
        return t | ((ui >> np.uint32(31)) << np.uint32(d.bits - 1))


# ---- BF16 / FP16 -> FP32 (exact widening) -------------------------------------------------------------
class _Widen:
    """BF16/FP16 -> FP32: every finite value is exact, so no mode matters; flags are all clear.

    BF16 is FP32's top half (code << 16). An FP16 normal re-biases: (mag << 13) + (127 - 15) << 23.
    The lane is the finite values (normal ones for FP16, and all for BF16 unless daz/ftz make its
    subnormals special) and, under IEEE overflow, BF16's infinities; zeros are set directly, the rest
    (NaN, FP16 subnormals and infinities, anything daz or a saturating policy changes) is the engine's.
    """

    def __init__(self, src: Format, pol: Policy) -> None:
        self.src, self.pol = src, pol
        inf = 0x7F80 if src == BF16 else 0x7C00
        sub_ok = src == BF16 and not (pol.daz or pol.ftz)
        self.lo = 0 if sub_ok else 1 << src.man_bits
        self.hi = inf + (1 if src == BF16 and pol.overflow is Overflow.IEEE else 0)

    def run(self, flat: np.ndarray, rand: np.ndarray | None, want_flags: bool, generic: Generic,
            rand_check: RandCheck | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        if rand is not None and rand_check is not None:  # no mode matters here: one check of the whole array
            rand_check(rand)
        n = flat.size
        u16 = flat.astype(np.uint16, copy=False)
        out = np.empty(n, np.uint32)
        fl = np.zeros(n, np.uint8) if want_flags else None
        c = min(FAST_CHUNK, max(n, 1))
        a, w = np.empty(c, np.uint32), np.empty(c, np.uint32)
        m = np.empty(c, bool)
        rest = []
        fp16 = self.src == FP16
        for i0 in range(0, n, c):
            i1 = min(i0 + c, n)
            k = i1 - i0
            t = out[i0:i1]
            np.copyto(a[:k], u16[i0:i1])
            # 1. outside the lane: the magnitude outside [lo, hi) (one unsigned comparison)
            np.bitwise_and(a[:k], np.uint32(0x7FFF), out=w[:k])
            np.subtract(w[:k], np.uint32(self.lo), out=w[:k])
            np.greater_equal(w[:k], np.uint32(self.hi - self.lo), out=m[:k])
            if m[:k].any():
                rest.append(np.flatnonzero(m[:k]) + i0)
            if not fp16:  # 2. BF16: the FP32 code's top half
                np.left_shift(a[:k], np.uint32(16), out=t)
                continue
            # 2. FP16: the sign moves from bit 15 to bit 31, the magnitude up by 13 and re-biased
            np.bitwise_and(a[:k], np.uint32(0x8000), out=w[:k])
            np.left_shift(w[:k], np.uint32(16), out=w[:k])
            np.bitwise_and(a[:k], np.uint32(0x7FFF), out=a[:k])
            np.left_shift(a[:k], np.uint32(13), out=t)
            np.add(t, np.uint32((127 - 15) << 23), out=t)
            np.bitwise_or(t, w[:k], out=t)
        idx = np.concatenate(rest) if rest else np.zeros(0, np.intp)
        if idx.size:
            ui = u16[idx].astype(np.uint32)
            zero = (ui & np.uint32(0x7FFF)) == 0
            out[idx[zero]] = ui[zero] << np.uint32(16)  # +-0 -> +-0, no flags
            idx = idx[~zero]
            if idx.size:
                c_, f_ = generic(flat[idx], None if rand is None else rand[idx])
                out[idx] = c_
                if fl is not None:
                    fl[idx] = f_
        return out, fl
