"""Elementwise functions of the composite models (``sim/model.py``): exp, log, rsqrt and sqrt correctly
rounded to a compute format, the one exact FMA of float32 words, and emulations of library functions.

Each function takes the exact arguments (a numpy array of values of ``fmt``) and returns values of ``fmt`` as
float64. The correctly rounded ones use Ziv's strategy (``ziv.py``): numpy's float64 result with a bound of 2^-45
relative (a wide margin over its few ulps) decides almost every element; the rest are evaluated in mpmath interval
arithmetic until both ends round alike. ``sleef_expf_u10`` and ``sleef_logf_u10`` are SLEEF's ``xexpf`` and
``xlogf_u1`` (``Sleef_expf16_u10`` / ``Sleef_logf16_u10``: torch's CPU ``Vectorized<float>::exp()`` / ``log()``)
step by step in float32 with FMA, each step evaluated exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.eft import two_prod, two_sum, two_sum_error
from ...core.engine.convert import cast, decode
from ...core.formats.format import FP32, Format
from ..ziv import decide, settle

__all__ = ["fma32", "exp_cr", "log_cr", "rsqrt_cr", "sqrt_cr", "sleef_expf_u10", "sleef_logf_u10",
           "torch_exp_u20", "torch_fexp_u20", "glibc_expf", "rsqrt_div_sqrt", "ELEMENTWISE_FNS"]

_REL = 2.0**-45      # the bound on numpy's float64 exp / log / sqrt error, relative (as composite/ziv.py)


def fma32(a: Any, b: Any, c: Any) -> np.ndarray:
    """fl32(a b + c), one rounding (an FMA of float32 words): a b is exact in float64, the sum rounds to odd
    at 53 bits (TwoSum's error sets the sticky bit), so the cast to float32 rounds once (53 >= 24 + 2)."""
    a, b, c = (np.asarray(v, np.float64) for v in (a, b, c))
    with np.errstate(all="ignore"):
        p = a * b
        s = p + c
        err = two_sum_error(p, c, s)
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        fix = (err != 0) & even & np.isfinite(s)
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32)


def _mp(name: str) -> Callable[[Any], Any]:
    def ev(ctx: Any, x: Any) -> Any:
        if name == "exp":
            return ctx.exp(x)
        if name == "log":
            return ctx.log(x)
        if name == "sqrt":
            return ctx.sqrt(x)
        return 1 / ctx.sqrt(x)
    return ev


