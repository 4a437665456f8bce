"""boundary_values: every label's claim, checked with the engine (numoracle.cast) and the Fraction twin.

The boundary set is computed from format properties with exact arithmetic only; these tests hold
each claim against conversions: thresholds overflow (or not) exactly where they say, ties are
exact midpoints of neighbouring destination values and round to the right side, neighbours are
adjacent source values, and the double-rounding points catch the float32 detours of ml_dtypes'
and torch's float64 casts.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from fractions import Fraction as F

import numpy as np
import pytest

import numoracle as no
from numoracle.conformance.attribution import classify
from numoracle.conformance.boundary import BoundaryValues, boundary_values, format_value, overflow_threshold
from numoracle.conformance.deviations import deviations_for, fixed_for
from numoracle.conformance.native import native_cast
from numoracle.core import scalar as X
from numoracle.core.engine.codekeys import is_nan, to_key
from numoracle.core.formats.policy import Flags
from optional import requires

PAIRS = [
    ("fp32", "fp16", ()), ("fp32", "bf16", ()), ("fp64", "bf16", ()), ("fp32", "fp8_e4m3fn", ()),
    ("fp32", "int8", ()), ("int32", "fp16", ()), ("fp16", "fp8_e5m2", ()), ("bf16", "e8m0fnu", ()),
    ("fp32", "fp8_e4m3fn", ("fp16",)), ("int64", "bf16", ()), ("fp64", "uint8", ()), ("uint64", "fp32", ()),
    ("fp8_e4m3fnuz", "fp4_e2m1fn", ()), ("fp16", "int4", ()), ("fp32", "fp8_e5m2fnuz", ("bf16",)),
]
IDS = [f"{s}-{'-'.join(v)}{'-' if v else ''}{d}" for s, d, v in PAIRS]


def _val(code: int, fmt) -> F | X.Special:
    v = X.value_of(code, fmt)
    return F(v) if isinstance(v, int) else v


def _finite(v) -> bool:
    return not isinstance(v, X.Special) or v.kind == "zero"


def _num(v) -> F:
    return F(0) if isinstance(v, X.Special) else v


class _Caster:
    """Conversions of one boundary set into one format, by the engine (all codes at once) and the twin."""

    def __init__(self, bv: BoundaryValues, fmt, mode: str, overflow=None):
        self.bv, self.fmt, self.mode = bv, no.formats.format_of(fmt), mode
        self.pol = {"rounding": mode} if overflow is None else {"rounding": mode, "overflow": overflow}
        self.codes, self.flags = no.cast(bv.codes, self.fmt, src=bv.src, flags=True, **self.pol)

    def at(self, i: int) -> tuple[int, Flags]:
        """(code, flags) of element i; the engine and the Fraction twin must agree."""
        code = int(self.bv.codes[i])
        want, wf = X.convert_code(code, self.bv.src, self.fmt, flags=True, **self.pol)
        assert int(self.codes[i]) == want and int(self.flags[i]) == int(wf), (
            f"{self.bv.src}->{self.fmt} {code:#x}: engine {int(self.codes[i]):#x}/{Flags(int(self.flags[i]))!r}, "
            f"twin {want:#x}/{wf!r}")
        return want, wf

    def value(self, i: int):
        return _val(self.at(i)[0], self.fmt)

    def overflows(self, i: int) -> bool:
        return bool(self.at(i)[1] & _out_of_range_flag(self.fmt))


def _out_of_range_flag(fmt) -> Flags:
    """OVERFLOW for floats; INVALID for integers (IEEE 754-2019 §5.8)."""
    return Flags.INVALID if fmt.is_integer else Flags.OVERFLOW


def _adjacent(src, a: F, b: F) -> bool:
    """No source value lies strictly between a < b (directed roundings of the midpoint land on each)."""
    mid = (a + b) / 2
    lo = _num(_val(X.round_value(mid, src, rounding="rd", overflow="saturate"), src))
    hi = _num(_val(X.round_value(mid, src, rounding="ru", overflow="saturate"), src))
    return lo == a and hi == b


def _check_offsets(bv: BoundaryValues) -> None:
    """offset 0: the code's value is the target; +-1: the adjacent source value (exact targets) or the
    nearest source value on that side (targets the source cannot hold)."""
    src = bv.src
    for i, pts in enumerate(bv.points):
        v = _val(int(bv.codes[i]), src)
        for p in pts:
            if p.target is None:
                continue
            assert _finite(v), (p.label, v)
            x = _num(v)
            if p.offset == 0:
                assert x == p.target and p.exact, p.label
            elif p.exact:
                assert (x < p.target) == (p.offset < 0) and x != p.target, p.label
                assert _adjacent(src, *sorted((x, p.target))), f"{p.label}: {x} is not next to {p.target}"
            else:
                mode = "rd" if p.offset < 0 else "ru"
                near = _num(_val(X.round_value(p.target, src, rounding=mode, overflow="saturate"), src))
                assert near == x != p.target, p.label


def _outer(p, x: F) -> bool:
    """Is x beyond the threshold target in magnitude (on its side of zero)?"""
    return abs(x) > abs(p.target)


def _check_claims(bv: BoundaryValues, mode: str, overflow=None) -> dict[str, int]:
    """Every point's claim, by kind; returns how many points of each kind were checked."""
    src, chain = bv.src, [*bv.via, bv.dst]
    casters = {f.name: _Caster(bv, f, mode, overflow if f == bv.dst else None) for f in chain}

    def caster(name: str | None) -> _Caster | None:
        if name is not None and name not in casters:
            casters[name] = _Caster(bv, name, mode)
        return casters.get(name) if name else None

    seen: dict[str, int] = {}
    for i, pts in enumerate(bv.points):
        code = int(bv.codes[i])
        v = _val(code, src)
        for p in pts:
            seen[p.kind] = seen.get(p.kind, 0) + 1
            c = caster(p.fmt)
            x = _num(v)
            if p.kind == "zero":
                assert _finite(v) and x == 0
                assert (isinstance(v, X.Special) and v.negative) == p.text.startswith("-")
            elif p.kind in ("inf", "nan"):
                assert isinstance(v, X.Special) and v.kind == p.kind
                assert v.kind == "nan" or v.negative == p.text.startswith("-")
                if p.kind == "nan" and not src.is_integer and src.nan == "ieee":
                    quiet = bool(code >> (src.man_bits - 1) & 1)
                    assert ("quiet" in p.text) == quiet or "payload" in p.text, p.text
            elif p.kind == "source_edge":
                props = {F(1), F(src.max_finite)} | (
                    {F(src.min_value)} if src.is_integer else {src.min_normal, src.min_subnormal})
                assert abs(p.target) in {abs(q) for q in props}, p.text
            elif p.kind == "power_of_two":
                assert x == p.target and abs(x).denominator == 1 and math.log2(abs(x)).is_integer()
            elif p.kind == "max_finite":
                fm = no.formats.format_of(p.fmt) if p.fmt else bv.dst
                ends = {F(fm.max_value), F(fm.min_value)} if fm.is_integer else {fm.max_finite, -fm.max_finite}
                assert p.target in ends
            elif p.kind == "overflow":
                assert c.overflows(i) == (_outer(p, x) or (x == p.target and p.inclusive)), (
                    f"{p.label}: {format_value(x)} overflow={c.overflows(i)}")
            elif p.kind == "past_max" and p.offset == 0:
                for m in ("rne", "rna", "rtz", "ru", "rd", "rto"):
                    fl = X.convert_code(code, src, c.fmt, rounding=m, flags=True)[1]
                    assert fl & _out_of_range_flag(c.fmt), (p.label, m)
            elif p.kind == "round_number":
                assert c.overflows(i) and len(str(abs(p.target)).rstrip("0")) == 1, p.label
            elif p.kind in ("min_normal", "min_subnormal"):
                fm = no.formats.format_of(p.fmt)
                assert abs(p.target) == (fm.min_normal if p.kind == "min_normal" else fm.min_subnormal)
                if p.offset == 0:
                    assert c.value(i) == p.target
            elif p.kind == "underflow":
                nonzero = _num(c.value(i)) != 0 if _finite(c.value(i)) else True
                assert nonzero == (_outer(p, x) or (x == p.target and p.inclusive)), p.label
            elif p.kind in ("exact_limit", "step") and p.offset == 0:
                assert not c.at(i)[1] & Flags.INEXACT and c.value(i) == p.target, p.label
            elif p.kind == "first_inexact" and p.offset == 0:
                assert c.at(i)[1] & Flags.INEXACT, p.label
                for nb in (p.target - 1, p.target + 1):
                    assert not X.round_value(nb, c.fmt, flags=True)[1] & Flags.INEXACT, p.label
            elif p.kind == "tie":
                _check_tie(p, c, i, x, mode)
            elif p.kind == "double_rounding":
                _check_double_rounding(bv, p, c, i, x, mode)
    return seen


