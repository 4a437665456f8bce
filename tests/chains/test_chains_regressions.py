"""Cast chains and the formats they run on: every case found by brute force where a verdict, a witness
or a derived constant was wrong, held to enumeration with ``numoracle.cast`` hop by hop."""

from __future__ import annotations

import itertools
import time
from fractions import Fraction

import numpy as np
import pytest
from test_chains_generative import brute_force, smallest_witness

import numoracle as no
from numoracle import Format, classify_cast_chain
from numoracle.core.formats.policy import Flags
from numoracle.core.scalar import Special, round_value, value_of
from numoracle.formats import E8M0FNU, FP16, FP64, INT8, INT16

MODES = ["rne", "rna", "rtz", "ru", "rd", "rto"]


def _per_hop(x, n):
    return list(x) if isinstance(x, (list, tuple)) else [x] * n


def _check_against_brute_force(formats, rounding="rne", overflow=None, ftz=False):
    """The verdict and witness of the proof (and of enumeration) equal brute force; returns the verdict
    and the number of differing sources."""
    n = len(formats) - 1
    rs, os_ = _per_hop(rounding, n), _per_hop(overflow, n)
    codes, chain, direct = brute_force([no.formats.format_of(f) for f in formats], rs, os_, ftz)
    bad = codes[chain != direct]
    want = smallest_witness(no.formats.format_of(formats[0]), bad)
    for method in ("auto", "exhaustive"):
        v = classify_cast_chain(*formats, rounding=rounding, overflow=overflow, ftz=ftz, method=method)
        assert v.equivalent == (want is None), (method, v)
        assert (v.witness and v.witness.source_code) == want, (method, str(v))
    return classify_cast_chain(*formats, rounding=rounding, overflow=overflow, ftz=ftz), bad.size


# ---- NaN-making and NaN-removing hops -------------------------------------------------------------
def test_nan_made_then_removed_by_an_integer_hop():
    """The rd hop makes NaN, the INT8 hop turns it into 0: the chain is not constant on the NaN range."""
    chain = (INT8, Format.fn(3, 4, bias=1), Format.finite(3, 3, bias=3), Format.fn(3, 2, bias=3), INT8,
             Format.fn(2, 2, bias=1))
    v, n_bad = _check_against_brute_force(chain, rounding=["rne", "rne", "rd", "rne", "rne"])
    assert not v.equivalent and v.witness.source_value == "-26" and n_bad == 97
    assert (v.witness.chain_value, v.witness.direct_value) == ("0", "NAN")


def test_negative_half_made_nan_and_removed():
    fnuz = Format.fnuz(3, 0, bias=1)
    chain = (INT8, fnuz, E8M0FNU, INT8, E8M0FNU, INT8, fnuz)
    v, n_bad = _check_against_brute_force(chain, overflow=["saturate", None, None, None, None, "saturate"])
    assert not v.equivalent and v.witness.source_value == "-1" and n_bad == 128


@pytest.mark.parametrize("src,witness", [(FP16, 0x0001), (INT16, 23)], ids=str)
def test_e8m0_after_an_integer_hop(src, witness):
    """These raised 'internal error: the chain is not constant on a cell'."""
    v, _ = _check_against_brute_force((src, "fp8_e4m3fn", INT8, E8M0FNU))
    assert v.witness.source_code == witness


def test_e8m0_round_trips_through_int8():
    v, _ = _check_against_brute_force((INT8, E8M0FNU, INT8, E8M0FNU, INT8))
    assert v.witness.source_value == "-1"


# ---- signed zeros -----------------------------------------------------------------------------------
@pytest.mark.parametrize("chain", [("fp16", "fp8_e4m3fnuz", "fp8_e4m3fn"), ("fp16", "fp8_e5m2fnuz", "fp8_e5m2"),
                                   ("fp16", "fp8_e4m3fnuz", "fp8_e5m2")], ids="-".join)
def test_negative_zero_is_the_smallest_witness(chain):
    """The FNUZ hop has no -0: -0 differs, and it is the least magnitude (ties: +0 first, which agrees)."""
    v, _ = _check_against_brute_force(chain)
    assert v.witness.source_code == 0x8000 and v.witness.source_value == "-0"
    # numbers differ too (FNUZ's range is not FN's): the reason names what happens to them
    assert v.reason == "RANGE"


def test_specials_is_the_reason_only_when_only_specials_differ():
    # E5M2FNUZ holds every finite E5M2 value but not -0, and makes NaN of +-inf
    v, n_bad = _check_against_brute_force(("fp8_e5m2", "fp8_e5m2fnuz", "fp16"))
    assert v.witness.source_value == "-0" and v.reason == "SPECIALS" and n_bad == 3