def _correctly_rounded(name: str, approx: Callable[[np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    mpf = _mp(name)

    def fn(x: Any, fmt: Format = FP32) -> np.ndarray:
        v = np.asarray(x, np.float64)
        with np.errstate(all="ignore"):
            a = approx(v)
        out = np.full(v.shape, np.nan)
        fin = np.isfinite(a) & (a != 0) & np.isfinite(v)
        special = ~fin
        out[special] = a[special]                 # exact specials: exp(-inf) = 0, log(0) = -inf, 1/sqrt(inf) = 0 ...
        if name == "exp":
            out[v == 0] = 1.0                     # exp(0) = 1 exactly (numpy's too; stated)
        if name in ("log",):
            out[v == 1] = 0.0
        idx = np.flatnonzero(fin & ~((name == "exp") & (v == 0)) & ~((name == "log") & (v == 1)))
        if idx.size:
            av = a.ravel()[idx]
            codes, hard = decide(av, np.abs(av) * _REL, fmt, sign=np.where(av > 0, 1, -1))
            vals = decode(codes, fmt)
            if hard.any():
                import mpmath
                hv = v.ravel()[idx[hard]]

                def evaluate(k: int, bits: int) -> Any:
                    mpmath.iv.prec = bits
                    return mpf(mpmath.iv, mpmath.iv.mpf(float(hv[k])))
                vals[hard] = decode(settle(int(hard.sum()), evaluate, fmt, sign=1 if name != "log" else 0), fmt)
            out.ravel()[idx] = vals
        return out
    fn.__name__ = f"{name}_cr"
    fn.__doc__ = f"{name} of each value, correctly rounded to ``fmt`` (round to nearest even)."
    return fn


exp_cr = _correctly_rounded("exp", np.exp)
log_cr = _correctly_rounded("log", np.log)
sqrt_cr = _correctly_rounded("sqrt", np.sqrt)
rsqrt_cr = _correctly_rounded("rsqrt", lambda v: 1.0 / np.sqrt(v))

# SLEEF's constants (sleef src/libm/misc.h: R_LN2f, L2Uf, L2Lf) and xexpf's polynomial (sleefsimdsp.c)
_R_LN2F = np.float32(1.442695040888963407359924681001892137426645954152985934135449406931)
_L2UF = np.float32(0.693145751953125)
_L2LF = np.float32(1.428606765330187045e-06)
_EXPF_POLY = (0.000198527617612853646278381, 0.00139304355252534151077271, 0.00833336077630519866943359,
              0.0416664853692054748535156, 0.166666671633720397949219, 0.5)


def _pow2i(q: np.ndarray) -> np.ndarray:
    """SLEEF's vpow2i: the float32 whose exponent field is q + 127 (q in -127..128), as float32."""
    return (((q + 0x7F) & 0x1FF) << 23).astype(np.uint32).view(np.float32)


def sleef_expf_u10(x: Any, fmt: Format = FP32) -> np.ndarray:
    """SLEEF 3.x ``xexpf`` (``Sleef_expf16_u10`` on AVX-512, ``_expf8_u10`` on AVX2: the same steps), bit for bit:
    q = rint(x log2 e) (float32 product, round half even), s = x - q L2U - q L2L (two FMAs), a degree-5
    polynomial by FMAs, u = 1 + (s s) u + s, u 2^(q >> 1) 2^(q - (q >> 1)) (two float32 products); 0 below
    -104, +inf above 100, NaN kept. ``fmt`` must be FP32."""
    if fmt != FP32:
        raise ValueError(f"sleef_expf_u10 is a float32 function; got fmt={fmt.name}: pass FP32 values")
    d = np.asarray(x, np.float64).astype(np.float32)
    with np.errstate(all="ignore"):
        qv = np.rint((d * _R_LN2F).astype(np.float32).astype(np.float64))
        q = np.where(np.isfinite(qv) & (np.abs(qv) < 1 << 20), qv, 0).astype(np.int64)
        qf = q.astype(np.float32)
        s = fma32(qf, -_L2UF, d)
        s = fma32(qf, -_L2LF, s)
        u = np.float32(_EXPF_POLY[0])
        for c in _EXPF_POLY[1:]:
            u = fma32(u, s, np.float32(c))
        u = (np.float32(1) + fma32((s * s).astype(np.float32), u, s)).astype(np.float32)
        h = q >> 1
        u = ((u * _pow2i(h)).astype(np.float32) * _pow2i(q - h)).astype(np.float32)
        u = np.where(d < -104, np.float32(0), u)
        u = np.where(d > 100, np.float32(np.inf), u)
        u = np.where(np.isnan(d), d, u)
    return u.astype(np.float64)


def _bits32(b: int) -> np.float32:
    return np.array([b], np.uint32).view(np.float32)[0]


# ATen's Vectorized<float>::exp_u20 (vec512_float.h / vec256_float.h): constants as the kernel writes them
_U20_POLY = tuple(np.float32(c) for c in ("0.00828929059", "0.0418978221", "0.166676521", "0.499991506",
                                          "0.999999701"))
_U20_LOG2E, _U20_LN2 = _bits32(0x3FB8AA3B), _bits32(0x3F317218)
_U20_MIN, _U20_MAX = _bits32(0xC2AEAC50), _bits32(0x42B17218)


def torch_exp_u20(x: Any, fmt: Format = FP32) -> np.ndarray:
    """ATen's ``Vectorized<float>::exp_u20`` (torch's CPU flash attention's exp; "ULP=20"), bit for bit:
    s = clamp(x, ln FLT_MIN, ln FLT_MAX), n = floor(fma(s, log2 e, 0.5)), r = fl(s - n ln2) (one FNMADD), a
    degree-5 polynomial by FMAs (Horner, constants 0.00828929059 ... 0.999999701, 1), then fl(fl(p 2^(n-1)) 2);
    0 where x < ln FLT_MIN. ``fmt`` must be FP32."""
    if fmt != FP32:
        raise ValueError(f"torch_exp_u20 is a float32 function; got fmt={fmt.name}: pass FP32 values")
    d = np.asarray(x, np.float64).astype(np.float32)
    with np.errstate(all="ignore"):
        low = d < _U20_MIN
        s = np.maximum(np.minimum(d, _U20_MAX), _U20_MIN)
        fx = np.floor(fma32(s, _U20_LOG2E, np.float32(0.5)).astype(np.float64))
        n = np.where(np.isfinite(fx), fx, 0).astype(np.int64)
        r = fma32(-n.astype(np.float32), _U20_LN2, s)
        p = fma32(r, _U20_POLY[0], _U20_POLY[1])
        for c in _U20_POLY[2:] + (np.float32(1),):
            p = fma32(r, p, c)
        two = (((n - 1 + 127) & 0x1FF) << 23).astype(np.uint32).view(np.float32)
        two = np.where(low, np.float32(0), two)
        y = ((p * two).astype(np.float32) * np.float32(2)).astype(np.float32)
    return y.astype(np.float64)


# ATen's _mm512_fexp_u20_ps / Vectorized<float>::fexp_u20 (Malossi et al.'s fast exp): constants as the kernel's
_FEXP_C = tuple(np.float32(c) for c in ("-0.079204240219773236", "-0.22433836478672356", "0.30354260500649682",
                                        "0.00010703434948458272"))
_FEXP_A, _FEXP_B = np.float32(2.0**23), np.float32(2.0**23 * 127)


def torch_fexp_u20(x: Any, fmt: Format = FP32) -> np.ndarray:
    """ATen's ``fexp_u20`` (torch's CPU flash attention's exp for bf16 / fp16 inputs), bit for bit: t = fl(x log2 e),
    f = fl(t - floor t), a cubic c(f) by FMAs (Horner), u = fl(t - c), the float32 whose bits are
    trunc(fma(2^23, u, 127 2^23)); 0 where x < ln FLT_MIN, +inf where x > ln FLT_MAX. ``fmt`` must be FP32."""
    if fmt != FP32:
        raise ValueError(f"torch_fexp_u20 is a float32 function; got fmt={fmt.name}: pass FP32 values")
    d = np.asarray(x, np.float64).astype(np.float32)
    with np.errstate(all="ignore"):
        t = (d * _U20_LOG2E).astype(np.float32)
        frac = (t - np.floor(t)).astype(np.float32)
        c = fma32(frac, _FEXP_C[0], _FEXP_C[1])
        c = fma32(frac, c, _FEXP_C[2])
        c = fma32(frac, c, _FEXP_C[3])
        u = (t - c).astype(np.float32)
        tmp = np.asarray(fma32(_FEXP_A, u, _FEXP_B), np.float64)
        ok = np.isfinite(tmp) & (np.abs(tmp) < 2.0**31)
        bits = np.where(ok, np.trunc(np.where(ok, tmp, 0)), 0).astype(np.int64) & 0xFFFFFFFF
        y = bits.astype(np.uint32).view(np.float32).astype(np.float64)
        y = np.where(d < _U20_MIN, 0.0, y)
        y = np.where(d > _U20_MAX, np.inf, y)
    return y


# glibc's expf (2.27 on; ARM's optimized-routines e_expf.c): N = 32 table of 2^(i/N), a cubic, all in double
_GLIBC_N = 32
_GLIBC_INVLN2N = float.fromhex("0x1.71547652b82fep0") * _GLIBC_N
_GLIBC_C = (float.fromhex("0x1.c6af84b912394p-5") / _GLIBC_N**3, float.fromhex("0x1.ebfce50fac4f3p-3") / _GLIBC_N**2,
            float.fromhex("0x1.62e42ff0c52d6p-1") / _GLIBC_N)


def _glibc_table() -> np.ndarray:
    import mpmath
    with mpmath.workdps(60):
        vals = [float(mpmath.power(2, mpmath.mpf(i) / _GLIBC_N)) for i in range(_GLIBC_N)]
    return np.array(vals, np.float64)


_GLIBC_T: list = []


def _fma64(a: Any, b: Any, c: Any) -> np.ndarray:
    """fl64(a b + c), one rounding: a b = p + e exactly (TwoProd), p + c = s + t (TwoSum), t + e rounded to odd,
    then s + that rounded once (the odd rounding keeps the sticky information below s's last place)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    with np.errstate(all="ignore"):
        p, e = two_prod(a, b)
        s, t = two_sum(p, c)
        u = t + e
        err = two_sum_error(t, e, u)
        even = (u.view(np.uint64) & np.uint64(1)) == 0
        u = np.where((err != 0) & even & np.isfinite(u), np.nextafter(u, np.where(err > 0, np.inf, -np.inf)), u)
        return s + u


def glibc_expf(x: Any, fmt: Format = FP32) -> np.ndarray:
    """glibc's ``expf`` (``std::exp`` on a float: torch's scalar tails and flash attention's rescaling), bit for
    bit on this x86-64 build (its FMA variant): z = x N / ln 2, k = rint(z), r = z - k, s = 2^(k / N) from the
    table, y = fma(fma(C0, r, C1), r^2, fma(C2, r, 1)) s in double, rounded to float32. Not correctly rounded:
    it differs from ``exp_cr`` on about 0.07% of arguments. ``fmt`` must be FP32."""
    if fmt != FP32:
        raise ValueError(f"glibc_expf is a float32 function; got fmt={fmt.name}: pass FP32 values")
    if not _GLIBC_T:
        _GLIBC_T.append(_glibc_table())
    tab = _GLIBC_T[0]
    xd = np.asarray(x, np.float64).astype(np.float32).astype(np.float64)
    fin = np.isfinite(xd) & (xd > -104) & (xd < 89)
    v = np.where(fin, xd, 0.0)
    with np.errstate(all="ignore"):
        z = _GLIBC_INVLN2N * v
        kd = np.rint(z)
        r = z - kd
        ki = kd.astype(np.int64)
        s = tab[ki % _GLIBC_N] * np.exp2((ki // _GLIBC_N).astype(np.float64))
        zz = _fma64(r, _GLIBC_C[0], _GLIBC_C[1])
        y = _fma64(r, _GLIBC_C[2], 1.0)
        y = _fma64(zz, r * r, y)
        y = (y * s).astype(np.float32).astype(np.float64)
    y = np.where(fin, y, np.where(xd >= 89, np.inf, np.where(np.isnan(xd), xd, 0.0)))
    return y.reshape(np.shape(x))


def rsqrt_div_sqrt(x: Any, fmt: Format = FP32) -> np.ndarray:
    """fl(1 / fl(sqrt(x))): two roundings (``1 / std::sqrt(v)``, torch's CPU norms; ``Vectorized::rsqrt``)."""
    with np.errstate(all="ignore"):
        return np.asarray(decode(cast(1.0 / sqrt_cr(x, fmt), fmt), fmt), np.float64).reshape(np.shape(x))


ELEMENTWISE_FNS = {"exp_cr": exp_cr, "log_cr": log_cr, "sqrt_cr": sqrt_cr, "rsqrt_cr": rsqrt_cr,
                   "rsqrt_div_sqrt": rsqrt_div_sqrt, "sleef_expf_u10": sleef_expf_u10, "torch_exp_u20": torch_exp_u20,
                   "torch_fexp_u20": torch_fexp_u20,
                   "glibc_expf": glibc_expf}


# ---- SLEEF's xlogf_u1 (Sleef_logf16_u10), AVX-512 branch: getexp / getmant and double-float steps with FMA ----

def _f(v: Any) -> np.ndarray:
    return np.asarray(v, np.float64).astype(np.float32)


def _two_sum32(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SLEEF dfadd2_vf2_vf_vf: s = a + b and its error, in float32 steps."""
    s = _f(a + b)
    v = _f(s - a)
    return s, _f(_f(a - _f(s - v)) + _f(b - v))


def _df_div(nx: np.ndarray, ny: np.ndarray, dx: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SLEEF dfdiv_vf2_vf2_vf2 (FMA form)."""
    t = _f(np.float32(1) / dx)
    s = _f(nx * t)
    u = fma32(t, nx, -s)
    v = fma32(-dy, t, fma32(-dx, t, np.float32(1)))
    return s, fma32(s, v, fma32(ny, t, u))


def sleef_logf_u10(x: Any, fmt: Format = FP32) -> np.ndarray:
    """SLEEF 3.x ``xlogf_u1`` (``Sleef_logf16_u10``, the AVX-512 build: getexp / getmant), bit for bit on positive
    finite normal arguments (0 gives -inf, +inf +inf, negatives and NaN NaN). ``fmt`` must be FP32."""
    if fmt != FP32:
        raise ValueError(f"sleef_logf_u10 is a float32 function; got fmt={fmt.name}: pass FP32 values")
    d = np.asarray(x, np.float64).astype(np.float32)
    with np.errstate(all="ignore"):
        ok = np.isfinite(d) & (d > 0)
        dd = np.where(ok, d, np.float32(1))
        e = np.floor(np.log2(_f(dd * _f(1.0 / 0.75)).astype(np.float64)))   # getexp: exact exponent of the product
        m = np.ldexp(np.frexp(dd.astype(np.float64))[0] * 2, 0)              # significand in [1, 2)
        m = _f(np.where(m >= 1.5, m / 2, m))                                 # getmant, interval [0.75, 1.5)
        ef = _f(e)
        # s = (ln2 hi, ln2 lo) * e (dfmul_vf2_vf2_vf)
        hi, lo = np.float32(0.69314718246459960938), np.float32(-1.904654323148236017e-09)
        sx = _f(hi * ef)
        sy = fma32(lo, ef, fma32(hi, ef, -sx))
        nx, ny = _two_sum32(np.float32(-1), m)
        dx, dy = _two_sum32(np.float32(1), m)
        xx, xy = _df_div(nx, ny, dx, dy)
        x2 = _f(xx * xx)
        t = np.float32(0.3027294874)
        t = fma32(t, x2, np.float32(0.3996108174))
        t = fma32(t, x2, np.float32(0.6666694880))
        # s = dfadd_vf2_vf2_vf2(s, dfscale(x, 2)); then dfadd_vf2_vf2_vf(s, x2 * x * t)
        bx, by = _f(xx * np.float32(2)), _f(xy * np.float32(2))
        s1 = _f(sx + bx)
        t1 = _f(_f(_f(_f(sx - s1) + bx) + sy) + by)
        c = _f(_f(x2 * xx) * t)
        s2 = _f(s1 + c)
        t2 = _f(_f(_f(s1 - s2) + c) + t1)
        r = _f(s2 + t2)
        r = np.where(ok, r, np.where(d == 0, np.float32(-np.inf), np.where(d == np.inf, np.float32(np.inf),
                                                                         np.float32(np.nan))))
    return r.astype(np.float64)


ELEMENTWISE_FNS["sleef_logf_u10"] = sleef_logf_u10
