"""numoracle against an independent IEEE 754 implementation: Berkeley SoftFloat 3e (``softfloatpy``).

Every conversion SoftFloat offers among FP16, BF16, FP32, FP64 and INT32/INT64/UINT32/UINT64 is
compared, codes and flags, in every rounding mode both have (rne, rtz, ru, rd, rna; SoftFloat's
round-to-odd is not exposed by softfloatpy) and both tininess modes (float destinations). BF16
conversions other than to and from FP32 go through SoftFloat's exact widening to FP32 (BF16 -> FP32,
FP16 -> FP32 are exact; flags of the two steps are OR-ed), so every 16-bit source reaches every
destination.

Default tier: the boundary values of each pair (``numoracle.conformance.boundary_values`` in every mode, with
their code neighbours) and seeded random codes. ``-m exhaustive``: every FP16 and BF16 code.

SoftFloat's own conventions (this build uses SoftFloat's RISC-V specialization) are not numoracle
errors; where they differ from numoracle's documented policy (docs/semantics.md) the test checks
each side against its own rule instead of against the other (``CONVENTIONS``).
"""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle.core.engine.softfloat import canonical_nan
from numoracle.core.formats.format import format_of
from numoracle.core.formats.policy import Flags
from optional import reason

sf = pytest.importorskip("softfloatpy", reason=reason("softfloatpy"))  # Berkeley SoftFloat's bindings (test extra)

_SF_NAME = {"fp16": "f16", "bf16": "bf16", "fp32": "f32", "fp64": "f64",
            "int32": "i32", "int64": "i64", "uint32": "ui32", "uint64": "ui64"}
_SF_TYPE = {"fp16": sf.Float16, "bf16": sf.BFloat16, "fp32": sf.Float32, "fp64": sf.Float64,
            "int32": sf.Int32, "int64": sf.Int64, "uint32": sf.UInt32, "uint64": sf.UInt64}
MODES = {"rne": sf.RoundingMode.NEAR_EVEN, "rtz": sf.RoundingMode.MIN_MAG, "rd": sf.RoundingMode.MIN,
         "ru": sf.RoundingMode.MAX, "rna": sf.RoundingMode.NEAR_MAX_MAG}
TININESS = {"before": sf.TininessMode.BEFORE_ROUNDING, "after": sf.TininessMode.AFTER_ROUNDING}
_SF_FLAG = {int(sf.ExceptionFlag.INEXACT): Flags.INEXACT, int(sf.ExceptionFlag.UNDERFLOW): Flags.UNDERFLOW,
            int(sf.ExceptionFlag.OVERFLOW): Flags.OVERFLOW, int(sf.ExceptionFlag.INVALID): Flags.INVALID,
            int(sf.ExceptionFlag.INFINITE): 0x80}  # divide-by-zero: no conversion may raise it
FLOATS, INTS = ("fp16", "bf16", "fp32", "fp64"), ("int32", "int64", "uint32", "uint64")


def _route(src: str, dst: str) -> tuple[str, ...] | None:
    """The SoftFloat functions from src to dst: one, two through an exact widening to FP32, or None."""
    if src == dst or (src in INTS and dst in INTS):
        return None
    direct = f"{_SF_NAME[src]}_to_{_SF_NAME[dst]}"
    if hasattr(sf, direct):
        return (direct,)
    if src in ("bf16", "fp16") and dst != "fp32":  # exact widening first
        rest = _route("fp32", dst)
        return (f"{_SF_NAME[src]}_to_f32", *rest) if rest else None
    return None


PAIRS = [(s, d) for s in FLOATS + INTS for d in FLOATS + INTS if _route(s, d)]
DIRECT = [p for p in PAIRS if len(_route(*p)) == 1]

# ---- SoftFloat's conventions, and the rule each side is held to instead -----------------------
CONVENTIONS = {
    "nan_to_int": "NaN -> integer: SoftFloat (RISC-V specialization) returns the largest integer; "
                  "numoracle returns its nan_to policy value (default 'zero', docs/semantics.md). Both "
                  "raise INVALID. Checked: numoracle's code is its nan_to value, SoftFloat's the max; "
                  "with nan_to='max' numoracle reproduces SoftFloat's code.",
    "nan_code": "NaN -> float: a specialization chooses its default NaN and whether payloads propagate; "
                "compared by class (both NaN), and numoracle's code is its canonical NaN.",
}


