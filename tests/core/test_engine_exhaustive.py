"""The engine (``numoracle.cast``) against its twins, code by code.

Default suite (about 25 seconds):

* every code of every registered format of <= 16 bits (floats and integers) into every
  registered destination of <= 16 bits, under every deterministic rounding mode and every
  overflow policy that applies, against the value-table twin (``valuetable.py``); then ftz,
  every ``nan_to``, daz and seeded stochastic rounding, each under a few modes;
* the same sources into the wide destinations (FP32, TF32, FP64, INT32, UINT32, INT64,
  UINT64) against the Fraction twin (``exact.py``): every code of the <= 8-bit sources, a
  stratified sample (edges of every binade class plus seeded random codes) of the 16-bit ones;
* wide sources whose values are exact in float64 (FP32, TF32, FP64, INT32, UINT32 and the
  64-bit integers up to 2^53) into every small destination against the value table, on
  codes next to every destination value and midpoint plus seeded random codes; wide into
  wide against the Fraction twin on a sample.

Exhaustive tier (``@pytest.mark.exhaustive``), run with::

    python -m pytest tests/test_engine_exhaustive.py -m exhaustive -q

* the full policy product (mode x overflow x nan_to x ftz x daz, plus stochastic rounding
  with sr_bits 1..32) on every code of every <= 16-bit pair, and every TF32 code into every
  small destination under every policy: about 1 minute together;
* every code of the 16-bit sources into the wide destinations against the Fraction twin:
  about 20 seconds per pair, 10-12 minutes in all;
* all 2^32 FP32 codes into every small destination under rne and rd, in chunks of 2^22:
  about 6-8 minutes per (destination, mode) on one core, about 25 for FP16 and BF16 (the
  value table's searchsorted over 2^16 entries), 5-6 hours in all; select with ``-k``, e.g.
  ``-k "fp32_every_code and fp8_e4m3fn"``, or leave it out with ``-k "not fp32_every_code"``
  (the rest of the tier then takes about 12 minutes).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import numoracle as no
from numoracle.core import scalar as X
from numoracle.core.formats.format import FP32, FP64, INT32, INT64, TF32, UINT32, UINT64, registry
from numoracle.core.twins import valuetable as V
from numoracle.formats import FP8_E4M3FN, FP16, INT8
from policies import MODES, SMALL, nan_tos, overflows  # noqa: F401

SMALL_FLOATS = [f for f in SMALL if not f.is_integer]
WIDE = [f for f in registry() if f.bits > 16]


def policies(dst):
    """Every deterministic mode under every overflow policy that applies."""
    return [dict(rounding=m, overflow=o) for m in MODES for o in overflows(dst)]


def variants(src, dst, seed: int, n: int):
    """ftz, every nan_to, daz and stochastic rounding, each under a few modes (seeded)."""
    out = []
    if not dst.is_integer:
        out += [dict(rounding=m, ftz=True) for m in ("rne", "ru", "rd", "rto")]
    out += [dict(nan_to=t, rounding=m) for t in nan_tos(dst) if t for m in ("rne", "rtz")]
    if not src.is_integer and src.has_subnormals:
        out += [dict(daz=True, rounding=m) for m in ("rne", "rd")]
        if not dst.is_integer:
            out.append(dict(daz=True, ftz=True, rounding="rna"))
    rng = np.random.default_rng(seed)
    for r in (1, 2, 5, 13, 32):
        out.append(dict(rounding="sr", sr_bits=r, random_bits=rng.integers(0, 1 << r, n, dtype=np.uint64)))
    return out


def _describe(pol) -> str:
    return ", ".join(f"{k}={v}" for k, v in pol.items() if k != "random_bits") or "defaults"


def against_table(codes: np.ndarray, src, dst, pol: dict) -> None:
    """Engine vs value-table twin on an array of source codes; fails with witnesses."""
    pol = dict(pol)
    daz = pol.pop("daz", False)
    engine = no.cast(codes.copy(), dst, src=src, daz=daz, **pol)  # a copy: see test_cast_leaves_its_input_alone
    twin = V.table_convert(codes, src, dst, daz=daz, **pol)
    bad = np.flatnonzero(engine != twin)
    if bad.size:
        w = [(hex(int(codes[i])), hex(int(engine[i])), hex(int(twin[i]))) for i in bad[:6]]
        pytest.fail(f"{src.name} -> {dst.name} [{_describe(pol)}{', daz' if daz else ''}]: {bad.size} of "
                    f"{codes.size} codes differ; (code, engine, value table): {w}")


def against_exact(codes: np.ndarray, src, dst, pol: dict) -> None:
    """Engine vs Fraction twin, element by element."""
    pol = dict(pol)
    daz = pol.pop("daz", False)
    rb = pol.pop("random_bits", None)
    engine = no.cast(codes.copy(), dst, src=src, daz=daz, random_bits=rb, **pol)
    bad = []
    for i, (c, e) in enumerate(zip(codes.tolist(), engine.tolist(), strict=True)):
        r = None if rb is None else int(rb[i])
        x = X.convert_code(c, src, dst, daz=daz, random_bits=r, **pol)
        if x != e:
            bad.append((hex(c), hex(e), hex(x)))
    if bad:
        pytest.fail(f"{src.name} -> {dst.name} [{_describe(pol)}{', daz' if daz else ''}]: {len(bad)} of "
                    f"{codes.size} codes differ; (code, engine, exact): {bad[:6]}")


def all_codes(fmt) -> np.ndarray:
    return np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)


def stratified(fmt, n_random: int, seed: int) -> np.ndarray:
    """Edges of every binade class (each end of each sign half, both sides of the subnormal
    and special boundaries) plus seeded random codes."""
    b = fmt.bits
    edges = [0, 1, 2, 3]
    if not fmt.is_integer:
        m = fmt.man_bits
        for ef in (0, 1, 2, (1 << fmt.exp_bits) - 2, (1 << fmt.exp_bits) - 1):
            base = ef << m
            edges += [base, base + 1, base + (1 << m) - 1, base + (1 << max(m - 1, 0))]
    half = 1 << (b - 1)
    edges += [half - 2, half - 1, half, half + 1, (1 << b) - 2, (1 << b) - 1]
    edges += [e | half for e in edges]
    rng = np.random.default_rng(seed)
    rand = rng.integers(0, 1 << 63, n_random, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n_random, np.uint64)
    if b < 64:
        rand >>= np.uint64(64 - b)
    edges = [e % (1 << b) for e in edges]
    return np.unique(np.concatenate([np.array(edges, np.uint64), rand])).astype(fmt.code_dtype)


# ---- small -> small: every code, against the value table -------------------------------
@pytest.mark.parametrize("dst", SMALL, ids=str)
@pytest.mark.parametrize("src", SMALL, ids=str)
def test_every_code_every_mode(src, dst):
    codes = all_codes(src)
    for pol in policies(dst):
        against_table(codes, src, dst, pol)


@pytest.mark.parametrize("dst", SMALL, ids=str)
@pytest.mark.parametrize("src", SMALL, ids=str)
def test_every_code_variants(src, dst):
    codes = all_codes(src)
    for pol in variants(src, dst, seed=src.bits * 31 + dst.bits, n=codes.size):
        against_table(codes, src, dst, pol)


def test_stochastic_rounding_is_the_documented_rule():
    """Every R for one tie and one quarter point: away iff floor(f * 2^r) + R >= 2^r."""
    src, dst, r = FP32, FP16, 4
    codes = np.array([0x3F801000, 0x3F800800, 0xBF800800], np.uint32)  # 1 + 2^-11, 1 + 2^-12, -(1 + 2^-12)
    for R in range(1 << r):
        got = no.cast(codes, dst, src=src, rounding="sr", sr_bits=r, random_bits=np.full(3, R))
        assert got.tolist() == [0x3C00 + (R >= 8), 0x3C00 + (R >= 12), 0xBC00 + (R >= 12)], R


@pytest.mark.parametrize("src", registry(), ids=str)
def test_cast_leaves_its_input_alone(src):
    """cast must not write into the caller's code array (zeros, specials, every destination)."""
    codes = stratified(src, 64, seed=1)
    keep = codes.copy()
    for dst in (FP16, FP8_E4M3FN, INT8, FP64, UINT64):
        no.cast(codes, dst, src=src)
        assert np.array_equal(codes, keep), f"cast(src={src.name}, dst={dst.name}) modified its input"


