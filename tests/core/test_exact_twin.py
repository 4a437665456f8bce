"""The two twins of the engine held to docs/semantics.md and to each other.

* hand-checked values of ``exact.value_of`` / ``exact.round_value`` (and the same rows through
  ``valuetable.table_cast`` where the destination has a table);
* the two decoders (Fraction and float64) agree on every code of every format of <= 16 bits;
* ``exact.round_value`` and ``valuetable.table_cast`` agree on boundary-weighted samples
  (values, midpoints and their float64 neighbours of every destination of <= 16 bits) under
  every rounding mode and policy;
* ``exact.neighbours`` is consistent with the value tables and with the directed modes;
* policy errors and flags.
"""

from __future__ import annotations

import math
from fractions import Fraction as F

import numpy as np
import pytest

from numoracle.core import scalar as X
from numoracle.core.formats.format import (
    BF16,
    E8M0FNU,
    FP4_E2M1FN,
    FP6_E2M3FN,
    FP6_E3M2FN,
    FP8_E4M3B11FNUZ,
    FP8_E4M3FN,
    FP8_E4M3FNUZ,
    FP8_E5M2,
    FP8_E5M2FNUZ,
    FP16,
    FP32,
    FP64,
    INT4,
    INT8,
    INT16,
    INT32,
    INT64,
    TF32,
    UINT4,
    UINT8,
    UINT64,
    registry,
)
from numoracle.core.formats.policy import Flags
from numoracle.core.twins import valuetable as V
from policies import MODES, SMALL, nan_tos, overflows  # noqa: F401


def policies(dst):
    """Every deterministic mode x overflow, then ftz / nan_to / sr variants."""
    out = [dict(rounding=m, overflow=o) for m in MODES for o in overflows(dst)]
    if not dst.is_integer:
        out += [dict(rounding=m, ftz=True) for m in ("rne", "ru", "rd", "rto")]
    if dst.is_integer or not dst.has_nan:
        out += [dict(nan_to=n) for n in ("max", "zero", "min")]
    return out


P2 = F(2)
# ---- hand-checked values ------------------------------------------------------------------
VALUES = [
    (FP16, 0x3C00, F(1)), (FP16, 0x0001, P2**-24), (FP16, 0x03FF, 1023 * P2**-24), (FP16, 0x7BFF, F(65504)),
    (FP16, 0x8000, X.NEG_ZERO), (FP16, 0x0000, F(0)), (FP16, 0x7C00, X.POS_INF), (FP16, 0xFC00, X.NEG_INF),
    (FP16, 0x7E01, X.NAN), (FP16, 0xFD00, X.NAN), (BF16, 0x7F7F, 255 * P2**120), (BF16, 0x0001, P2**-133),
    (FP8_E4M3FN, 0x7E, F(448)), (FP8_E4M3FN, 0x7F, X.NAN), (FP8_E4M3FN, 0xFF, X.NAN), (FP8_E4M3FN, 0xFE, F(-448)),
    (FP8_E4M3FN, 0x01, P2**-9), (FP8_E4M3FN, 0x78, F(256)), (FP8_E5M2, 0x7B, F(57344)), (FP8_E5M2, 0x7C, X.POS_INF),
    (FP8_E4M3FNUZ, 0x80, X.NAN), (FP8_E4M3FNUZ, 0x7F, F(240)), (FP8_E4M3FNUZ, 0xFF, F(-240)),
    (FP8_E4M3FNUZ, 0x01, P2**-10), (FP8_E5M2FNUZ, 0x7F, F(57344)), (FP8_E5M2FNUZ, 0x01, P2**-17),
    (FP8_E4M3B11FNUZ, 0x7F, F(30)), (FP8_E4M3B11FNUZ, 0x01, P2**-13), (FP6_E3M2FN, 0x1F, F(28)),
    (FP6_E3M2FN, 0x3F, F(-28)), (FP6_E3M2FN, 0x01, P2**-4), (FP6_E2M3FN, 0x1F, F(15, 2)), (FP6_E2M3FN, 0x01, F(1, 8)),
    (FP6_E2M3FN, 0x20, X.NEG_ZERO), (FP4_E2M1FN, 0x7, F(6)), (FP4_E2M1FN, 0x1, F(1, 2)), (FP4_E2M1FN, 0xF, F(-6)),
    (E8M0FNU, 0x00, P2**-127), (E8M0FNU, 0x7F, F(1)), (E8M0FNU, 0xFE, P2**127), (E8M0FNU, 0xFF, X.NAN),
    (INT4, 0xF, -1), (INT4, 0x8, -8), (UINT4, 0xF, 15), (INT8, 0x80, -128), (UINT8, 0xFF, 255),
    (FP32, 0x00000001, P2**-149), (FP32, 0x7F7FFFFF, (2**24 - 1) * P2**104), (TF32, 0x3FE00, X.NAN),
    (FP64, 0x0000000000000001, P2**-1074), (INT64, 1 << 63, -(1 << 63)), (UINT64, (1 << 64) - 1, (1 << 64) - 1),
]


