"""The formats users hold: every ml_dtypes float type, torch's packed float4_e2m1fn_x2, torch quantized
tensors in the quantization checks, and JAX arrays (tested where jax is installed; skipped otherwise)."""

from __future__ import annotations

import warnings
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import numoracle as no
from numoracle.core.engine.codekeys import is_nan
from numoracle.core.formats.interop import as_native, native_dtype, pack_fp4x2, to_codes, unpack_fp4x2
from numoracle.formats import BF16, FP4_E2M1FN, FP8_E3M4, FP8_E4M3, FP8_E4M3FN
from optional import needs


def _ml_float_types() -> list[str]:
    out = []
    for name, t in vars(ml_dtypes).items():
        if isinstance(t, type) and name.startswith(("float", "bfloat")):
            try:
                if np.dtype(t).kind == "V":
                    out.append(name)
            except TypeError:
                continue
    return sorted(out)


ML_FLOATS = _ml_float_types()


def _ml_int_types() -> list[str]:
    return sorted(n for n, t in vars(ml_dtypes).items()
                  if isinstance(t, type) and n.startswith(("int", "uint")) and not n.endswith("info"))


ML_INTS = _ml_int_types()


def test_the_ml_dtypes_floats_are_found():
    assert {"float8_e4m3", "float8_e3m4", "float8_e4m3fn", "float8_e8m0fnu", "bfloat16"} <= set(ML_FLOATS)
    assert {"int4", "uint4"} <= set(ML_INTS)


@pytest.mark.parametrize("name", ML_FLOATS)
def test_every_ml_dtypes_float_resolves_with_its_constants(name):
    t = getattr(ml_dtypes, name)
    f = no.formats.format_of(np.dtype(t))
    assert no.formats.format_of(name) == f  # the library's own name means what the library means
    assert native_dtype(f) == np.dtype(t)
    fi = ml_dtypes.finfo(t)
    assert f.max_finite == Fraction(float(fi.max))
    assert f.min_normal == Fraction(float(fi.smallest_normal))
    if f.has_subnormals:
        assert f.min_subnormal == Fraction(float(fi.smallest_subnormal))
    assert f.eps == Fraction(float(fi.eps))


def test_float8_e5m3fnu_every_code():
    """ml_dtypes 0.7's unsigned E5M3 (subnormals, +0, no inf, NaN 0xFF), code by code and from every FP16 value."""
    fmt = no.formats.format_of("fp8_e5m3fnu")
    assert (fmt.signed, fmt.has_inf, fmt.nan, fmt.has_subnormals) == (False, False, "fn", True)
    assert fmt.max_finite == 114688 and fmt.min_subnormal == Fraction(1, 2**17)
    if not hasattr(ml_dtypes, "float8_e5m3fnu"):
        assert native_dtype(fmt) is None  # older ml_dtypes: the format is there, the dtype is not
        return
    t = ml_dtypes.float8_e5m3fnu
    codes = np.arange(256, dtype=np.uint8)
    lib, ours = codes.view(t).astype(np.float64), no.decode(codes, fmt)
    assert np.array_equal(np.isnan(lib), np.isnan(ours)) and np.array_equal(lib[~np.isnan(lib)], ours[~np.isnan(ours)])
    src = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        theirs = src.astype(t).view(np.uint8)
    mine = no.cast(src, fmt)
    nan = is_nan(mine, fmt)
    assert np.array_equal(nan, is_nan(theirs, fmt)) and np.array_equal(mine[~nan], theirs[~nan])
    assert no.decode(no.cast(np.float32([-1.0, -0.0]), fmt), fmt)[1] == 0  # negatives are NaN, -0 is +0
    assert np.isnan(no.decode(no.cast(np.float32([-1.0]), fmt), fmt)[0])


@pytest.mark.parametrize("name", ML_INTS)
def test_every_ml_dtypes_int_resolves_or_is_refused_by_name(name):
    """int2/uint2/int4/uint4 resolve (their codes masked to their bits); 1-bit types are refused by name."""
    t = getattr(ml_dtypes, name)
    ii = ml_dtypes.iinfo(t)
    try:
        f = no.formats.format_of(np.dtype(t))
    except ValueError as e:
        assert name in ("int1", "uint1") and name in str(e) and "no numoracle format" in str(e)
        with pytest.raises(ValueError, match="unknown format"):
            no.formats.format_of(name)
        return
    assert f.is_integer and no.formats.format_of(name) is f and f.name == name
    assert (f.min_value, f.max_value) == (int(ii.min), int(ii.max))
    values = np.arange(int(ii.min), int(ii.max) + 1)
    codes, fmt = to_codes(values.astype(t))
    assert fmt is f and no.decode(codes, f).tolist() == values.tolist()


@pytest.mark.parametrize("name, fmt, max_finite", [("float8_e4m3", FP8_E4M3, 240),
                                                   ("float8_e3m4", FP8_E3M4, Fraction(31, 2))])
