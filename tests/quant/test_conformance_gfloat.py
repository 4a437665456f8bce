"""Conformance: numoracle's P3109 binary8pP formats (core/formats/p3109.py) against gfloat 0.5.2.

Every code decoded; FP64 values (each format's boundary values: its values, midpoints of neighbours and their
FP64 neighbours, max and beyond; then random values, 2^12 per format in the default tier, 10^5 with -m slow)
rounded in TiesToEven / TiesToAway / TowardZero / TowardPositive / TowardNegative / ToOdd, under each of
P3109's saturation modes SatFinite (gfloat ``sat=True``), OvfInf (``sat=False``) and SatPropagate (``sat=True``
for finite values, ``sat=False`` for infinities). numoracle's side is p3109_cast. gfloat 0.5.2 has no ToOdd:
where the installed gfloat lacks ``RoundMode.ToOdd``, the reference is gfloat main's ``round_ndarray`` ToOdd
branch (commit de30dee, "Add RoundMode.ToOdd (#56)"), restated below on gfloat 0.5.2's FormatInfo and encoded
with gfloat's encode_ndarray. numoracle.cast's deviations from P3109 (P = 1 ties; round-to-odd overflow) are
checked below. Report: docs/conformance.md.
"""

from __future__ import annotations

import numpy as np
import pytest

gfloat = pytest.importorskip("gfloat", reason="needs gfloat: pip install gfloat")
from gfloat.formats import format_info_p3109  # noqa: E402
from gfloat.types import Domain, Signedness  # noqa: E402

from numoracle import cast  # noqa: E402
from numoracle.core.formats.p3109 import (  # noqa: E402
    P3109_FORMATS,
    P3109_UNSIGNED_EXTENDED,
    p3109_cast,
    p3109_decode,
    p3109_format,
)

ALL = {**P3109_FORMATS, **P3109_UNSIGNED_EXTENDED}  # the 32 variants gfloat defines: P = 1..8, se / sf / uf / ue

MODES = {"rne": gfloat.RoundMode.TiesToEven, "rtz": gfloat.RoundMode.TowardZero,
         "ru": gfloat.RoundMode.TowardPositive, "rd": gfloat.RoundMode.TowardNegative,
         "rna": gfloat.RoundMode.TiesToAway, "rto": getattr(gfloat.RoundMode, "ToOdd", None)}
SATURATIONS = ("SatFinite", "OvfInf", "SatPropagate")


def _fi(name: str):
    p, s, d = int(name[8]), name[9] == "s", name[10]
    return format_info_p3109(8, p, Signedness.Signed if s else Signedness.Unsigned,
                             Domain.Extended if d == "e" else Domain.Finite)


def _to_odd(fi, v: np.ndarray, sat: bool) -> np.ndarray:
    """gfloat main's round_ndarray for RoundMode.ToOdd (commit de30dee, after 0.5.2), on float64 numpy arrays."""
    p, bias = fi.precision, fi.bias
    neg = np.signbit(v) & fi.is_signed
    absv = np.where(neg, -v, v)
    fnz = ~(np.isnan(v) | np.isinf(v) | (v == 0))
    masked = np.where(fnz, absv, 1.0)
    expval = np.frexp(masked)[1] - 1
    if fi.has_subnormals:
        expval = np.maximum(expval, 1 - bias)
    expval = expval - p + 1
    fsig = np.ldexp(masked, -expval)
    isig = np.floor(fsig).astype(np.int64)
    delta = fsig - np.floor(fsig)
    odd = (isig & 1) == 1 if p > 1 else (isig != 0) & (((expval + bias) & 1) == 1)
    isig = np.where((delta > 0) & ~odd, isig + 1, isig)  # ToOdd: should_round_away = (delta > 0) & ~code_is_odd
    res = np.where(fnz, np.ldexp(isig.astype(np.float64), expval), absv)
    amax = np.where(neg, -fi.min, fi.max)
    if sat:
        res = np.where(res > amax, amax, res)
    else:  # ToOdd is not a directed mode: past amax, inf (extended domain) or NaN
        res = np.where(res > amax, np.inf if fi.domain == Domain.Extended else np.nan, res)
    res = np.where(neg, -res, res)
    return np.where(res == 0, 0.0, res)


def _gfloat_codes(fi, v: np.ndarray, mode: str, saturation: str) -> np.ndarray:
    def rounded(sat: bool) -> np.ndarray:
        if MODES[mode] is None:
            return _to_odd(fi, v, sat)
        return gfloat.round_ndarray(fi, v, MODES[mode], sat)

    if saturation == "SatPropagate":  # finite values saturate, infinities stay (gfloat's sat=False keeps them)
        r = np.where(np.isinf(v), rounded(False), rounded(True))
    else:
        r = rounded(saturation == "SatFinite")
    return gfloat.encode_ndarray(fi, r).astype(np.int64)


