"""Cast chains: the proof against brute force, the acceptance chains, the report, the errors.

Exhaustive tier (``python -m pytest tests/test_chains.py -m exhaustive``): every chain of
registry formats with a source of 16 bits or fewer (all modes, default and saturating overflow)
against enumeration, and INT32 / FP32 sources on 12 chains against all 2^32 codes (a few
minutes each on 2 cores).
"""

from __future__ import annotations

import json
import random
import time

import numpy as np
import pytest

import numoracle as no
from numoracle import assert_chain_equivalent, classify_cast_chain
from numoracle.chains import find_equivalent_chains
from numoracle.cli import main
from numoracle.formats import (
    BF16,
    E8M0FNU,
    FP4_E2M1FN,
    FP8_E4M3FN,
    FP8_E5M2,
    FP16,
    FP32,
    FP64,
    INT8,
    INT16,
    INT32,
    INT64,
    TF32,
    UINT8,
)

SMALL = [f for f in no.formats.registry() if f.bits <= 16]
MODES = ["rne", "rna", "rtz", "ru", "rd", "rto"]


def _agrees_with_brute_force(src, via, dst, rounding="rne", overflow=None):
    try:
        proof = classify_cast_chain(src, via, dst, rounding=rounding, overflow=overflow, method="auto")
    except ValueError:  # a policy that does not apply to one of the hops
        with pytest.raises(ValueError):
            classify_cast_chain(src, via, dst, rounding=rounding, overflow=overflow, method="exhaustive")
        return
    brute = classify_cast_chain(src, via, dst, rounding=rounding, overflow=overflow, method="exhaustive")
    label = f"{src}->{via}->{dst} {rounding} overflow={overflow}"
    assert proof.equivalent == brute.equivalent, label
    wp = proof.witness.source_code if proof.witness else None
    wb = brute.witness.source_code if brute.witness else None
    assert wp == wb, f"{label}: proof witness {wp}, brute force {wb}"
    assert proof.reason == brute.reason, label


# ---- the acceptance chains ------------------------------------------------------------------
def test_int32_fp32_fp16_is_the_seed_argument():
    t0 = time.perf_counter()
    v = classify_cast_chain(INT32, FP32, FP16)
    assert time.perf_counter() - t0 < 1.0
    assert v.equivalent and v.witness is None and v.reason == "EXACT_WHERE_FINITE"
    rows = [(r.range_text(), r.hops, r.agree) for r in v.regions]
    assert rows == [
        ("|x| <= 65504", ("exact", "exact / rounds"), True),
        ("65504 < |x| < 65520", ("exact", "rounds"), True),
        ("65520 <= |x| <= 16777216", ("exact", "overflows"), True),
        ("16777216 < |x|", ("exact / rounds", "overflows"), True),
    ]
    text = str(v)
    assert "EQUALS" in text and "65504 < |x| < 65520" in text and "proof: cell proof" in text


NOT_EQUIVALENT = [
    ((FP32, FP16, FP8_E4M3FN), "DOUBLE_ROUNDING"),
    ((FP32, BF16, FP8_E4M3FN), "DOUBLE_ROUNDING"),
    ((INT32, FP32, BF16), "DOUBLE_ROUNDING"),
    ((INT32, BF16, FP8_E4M3FN), "DOUBLE_ROUNDING"),
    ((FP64, FP32, BF16), "DOUBLE_ROUNDING"),
    ((FP64, FP32, FP16), "DOUBLE_ROUNDING"),
    ((INT64, FP64, FP32), "DOUBLE_ROUNDING"),
]


@pytest.mark.parametrize("chain,reason", NOT_EQUIVALENT, ids=lambda c: "-".join(map(str, c)) if isinstance(c, tuple)
                         else c)
def test_witness_is_confirmed_by_the_engine(chain, reason):
    v = classify_cast_chain(*chain)
    assert not v.equivalent and v.reason == reason
    w = v.witness
    code = np.array([w.source_code], np.uint64).astype(chain[0].code_dtype)
    c = code
    for a, b, expected in zip(chain, chain[1:], w.hop_codes):
        c = no.cast(c, b, src=a)
        assert int(c[0]) == expected
    direct = no.cast(code, chain[-1], src=chain[0])
    assert int(direct[0]) == w.direct_code != w.chain_code


