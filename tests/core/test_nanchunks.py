"""Chunks of mostly NaNs (convert._nans_apart) against unpack / round_pack on the whole chunk: codes and flags.

The engine's loop gives each NaN of a chunk that is a quarter NaN or more the code and flags of one NaN of its
kind (quiet, signalling) run through the engine. Every source encoding of NaN (IEEE with quiet and signalling
NaNs, FN, FNUZ), random payloads and signs, mixed with finite values, into float, zero-less and integer
destinations under each nan_to.
"""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.core.engine.convert import _engine
from numoracle.core.engine.softfloat import round_pack, unpack, word_bits
from numoracle.core.formats.policy import resolve_policy
from numoracle.formats import (
    BF16,
    E8M0FNU,
    FP4_E2M1FN,
    FP8_E4M3FN,
    FP8_E4M3FNUZ,
    FP8_E5M2,
    FP16,
    FP32,
    FP64,
    INT8,
    UINT16,
)
from policies import nan_tos

SOURCES = [FP32, FP16, BF16, FP8_E5M2, FP8_E4M3FN, FP8_E4M3FNUZ, FP64]
DSTS = [BF16, FP8_E4M3FN, FP8_E4M3FNUZ, FP4_E2M1FN, E8M0FNU, INT8, UINT16]


def nan_heavy(src, rng, n: int = 4096) -> np.ndarray:
    """Codes: 60% NaNs (every NaN code of src's encoding: random payloads and signs), the rest random codes."""
    dt = np.dtype(src.code_dtype)
    codes = rng.integers(0, 1 << src.bits, n, dtype=np.uint64)
    nan = rng.random(n) < 0.6
    if src.nan == "fnuz":
        codes[nan] = src.sign_bit
    elif src.nan == "fn":
        codes[nan] = src.mag_mask | (rng.integers(0, 2, n, dtype=np.uint64)[nan] << np.uint64(src.bits - 1))
    else:
        payload = rng.integers(1, 1 << src.man_bits, n, dtype=np.uint64)
        codes[nan] = (np.uint64(src.max_mag_code + 1) | payload[nan]
                      | (rng.integers(0, 2, n, dtype=np.uint64)[nan] << np.uint64(src.bits - 1)))
    return codes.astype(dt)


@pytest.mark.parametrize("src", SOURCES, ids=lambda f: f.name)
def test_nan_heavy_chunks_match_the_engine_on_the_whole_chunk(src, rng):
    codes = nan_heavy(src, rng)
    for dst in DSTS:
        for nt in nan_tos(dst):
            pol = resolve_policy(dst, "rne", None, nt, False, False, None)
            W = word_bits(src, dst, None)
            want, want_fl = round_pack(unpack(codes, src, W), dst, pol, None, True)
            got, got_fl = _engine(codes, src, dst, pol, None, True)
            assert np.array_equal(got, want) and np.array_equal(got_fl, want_fl), (src, dst, pol)
            assert np.array_equal(_engine(codes, src, dst, pol, None, False)[0], want)