def _check_tie(p, c: _Caster, i: int, x: F, mode: str) -> None:
    fm = c.fmt
    assert p.target == (p.lo + p.hi) / 2 and p.lo < p.hi, p.label
    top = F(fm.max_value) if fm.is_integer else fm.max_finite
    bottom = F(fm.min_value) if fm.is_integer else (-top if fm.signed else F(0))
    past_hi, past_lo = p.hi > top, p.lo < bottom
    if not (past_hi or past_lo):
        nb = X.neighbours(p.target, fm)
        assert (nb.lower.value, nb.upper.value) == (p.lo, p.hi), p.label  # consecutive values of fm
    if mode not in ("rne", "rna"):
        return
    if p.offset == 0:
        if mode == "rne":  # the even multiple of the spacing
            k = p.lo / (p.hi - p.lo)
            assert k.denominator == 1
            want = p.lo if k % 2 == 0 else p.hi
        else:
            want = p.hi if p.target > 0 else p.lo
    else:
        want = p.lo if p.offset < 0 else p.hi
        if not p.exact:  # the nearest source value may lie beyond the neighbour: monotone only
            got = c.value(i)
            assert c.overflows(i) or (_num(got) <= p.lo if p.offset < 0 else _num(got) >= p.hi), p.label
            return
        assert p.lo <= x <= p.hi, p.label
    if (want == p.hi and past_hi) or (want == p.lo and past_lo):
        assert c.overflows(i), p.label
        return
    got = c.value(i)
    assert not c.overflows(i) and _num(got) == want, f"{p.label}: {format_value(x)} -> {got}, want {want}"


