"""Conformance: numoracle's MX quantisation against torchao's (``torchao.prototype.mx_formats``: ``to_mx``, eager,
on CPU), and torchao's NVFP4 recipe (``nvfp4_quantize``) restated with numoracle's casts.

MX: ``scale_rule="mx"`` against ``ScaleCalculationMode.FLOOR`` and ``"rceil"`` against ``RCEIL``, for FP8 E4M3 /
E5M2, FP6 E2M3 / E3M2 and FP4 E2M1, blocks of 32: scale codes and element codes, bit for bit. Every mismatch must
fall in one of torchao's four known deviations (docs/conformance.md, "torchao"), each checked against its
explanation. Default tier 2^16 random elements per (format, rule) plus boundary blocks; ``-m slow`` 2^20.
"""

from __future__ import annotations

import numpy as np
import pytest

from numoracle import cast, decode, quantize
from numoracle.formats import format_of
from optional import needs

f32 = np.float32
FORMATS = ["fp8_e4m3fn", "fp8_e5m2", "fp6_e2m3fn", "fp6_e3m2fn", "fp4_e2m1fn"]
EMAX = {"fp8_e4m3fn": 8, "fp8_e5m2": 15, "fp6_e2m3fn": 2, "fp6_e3m2fn": 4, "fp4_e2m1fn": 2}


@pytest.fixture(scope="module")
def tao():
    needs("torch")
    mx = needs("torchao", "torchao.prototype.mx_formats.mx_tensor")
    return mx


def _torch_dtype(name: str):
    import torch
    from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2

    return {"fp8_e4m3fn": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2, "fp6_e2m3fn": DTYPE_FP6_E2M3,
            "fp6_e3m2fn": DTYPE_FP6_E3M2, "fp4_e2m1fn": torch.float4_e2m1fn_x2}[name]


