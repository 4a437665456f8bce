"""Conformance sweeps: each mismatch class on crafted converters, robustness, executors, the real findings.

Every classification is checked against an independent statement of what the converter does (its
code is recomputed with numoracle.cast under the policy the class names: via an intermediate
format, with overflow='saturate', with ftz, with rounding='rna' ...), and the known findings of
ml_dtypes before 0.7, torch and jax (float64 -> bfloat16 / float16 round through float32) are
reproduced with witnesses checked against the engine directly and through FP32; where the installed
version fixed one (ml_dtypes 0.7), the sweep is clean there and its note says so.
"""

from __future__ import annotations

import io
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import pytest

import numoracle as no
from numoracle.conformance.attribution import classify_ids
from numoracle.conformance.boundary import boundary_values
from numoracle.conformance.classify import CLASSES, classify_mismatches, known_labels, tie_mask
from numoracle.conformance.deviations import deviations_for, installed_version
from numoracle.conformance.sweeper import BLOCK, Converter, random_codes, sweep
from numoracle.core.formats.policy import resolve_policy
from numoracle.formats import FP8_E4M3FN, FP8_E5M2, FP32
from optional import needs, requires

BF16_DT, E4M3_DT = np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn)


def _cast(codes, dst, src, **kw) -> np.ndarray:
    return no.cast(np.asarray(codes).astype(no.formats.format_of(src).code_dtype), dst, src=src, **kw)


def _bits(a: np.ndarray, dt) -> np.ndarray:
    return np.ascontiguousarray(a).view(dt)


