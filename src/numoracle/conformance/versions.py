"""The installed version of a compared library, and version ranges ("<0.7", ">=0.5.1,<0.7") matched against it."""

from __future__ import annotations

import re
import sys
from functools import cache

__all__ = ["installed_version", "version_matches", "version_clauses", "version_at_least", "cpu_flags",
           "cpu_matches"]


# ---- library versions ---------------------------------------------------------------------------
@cache
def installed_version(library: str) -> str | None:
    """The installed version of ``library`` (``"0.7.0"``, ``"2.13.0+cpu"``); None where it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(library)
    except PackageNotFoundError:
        mod = sys.modules.get(library)
        v = getattr(mod, "__version__", None)
        return v if isinstance(v, str) else None


def _release(v: str) -> tuple[int, ...]:
    """The release numbers of a version string: ``"2.13.0+cpu"`` -> (2, 13, 0); ``"0.7.0rc1"`` -> (0, 7, 0)."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", v)
    if m is None:
        raise ValueError(f"not a version: {v!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a > b) - (a < b)


_CLAUSE = re.compile(r"(<=|>=|==|!=|<|>)?\s*(\d+(?:\.\d+)*)(\.\*)?")
_OPS = {"<": lambda c: c < 0, "<=": lambda c: c <= 0, ">": lambda c: c > 0, ">=": lambda c: c >= 0,
        "==": lambda c: c == 0, "!=": lambda c: c != 0}


def version_clauses(spec: str) -> list[tuple[str, tuple[int, ...], bool]]:
    """``"<0.7"``, ``">=0.6,<0.7"``, ``"2.13.*"`` -> [(op, release, prefix)]; ``""`` or ``"*"``: no clause."""
    spec = spec.strip()
    if spec in ("", "*"):
        return []
    out = []
    for part in spec.split(","):
        m = _CLAUSE.fullmatch(part.strip())
        if m is None:
            raise ValueError(f"bad version clause {part.strip()!r} in {spec!r}; use e.g. '<0.7', '>=0.5,<0.6', "
                             "'0.6.0' or '2.13.*'")
        out.append((m.group(1) or "==", _release(m.group(2)), m.group(3) is not None))
    return out


def version_matches(clauses: list[tuple[str, tuple[int, ...], bool]], version: str) -> bool:
    v = _release(version)
    for op, ref, prefix in clauses:
        if prefix:
            hit = v[: len(ref)] == ref
            if hit != (op == "=="):
                return False
        elif not _OPS[op](_cmp(v, ref)):
            return False
    return True




def version_at_least(version: str, other: str) -> bool:
    """``version`` is ``other`` or later (release numbers compared; ``"0.7.0+x"`` is 0.7.0)."""
    return _cmp(_release(version), _release(other)) >= 0


# ---- the CPU a library runs on --------------------------------------------------------------------
@cache
def cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags as Linux's /proc/cpuinfo names them ("avx512_fp16", "f16c", ...); None where they
    cannot be read (another system)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return None


def cpu_matches(condition: str) -> bool:
    """Does this machine's CPU meet ``condition``: ``""`` (every CPU) or ``"without FLAG"`` (a CPU whose
    /proc/cpuinfo flags lack FLAG)? True where the flags cannot be read (as for an unknown version)."""
    if not condition:
        return True
    flag = condition.removeprefix("without ").strip()
    flags = cpu_flags()
    return flags is None or flag not in flags