def _to_mx(tao, x: np.ndarray, name: str, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """torchao's (scale codes (blocks,), element codes x.shape) as uint8."""
    import torch
    from torchao.prototype.mx_formats.config import ScaleCalculationMode

    mode = ScaleCalculationMode.FLOOR if rule == "mx" else ScaleCalculationMode.RCEIL
    s, d = tao.to_mx(torch.from_numpy(x), _torch_dtype(name), 32, mode)
    if name == "fp4_e2m1fn":
        b = d.numpy()
        codes = np.stack([b & 0xF, b >> 4], -1).reshape(x.shape)  # low nibble first
    else:
        codes = d.view(torch.uint8).numpy() if name.startswith("fp8") else d.numpy()
    return s.view(torch.uint8).numpy().ravel(), codes.reshape(-1, 32)


def _random(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * np.exp(rng.uniform(-60, 60, n // 32)).repeat(32)).astype(f32).reshape(-1, 32)


def _boundary(name: str) -> np.ndarray:
    """Zero blocks; amax at M 2^k and one FP32 ulp either side, k over E8M0's range; every midpoint of the element
    format and its FP32 neighbours at three scales; blocks holding NaN, +inf, -inf."""
    rng = np.random.default_rng(1)
    fmt = format_of(name)
    vals = np.unique(np.abs(decode(np.arange(1 << fmt.bits).astype(fmt.code_dtype), fmt).astype(np.float64)))
    vals = vals[np.isfinite(vals)]
    mids = (vals[:-1] + vals[1:]) / 2
    big = float(fmt.max_finite)
    blocks = [np.zeros(32)]
    for k in range(-140, 127 - int(np.ceil(np.log2(big)))):  # a and its FP32 neighbours finite
        a = f32(big * 2.0**k)
        for v in (a, np.nextafter(a, f32(np.inf)), np.nextafter(a, f32(0))):
            b = np.clip(rng.standard_normal(32) * 0.3, -0.9, 0.9) * float(v)
            b[0] = v
            blocks.append(b)
    m = np.concatenate([mids, np.nextafter(mids.astype(f32), f32(0)), np.nextafter(mids.astype(f32), f32(9))])
    for j in (-20, 0, 7):
        for i in range(0, len(m), 31):
            part = m[i:i + 31] * 2.0**j * rng.choice([-1, 1], len(m[i:i + 31]))
            b = np.zeros(32)
            b[0], b[1:1 + len(part)] = big * 2.0**j, part
            blocks.append(b)
    for bad in (np.nan, np.inf, -np.inf):
        b = rng.standard_normal(32)
        b[5] = bad
        blocks.append(b)
    return np.stack(blocks).astype(f32)


def _classify(tao, x: np.ndarray, name: str, rule: str) -> dict[str, int]:
    """Compare; assert every mismatching block is one of torchao's known deviations; count blocks per class."""
    import torch

    ts, tc = _to_mx(tao, x, name, rule)
    q = quantize(x.reshape(-1), name, scale_rule=rule)  # blocks of 32 along the flattened tensor
    ns, nc = np.asarray(q.scale_codes).astype(np.uint8).ravel(), np.asarray(q.codes).astype(np.uint8).reshape(-1, 32)
    bad = (ts != ns) | (tc != nc).any(axis=1)
    nan, inf = np.isnan(x).any(axis=1), np.isinf(x).any(axis=1) & ~np.isnan(x).any(axis=1)
    zero_code = ns == 0
    # (b) RCEIL: torch.log2 of the FP32 descale, rounded to FP32, is an integer where the exact one is above it
    descale = torch.from_numpy(np.abs(x).max(axis=1)) / float(format_of(name).max_finite)
    low_log = (rule == "rceil") & (torch.ceil(torch.log2(descale)).numpy() + 127 == ns.astype(np.float64) - 1)
    classes = {"nan block": bad & nan, "inf block": bad & inf, "scale code 0": bad & zero_code & ~nan & ~inf,
               "rceil log2": bad & low_log & ~zero_code & ~nan & ~inf}
    other = bad & ~np.logical_or.reduce(list(classes.values()))
    assert not other.any(), (f"{name} {rule}: {int(other.sum())} unexplained block(s), first "
                             f"{np.flatnonzero(other)[:5]}: torchao scale {ts[other][:5]}, numoracle {ns[other][:5]}")
    # each class as its explanation says
    assert np.all(ns[nan] == 255) and np.all(ts[nan] == 255)  # both NaN scales: the blocks dequantise to NaN
    assert np.all(ns[inf] == 255)  # numoracle: a NaN scale; torchao reads inf's exponent field as 128
    assert np.all(ts[classes["inf block"]] == (254 if rule == "rceil" else 127 + 128 - EMAX[name]))
    z = classes["scale code 0"]
    assert np.all(ts[z] == 0)  # the stored scale is 2^-127 in both, but torchao's elements are not scaled by it
    if z.any() and rule == "mx":  # FLOOR divides by FP32's smallest normal 2^-126 instead
        want = np.asarray(cast(x[z].astype(np.float64) / 2.0**-126, name, overflow="saturate")).astype(np.uint8)
        assert np.array_equal(tc[z], want)
    if z.any() and rule == "rceil":  # RCEIL multiplies by 1.0 instead of 2^127 (exponent 0 taken as "no scale")
        want = np.asarray(cast(x[z].astype(np.float64), name, overflow="saturate")).astype(np.uint8)
        assert np.array_equal(tc[z], want)
    lo = classes["rceil log2"]
    assert np.all(ts[lo] == ns[lo] - 1)
    return {k: int(v.sum()) for k, v in classes.items()} | {"blocks": int(bad.size)}


@pytest.mark.parametrize("rule", ["mx", "rceil"])
@pytest.mark.parametrize("name", FORMATS)
def test_random_blocks_bit_for_bit(tao, name, rule):
    counts = _classify(tao, _random(1 << 16, 3), name, rule)
    assert counts["rceil log2"] + counts["nan block"] + counts["inf block"] == 0


@pytest.mark.parametrize("rule", ["mx", "rceil"])
@pytest.mark.parametrize("name", FORMATS)
def test_boundary_blocks_only_known_deviations(tao, name, rule):
    counts = _classify(tao, _boundary(name), name, rule)
    assert counts["inf block"] == 2 and counts["scale code 0"] > 0
    assert (counts["rceil log2"] > 0) == (rule == "rceil")


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["mx", "rceil"])
@pytest.mark.parametrize("name", FORMATS)
def test_random_blocks_bit_for_bit_2_20(tao, name, rule):
    counts = _classify(tao, _random(1 << 20, 4), name, rule)
    assert counts["rceil log2"] + counts["nan block"] + counts["inf block"] == 0


def _nvfp4_restated(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, f32]:
    """torchao 0.18.0's nvfp4_quantize with per_tensor_scale = per_tensor_amax_to_scale(amax), restated in FP32
    numpy with numoracle's casts: G = fl(amax / 2688) (the decode convention, but not TransformerEngine's
    fl(1 / fl(2688 / amax))); d = e4m3(clamp(fl(fl(amax_b / 6) / G), 2^-6, 448)); t = clamp(fl(x * fl(fl(1 / G) /
    d)), -6, 6); e2m1(t). Returns (block scale codes, element codes, G)."""
    g = f32(np.abs(x).max()) / f32(448 * 6)
    blk = x.reshape(x.shape[0], -1, 16)
    s = (np.abs(blk).max(axis=2) / f32(6)).astype(f32)
    s = np.clip((s / g).astype(f32), f32(2.0**-6), f32(448))
    d_codes = np.asarray(cast(s.astype(np.float64), "fp8_e4m3fn"))
    d = decode(d_codes, "fp8_e4m3fn").astype(f32)
    r = ((f32(1) / g) / d).astype(f32)
    t = np.clip((blk * r[..., None]).astype(f32), f32(-6), f32(6)).reshape(x.shape)
    return d_codes, np.asarray(cast(t.astype(np.float64), "fp4_e2m1fn")), g


@pytest.mark.parametrize("n", [1 << 14, pytest.param(1 << 20, marks=pytest.mark.slow)])
def test_nvfp4_recipe_restated_bit_for_bit(tao, n):
    import torch

    nv = needs("torchao", "torchao.prototype.mx_formats.nvfp4_tensor")
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((n // 256, 256)) * np.exp(rng.uniform(-4, 4, (n // 256, 16))).repeat(16, 1)).astype(f32)
    x[0, :16] = 0  # a zero block: d clamps to E4M3's smallest normal, 2^-6
    x[1, :16] = (decode(np.arange(8, dtype=np.uint8), "fp4_e2m1fn")[[1, 2, 3, 4, 5, 6, 7, 7]].repeat(2)
                 + 0.25).astype(f32)  # near midpoints
    t = torch.from_numpy(x)
    amax = torch.amax(torch.abs(t))
    scales, data = nv.nvfp4_quantize(t, 16, nv.per_tensor_amax_to_scale(amax))
    d_codes, codes, g = _nvfp4_restated(x)
    assert float(nv.per_tensor_amax_to_scale(amax)) == float(g)
    assert np.array_equal(scales.view(torch.uint8).numpy(), d_codes.astype(np.uint8))
    b = data.numpy()
    assert np.array_equal(np.stack([b & 0xF, b >> 4], -1).reshape(x.shape), codes.astype(np.uint8))