# ---- crafted converters (module level: picklable) -------------------------------------------------
def via_fp16_e4m3(x):
    """fp32 -> fp16 -> e4m3fn: rounds twice (the Ada-style path)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(np.float16).astype(E4M3_DT)


def clip_fp16(x):
    """fp32 -> fp16 saturating: clamps to +-65504 (inf too), NaN kept."""
    with np.errstate(invalid="ignore"):
        return np.clip(x, -65504, 65504).astype(np.float16)


def ftz_fp16(x):
    """fp32 -> fp16 with subnormal results flushed to a zero of the same sign."""
    with np.errstate(invalid="ignore", over="ignore"):
        y = x.astype(np.float16)
    sub = (np.abs(y) < np.float16(2.0**-14)) & (y != 0)
    return np.where(sub, np.copysign(np.float16(0), y), y)


def unsigned_zero_bf16(x):
    """fp32 -> bf16 that turns -0 into +0."""
    y = x.astype(BF16_DT)
    c = y.view(np.uint16).copy()
    c[c == 0x8000] = 0
    return c.view(BF16_DT)


def payload_nan_fp16(x):
    """fp32 -> fp16 whose NaNs carry a payload (0x7E01)."""
    with np.errstate(invalid="ignore", over="ignore"):
        y = x.astype(np.float16)
    c = y.view(np.uint16).copy()
    c[np.isnan(x)] = 0x7E01
    return c.view(np.float16)


def ties_away_bf16(x):
    """fp32 -> bf16 rounding to nearest, ties away from zero (finite, non-overflowing inputs only)."""
    c = x.view(np.uint32)
    return ((c + np.uint32(0x8000)) >> np.uint32(16)).astype(np.uint16).view(BF16_DT)


def truncate_bf16(x):
    """fp32 -> bf16 by truncation (round toward zero), finite inputs."""
    return (x.view(np.uint32) >> np.uint32(16)).astype(np.uint16).view(BF16_DT)


def constant_fp16(x):
    return np.full(x.shape, 1.0, np.float16)


class RaisesAbove:
    """fp32 -> fp16 that raises when the chunk holds a code >= ``limit``."""

    def __init__(self, limit: int):
        self.limit = limit

    def __call__(self, x):
        if (x.view(np.uint32) >= self.limit).any():
            raise FloatingPointError(f"cannot convert codes >= {self.limit:#x}")
        return x.astype(np.float16)


def wrong_shape(x):
    return x.astype(np.float16)[:-1]


def bf16_as_float32(x):
    """Right values, wrong dtype: bf16 values in a float32 array (convertible exactly)."""
    return x.astype(BF16_DT).astype(np.float32)


def bf16_as_codes(x):
    """Right bits, wrong dtype: bf16 bit patterns as uint16."""
    return x.astype(BF16_DT).view(np.uint16)


def fp32_unchanged(x):
    """Returns the float32 input: not convertible to bf16 without rounding."""
    return x.copy()


def sat_ftz_e4m3(x):
    """fp32 -> e4m3fn that saturates (+-448 for inf and beyond) and flushes subnormal results (sign kept)."""
    with np.errstate(invalid="ignore"):
        y = np.clip(x, -448, 448).astype(E4M3_DT)
    c = y.view(np.uint8).copy()
    c[(c & 0x78) == 0] &= 0x80
    return c.view(E4M3_DT)


class Flaky:
    """Flips the last bit of element 3 on every second call (a global counter, per process)."""

    calls = 0

    def __call__(self, x):
        Flaky.calls += 1
        y = x.astype(np.float16)
        c = y.view(np.uint16).copy()
        if Flaky.calls % 2 == 0 and c.size > 3:
            c[3] ^= 1
        return c.view(np.float16)


# ---- each class on a crafted converter ------------------------------------------------------------
def test_double_rounding_via_fp16_is_classified_with_the_intermediate():
    r = sweep(via_fp16_e4m3, "fp32", "fp8_e4m3fn", inputs=200_000, seed=1, witnesses=6)
    assert r.library is None and r.verdict == "unexplained"
    dr = r.classes["double_rounding"]
    assert dr.count > 100 and dr.known is None
    for w in dr.witnesses:
        assert w.note == "via fp16"
        twice = _cast(_cast([w.source], "fp16", "fp32"), "fp8_e4m3fn", "fp16")
        assert w.fn_code == int(twice[0]) != w.engine_code == int(_cast([w.source], "fp8_e4m3fn", "fp32")[0])
    # near 464 the twice-rounded value saturates (464 + d -> 464 in fp16 -> 448, the engine gives NaN):
    # saturation takes precedence over double rounding
    assert set(r.classes) == {"double_rounding", "saturation_vs_inf_nan", "nan_payload_or_sign"}
    for w in r.classes["saturation_vs_inf_nan"].witnesses:
        assert w.fn_code == int(_cast(_cast([w.source], "fp16", "fp32"), "fp8_e4m3fn", "fp16")[0])


def test_saturation_class_and_the_saturating_policy():
    bv = boundary_values("fp32", "fp16")
    r = sweep(clip_fp16, "fp32", "fp16", inputs=bv.codes)
    sat = r.classes["saturation_vs_inf_nan"]
    x = np.array([w.source for w in sat.witnesses], np.uint32)
    assert sat.count > 0 and all(w.note == "fn saturates" for w in sat.witnesses)
    assert [w.fn_code for w in sat.witnesses] == list(_cast(x, "fp16", "fp32", overflow="saturate"))
    assert set(_cast(x, "fp16", "fp32") & 0x7FFF) == {0x7C00}  # the engine gives inf
    r2 = sweep(clip_fp16, "fp32", "fp16", inputs=bv.codes, overflow="saturate")
    assert "saturation_vs_inf_nan" not in r2.classes and set(r2.classes) <= {"nan_payload_or_sign"}


def test_flush_to_zero_class_and_the_ftz_policy():
    codes = np.arange(0x33000000, 0x38900000, 0x1001, dtype=np.uint32)  # fp16 underflow .. min normal
    codes = np.concatenate([codes, codes | np.uint32(0x80000000)])
    r = sweep(ftz_fp16, "fp32", "fp16", inputs=codes)
    assert set(r.classes) == {"flush_to_zero"} and r.classes["flush_to_zero"].count > 1000
    for w in r.classes["flush_to_zero"].witnesses:
        assert w.fn_code & 0x7FFF == 0 and w.engine_code & 0x7FFF != 0
    assert sweep(ftz_fp16, "fp32", "fp16", inputs=codes, ftz=True).clean


def test_signed_zero_class():
    r = sweep(unsigned_zero_bf16, "fp32", "bf16", inputs=np.array([0x80000000, 0x80000001, 0x3F800000, 0],
                                                                 np.uint32))
    assert r.counts() == {"signed_zero": 2}  # -0 and -2^-149 (rounds to -0)
    assert [(w.source, w.fn_code, w.engine_code) for w in r.classes["signed_zero"].witnesses] == [
        (0x80000000, 0, 0x8000), (0x80000001, 0, 0x8000)]


def test_nan_payload_class_counts_every_nan():
    codes = np.array([0x7F800001, 0x7FC00000, 0xFFC00000, 0x7F800000, 0x3F800000], np.uint32)
    r = sweep(payload_nan_fp16, "fp32", "fp16", inputs=codes)
    assert r.counts() == {"nan_payload_or_sign": 3}
    assert {w.fn_code for w in r.classes["nan_payload_or_sign"].witnesses} == {0x7E01}


def test_off_by_one_at_ties_and_elsewhere():
    finite = range(0x3F800000, 0x3F800000 + (1 << 18))
    r = sweep(ties_away_bf16, "fp32", "bf16", inputs=finite)
    c = r.classes["off_by_one_ulp"]
    # ties away differs from ties to even exactly at the ties whose lower neighbour is even: half of all ties
    n_ties = sum(1 for v in finite if v & 0xFFFF == 0x8000)
    assert set(r.classes) == {"off_by_one_ulp"} and c.count == c.ties == n_ties // 2
    assert all(w.note == "at an exact tie" for w in c.witnesses)
    assert sweep(ties_away_bf16, "fp32", "bf16", inputs=finite, rounding="rna").clean
    t = sweep(truncate_bf16, "fp32", "bf16", inputs=finite).classes["off_by_one_ulp"]
    assert t.count > t.ties > 0 and {w.note for w in t.witnesses} == {"not at a tie"}
    assert sweep(truncate_bf16, "fp32", "bf16", inputs=finite, rounding="rtz").clean


def test_nan_to_policy_and_other():
    r = sweep("ml_dtypes", "fp32", "fp6_e3m2fn", inputs=boundary_values("fp32", "fp6_e3m2fn").codes)
    assert r.classes["nan_to_policy"].count > 0 and r.verdict == "explained"
    o = sweep(constant_fp16, "fp16", "fp16", inputs="exhaustive")
    assert "other" in o.classes and o.unexplained == o.mismatches


def test_tie_mask_against_fractions():
    from fractions import Fraction

    from numoracle.core.scalar import value_of

    rng = np.random.default_rng(3)
    x = np.concatenate([random_codes("fp32", "fp8_e5m2", 4000, seed=2), rng.integers(0, 2**32, 1000, np.uint32)])
    got = tie_mask(x, FP32, FP8_E5M2)
    vals = sorted(Fraction(value_of(c, "fp8_e5m2")) for c in range(0x7C) if c != 0)  # positive finite e5m2 values
    mids = {(a + b) / 2 for a, b in zip([Fraction(0), *vals], [*vals, Fraction(65536)])}  # 61440: overflow tie
    for c, t in zip(x, got):
        v = value_of(int(c), "fp32")
        assert t == (isinstance(v, Fraction) and abs(v) in mids), hex(int(c))
    assert got.sum() > 100


# ---- robustness --------------------------------------------------------------------------------------
def test_a_converter_that_raises_is_reported_and_the_other_chunks_run():
    r = sweep(RaisesAbove(0x3F800000), "fp32", "fp16", inputs=range(0x3F000000, 0x3F000000 + (1 << 24)),
              chunk=1 << 22, executor=ThreadPoolExecutor(2))
    assert r.status == "error" and r.verdict == "error" and not r.ok
    (e,) = r.errors
    assert e.kind == "exception" and "FloatingPointError: cannot convert codes >= 0x3f800000" in e.message
    assert e.first_range == (0x3F800000, 0x3FC00000) and e.chunks == 2 and e.elements == 1 << 23
    assert r.compared == 1 << 23 and r.matching == r.compared
    assert "FloatingPointError" in str(r) and "0x3f800000" in str(r)


@pytest.mark.parametrize("fn, kind, compared, text", [
    (wrong_shape, "wrong_shape", False, "returned shape (999,) for an input of shape (1000,)"),
    (bf16_as_float32, "wrong_dtype", True, "returned fp32 (dtype float32) where bf16 was expected; every value"),
    (bf16_as_codes, "wrong_dtype", False, "if these are bit patterns, return them viewed as bf16"),
    (fp32_unchanged, "wrong_dtype", False, "is not a bf16 value; not compared"),
])
def test_wrong_shape_or_dtype_is_reported(fn, kind, compared, text):
    codes = np.arange(0x3F800000, 0x3F800000 + 1000 * 977, 977, dtype=np.uint32)
    r = sweep(fn, "fp32", "bf16", inputs=codes)
    (e,) = r.errors
    assert e.kind == kind and text in e.message and e.compared == compared
    assert r.verdict == "error" and r.compared == (1000 if compared else 0)
    if compared:
        assert r.matching == 1000


def test_non_deterministic_converter_is_reported():
    r = sweep(Flaky(), "fp32", "fp16", inputs=np.arange(0x3C000000, 0x3C000000 + 5000, dtype=np.uint32))
    assert r.non_deterministic == 1 and r.verdict == "unexplained" and not r.ok
    (w,) = r.non_deterministic_witnesses
    assert w.source == 0x3C000003 and w.fn_code ^ w.engine_code == 1
    assert "NON-DETERMINISTIC" in r.verdict_text() and "call 1" in str(r)


def test_bad_arguments_raise_with_the_fix():
    with pytest.raises(ValueError, match="boundary.*inputs=N"):
        sweep("ml_dtypes", "fp64", "bf16")
    with pytest.raises(ValueError, match="numpy, ml_dtypes, torch, jax"):
        sweep("tensorflow", "fp32", "bf16", inputs=10)
    with pytest.raises(ValueError, match="use library='numpy'"):
        sweep("ml_dtypes", "fp32", "fp16", inputs=10)
    with pytest.raises(TypeError, match="module-level function"):
        sweep(lambda x: x.astype(np.float16), "fp32", "fp16", inputs=range(0, 1 << 12), chunk=1 << 10, workers=2)
    with pytest.raises(ValueError, match="deterministic"):
        sweep("numpy", "fp32", "fp16", inputs=10, rounding="sr")
    with pytest.raises(ValueError, match="size the executor"):
        sweep("numpy", "fp32", "fp16", inputs=10, workers=2, executor=ThreadPoolExecutor(1))
    with pytest.raises(TypeError, match="integer fp32 codes"):
        sweep("numpy", "fp32", "fp16", inputs=np.float32([1.0]))
    with pytest.raises(ValueError, match="out of range for fp16"):
        sweep("numpy", "fp16", "fp32", inputs=np.array([1 << 16]))
    with pytest.raises(TypeError, match="callable"):
        sweep(3, "fp32", "fp16", inputs=10)


# ---- the real findings: float64 -> bf16 (ml_dtypes < 0.7, jax) and -> fp16 (torch) round through float32 ----
def _rounds_via_fp32(library: str, src: str, dst: str) -> bool:
    """Whether the installed version of ``library`` has a recorded double rounding for the pair."""
    return any(d.kind == "double_rounding" for d in deviations_for(library, src, dst))


@pytest.mark.parametrize("library, dst", [("ml_dtypes", "bf16"),
                                          pytest.param("torch", "fp16", marks=requires("torch"))])
@pytest.mark.parametrize("inputs", ["boundary", 1_000_000])
def test_float64_double_rounding_is_found(library, dst, inputs):
    r = sweep(library, "fp64", dst, inputs=inputs)
    if not _rounds_via_fp32(library, "fp64", dst):  # ml_dtypes >= 0.7 rounds float64 once
        assert "double_rounding" not in r.classes and r.ok
        assert f"{library} {installed_version(library)} does not show" in r.known_note
        assert "double_rounding" in r.known_note and "fixed in" in r.known_note
        return
    dr = r.classes["double_rounding"]
    assert dr.count > 0 and dr.known == dr.count and r.verdict == "explained"
    assert len(dr.witnesses) == 4
    for w in dr.witnesses:
        x = np.array([w.source], np.uint64)
        via32 = _cast(_cast(x, "fp32", "fp64"), dst, "fp32")
        assert w.fn_code == int(via32[0]) and w.engine_code == int(_cast(x, dst, "fp64")[0]) != w.fn_code
        assert w.note == "via fp32" and w.known == "double_rounding"
        native = Converter(library, dst)(x.view(np.float64))
        assert int(np.asarray(native).view(np.uint16)[0]) == w.fn_code


class JaxLike:
    """A converter that differs from numoracle only in NaN signs (a jax or XLA cast wrapped by a user)."""

    library = "jax"

    def __call__(self, x):
        out = np.asarray(no.formats.as_native(no.cast(x, "bf16"), "bf16")).view(np.uint16).copy()
        out[np.isnan(x) & np.signbit(x)] |= np.uint16(0x8000)
        return out.view(BF16_DT)


def test_jax_is_a_known_library():
    """NaN signs are a known deviation of jax: a jax converter is explained, the same codes unnamed are not."""
    codes = np.array([0x3F800000, 0xFFC00000, 0x7FC00000, 0xFF800001], np.uint32)
    r = sweep(JaxLike(), "fp32", "bf16", inputs=codes)
    assert r.verdict == "explained" and r.library == "jax" and r.classes["nan_payload_or_sign"].known == 2
    assert "known deviations of jax" in r.against
    plain = sweep(JaxLike().__call__, "fp32", "bf16", inputs=codes)
    assert plain.verdict == "unexplained" and plain.unexplained == 2


def test_sweep_against_jax_itself():
    needs("jax")
    r = sweep("jax", "fp32", "bf16", inputs=range(0xFF800000, 0xFF800000 + (1 << 16)))  # -inf and -NaNs
    assert r.ok and r.against == f"jax {installed_version('jax')}"
    assert r.classes["nan_payload_or_sign"].count == (1 << 16) - 1 == r.classes["nan_payload_or_sign"].known
    # float64 -> bfloat16 rounds through float32 (and flushes float32 subnormals): every mismatch known
    b = sweep("jax", "fp64", "bf16", inputs="boundary")
    assert b.verdict == "explained" and b.classes["double_rounding"].known == b.classes["double_rounding"].count > 0
    assert b.classes["double_rounding"].labels.get("double_rounding", 0) > 0


def test_random_inputs_do_not_depend_on_chunking():
    n = 3 * BLOCK + 123
    a = sweep("ml_dtypes", "fp64", "bf16", inputs=n, seed=7, chunk=BLOCK, executor=ThreadPoolExecutor(2))
    b = sweep("ml_dtypes", "fp64", "bf16", inputs=n, seed=7)
    assert a == b and a.chunks == 4 and b.chunks == 1
    assert np.array_equal(random_codes("fp64", "bf16", 100, seed=7, start=BLOCK - 50),
                          random_codes("fp64", "bf16", BLOCK + 50, seed=7)[BLOCK - 50:])
    assert sweep("ml_dtypes", "fp64", "bf16", inputs=n, seed=8) != b


# slice of 2^20 FP32 codes: E4M3FN subnormals, its overflow threshold 464 (0x43E80000), -464, -inf and -NaNs
_SLICE = np.concatenate([np.arange(c - (1 << 17), c + (1 << 17), dtype=np.uint32)
                         for c in (0x3B000000, 0x43E80000, 0xC3E80000, 0xFF800000)])


def test_process_thread_and_inline_runs_give_identical_reports():
    proc = sweep(sat_ftz_e4m3, "fp32", "fp8_e4m3fn", inputs=_SLICE, chunk=1 << 18, workers=2)
    thr = sweep(sat_ftz_e4m3, "fp32", "fp8_e4m3fn", inputs=_SLICE, chunk=1 << 17, executor=ThreadPoolExecutor(2))
    inl = sweep(sat_ftz_e4m3, "fp32", "fp8_e4m3fn", inputs=_SLICE, chunk=1 << 20)
    assert proc == thr == inl
    assert (proc.executor, thr.executor, inl.executor) == ("ProcessPoolExecutor", "ThreadPoolExecutor", "inline")
    assert set(proc.classes) == {"saturation_vs_inf_nan", "flush_to_zero", "nan_payload_or_sign"}
    assert proc.classes["saturation_vs_inf_nan"].witnesses[0].source == 0x43E80001  # just above 464
    assert proc.to_dict()["classes"] == json.loads(thr.to_json())["classes"]


def test_dask_local_cluster_gives_the_identical_report():
    distributed = pytest.importorskip("distributed")
    ref = sweep(sat_ftz_e4m3, "fp32", "fp8_e4m3fn", inputs=_SLICE, chunk=1 << 20)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            distributed.Client(lc) as client:
        r = sweep(sat_ftz_e4m3, "fp32", "fp8_e4m3fn", inputs=_SLICE, chunk=1 << 18, executor=client.get_executor())
    assert r == ref and r.chunks == 4 and r.executor == "ClientExecutor"


# ---- known-deviation coverage ------------------------------------------------------------------------
def test_known_label_shortcuts_agree_with_classify_ids():
    needs("torch")
    src, dst = FP32, FP8_E4M3FN
    pol = resolve_policy(dst)
    a = _bits(Converter("torch", dst)(_SLICE.view(np.float32)), np.uint8)
    r = _cast(_SLICE, dst, src)
    mm = a != r
    x, a, r = _SLICE[mm], a[mm], r[mm]
    cls, _ = classify_mismatches(src, dst, pol, x, a, r)
    assert {CLASSES[c] for c in np.unique(cls)} == {"saturation_vs_inf_nan", "nan_payload_or_sign"}
    ids, labels = known_labels("torch", src, dst, pol, cls, x, a, r)
    ref_ids, ref_labels = classify_ids("torch", src, dst, x, a)
    assert np.array_equal(ids != 0, ref_ids > 1)
    assert np.array_equal(np.array(labels)[ids], np.array(ref_labels)[ref_ids])


def test_a_wrapper_with_a_library_attribute_gets_its_known_deviations():
    class Wrapped:
        library = "ml_dtypes"

        def __call__(self, x):
            return x.astype(BF16_DT)

    codes = np.array([0xFFF8000000000000, 0x3FF0000000000000], np.uint64)  # ml_dtypes keeps the NaN's sign
    r = sweep(Wrapped(), "fp64", "bf16", inputs=codes)
    assert r.verdict == "explained" and r.classes["nan_payload_or_sign"].known == 1
    dr = sweep(Wrapped(), "fp64", "bf16", inputs=np.array([0x3FF0100000400000], np.uint64))
    if _rounds_via_fp32("ml_dtypes", "fp64", "bf16"):
        assert dr.verdict == "explained" and dr.classes["double_rounding"].known == 1
    else:  # ml_dtypes >= 0.7: correctly rounded, and the report names the fixed record
        assert dr.verdict == "clean" and "fixed in 0.7" in dr.known_note


# ---- report forms --------------------------------------------------------------------------------------
def test_report_text_markdown_json_and_progress(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    # ml_dtypes (every version) gives NaN -> -0 in FP4 and keeps the sign of a NaN: two known deviations
    r = sweep("ml_dtypes", "fp32", "fp4_e2m1fn", inputs=[0x7FC00000, 0x40A00000], progress=True)
    assert "\r" in err.getvalue() and "sweep fp32->fp4_e2m1fn vs ml_dtypes" in err.getvalue()  # a tqdm bar
    s = str(r)
    assert s.splitlines()[1].startswith("EXPLAINED: 1 mismatches")
    assert "fp32 0x7fc00000 (NAN) -> ml_dtypes 0x8 (-0), numoracle 0x7 (6)  [known: nan_to_policy]" in s
    md = r.to_markdown()
    assert "| nan_to_policy | 1 |" in md and "`0x7 (6)`" in md
    d = json.loads(r.to_json())
    assert d["verdict"] == "explained" and d["classes"]["nan_to_policy"]["witnesses"][0]["fn"] == "0x8"
    assert d["classes"]["nan_to_policy"]["known"] == 1 and d["ok"] is True
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    sweep("ml_dtypes", "fp64", "bf16", inputs=[0], progress=None)  # not a terminal: no progress line
    assert quiet.getvalue() == ""


def test_review_fixes_container_dtypes_seed_empty_and_full():
    def to_int4(x):  # a perfect converter: INT4 has no native dtype, int8 is its container
        c = no.cast(x, "int4")
        v = c.astype(np.int8)
        return np.where(v >= 8, v - 16, v).astype(np.int8)

    r = sweep(to_int4, "fp16", "int4", inputs="boundary")
    assert r.verdict == "clean" and not r.errors
    with pytest.raises(ValueError, match="seed must be a non-negative int"):
        sweep("ml_dtypes", "fp16", "fp8_e4m3fn", inputs=1000, seed=-1)
    with pytest.raises(ValueError, match="inputs is empty"):
        sweep("ml_dtypes", "fp16", "fp8_e4m3fn", inputs=[])
    assert sweep("ml_dtypes", "fp64", "bf16", inputs="full") == sweep("ml_dtypes", "fp64", "bf16", inputs="boundary")
    assert sweep("ml_dtypes", "fp8_e5m2", "fp8_e4m3fn", inputs="full").n_inputs == 256
    # known deviations are recorded under RNE: under RTZ they are not used to explain anything
    rtz = sweep("ml_dtypes", "fp64", "bf16", inputs="boundary", rounding="rtz")
    assert rtz.verdict == "unexplained" and "recorded for RNE" in rtz.known_note