def test_nans_only_when_nothing_finite_differs():
    # every finite FP16 value survives FP32 and back; only the NaN payloads are canonicalised
    v, n_bad = _check_against_brute_force(("fp16", "fp32", "fp16"))
    assert v.equivalent and n_bad == 0
    v = classify_cast_chain("fp16", "fp8_e4m3fn", "fp16")
    assert v.witness.source_code == 0x0001  # the least subnormal, not one of the many NaNs


# ---- 64-bit sources -----------------------------------------------------------------------------------
def _agrees_on_samples(chain, n=200_000, seed=7):
    """Brute force on a seeded sample of 64-bit codes (every value of magnitude < 2^16, powers of two and
    their neighbours, random codes): chain == direct wherever the verdict says so."""
    rng = np.random.default_rng(seed)
    small = np.arange(-(1 << 16), 1 << 16, dtype=np.int64).view(np.uint64)
    p2 = np.array([(1 << k) + d for k in range(64) for d in (-1, 0, 1)], dtype=object)
    p2 = np.array([int(x) % (1 << 64) for x in p2] + [(-int(x)) % (1 << 64) for x in p2], np.uint64)
    codes = np.concatenate([small, p2, rng.integers(0, 1 << 63, n, dtype=np.uint64) * np.uint64(2)])
    c = codes
    for a, b in zip(chain, chain[1:]):
        c = no.cast(c, b, src=a)
    return np.flatnonzero(c != no.cast(codes, chain[-1], src=chain[0])), codes


@pytest.mark.parametrize("chain", [("int64", "fp16", "fp8_e4m3fn"), ("int64", "fp8_e4m3fn"),
                                   ("uint64", "fp8_e4m3fn", "fp16"), ("int64", "fp8_e4m3fnuz", "fp16")],
                         ids="-".join)
def test_64_bit_sources_with_nan_making_hops(chain):
    """These raised OverflowError or never returned (an int64 bisection that overflowed)."""
    t0 = time.perf_counter()
    v = classify_cast_chain(*chain)
    assert time.perf_counter() - t0 < 1.0
    bad, codes = _agrees_on_samples(chain)
    if v.equivalent:
        assert bad.size == 0, [int(codes[i]) for i in bad[:5]]
    else:
        w = v.witness
        assert w.chain_code != w.direct_code
        src = no.formats.format_of(chain[0])
        mags = [abs(int(value_of(int(codes[i]), src))) for i in bad]
        assert abs(int(w.source_value)) <= min(mags)


def test_uint64_witness_is_the_smallest():
    """UINT64 keys are offset by 2^63: values below 2^63 were taken for negatives."""
    t0 = time.perf_counter()
    v = classify_cast_chain("uint64", "fp64", "bf16")
    assert time.perf_counter() - t0 < 1.0
    assert v.witness.source_value == str(2**53 + 2**45 + 1) == "9042383626829825"
    # below 2^53 fp64 is exact; from 2^53 the first double rounding is the classic 2^53 + 2^45 + 1
    x = np.array([2**53 + 2**45 + d for d in range(-3, 2)], np.uint64)
    chain = no.cast(no.cast(x, "fp64", src="uint64"), "bf16", src="fp64")
    direct = no.cast(x, "bf16", src="uint64")
    assert list(chain != direct) == [False, False, False, False, True]
    assert classify_cast_chain("int64", "fp64", "bf16").witness.source_value == "9042383626829825"


# ---- formats the constructor accepts ------------------------------------------------------------------
def test_signed_format_without_subnormals_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="signed format must have subnormals.*ftz/daz.*signed=False"):
        Format("s", 3, 2, 3, signed=True, nan="fn", has_inf=False, has_subnormals=False)
    u = Format("u", 3, 2, 3, signed=False, nan="fn", has_inf=False, has_subnormals=False)  # unsigned: fine
    assert u.min_subnormal == u.min_normal == Fraction(1, 8)  # code 0: 2^(0 - bias)


@pytest.mark.parametrize("fmt", [Format.finite(3, 2, bias=-2), Format.ieee_like(1, 4), Format.ieee_like(1, 2)],
                         ids=lambda f: f"{f.name}_bias{f.bias}")