@pytest.mark.parametrize("fmt,code,value", VALUES, ids=lambda v: hex(v) if isinstance(v, int) else str(v))
def test_value_of_hand_checked(fmt, code, value):
    got = X.value_of(code, fmt)
    assert got == value and type(got) is type(value)


def test_value_of_daz():
    assert X.value_of(0x8001, FP16, daz=True) == X.NEG_ZERO
    assert X.value_of(0x0001, FP16, daz=True) == 0
    assert X.value_of(0x0400, FP16, daz=True) == P2**-14
    assert X.value_of(0x00, E8M0FNU, daz=True) == P2**-127  # E8M0 has no subnormals
    with pytest.raises(ValueError):
        X.value_of(0x100, FP8_E4M3FN)


NAN, INF = float("nan"), float("inf")
# (value, destination, policy, expected code)
ROUNDS = [
    # FP16: overflow after rounding, modes, subnormals
    (65519, FP16, {}, 0x7BFF), (65520, FP16, {}, 0x7C00), (F(6551999, 100), FP16, {}, 0x7BFF),
    (65520, FP16, dict(rounding="rtz"), 0x7BFF), (65520, FP16, dict(rounding="rna"), 0x7C00),
    (65536, FP16, dict(rounding="rto"), 0x7BFF), (-65520, FP16, {}, 0xFC00),
    (65505, FP16, dict(rounding="ru"), 0x7C00), (-65505, FP16, dict(rounding="ru"), 0xFBFF),
    (-65505, FP16, dict(rounding="rd"), 0xFC00), (65505, FP16, dict(rounding="rd"), 0x7BFF),
    (65520, FP16, dict(overflow="saturate"), 0x7BFF), (1e6, FP16, dict(overflow="saturate"), 0x7BFF),
    (1 + P2**-11, FP16, {}, 0x3C00), (1 + P2**-11, FP16, dict(rounding="rna"), 0x3C01),
    (1 + 3 * P2**-11, FP16, {}, 0x3C02), (1 + P2**-12, FP16, dict(rounding="rto"), 0x3C01),
    (1 + P2**-10 + P2**-12, FP16, dict(rounding="rto"), 0x3C01),
    (1 + 2 * P2**-10 + P2**-12, FP16, dict(rounding="rto"), 0x3C03), (F(1), FP16, dict(rounding="rto"), 0x3C00),
    (P2**-24, FP16, {}, 0x0001), (P2**-25, FP16, {}, 0x0000), (P2**-25, FP16, dict(rounding="rna"), 0x0001),
    (-P2**-25, FP16, {}, 0x8000), (3 * P2**-25, FP16, {}, 0x0002), (P2**-26, FP16, dict(rounding="ru"), 0x0001),
    (-P2**-26, FP16, dict(rounding="ru"), 0x8000), (-P2**-26, FP16, dict(rounding="rd"), 0x8001),
    (P2**-26, FP16, dict(rounding="rto"), 0x0001),
    (P2**-15, FP16, dict(ftz=True), 0x0000), (-P2**-15, FP16, dict(ftz=True), 0x8000),
    (P2**-14 - P2**-25, FP16, dict(ftz=True), 0x0400), (P2**-14, FP16, dict(ftz=True), 0x0400),
    (NAN, FP16, {}, 0x7E00), (INF, FP16, {}, 0x7C00), (-INF, FP16, {}, 0xFC00),
    (-INF, FP16, dict(overflow="saturate"), 0xFBFF), (-0.0, FP16, {}, 0x8000), (0, FP16, {}, 0x0000),
    # stochastic: away iff floor(f * 2^r) + R >= 2^r
    (1 + P2**-11, FP16, dict(rounding="sr", sr_bits=4, random_bits=7), 0x3C00),
    (1 + P2**-11, FP16, dict(rounding="sr", sr_bits=4, random_bits=8), 0x3C01),
    (1 + P2**-12, FP16, dict(rounding="sr", sr_bits=4, random_bits=11), 0x3C00),
    (1 + P2**-12, FP16, dict(rounding="sr", sr_bits=4, random_bits=12), 0x3C01),
    (-1 - P2**-12, FP16, dict(rounding="sr", sr_bits=2, random_bits=3), 0xBC01),
    (65520, FP16, dict(rounding="sr", sr_bits=1, random_bits=1), 0x7C00),
    (65520, FP16, dict(rounding="sr", sr_bits=1, random_bits=0), 0x7BFF),
    (F(1), FP16, dict(rounding="sr", sr_bits=3, random_bits=7), 0x3C00),
    # OCP FP8
    (464, FP8_E4M3FN, {}, 0x7E), (464.5, FP8_E4M3FN, {}, 0x7F), (464 + P2**-20, FP8_E4M3FN, {}, 0x7F),
    (448, FP8_E4M3FN, {}, 0x7E), (-464.5, FP8_E4M3FN, {}, 0x7F), (500, FP8_E4M3FN, dict(overflow="saturate"), 0x7E),
    (-500, FP8_E4M3FN, dict(overflow="saturate"), 0xFE), (500, FP8_E4M3FN, dict(rounding="rtz"), 0x7E),
    (500, FP8_E4M3FN, dict(rounding="ru"), 0x7F), (-500, FP8_E4M3FN, dict(rounding="ru"), 0xFE),
    (500, FP8_E4M3FN, dict(rounding="rto"), 0x7E), (INF, FP8_E4M3FN, {}, 0x7F),
    (P2**-9, FP8_E4M3FN, {}, 0x01), (P2**-10, FP8_E4M3FN, {}, 0x00), (3 * P2**-10, FP8_E4M3FN, {}, 0x02),
    (-0.0, FP8_E4M3FN, {}, 0x80), (NAN, FP8_E4M3FN, {}, 0x7F),
    (NAN, FP8_E5M2, {}, 0x7E), (57344, FP8_E5M2, {}, 0x7B), (61440, FP8_E5M2, {}, 0x7C),
    (61439, FP8_E5M2, {}, 0x7B), (61440, FP8_E5M2, dict(rounding="rd"), 0x7B),
    # FNUZ: NaN 0x80, no -0
    (NAN, FP8_E4M3FNUZ, {}, 0x80), (-0.0, FP8_E4M3FNUZ, {}, 0x00), (-P2**-12, FP8_E4M3FNUZ, {}, 0x00),
    (-P2**-12, FP8_E4M3FNUZ, dict(rounding="rtz"), 0x00), (-P2**-10, FP8_E4M3FNUZ, {}, 0x81),
    (240, FP8_E4M3FNUZ, {}, 0x7F), (248, FP8_E4M3FNUZ, {}, 0x80), (247, FP8_E4M3FNUZ, {}, 0x7F),
    (INF, FP8_E4M3FNUZ, {}, 0x80), (-INF, FP8_E4M3FNUZ, {}, 0x80),
    (INF, FP8_E4M3FNUZ, dict(overflow="saturate"), 0x7F), (-INF, FP8_E4M3FNUZ, dict(overflow="saturate"), 0xFF),
    (61440, FP8_E5M2FNUZ, {}, 0x80), (61439, FP8_E5M2FNUZ, {}, 0x7F),
    (31, FP8_E4M3B11FNUZ, {}, 0x80), (30.9, FP8_E4M3B11FNUZ, {}, 0x7F),
    (31, FP8_E4M3B11FNUZ, dict(rounding="rd"), 0x7F),
    # E8M0: unsigned, no zero, NaN 0xFF; ties go to the even multiple of the quantum 2^E
    (1, E8M0FNU, {}, 0x7F), (2, E8M0FNU, {}, 0x80), (1.5, E8M0FNU, {}, 0x80),
    (1.5, E8M0FNU, dict(rounding="rtz"), 0x7F),
    (1.5, E8M0FNU, dict(rounding="rto"), 0x7F), (1.25, E8M0FNU, {}, 0x7F), (1.5, E8M0FNU, dict(rounding="rna"), 0x80),
    (1.25, E8M0FNU, dict(rounding="ru"), 0x80), (P2**-127, E8M0FNU, {}, 0x00),
    (P2**-130, E8M0FNU, {}, 0x00), (P2**-130, E8M0FNU, dict(rounding="ru"), 0x00),
    (P2**-130, E8M0FNU, dict(rounding="rd"), 0x00), (3 * P2**-129, E8M0FNU, dict(rounding="rtz"), 0x00),
    (0, E8M0FNU, {}, 0xFF), (-0.0, E8M0FNU, {}, 0xFF), (-1, E8M0FNU, {}, 0xFF), (-P2**-130, E8M0FNU, {}, 0xFF),
    (NAN, E8M0FNU, {}, 0xFF), (INF, E8M0FNU, {}, 0xFF), (INF, E8M0FNU, dict(overflow="saturate"), 0xFE),
    (-INF, E8M0FNU, dict(overflow="saturate"), 0xFF), (P2**127, E8M0FNU, {}, 0xFE), (P2**128, E8M0FNU, {}, 0xFF),
    (P2**128, E8M0FNU, dict(overflow="saturate"), 0xFE), (3 * P2**126, E8M0FNU, {}, 0xFF),
    (3 * P2**126, E8M0FNU, dict(rounding="rtz"), 0xFE),
    # MX FP6 / FP4: no inf, no NaN; saturate, nan_to
    (5, FP4_E2M1FN, {}, 0x6), (5, FP4_E2M1FN, dict(rounding="rna"), 0x7), (7, FP4_E2M1FN, {}, 0x7),
    (100, FP4_E2M1FN, {}, 0x7), (-100, FP4_E2M1FN, {}, 0xF), (NAN, FP4_E2M1FN, {}, 0x7),
    (NAN, FP4_E2M1FN, dict(nan_to="min"), 0xF), (NAN, FP4_E2M1FN, dict(nan_to="zero"), 0x0),
    (INF, FP4_E2M1FN, {}, 0x7), (-INF, FP4_E2M1FN, {}, 0xF), (0.25, FP4_E2M1FN, {}, 0x0),
    (0.25, FP4_E2M1FN, dict(rounding="rna"), 0x1), (-0.25, FP4_E2M1FN, {}, 0x8), (0.75, FP4_E2M1FN, {}, 0x2),
    (0.5, FP4_E2M1FN, dict(ftz=True), 0x0), (0.75, FP4_E2M1FN, dict(ftz=True), 0x2),
    (1.25, FP4_E2M1FN, dict(rounding="rto"), 0x3), (5, FP4_E2M1FN, dict(rounding="rto"), 0x7),
    (7.5, FP6_E2M3FN, {}, 0x1F), (7.75, FP6_E2M3FN, {}, 0x1F), (NAN, FP6_E2M3FN, dict(nan_to="min"), 0x3F),
    (-28, FP6_E3M2FN, {}, 0x3F), (30, FP6_E3M2FN, {}, 0x1F), (-0.0, FP6_E3M2FN, {}, 0x20),
    # integers
    (127.5, INT8, {}, 0x7F), (127.5, INT8, dict(overflow="wrap"), 0x80), (2.5, INT8, {}, 2), (3.5, INT8, {}, 4),
    (-2.5, INT8, {}, 0xFE), (-2.5, INT8, dict(rounding="rna"), 0xFD), (2.5, INT8, dict(rounding="rto"), 3),
    (2, INT8, dict(rounding="rto"), 2), (-0.5, INT8, dict(rounding="rto"), 0xFF), (0.5, INT8, dict(rounding="rto"), 1),
    (-128.5, INT8, {}, 0x80), (-129, INT8, {}, 0x80), (-129, INT8, dict(overflow="wrap"), 0x7F),
    (200, INT8, dict(overflow="wrap"), 0xC8), (-0.5, INT8, dict(rounding="rd"), 0xFF),
    (NAN, INT8, {}, 0), (NAN, INT8, dict(nan_to="max"), 0x7F), (NAN, INT8, dict(nan_to="min"), 0x80),
    (INF, INT8, {}, 0x7F), (-INF, INT8, {}, 0x80), (INF, INT8, dict(overflow="wrap"), 0),
    (INF, INT8, dict(overflow="wrap", nan_to="min"), 0x80), (-0.0, INT8, {}, 0),
    (-0.3, UINT8, {}, 0), (-0.7, UINT8, {}, 0), (-0.7, UINT8, dict(overflow="wrap"), 0xFF), (255.5, UINT8, {}, 0xFF),
    (256, UINT8, dict(overflow="wrap"), 0), (-INF, UINT8, {}, 0), (NAN, UINT8, dict(nan_to="min"), 0),
    (7.5, INT4, {}, 7), (-8, INT4, {}, 8), (-9, INT4, dict(overflow="wrap"), 7), (16, UINT4, dict(overflow="wrap"), 0),
    # wide destinations
    (NAN, BF16, {}, 0x7FC0), (NAN, FP32, {}, 0x7FC00000), (NAN, FP64, {}, 0x7FF8000000000000), (NAN, TF32, {}, 0x3FE00),
    (2**31 - F(1, 2), INT32, {}, 0x7FFFFFFF), (2**31, INT32, dict(overflow="wrap"), 0x80000000),
    (2.0**63, INT64, {}, (1 << 63) - 1), (2**64 - 1, UINT64, {}, (1 << 64) - 1), (-1, UINT64, dict(overflow="wrap"),
                                                                            (1 << 64) - 1),
    (16777217, FP32, {}, 0x4B800000), (16777217, FP32, dict(rounding="ru"), 0x4B800001),
    (2**53 + 1, FP64, {}, 0x4340000000000000), (2**53 + 1, FP64, dict(rounding="rto"), 0x4340000000000001),
]


