"""Golden files: bit-exact round trips for every format, atomic writes, refusal of damaged files, bit-level diffs."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re

import ml_dtypes
import numpy as np
import pytest

from numoracle.core.formats.format import FP16, FP64, INT8, Format, IntFormat, registry
from numoracle.testing.checks import NumoracleAssertionError
from numoracle.testing.golden import (
    GOLDEN_SUFFIX,
    Golden,
    GoldenDiff,
    GoldenError,
    assert_golden,
    compare_golden,
    decode_golden,
    encode_golden,
    read_golden,
    write_golden,
)

RNG = np.random.default_rng(20240606)


def all_or_sample(fmt) -> np.ndarray:
    """Every code of a format of <= 16 bits; else 4096 random codes plus the special ones."""
    if fmt.bits <= 16:
        return np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)
    top = (1 << fmt.bits) - 1
    special = [0, top, 1 << (fmt.bits - 1), top >> 1, 1, top - 1]
    if isinstance(fmt, Format) and fmt.nan == "ieee":  # NaN payloads, quiet and signalling, both signs
        exp = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
        special += [exp | 1, exp | (1 << (fmt.man_bits - 1)), exp | 0x5A5, fmt.sign_bit | exp | 3, exp,
                    exp | fmt.sign_bit]
    rnd = RNG.integers(0, top, 4096, dtype=np.uint64, endpoint=True)
    return np.concatenate([np.array(special, np.uint64), rnd]).astype(fmt.code_dtype)


@pytest.mark.parametrize("fmt", registry(), ids=lambda f: f.name)
def test_every_format_round_trips_bit_for_bit(tmp_path, fmt):
    codes = all_or_sample(fmt)
    codes = codes[: codes.size - codes.size % 4].reshape(4, -1)
    path = write_golden(tmp_path / f"{fmt.name}{GOLDEN_SUFFIX}", codes, {"fmt": fmt.name}, fmt=fmt)
    g = read_golden(path, expect_format=fmt, expect_shape=codes.shape)
    assert g.format == fmt and type(g.format) is type(fmt)
    assert g.codes.dtype == np.dtype(fmt.code_dtype) and g.shape == codes.shape
    assert np.array_equal(g.codes, codes)
    assert g.meta == {"fmt": fmt.name}
    assert not g.codes.flags.writeable
    # the payload is the codes, little-endian, C order (independent of numoracle: numpy's own byte layout)
    data = path.read_bytes()
    itemsize = np.dtype(fmt.code_dtype).itemsize
    payload = data[len(data) - 73 - codes.size * itemsize: len(data) - 73]
    assert payload == codes.astype(np.dtype(fmt.code_dtype).newbyteorder("<")).tobytes()


def test_native_arrays_keep_nan_payloads_and_negative_zero(tmp_path):
    bits = np.array([0x7FA5A5A5, 0xFFC00001, 0x80000000, 0x00000000, 0x7F800000, 0x00000001], np.uint32)
    x = bits.view(np.float32)
    g = read_golden(write_golden(tmp_path / "f32.golden", x))
    assert g.format.name == "fp32" and g.codes.tolist() == bits.tolist()
    arr, meta = g  # the documented (array, meta) unpacking
    assert arr.dtype == np.float32 and arr.view(np.uint32).tolist() == bits.tolist() and meta == {}
    big = x.astype(">f4")  # a big-endian array stores the same codes
    assert read_golden(write_golden(tmp_path / "be.golden", big)).codes.tolist() == bits.tolist()
    t = x.reshape(2, 3).T  # not C-contiguous: stored in its logical (C) order
    g = read_golden(write_golden(tmp_path / "t.golden", t))
    assert g.shape == (3, 2) and g.codes.tolist() == np.ascontiguousarray(t).view(np.uint32).tolist()


@pytest.mark.parametrize("dtype, name", [
    (ml_dtypes.bfloat16, "bf16"), (ml_dtypes.float8_e4m3fn, "fp8_e4m3fn"), (ml_dtypes.float8_e5m2, "fp8_e5m2"),
    (ml_dtypes.float8_e4m3fnuz, "fp8_e4m3fnuz"), (ml_dtypes.float4_e2m1fn, "fp4_e2m1fn"),
    (ml_dtypes.float6_e3m2fn, "fp6_e3m2fn"), (ml_dtypes.float8_e8m0fnu, "e8m0fnu"), (np.int8, "int8"),
    (np.uint64, "uint64"),
])
def test_ml_dtypes_and_numpy_inputs(tmp_path, dtype, name):
    width = np.dtype(dtype).itemsize * 8
    valid = 1 << {"fp4_e2m1fn": 4, "fp6_e3m2fn": 6}.get(name, width)
    raw = RNG.integers(0, min(valid, 1 << 16), 257, dtype=np.uint64).astype(f"u{width // 8}")
    x = raw.view(dtype)
    g = read_golden(write_golden(tmp_path / "x.golden", x))
    assert g.format.name == name
    assert g.codes.tolist() == raw.tolist()
    assert g.array.dtype == np.dtype(dtype) and g.array.view(raw.dtype).tolist() == raw.tolist()


def test_torch_inputs(tmp_path):
    torch = pytest.importorskip("torch")
    cases = {
        "bf16": (torch.bfloat16, torch.int16), "fp16": (torch.float16, torch.int16),
        "fp8_e4m3fn": (torch.float8_e4m3fn, torch.uint8), "fp8_e5m2": (torch.float8_e5m2, torch.uint8),
        "int8": (torch.int8, torch.uint8), "fp32": (torch.float32, torch.int32),
    }
    vals = torch.tensor([[0.5, -0.0, float("nan"), 3.0e4], [-1e-3, 1.0, float("inf"), -2.5]])
    for name, (dt, view) in cases.items():
        t = vals.to(dt) if dt is not torch.int8 else torch.tensor([[1, -2, 3, -128], [127, 0, -1, 5]], dtype=dt)
        g = read_golden(write_golden(tmp_path / f"{name}.golden", t))
        expect = t.view(view).numpy().astype(np.int64) % (1 << (8 * t.element_size()))
        assert g.format.name == name and g.codes.astype(np.int64).tolist() == expect.tolist()


def test_codes_of_formats_without_a_dtype(tmp_path):
    codes = np.array([0, 7, 8, 15], np.uint8)  # INT4: 0, 7, -8, -1
    g = read_golden(write_golden(tmp_path / "i4.golden", codes, fmt="int4"))
    assert g.format.name == "int4" and g.array.tolist() == codes.tolist() and g.values().tolist() == [0, 7, -8, -1]
    tf = np.array([0x1FC00, 0x7FFFF], np.uint32)  # TF32 codes (19 bits): 1.0 = 127 << 10
    g = read_golden(write_golden(tmp_path / "tf.golden", tf, fmt="tf32"))
    assert g.array.dtype == np.float32 and g.array[0] == 1.0
    with pytest.raises(ValueError, match="code 0x10 is out of range for int4"):
        write_golden(tmp_path / "bad.golden", np.array([16], np.uint8), fmt="int4")
    with pytest.raises(TypeError, match="must hold integer codes"):
        write_golden(tmp_path / "bad.golden", np.array([1.0]), fmt="fp16")


def test_empty_and_scalar_arrays(tmp_path):
    for x in (np.zeros((0, 3), np.float16), np.float32(-0.0), np.array(7, np.int8)):
        g = read_golden(write_golden(tmp_path / "e.golden", x))
        a = np.asarray(x)
        assert g.shape == a.shape and g.codes.tobytes() == a.tobytes()


# ---- the file itself --------------------------------------------------------------------------------------
def test_file_layout_and_checksum(tmp_path):
    path = write_golden(tmp_path / "one.golden", np.array([1.0], np.float32), {"rounding": "rne", "k": (1, 2)})
    data = path.read_bytes()
    magic, header, rest = data.split(b"\n", 2)
    assert magic == b"NUMORACLE-GOLDEN 1"
    h = json.loads(header)
    assert h["format"] == "fp32" and h["shape"] == [1] and h["byte_order"] == "little" and h["nbytes"] == 4
    assert h["format_spec"] == {"kind": "float", "exp_bits": 8, "man_bits": 23, "bias": 127, "signed": True,
                                "nan": "ieee", "has_inf": True, "has_subnormals": True}
    assert h["meta"] == {"k": [1, 2], "rounding": "rne"}  # tuples read back as lists
    assert rest[:4] == b"\x00\x00\x80\x3f"  # 1.0f = 0x3f800000, little-endian
    trailer = rest[4:]
    body = data[: len(data) - len(trailer)]
    assert trailer == b"\nsha256 " + hashlib.sha256(body).hexdigest().encode() + b"\n"


def test_no_pickle_is_ever_used(tmp_path, monkeypatch):
    x = np.array([1.5, np.nan], ml_dtypes.bfloat16)
    pickled = tmp_path / "pickled.golden"
    pickled.write_bytes(pickle.dumps(x))

    def refuse(*a, **k):
        raise AssertionError("pickle used")

    for name in ("load", "loads", "dump", "dumps", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    monkeypatch.setattr(np, "load", refuse)
    monkeypatch.setattr(np, "save", refuse)
    g = read_golden(write_golden(tmp_path / "p.golden", x, {"a": 1}))
    assert g.codes.tolist() == x.view(np.uint16).tolist()
    with pytest.raises(GoldenError, match="not a numoracle golden file"):
        read_golden(pickled)


def test_write_is_atomic_a_failed_replace_leaves_the_old_file(tmp_path, monkeypatch):
    path = write_golden(tmp_path / "a.golden", np.arange(4, dtype=np.float16), {"v": 1})
    os.chmod(path, 0o640)
    before = path.read_bytes()

    def crash(src, dst):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        write_golden(path, np.arange(5, dtype=np.float16), {"v": 2})
    assert path.read_bytes() == before and read_golden(path).meta == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.golden"]  # no temporary file left behind
    monkeypatch.undo()
    write_golden(path, np.arange(5, dtype=np.float16), {"v": 2})
    assert read_golden(path).meta == {"v": 2} and (path.stat().st_mode & 0o777) == 0o640  # mode kept


def test_write_is_atomic_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = write_golden(tmp_path / "a.golden", np.arange(4, dtype=np.int8))
    before = path.read_bytes()

    def crash(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError, match="disk full"):
        write_golden(path, np.arange(9, dtype=np.int8))
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["a.golden"]


def test_write_creates_directories(tmp_path):
    path = write_golden(tmp_path / "x" / "y" / "z.golden", np.ones(2, np.float64))
    assert read_golden(path).format == FP64


@pytest.fixture
def good(tmp_path):
    x = np.array([1.0, -0.0, np.nan, 65504.0], np.float16)
    return write_golden(tmp_path / "g.golden", x, {"rounding": "rne"})


def refused(path, data: bytes, match: str):
    path.write_bytes(data)
    with pytest.raises(GoldenError, match=match) as e:
        read_golden(path)
    assert str(path) in str(e.value)
    return e.value


def test_truncated_files_are_refused(good):
    data = good.read_bytes()
    n = len(data)
    for cut, msg in [(0, "not a numoracle golden file"), (10, "not a numoracle golden file"),
                     (18, "version line"), (40, "truncated inside the header"), (n - 80, "truncated"),
                     (n - 1, "truncated"), (n - 73, "truncated")]:
        refused(good, data[:cut], msg)


def test_flipped_payload_byte_is_refused(good):
    data = bytearray(good.read_bytes())
    data[len(data) - 73 - 3] ^= 0x01
    refused(good, bytes(data), "checksum mismatch")


def test_edited_header_is_refused(good):
    data = good.read_bytes()
    refused(good, data.replace(b'"rounding":"rne"', b'"rounding":"rtz"'), "checksum mismatch")  # same length
    refused(good, data.replace(b'"shape":[4]', b'"shape":[2]'), "checksum mismatch")
    refused(good, data.replace(b'"nbytes":8', b'"nbytes":6'), "unexpected bytes")
    refused(good, data.replace(b'"nbytes":8', b'"nbytes":9'), "truncated")
    refused(good, data.replace(b'{"byte_order"', b'{"byte_order" '), "checksum mismatch")
    refused(good, data.replace(b'{"byte_order"', b'["byte_order"'), "not valid JSON")


def test_wrong_magic_version_and_trailer_are_refused(good):
    data = good.read_bytes()
    refused(good, b"NUMORACLE-GOLDEM" + data[16:], "not a numoracle golden file")
    refused(good, data.replace(b"NUMORACLE-GOLDEN 1", b"NUMORACLE-GOLDEN 2", 1),
            "version 2; this numoracle reads version 1")
    refused(good, data.replace(b"NUMORACLE-GOLDEN 1", b"NUMORACLE-GOLDEN x", 1), "version line")
    digest = data[-65:-1]
    refused(good, data[:-65] + (b"0" * 64) + b"\n", "checksum mismatch")
    refused(good, data[:-65] + digest.upper() + b"\n", "checksum line")
    refused(good, data + b"\n", "1 unexpected bytes")
    refused(good, b"\x93NUMPY" + data, "not a numoracle golden file")


def _resealed(data: bytes, edit) -> bytes:
    """A file whose header was edited by ``edit`` and whose checksum was recomputed (a consistent forgery)."""
    magic, header, rest = data.split(b"\n", 2)
    h = json.loads(header)
    edit(h)
    body = magic + b"\n" + json.dumps(h, sort_keys=True, separators=(",", ":")).encode() + b"\n" + rest[:-73]
    return body + b"\nsha256 " + hashlib.sha256(body).hexdigest().encode() + b"\n"


def test_consistent_but_wrong_headers_are_refused(good):
    data = good.read_bytes()
    bf16 = {"kind": "float", "exp_bits": 8, "man_bits": 7, "bias": 127, "signed": True, "nan": "ieee",
            "has_inf": True, "has_subnormals": True}
    refused(good, _resealed(data, lambda h: h.update(format_spec=bf16)), "means another format")
    refused(good, _resealed(data, lambda h: h.update(shape=[3])), "needs 6 bytes, the header says 8")
    refused(good, _resealed(data, lambda h: h.update(shape="4")), "not a list of sizes")
    refused(good, _resealed(data, lambda h: h.update(meta=[1])), "not a JSON object")
    refused(good, _resealed(data, lambda h: h.update(byte_order="big")), "unsupported layout")
    refused(good, _resealed(data, lambda h: h["format_spec"].update(exp_bits="5")), "invalid fields")
    refused(good, _resealed(data, lambda h: h.pop("format_spec")), "format fields are damaged")
    custom = _resealed(data, lambda h: h.update(format="my_e5m10"))  # unknown name: the fields define it
    good.write_bytes(custom)
    g = read_golden(good)
    assert g.format.name == "my_e5m10" and g.format == FP16
    path = write_golden(good.parent / "fp4.golden", np.array([15], np.uint8), fmt="fp4_e2m1fn")
    fp4 = path.read_bytes()
    refused(path, fp4.replace(b"\x0f\nsha", b"\x1f\nsha"), "checksum mismatch")
    forged = _resealed(fp4.replace(b"\x0f\nsha", b"\x1f\nsha"), lambda h: None)
    refused(path, forged, "does not fit fp4_e2m1fn's 4 bits")


def test_expected_format_and_shape(good):
    assert read_golden(good, expect_format="float16", expect_shape=(4,)).shape == (4,)
    with pytest.raises(GoldenError, match="holds fp16 codes, but bf16 was expected"):
        read_golden(good, expect_format="bf16")
    with pytest.raises(GoldenError, match=re.escape("holds shape (4,), but (2, 2) was expected")):
        read_golden(good, expect_shape=(2, 2))
    with pytest.raises(FileNotFoundError):
        read_golden(good.parent / "missing.golden")


def test_meta_must_be_json(tmp_path):
    x = np.zeros(2, np.float32)
    p = tmp_path / "m.golden"
    for meta, err, match in [
        (FP16, TypeError, "meta must be a dict"), ([1], TypeError, "meta must be a dict"),
        ({"fmt": FP16}, TypeError, r"meta\['fmt'\] is a numoracle.core.formats.format.Format .* fmt.name"),
        ({"x": np.float32(1)}, TypeError, r"meta\['x'\] is a numpy.float32"),
        ({"s": {1, 2}}, TypeError, r"meta\['s'\] is a builtins.set"),
        ({1: "a"}, TypeError, "has the key 1 .int.; JSON keys are strings"),
        ({"a": [1, float("nan")]}, ValueError, r"meta\['a'\]\[1\] is nan; JSON has no NaN/inf"),
        ({"a": {"b": float("inf")}}, ValueError, "JSON has no NaN/inf"),
    ]:
        with pytest.raises(err, match=match):
            write_golden(p, x, meta)
    loop: dict = {"a": []}
    loop["a"].append(loop)
    with pytest.raises(ValueError, match="contains itself"):
        write_golden(p, x, loop)
    assert not p.exists()
    meta = {"policy": {"rounding": "rne", "overflow": None}, "seed": 0, "u": 2.0 ** -24, "ok": True, "k": (1, 2)}
    assert read_golden(write_golden(p, x, meta)).meta == {**meta, "k": [1, 2]}


def test_decode_golden_of_encode_golden_is_the_identity():
    codes = np.array([[0x7E01, 0x8000], [0x3C00, 0xFC00]], np.uint16)
    g = decode_golden(encode_golden(codes, FP16, {"z": 1}))
    assert g.format == FP16 and g.codes.tolist() == codes.tolist() and g.meta == {"z": 1}
    assert g == Golden(codes, FP16, {"z": 1}) and g != Golden(codes, FP16, {"z": 2})


# ---- comparing -------------------------------------------------------------------------------------------------
def fp16_ulps(a: float, b: float) -> int:
    """Reference ULP distance b - a: positions in the sorted list of every distinct non-NaN FP16 value."""
    vals = np.unique(np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64))
    vals = vals[~np.isnan(vals)]  # -0 == +0: one point
    return int(np.searchsorted(vals, b) - np.searchsorted(vals, a))


def test_diff_rows_match_a_reference_ulp_count():
    rng = np.random.default_rng(5)
    golden_codes = rng.integers(0, 1 << 16, 500, dtype=np.uint16)
    actual_codes = golden_codes.copy()
    change = rng.random(500) < 0.3
    actual_codes[change] = rng.integers(0, 1 << 16, int(change.sum()), dtype=np.uint16)
    g = Golden(golden_codes, FP16, {})
    d = compare_golden(g, actual_codes.view(np.float16), show=1000)
    assert d.n_differ == int((golden_codes != actual_codes).sum()) == len(d.first) == d.n_fail
    gv, av = golden_codes.view(np.float16).astype(np.float64), actual_codes.view(np.float16).astype(np.float64)
    for r in d.first:
        i = r.index[0]
        assert (r.golden, r.actual) == (golden_codes[i], actual_codes[i])
        if np.isnan(gv[i]) or np.isnan(av[i]):
            assert r.ulps is None and r.kind == ("NaN payload" if np.isnan(gv[i]) and np.isnan(av[i]) else "NaN/number")
        else:
            assert r.ulps == fp16_ulps(gv[i], av[i])
    numeric = [abs(r.ulps) for r in d.first if r.ulps is not None]
    assert d.max_distance == max(numeric)
    assert [r.index for r in d.first] == sorted(r.index for r in d.first)  # first: by index
    ranks = [float("inf") if r.kind == "NaN/number" else abs(r.ulps or 0) for r in d.worst]
    assert ranks == sorted(ranks, reverse=True)  # worst: by distance


def test_hand_worked_fp16_report():
    golden = np.array([1.0, -0.0, 3.0, np.nan, np.inf, 2.0], np.float16)
    actual = np.array([1.0009765625, 0.0, 3.5, np.nan, -np.inf, 2.0], np.float16)
    actual_bits = actual.view(np.uint16).copy()
    actual_bits[3] = 0x7E01  # another NaN payload
    d = compare_golden(Golden(golden.view(np.uint16), FP16, {}), actual_bits.view(np.float16), name="h")
    assert not d.passed and (d.n_differ, d.n_fail, d.n_nan_payload, d.n_nan_number) == (5, 5, 1, 0)
    # -inf to +inf: 2 * 0x7bff finite magnitudes + one zero in between = 63487 values, so 63488 steps
    assert d.max_distance == 63488
    assert str(d).splitlines() == [
        "Golden mismatch h: 5 of 6 fp16 elements differ bit-wise (shape (6,)); 1 NaN with another payload; "
        "max ULP distance 63488 elsewhere",
        "differing elements (fp16 codes; ULPs = actual - golden):",
        "  index  golden  actual  golden value  actual value          ULPs",
        "   (0,)  0x3c00  0x3c01           1.0  1.0009765625            +1",
        "   (1,)  0x8000  0x0000          -0.0           0.0  0 (-0 vs +0)",
        "   (2,)  0x4200  0x4300           3.0           3.5          +256",
        "   (3,)  0x7e00  0x7e01           nan           nan   NaN payload",
        "   (4,)  0x7c00  0xfc00           inf          -inf        -63488",
    ]
    within = compare_golden(Golden(golden.view(np.uint16), FP16, {}), actual_bits.view(np.float16), max_ulps=256)
    assert within.n_fail == 1 and [r.index for r in within.first] == [(4,)]  # only inf -> -inf is beyond 256


def test_max_ulps_tolerance():
    golden = np.array([1.0, -0.0, 3.0, np.nan, np.inf], np.float16)
    actual = np.array([1.0009765625, 0.0, 3.5, np.nan, np.inf], np.float16)
    actual.view(np.uint16)[3] = 0x7E01
    g = Golden(golden.view(np.uint16), FP16, {})
    d = compare_golden(g, actual, max_ulps=1)  # +1, signed zero and the other NaN pass; +256 does not
    assert (d.n_differ, d.n_fail) == (4, 1) and [r.index for r in d.first] == [(2,)]
    assert "4 of 5 fp16 elements differ bit-wise (shape (5,)), 1 by more than max_ulps=1" in d.summary()
    assert compare_golden(g, actual, max_ulps=256).passed
    assert "all within max_ulps=256" in compare_golden(g, actual, max_ulps=256).summary()
    with pytest.raises(ValueError, match="max_ulps must be a count"):
        compare_golden(g, actual, max_ulps=-1)


def test_extreme_distances_are_exact():
    big = np.array([-np.finfo(np.float64).max], np.float64)
    d = compare_golden(Golden(big.view(np.uint64), FP64, {}), -big)
    assert d.max_distance == 2 * 0x7FEFFFFFFFFFFFFF  # beyond int64: computed exactly
    assert d.first[0].ulps == 2 * 0x7FEFFFFFFFFFFFFF
    d = compare_golden(Golden(np.array([0x80], np.uint8), INT8, {}), np.array([127], np.int8))
    assert d.first[0].ulps == 255 and re.search(r"\(0,\)\s+0x80\s+0x7f\s+-128\s+127\s+\+255$", str(d), re.M)
    u = IntFormat(64, False)
    d = compare_golden(Golden(np.array([0], np.uint64), u, {}), np.array([2**64 - 1], np.uint64))
    assert d.first[0].ulps == 2**64 - 1


def test_format_shape_and_meta_disagreements():
    g = Golden(np.array([0x3C00, 0], np.uint16), FP16, {"rounding": "rne", "seed": 1})
    d = compare_golden(g, np.array([1, 0], ml_dtypes.bfloat16), name="n")
    assert not d.passed and d.summary() == "Golden mismatch n: format: the golden holds fp16, the array is bf16"
    d = compare_golden(g, np.array([1, 0, 0], np.float16), name="n")
    assert d.summary() == "Golden mismatch n: shape: the golden has shape (2,), the array (3,)"
    d = compare_golden(g, np.array([1, 0], np.float16), meta={"rounding": "rtz", "extra": [1]}, name="n")
    assert not d.passed and d.n_differ == 0
    assert d.summary() == ("Golden mismatch n: meta differs (extra: not in the golden (now [1]); rounding: golden "
                           "'rne', now 'rtz'; seed: only in the golden (1))")
    d = compare_golden(g, np.array([1, 2], np.float16), meta={"seed": 2, "rounding": "rne"}, name="n")
    assert d.summary() == ("Golden mismatch n: meta differs (seed: golden 1, now 2); 1 of 2 fp16 elements differ "
                           "bit-wise (shape (2,)); max ULP distance 16384")  # 0 -> 2.0 = 0x4000 steps
    assert compare_golden(g, np.array([1, 0], np.float16), meta={"seed": 1, "rounding": "rne"}).passed
    assert compare_golden(g, np.array([1, 0], np.float16)).passed  # meta=None: not compared


def test_first_and_worst_tables():
    golden = np.zeros(30, np.float16)
    actual = np.arange(30, dtype=np.float16)  # element i is i (~ many ULPs) from 0
    d = compare_golden(Golden(golden.view(np.uint16), FP16, {}), actual, show=3)
    assert [r.index for r in d.first] == [(1,), (2,), (3,)]
    assert [r.index for r in d.worst] == [(29,), (28,), (27,)]
    text = str(d)
    assert "first 3 of 29 differing elements, by index" in text and "worst 3 (largest ULP distance):" in text


def test_assert_golden_update_check_and_errors(tmp_path):
    p = tmp_path / "a.golden"
    x = np.array([1.0, 2.0], ml_dtypes.bfloat16)
    with pytest.raises(NumoracleAssertionError, match="does not exist"):
        assert_golden(p, x)
    assert assert_golden(p, x, {"m": 1}, update=True) == "created"
    stamp = p.stat().st_mtime_ns
    assert assert_golden(p, x, {"m": 1}, update=True) == "unchanged" and p.stat().st_mtime_ns == stamp
    assert assert_golden(p, x, {"m": 1}) == "matched"
    y = x.copy()
    y[1] = 3.0
    with pytest.raises(NumoracleAssertionError) as e:
        assert_golden(p, y, update_hint="HINT")
    assert isinstance(e.value.report, GoldenDiff) and e.value.report.n_fail == 1 and str(e.value).endswith("HINT")
    assert assert_golden(p, y, {"m": 1}, update=True) == "updated"
    assert read_golden(p).codes.tolist() == y.view(np.uint16).tolist()
    p.write_bytes(p.read_bytes()[:-5])
    with pytest.raises(GoldenError, match="truncated"):
        assert_golden(p, y)
    assert assert_golden(p, y, {"m": 1}, update=True) == "updated"  # update repairs a damaged golden
    assert assert_golden(p, y, {"m": 1}) == "matched"