def test_known_witnesses_are_the_smallest():
    # INT32 -> BF16 -> E4M3FN (THEORY 5: n = 273); every smaller magnitude agrees
    v = classify_cast_chain(INT32, BF16, FP8_E4M3FN)
    assert v.witness.source_value == "273"
    xs = np.arange(-273 + 1, 273, dtype=np.int64).astype(np.int32).view(np.uint32)
    assert (no.cast(no.cast(xs, BF16, src=INT32), FP8_E4M3FN, src=BF16) == no.cast(xs, FP8_E4M3FN, src=INT32)).all()
    # INT32 -> FP32 -> BF16: 2^24 + 2^16 + 1
    assert classify_cast_chain(INT32, FP32, BF16).witness.source_value == str(2**24 + 2**16 + 1)


@pytest.mark.parametrize("chain,kw,reason", [
    ((FP16, FP32, BF16), {}, "EXACT_INTERMEDIATE"),
    ((INT16, FP32, FP16), {}, "EXACT_INTERMEDIATE"),
    ((INT32, FP64, FP16), {}, "EXACT_INTERMEDIATE"),
    ((FP32, FP16, FP8_E4M3FN), {"rounding": ["rto", "rne"]}, "INNOCUOUS_DOUBLE_ROUNDING"),
    ((FP32, BF16, FP8_E4M3FN), {"rounding": "rtz"}, "INNOCUOUS_DOUBLE_ROUNDING"),
    ((INT32, FP32, FP8_E4M3FN), {}, "EXACT_WHERE_FINITE"),
])
def test_equivalent_chains(chain, kw, reason):
    v = assert_chain_equivalent(*chain, **kw)
    assert v.equivalent and v.reason == reason and v.witness is None


def test_round_to_odd_needs_two_more_bits():
    # E5M2 (p = 3) is too narrow an odd intermediate for E4M3 (p = 4): p' >= p + 2 fails
    assert not classify_cast_chain(FP32, FP8_E5M2, FP8_E4M3FN, rounding=["rto", "rne"]).equivalent
    assert classify_cast_chain(FP32, TF32, FP16, rounding=["rto", "rne"]).equivalent is False  # p' = p


# ---- the proof against brute force ----------------------------------------------------------
@pytest.mark.parametrize("src", [f for f in SMALL if f.bits <= 8], ids=str)
def test_every_chain_from_small_sources_matches_brute_force(src):
    for via in SMALL:
        for dst in SMALL:
            _agrees_with_brute_force(src, via, dst)


def test_sampled_16_bit_chains_match_brute_force():
    rng = random.Random(1234)
    wide = [f for f in SMALL if f.bits == 16]
    for _ in range(120):
        src, via, dst = rng.choice(wide), rng.choice(SMALL), rng.choice(SMALL)
        _agrees_with_brute_force(src, via, dst, rng.choice(MODES), rng.choice([None, "saturate"]))


@pytest.mark.exhaustive
@pytest.mark.parametrize("src", SMALL, ids=str)
def test_all_small_source_chains_match_brute_force(src):
    for via in SMALL:
        for dst in SMALL:
            for mode in MODES:
                for overflow in (None, "saturate"):
                    _agrees_with_brute_force(src, via, dst, mode, overflow)


WIDE_CHAINS = [
    (INT32, FP32, FP16), (INT32, FP32, BF16), (INT32, BF16, FP8_E4M3FN), (INT32, FP16, FP32),
    (INT32, FP32, FP8_E4M3FN), (INT32, FP64, FP16), (FP32, FP16, FP8_E4M3FN), (FP32, BF16, FP8_E4M3FN),
    (FP32, FP16, BF16), (FP32, TF32, FP16), (FP32, INT32, FP32), (FP32, E8M0FNU, UINT8),
]


@pytest.mark.exhaustive
@pytest.mark.parametrize("chain", WIDE_CHAINS, ids=lambda c: "-".join(map(str, c)))
def test_32_bit_sources_match_brute_force(chain):
    from concurrent.futures import ProcessPoolExecutor

    proof = classify_cast_chain(*chain)
    with ProcessPoolExecutor() as ex:
        brute = classify_cast_chain(*chain, method="exhaustive", executor=ex)
    assert proof.equivalent == brute.equivalent
    assert (proof.witness and proof.witness.source_code) == (brute.witness and brute.witness.source_code)