def _id(v):
    return str(v) if not isinstance(v, dict) else ",".join(f"{k}={w}" for k, w in v.items()) or "default"


@pytest.mark.parametrize("x,dst,pol,code", ROUNDS, ids=_id)
def test_round_value_hand_checked(x, dst, pol, code):
    assert X.round_value(x, dst, **pol) == code
    if dst.bits <= 16 and not (isinstance(x, F) and float(x) != x):  # the same row through the table
        pol = dict(pol)
        if "random_bits" in pol:
            pol["random_bits"] = np.array([pol["random_bits"]])
        assert int(V.table_cast(np.array([float(x)]), dst, **pol)[0]) == code


def test_canonical_nans_every_float_format():
    expect = {"ieee": lambda f: (((1 << f.exp_bits) - 1) << f.man_bits) | (1 << (f.man_bits - 1)),
              "fn": lambda f: f.mag_mask, "fnuz": lambda f: f.sign_bit}
    for f in registry():
        if f.is_integer or not f.has_nan:
            continue
        nan = expect[f.nan](f)
        assert X.value_of(nan, f) is X.NAN
        for x in (NAN, X.NAN, -NAN):
            assert X.round_value(x, f) == nan, f
        if f.bits <= 16:
            assert int(V.table_cast(np.array([NAN, -NAN]), f)[1]) == nan


