"""The engine against the Fraction twin (``exact.py``) for wide sources, by hypothesis.

Sources FP32, FP64, TF32, INT32, UINT32, INT64 and UINT64 go into every registered
destination under every rounding mode (stochastic included) and every policy that applies.
Codes are drawn boundary-weighted: for each (source, destination) pair a pool holds the
source codes at and next to the destination's rounding thresholds (midpoints of its values
near 1, near the subnormal edge and at the top; the overflow thresholds; the integer range
ends and their half-way points), the source's own edges (+-0, subnormal edges, max finite,
+-inf, NaNs with several payloads and signs, 2^p and 2^p + 1 at each precision limit, the
integer extremes), and codes a few ulps of the source away from each. Hypothesis runs
derandomized, so the suite is reproducible.
"""

from __future__ import annotations

from fractions import Fraction as F
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numoracle as no
from numoracle.core import scalar as X
from numoracle.core.formats.format import BF16, FP16, FP32, FP64, INT32, INT64, TF32, UINT32, UINT64, registry
from numoracle.core.formats.policy import Flags
from numoracle.formats import E8M0FNU, FP4_E2M1FN, FP8_E4M3FN, FP8_E4M3FNUZ, FP8_E5M2FNUZ, INT8, UINT8
from policies import MODES, SMALL, nan_tos, overflows  # noqa: F401

SOURCES = [FP32, FP64, TF32, INT32, UINT32, INT64, UINT64]
DESTS = registry()
P2 = F(2)


def _targets(fmt) -> list[F]:
    """Values where ``fmt``'s rounding changes: its edges, thresholds and a few midpoints."""
    if fmt.is_integer:
        out = [F(fmt.max_value), F(fmt.min_value), F(1, 2), F(3, 2), F(5, 2), F(1 << (fmt.bits - 1)), F(2**24 + 1),
               F(2**53 + 1), F(2**63), F(2**64)]
        out += [v + d for v in (F(fmt.max_value), F(fmt.min_value)) for d in (F(-1, 2), F(1, 2), F(1), F(-1))]
        return out
    m = fmt.man_bits
    ulp_top = P2 ** (fmt.emax - m)
    mx, tiny = fmt.max_finite, fmt.min_subnormal
    out = [mx, mx + ulp_top / 2, mx + ulp_top, mx + 2 * ulp_top, tiny, tiny / 2, 3 * tiny / 2, tiny / 4,
           fmt.min_normal, fmt.min_normal - tiny / 2, F(1), 1 + fmt.eps / 2, 1 + 3 * fmt.eps / 2, 3 * fmt.eps / 4,
           P2 ** fmt.precision, P2 ** fmt.precision + 1, P2 ** (fmt.precision + 1) + 2, F(3) * P2 ** (fmt.emax - 1)]
    return out


@cache
def pool(src, dst) -> tuple[int, ...]:
    """Source codes next to every target of both formats, plus the source's specials."""
    codes: set[int] = set()
    top = (1 << src.bits) - 1
    targets = _targets(dst) + _targets(src)
    for t in targets:
        for v in (t, -t):
            for mode in ("rd", "ru"):
                try:
                    c = X.round_value(v, src, rounding=mode, overflow="saturate")
                except ValueError:
                    continue
                codes.update(min(max(c + d, 0), top) for d in (-1, 0, 1))
    if src.is_integer:
        codes.update({0, 1, top, top >> 1, (top >> 1) + 1})
    else:
        m, sb = src.man_bits, src.sign_bit
        inf = ((1 << src.exp_bits) - 1) << m
        for c in (0, 1, (1 << m) - 1, 1 << m, inf, inf | 1, inf | (1 << (m - 1)), inf | ((1 << m) - 1)):
            codes.update({c, c | sb})
    return tuple(sorted(codes))