def _values(fmt, n: int, seed: int) -> np.ndarray:
    table = p3109_decode(np.arange(256), fmt)
    fin = np.sort(table[np.isfinite(table)])
    mids = (fin[1:] + fin[:-1]) / 2
    top = float(fmt.max_finite)
    edge = np.concatenate([fin, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf), np.nextafter(fin, 0),
                           [top * (1 + 2.0**-40), top * 1.01, top * 1.5, top * 2, top * 4, -top * 1.5, np.inf,
                            -np.inf, 1e300, -1e300, 1e-300, 0.0]])
    rng = np.random.default_rng(seed)
    rnd = rng.standard_normal(n) * np.exp2(rng.uniform(np.log2(float(fmt.min_subnormal)) - 2, np.log2(top) + 2, n))
    v = np.concatenate([edge, rnd])
    return v if fmt.signed else np.abs(v)  # gfloat's unsigned formats read |v| (it has no rule for negatives)


def _mismatches(name: str, n: int) -> dict[tuple[str, str], int]:
    """Mismatching codes per (mode, saturation); key ("decode", "") for the 256 codes' values."""
    fmt, fi = ALL[name], _fi(name)
    codes = np.arange(256)
    bad = {("decode", ""): int(np.count_nonzero(~np.isclose(gfloat.decode_ndarray(fi, codes), p3109_decode(codes, fmt),
                                                             rtol=0, atol=0, equal_nan=True)))}
    v = _values(fmt, n, 0)
    for mode in MODES:
        for saturation in SATURATIONS:
            theirs = _gfloat_codes(fi, v, mode, saturation)
            ours = p3109_cast(v, fmt, rounding=mode, overflow=saturation).astype(np.int64)
            bad[mode, saturation] = int(np.count_nonzero(theirs != ours))
    return bad


def _p1_ties(fmt) -> np.ndarray:
    """Every tie 1.5 * 2^e between two of the format's values (and past its largest), both signs."""
    e = np.arange(int(np.log2(float(fmt.min_normal))), int(np.log2(float(fmt.max_finite))) + 1)
    t = 1.5 * np.exp2(e.astype(np.float64))
    return np.concatenate([t, -t]) if fmt.signed else t


@pytest.mark.parametrize("name", sorted(ALL))
def test_p3109_codes_and_rounding_bit_for_bit(name):
    assert not any(_mismatches(name, 1 << 12).values())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALL))
def test_p3109_hundred_thousand_values_per_mode(name):
    bad = _mismatches(name, 100_000)
    assert not any(bad.values()), {k: c for k, c in bad.items() if c}


def test_the_to_odd_reference_is_gfloat_own_where_it_has_one():
    """gfloat releases after 0.5.2 have RoundMode.ToOdd: there, the restatement above must equal it."""
    to_odd = getattr(gfloat.RoundMode, "ToOdd", None)
    if to_odd is None:
        pytest.skip(f"gfloat {getattr(gfloat, '__version__', '0.5.2')} has no RoundMode.ToOdd (gfloat main has)")
    for name, fmt in ALL.items():
        fi, v = _fi(name), _values(fmt, 1 << 10, 1)
        for sat in (True, False):
            assert np.array_equal(gfloat.round_ndarray(fi, v, to_odd, sat), _to_odd(fi, v, sat), equal_nan=True)


def test_known_deviation_numoracle_cast_round_to_odd_overflow():
    """numoracle.cast's rto (the engine) keeps +-max for every finite value past it; P3109's ToOdd (p3109_cast,
    gfloat main) overflows unless max's code is odd and the value lies below the next step. Witness: 224.1 in
    binary8p4se: cast 0x7E (224), P3109 0x7F (+inf)."""
    fmt = P3109_FORMATS["binary8p4se"]
    v = np.array([224.1])
    assert cast(v, fmt, rounding="rto", overflow="ieee").tolist() == [0x7E]
    assert p3109_cast(v, fmt, rounding="rto", overflow="ieee").tolist() == [0x7F]
    assert _gfloat_codes(_fi("binary8p4se"), v, "rto", "OvfInf").tolist() == [0x7F]


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


def test_unsigned_extended_named_by_p3109_format():
    with pytest.raises(ValueError, match=r"binary8p3ue .*p3109_unsigned_extended\(3\)"):
        p3109_format(3, signed=False, domain="extended")
    assert len(ALL) == 32 and sorted(n[-2:] for n in ALL).count("ue") == 8
