"""Golden files: arrays of any numoracle format stored bit for bit, verified on read, compared bit-wise.

``write_golden(path, array, meta)`` stores the *codes* of ``array`` (numpy, ml_dtypes or torch, fp8/fp4/
bf16 included; or integer codes with ``fmt=``), its format and shape, and a JSON ``meta`` dict (the
policy, seed, tolerance ... that produced it). ``read_golden(path)`` returns a :class:`Golden`
(``arr, meta = read_golden(path)`` also works) after checking everything it can: a truncated, edited,
foreign or mismatched file raises :class:`GoldenError` (a ``ValueError``) saying what is wrong.

File layout, version 1 (no pickle anywhere; reading parses one JSON line and raw bytes)::

    NUMORACLE-GOLDEN 1\\n            magic and format version, ASCII
    {"byte_order":"little",...}\\n   header: one line of ASCII JSON, keys sorted
    <payload>                        the codes, C order, little-endian, header["nbytes"] bytes
    \\nsha256 <64 hex digits>\\n      SHA-256 of everything above it (magic, header and payload)

Header keys: ``format`` (numoracle name), ``format_spec`` (its fields, so a format that is not
registered still reads back, and a registered name that now means something else is refused),
``shape``, ``code_dtype`` (uint8/16/32/64; sub-byte formats such as FP4 and INT4 take one byte per
code), ``byte_order`` ("little"), ``nbytes``, ``meta`` and ``numoracle`` (the writer's version).
Writes are atomic: a temporary file in the same directory, flushed and fsync'ed, then ``os.replace``;
a crash leaves the old file (or none), never half a file.

``compare_golden(golden, array)`` compares codes bit for bit (``max_ulps`` allows ULP distances,
:mod:`numoracle.codekeys`) and returns a :class:`GoldenDiff` whose text lists the count, the first
and the worst differing elements with hex codes, values and ULP distances. ``assert_golden(path,
array, meta, update=...)`` is the check the pytest plugin's ``golden`` fixture runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..core.args import check_int
from ..core.engine.codekeys import is_nan, to_key
from ..core.engine.convert import decode
from ..core.errors import NumoracleAssertionError
from ..core.formats.format import AnyFormat, Format, IntFormat, format_of
from ..core.formats.interop import as_native, is_torch, native_dtype, to_codes
from ..core.text import hex_width
from .goldenfiles import atomic_write, check_header, file_path, load_header, normalize_meta, write_target

__all__ = ["Golden", "GoldenDiff", "DiffRow", "GoldenError", "write_golden", "read_golden", "compare_golden",
           "assert_golden", "golden_codes", "normalize_meta", "encode_golden", "decode_golden", "GOLDEN_SUFFIX",
           "MAGIC", "VERSION"]

MAGIC = b"NUMORACLE-GOLDEN"
VERSION = 1
GOLDEN_SUFFIX = ".golden"
_TRAILER = re.compile(rb"\nsha256 ([0-9a-f]{64})\n\Z")
_TRAILER_LEN = len(b"\nsha256 \n") + 64
_SPEC_KEYS = ("exp_bits", "man_bits", "bias", "signed", "nan", "has_inf", "has_subnormals")
_REGEN = "restore it from version control, or regenerate it (write_golden, or pytest --numoracle-update-goldens)"


class GoldenError(ValueError):
    """A golden file that cannot be trusted (damaged, edited, foreign) or is not the one expected."""


# ---- the stored object ---------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Golden:
    """The contents of a golden file: codes (read-only, C order), their format, and the meta dict.

    ``arr, meta = golden`` unpacks to the native array (``.array``) and the meta, as ``read_golden``'s
    result is documented to.
    """

    codes: np.ndarray
    format: AnyFormat
    meta: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.codes.shape)

    @property
    def array(self) -> np.ndarray:
        """The values as a numpy / ml_dtypes array (TF32 in float32); the codes where no dtype exists (INT4)."""
        if native_dtype(self.format) is None and self.format.name != "tf32":
            return self.codes
        return as_native(self.codes, self.format)

    def values(self) -> np.ndarray:
        """Exact values: float64 for float formats, int64/uint64 for integers."""
        return decode(self.codes, self.format)

    def __iter__(self) -> Any:  # unpacking: arr, meta = read_golden(path)
        return iter((self.array, self.meta))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Golden):
            return NotImplemented
        return (self.format == other.format and self.shape == other.shape and self.meta == other.meta
                and bool(np.array_equal(self.codes, other.codes)))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        where = f", path={str(self.path)!r}" if self.path is not None else ""
        return f"Golden({self.format.name}, shape={self.shape}, meta={self.meta!r}{where})"


# ---- inputs: codes and meta ---------------------------------------------------------------------------
def golden_codes(array: Any, fmt: Any = None) -> tuple[np.ndarray, AnyFormat]:
    """(C-contiguous codes in the format's unsigned container, format) of ``array``.

    Without ``fmt`` the dtype names the format (numpy, ml_dtypes, torch, Python numbers); with ``fmt``,
    ``array`` holds integer codes (bit patterns) of that format, each in ``0 .. 2**bits - 1``.
    """
    if fmt is not None:
        f = format_of(fmt)
        a = array.detach().cpu().numpy() if is_torch(array) else np.asarray(array)
        if a.dtype.kind not in "iu":
            raise TypeError(f"with fmt={f.name}, array must hold integer codes (bit patterns) of {f.name}, but it "
                            f"has dtype {a.dtype}; leave fmt out to store the values of a native array")
        if a.size and (int(a.min()) < 0 or int(a.max()) >= 1 << f.bits):
            bad = int(a.min()) if int(a.min()) < 0 else int(a.max())
            raise ValueError(f"code {bad:#x} is out of range for {f.name} ({f.bits} bits: 0..{(1 << f.bits) - 1:#x})")
        return np.array(a, dtype=f.code_dtype, order="C"), f
    try:
        codes, f = to_codes(array)  # (big-endian arrays are read in native order)
    except TypeError as e:
        raise TypeError(str(e).replace("src=FORMAT", "fmt=FORMAT")) from None
    return np.array(codes, dtype=f.code_dtype, order="C"), f


def _spec(fmt: AnyFormat) -> dict[str, Any]:
    if isinstance(fmt, IntFormat):
        return {"kind": "int", "bits": fmt.bits, "signed": fmt.signed}
    return {"kind": "float", **{k: getattr(fmt, k) for k in _SPEC_KEYS}}


def _writer_version() -> str:
    try:
        from importlib.metadata import version

        return version("numoracle")
    except Exception:  # not installed as a distribution (a source checkout on sys.path)
        return "unknown"


# ---- the file format ------------------------------------------------------------------------------
def encode_golden(codes: np.ndarray, fmt: AnyFormat, meta: dict[str, Any]) -> bytes:
    """The bytes of a golden file holding ``codes`` of ``fmt`` and the (normalised) ``meta``."""
    payload = np.asarray(codes).astype(np.dtype(fmt.code_dtype).newbyteorder("<"), copy=False).tobytes(order="C")
    header = {"format": fmt.name, "format_spec": _spec(fmt), "shape": list(codes.shape), "code_dtype": fmt.code_dtype,
              "byte_order": "little", "nbytes": len(payload), "meta": meta, "numoracle": _writer_version()}
    head = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    body = MAGIC + b" %d\n" % VERSION + head.encode("ascii") + b"\n" + payload
    return body + b"\nsha256 " + hashlib.sha256(body).hexdigest().encode("ascii") + b"\n"


def _format_from(spec: Any, name: Any, src: str) -> AnyFormat:
    if not isinstance(name, str) or not isinstance(spec, dict) or spec.get("kind") not in ("float", "int"):
        raise GoldenError(f"{src}: the header's format fields are damaged ({name!r}, {spec!r}); {_REGEN}")
    try:
        if spec["kind"] == "int":
            built: AnyFormat = IntFormat(spec["bits"], spec["signed"])  # types checked by check_header
        else:
            built = Format(name, *(spec[k] for k in _SPEC_KEYS))
    except (KeyError, TypeError, ValueError) as e:
        raise GoldenError(f"{src}: the header's format {name!r} has invalid fields {spec!r} ({e}); {_REGEN}") from None
    try:
        known = format_of(name)
    except ValueError:
        return built  # a format this process has not registered: the recorded fields define it
    if known != built or known.is_integer != built.is_integer:
        raise GoldenError(f"{src}: the file records format {name!r} as {spec}, but numoracle's {name!r} is "
                          f"{_spec(known)}; the name means another format now")
    return known


def decode_golden(data: bytes, source: str = "<bytes>") -> Golden:
    """Parse and verify the bytes of a golden file (see the module docstring); ``source`` names it in errors."""
    if not data.startswith(MAGIC + b" "):
        raise GoldenError(f"{source}: not a numoracle golden file (it starts with {data[:24]!r}, not {MAGIC!r})")
    nl = data.find(b"\n", 0, 64)
    ver = data[len(MAGIC) + 1:nl] if nl > 0 else b""
    if not ver.isdigit():
        raise GoldenError(f"{source}: the version line {data[:nl if nl > 0 else 40]!r} is damaged; {_REGEN}")
    if int(ver) != VERSION:
        raise GoldenError(f"{source}: golden format version {int(ver)}; this numoracle reads version {VERSION} "
                          "(written by another numoracle version: upgrade, or regenerate the file)")
    end = data.find(b"\n", nl + 1)
    if end < 0:
        raise GoldenError(f"{source}: truncated inside the header (no end of line after it); {_REGEN}")
    try:
        header = load_header(data[nl + 1:end].decode("ascii"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise GoldenError(f"{source}: the header is not valid JSON ({e}): the file was edited or damaged; "
                          f"{_REGEN}") from None
    problem = check_header(header)  # every field by type and range, before any is used
    if problem is not None:
        raise GoldenError(f"{source}: invalid header: {problem}; {_REGEN}")
    want = end + 1 + header["nbytes"] + _TRAILER_LEN
    if len(data) < want:
        raise GoldenError(f"{source}: truncated: the header announces {header['nbytes']} payload bytes, so the file "
                          f"should have {want} bytes, but it has {len(data)}; {_REGEN}")
    if len(data) > want:
        raise GoldenError(f"{source}: {len(data) - want} unexpected bytes: the header announces {header['nbytes']} "
                          f"payload bytes ({want} bytes in all), the file has {len(data)} (edited or appended to); "
                          f"{_REGEN}")
    m = _TRAILER.search(data, len(data) - _TRAILER_LEN)
    if m is None:
        raise GoldenError(f"{source}: the checksum line at the end is missing or damaged; {_REGEN}")
    body = data[:len(data) - _TRAILER_LEN]
    if hashlib.sha256(body).hexdigest() != m.group(1).decode("ascii"):
        raise GoldenError(f"{source}: checksum mismatch: the SHA-256 of the contents is not the one recorded, so the "
                          f"file was edited or damaged after it was written; {_REGEN}")
    fmt = _format_from(header.get("format_spec"), header.get("format"), source)
    shape, meta = header.get("shape"), header.get("meta")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise GoldenError(f"{source}: the header's shape {shape!r} is not a list of sizes; {_REGEN}")
    if not isinstance(meta, dict):
        raise GoldenError(f"{source}: the header's meta {meta!r} is not a JSON object; {_REGEN}")
    if header.get("byte_order") != "little" or header.get("code_dtype") != fmt.code_dtype:
        raise GoldenError(f"{source}: unsupported layout (byte_order {header.get('byte_order')!r}, code_dtype "
                          f"{header.get('code_dtype')!r}; version {VERSION} stores little-endian {fmt.code_dtype})")
    dt = np.dtype(fmt.code_dtype).newbyteorder("<")
    need = int(np.prod(shape, dtype=object)) * dt.itemsize
    if need != header["nbytes"]:
        raise GoldenError(f"{source}: shape {tuple(shape)} of {fmt.code_dtype} needs {need} bytes, the header says "
                          f"{header['nbytes']}; {_REGEN}")
    codes = np.frombuffer(body, dt, offset=end + 1).reshape(shape).astype(fmt.code_dtype)
    if fmt.bits < 8 * dt.itemsize and codes.size and int(codes.max()) >> fmt.bits:
        raise GoldenError(f"{source}: a code {int(codes.max()):#x} does not fit {fmt.name}'s {fmt.bits} bits")
    codes.flags.writeable = False
    return Golden(codes, fmt, meta)


def write_golden(path: str | os.PathLike[str], array: Any, meta: dict[str, Any] | None = None, *,
                 fmt: Any = None) -> Path:
    """Write ``array`` (its codes, format and shape) and ``meta`` to a golden file, atomically; return the path.

    ``meta``: a JSON object (dict with str keys of str, int, finite float, bool, None, lists, dicts; tuples
    read back as lists), e.g. ``{"rounding": "rne", "seed": 0}``; anything else raises TypeError/ValueError.
    ``fmt``: give it when ``array`` holds integer codes of a format (INT4, TF32 or any other). Missing
    parent directories are created. The file is replaced only once the new one is complete and synced.
    """
    codes, f = golden_codes(array, fmt)
    data = encode_golden(codes, f, normalize_meta(meta))
    p = file_path(path)
    atomic_write(write_target(p), data)  # through a symlink: its target is replaced, the link stays
    return p


def read_golden(path: str | os.PathLike[str], *, expect_format: Any = None,
                expect_shape: tuple[int, ...] | None = None) -> Golden:
    """Read and verify a golden file; ``arr, meta = read_golden(path)`` or use the :class:`Golden`'s fields.

    Raises GoldenError when the file is not a golden file, is truncated or edited (checksum), or holds
    another format or shape than ``expect_format`` / ``expect_shape``; FileNotFoundError when it is missing.
    """
    p = file_path(path)
    g = decode_golden(p.read_bytes(), str(p))
    g = Golden(g.codes, g.format, g.meta, p)
    if expect_format is not None and format_of(expect_format) != g.format:
        raise GoldenError(f"{p}: holds {g.format.name} codes, but {format_of(expect_format).name} was expected; "
                          "regenerate the golden if the format changed on purpose")
    if expect_shape is not None and not (isinstance(expect_shape, (tuple, list))
                                         and all(isinstance(n, int) and not isinstance(n, bool) for n in expect_shape)):
        raise TypeError(f"expect_shape must be a tuple of ints, got {expect_shape!r:.40}")
    if expect_shape is not None and tuple(expect_shape) != g.shape:
        raise GoldenError(f"{p}: holds shape {g.shape}, but {tuple(expect_shape)} was expected; regenerate the "
                          "golden if the shape changed on purpose")
    return g



# ---- comparing an array with a golden -------------------------------------------------------------------
_U64_MAX = np.uint64(np.iinfo(np.uint64).max)


class DiffRow(NamedTuple):
    """One differing element: codes of the golden and the array, and how far apart they are."""

    index: tuple[int, ...]
    golden: int
    actual: int
    ulps: int | None  # signed ULP distance actual - golden (-0 and +0 one point); None with a NaN
    kind: str  # "ulps", "signed zero", "NaN payload", "NaN/number"


@dataclass
class GoldenDiff:
    """Result of :func:`compare_golden`; ``str()`` is the report (summary, first and worst elements)."""

    name: str
    format: AnyFormat
    shape: tuple[int, ...]
    problems: list[str]  # format / shape / meta disagreements (codes are not compared on format or shape)
    n_elements: int
    n_differ: int  # elements whose bits differ
    n_fail: int  # of them, those beyond max_ulps (all of them when max_ulps == 0)
    max_distance: int  # largest |ULP distance| among differing elements that are both numbers (0: none)
    n_nan_number: int  # differing elements where one side is NaN and the other a number
    n_nan_payload: int  # both NaN, other bits
    first: list[DiffRow]
    worst: list[DiffRow]
    max_ulps: int = 0

    @property
    def passed(self) -> bool:
        return not self.problems and self.n_fail == 0

    def summary(self) -> str:
        f = self.format.name
        parts = list(self.problems)
        if self.n_differ:
            codes = f"{self.n_differ} of {self.n_elements} {f} elements differ bit-wise (shape {self.shape})"
            if self.max_ulps:
                codes += f", {self.n_fail} by more than max_ulps={self.max_ulps}" if self.n_fail else \
                    f", all within max_ulps={self.max_ulps}"
            parts.append(codes)
            if self.n_nan_number:
                parts.append(f"{self.n_nan_number} NaN where the other holds a number")
            if self.n_nan_payload:
                parts.append(f"{self.n_nan_payload} NaN with another payload")
            if self.n_differ - self.n_nan_number - self.n_nan_payload:
                nans = self.n_nan_number or self.n_nan_payload
                parts.append(f"max ULP distance {self.max_distance}" + (" elsewhere" if nans else ""))
        if not parts:
            return f"Golden match {self.name}: all {self.n_elements} {f} elements bit-identical (shape {self.shape})"
        return f"Golden {'match' if self.passed else 'mismatch'} {self.name}: " + "; ".join(parts)

    def __str__(self) -> str:
        lines = [self.summary()]
        if self.first:
            if len(self.first) >= self.n_fail:
                lines.append(f"differing elements ({self.format.name} codes; ULPs = actual - golden):")
                lines += self._table(self.first)
            else:
                lines.append(f"first {len(self.first)} of {self.n_fail} differing elements, by index "
                             f"({self.format.name} codes; ULPs = actual - golden):")
                lines += self._table(self.first)
                lines.append(f"worst {len(self.worst)} (largest ULP distance):")
                lines += self._table(self.worst)
        return "\n".join(lines)

    def _table(self, rows: list[DiffRow]) -> list[str]:
        f = self.format
        w = hex_width(f)
        vals = decode(np.array([[r.golden, r.actual] for r in rows], f.code_dtype), f)
        shown = [(_value_text(v[0]), _value_text(v[1])) for v in vals]
        head = ("index", "golden", "actual", "golden value", "actual value", "ULPs")
        body = [(str(r.index), f"0x{r.golden:0{w}x}", f"0x{r.actual:0{w}x}", g, a, _ulps_text(r))
                for r, (g, a) in zip(rows, shown)]
        width = [max(len(row[c]) for row in [head, *body]) for c in range(len(head))]
        return ["  " + "  ".join(t.rjust(width[c]) for c, t in enumerate(row)).rstrip() for row in [head, *body]]


def _value_text(v: Any) -> str:
    return repr(float(v)) if isinstance(v, (float, np.floating)) else str(int(v))


def _ulps_text(r: DiffRow) -> str:
    if r.kind == "ulps":
        return f"{r.ulps:+d}"
    return "0 (-0 vs +0)" if r.kind == "signed zero" else r.kind


def _meta_diff(old: Any, new: Any, at: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new)):
            key = f"{at}.{k}" if at else k
            if k not in new:
                out.append(f"{key}: only in the golden ({old[k]!r})")
            elif k not in old:
                out.append(f"{key}: not in the golden (now {new[k]!r})")
            else:
                out += _meta_diff(old[k], new[k], key)
        return out
    return [] if old == new else [f"{at or 'meta'}: golden {old!r}, now {new!r}"]


def compare_golden(golden: Golden, array: Any, *, fmt: Any = None, meta: dict[str, Any] | None = None,
                   max_ulps: int = 0, show: int = 10, name: str | None = None) -> GoldenDiff:
    """Compare ``array`` (or codes with ``fmt=``) with a golden, bit for bit; return a :class:`GoldenDiff`.

    ``max_ulps``: 0 (default) requires identical codes (NaN payloads and the sign of zero included); n > 0
    accepts elements at most n ULPs (:mod:`numoracle.codekeys` keys; -0 and +0 one point) from the golden
    and any NaN where the golden holds a NaN. ``meta``: when given, must equal the golden's meta (as JSON):
    a changed policy or seed is a mismatch even when the codes agree. ``show``: rows per table.
    """
    if not isinstance(golden, Golden):
        raise TypeError(f"golden must be a Golden (from read_golden), got {type(golden).__name__}")
    max_ulps = check_int(max_ulps, "max_ulps", 0, 2**62)
    check_int(show, "show", 0)
    codes, f = golden_codes(array, fmt)
    label = name if name is not None else (str(golden.path) if golden.path is not None else "<golden>")
    g = golden.format
    problems: list[str] = []
    if f != g:
        problems.append(f"format: the golden holds {g.name}, the array is {f.name}")
    if codes.shape != golden.shape:
        problems.append(f"shape: the golden has shape {golden.shape}, the array {codes.shape}")
    if meta is not None:
        changed = _meta_diff(golden.meta, normalize_meta(meta))
        if changed:
            problems.append("meta differs (" + "; ".join(changed) + ")")
    if problems and (f != g or codes.shape != golden.shape):
        return GoldenDiff(label, g, golden.shape, problems, golden.codes.size, 0, 0, 0, 0, 0, [], [], max_ulps)
    ce, ca = golden.codes.reshape(-1).astype(np.uint64), codes.reshape(-1).astype(np.uint64)
    idx = np.flatnonzero(ce != ca)
    e, a = ce[idx], ca[idx]
    ne, na = is_nan(e, g), is_nan(a, g)
    known = ~ne & ~na
    ke, ka = to_key(np.where(known, e, 0), g), to_key(np.where(known, a, 0), g)
    ue, ua = ke.view(np.uint64) ^ np.uint64(1 << 63), ka.view(np.uint64) ^ np.uint64(1 << 63)
    up = ua >= ue
    mag = np.where(up, ua - ue, ue - ua)  # exact in uint64 even across the whole FP64/INT64 range
    if isinstance(g, Format) and g.has_negative_zero:
        mag = np.where(known & ((ke < 0) != (ka < 0)), mag - np.uint64(1), mag)
    mag = np.where(known, mag, np.uint64(0))
    ok = (known & (mag <= np.uint64(max_ulps)) | (ne & na)) if max_ulps else np.zeros(idx.size, bool)
    fails = np.flatnonzero(~ok)
    one_nan = ne != na
    max_distance = int(mag.max()) if idx.size else 0
    rank = np.where(one_nan, _U64_MAX, mag)[fails]
    shape = golden.shape

    def row(j: int) -> DiffRow:
        i = int(idx[j])
        index = tuple(int(t) for t in np.unravel_index(i, shape)) if shape else ()
        if known[j]:
            d = int(mag[j]) if up[j] else -int(mag[j])
            kind = "signed zero" if d == 0 else "ulps"
            return DiffRow(index, int(e[j]), int(a[j]), d, kind)
        return DiffRow(index, int(e[j]), int(a[j]), None, "NaN payload" if ne[j] and na[j] else "NaN/number")

    first = [row(int(j)) for j in fails[:show]]
    order = np.lexsort((fails, _U64_MAX - rank))[:show]
    worst = [row(int(fails[k])) for k in order]
    return GoldenDiff(label, g, shape, problems, int(ce.size), int(idx.size), int(fails.size), max_distance,
                      int(one_nan.sum()), int((ne & na).sum()), first,
                      worst, max_ulps)


def assert_golden(path: str | os.PathLike[str], array: Any, meta: dict[str, Any] | None = None, *, fmt: Any = None,
                  max_ulps: int = 0, update: bool = False, show: int = 10, name: str | None = None,
                  update_hint: str | None = None) -> str:
    """Check ``array`` against the golden file at ``path``, or (``update=True``) write it there.

    Returns "matched" (check), or "created" / "updated" / "unchanged" (update: a golden that already
    holds these codes, format, shape and meta is not rewritten). A missing golden or a mismatch raises
    NumoracleAssertionError (``.report`` is the :class:`GoldenDiff`); a damaged file raises GoldenError.
    ``update_hint`` replaces the default advice on how to (re)create the golden. See :func:`compare_golden`.
    """
    __tracebackhide__ = True
    p = Path(path)
    label = name if name is not None else str(p)
    hint = update_hint or ("if the new result is right, (re)write the golden with numoracle.testing.write_golden, or "
                           "assert_golden(..., update=True)")
    if update:
        codes, f = golden_codes(array, fmt)
        m = normalize_meta(meta)
        if p.exists():
            try:
                old = read_golden(p)
            except GoldenError:
                old = None
            if old is not None and old == Golden(codes, f, m):
                return "unchanged"
        existed = p.exists()
        atomic_write(p, encode_golden(codes, f, m))
        return "updated" if existed else "created"
    if not p.exists():
        raise NumoracleAssertionError(f"golden {label} does not exist ({p}); {hint}")
    diff = compare_golden(read_golden(p), array, fmt=fmt, meta=meta, max_ulps=max_ulps, show=show, name=label)
    if not diff.passed:
        raise NumoracleAssertionError(f"{diff}\n{hint}", diff)
    return "matched"