def _check_double_rounding(bv: BoundaryValues, p, c: _Caster, i: int, x: F, mode: str) -> None:
    """The intermediate's tie next to T = p.tie: a value between T and it (it included when it rounds to T)
    lands on T in the intermediate, then T's tie-break decides; the direct cast sees which side of T it is."""
    inter = no.formats.format_of(p.via)
    assert mode in ("rne", "rna") and p.tie == (p.lo + p.hi) / 2
    it = p.target
    nb = X.neighbours(p.tie, inter)
    assert nb.lower.value == nb.upper.value == p.tie  # T is a value of the intermediate
    around = X.neighbours(it, inter)  # `it` is the midpoint of T and the intermediate's next value
    assert it == (around.lower.value + around.upper.value) / 2 and p.tie in (around.lower.value, around.upper.value)
    on_t = (p.tie < x < it or it < x < p.tie) or (x == it and _num(_val(X.round_value(it, inter, rounding=mode),
                                                                        inter)) == p.tie)
    if not on_t:
        return
    code = int(bv.codes[i])
    mid = X.convert_code(code, bv.src, inter, rounding=mode)
    assert _val(mid, inter) == p.tie, p.label
    chain = X.convert_code(mid, inter, c.fmt, rounding=mode)
    assert chain == X.round_value(p.tie, c.fmt, rounding=mode)