# ---- the decoders ---------------------------------------------------------------------
def _same(exact, x: float) -> bool:
    if isinstance(exact, X.Special):
        if exact.kind == "nan":
            return math.isnan(x)
        if exact.kind == "inf":
            return math.isinf(x) and (x < 0) == exact.negative
        return x == 0 and math.copysign(1, x) < 0
    return F(x) == exact and not (x == 0 and math.copysign(1, x) < 0)


@pytest.mark.parametrize("fmt", SMALL + [FP32, TF32, FP64, INT32], ids=str)
@pytest.mark.parametrize("daz", [False, True])
def test_decoders_agree(fmt, daz):
    if fmt.bits <= 16:
        codes = np.arange(1 << fmt.bits, dtype=np.uint64)
    else:
        rng = np.random.default_rng(7)
        codes = rng.integers(0, 1 << fmt.bits, 4000, dtype=np.uint64, endpoint=False)
        edge = np.arange(64, dtype=np.uint64)
        codes = np.concatenate([codes, edge, np.uint64((1 << fmt.bits) - 1) - edge])
    got = V.source_values(codes.astype(fmt.code_dtype), fmt, daz=daz)
    for c, x in zip(codes.tolist(), got.tolist(), strict=True):
        assert _same(X.value_of(c, fmt, daz=daz), x), (fmt, hex(c), x)
    if not fmt.is_integer:  # the field decoder agrees with the numpy views used for IEEE formats
        fields = V.decode_fields(codes, fmt, daz=daz)
        num = ~np.isnan(got)
        assert np.array_equal(fields, got, equal_nan=True) and (np.signbit(fields) == np.signbit(got))[num].all()


