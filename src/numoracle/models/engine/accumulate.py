"""Exact rounding kernels of the accumulation models: one correctly rounded addition, one block FMA.

The functions take and return float64 arrays holding *exact* values (values of the accumulator
format, or exact products / inputs); ``Arith.add32`` / ``round32`` do the same with float32 arrays
for formats that fit. Where a fast numpy path is used, the comment says why it is exact; overflow,
inf and NaN go through the conversion engine (``convert.cast_codes``), which defines the semantics.
"""

from __future__ import annotations

import numpy as np

from ...core.eft import two_sum_error
from ...core.engine.convert import cast_codes
from ...core.fast.wordround import round_word
from ...core.formats.format import FP32, FP64, Format
from ...core.formats.policy import Rounding, resolve_policy

__all__ = ["Arith", "block_fma", "block_format", "triple", "native_fp32_ok", "ZERO_SOURCE"]

_MAG = np.uint64(0x7FFF_FFFF_FFFF_FFFF)
_MAG32 = np.uint32(0x7FFF_FFFF)
_POL64 = resolve_policy(FP64, "rne")
ZERO_SOURCE = (0, 10**6, -(10**6))  # a constant +-0: no bits, fits every format


def triple(fmt: Format) -> tuple[int, int, int]:
    """(p, q, h): values of ``fmt`` have <= p significant bits, are multiples of 2^q and below 2^h."""
    return fmt.precision, fmt.emin - fmt.man_bits, fmt.emax + 1


def native_fp32_ok() -> bool:
    """float32 conversion and arithmetic keep subnormals here (no FTZ/DAZ left set by some library)."""
    a = np.array([2.0**-126, 2.0**-149], np.float32)
    sub = (a[:1] - np.float32(2.0**-127))[0] == np.float32(2.0**-127)     # FTZ would flush the result
    daz = (a[1:] * np.float32(2))[0] == np.float32(2.0**-148)             # DAZ would zero the input
    return bool(sub and daz and float(np.array([2.0**-140]).astype(np.float32)[0]) == 2.0**-140)


