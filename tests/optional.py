"""The suite's optional packages: one way to skip a test without one, with one reason string.

``needs("torch")`` imports and returns the package (or one of its modules: ``needs("jax", "jax.numpy")``),
or skips the calling test with ``reason("torch")``; ``requires("torch")`` is the same as a mark, for
parametrized cases. ``tests/conftest.py`` counts the skips per package from that reason.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
from types import ModuleType

import pytest

# the optional packages whose absence skips tests (tests/conftest.py counts the skips of each)
OPTIONAL = ("torch", "jax", "numba", "mkdocs", "mkdocstrings", "material", "matplotlib", "distributed", "grimp",
            "softfloatpy", "mypy", "hatchling")
# pip install arguments where the package name alone is not what to install
_PIP = {
    "torch": "torch --index-url https://download.pytorch.org/whl/cpu",
    "mkdocs": '-e ".[docs]"',
    "mkdocstrings": '-e ".[docs]"',
    "material": '-e ".[docs]"',
}
_REASON = re.compile(r"^needs ([A-Za-z_][\w]*) ")
# skip reasons not made by reason(): pytest.importorskip's own, and hand-written ones ("... needs grimp: ...")
_OTHER_REASONS = re.compile(r"(?:could not import|No module named) '?([A-Za-z_]\w*)|\bneeds ([A-Za-z_]\w*)")


def install(name: str) -> str:
    """What to give ``pip install`` for the optional package ``name``."""
    return _PIP.get(name, name)


def reason(name: str) -> str:
    """The skip reason for a missing optional package ``name`` (what :func:`missing_from` reads back)."""
    return f"needs {name} (not installed: pip install {install(name)})"


def missing_from(text: str) -> str | None:
    """The package a skip reason made by :func:`reason` names, None for any other text."""
    m = _REASON.match(text)
    return m.group(1) if m else None


def skipped_for(text: str) -> str | None:
    """The optional package a skip reason says is missing (None: skipped for another reason)."""
    text = text.removeprefix("Skipped: ")
    name = missing_from(text)
    if name is None:
        m = _OTHER_REASONS.search(text)
        name = next((g for g in m.groups() if g), None) if m else None
    return name if name in OPTIONAL else None


def available(name: str) -> bool:
    """True when the top-level package ``name`` can be imported (it is not imported here)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def needs(name: str, module: str | None = None) -> ModuleType:
    """``module`` (default: ``name``) of the optional package ``name``; skips the test where it is missing.

    An installed package that fails to import is an error, not a skip.
    """
    if not available(name):
        pytest.skip(reason(name))
    return importlib.import_module(module or name)


def kernels() -> ModuleType:
    """numba, for a test about the compiled kernels (also at a module's top): skips where numba is missing
    (``reason("numba")``) or where ``NUMORACLE_JIT=0`` turns the kernels off (the test would compare numpy
    with itself, or count kernel runs that cannot happen)."""
    if not available("numba"):
        pytest.skip(reason("numba"), allow_module_level=True)
    if os.environ.get("NUMORACLE_JIT", "") == "0":
        pytest.skip("the compiled kernels are turned off here (NUMORACLE_JIT=0)", allow_module_level=True)
    return importlib.import_module("numba")


def requires(name: str) -> pytest.MarkDecorator:
    """A skip mark for tests (or parametrized cases) that need the optional package ``name``."""
    return pytest.mark.skipif(not available(name), reason=reason(name))


def torch_on_amd(version: str = "2.13.0+cpu") -> ModuleType:
    """torch, where the live kernel is the one a recording was made with: torch ``version`` on an AMD CPU (MKL
    picks its kernels by CPU vendor); skips the test elsewhere."""
    torch = needs("torch")
    try:
        with open("/proc/cpuinfo") as f:
            amd = "AuthenticAMD" in f.read()
    except OSError:
        amd = False
    if torch.__version__ != version or not amd:
        pytest.skip(f"the recording's torch {version} on an AMD CPU; here torch {torch.__version__}"
                    f"{'' if amd else ', not an AMD CPU'}")
    return torch