# ---- the two rounding twins agree -----------------------------------------------------
def probe_values(dst, rng: np.random.Generator, n: int) -> np.ndarray:
    """Destination values, midpoints, their float64 neighbours, beyond-range and specials."""
    if dst.is_integer:
        base = np.arange(dst.min_value - 3, dst.max_value + 4, dtype=np.float64)
        base = np.concatenate([base, base + 0.5])
    else:
        t = V.value_table(dst).ext
        base = np.concatenate([t, t[:-1] / 2 + t[1:] / 2, t * 1.75])
    base = np.concatenate([base, np.nextafter(base, np.inf), np.nextafter(base, -np.inf)])
    pick = rng.choice(base, size=min(n, base.size), replace=False)
    extra = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 1e300, -1e300, 0.3, -0.7]
    return np.concatenate([pick, extra])


@pytest.mark.parametrize("dst", SMALL, ids=str)
def test_exact_and_table_agree(dst):
    rng = np.random.default_rng(dst.bits * 1000 + len(dst.name))
    x = probe_values(dst, rng, 300)
    for pol in policies(dst):
        t = V.table_cast(x, dst, **pol)
        e = [X.round_value(v, dst, **pol) for v in x.tolist()]
        bad = [(v, hex(a), hex(b)) for v, a, b in zip(x.tolist(), e, t.tolist(), strict=True) if a != b]
        assert not bad, (dst, pol, bad[:5])