def test_emin_above_zero_casts_like_the_exact_reference(fmt):
    """A chunk of 64+ elements with a few values below 2^emin recursed forever."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-40, 40, 200), [0.0, -0.0, np.inf, -np.inf, np.nan, 0.3, -0.7, 1.9]])
    for mode in MODES:
        for ftz in (False, True):
            got = no.cast(x, fmt, rounding=mode, ftz=ftz)
            want = [round_value(float(v), fmt, rounding=mode, ftz=ftz) for v in x]
            assert list(map(int, got)) == want, (mode, ftz)


def test_ieee_like_with_one_exponent_bit():
    """Every finite value is subnormal: the largest is (2^m - 1) * 2^(emin - m), not 2 - 2^-m."""
    assert Format.ieee_like(1, 2).max_finite == Fraction(3, 2)
    assert Format.ieee_like(1, 4).max_finite == Fraction(15, 8)


# ---- every derived constant against enumeration of the codes -------------------------------------------
def small_formats() -> list[Format]:
    """Every valid float format of at most 8 bits over the field widths, NaN kinds, signedness,
    subnormals and a few biases (standard, +-1, negative, large), plus the registry's."""
    out = [f for f in no.formats.registry() if not f.is_integer and f.bits <= 8]
    for e, m, signed, nan, inf, sub in itertools.product(range(1, 6), range(0, 5), (True, False),
                                                          ("ieee", "fn", "fnuz", "none"), (True, False),
                                                          (True, False)):
        std = (1 << (e - 1)) - 1
        for bias in sorted({std - 1, std, std + 1, -2, std + 5}):
            try:
                out.append(Format(f"e{e}m{m}b{bias}{nan}{'i' if inf else ''}{'s' if signed else 'u'}"
                                  f"{'' if sub else 'n'}", e, m, bias, signed=signed, nan=nan, has_inf=inf,
                                  has_subnormals=sub))
            except ValueError:
                continue
    return [f for f in out if f.bits <= 8]


SMALL_FORMATS = small_formats()


def _positive_values(fmt: Format) -> list[Fraction]:
    vals = (value_of(c, fmt) for c in range(1 << fmt.bits))
    return sorted({Fraction(v) for v in vals if not isinstance(v, Special) and v > 0})


def _overflows(x: Fraction, fmt: Format, mode: str) -> bool:
    """Whether the engine (and the exact reference) flag x as an overflow in fmt under mode."""
    src = FP64  # holds x exactly for every small format here
    code = round_value(x, src, rounding="rtz")
    assert Fraction(value_of(code, src)) == x
    _, fl = no.cast(np.array([code], np.uint64), fmt, src=src, rounding=mode, flags=True)
    _, fl_exact = round_value(x, fmt, rounding=mode, flags=True)
    assert bool(fl[0] & Flags.OVERFLOW) == bool(fl_exact & Flags.OVERFLOW), (fmt, x, mode)
    return bool(fl[0] & Flags.OVERFLOW)


def test_small_formats_cover_the_kinds():
    assert len(SMALL_FORMATS) > 300
    assert any(f.exp_bits == 1 and f.nan == "ieee" for f in SMALL_FORMATS)  # every finite value subnormal
    assert any(f.emin > 0 for f in SMALL_FORMATS) and any(f.man_bits == 0 for f in SMALL_FORMATS)
    assert any(not f.has_subnormals and f.man_bits > 0 for f in SMALL_FORMATS)


@pytest.mark.parametrize("fmt", [f if i % 2 == 0 else pytest.param(f, marks=pytest.mark.slow)
                                 for i, f in enumerate(SMALL_FORMATS)], ids=lambda f: f.name)
def test_derived_constants_match_enumeration(fmt):
    # every other format in the default tier (the list interleaves the kinds), all of them with -m slow: the
    # default tier's 4-minute budget
    pos = _positive_values(fmt)
    m = fmt.man_bits
    # max finite, min subnormal: the ends of the positive values
    assert fmt.max_finite == pos[-1] and fmt.min_subnormal == pos[0]
    # min normal: 2^emin, below it exactly the subnormals k * min_subnormal, from it p bits of precision
    tiny = [v for v in pos if v < fmt.min_normal]
    n_sub = (1 << m) - 1 if fmt.has_subnormals else 0
    assert tiny == [k * fmt.min_subnormal for k in range(1, min(n_sub, len(pos)) + 1)][:len(tiny)]
    if fmt.max_finite >= fmt.min_normal:
        assert len(tiny) == n_sub and fmt.min_normal in pos
        binade = [v for v in pos if fmt.min_normal <= v < 2 * fmt.min_normal]
        assert binade == [fmt.min_normal * (1 + Fraction(i, 1 << m)) for i in range(len(binade))]
    # the spacing at max finite (the next value above it with an unbounded exponent is max + ulp)
    mx = fmt.max_finite
    e = mx.numerator.bit_length() - mx.denominator.bit_length()
    e -= Fraction(2) ** e > mx
    ulp = fmt.min_subnormal if mx < fmt.min_normal else Fraction(2) ** (e - m)
    assert fmt.top_ulp == ulp
    # overflow thresholds per mode and sign, against the engine's and the exact reference's OVERFLOW flag
    for mode in MODES:
        for sign in (1, -1) if fmt.signed else (1,):
            t, inclusive = fmt.overflow_threshold(mode, sign=sign)
            for k in range(0, 9):
                x = mx + k * ulp / 4
                want = x > t or (x == t and inclusive)
                assert _overflows(sign * x, fmt, mode) == want, (mode, sign, x, t, inclusive)