@pytest.mark.parametrize("src,dst,via", PAIRS, ids=IDS)
def test_structure(src, dst, via):
    bv = boundary_values(src, dst, via=via)
    s = bv.src
    codes = bv.codes
    assert codes.dtype == np.dtype(s.code_dtype) and len(codes) == len(bv) == len(bv.labels) == len(bv.points)
    assert len(np.unique(codes)) == len(codes)
    nan = is_nan(codes, s)
    assert not nan[:np.count_nonzero(~nan)].any()  # NaNs last
    keys = to_key(codes[~nan], s)
    assert (np.diff(keys) > 0).all()  # sorted by value (-0 before +0)
    assert list(bv) == list(zip(codes.tolist(), bv.labels))
    for c, v in zip(codes.tolist(), bv.values()):
        t = _val(c, s)
        if isinstance(t, X.Special):
            assert isinstance(v, float) and (math.isnan(v) if t.kind == "nan" else
                                             (v == (-math.inf if t.negative else math.inf) if t.kind == "inf"
                                              else v == 0 and math.copysign(1, v) < 0))
        else:
            assert isinstance(v, F) and v == t
    assert all(lab for lab in bv.labels)
    text = str(bv)
    assert text.splitlines()[0].startswith("boundary values of") and len(text.splitlines()) == len(bv) + 1
    mine = bv.codes
    mine[0] ^= mine.dtype.type(1)  # (numpy 1.x: a Python int would promote a uint64 array to float)
    assert bv.codes[0] != mine[0]  # a fresh copy each time
    _check_offsets(bv)


@pytest.mark.parametrize("src,dst,via", PAIRS, ids=IDS)
def test_claims_rne(src, dst, via):
    bv = boundary_values(src, dst, via=via)
    seen = _check_claims(bv, "rne")
    reach = F(bv.src.max_finite) >= overflow_threshold(bv.dst)[0]
    for kind in ("tie", "max_finite", "overflow") if reach else ("tie",):
        assert seen.get(kind), (kind, seen)


@pytest.mark.parametrize("mode", ["rna", "rtz", "ru", "rd", "rto"])
@pytest.mark.parametrize("src,dst,via", [("fp32", "fp16", ()), ("fp64", "fp8_e4m3fn", ()), ("fp32", "int8", ()),
                                         ("int32", "fp16", ()), ("bf16", "e8m0fnu", ())], ids=str)
def test_claims_other_modes(src, dst, via, mode):
    bv = boundary_values(src, dst, via=via, rounding=mode)
    seen = _check_claims(bv, mode)
    assert seen.get("overflow") or F(bv.src.max_finite) < overflow_threshold(bv.dst, mode)[0]
    if mode != "rna":
        assert seen.get("step") and not seen.get("double_rounding")


@pytest.mark.parametrize("src,dst,ov", [("fp32", "fp8_e4m3fn", "saturate"), ("fp64", "fp16", "saturate"),
                                        ("fp32", "int8", "wrap")], ids=str)
def test_claims_other_overflow(src, dst, ov):
    bv = boundary_values(src, dst, overflow=ov)
    assert bv.overflow.value == ov and f"overflow={ov}" in bv.describe()
    assert _check_claims(bv, "rne", ov).get("overflow")


