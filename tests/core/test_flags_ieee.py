"""Flags as IEEE 754-2019 defines them for conversions: invalid integer conversions (§5.8),
signalling NaNs (§7.2), overflow with inexact (§7.4), and the two tininess rules (§7.5).

Each witness is checked in the engine (``cast``), the Fraction twin (``exact.convert_code``) and
``explain``, which compute flags independently.
"""

from __future__ import annotations

import numpy as np
import pytest

from numoracle import cast, explain
from numoracle.core import scalar as X
from numoracle.core.formats.format import FP8_E4M3FN, FP8_E5M2, FP16, FP32, FP64, INT32, UINT32, format_of
from numoracle.core.formats.policy import Flags

INV, INX, UF, OF = Flags.INVALID, Flags.INEXACT, Flags.UNDERFLOW, Flags.OVERFLOW


def _engine(code: int, src, dst, **pol) -> tuple[int, Flags]:
    src = format_of(src)
    out, fl = cast(np.array([code], np.uint64).astype(src.code_dtype), dst, src=src, flags=True, **pol)
    return int(out[0]), Flags(int(fl[0]))


def _all(code: int, src, dst, **pol) -> tuple[int, Flags]:
    """Code and flags, after checking that engine, twin and explain agree on both."""
    e = _engine(code, src, dst, **pol)
    t = X.convert_code(code, src, dst, flags=True, **pol)
    x = explain(code, dst, src=src, **pol)
    assert e == (t[0], t[1]) == (x.code, x.flags), (e, t, (x.code, x.flags))
    return e


# witness: (src code, src, dst, policy, expected code, expected flags)
WITNESSES = [
    (0x4F951295, FP32, INT32, {}, 0x7FFFFFFF, INV),  # 5.0e9 -> int32: out of range
    (0xCF951295, FP32, INT32, {}, 0x80000000, INV),
    (0xC35E, FP16, UINT32, {}, 0, INV),  # -3.68 rounds to -4: out of uint32's range
    (0xC35E, FP16, UINT32, dict(rounding="rtz"), 0, INV),  # -3 is still out of range
    (0xB800, FP16, UINT32, {}, 0, INX),  # -0.5 rounds to -0 = 0: in range, inexact only
    (0x7F800001, FP32, FP16, {}, 0x7E00, INV),  # signalling NaN in, quiet NaN out
    (0x7C1B, FP16, FP32, {}, 0x7FC00000, INV),
    (0x7E00, FP16, FP32, {}, 0x7FC00000, Flags.NONE),  # quiet NaN: no flag
    (0x7D, FP8_E5M2, FP16, {}, 0x7E00, INV),  # E5M2 has an sNaN too (2 mantissa bits)
    (0x7F, FP8_E4M3FN, FP16, {}, 0x7E00, Flags.NONE),  # FN: its single NaN is quiet
    (0x7C1B, FP16, INT32, {}, 0, INV),
    (0x3F0FFFFFFEFFFFC0, FP64, FP16, dict(tininess="before"), 0x0400, INX | UF),
    (0x3F0FFFFFFEFFFFC0, FP64, FP16, dict(tininess="after"), 0x0400, INX),
    (0x477FF000, FP32, FP16, {}, 0x7C00, INX | OF),  # 65520 -> inf: OVERFLOW with INEXACT
    (0x477FF000, FP32, FP16, dict(overflow="saturate"), 0x7BFF, INX | OF),
]


@pytest.mark.parametrize("code,src,dst,pol,want_code,want_flags", WITNESSES,
                         ids=[f"{s.name}:{c:#x}->{d.name}{'-' + '-'.join(map(str, p.values())) if p else ''}"
                              for c, s, d, p, _, _ in WITNESSES])
def test_witness(code, src, dst, pol, want_code, want_flags):
    assert _all(code, src, dst, **pol) == (want_code, want_flags)


@pytest.mark.parametrize("overflow", ["saturate", "wrap"])
def test_out_of_range_integer_is_invalid_whatever_the_policy_returns(overflow):
    code, fl = _all(0x4F32D05E, FP32, INT32, overflow=overflow)  # 3e9
    assert fl == INV
    assert code == (0x7FFFFFFF if overflow == "saturate" else 3_000_000_000)


def test_in_range_integer_keeps_inexact():
    assert _all(0x40200000, FP32, INT32) == (2, INX)  # 2.5 -> 2 (ties to even)
    assert _all(0x4EFFFFFF, FP32, INT32) == (0x7FFFFF80, Flags.NONE)


