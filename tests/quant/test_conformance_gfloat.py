"""Conformance: numoracle's P3109 binary8pP formats (core/formats/p3109.py) against gfloat 0.5.2.

Every code decoded; random FP64 values (2^12 per format in the default tier, 2^20 with -m slow) plus each
format's boundary values (midpoints of neighbours, max finite and beyond), each rounded in all 10 pairs of
TiesToEven / TiesToAway / TowardZero / TowardPositive / TowardNegative, saturating and not. numoracle's side
is p3109_cast:
numoracle.cast except at P = 1 ties (rne), where the engine breaks ties on the significand (the larger magnitude,
IEEE 754-2019's precision-1 rule) and P3109 on the encoding (the even code): a deviation of numoracle's cast from
P3109, not of gfloat, checked below. Report: docs/conformance.md.
"""

from __future__ import annotations

import numpy as np
import pytest

gfloat = pytest.importorskip("gfloat", reason="needs gfloat: pip install gfloat")
from gfloat.formats import format_info_p3109  # noqa: E402
from gfloat.types import Domain, Signedness  # noqa: E402

from numoracle import cast, decode  # noqa: E402
from numoracle.core.formats.p3109 import P3109_FORMATS, p3109_cast, p3109_format  # noqa: E402

MODES = {"rne": gfloat.RoundMode.TiesToEven, "rtz": gfloat.RoundMode.TowardZero,
         "ru": gfloat.RoundMode.TowardPositive, "rd": gfloat.RoundMode.TowardNegative,
         "rna": gfloat.RoundMode.TiesToAway}


def _fi(name: str):
    p, s, d = int(name[8]), name[9] == "s", name[10]
    return format_info_p3109(8, p, Signedness.Signed if s else Signedness.Unsigned,
                             Domain.Extended if d == "e" else Domain.Finite)


def _values(fmt, n: int, seed: int) -> np.ndarray:
    table = decode(np.arange(256, dtype=np.uint8), fmt).astype(np.float64)
    fin = np.sort(table[np.isfinite(table)])
    mids = (fin[1:] + fin[:-1]) / 2
    top = float(fmt.max_finite)
    edge = np.concatenate([fin, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
                           [top * 1.5, top * 2, -top * 1.5, np.inf, -np.inf, 1e300, -1e300, 1e-300, 0.0]])
    rng = np.random.default_rng(seed)
    rnd = rng.standard_normal(n) * np.exp2(rng.uniform(np.log2(float(fmt.min_subnormal)) - 2, np.log2(top) + 2, n))
    return np.concatenate([edge, rnd])


def _mismatches(name: str, n: int) -> int:
    fmt, fi = P3109_FORMATS[name], _fi(name)
    codes = np.arange(256)
    bad = int(np.count_nonzero(~np.isclose(gfloat.decode_ndarray(fi, codes), decode(codes.astype(np.uint8), fmt),
                                           rtol=0, atol=0, equal_nan=True)))
    v = _values(fmt, n, 0)
    if not fmt.signed:
        v = np.abs(v)
    for mode, rm in MODES.items():
        for sat in (True, False):
            r = gfloat.round_ndarray(fi, v, rm, sat)
            theirs = gfloat.encode_ndarray(fi, r)
            ours = p3109_cast(v, fmt, rounding=mode, overflow="saturate" if sat else ("ieee" if fmt.has_inf
                                                                                       else "nan"))
            bad += int(np.count_nonzero(theirs.astype(np.int64) != ours.astype(np.int64)))
    return bad


def _p1_ties(fmt) -> np.ndarray:
    """Every tie 1.5 * 2^e between two of the format's values (and past its largest), both signs."""
    e = np.arange(int(np.log2(float(fmt.min_normal))), int(np.log2(float(fmt.max_finite))) + 1)
    t = 1.5 * np.exp2(e.astype(np.float64))
    return np.concatenate([t, -t]) if fmt.signed else t


@pytest.mark.parametrize("name", sorted(P3109_FORMATS))
def test_p3109_codes_and_rounding_bit_for_bit(name):
    assert _mismatches(name, 1 << 12) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(P3109_FORMATS))
def test_p3109_million_values(name):
    assert _mismatches(name, 1 << 20) == 0


@pytest.mark.parametrize("name", ["binary8p1se", "binary8p1sf", "binary8p1uf"])
def test_known_deviation_numoracle_cast_at_p1_ties(name):
    """numoracle.cast (the engine) takes the larger magnitude at every P = 1 tie; P3109 (gfloat 0.5.2, and
    p3109_cast) the even code: they differ exactly where the lower neighbour's code is even."""
    fmt, fi = P3109_FORMATS[name], _fi(name)
    v = _p1_ties(fmt)
    theirs = gfloat.encode_ndarray(fi, gfloat.round_ndarray(fi, v, gfloat.RoundMode.TiesToEven, True)).astype(int)
    engine = cast(v, fmt, overflow="saturate").astype(np.int64)
    lower = cast(v, fmt, rounding="rtz").astype(np.int64)
    assert np.array_equal(theirs, np.where(lower % 2 == 0, lower, engine))
    assert np.array_equal(engine != theirs, (lower % 2 == 0) & (engine != lower))
    assert np.count_nonzero(engine != theirs) >= len(v) // 2 - 2
    assert np.array_equal(p3109_cast(v, fmt, overflow="saturate").astype(int), theirs)


def test_witness_and_round_to_odd_at_p1():
    fmt = P3109_FORMATS["binary8p1se"]
    v = np.array([1.5 * 2.0**60, 1.25 * 2.0**60, 1.25 * 2.0**61])  # codes: 2^60 = 0x7c, 2^61 = 0x7d
    assert cast(v[:1], fmt).tolist() == [0x7D] and p3109_cast(v[:1], fmt).tolist() == [0x7C]
    # P3109 ToOdd: an inexact value goes away from an even code (0x7c -> 0x7d), stays at an odd one
    assert p3109_cast(v[1:], fmt, rounding="rto").tolist() == [0x7D, 0x7D]
    assert cast(v[1:], fmt, rounding="rto").tolist() == [0x7C, 0x7D]  # the engine truncates at P = 1
    assert np.array_equal(p3109_cast(v, "binary8p3se"), cast(v, P3109_FORMATS["binary8p3se"]))


def test_unsigned_extended_refused_by_name():
    with pytest.raises(ValueError, match="binary8p3ue .* cannot be represented exactly"):
        p3109_format(3, signed=False, domain="extended")