def test_seed_int32_fp16_list_is_a_subset():
    seed = [0, 1, 2048, 65504, 65505, 65519, 65520, 70000, 1 << 20, 1 << 24, (1 << 24) + 1, 1 << 25,
            -65504, -65519, -65520, -70000]
    bv = boundary_values("int32", "fp16")
    got = {int(v) for v in bv.values()}
    assert set(seed) <= got, sorted(set(seed) - got)
    assert set(seed) <= set(no.decode(bv.codes, "int32").tolist())
    lab = dict(zip(no.decode(bv.codes, "int32").tolist(), bv.labels))
    assert lab[65520].startswith("fp16 overflow threshold (rne)")
    assert lab[65519].startswith("fp16 overflow threshold (rne) - 1 ulp(src)")
    assert lab[65504] == "max finite of fp16" and "2^11 = 2^p exactness limit of fp16" in lab[2048]
    assert "first 1-digit decimal past the fp16 overflow threshold" in lab[70000]
    assert "2^24 = 2^p exactness limit of fp32" in lab[1 << 24]
    # the seed's claims themselves: 65519 -> 65504, 65520 -> inf
    out = no.decode(no.cast(np.array([65519, 65520, -65520], np.int32), "fp16"), "fp16")
    assert out.tolist() == [65504.0, math.inf, -math.inf]


def test_labels_read_as_documented():
    bv = boundary_values("fp32", "fp16")
    labels = set(bv.labels)
    parts = {part for lab in labels for part in re.sub(r" \(\+\d+ more\)$", "", lab).split("; ")}
    for want in ("max finite of fp16", "min subnormal of fp16", "NaN (quiet)", "+0", "-0", "-inf",
                 "NaN (signalling)", "-NaN (quiet)", "tie of fp16 between 2048 and 2050"):
        assert want in parts, want
    assert any("fp16 overflow threshold (rne) - 1 ulp(src)" in lab for lab in labels)
    assert any("fp16 underflow-to-zero threshold (rne)" in lab for lab in labels)
    e8 = boundary_values("bf16", "e8m0fnu")
    assert any(lab.startswith("tie of e8m0fnu between 1 and 2") for lab in e8.labels)
    assert any(lab.startswith("smallest value of e8m0fnu") for lab in e8.labels)


def test_integer_destination_ties():
    bv = boundary_values("fp32", "int8")
    vals = {v for v in bv.values() if isinstance(v, F)}
    for t in (F(1, 2), F(3, 2), F(5, 2), F(-1, 2), F(-3, 2), F(255, 2), F(253, 2), F(128), F(-257, 2), F(-255, 2)):
        assert t in vals, t
    assert overflow_threshold("int8", "rne", 1) == (F(255, 2), True)
    assert overflow_threshold("int8", "rne", -1) == (F(257, 2), False)
    assert overflow_threshold("uint8", "rtz", -1) == (F(1), True)


def test_wide_sources_and_specials():
    for src in ("int64", "uint64", "fp64"):
        bv = boundary_values(src, "fp16")
        vals = [v for v in bv.values() if isinstance(v, F)]
        assert max(vals) == no.formats.format_of(src).max_finite and F(65520) in vals
    u = boundary_values("uint64", "fp32")
    assert min(v for v in u.values() if isinstance(v, F)) == 0 and F(2**64 - 1) in u.values()
    fn = boundary_values("fp8_e4m3fn", "fp16")
    assert [c for c, lab in fn if "NaN" in lab] == [0x7F, 0xFF]
    fnuz = boundary_values("fp8_e4m3fnuz", "fp16")
    assert [c for c, lab in fnuz if "NaN" in lab] == [0x80] and not any(lab == "-0" for lab in fnuz.labels)
    e8 = boundary_values("e8m0fnu", "fp32")
    assert e8.codes[0] == 0 and [c for c, lab in e8 if "NaN" in lab] == [0xFF]


def _chain_differs(bv: BoundaryValues, inter, mode="rne") -> np.ndarray:
    c = bv.codes
    direct = no.cast(c, bv.dst, src=bv.src, rounding=mode)
    twice = no.cast(no.cast(c, inter, src=bv.src, rounding=mode), bv.dst, src=inter, rounding=mode)
    return direct != twice