class Arith:
    """Rounding to one accumulator format with one rounding mode (and optional flush-to-zero).

    ``round(x)``: the correctly rounded value of each exact float64 ``x``.
    ``add(x, y, plan)``: fl(x + y) for exact float64 x, y, where ``plan`` is
      - "direct": fl64(x + y) is exact, or rounding it once more is innocuous (see simulate._plan);
      - "odd": fl64(x + y) may be inexact. s = fl64(x + y) is rounded directly where that is
        provably the same as rounding x + y (below); elsewhere s is replaced by the round-to-odd
        value at 53 bits from s and its TwoSum error, then rounded once: correct for every p <= 51
        (Boldo & Melquiond 2008: rounding to odd at precision >= p + 2, then to p, is one rounding,
        in every mode; float64 sums in float64's subnormal range are exact);
      - "f64": the accumulator is FP64 itself.

    Why s alone suffices off the critical points: the grid points and midpoints of a p-bit format
    (p <= 51) are float64 numbers. If x + y and s = RN53(x + y) were separated by one of them, m,
    then m would be nearer to x + y than s is (or equal to it, making the sum exact), which
    contradicts s being the nearest float64. So rounding s and rounding x + y agree unless s *is* a
    midpoint (nearest modes) or a grid point (directed and odd modes): in the normal range that is
    read from s's low bits, ``(bits & mask) == crit``; outside it (subnormal results, overflow,
    zeros, inf, NaN) every element takes the exact route.
    """

    def __init__(self, fmt: Format, rounding: Rounding, ftz: bool, native: bool = True):
        self.fmt, self.mode, self.ftz = fmt, rounding, ftz
        self.is64 = fmt == FP64
        self.triple = triple(fmt)
        self.pol = resolve_policy(fmt, rounding.value, ftz=ftz)
        # numpy's float64 -> float32 cast is the IEEE conversion (one RNE rounding, in hardware);
        # tests/test_simulate.py checks it against the engine, ties and subnormals included.
        self.native = self._native = native and not ftz and rounding is Rounding.NEAREST_EVEN and fmt == FP32
        if not self.is64:
            self._d = np.uint64(52 - fmt.man_bits)                      # float64 bits dropped
            self._mask = np.uint64((1 << (52 - fmt.man_bits)) - 1)
            self._half = np.uint64(1 << (51 - fmt.man_bits))
            self._crit = self._half if rounding.is_nearest else np.uint64(0)
            self._min_normal = float(fmt.min_normal)
            self._q = 2.0 ** (fmt.emin - fmt.man_bits)          # the subnormal quantum
            self._inv_q = 2.0 ** (fmt.man_bits - fmt.emin)
            self._lo = np.float64(float(fmt.min_normal)).view(np.uint64)
            self._span = np.float64(float(fmt.max_finite)).view(np.uint64) - self._lo
        # float32 twin of the "odd" addition for formats whose grid points and midpoints are float32
        # numbers (p <= 23, range inside FP32's): half the memory traffic per step
        self.low32 = native and not self.is64 and fmt.precision <= 23 and _fits32(self.triple)
        if self.low32:
            self._d32 = np.uint32(23 - fmt.man_bits)
            self._mask32 = np.uint32((1 << (23 - fmt.man_bits)) - 1)
            self._half32 = np.uint32(1 << (22 - fmt.man_bits))
            self._crit32 = self._half32 if rounding.is_nearest else np.uint32(0)
            self._lo32 = np.float32(float(fmt.min_normal)).view(np.uint32)
            self._span32 = np.float32(float(fmt.max_finite)).view(np.uint32) - self._lo32

    # ---- one rounding ------------------------------------------------------------------------------
    def round(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float64)
        if self.is64:
            return self._flush64(x.copy()) if self.ftz else x
        if self._native:
            return x.astype(np.float32).astype(np.float64)
        bits = np.ascontiguousarray(x).view(np.uint64)
        out = self._round_bits(bits).view(np.float64)
        bad = ((bits & _MAG) - self._lo) > self._span   # uint64 wrap-around: below min_normal, or above max
        if bad.any():
            self._slow(x, out, np.flatnonzero(bad))
        return out

    def _round_bits(self, bits: np.ndarray) -> np.ndarray:
        """Round at bit d = 52 - man_bits of the float64 bits: exact for min_normal <= |x| <= max_finite,
        where the format's quantum at x is the float64 quantum times 2^d (a carry out of the fraction
        correctly bumps the exponent; max_finite is a grid point, so nothing rounds past it)."""
        return round_word(self.mode, bits, int(self._d), sign=bits, place=True)

    def add32(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """fl(x + y) for float32 x, y holding exact FP32 numbers (``low32`` formats): the float32 sum is
        rounded by its bits where that provably equals rounding x + y (class docstring, with float32
        in place of float64: the format's grid points and midpoints are float32 numbers); the rest
        (critical points, results outside the normal range) take the exact float64 route."""
        s = x + y
        bits = s.view(np.uint32)
        w = bits & self._mask32                     # in place from here: one temporary, one mask
        need = w == self._crit32
        np.bitwise_and(bits, _MAG32, out=w)
        w -= self._lo32
        need |= w > self._span32
        out = round_word(self.mode, bits, int(self._d32), sign=bits, place=True).view(np.float32)
        if need.any():
            idx = np.flatnonzero(need)
            xs, ys = _take(x, s.shape, idx).astype(np.float64), _take(y, s.shape, idx).astype(np.float64)
            out.reshape(-1)[idx] = self.add_exact(xs, ys)
        return out

    def add_exact(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """fl(x + y) by the exact route for every element (plan "odd" without its shortcut): round to odd at
        53 bits from the float64 sum and its TwoSum error, then round once (class docstring)."""
        s = x + y
        if self.mode is Rounding.DOWN:
            _rd_zero_sign(s, x, y)
        bb = s - x
        e = (x - (s - bb)) + (y - bb)
        return self.round(_to_odd(s, e))

    def round32(self, x: np.ndarray) -> np.ndarray:
        """round() of float32 x holding exact values (terms that fit FP32), for ``low32`` formats."""
        bits = x.view(np.uint32)
        out = round_word(self.mode, bits, int(self._d32), sign=bits, place=True).view(np.float32)
        bad = ((bits & _MAG32) - self._lo32) > self._span32
        if bad.any():
            idx = np.flatnonzero(bad)
            out.reshape(-1)[idx] = self.round(x.reshape(-1)[idx].astype(np.float64))
        return out

    def _slow(self, x: np.ndarray, out: np.ndarray, idx: np.ndarray) -> None:
        """out[idx] = round(x[idx]) for elements outside the normal range.

        Below min_normal the format's grid is the multiples of Q = 2^(emin - m): k = x / Q is exact
        (a power-of-two scaling of a value below 2^m, m <= 50), rounding k to an integer is exact in
        float64 (rint = ties to even, trunc, ceil, floor; ties away as sign * floor(|k| + 1/2), exact
        since |k| < 2^52), and k * Q is exact. Zeros keep their sign (+0 where the format has no -0);
        ftz flushes results still below min_normal. Overflow, inf and NaN go to the engine.
        """
        xf, of = x.reshape(-1), out.reshape(-1)
        sub = xf[idx]
        tiny = np.abs(sub) < self._min_normal
        if tiny.any():
            k = sub[tiny] * self._inv_q
            m = self.mode
            if m is Rounding.NEAREST_EVEN:
                k = np.rint(k)
            elif m is Rounding.NEAREST_AWAY:
                k = np.copysign(np.floor(np.abs(k) + 0.5), k)
            elif m is Rounding.TOWARD_ZERO:
                k = np.trunc(k)
            elif m is Rounding.UP:
                k = np.ceil(k)
            elif m is Rounding.DOWN:
                k = np.floor(k)
            else:  # TO_ODD: truncate, then make an inexact result odd
                t = np.trunc(k)
                k = t + np.copysign(((t != k) & (np.fmod(t, 2) == 0)).astype(np.float64), k)
            r = k * self._q
            if self.ftz:
                r = np.where(np.abs(r) < self._min_normal, np.copysign(0.0, r), r)
            if not self.fmt.has_negative_zero:
                r = np.where(r == 0, 0.0, r)
            of[idx[tiny]] = r
        if not tiny.all():
            big = idx[~tiny]
            of[big] = self.engine(xf[big])

    def engine(self, x: np.ndarray) -> np.ndarray:
        """The conversion engine: FP64 codes -> fmt codes -> exact float64 values."""
        codes = cast_codes(np.ascontiguousarray(x, np.float64).view(np.uint64), FP64, self.fmt, self.pol)
        return cast_codes(codes, self.fmt, FP64, _POL64).view(np.float64)

    def _flush64(self, s: np.ndarray) -> np.ndarray:
        tiny = np.abs(s) < 2.0**-1022
        if tiny.any():
            s[tiny] = np.copysign(0.0, s[tiny])
        return s

    # ---- one addition --------------------------------------------------------------------------------
    def add(self, x: np.ndarray, y: np.ndarray, plan: str) -> np.ndarray:
        s = x + y
        if plan == "f64":
            return self._add64(x, y, s)
        if self.mode is Rounding.DOWN:
            _rd_zero_sign(s, x, y)
        if plan == "direct":
            return self.round(s)
        bits = s.view(np.uint64)
        need = (((bits & _MAG) - self._lo) > self._span) | ((bits & self._mask) == self._crit)
        out = (s.astype(np.float32).astype(np.float64) if self._native
               else self._round_bits(bits).view(np.float64))
        if need.any():
            idx = np.flatnonzero(need)
            xs, ys = _take(x, s.shape, idx), _take(y, s.shape, idx)
            ss = s.reshape(-1)[idx]
            e = two_sum_error(xs, ys, ss)  # (x + y) - s exactly
            out.reshape(-1)[idx] = self.round(_to_odd(ss, e))
        return out

    def _add64(self, x, y, s):
        m = self.mode
        if m is not Rounding.NEAREST_EVEN:
            e = two_sum_error(x, y, s)           # exact error of the RNE sum (NaN when s is not finite)
            b = s.view(np.int64)                 # sign-magnitude: +-1 moves the magnitude one ulp
            inexact = np.abs(e) > 0
            differ = (b ^ e.view(np.int64)) < 0  # the exact sum lies toward zero from s
            if m is Rounding.TO_ODD:
                s = _to_odd(s, e)
            elif m is Rounding.TOWARD_ZERO:
                b -= inexact & differ
            elif m in (Rounding.UP, Rounding.DOWN):
                want = (e > 0) if m is Rounding.UP else (e < 0)   # exact sum above (below) s
                b += np.where(differ, -1, 1) * want
            ovf = np.isinf(s) & np.isfinite(x) & np.isfinite(y)
            if ovf.any():  # IEEE overflow in directed modes: toward zero stops at +-max
                keep_inf = (s > 0) if m is Rounding.UP else (s < 0) if m is Rounding.DOWN else np.zeros_like(ovf)
                fix = ovf & ~keep_inf
                s[fix] = np.copysign(np.finfo(np.float64).max, s[fix])
            if m is Rounding.DOWN:
                _rd_zero_sign(s, x, y)
        return self._flush64(s) if self.ftz else s


def _take(x: np.ndarray, shape: tuple, idx: np.ndarray) -> np.ndarray:
    """x broadcast to ``shape``, at flat indices idx (no broadcast view when x already has the shape)."""
    x = np.asarray(x)
    return (x if x.shape == shape else np.broadcast_to(x, shape)).reshape(-1)[idx]


def _fits32(t: tuple) -> bool:
    return t[0] <= 24 and t[1] >= -149 and t[2] <= 128


def _to_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Round-to-odd at 53 bits of s + e, where s = RN(x + y) and e its exact error.

    If e != 0 the exact sum lies strictly between s and its neighbour toward e; round-to-odd picks
    the one of the two with an odd last bit: truncate toward zero (s, or s one ulp down in
    magnitude when e points toward zero), then set the last bit. s != 0 whenever e != 0, and a
    finite s never becomes inf/NaN (NaN e, from an infinite s, compares false and changes nothing).
    """
    inexact = np.abs(e) > 0
    if not inexact.any():
        return s
    b = s.view(np.int64)
    b -= inexact & ((b ^ e.view(np.int64)) < 0)
    b |= inexact
    return s


def _rd_zero_sign(s: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """IEEE 754 6.3: an exact zero sum is -0 under roundTowardNegative unless both operands are +0."""
    z = s == 0
    if z.any():
        both_pos0 = (x == 0) & (y == 0) & ~np.signbit(x) & ~np.signbit(y)
        s[z & ~both_pos0] = -0.0


# ======================================================================================================
# Block FMA (Khattak & Mikaitis 2025), vectorised over (width, batch)
# ======================================================================================================

def block_format(acc: Format, out_frac_bits: int | None) -> Format:
    """The block output format: acc's exponent range with ``out_frac_bits`` fraction bits."""
    if out_frac_bits is None or out_frac_bits == acc.man_bits:
        return acc
    return Format(f"{acc.name}[m{out_frac_bits}]", acc.exp_bits, int(out_frac_bits), acc.bias, nan=acc.nan,
                  has_inf=acc.has_inf)


def block_fma(T: np.ndarray, X: np.ndarray, c: np.ndarray, order, out: Arith, sub_inputs: bool) -> np.ndarray:
    """d = BFMA(c; T[:, k, :]) per (width, batch) element. T: exact products (w, N, B; float64, or float32
    where simulate has checked that float32 holds every step exactly), overwritten;
    X: their raw labels ea'+eb' (int, zero factors very negative); c: (w, B). Steps: orders.BlockFMA.
    """
    amax = np.maximum(T.max(axis=1), -T.min(axis=1)).astype(np.float64)    # max |t| (NaN if any t is NaN)
    bad = ~(np.isfinite(amax) & np.isfinite(c))
    ieee = (T.sum(axis=1, dtype=np.float64) + c)[bad] if bad.any() else None   # inf/NaN: their IEEE sum
    has_p = amax > 0
    raw = X.max(axis=1)
    Ep = np.frexp(amax)[1] - 1                      # floor(log2 max|t|): the max label when significands are in [1, 4)
    if sub_inputs:
        # a product's label is raw_k + 1 where its significand |t| / 2^raw_k is >= 2, else raw_k (the significand
        # is < 4, and can be < 1 for subnormal inputs): label_k = max(raw_k, floor(log2 |t_k|)). The max over k
        # is max(max raw_k, floor(log2 max|t_k|)) (zero products have very negative raw labels; an all-zero
        # block has no label: has_p is False there and E does not read Ep)
        Ep = np.maximum(Ep, raw)
    cabs = np.abs(c)
    has_c = cabs > 0
    Ec = np.maximum(np.frexp(cabs)[1] - 1, -126)   # c's FP32 register exponent (subnormal: -126)
    spc = has_p & (Ep == raw + 1) & (~has_c | (raw >= Ec)) if order.carry_bit else np.zeros(amax.shape, bool)
    E = np.where(has_p, np.where(has_c, np.maximum(Ep, Ec), Ep), Ec)
    scale = np.ldexp(1.0, order.frac_bits + spc.astype(np.int64) - E)
    # Exact: scaling by a power of two is exact (|t| < 2^(E+1), so |t|*scale < 2^(F+2); values that
    # underflow are < 1 and truncate to 0 anyway); trunc is exact; the sum has at most n+1 integers
    # below 2^(F+3) (BlockFMA checks (n+1)*2^(F+3) <= 2^53), so float64 adds them exactly in any order.
    # float32 terms (simulate chooses them only where this all stays exact in float32: products that are FP32
    # numbers, a block sum below 2^24): the scaling is a power of two whose results under float32's range are
    # < 1 and truncate to 0 either way; the integer sums are exact; S is widened before c joins it.
    # (a block without products may have a scale beyond float32's range: its zeros stay zeros under the clamp)
    s_t = scale if T.dtype == np.float64 else np.minimum(scale, 2.0**127).astype(T.dtype)
    Y = np.multiply(T, s_t[:, None, :], out=T)
    yc = c * scale
    if order.truncate:
        S = np.trunc(Y, out=Y).sum(axis=1).astype(np.float64) + np.trunc(yc)
        v = S / scale
    else:  # one sticky bit below the window: 2*trunc + (any bit shifted out), sign-magnitude
        tY, tc = np.trunc(Y), np.trunc(yc)
        S = (2 * tY + np.sign(Y) * (Y != tY)).sum(axis=1).astype(np.float64) + 2 * tc + np.sign(yc) * (yc != tc)
        v = S / (2 * scale)
    d = out.round(v)
    if out.fmt.has_inf:   # K&M: a result reaching 2^(emax+1) is +-inf in every mode
        big = np.abs(v) >= 2.0 ** (out.fmt.emax + 1)
        if big.any():
            d[big] = np.copysign(np.inf, v[big])
    d[S == 0] = 0.0
    if ieee is not None:
        d[bad] = ieee
    return d