@pytest.mark.parametrize("dst", [FP16, BF16, FP8_E4M3FN, FP8_E5M2FNUZ, FP4_E2M1FN, E8M0FNU, INT8, UINT4], ids=str)
@pytest.mark.parametrize("sr_bits", [1, 3, 11])
def test_exact_and_table_agree_stochastic(dst, sr_bits):
    rng = np.random.default_rng(sr_bits)
    x = probe_values(dst, rng, 400)
    rb = rng.integers(0, 1 << sr_bits, x.size)
    t = V.table_cast(x, dst, rounding="sr", sr_bits=sr_bits, random_bits=rb)
    for v, r, c in zip(x.tolist(), rb.tolist(), t.tolist(), strict=True):
        assert X.round_value(v, dst, rounding="sr", sr_bits=sr_bits, random_bits=r) == c, (v, r)


@pytest.mark.parametrize("src", [FP32, FP64, INT32], ids=str)
def test_exact_and_table_agree_from_wide_codes(src):
    rng = np.random.default_rng(11)
    codes = rng.integers(0, 1 << src.bits, 300, dtype=np.uint64).astype(src.code_dtype)
    if src is FP64:  # exponents where the small formats live
        e = rng.integers(1023 - 140, 1023 + 140, codes.size).astype(np.uint64)
        codes = (codes & np.uint64((1 << 52) - 1)) | (e << np.uint64(52)) | (codes & np.uint64(1 << 63))
    for dst in (FP16, BF16, FP8_E4M3FN, E8M0FNU, FP6_E2M3FN, INT16):
        for pol in (dict(rounding="rne"), dict(rounding="rd"), dict(rounding="rto")):
            t = V.table_convert(codes, src, dst, daz=True, **pol)
            e = [X.convert_code(c, src, dst, daz=True, **pol) for c in codes.tolist()]
            assert e == t.tolist(), (src, dst, pol)