@st.composite
def cases(draw, src, dst):
    """(codes, policy): boundary-weighted codes and any policy that applies to ``dst``."""
    near = st.builds(lambda c, d: min(max(c + d, 0), (1 << src.bits) - 1), st.sampled_from(pool(src, dst)),
                     st.integers(-4, 4))
    one = st.one_of(st.sampled_from(pool(src, dst)), near, st.integers(0, (1 << src.bits) - 1))
    codes = draw(st.lists(one, min_size=1, max_size=10))
    mode = draw(st.sampled_from(MODES + ["sr"]))
    pol: dict = dict(rounding=mode)
    ov = draw(st.sampled_from([None] + overflows(dst)))
    if ov is not None:
        pol["overflow"] = ov
    if dst.is_integer or not dst.has_nan:
        t = draw(st.sampled_from([None, "max", "zero", "min"]))
        if t is not None:
            pol["nan_to"] = t
    if not dst.is_integer and draw(st.booleans()):
        pol["ftz"] = True
    if not src.is_integer and draw(st.booleans()):
        pol["daz"] = True
    if mode == "sr":
        r = draw(st.integers(1, 32))
        pol["sr_bits"] = r
        pol["random_bits"] = draw(st.lists(st.integers(0, (1 << r) - 1), min_size=len(codes), max_size=len(codes)))
    return codes, pol


def compare(codes, src, dst, pol, flags=False):
    pol = dict(pol)
    rb = pol.pop("random_bits", None)
    daz = pol.pop("daz", False)
    arr = np.array(codes, dtype=src.code_dtype)
    got = no.cast(arr.copy(), dst, src=src, daz=daz, flags=flags,
                  random_bits=None if rb is None else np.array(rb, np.uint64), **pol)
    got, fl = got if flags else (got, None)
    for i, c in enumerate(codes):
        r = None if rb is None else rb[i]
        want = X.convert_code(c, src, dst, daz=daz, random_bits=r, flags=flags, **pol)
        if flags:
            want, wf = want
            assert int(fl[i]) == int(wf), (f"{src.name} {c:#x} -> {dst.name} {pol}: engine flags "
                                           f"{Flags(int(fl[i]))!r}, exact {wf!r}")
        assert int(got[i]) == want, (f"{src.name} {c:#x} -> {dst.name} {pol} daz={daz} R={r}: engine "
                                     f"{int(got[i]):#x}, exact {want:#x}")


@pytest.mark.parametrize("dst", DESTS, ids=str)
@pytest.mark.parametrize("src", SOURCES, ids=str)
@settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_engine_matches_exact(src, dst, data):
    codes, pol = data.draw(cases(src, dst))
    compare(codes, src, dst, pol)


@pytest.mark.parametrize("dst", [FP16, BF16, FP8_E4M3FN, FP8_E5M2FNUZ, FP4_E2M1FN, E8M0FNU, FP32,
                                 INT8, UINT32, INT64], ids=str)