def test_ieee_style_fp8_every_code(name, fmt, max_finite):
    assert fmt.has_inf and fmt.nan == "ieee" and fmt.has_subnormals and fmt.max_finite == max_finite
    assert no.formats.format_of(name) is fmt
    codes = np.arange(256, dtype=np.uint8)
    lib = codes.view(getattr(ml_dtypes, name)).astype(np.float64)
    ours = no.decode(codes, fmt)
    assert np.array_equal(np.isnan(lib), np.isnan(ours))
    assert np.array_equal(lib[~np.isnan(lib)], ours[~np.isnan(ours)])
    # every FP16 value into the format: ml_dtypes' cast (exact through float32) against the engine
    src = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        theirs = src.astype(getattr(ml_dtypes, name)).view(np.uint8)
    mine = no.cast(src, fmt)
    nan = is_nan(mine, fmt)
    assert np.array_equal(nan, is_nan(theirs, fmt))
    assert np.array_equal(mine[~nan], theirs[~nan])
    assert as_native(mine, fmt).dtype == np.dtype(getattr(ml_dtypes, name))


def test_ambiguous_names_still_ask():
    with pytest.raises(ValueError, match="ambiguous; say which: fp8_e4m3fn, fp8_e4m3, fp8_e4m3fnuz"):
        no.formats.format_of("e4m3")
    assert no.formats.format_of("float8_e4m3fn") is FP8_E4M3FN  # OCP E4M3 (no inf) keeps its own name


# ---- torch ---------------------------------------------------------------------------------------------
def test_fp4x2_pack_order_by_hand():
    packed = np.array([[0x21, 0x7F]], np.uint8)  # byte 0: low nibble 0x1 (0.5), high 0x2 (1.0)
    codes = unpack_fp4x2(packed)
    assert codes.tolist() == [[0x1, 0x2, 0xF, 0x7]]
    assert no.decode(codes, "fp4_e2m1fn").tolist() == [[0.5, 1.0, -6.0, 6.0]]
    assert np.array_equal(pack_fp4x2(codes), packed)
    with pytest.raises(ValueError, match="even length"):
        pack_fp4x2(np.zeros(3, np.uint8))


def test_torch_float4_e2m1fn_x2_unpacks_into_two_codes_a_byte():
    torch = needs("torch")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("this torch has no float4_e2m1fn_x2")
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 16, (3, 8)).astype(np.uint8)
    t = torch.from_numpy(pack_fp4x2(codes)).view(torch.float4_e2m1fn_x2)
    assert t.shape == (3, 4)
    got, fmt = to_codes(t)
    assert fmt is FP4_E2M1FN and no.formats.format_of(t.dtype) is FP4_E2M1FN
    assert got.shape == (3, 8) and np.array_equal(got, codes)


def _torch_quant():
    torch = needs("torch")
    warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
    return torch


def _away_from_ties(shape, scales, seed=0):
    """Values k + 1/4 times their scale: every kernel's rounding (x / s or x * (1/s)) gives k."""
    rng = np.random.default_rng(seed)
    k = rng.integers(-100, 100, shape)
    return ((k + 0.25) * scales).astype(np.float32)


def test_torch_per_channel_qint8_passes_and_a_wrong_scale_fails():
    torch = _torch_quant()
    scales = np.array([[0.02], [0.01], [0.05]], np.float32)
    x = _away_from_ties((3, 16), scales)
    q = no.quantize(x, "int8", granularity="channel", axis=0)
    s = torch.from_numpy(np.asarray(q.scales, np.float64).ravel())
    t = torch.quantize_per_channel(torch.from_numpy(x), s, torch.zeros(3, dtype=torch.int64), 0, torch.qint8)
    r = no.assert_quantized_close(t, x, granularity="channel", axis=0)  # fmt read from the tensor
    assert r.passed and r.counts["exact"] == x.size
    bad = torch.quantize_per_channel(torch.from_numpy(x), s * 1.25, torch.zeros(3, dtype=torch.int64), 0,
                                     torch.qint8)
    with pytest.raises(AssertionError, match="scale"):
        no.assert_quantized_close(bad, x, granularity="channel", axis=0, msg="per-channel weights")
    with pytest.raises(ValueError, match="per channel along axis 0"):
        no.check_quantized_close(t, x, granularity="channel", axis=1)
    with pytest.raises(TypeError, match="int8"):
        no.check_quantized_close(t, x, fmt="uint8", granularity="channel", axis=0)


def test_torch_per_tensor_quint8_asymmetric():
    torch = _torch_quant()
    x = np.random.default_rng(1).uniform(-1, 3, (4, 8)).astype(np.float32)
    q = no.quantize(x, "uint8", symmetric=False)
    scale, zp = float(np.asarray(q.scales).item()), int(np.asarray(q.zero_points).item())
    t = torch.quantize_per_tensor(torch.from_numpy(x), scale, zp, torch.quint8)
    r = no.check_quantized_close(t, x, symmetric=False, allow_outliers=x.size)  # ties may round either way
    assert r.passed and r.counts["mismatch"] == 0
    wrong_zp = torch.quantize_per_tensor(torch.from_numpy(x), scale, zp + 3, torch.quint8)
    assert not no.check_quantized_close(wrong_zp, x, symmetric=False).passed


# ---- JAX ------------------------------------------------------------------------------------------------
def test_jax_arrays_through_the_array_protocol():
    jnp = needs("jax", "jax.numpy")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 32)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((32, 3)).astype(ml_dtypes.bfloat16)
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    codes, fmt = to_codes(ja)
    assert fmt is BF16 and np.array_equal(codes, a.view(np.uint16))
    out = jnp.matmul(ja, jb, preferred_element_type=jnp.float32)
    assert no.assert_matmul_close(out, ja, jb, acc="fp32").passed
