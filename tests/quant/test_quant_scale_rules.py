"""Scale rules that keep their promise: ``absmax`` never clips amax with a coarse scale format
(E8M0, FP8), ``rceil`` is NVIDIA's power of two rounded up, ``floor`` is OCP MX's rule."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import numoracle as no
from numoracle.core.scalar import round_value
from numoracle.formats import E8M0FNU
from numoracle.quant.arith import div_round, div_values
from numoracle.quant.quantizer import quantize


def _data(seed: int, rows: int = 32, cols: int = 32, lo: float = -8, hi: float = 8) -> np.ndarray:
    """Normal data with per-row magnitudes 2^lo .. 2^hi (seeded)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, cols)) * np.exp2(rng.uniform(lo, hi, (rows, 1)))).astype(np.float32)


def _beyond_range(q) -> np.ndarray:
    """Where an element clips, judged without the library's flags: for floats t beyond the element
    format's overflow threshold in the element rounding mode; for integers round(t) outside the range."""
    t, p, fmt = q.scaled.astype(np.float64), q.params, q.fmt
    if fmt.is_integer:
        r = {"rne": np.rint, "ru": np.ceil, "rd": np.floor, "rtz": np.trunc}[p.rounding](t)
        return (r > p.qmax) | (r < p.qmin)
    out = np.zeros(t.shape, bool)
    for sign in (1, -1):
        thr, incl = fmt.overflow_threshold(p.rounding, sign=sign)
        a = np.abs(t) * 1.0
        side = np.sign(t) == sign
        out |= side & ((a > float(thr)) | ((a == float(thr)) & incl))
        assert Fraction(float(thr)) == thr  # the thresholds of these formats are float64 values
    return out


def _amax_rows(x: np.ndarray, block: int) -> np.ndarray:
    return np.abs(x).reshape(x.shape[0], -1, block).max(axis=2)