@pytest.mark.parametrize("src", [FP32, FP64, INT64], ids=str)
@settings(max_examples=20, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_flags_match_exact(src, dst, data):
    codes, pol = data.draw(cases(src, dst))
    compare(codes, src, dst, pol, flags=True)


def test_every_pool_code_in_every_mode():
    """The whole boundary pool of a few pairs, every mode: no sampling between them."""
    for src, dst in ((FP32, FP16), (FP64, FP32), (FP64, FP8_E4M3FN), (INT32, FP32), (INT64, FP64),
                     (UINT64, FP32), (FP64, INT64), (FP32, UINT32), (FP64, E8M0FNU), (FP64, TF32)):
        codes = list(pool(src, dst))
        for mode in MODES:
            for ov in overflows(dst):
                compare(codes, src, dst, dict(rounding=mode, overflow=ov))


# (source, code, destination, policy, expected code): precision limits and range ends, by hand
LIMITS = [
    (INT32, 2**24 + 1, FP32, {}, 0x4B800000), (INT32, 2**24 + 1, FP32, dict(rounding="ru"), 0x4B800001),
    (INT32, 2**24 + 1, FP32, dict(rounding="rto"), 0x4B800001), (INT32, 2**24 + 3, FP32, {}, 0x4B800002),
    (INT64, 2**53 + 1, FP64, {}, 0x4340000000000000),
    (INT64, 2**53 + 1, FP64, dict(rounding="rto"), 0x4340000000000001),
    (UINT64, 2**64 - 1, FP32, {}, 0x5F800000), (UINT64, 2**64 - 1, FP32, dict(rounding="rtz"), 0x5F7FFFFF),
    (UINT64, 2**64 - 1, FP64, {}, 0x43F0000000000000), (INT64, 1 << 63, FP16, {}, 0xFC00),
    (INT64, 1 << 63, FP16, dict(overflow="saturate"), 0xFBFF), (INT64, 1 << 63, INT32, {}, 0x80000000),
    (INT64, 1 << 63, INT32, dict(overflow="wrap"), 0), (UINT64, 2**64 - 1, INT64, {}, 2**63 - 1),
    (UINT64, 2**64 - 1, INT64, dict(overflow="wrap"), 2**64 - 1), (INT32, 2**32 - 1, UINT64, {}, 0),
    (INT32, 2**32 - 1, UINT64, dict(overflow="wrap"), 2**64 - 1), (INT32, 2**31, UINT8, dict(overflow="wrap"), 0),
    (FP64, 1, FP32, {}, 0), (FP64, 1, FP32, dict(rounding="ru"), 1), (FP64, 1, FP32, dict(rounding="rto"), 1),
    (FP64, 0x8000000000000001, FP32, dict(rounding="rd"), 0x80000001), (FP64, 0x8000000000000001, FP32, {},
                                                                         0x80000000),
    (FP32, 0x7F7FFFFF, BF16, {}, 0x7F80), (FP32, 0x7F7FFFFF, BF16, dict(rounding="rtz"), 0x7F7F),
    (FP32, 0x7F7FFFFF, BF16, dict(rounding="rto"), 0x7F7F), (FP32, 0x7F7FFFFF, TF32, {}, 0x3FC00),
    (FP64, 0xFFF0000000000001, FP32, {}, 0x7FC00000), (FP64, 0x7FF4000000000000, FP16, {}, 0x7E00),
    (FP32, 0xFFC00001, FP8_E4M3FNUZ, {}, 0x80), (FP32, 0x7F800001, INT8, {}, 0),
    (FP32, 0x4EFFFFFF, INT32, {}, 0x7FFFFF80), (FP32, 0x4F000000, INT32, {}, 0x7FFFFFFF),
    (FP32, 0x4F000000, INT32, dict(overflow="wrap"), 0x80000000), (FP32, 0xCF000000, INT32, {}, 0x80000000),
    (FP64, 0x43F0000000000000, UINT64, {}, 2**64 - 1), (FP64, 0x43F0000000000000, UINT64, dict(overflow="wrap"), 0),
    (FP64, 0xBFE0000000000000, UINT64, dict(rounding="rd"), 0),
    (FP64, 0xBFE0000000000000, UINT64, dict(rounding="rd", overflow="wrap"), 2**64 - 1),
    (FP64, 0x47EFFFFFF0000000, FP32, {}, 0x7F800000), (FP64, 0x47EFFFFFEFFFFFFF, FP32, {}, 0x7F7FFFFF),
    (FP32, 0x00400000, FP32, dict(ftz=True), 0), (FP32, 0x80400000, FP16, dict(daz=True, rounding="rd"), 0x8000),
    (FP64, 0x3FF0000010000000, FP32, {}, 0x3F800000), (FP64, 0x3FF0000010000001, FP32, {}, 0x3F800001),
    (FP64, 0x3FF0000030000000, FP32, {}, 0x3F800002),
    (FP64, 0x3FF0000010000000, FP32, dict(rounding="rna"), 0x3F800001),
]


@pytest.mark.parametrize("src,code,dst,pol,want", LIMITS,
                         ids=lambda v: hex(v) if isinstance(v, int) else (str(v) if not isinstance(v, dict) else
                                                                          ",".join(f"{k}={w}" for k, w in v.items())))
def test_precision_limits_by_hand(src, code, dst, pol, want):
    pol = dict(pol)
    daz = pol.pop("daz", False)
    assert X.convert_code(code, src, dst, daz=daz, **pol) == want
    got = no.cast(np.array([code], dtype=src.code_dtype), dst, src=src, daz=daz, **pol)
    assert int(got[0]) == want, f"engine {int(got[0]):#x}"