# ---- neighbours -----------------------------------------------------------------------
@pytest.mark.parametrize("dst", SMALL, ids=str)
def test_neighbours_match_the_table(dst):
    rng = np.random.default_rng(3)
    xs = probe_values(dst, rng, 200)
    xs = xs[np.isfinite(xs) & (xs != 0)]
    table = np.arange(dst.min_value, dst.max_value + 1) if dst.is_integer else V.value_table(dst).values
    for x in xs.tolist():
        lo, hi = X.neighbours(x, dst)
        below, above = table[table <= x], table[table >= x]
        assert (lo is None) == (below.size == 0) and (hi is None) == (above.size == 0), (x, lo, hi)
        if lo is not None:
            assert lo.value == F(float(below[-1])) and X.value_of(lo.code, dst) in (lo.value, X.NEG_ZERO)
            assert X.round_value(x, dst, rounding="rd", overflow="saturate") == lo.code, (x, lo)
        if hi is not None:
            assert hi.value == F(float(above[0])) and X.value_of(hi.code, dst) in (hi.value, X.NEG_ZERO)
            if x > 0 or dst.signed or dst.is_integer:
                assert X.round_value(x, dst, rounding="ru", overflow="saturate") == hi.code, (x, hi)


@pytest.mark.parametrize("dst", [FP32, FP64, TF32, INT32, INT64, UINT64], ids=str)
def test_neighbours_wide(dst):
    for x in (F(1, 3), -F(1, 3), F(10**30) + F(1, 7), P2**-1070, -P2**-1060, F(2**64) + 1, -F(2**63) - F(1, 2)):
        lo, hi = X.neighbours(x, dst)
        if lo is not None:
            assert lo.value <= x and X.round_value(x, dst, rounding="rd", overflow="saturate") == lo.code
        if hi is not None:
            assert hi.value >= x and X.round_value(x, dst, rounding="ru", overflow="saturate") == hi.code
        if lo is not None and hi is not None and lo.value != hi.value:
            mid = (lo.value + hi.value) / 2
            assert X.round_value(mid, dst, rounding="rtz", overflow="saturate") in (lo.code, hi.code)
    exact = X.neighbours(1, dst)
    assert exact.lower == exact.upper and exact.lower.value == 1


