"""Cast chains, generative tier: seeded random chains held to brute force.

Each chain has 2-5 hops over registry formats and random user formats (integers of 2-16 bits,
IEEE-like, FN, FNUZ with and without infinities, all-finite, unsigned, without subnormals,
precision 1 and up, odd biases), a rounding mode and an overflow policy per hop, and ftz half
the time. Every source code (sources of 16 bits or fewer) is taken through the chain hop by hop
with ``numoracle.cast`` and straight to the destination; the verdict of ``classify_cast_chain``
must say the same, and its witness must be the smallest-magnitude differing source (-0 as
small as +0, ties to the smaller code, infinities after finite values, NaNs last).

Default tier: ``N_DEFAULT`` chains (well under a minute). Slow tier:
``NUMORACLE_CHAIN_FUZZ`` chains (default 5,000) from seed ``NUMORACLE_CHAIN_FUZZ_SEED``
(default 10^6), e.g. ``NUMORACLE_CHAIN_FUZZ=20000 python -m pytest -m slow
tests/test_chains_generative.py``; split a long run across processes by seed.
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

import numoracle as no
from numoracle import Format, classify_cast_chain
from numoracle.core.engine.codekeys import is_nan
from numoracle.formats import IntFormat

MODES = ["rne", "rna", "rtz", "ru", "rd", "rto"]
N_DEFAULT = 300
REGISTRY = [f for f in no.formats.registry()]
SMALL_REGISTRY = [f for f in REGISTRY if f.bits <= 16]


def user_float(rng: random.Random, max_bits: int) -> Format:
    """A random valid float format of at most max_bits bits."""
    while True:
        nan = rng.choice(["ieee", "fn", "fnuz", "fnuz_inf", "none"])
        signed = nan.startswith("fnuz") or rng.random() < 0.75
        subnormals = signed or rng.random() < 0.5
        e, m = rng.randint(1, 5), rng.randint(0, 4)
        if not 2 <= int(signed) + e + m <= max_bits:
            continue
        std = (1 << (e - 1)) - 1
        bias = rng.choice([std, std + 1, std - 1, rng.randint(-3, std + 4)])
        name = f"u_e{e}m{m}b{bias}_{nan}{'' if signed else '_unsigned'}{'' if subnormals else '_nosub'}"
        try:
            return Format(name, e, m, bias, signed=signed, nan="fnuz" if nan == "fnuz_inf" else nan,
                          has_inf=nan in ("ieee", "fnuz_inf"), has_subnormals=subnormals)
        except ValueError:
            continue


def random_format(rng: random.Random, source: bool):
    r = rng.random()
    if r < 0.35:
        return rng.choice(SMALL_REGISTRY if source else REGISTRY)
    if r < 0.55:
        return IntFormat(rng.randint(2, 12 if source else 16), rng.random() < 0.7)
    return user_float(rng, 12 if source else 10)


def overflow_choices(dst) -> list:
    out = [None, "saturate"]
    if dst.is_integer:
        out.append("wrap")
    elif dst.has_inf:
        out.append("ieee")
    elif dst.has_nan:
        out.append("nan")
    return out


def random_chain(seed: int):
    """(formats, kwargs) of one seeded chain of 2-5 hops."""
    rng = random.Random(seed)
    n_hops = rng.randint(2, 5)
    formats = [random_format(rng, True)] + [random_format(rng, False) for _ in range(n_hops)]
    rounding = [rng.choice(MODES) for _ in range(n_hops)]
    # wrapping hops make the chain non-monotone (enumerated instead of proved): keep them rare
    overflow = []
    for f in formats[1:]:
        ch = overflow_choices(f)
        pick = rng.choice(ch)
        overflow.append(None if pick == "wrap" and rng.random() < 0.8 else pick)
    return formats, {"rounding": rounding, "overflow": overflow, "ftz": rng.random() < 0.5}


def brute_force(formats, rounding, overflow, ftz):
    """(source codes, chain codes, direct codes), hop by hop with numoracle.cast."""
    src, dst = formats[0], formats[-1]
    codes = np.arange(1 << src.bits, dtype=np.uint64).astype(src.code_dtype)
    c = codes
    for a, b, r, o in zip(formats, formats[1:], rounding, overflow):
        c = no.cast(c, b, src=a, rounding=r, overflow=o, ftz=ftz and not b.is_integer)
    direct = no.cast(codes, dst, src=src, rounding=rounding[-1], overflow=overflow[-1],
                     ftz=ftz and not dst.is_integer)
    return codes, c, direct


def smallest_witness(src, codes: np.ndarray) -> int | None:
    """The least-magnitude code (-0 as 0, ties by code; infinities after finite values, NaNs last)."""
    if not codes.size:
        return None
    nan = is_nan(codes, src)
    # sources have 16 bits or fewer: float64 holds every value exactly (NaN codes get 0, ordered by `nan`)
    mag = np.where(nan, 0.0, np.abs(no.decode(codes, src).astype(np.float64)))
    order = np.lexsort((codes.astype(np.uint64), mag, nan))
    return int(codes[order[0]])


def check_chain(seed: int) -> str | None:
    """None when the verdict matches brute force, else a description of the disagreement."""
    formats, kw = random_chain(seed)
    label = f"seed {seed}: {' -> '.join(f.name for f in formats)} {kw}"
    try:
        v = classify_cast_chain(*formats, **kw)
    except Exception as e:  # noqa: BLE001 -- every failure is reported with its seed
        return f"{label}: raised {e!r}"
    codes, chain, direct = brute_force(formats, kw["rounding"], kw["overflow"], kw["ftz"])
    bad = codes[chain != direct]
    want = smallest_witness(formats[0], bad)
    got = None if v.witness is None else v.witness.source_code
    if v.equivalent != (want is None) or got != want:
        return f"{label}: verdict {v.equivalent} witness {got}, brute force {bad.size} differ, smallest {want}"
    if v.witness is not None:
        i = int(np.flatnonzero(codes == want)[0])
        if (v.witness.chain_code, v.witness.direct_code) != (int(chain[i]), int(direct[i])):
            return f"{label}: witness codes {v.witness.chain_code}/{v.witness.direct_code} differ from cast"
    return None


def run(seeds) -> tuple[int, list[str]]:
    problems = [p for p in map(check_chain, seeds) if p is not None]
    return len(seeds), problems


def test_generator_covers_the_kinds_of_format():
    kinds = set()
    for seed in range(N_DEFAULT):
        formats, kw = random_chain(seed)
        for f in formats:
            if f.is_integer:
                kinds.add("unsigned int" if not f.signed else "int")
            else:
                kinds.add(f.nan + ("+inf" if f.nan == "fnuz" and f.has_inf else ""))
                kinds |= {"unsigned"} if not f.signed else set()
                kinds |= {"no subnormals"} if not f.has_subnormals else set()
                kinds |= {"p=1"} if f.man_bits == 0 else set()
                kinds |= {"emin>0"} if f.emin > 0 else set()
        kinds |= {"ftz"} if kw["ftz"] else set()
        kinds |= {f"{len(formats) - 1} hops"}
    need = {"int", "unsigned int", "ieee", "fn", "fnuz", "fnuz+inf", "none", "unsigned", "no subnormals", "p=1",
            "emin>0", "ftz", "2 hops", "5 hops"}
    assert need <= kinds, need - kinds


def test_random_chains_match_brute_force():
    n, problems = run(range(N_DEFAULT))
    assert not problems, f"{len(problems)} of {n} chains disagree:\n" + "\n".join(problems[:10])


@pytest.mark.slow
def test_many_random_chains_match_brute_force():
    n = int(os.environ.get("NUMORACLE_CHAIN_FUZZ", "5000"))
    start = int(os.environ.get("NUMORACLE_CHAIN_FUZZ_SEED", str(10**6)))
    n, problems = run(range(start, start + n))
    print(f"{n} chains from seed {start}: {len(problems)} disagreements")
    assert not problems, f"{len(problems)} of {n} chains disagree:\n" + "\n".join(problems[:10])