# ---- small -> wide: against the Fraction twin -----------------------------------------
def _wide_policies(dst):
    if dst.is_integer:
        return policies(dst) + [dict(nan_to="min"), dict(nan_to="max", overflow="wrap")]
    return [dict(rounding=m) for m in MODES] + [dict(overflow="saturate", rounding="rtz"), dict(ftz=True),
                                                dict(daz=True, ftz=True, rounding="ru")]


@pytest.mark.parametrize("dst", WIDE, ids=str)
@pytest.mark.parametrize("src", SMALL, ids=str)
def test_small_into_wide(src, dst):
    codes = all_codes(src) if src.bits <= 8 else stratified(src, 160, seed=src.bits + dst.bits)
    for pol in _wide_policies(dst):
        if pol.get("daz") and (src.is_integer or not src.has_subnormals):
            continue
        against_exact(codes, src, dst, pol)


# ---- wide -> small: boundary-weighted codes, against the value table -------------------
WIDE_EXACT_SRC = [FP32, TF32, FP64, INT32, UINT32, INT64, UINT64]


def codes_near(targets: np.ndarray, src) -> np.ndarray:
    """Source codes at and next to float64 target values (two codes either side)."""
    t = targets[np.isfinite(targets)]
    if src is FP64:
        c = t.view(np.uint64)
    elif src in (FP32, TF32):
        with np.errstate(over="ignore"):
            c = t.astype(np.float32).view(np.uint32).astype(np.uint64)
        if src is TF32:
            c = c >> np.uint64(13)
    else:
        lo, hi = src.min_value, src.max_value
        lim = min(hi, 2**53)
        v = np.clip(np.floor(t), max(lo, -lim), lim).astype(np.int64)
        c = (v.astype(object) % (1 << src.bits)).astype(np.uint64)
    top = (1 << src.bits) - 1
    out = [np.clip(c.astype(np.int64) + d, 0, top) if src.bits < 64 else c + np.uint64(d % (1 << 64))
           for d in (-2, -1, 0, 1, 2)]
    return np.concatenate(out).astype(np.uint64)


