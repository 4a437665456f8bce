"""Golden files on disk: strict header fields, JSON-only meta, atomic writes through symlinks, leftover temps.

* :func:`check_header` validates every header field by type and range before anything uses it
  (``"signed": "false"`` or ``"bias": "7"`` are refused, not coerced; shapes are bounded so that
  no size can overflow); :func:`load_header` parses the JSON with nesting refused past
  :data:`MAX_DEPTH` (no RecursionError).
* :func:`write_target` resolves symlinks: writing through a link replaces its target, not the link.
* Writers name their temp files ``.<name>.numoracle-<host>-<pid>-<random>.tmp``;
  :func:`clean_stale_temps` (called on every write) removes those of this host whose writer
  process is gone (killed mid-write), in the directory written to.
* :func:`atomic_write` writes a temp file, fsyncs it and renames it over the target (a reader sees the old
  file or the new one, never a torn one); :func:`normalize_meta` keeps meta to JSON values.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["normalize_meta", "atomic_write", "file_path", "file_mode", "check_header", "load_header",
           "write_target", "temp_prefix", "clean_stale_temps", "MAX_DEPTH",
           "MAX_DIMS", "MAX_SIZE"]

MAX_DEPTH = 64  # nesting of the header's JSON (meta included)
MAX_DIMS = 32  # numpy's own limit is 64
MAX_SIZE = 1 << 62  # elements of one golden (and each dimension)
_TEMP = re.compile(r"^\..+\.numoracle-(?P<host>[^/]+)-(?P<pid>\d+)-[a-z0-9_]+\.tmp$")


def _depth_ok(text: str) -> bool:
    """Whether the JSON text nests brackets at most MAX_DEPTH deep (strings skipped)."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def load_header(text: str) -> Any:
    """The header's JSON value; ValueError for invalid JSON or nesting past MAX_DEPTH."""
    if not _depth_ok(text):
        raise ValueError(f"it nests deeper than {MAX_DEPTH} levels")
    return json.loads(text)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_header(h: Any) -> str | None:
    """What is wrong with a decoded header's fields (types and ranges), or None when they are valid."""
    if not isinstance(h, dict):
        return f"the header is a {type(h).__name__}, not a JSON object"
    if not _is_int(h.get("nbytes")) or not 0 <= h["nbytes"] <= MAX_SIZE * 8:
        return f"nbytes {h.get('nbytes')!r} is not a byte count"
    name, spec = h.get("format"), h.get("format_spec")
    if not isinstance(name, str) or not 0 < len(name) <= 64:
        return f"the format fields are damaged: format {name!r} is not a format name"
    if not isinstance(spec, dict):
        return f"the format fields are damaged: format_spec {spec!r} is not an object"
    kind = spec.get("kind")
    if kind == "int":
        want = {"kind": str, "bits": int, "signed": bool}
    elif kind == "float":
        want = {"kind": str, "exp_bits": int, "man_bits": int, "bias": int, "signed": bool, "nan": str,
                "has_inf": bool, "has_subnormals": bool}
    else:
        return f"the format fields are damaged: format_spec kind {kind!r} is neither 'int' nor 'float'"
    if set(spec) != set(want):
        return f"invalid fields: format_spec has the fields {sorted(spec)}, not {sorted(want)}"
    for k, t in want.items():
        v = spec[k]
        if (t is int and not _is_int(v)) or (t is not int and not isinstance(v, t)):
            return f"invalid fields: format_spec {k} is {v!r} ({type(v).__name__}), not {t.__name__}"
        if t is int and not -(1 << 16) <= v <= (1 << 16):
            return f"invalid fields: format_spec {k} = {v} is out of range"
    shape = h.get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(_is_int(n) and 0 <= n <= MAX_SIZE
                                                                      for n in shape):
        return f"shape {shape!r} is not a list of sizes (at most {MAX_DIMS}, each <= 2^62)"
    size = 1
    for n in shape:
        size *= n
    if size > MAX_SIZE:
        return f"shape {shape!r} has more than 2^62 elements"
    if not isinstance(h.get("meta"), dict):
        return f"meta {h.get('meta')!r} is not a JSON object"
    for k in ("byte_order", "code_dtype"):
        if not isinstance(h.get(k), str):
            return f"{k} {h.get(k)!r} is not a string"
    return None


def write_target(path: Path) -> Path:
    """The file a write to ``path`` must replace: the final target when ``path`` is a symlink."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def temp_prefix(path: Path) -> str:
    return f".{path.name}.numoracle-{socket.gethostname()}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # someone else's live process
    return True


def clean_stale_temps(directory: Path) -> list[Path]:
    """Remove temp files of killed writers (this host, writer pid gone) in ``directory``; return them."""
    host, gone = socket.gethostname(), []
    try:
        names = os.listdir(directory)
    except OSError:
        return gone
    for n in names:
        m = _TEMP.match(n)
        if m and m["host"] == host and int(m["pid"]) != os.getpid() and not _pid_alive(int(m["pid"])):
            p = directory / n
            with contextlib.suppress(OSError):
                p.unlink()
                gone.append(p)
    return gone


def file_mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = file_mode(path)
    clean_stale_temps(path.parent)  # temp files of writers killed mid-write
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError, AttributeError):  # make the rename durable (POSIX; not on Windows)
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def file_path(path: Any) -> Path:
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise TypeError(f"path must be a file path (str or os.PathLike), got {type(path).__name__} {path!r:.40}")
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"path {str(p)!r} is a directory; give the golden file's path")
    return p


# ---- meta: JSON values only ----------------------------------------------------------------
def _check_json(x: Any, where: str, path: list[int]) -> None:
    if x is None or isinstance(x, (bool, int, str)):
        return
    if isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            raise ValueError(f"meta{where} is {x!r}; JSON has no NaN/inf: store it as a string ({str(x)!r})")
        return
    if isinstance(x, (dict, list, tuple)):
        if id(x) in path:
            raise ValueError(f"meta{where} contains itself; golden meta must be a tree of JSON values")
        path.append(id(x))
        if isinstance(x, dict):
            for k, v in x.items():
                if not isinstance(k, str):
                    raise TypeError(f"meta{where} has the key {k!r} ({type(k).__name__}); JSON keys are strings: "
                                    f"use {str(k)!r}")
                _check_json(v, f"{where}[{k!r}]", path)
        else:
            for i, v in enumerate(x):
                _check_json(v, f"{where}[{i}]", path)
        path.pop()
        return
    raise TypeError(f"meta{where} is a {type(x).__module__}.{type(x).__qualname__} ({x!r:.60}); golden meta holds "
                    "JSON values only (dict with str keys, list, str, int, finite float, bool, None): convert it, "
                    "e.g. fmt.name, str(rounding), float(x), arr.tolist()")


def normalize_meta(meta: Any) -> dict[str, Any]:
    """``meta`` checked to be a JSON object and normalised as it reads back (tuples become lists)."""
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict (a JSON object) or None, got {type(meta).__name__}")
    _check_json(meta, "", [])
    return json.loads(json.dumps(meta, allow_nan=False, sort_keys=True))
