"""cast compiled (numba) from FP64 through FP32 words rounded to odd: FP64 to BF16, FP16, FP8, FP6, FP4.

A kernel module (core/jit.py's contract: ``covers``, ``run``, ``calls``, the last shared with core/kernels/cast.py) that
``fastpaths.select_fast_path`` asks first for FP64 sources; ``run`` hands what it does not take (flags, daz, ftz) to
jitcast.run. FP64's rounding steps on 64-bit words run on half the vector lanes of FP32's; instead each FP64 value x
is first narrowed to FP32 by round to odd (``_odd32``: the hardware's RNE conversion, then, where that was inexact
and gave an even code, the code one step toward x), and FP32's loop (jitcast._one, or under RNE to FP16 and BF16
its one-step casts: core/kernels/onestep.py) rounds that to the destination.
Round to odd at precision q followed by a rounding to p <= q - 2 bits gives x's own rounding to p bits in every mode
but stochastic rounding (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
rounding to odd", IEEE TC 2008): the odd bit keeps "inexact" and the side of every tie below the p + 1-th bit. FP32
has q = 24, so destinations of precision p <= 22 (at most 21 fraction bits), whose quantum is at least four times
FP32's everywhere: in the normal range by p <= q - 2, in the subnormal range because the destination's smallest
normal is one of FP32's (emin >= -126, _route) and so its quantum 2^(emin - m) >= 2^-147 = 4 * 2^-149. Their whole
grid then lies on FP32's and within its range, and the FP32 values past the destination's overflow threshold stay
past it (the narrowing gives FP32's largest finite value, not inf, for finite x beyond it), so overflow decides
alike. NaNs stay NaNs (the destination's NaN code regardless of payload: no flags here).

The narrowing runs a chunk at a time into a buffer that stays in L1, then FP32's loop over it: in one loop
LLVM vectorises both at the FP64 words' 8 lanes (measured 2.4 ns against 1.3 ns per element, FP64 -> BF16).
tests/core/test_jitcast_odd.py holds it to the engine.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .. import jit
from ..formats.format import FP32, FP64, Format
from ..formats.policy import Rounding
from . import cast as jitcast
from . import rounding as jr
from .cast import _kind, _one, _route, params
from .onestep import one_step, one_step_kind

__all__ = ["covers", "takes", "run", "kernel", "calls"]

calls = jitcast.calls   # one counter for the cast kernels' steps, whichever module ran them

_CHUNK = 2048   # FP64 words narrowed per chunk: 8 KiB of FP32 bits
# modes left to FP64's own loop: stochastic rounding (the odd bit would meet its random bits), and toward zero
# (measured: no faster this way, 0.54-0.62 against 0.59-0.62 ns per element to BF16 / E4M3FN / E5M2)
_OTHER = (Rounding.STOCHASTIC, Rounding.TOWARD_ZERO)


def takes(dst: Format, pol) -> bool:
    """Does FP64 -> dst under pol (without flags, daz or ftz: ``run`` asks) take this route? Signed destinations
    with subnormals, precision at most FP32's minus 2 (the theorem's condition: module docstring) and a
    subnormal quantum at least 4 times FP32's, that FP32's kernel rounds directly, every mode but stochastic
    rounding and toward zero (_OTHER), where the hardware's one conversion is not the cast."""
    fp32_quantum = FP32.emin - FP32.man_bits                 # 2^-149
    return dst.signed and dst.has_subnormals and dst.precision <= FP32.precision - 2 \
        and dst.emin - dst.man_bits >= fp32_quantum + 2 and pol.rounding not in _OTHER \
        and _route(FP32, dst) == FP32 and not one_step_kind(FP64, dst, pol)


def covers(step) -> bool:
    """A cast step (fastpaths.CastStep) from FP64 that jitcast runs and whose destination and policy this route
    ``takes`` (daz, ftz and flags are run's to decide: it hands those to jitcast.run)."""
    return step.src == FP64 and jitcast.covers(step) and takes(step.dst, step.pol)


def run(step, flat: np.ndarray, want_flags: bool, rand: np.ndarray | None = None,
        rand_check=None) -> tuple[np.ndarray, np.ndarray | None]:
    """jitcast.run's result: by this route without flags, daz or ftz, else by jitcast.run."""
    dst, pol = step.dst, step.pol
    if want_flags or pol.daz or pol.ftz:
        return jitcast.run(step, flat, want_flags, rand, rand_check)
    calls.add()
    out = np.empty(flat.size, np.dtype(dst.code_dtype))
    how = one_step_kind(FP32, dst, pol)
    kernel(jit.MODE_CODES[pol.rounding], True, _kind(FP32, dst), how)(flat.view(np.uint64), out, params(FP32, dst, pol))
    return out, None


@jit.njit(inline="always")
def _odd32(b):
    """The FP32 bits of the FP64 bits b rounded to odd (module docstring): past FP32's range its largest finite
    value, below its smallest subnormal that one (both odd); a NaN stays a NaN (quiet)."""
    d = jr.as_value(b)
    f = np.float32(d)
    back = np.float64(f)
    fb = jr.as_bits(f)
    one = jr.k(fb, 1)
    adj = jr.and_(jr.xor(fb, one), one) if back != d else jr.k(fb, 0)       # inexact and even
    # one code toward x: down where |back| > |x|; back and x share their sign, so that is their bits compared
    # as signed integers (both offset by the same -2^63 where negative)
    step = jr.sub(jr.k(fb, 0), one) if np.int64(jr.as_bits(back)) > np.int64(b) else one
    return jr.add(fb, jr.and_(step, jr.sub(jr.k(fb, 0), adj)))


@jit.njit(inline="always")
def _loop(src, out, P, mode, plain, kind, how):
    buf = np.empty(_CHUNK, np.uint32)
    for c0 in range(0, src.size, _CHUNK):
        s, o = src[c0:c0 + _CHUNK], out[c0:c0 + _CHUNK]    # (slices: indices LLVM sees as in range, no gathers)
        for j in range(s.size):
            buf[j] = _odd32(s[j])
        if how:   # FP32 -> dst is one step (jitonestep.one_step: RNE to FP16 or BF16)
            for j in range(s.size):
                o[j] = one_step(buf[j], P, how)
        else:
            for j in range(s.size):
                c, _ = _one(buf[j], jr.k(P.sman, 0), mode, P, False, plain, kind)
                o[j] = c


@cache
def kernel(mode: int, plain: bool, kind: int, how: int = 0):
    """The loop of one (mode, plain, kind: jitcast._one's, with FP32's Cast constants; how: FP32's rounding is
    ``jitonestep.one_step`` of that kind, 0 where it is not), compiled when first used."""
    @jit.njit
    def run(src, out, P):
        jr.wide_vectors()
        _loop(src, out, P, mode, plain, kind, how)
    return run