@pytest.mark.parametrize("src,dst", [("fp64", "bf16"), ("fp64", "fp16"), ("fp64", "fp8_e4m3fn"), ("fp64", "e8m0fnu"),
                                     ("int32", "bf16"), ("int64", "e8m0fnu"), ("fp64", "int8"), ("uint64", "bf16")])
def test_double_rounding_via_fp32_is_caught(src, dst):
    bv = boundary_values(src, dst)
    diff = _chain_differs(bv, "fp32")
    assert diff.any(), f"no witness of double rounding via fp32 in boundary_values({src}, {dst})"
    labels = [bv.labels[i] for i in np.flatnonzero(diff)]
    assert any("fp32 tie just" in lab for lab in labels), labels[:5]
    kinds = {p.kind for i in np.flatnonzero(diff) for p in bv.points[i]}
    assert "double_rounding" in kinds and "tie" in kinds


_TORCH, _JAX = requires("torch"), requires("jax")


@pytest.mark.parametrize("lib,src,dst", [
    ("ml_dtypes", "fp64", "bf16"), ("ml_dtypes", "fp64", "fp8_e4m3fn"), ("ml_dtypes", "int32", "bf16"),
    pytest.param("torch", "fp64", "fp16", marks=_TORCH), pytest.param("torch", "fp64", "bf16", marks=_TORCH),
    pytest.param("torch", "int32", "bf16", marks=_TORCH), pytest.param("jax", "fp64", "bf16", marks=_JAX),
    pytest.param("jax", "int32", "bf16", marks=_JAX)])
def test_native_double_rounding_found(lib, src, dst):
    """Where the installed version rounds through float32, the boundary codes catch it; where a version fixed
    that (ml_dtypes 0.7), the same codes show the library agreeing with numoracle, and the record says fixed."""
    bv = boundary_values(src, dst)
    lib_codes = native_cast(bv.native(), dst, lib)
    kinds = classify(lib, src, dst, bv.codes, lib_codes)
    assert "unexplained" not in set(kinds.tolist())
    hits = np.flatnonzero(np.char.startswith(kinds.astype(str), "double_rounding"))
    ref = no.cast(bv.codes, dst, src=src)
    if any(d.kind == "double_rounding" for d in deviations_for(lib, src, dst)):
        assert hits.size, f"{lib} {src}->{dst}: no double-rounding witness among {len(bv)} boundary codes"
        assert (lib_codes[hits] != ref[hits]).all()
        return
    assert not hits.size and any(d.kind == "double_rounding" for d in fixed_for(lib, src, dst))
    via32 = no.cast(no.cast(bv.codes, "fp32", src=src), dst, src="fp32")
    differ = (via32 != ref) & ~is_nan(ref, no.formats.format_of(dst))  # where rounding through float32 would show
    assert differ.any() and np.array_equal(lib_codes[differ], ref[differ])


def test_chain_via_fp16_has_witness_and_via_boundaries():
    bv = boundary_values("fp32", "fp8_e4m3fn", via="fp16")
    assert [f.name for f in bv.via] == ["fp16"] and "fp32 -> fp16 -> fp8_e4m3fn" in bv.describe()
    assert _chain_differs(bv, "fp16").any()
    texts = {p.text for pts in bv.points for p in pts}
    assert "fp16 overflow threshold (rne)" in texts and "max finite of fp16" in texts
    assert "fp16 tie just above the tie of fp8_e4m3fn between 1 and 1.125" in texts
    # triton#11753: 1.0625001 (fp32) -> fp16 1.0625 -> e4m3 1.0, but 1.125 directly
    i = [k for k, pts in enumerate(bv.points) if any(p.kind == "double_rounding" and p.tie == F(17, 16)
                                                    and p.target > p.tie and p.offset == 0 for p in pts)]
    assert i and _chain_differs(bv, "fp16")[i].all()