@pytest.mark.parametrize("elem", ["fp8_e4m3fn", "fp8_e5m2", "fp4_e2m1fn", "int8"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_absmax_e8m0_never_clips(elem, seed):
    x = _data(seed)
    q = quantize(x, elem, granularity=("block", 32), axis=1, scale_fmt="e8m0fnu")
    assert not q.clipped.any() and not _beyond_range(q).any()
    # the E8M0 scale nearest amax / M (what absmax gave before) does clip on this data: the test bites
    M = float(no.formats.format_of(elem).max_finite) if not elem.startswith("int") else 127.0
    amax = _amax_rows(x, 32)
    s_near = no.decode(div_round(amax, M, "e8m0fnu"), "e8m0fnu")
    assert np.any(amax / s_near > M * (1 + 2.0 ** -no.formats.format_of(elem).precision if not elem.startswith("int")
                                       else 1 + 0.5 / 127))
    # every scale is the nearest one, or the one above it (one E8M0 step: twice as large)
    s = q.scales.reshape(amax.shape)
    assert np.all((s == s_near) | (s == 2 * s_near))
    assert np.all(amax / s <= M * 2)


def test_issue_scenario_e8m0_1024_elements():
    x = _data(7, rows=32, cols=32)
    q = quantize(x, "fp8_e4m3fn", granularity=("block", 32), scale_fmt="e8m0fnu")
    assert q.codes.shape == x.shape
    assert int(q.clipped.sum()) == 0
    # every element with |x| <= amax keeps its value within E4M3's rounding of x / s
    v = no.dequantize(q)
    s = np.repeat(q.scales.reshape(32, 1), 32, axis=1)
    assert np.all(np.abs(v - x) <= s * 16 + 1e-30)  # half an ULP of E4M3's top binade (32) times s


@pytest.mark.parametrize("elem", ["fp8_e4m3fn", "int8", "fp4_e2m1fn"])
@pytest.mark.parametrize("kw", [{}, dict(reciprocal=True), dict(rounding="ru"), dict(rounding="rd"),
                                dict(compute="bf16")])
def test_absmax_fp8_scales_never_clip(elem, kw):
    x = _data(3, lo=0, hi=8)  # E4M3 scales hold amax / M for these magnitudes
    q = quantize(x, elem, granularity=("block", 16), axis=1, scale_fmt="fp8_e4m3fn", **kw)
    assert not q.clipped.any() and not _beyond_range(q).any()
    M = float(no.formats.format_of(elem).max_finite) if elem != "int8" else 127.0
    near = no.decode(div_round(_amax_rows(x, 16), M, "fp8_e4m3fn"), "fp8_e4m3fn")
    assert np.all(q.scales.reshape(near.shape) >= near)


def test_absmax_stochastic_rounding_keeps_t_inside():
    x = _data(4)
    rb = np.random.default_rng(5).integers(0, 2 ** 8, x.shape)
    q = quantize(x, "int8", granularity=("block", 32), axis=1, scale_fmt="e8m0fnu", rounding="sr", sr_bits=8,
                 random_bits=rb)
    assert np.all(np.abs(q.scaled) <= 127) and not q.clipped.any()


def test_absmax_fp32_scales_unchanged():
    """The default FP32 scale is fl32(amax / M), as numpy / PyTorch / ONNX compute it."""
    x = _data(6)
    for elem, M in (("int8", 127), ("fp8_e4m3fn", 448)):
        q = quantize(x, elem, granularity="channel", axis=0)
        amax = np.abs(x).max(axis=1).astype(np.float32)
        assert np.array_equal(q.scales.ravel(), (amax / np.float32(M)).astype(np.float64))
        assert not q.clipped.any()


def test_rceil_is_the_power_of_two_above():
    x = _data(8)
    q = quantize(x, "fp8_e4m3fn", scale_rule="rceil")
    assert q.params.scale_fmt == E8M0FNU and q.params.granularity == ("block", 32)
    amax = _amax_rows(x, 32)
    want = np.exp2(np.ceil(np.log2(amax.astype(np.float64) / 448)))
    exact = [Fraction(float(a)) / 448 <= Fraction(float(w)) < Fraction(float(a)) / 224
             for a, w in zip(amax.ravel(), want.ravel())]
    assert all(exact)  # the float64 log2 above is exact enough here; checked with Fractions
    assert np.array_equal(q.scales.reshape(amax.shape), want) and not q.clipped.any()


def test_floor_is_mx_and_can_clip():
    top = np.float32([1.9375 * 8] + [1.0] * 31)
    f = quantize(top, "fp8_e4m3fn", scale_rule="floor")
    m = quantize(top, "fp8_e4m3fn", scale_rule="mx")
    assert f.params.scale_rule == "mx" and np.array_equal(f.codes, m.codes)
    assert f.clipped[0]  # OCP's floor rule: amax / X = 496 saturates to 448
    r = quantize(top, "fp8_e4m3fn", scale_rule="rceil")
    assert not r.clipped.any() and r.scales.item() == 2 * f.scales.item()
    a = quantize(top, "fp8_e4m3fn", granularity=("block", 32), scale_fmt="e8m0fnu")
    assert not a.clipped.any() and a.scales.item() == r.scales.item()


def test_unknown_rule_names_the_aliases():
    with pytest.raises(ValueError, match="valid: absmax, pow2, rceil, mx, nvfp4 .*'floor'"):
        quantize(np.float32([1.0]), "int8", scale_rule="ceil")


def test_compute_rounding_is_modelled():
    """t = x / s rounds in compute: a scale that keeps amax / s <= M exactly may still need a step
    when 1 / s rounds up (reciprocal=True) or compute rounds up; after all roundings nothing clips."""
    x = _data(9, lo=0, hi=6)
    for kw in (dict(reciprocal=True, compute_rounding="ru"), dict(compute_rounding="ru"),
               dict(compute="fp16", compute_rounding="ru")):
        q = quantize(x, "int8", granularity=("block", 32), axis=1, scale_fmt="fp8_e4m3fn", rounding="ru", **kw)
        t = q.scaled.astype(np.float64)
        assert np.all(np.ceil(t) <= 127) and np.all(np.ceil(t) >= -127), kw
        s = np.repeat(q.scales.reshape(-1, 1), 32, axis=1).reshape(x.shape)
        direct = div_values(x.astype(np.float64), s, q.params.compute, "ru")
        if not q.params.reciprocal:
            assert np.array_equal(direct, t)


# ---- absmax never clips, however fine the scale format is next to the compute spacing ----------------
_IROUND = {"rne": round, "ru": math.ceil, "rd": math.floor, "rtz": math.trunc}


def _t_exact(a: float, s: float, compute: str, mode: str = "rne", reciprocal: bool = False) -> Fraction:
    """Step 3 with Fractions and the exact twin (independent of quant/arith.py)."""
    def rnd(v: Fraction) -> Fraction:
        return Fraction(float(no.decode(np.array(round_value(v, compute, rounding=mode), np.uint64), compute)))
    if reciprocal:
        return rnd(Fraction(a) * rnd(1 / Fraction(s)))
    return rnd(Fraction(a) / Fraction(s))


def _amax_code_unclipped(q, a: float, s: float, kw: dict) -> tuple[bool, int]:
    """(whether +-amax stays inside the range with scale s, the unclipped rounding of amax / s)."""
    p = q.params
    r = _IROUND[kw.get("rounding", "rne")](_t_exact(a, s, p.compute.name, reciprocal=p.reciprocal))
    rn = _IROUND[kw.get("rounding", "rne")](_t_exact(-a, s, p.compute.name, reciprocal=p.reciprocal))
    return (r <= p.qmax and rn >= p.qmin), r


FINE_SCALES = [
    ("int16", dict(compute="fp16")),
    ("int16", dict(compute="bf16")),
    ("int32", dict(scale_fmt="fp64", rounding="ru")),
    ("int32", dict(scale_fmt="fp64")),
    ("int8", dict(compute="fp8_e4m3fn")),
    ("int8", dict(compute="fp8_e5m2")),
    ("int8", dict(compute="fp8_e4m3fn", reciprocal=True)),
    ("int16", dict(compute="bf16", rounding="ru", reciprocal=True)),
]


@pytest.mark.parametrize("elem,kw", FINE_SCALES)
def test_absmax_never_clips_with_a_coarse_compute(elem, kw):
    """The scale format (FP32, FP64) is much finer than the compute spacing at qmax: the fit needs
    hundreds to billions of one-value steps; the search still lands on the smallest non-clipping scale."""
    rng = np.random.default_rng(11)
    amaxes = [1.0, 3.0, float(np.float32(rng.uniform(0.5, 2.0))), float(np.float32(rng.uniform(1e-3, 1e3)))]
    sfmt = no.formats.format_of(kw.get("scale_fmt", "fp32"))
    M = 2 ** (no.formats.format_of(elem).bits - 1) - 1
    moved = 0
    for a in amaxes:
        x = np.float32([a, -a, a / 3])
        q = quantize(x, elem, **kw)
        s = float(q.scales.item())
        ok, r = _amax_code_unclipped(q, a, s, kw)
        assert ok and not q.clipped.any() and not _beyond_range(q).any(), (a, s)
        assert int(q.values()[0]) == r and int(q.values()[1]) == -r  # strictly the rounded t, not saturated
        s0 = float(no.decode(np.array(round_value(Fraction(a) / M, sfmt), np.uint64), sfmt))  # fl(amax / M)
        assert s >= s0
        if s > s0:  # moved: to the smallest value of scale_fmt that does not clip (the one below does)
            moved += 1
            c = int(q.scale_codes.item())
            below = float(no.decode(np.array([c - 1], np.uint64).astype(sfmt.code_dtype), sfmt)[0])
            assert not _amax_code_unclipped(q, a, below, kw)[0], (a, s, below)
        else:
            assert _amax_code_unclipped(q, a, s0, kw)[0]
    assert moved  # fl(amax / M) clips for some of these amaxes: the test bites


def test_absmax_fine_scales_per_block():
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((4, 16)) * np.exp2(rng.integers(-4, 4, (4, 1)))).astype(np.float32)
    q = quantize(x, "int16", granularity=("group", 8), compute="fp16")
    assert not q.clipped.any()
    amax = np.abs(x).reshape(4, 2, 8).max(axis=2)
    for a, s in zip(amax.ravel(), q.scales.ravel()):
        assert _amax_code_unclipped(q, float(a), float(s), {})[0]
        below = float(np.nextafter(np.float32(s), np.float32(0)))
        assert not _amax_code_unclipped(q, float(a), below, {})[0]
    assert (np.abs(q.values()) == 32752).sum() == 8  # the largest FP16 value below 32767.5, one per block


def test_absmax_no_scale_fits_raises():
    """amax = 125 * 448: E4M3's largest scale 448 gives t = 125, which E4M3 compute rounds to 128 > 127."""
    x = np.float32([56000.0, 1.0])
    kw = dict(compute="fp8_e4m3fn", scale_fmt="fp8_e4m3fn")
    with pytest.raises(ValueError, match=r"no scale of scale_fmt=fp8_e4m3fn keeps amax 56000.0 .* largest value "
                                         r"448 gives t = amax / s = 128.0.*cannot hold 127.*compute='fp32'.*"
                                         r"scale_range='clamp'"):
        quantize(x, "int8", **kw)
    c = quantize(x, "int8", scale_range="clamp", **kw)  # asked for: the largest scale, and the block clips
    assert c.scales.item() == 448 and c.clipped[0]
    q = quantize(x, "int8", scale_fmt="fp8_e4m3fn")  # FP32 compute holds 127: t = 125 fits
    assert q.scales.item() == 448 and not q.clipped.any() and int(q.values()[0]) == 125