def test_tininess_only_moves_underflow():
    """Over every FP32 code between the largest subnormal and the smallest normal of FP16, in
    every mode: the codes agree and the flags differ exactly where the value rounds up to 2^-14."""
    lo, hi = 0x387FC000, 0x38800000  # 2^-14 - 2^-24 .. 2^-14
    codes = np.arange(lo, hi + 1, dtype=np.uint32)
    for mode in ("rne", "rna", "rtz", "ru", "rd", "rto"):
        cb, fb = cast(codes, FP16, src=FP32, rounding=mode, flags=True)
        ca, fa = cast(codes, FP16, src=FP32, rounding=mode, tininess="after", flags=True)
        assert np.array_equal(cb, ca), mode
        differ = fb != fa
        # where they differ: before says UNDERFLOW, after does not, and the result is 2^-14
        assert np.all(fb[differ] == INX | UF) and np.all(fa[differ] == INX), mode
        assert np.all(cb[differ] == 0x0400), mode
        rounds_up_at_p = {"rne": True, "rna": True, "ru": True, "rtz": False, "rd": False, "rto": False}[mode]
        assert bool(differ.any()) == rounds_up_at_p, mode


def test_tininess_refuses_sr_and_typos():
    with pytest.raises(ValueError, match="tininess='after'.*'sr'"):
        cast(np.uint32([1]), FP16, src=FP32, rounding="sr", sr_bits=4, random_bits=np.uint32([0]),
             tininess="after")
    with pytest.raises(ValueError, match="unknown tininess 'afterr'.*did you mean 'after'"):
        cast(np.uint32([1]), FP16, src=FP32, tininess="afterr")


@pytest.mark.parametrize("fmt,snan,qnan", [(FP64, 0x7FF0000000000001, 0x7FF8000000000000),
                                           (FP32, 0xFF800001, 0xFFC00000), (FP16, 0x7D00, 0x7E00),
                                           (FP8_E5M2, 0xFD, 0xFE)])
def test_signalling_nan_definition(fmt, snan, qnan):
    assert fmt.is_signalling_nan(snan) and not fmt.is_signalling_nan(qnan)
    inf = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
    assert not fmt.is_signalling_nan(inf)  # the infinity is not a NaN
    assert FP8_E4M3FN.quiet_bit == 0 and format_of("fp8_e4m3fnuz").quiet_bit == 0


def test_cli_cast_tininess():
    import contextlib
    import io
    import json

    from numoracle.cli import main

    def run(*extra):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            main(["cast", "0x3F0FFFFFFEFFFFC0", "--from", "fp64", "--to", "fp16", "--json", *extra])
        return json.loads(buf.getvalue())

    assert run()["flags"] == ["INEXACT", "UNDERFLOW"]
    d = run("--tininess", "after")
    assert d["flags"] == ["INEXACT"] and d["policy"]["tininess"] == "after"


@pytest.mark.parametrize("src,dst", [(FP32, FP16), (FP32, "bf16"), (FP64, FP8_E4M3FN), (FP16, FP8_E5M2),
                                     (FP32, "fp6_e2m3fn"), (FP32, "fp8_e4m3fnuz"), (FP64, FP32)])
@pytest.mark.parametrize("tininess", ["before", "after"])
def test_engine_and_twin_agree_near_the_smallest_normal(src, dst, tininess):
    """Flags of every mode (but sr) for codes around 2^emin of dst, engine vs Fraction twin."""
    d = format_of(dst)
    mn = np.array([float(d.min_normal)], np.float64)
    centre = int(cast(mn, src)[0])
    near = [centre + k for k in range(-300, 301)]
    codes = np.array(sorted(set(near) | {c | src.sign_bit for c in near}), np.uint64).astype(src.code_dtype)
    for mode in ("rne", "rna", "rtz", "ru", "rd", "rto"):
        out, fl = cast(codes, d, src=src, rounding=mode, tininess=tininess, flags=True)
        for c, o, f in zip(codes.tolist(), out.tolist(), fl.tolist()):
            assert X.convert_code(c, src, d, rounding=mode, tininess=tininess, flags=True) == (o, Flags(f)), \
                (hex(c), mode)


@pytest.mark.parametrize("dst", ["fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp6_e3m2fn",
                                 "fp4_e2m1fn", "e8m0fnu", "int8", "uint8", "int32", "uint64"])
def test_overflow_comes_with_inexact_and_never_for_integers(dst):
    d = format_of(dst)
    rng = np.random.default_rng(11)
    codes = np.unique(np.concatenate([rng.integers(0, 1 << 32, 4000, dtype=np.uint64),
                                      np.arange(0x7F7FFF00, 0x7F800100, dtype=np.uint64),
                                      np.arange(0xFF7FFF00, 0xFF800100, dtype=np.uint64)])).astype(np.uint32)
    overflows = ["saturate", "wrap"] if d.is_integer else [None, "saturate"]
    seen = 0
    for mode in ("rne", "rna", "rtz", "ru", "rd", "rto"):
        for ov in overflows:
            _, fl = cast(codes, d, src=FP32, rounding=mode, overflow=ov, flags=True)
            over = (fl & OF) != 0
            if d.is_integer:
                assert not over.any() and not np.any((fl & INV != 0) & (fl & INX != 0)), (mode, ov)
            else:
                assert np.all((fl[over] & INX) != 0), (mode, ov)
                seen += int(over.sum())
    assert d.is_integer or seen  # the codes above do overflow the float formats somewhere