def wide_sample(src, dst, n_random: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dst.is_integer:
        t = np.arange(dst.min_value - 2, dst.max_value + 3, dtype=np.float64)
        t = np.concatenate([t, t + 0.5])
    else:
        ext = V.value_table(dst).ext
        t = np.concatenate([ext, ext[:-1] / 2 + ext[1:] / 2])
        t = np.concatenate([t, t / 2 ** (dst.man_bits + 1)])  # values and midpoints a binade-row lower
    if t.size > 4096:
        t = rng.choice(t, 4096, replace=False)
    near = codes_near(t, src)
    rand = rng.integers(0, 1 << src.bits, n_random, dtype=np.uint64) if src.bits < 64 else \
        rng.integers(0, 1 << 63, n_random, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n_random, np.uint64)
    if src is FP64:  # random codes with exponents where the small formats live
        e = rng.integers(1023 - 150, 1023 + 150, n_random).astype(np.uint64)
        rand = (rand & np.uint64((1 << 52) - 1)) | (e << np.uint64(52)) | (rand & np.uint64(1 << 63))
    if src in (INT64, UINT64):  # values exact in float64: |v| <= 2^53
        rand = rand >> np.uint64(10)
        if src is INT64:
            rand = np.where(rng.integers(0, 2, n_random).astype(bool), (-(rand.astype(np.int64))).view(np.uint64),
                            rand)
    special = np.array([0, 1, (1 << src.bits) - 1, 1 << (src.bits - 1), (1 << (src.bits - 1)) - 1], np.uint64)
    codes = np.unique(np.concatenate([near, rand, special]))
    if src in (INT64, UINT64):
        vals = codes.view(np.int64) if src is INT64 else codes
        codes = codes[(vals <= 2**53) & (vals >= -(2**53))] if src is INT64 else codes[vals <= np.uint64(2**53)]
    return codes.astype(src.code_dtype)


@pytest.mark.parametrize("dst", SMALL, ids=str)
@pytest.mark.parametrize("src", WIDE_EXACT_SRC, ids=str)
def test_wide_into_small(src, dst):
    codes = wide_sample(src, dst, 8192, seed=src.bits * 7 + dst.bits)
    pols = policies(dst) + [dict(nan_to=t) for t in nan_tos(dst) if t]
    if not dst.is_integer:
        pols.append(dict(ftz=True, rounding="rne"))
    if not src.is_integer:
        pols.append(dict(daz=True, rounding="rtz"))
    rng = np.random.default_rng(5)
    pols.append(dict(rounding="sr", sr_bits=9, random_bits=rng.integers(0, 1 << 9, codes.size)))
    for pol in pols:
        against_table(codes, src, dst, pol)


@pytest.mark.parametrize("dst", WIDE, ids=str)
@pytest.mark.parametrize("src", WIDE, ids=str)
def test_wide_into_wide(src, dst):
    codes = stratified(src, 24, seed=src.bits * 3 + dst.bits)
    pols = [dict(rounding=m) for m in MODES]
    pols += [dict(rounding="rne", overflow="wrap")] if dst.is_integer else [dict(rounding="rna", overflow="saturate")]
    for pol in pols:
        against_exact(codes, src, dst, pol)


# ---- the exhaustive tier ----------------------------------------------------------------
def full_product(src, dst):
    fl = [False] if dst.is_integer else [False, True]
    dz = [False, True] if not src.is_integer and src.has_subnormals else [False]
    for m, o, t, f, d in itertools.product(MODES, overflows(dst), nan_tos(dst), fl, dz):
        yield dict(rounding=m, overflow=o, ftz=f, daz=d, **({} if t is None else {"nan_to": t}))


@pytest.mark.exhaustive
@pytest.mark.parametrize("dst", SMALL, ids=str)
@pytest.mark.parametrize("src", SMALL, ids=str)
def test_full_policy_product(src, dst):
    codes = all_codes(src)
    for pol in full_product(src, dst):
        against_table(codes, src, dst, pol)
    rng = np.random.default_rng(src.bits + 100 * dst.bits)
    for r in range(1, 33):
        against_table(codes, src, dst, dict(rounding="sr", sr_bits=r,
                                            random_bits=rng.integers(0, 1 << r, codes.size, dtype=np.uint64)))


@pytest.mark.exhaustive
@pytest.mark.parametrize("dst", SMALL, ids=str)
def test_tf32_every_code(dst):
    codes = all_codes(TF32)
    for pol in policies(dst) + [dict(ftz=True, daz=True)] * (not dst.is_integer):
        against_table(codes, TF32, dst, pol)


@pytest.mark.exhaustive
@pytest.mark.parametrize("dst", WIDE, ids=str)
@pytest.mark.parametrize("src", [f for f in SMALL if f.bits > 8], ids=str)
def test_16bit_every_code_into_wide(src, dst):
    for pol in _wide_policies(dst):
        if not (pol.get("daz") and (src.is_integer or not src.has_subnormals)):
            against_exact(all_codes(src), src, dst, pol)


@pytest.mark.exhaustive
@pytest.mark.parametrize("mode", ["rne", "rd"])
@pytest.mark.parametrize("dst", SMALL, ids=str)
def test_fp32_every_code(dst, mode):
    step = 1 << 22
    for lo in range(0, 1 << 32, step):
        codes = np.arange(lo, lo + step, dtype=np.uint64).astype(np.uint32)
        against_table(codes, FP32, dst, dict(rounding=mode))


def test_the_twins_are_not_the_engine():
    """The value table and the Fraction twin must not route through the engine."""
    import inspect

    for mod in (V, X):
        src = inspect.getsource(mod)
        for banned in ("softfloat import", "from .softfloat", "from .convert", "from . import", "round_pack(",
                       "unpack(", "decode("):
            assert banned not in src, (mod.__name__, banned)
        for name, obj in vars(mod).items():
            origin = getattr(obj, "__module__", None) or getattr(obj, "__name__", "")
            engine = ("numoracle.core.engine.softfloat", "numoracle.core.engine.convert")
            assert not str(origin).startswith(engine), (mod.__name__, name)