def sf_convert(src: str, dst: str, codes: np.ndarray, mode: str, tininess: str) -> tuple[np.ndarray, np.ndarray]:
    """SoftFloat's codes and flags, one element at a time (global rounding/tininess state set here)."""
    route = [getattr(sf, f) for f in _route(src, dst)]
    to_int = [f.split("_to_")[1] in ("i32", "i64", "ui32", "ui64") for f in _route(src, dst)]
    sf.set_rounding_mode(MODES[mode])
    sf.set_tininess_mode(TININESS[tininess])
    cls, nb, rm = _SF_TYPE[src], format_of(src).bits // 8, MODES[mode]
    out = np.empty(codes.size, np.uint64)
    fl = np.empty(codes.size, np.uint8)
    for i, c in enumerate(codes.tolist()):
        sf.set_exception_flags(0)
        x = cls.from_bytes(c.to_bytes(nb, "big"))
        for f, ti in zip(route, to_int):
            x = f(x, rm, True) if ti else f(x)
        out[i] = int.from_bytes(x.to_bytes(), "big")
        raw = sf.get_exception_flags()
        fl[i] = sum(v for k, v in _SF_FLAG.items() if raw & k)
    return out, fl


def _is_nan(codes: np.ndarray, fmt) -> np.ndarray:
    e = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
    c = codes.astype(np.uint64)
    return ((c & np.uint64(e)) == np.uint64(e)) & ((c & np.uint64((1 << fmt.man_bits) - 1)) != 0)


def compare(src: str, dst: str, codes: np.ndarray, mode: str, tininess: str) -> dict:
    """Compare one (pair, mode, tininess) over ``codes``; returns counts and up to 8 mismatches."""
    s, d = format_of(src), format_of(dst)
    codes = np.unique(codes.astype(s.code_dtype))
    mine, mfl = no.cast(codes, d, src=s, rounding=mode, tininess=tininess, flags=True)
    mine = mine.astype(np.uint64)
    theirs, tfl = sf_convert(src, dst, codes, mode, tininess)
    ok_code = mine == theirs
    src_nan = _is_nan(codes, s) if src in FLOATS else np.zeros(codes.size, bool)
    conv = np.zeros(codes.size, bool)
    if dst in INTS:  # convention nan_to_int
        conv = src_nan
        ok_code[conv] = (mine[conv] == 0) & (theirs[conv] == np.uint64(d.max_value))
    else:  # convention nan_code
        conv = _is_nan(theirs, d)
        ok_code[conv] = mine[conv] == np.uint64(canonical_nan(d))
    bad = ~ok_code | (mfl != tfl)
    ex = [f"{src}:{int(c):#x} -> {dst} {mode}/{tininess}: numoracle {int(a):#x} {Flags(int(f))}, "
          f"softfloat {int(b):#x} {Flags(int(g) & 0xF)}{' +INFINITE' if g & 0x80 else ''}"
          for c, a, f, b, g in zip(codes[bad][:8], mine[bad][:8], mfl[bad][:8], theirs[bad][:8], tfl[bad][:8])]
    return {"cases": int(codes.size), "mismatches": int(bad.sum()), "convention": int(conv.sum()), "examples": ex}


def _tininess_modes(dst: str) -> tuple[str, ...]:
    return ("before", "after") if dst in FLOATS else ("before",)  # integers never underflow


