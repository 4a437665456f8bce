"""Print pyproject's lower bounds as exact pins (``numpy>=1.24`` -> ``numpy==1.24``), space-separated.

The runtime dependencies and, from the test extra, hypothesis: the versions whose oldest releases .ci/run
tests; a dependency declared with an environment marker (numba, on the platforms it has wheels for) is left to
the resolver. Needs Python 3.11 (tomllib).
"""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
FROM_TEST_EXTRA = ("hypothesis",)
_BOUND = re.compile(r"([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9.]*)")


def lower_bounds(project: dict) -> list[str]:
    reqs = list(project["dependencies"]) + [r for r in project["optional-dependencies"]["test"]
                                            if re.split(r"[<>=!~ ]", r, maxsplit=1)[0] in FROM_TEST_EXTRA]
    pins = []
    for r in reqs:
        if ";" in r:            # a dependency of some platforms only (numba, where it has wheels): not pinned
            continue
        m = _BOUND.fullmatch(r.strip())
        if m is None:
            raise SystemExit(f"pyproject.toml: {r!r} has no plain lower bound (NAME>=VERSION) to test")
        pins.append(f"{m.group(1)}=={m.group(2)}")
    return pins


if __name__ == "__main__":
    with open(ROOT / "pyproject.toml", "rb") as f:
        print(" ".join(lower_bounds(tomllib.load(f)["project"])))