def test_neighbours_special_cases():
    assert X.neighbours(70000, FP16) == (X.Neighbour(F(65504), 0x7BFF), None)
    assert X.neighbours(-P2**-30, FP16) == (X.Neighbour(-P2**-24, 0x8001), X.Neighbour(F(0), 0x8000))
    assert X.neighbours(-P2**-30, FP8_E4M3FNUZ).upper == X.Neighbour(F(0), 0x00)
    assert X.neighbours(P2**-130, E8M0FNU) == (None, X.Neighbour(P2**-127, 0x00))
    assert X.neighbours(-1, E8M0FNU) == (None, X.Neighbour(P2**-127, 0x00))
    assert X.neighbours(-0.5, UINT8) == (None, X.Neighbour(F(0), 0))
    assert X.neighbours(-5, UINT8) == (None, X.Neighbour(F(0), 0))
    assert X.neighbours(300, UINT8) == (X.Neighbour(F(255), 255), None)
    assert X.neighbours(2.5, INT8) == (X.Neighbour(F(2), 2), X.Neighbour(F(3), 3))
    with pytest.raises(ValueError):
        X.neighbours(NAN, FP16)


# ---- policy errors and flags ----------------------------------------------------------
@pytest.mark.parametrize("dst,pol", [
    (FP16, dict(overflow="wrap")), (FP8_E4M3FN, dict(overflow="ieee")), (FP4_E2M1FN, dict(overflow="nan")),
    (FP16, dict(overflow="nan")), (FP16, dict(nan_to="zero")), (FP16, dict(rounding="sr")),
    (FP16, dict(rounding="sr", sr_bits=4)), (FP16, dict(rounding="sr", sr_bits=4, random_bits=16)),
    (FP16, dict(random_bits=1)), (INT8, dict(ftz=True)), (FP16, dict(rounding="nearest_odd")),
], ids=_id)
def test_policy_errors(dst, pol):
    with pytest.raises(ValueError):
        X.round_value(1.5, dst, **pol)


def test_nan_to_raise():
    for dst in (INT8, FP4_E2M1FN):
        assert X.round_value(1, dst, nan_to="raise") == X.round_value(1, dst)
        with pytest.raises(ValueError):
            X.round_value(NAN, dst, nan_to="raise")
        with pytest.raises(ValueError):
            V.table_cast(np.array([1.0, np.nan]), dst, nan_to="raise")
    with pytest.raises(ValueError):
        X.round_value(INF, INT8, overflow="wrap", nan_to="raise")


@pytest.mark.parametrize("x,dst,pol,flags", [
    (65520, FP16, {}, Flags.INEXACT | Flags.OVERFLOW), (65519, FP16, {}, Flags.INEXACT),
    (1 + P2**-11, FP16, {}, Flags.INEXACT), (F(1), FP16, {}, Flags.NONE),
    (P2**-25, FP16, {}, Flags.INEXACT | Flags.UNDERFLOW), (P2**-24, FP16, {}, Flags.NONE),
    (P2**-24, FP16, dict(ftz=True), Flags.INEXACT | Flags.UNDERFLOW), (P2**-14 - P2**-25, FP16, {},
                                                                        Flags.INEXACT | Flags.UNDERFLOW),
    (NAN, INT8, {}, Flags.INVALID), (NAN, FP16, {}, Flags.NONE), (NAN, FP4_E2M1FN, {}, Flags.INVALID),
    (-1, E8M0FNU, {}, Flags.INVALID), (0, E8M0FNU, {}, Flags.INVALID), (P2**-130, E8M0FNU, {}, Flags.INEXACT |
                                                                          Flags.UNDERFLOW),
    (300, INT8, {}, Flags.INVALID), (2.5, INT8, {}, Flags.INEXACT), (INF, FP16, {}, Flags.NONE),
    (INF, INT8, {}, Flags.INVALID), (INF, FP8_E4M3FN, {}, Flags.INVALID), (464.5, FP8_E4M3FN, {},
                                                                         Flags.INEXACT | Flags.OVERFLOW),
], ids=_id)
def test_flags_hand_checked(x, dst, pol, flags):
    assert X.round_value(x, dst, flags=True, **pol)[1] == flags