def sample_codes(src: str, dst: str, n_random: int, seed: int) -> np.ndarray:
    """Boundary values of the pair in every mode with their code neighbours, and seeded random codes:
    uniform bit patterns, and (floats) uniform exponent fields, (integers) uniform bit lengths."""
    s = format_of(src)
    top = (1 << s.bits) - 1
    b = np.concatenate([no.conformance.boundary_values(src, dst, rounding=m, intermediates=()).codes.astype(np.uint64)
                        for m in MODES]).astype(object)
    near = {int(c) + k for c in b for k in (-1, 0, 1)} | {int(c) ^ getattr(s, "sign_bit", 0) for c in b}
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 62, (n_random, 2), dtype=np.uint64)
    word = (bits[:, 0] << np.uint64(2)) ^ bits[:, 1]  # 64 random bits
    uni = [int(w) & top for w in word[: n_random // 2]]
    if src in FLOATS:
        e = rng.integers(0, 1 << s.exp_bits, n_random // 2)
        shaped = [(int(w) & (s.sign_bit | ((1 << s.man_bits) - 1))) | (int(x) << s.man_bits)
                  for w, x in zip(word[n_random // 2:], e)]
    else:
        length = rng.integers(0, s.bits + 1, n_random // 2)
        shaped = [int(w) >> (64 - int(k)) if k else 0 for w, k in zip(word[n_random // 2:], length)]
        shaped += [(-v) & top for v in shaped]
    return np.array(sorted(c for c in near | set(uni) | set(shaped) if 0 <= c <= top), np.uint64)


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{s}->{d}" for s, d in PAIRS])
def test_codes_and_flags_agree_with_softfloat(src, dst):
    codes = sample_codes(src, dst, n_random=2000, seed=PAIRS.index((src, dst)))
    failures = []
    for mode in MODES:
        for tin in _tininess_modes(dst):
            r = compare(src, dst, codes, mode, tin)
            if r["mismatches"]:
                failures.append(f"{mode}/{tin}: {r['mismatches']} of {r['cases']}\n  " + "\n  ".join(r["examples"]))
    assert not failures, "\n".join(failures)


def test_the_oracle_can_disagree(monkeypatch):
    """The comparison sees a wrong code and a wrong flag (it is not vacuous), and the modes reach SoftFloat."""
    codes = np.array([0x3C01], np.uint64)  # 1 + 2^-10 in FP16 -> BF16: inexact
    assert compare("fp16", "bf16", codes, "rne", "before")["mismatches"] == 0
    assert sf_convert("fp16", "bf16", codes, "rne", "before")[0][0] == 0x3F80
    assert sf_convert("fp16", "bf16", codes, "ru", "before")[0][0] == 0x3F81
    real = no.cast
    for damage in (lambda c, f: (c ^ 1, f), lambda c, f: (c, f ^ np.uint8(Flags.UNDERFLOW))):
        monkeypatch.setattr(no, "cast", lambda *a, _d=damage, **k: _d(*real(*a, **k)))
        assert compare("fp16", "bf16", codes, "rne", "before")["mismatches"] == 1


@pytest.mark.parametrize("dst", INTS)
def test_nan_to_int_convention(dst):
    """SoftFloat's NaN -> integer result is numoracle's nan_to='max' (both INVALID)."""
    nans = np.array([0x7E00, 0xFE00, 0x7C01, 0x7FFF], np.uint64)
    theirs, tfl = sf_convert("fp16", dst, nans, "rne", "before")
    mine, mfl = no.cast(nans.astype(np.uint16), dst, src="fp16", nan_to="max", flags=True)
    assert np.array_equal(mine.astype(np.uint64), theirs) and np.array_equal(mfl, tfl)
    assert np.all(mfl == Flags.INVALID)


def test_softfloat_default_nan_is_recorded():
    """This build's default NaN (RISC-V specialization: positive, quiet, no payload) is numoracle's
    canonical NaN; another specialization (8086: negative, payload kept) would be compared by class."""
    nans = np.array([0x7F800001, 0xFFC00123], np.uint64)  # a signalling NaN and a negative quiet NaN with payload
    for dst in ("fp16", "bf16", "fp64"):
        theirs, tfl = sf_convert("fp32", dst, nans, "rne", "before")
        assert np.all(theirs == np.uint64(canonical_nan(format_of(dst))))
        assert [Flags(int(f)) for f in tfl] == [Flags.INVALID, Flags.NONE]


@pytest.mark.exhaustive
@pytest.mark.parametrize("src,dst", [p for p in PAIRS if p[0] in ("fp16", "bf16")],
                         ids=[f"{s}->{d}" for s, d in PAIRS if s in ("fp16", "bf16")])
def test_every_16_bit_source(src, dst):
    codes = np.arange(1 << 16, dtype=np.uint64)
    for mode in MODES:
        for tin in _tininess_modes(dst):
            r = compare(src, dst, codes, mode, tin)
            assert r["mismatches"] == 0, "\n".join(r["examples"])