def test_every_registry_pair_builds():
    fmts = no.formats.registry()
    for s in fmts:
        for d in fmts:
            bv = boundary_values(s, d)
            c = bv.codes
            assert len(bv) >= 3 and len(np.unique(c)) == len(c)
            no.cast(c, d, src=s)  # every code is a valid source code


def test_validation_errors():
    with pytest.raises(ValueError, match="unknown format"):
        boundary_values("fp17", "fp16")
    with pytest.raises(ValueError, match="unknown format"):
        boundary_values("fp32", "fp16", via=("fp99",))
    with pytest.raises(ValueError, match="rounding mode"):
        boundary_values("fp32", "fp16", rounding="nearest-ish")
    with pytest.raises(ValueError, match="needs infinities"):
        boundary_values("fp32", "fp8_e4m3fn", overflow="ieee")
    with pytest.raises(ValueError, match="wrap"):
        boundary_values("fp32", "fp16", overflow="wrap")


def test_format_value():
    assert [format_value(v) for v in (F(65520), F(3, 4), F(2049, 2048), F(-2049, 2048), F(2) ** -24,
                                      F(255) * F(2) ** 120, F(4 * 10**38))] == \
        ["65520", "0.75", "1+2^-11", "-(1+2^-11)", "2^-24", "255*2^120", "4e38"]


def test_import_numoracle_does_not_import_hypothesis():
    code = "import numoracle, numoracle.conformance.boundary, sys; assert 'hypothesis' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_module_docstring_example():
    import doctest

    import numoracle.conformance.boundary as mod

    assert doctest.testmod(mod).failed == 0


def test_boundary_table_rows():
    from numoracle.tables.boundary import PAIRS, boundary_rows, boundary_table
    from numoracle.tables.build import render_csv

    rows = boundary_table()
    assert 1000 < len(rows) < 5000 and render_csv(rows) == render_csv(boundary_table())  # small, deterministic
    assert list(rows[0]) == ["src", "dst", "label", "code", "value", "dst_code"]
    assert [(r["src"], r["dst"]) for r in rows[:1]] == [PAIRS[0]]
    seed = {r["value"]: r for r in boundary_rows("int32", "fp16")}
    assert seed["65519"]["dst_code"] == "0x7bff" and seed["65520"]["dst_code"] == "0x7c00"
    assert seed["-65520"]["dst_code"] == "0xfc00" and seed["2049"]["dst_code"] == "0x6800"
    for r in rows[::23]:  # the destination code is the Fraction twin's, the value the code's exact value
        s, d = no.formats.format_of(r["src"]), no.formats.format_of(r["dst"])
        code = int(r["code"], 16)
        assert int(r["dst_code"], 16) == X.convert_code(code, s, d)
        v = _val(code, s)
        text = None
        if isinstance(v, X.Special):
            text = {"nan": "nan", "inf": "-inf" if v.negative else "inf", "zero": "-0"}[v.kind]
        assert r["value"] == (text if text is not None else str(v)) and r["label"]


def test_user_formats_get_their_own_labels_and_via_takes_dtypes():
    import ml_dtypes

    from numoracle import Format

    mine = Format("my_e4m3", 4, 3, 7, nan="fn", has_inf=False)  # equal to fp8_e4m3fn field for field
    boundary_values("fp32", "fp8_e4m3fn")
    b = boundary_values("fp32", mine)
    assert b.dst.name == "my_e4m3" and not any("fp8_e4m3fn" in lab for lab in b.labels)
    by_name = boundary_values("fp32", "fp8_e4m3fn", via="bf16")
    assert list(boundary_values("fp32", "fp8_e4m3fn", via=ml_dtypes.bfloat16).codes) == list(by_name.codes)
    assert len(boundary_values("fp32", "fp8_e4m3fn", via=np.float16, intermediates=None)) > 0
