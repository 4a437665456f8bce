"""P3109's ToOdd and saturation modes in p3109_cast (core/formats/p3109.py), by hand (no gfloat needed).

The gfloat comparison of every format, mode and saturation is tests/quant/test_conformance_gfloat.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.core.formats.p3109 import P3109_FORMATS, p3109_cast

INF_SE, MAX_SE, NAN_S = 0x7F, 0x7E, 0x80


@pytest.mark.parametrize("p", range(1, 8))
def test_to_odd_overflows_past_an_even_max_in_every_precision(p):
    # regression (issue 40, defect 1): P3109 ToOdd rounds with an unbounded exponent, then checks overflow. In
    # binary8p{P}se the largest finite code 0x7E is even, so any finite value past it rounds (inexact, even code)
    # to the next step, which overflows: +inf without saturation (numoracle gave max for P > 1), max with it
    f = P3109_FORMATS[f"binary8p{p}se"]
    top = float(f.max_finite)
    v = np.array([top * (1 + 2.0**-40), top * 1.5, 1e300, -top * (1 + 2.0**-40)])
    assert p3109_cast(v, f, rounding="rto", overflow="ieee").tolist() == [INF_SE] * 3 + [0xFF]
    assert p3109_cast(v, f, rounding="rto", overflow="saturate").tolist() == [MAX_SE] * 3 + [0xFE]
    assert p3109_cast(np.array([top]), f, rounding="rto", overflow="ieee").tolist() == [MAX_SE]  # exact


def test_to_odd_witness_and_an_odd_max():
    se = P3109_FORMATS["binary8p4se"]
    assert p3109_cast(np.array([224.1]), se, rounding="rto", overflow="ieee").tolist() == [INF_SE]
    # binary8p4sf: max 240 at code 0x7F (odd); the next step is 256: (240, 256) rounds to max, 256 and up
    # overflow (NaN: the finite domain has no infinity)
    sf = P3109_FORMATS["binary8p4sf"]
    v = np.array([240.5, 255.9, 256.0, 1e10])
    assert p3109_cast(v, sf, rounding="rto", overflow="nan").tolist() == [0x7F, 0x7F, NAN_S, NAN_S]
    assert p3109_cast(v, sf, rounding="rto", overflow="saturate").tolist() == [0x7F] * 4
    # in range (1.0 is code 0x40, 1.125 0x41): inexact on an even code goes one code away from zero, on an odd
    # code stays
    assert p3109_cast(np.array([1.01, 1.13, -1.01]), se, rounding="rto").tolist() == [0x41, 0x41, 0xC1]


def test_sat_propagate_keeps_infinities_and_saturates_finite_overflow():
    # regression (issue 40, defect 2): P3109 SatPropagate had no setting (numoracle's saturate maps +-inf to
    # +-max, which is SatFinite)
    se, sf = P3109_FORMATS["binary8p3se"], P3109_FORMATS["binary8p3sf"]
    v = np.array([np.inf, -np.inf, 1e300, -1e300, np.nan, 1.0])
    for mode in ("rne", "rto", "rtz", "ru", "rd", "rna"):
        got = p3109_cast(v, se, rounding=mode, overflow="SatPropagate").tolist()
        assert got[:2] == [INF_SE, 0xFF] and got[2:5] == [MAX_SE, 0xFE, NAN_S], mode
        assert p3109_cast(v, se, rounding=mode, overflow="SatFinite").tolist()[:2] == [MAX_SE, 0xFE]
        assert p3109_cast(v, sf, rounding=mode, overflow="sat_propagate").tolist()[:4] == [NAN_S, NAN_S, 0x7F, 0xFF]
    assert p3109_cast(v, se, overflow="OvfInf").tolist()[:4] == [INF_SE, 0xFF, INF_SE, 0xFF]
    assert p3109_cast(v, sf, overflow="OvfInf").tolist()[:4] == [NAN_S] * 4
    from numoracle.core.formats.p3109 import P3109_SATURATION

    assert P3109_SATURATION["satpropagate"] == "sat_propagate"
    with pytest.raises(ValueError, match="integer destinations only"):
        p3109_cast(v, se, overflow="wrap")


def test_p8_and_unsigned_extended_variants():
    # issue 40: the four P = 8 variants and the eight unsigned extended ones (gfloat 0.5.2 defines them)
    from numoracle.core.formats.p3109 import (
        P3109_UNSIGNED_EXTENDED,
        p3109_decode,
        p3109_format,
        p3109_unsigned_extended,
    )

    se, sf, uf = (P3109_FORMATS[f"binary8p8{t}"] for t in ("se", "sf", "uf"))
    codes = np.arange(256)
    assert np.array_equal(p3109_decode(codes[:127], se), codes[:127] / 64)  # signed P = 8: c / 64
    assert p3109_decode([0x7F, 0x80, 0xFF], se).tolist()[::2] == [np.inf, -np.inf]
    assert float(sf.max_finite) == 127 / 64 and float(uf.max_finite) == 127 / 64 and float(uf.min_subnormal) == 2**-7
    ue = p3109_unsigned_extended(4)
    assert P3109_UNSIGNED_EXTENDED["binary8p4ue"] == ue and float(ue.max_finite) == 53248.0
    assert p3109_decode([0xFD, 0xFE, 0xFF], ue)[:2].tolist() == [53248.0, np.inf]
    assert np.isnan(p3109_decode([0xFF], ue)[0])
    assert np.array_equal(p3109_decode(codes[:0xFE], ue), p3109_decode(codes[:0xFE], "binary8p4uf"))
    # 0xFE's value in binary8p4uf, 57344, is the first step past binary8p4ue's max: it overflows
    v = np.array([53248.0, 55000.0, 57344.0, 1e300, np.inf, np.nan, -1.0])
    assert p3109_cast(v, ue).tolist() == [0xFD, 0xFD, 0xFE, 0xFE, 0xFE, 0xFF, 0xFF]
    assert p3109_cast(v, ue, rounding="rtz").tolist()[:5] == [0xFD, 0xFD, 0xFD, 0xFD, 0xFE]
    assert p3109_cast(v, ue, overflow="SatFinite").tolist()[:5] == [0xFD] * 5
    assert p3109_cast(v, ue, overflow="SatPropagate").tolist()[:5] == [0xFD] * 4 + [0xFE]
    # ToOdd: max 0xFD is odd, so (max, 57344) stays at max; 57344 and up overflow
    assert p3109_cast(v, ue, rounding="rto").tolist()[:4] == [0xFD, 0xFD, 0xFE, 0xFE]
    with pytest.raises(ValueError, match="p3109_unsigned_extended"):
        p3109_format(4, signed=False, domain="extended")
    with pytest.raises(ValueError, match="precision 1..8"):
        p3109_format(9)


def test_quantize_refuses_engine_round_to_odd_overflow_but_not_saturation():
    # the engine's rto keeps +-max past it (numoracle.cast's deviation, docs/conformance.md): quantize into a P3109
    # format in rto without saturation would be wrong, so it is refused, naming p3109_cast; saturating, they agree
    import numoracle as no

    x = np.linspace(-1, 1, 64).astype(np.float32)
    f = P3109_FORMATS["binary8p4se"]
    with pytest.raises(ValueError, match="p3109_cast"):
        no.quantize(x, f, rounding="rto", overflow="ieee")
    no.quantize(x, f, rounding="rto")  # saturate, the default
    v = np.array([1e300, -1e300, np.inf, 1.01, 3e-3])
    assert np.array_equal(no.cast(v, f, rounding="rto", overflow="saturate"),
                          p3109_cast(v, f, rounding="rto", overflow="SatFinite"))