# ---- legalisation search, assertion, report ------------------------------------------------
def test_find_equivalent_chains_uses_round_to_odd():
    isa = [(FP32, FP16, ["rne", "rto"]), (FP16, FP8_E4M3FN), (FP32, BF16, "rne"), (BF16, FP8_E4M3FN)]
    found = find_equivalent_chains(FP32, FP8_E4M3FN, isa)
    assert [v.chain for v in found] == ["fp32 -(rto)-> fp16 -(rne)-> fp8_e4m3fn"]
    assert find_equivalent_chains(FP32, FP8_E4M3FN, [(FP32, FP16), (FP16, FP8_E4M3FN)]) == []


def test_assert_chain_equivalent_message_is_the_argument():
    with pytest.raises(AssertionError) as e:
        assert_chain_equivalent(INT32, BF16, FP8_E4M3FN)
    msg = str(e.value)
    assert "smallest witness: int32 273 (0x00000111) -> bf16 272" in msg
    assert "chain = direct" in msg and "NO" in msg


def test_verdict_forms():
    v = classify_cast_chain(FP64, FP32, BF16)
    d = v.to_dict()
    assert d["equivalent"] is False and d["witness"]["source_code"] == "0x3790000000000001"
    assert json.loads(v.to_json()) == d
    md = v.to_markdown()
    assert md.startswith("**fp64 -(rne)-> fp32 -(rne)-> bf16 DIFFERS") and "| source range |" in md
    assert v.proof.points > 0 and "cell proof" in v.proof.method


def test_per_hop_policies():
    v = classify_cast_chain(FP32, FP16, FP8_E4M3FN, rounding=["rto", "rne"], overflow=["ieee", "saturate"])
    assert [p.overflow.value for p in v.spec.policies] == ["ieee", "saturate"]
    assert v.spec.direct.overflow.value == "saturate"


# ---- bad input --------------------------------------------------------------------------------
@pytest.mark.parametrize("args,kw,match", [
    ((INT32,), {}, "at least two formats"),
    ((INT32, "fp17", FP16), {}, "unknown format 'fp17'"),
    ((INT32, FP32, FP16), {"rounding": ["rne"]}, "rounding has 1 entries but the chain has 2 hops"),
    ((INT32, FP32, FP16), {"overflow": ["ieee"] * 3}, "overflow has 3 entries"),
    ((INT64, INT8, FP16), {"overflow": ["wrap", None]}, "64-bit source is too wide to enumerate"),
    ((INT64, FP32, FP16), {"rounding": "sr"}, "stochastic rounding"),
    ((FP32, FP8_E4M3FN, FP16), {"overflow": "ieee"}, "hop 1 .*needs infinities"),
    ((INT32, FP32, FP16), {"method": "guess"}, "method must be"),
])
def test_bad_input(args, kw, match):
    with pytest.raises(ValueError, match=match):
        classify_cast_chain(*args, **kw)


# ---- command line ------------------------------------------------------------------------------
def test_cli_chain(capsys):
    assert main(["chain", "int32", "fp32", "fp16"]) == 0
    out = capsys.readouterr().out
    assert "EQUALS" in out and "65504 < |x| < 65520" in out
    assert main(["chain", "int32", "fp32", "bf16", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["witness"]["source_value"] == str(2**24 + 2**16 + 1)
    assert main(["chain", "fp32", "fp16", "fp8_e4m3fn", "--rounding", "rto,rne"]) == 0
    assert "INNOCUOUS_DOUBLE_ROUNDING" in capsys.readouterr().out
    assert main(["chain", "int32"]) == 2


def test_cli_chains(capsys):
    assert main(["chains", "--from", "fp32", "--to", "fp8_e4m3fn", "--via", "fp16,bf16"]) == 0
    out = capsys.readouterr().out
    assert "EQUAL   fp32 -(rto)-> fp16 -(rne)-> fp8_e4m3fn" in out
    assert "differ  fp32 -(rne)-> fp16 -(rne)-> fp8_e4m3fn" in out


def test_witness_prefers_finite_values_to_the_many_nans():
    """FP16 has 2046 NaN codes; when NaNs and finite values both differ, the witness is the finite one
    of least magnitude (NaNs come last), in the proof and in enumeration alike."""
    for method in ("auto", "exhaustive"):
        v = classify_cast_chain(FP16, FP4_E2M1FN, FP16, method=method)
        assert v.witness.source_code == 0x0001, method
