"""numoracle's pytest plugin: active once numoracle is installed (entry point ``pytest11``), no conftest needed.

Failure reports
    A failing numoracle ``assert_*`` helper (``assert_matmul_close``, ``assert_chain_equivalent``, the
    golden checks, and any helper raising :class:`numoracle.testing.NumoracleAssertionError`) shows as the
    line of the test that called it followed by its report (summary, worst elements, ULP distances, hex
    codes for bit-level mismatches): numoracle's own frames are cut from the traceback (``--fulltrace``
    keeps them). ``assert a == b`` on two numoracle objects of one type (reports, verdicts) explains
    the difference as a diff of their texts.

Levels
    ``--numoracle-level=fast|full`` (ini option ``numoracle_level``; default fast) sets how deep checks
    go. Fixtures: ``numoracle_level`` ("fast"/"full") and ``sweep_inputs`` ("boundary" at fast,
    "full" at full, i.e. every code of sources up to 32 bits and the boundary values of wider ones:
    pass it to ``numoracle.conformance.sweep(..., inputs=sweep_inputs)``). Tests marked
    ``@pytest.mark.numoracle_full`` are skipped unless the level is full.

Goldens
    The ``golden`` fixture (alias ``numoracle_golden``): ``golden.check(name, array, meta=None, *,
    fmt=None, max_ulps=0)`` compares ``array`` bit for bit with ``<test file dir>/goldens/<name>.golden``
    (another directory with ``--numoracle-goldens DIR``). ``--numoracle-update-goldens`` writes missing
    goldens and rewrites changed ones (the test then passes, and the terminal summary lists what was
    written). A missing golden fails with the command that creates it; a mismatch fails with the
    bit-level report of :func:`numoracle.testing.compare_golden`; a damaged file fails with a GoldenError.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import os
import re
import shlex
import sys
from collections.abc import Generator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

__all__ = ["GoldenFixture", "LEVELS", "SWEEP_INPUTS"]

LEVELS = ("fast", "full")
SWEEP_INPUTS = {"fast": "boundary", "full": "full"}  # "full": every code of sources up to 32 bits
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the numoracle package
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*")
_LEVEL_KEY = pytest.StashKey[str]()
_LOG_KEY = pytest.StashKey["_GoldenLog"]()


# ---- options, markers, header ---------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("numoracle", "numoracle (numerics oracle) checks")
    group.addoption("--numoracle-level", dest="numoracle_level", choices=LEVELS, default=None,
                    help="how deep numoracle checks go: fast (boundary sweeps; default) or full (exhaustive "
                         "sweeps, and tests marked numoracle_full run). Ini option: numoracle_level.")
    group.addoption("--numoracle-goldens", dest="numoracle_goldens", metavar="DIR", default=None,
                    help="directory of the golden fixture's files (default: goldens/ beside each test file)")
    group.addoption("--numoracle-update-goldens", dest="numoracle_update_goldens", action="store_true",
                    default=False, help="write missing golden files and rewrite changed ones instead of failing")
    parser.addini("numoracle_level", "numoracle check depth: fast or full (--numoracle-level overrides)",
                  default="fast")


def _level(config: pytest.Config) -> str:
    opt = config.getoption("numoracle_level", None)
    level = str(opt if opt is not None else config.getini("numoracle_level") or "fast").strip().lower()
    if level not in LEVELS:
        raise pytest.UsageError(f"numoracle_level = {level!r} in the ini file; use one of: {', '.join(LEVELS)}")
    return level


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "numoracle_full: a long numoracle check; runs only with "
                            "--numoracle-level=full (skipped at the default level, fast)")
    config.stash[_LEVEL_KEY] = _level(config)
    config.stash[_LOG_KEY] = _GoldenLog()


def pytest_report_header(config: pytest.Config) -> str:
    parts = [f"numoracle: level={config.stash[_LEVEL_KEY]}"]
    if config.getoption("numoracle_goldens", None):
        parts.append(f"goldens={_goldens_dir(config)}")
    if config.getoption("numoracle_update_goldens", False):
        parts.append("updating goldens")
    return ", ".join(parts)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.stash[_LEVEL_KEY] == "full":
        return
    skip = pytest.mark.skip(reason="numoracle_full: runs with --numoracle-level=full (the level is fast)")
    for item in items:
        if item.get_closest_marker("numoracle_full") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def numoracle_level(pytestconfig: pytest.Config) -> str:
    """The numoracle check depth of this run: "fast" (default) or "full" (``--numoracle-level``)."""
    return pytestconfig.stash[_LEVEL_KEY]


@pytest.fixture(scope="session")
def sweep_inputs(numoracle_level: str) -> str:
    """The ``inputs=`` of ``numoracle.conformance.sweep`` for this level: "boundary" (fast) or "full" (full)."""
    return SWEEP_INPUTS[numoracle_level]


# ---- failure reports --------------------------------------------------------------------------------
def _in_numoracle(tb: TracebackType) -> bool:
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PKG_DIR)


def _is_report_failure(exc: BaseException, last: TracebackType) -> bool:
    """A failure numoracle reports in its message: its own assertion errors, goldens that cannot be trusted."""
    errors, golden = sys.modules.get("numoracle.core.errors"), sys.modules.get("numoracle.testing.golden")
    if errors is not None and isinstance(exc, errors.NumoracleAssertionError):
        return True
    if golden is not None and isinstance(exc, golden.GoldenError):
        return True
    return isinstance(exc, AssertionError) and last.tb_frame.f_code.co_name.startswith("assert_")


def _prune(call: pytest.CallInfo[None]) -> bool:
    """Cut numoracle's frames off the end of the traceback of a numoracle failure (its report says it all).

    ``call.excinfo`` gets a copy of the traceback that stops at the last frame outside numoracle (the
    exception's own ``__traceback__`` is left alone). Returns whether the failure is an assertion whose
    message is the whole report.
    """
    excinfo = call.excinfo
    assert excinfo is not None
    raw: list[TracebackType] = []
    tb: TracebackType | None = excinfo.tb
    while tb is not None:
        raw.append(tb)
        tb = tb.tb_next
    if len(raw) < 2 or not _in_numoracle(raw[-1]) or not _is_report_failure(excinfo.value, raw[-1]):
        return False
    keep = len(raw)
    while keep > 1 and _in_numoracle(raw[keep - 1]):
        keep -= 1
    new: TracebackType | None = None
    for t in reversed(raw[:keep]):
        new = TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    assert new is not None
    call.excinfo = pytest.ExceptionInfo.from_exc_info((excinfo.type, excinfo.value, new))
    return isinstance(excinfo.value, AssertionError)


def _type_label(exc: BaseException) -> str:
    cls = type(exc)
    mod = cls.__module__
    return (cls.__qualname__ if mod in ("builtins", "__main__") else f"{mod}.{cls.__qualname__}") + ": "


def _show_report_only(rep: pytest.TestReport, exc: BaseException) -> None:
    """Drop the exception's type name before its report, in the E lines and in the short summary line.

    ``numoracle.testing.NumoracleAssertionError: Matmul mismatch: ...`` becomes ``Matmul mismatch: ...``;
    the location line under the report still names the exception type.
    """
    label = _type_label(exc)
    longrepr = rep.longrepr
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message.startswith(label):
        crash.message = crash.message[len(label):].lstrip("\n") or crash.message
    entries = getattr(getattr(longrepr, "reprtraceback", None), "reprentries", None)
    if not entries or not isinstance(getattr(entries[-1], "lines", None), list):
        return
    lines = entries[-1].lines
    for i, line in enumerate(lines):
        body = line[1:].lstrip(" ") if line.startswith("E ") else None
        if body is not None and body.startswith(label):
            rest = body[len(label):]
            if rest:
                lines[i] = line[:len(line) - len(body)] + rest
            else:
                del lines[i]
            return


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    report_only = False
    if call.excinfo is not None and not item.config.getoption("fulltrace", False):
        try:
            report_only = _prune(call)
        except Exception:  # never let the report's cosmetics hide the failure itself
            report_only = False
    outcome = yield
    if report_only and call.excinfo is not None:
        try:
            _show_report_only(outcome.get_result(), call.excinfo.value)
        except Exception:
            pass


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> list[str] | None:
    """``assert a == b`` for two numoracle objects of one type: a diff of their texts (or of their fields)."""
    cls = type(left)
    if op != "==" or cls is not type(right) or not cls.__module__.startswith("numoracle."):
        return None
    try:
        a, b = str(left).splitlines(), str(right).splitlines()
        name = cls.__name__
        head = f"<{name}: {(a or [''])[0]:.70}> == <{name}: {(b or [''])[0]:.70}>"
        if a != b:
            diff = list(difflib.unified_diff(a, b, "left", "right", n=1, lineterm=""))[2:]
            return [head, f"two {name} objects differ (- left, + right):", *diff]
        if dataclasses.is_dataclass(left):
            out = [head, f"two {name} objects with the same text differ in fields:"]
            for f in dataclasses.fields(left):
                x, y = getattr(left, f.name), getattr(right, f.name)
                same = _same(x, y)
                if not same:
                    out.append(f"  {f.name}: {x!r:.200} != {y!r:.200}")
            return out if len(out) > 2 else None
    except Exception:
        return None
    return None


def _same(x: Any, y: Any) -> bool:
    import numpy as np

    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return bool(np.array_equal(x, y))
    try:
        return bool(x == y)
    except Exception:
        return x is y


# ---- goldens --------------------------------------------------------------------------------------------
class _GoldenLog:
    """What ``--numoracle-update-goldens`` did this session: path -> (test, sha256 of the file, action)."""

    def __init__(self) -> None:
        self.entries: dict[Path, tuple[str, str, str]] = {}


def _goldens_dir(config: pytest.Config) -> Path | None:
    opt = config.getoption("numoracle_goldens", None)
    if not opt:
        return None
    p = Path(os.path.expanduser(opt))
    return p if p.is_absolute() else Path(config.invocation_params.dir) / p


class GoldenFixture:
    """The ``golden`` fixture: check arrays against golden files, or write them with --numoracle-update-goldens."""

    def __init__(self, directory: Path, update: bool, nodeid: str, log: _GoldenLog, root: Path) -> None:
        self.directory = directory
        self.update = update
        self.nodeid = nodeid
        self._log = log
        self._root = root

    def __repr__(self) -> str:
        mode = "updating" if self.update else "checking"
        return f"<golden fixture {mode} {self._shown(self.directory)}/>"

    def path(self, name: str) -> Path:
        """The file of golden ``name``: ``<directory>/<name>.golden`` (names: letters, digits, ``_.-``, ``/``)."""
        if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name.split("/"):
            raise ValueError(f"golden name {name!r}: use letters, digits, '_', '.', '-' and '/' for subdirectories "
                             "(a relative path inside the goldens directory, e.g. 'matmul/bf16_k4096')")
        from .golden import GOLDEN_SUFFIX

        return self.directory / (name if name.endswith(GOLDEN_SUFFIX) else name + GOLDEN_SUFFIX)

    def _shown(self, p: Path) -> str:
        try:
            return p.relative_to(self._root).as_posix()
        except ValueError:
            return str(p)

    def read(self, name: str) -> Any:
        """The :class:`numoracle.testing.Golden` stored under ``name``."""
        from .golden import read_golden

        return read_golden(self.path(name))

    def check(self, name: str, array: Any, meta: dict[str, Any] | None = None, *, fmt: Any = None,
              max_ulps: int = 0, show: int = 10) -> None:
        """Compare ``array`` with golden ``name`` bit for bit (``max_ulps`` > 0: within that many ULPs).

        ``meta``: a JSON dict recorded with the golden (policy, seed ...); when given it must match the
        stored one. ``fmt``: when ``array`` holds integer codes of that format. With
        ``--numoracle-update-goldens`` the golden is written instead (when missing or different).
        """
        __tracebackhide__ = True
        from ..core.errors import NumoracleAssertionError
        from .golden import GoldenError, assert_golden, encode_golden, golden_codes, normalize_meta

        p = self.path(name)
        shown = self._shown(p)
        cmd = f"pytest --numoracle-update-goldens {shlex.quote(self.nodeid)}"
        if not self.update:
            missing = f"create it: run {cmd}, check the new file and commit it"
            changed = f"if the new result is right, rewrite the golden: {cmd}"
            if not p.exists():
                raise NumoracleAssertionError(f"golden {name!r} does not exist ({shown}); {missing}")
            try:
                assert_golden(p, array, meta, fmt=fmt, max_ulps=max_ulps, show=show, name=f"{name!r} ({shown})",
                              update_hint=changed)
            except GoldenError as e:
                raise GoldenError(f"{e}\nto rewrite it from this test: {cmd}") from None
            return
        codes, f = golden_codes(array, fmt)
        digest = hashlib.sha256(encode_golden(codes, f, normalize_meta(meta))).hexdigest()
        prior = self._log.entries.get(p)
        if prior is not None and prior[1] != digest:
            raise NumoracleAssertionError(
                f"golden {name!r} ({shown}) was already written in this run by {prior[0]} with other contents; "
                "two checks cannot share one golden: give them different names")
        action = assert_golden(p, codes, meta, fmt=f, update=True)
        if prior is None:
            self._log.entries[p] = (self.nodeid, digest, action)


@pytest.fixture
def numoracle_golden(request: pytest.FixtureRequest) -> GoldenFixture:
    """Check arrays against golden files: ``numoracle_golden.check(name, array, meta=None)`` (see GoldenFixture).

    Also available as ``golden`` (use this name where another plugin defines a ``golden`` fixture).
    """
    config = request.config
    directory = _goldens_dir(config) or Path(request.path).parent / "goldens"
    return GoldenFixture(directory, bool(config.getoption("numoracle_update_goldens", False)), request.node.nodeid,
                         config.stash[_LOG_KEY], Path(config.rootpath))


@pytest.fixture
def golden(numoracle_golden: GoldenFixture) -> GoldenFixture:
    """Check arrays against golden files: ``golden.check(name, array, meta=None)`` (see GoldenFixture)."""
    return numoracle_golden


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    log = config.stash.get(_LOG_KEY, None)
    if log is None or not config.getoption("numoracle_update_goldens", False):
        return
    entries = log.entries
    counts = {a: sum(1 for *_, x in entries.values() if x == a) for a in ("created", "updated", "unchanged")}
    terminalreporter.write_sep("-", "numoracle goldens")
    for p, (nodeid, _, action) in sorted(entries.items()):
        if action != "unchanged":
            try:
                shown = p.relative_to(config.rootpath).as_posix()
            except ValueError:
                shown = str(p)
            terminalreporter.write_line(f"{action} {shown} ({nodeid})")
    terminalreporter.write_line(", ".join(f"{n} {a}" for a, n in counts.items()) + " golden file(s); review and "
                                "commit them")
