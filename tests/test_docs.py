"""The documentation runs: README.md and docs/*.md.

- ```python blocks of one file run in order, in one namespace (fresh per file); a block that imports an optional
  package that is not installed (torch, jax, ...) is skipped, with the blocks that use what it defines, and the
  file's test reports the skip ("needs torch ...") after running the others;
- ```console blocks hold ``$ numoracle ...`` commands followed by their exact output;
- ```text blocks (and any other language) are not run.
The README's set-up commands are checked against .ci/run, which CI runs on a clean clone.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from numoracle.cli import main
from optional import OPTIONAL, available, reason

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


def blocks(path: Path, lang: str) -> list[tuple[int, str]]:
    """(first line number, code) of every fenced block of ``lang`` in the file."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(2)) + 1, m.group(2)) for m in FENCE.finditer(text) if m.group(1) == lang]


def test_docs_exist():
    names = [p.relative_to(ROOT).as_posix() for p in DOCS]
    assert {"README.md", "docs/formats.md", "docs/semantics.md"} <= set(names)
    assert blocks(ROOT / "README.md", "python") and blocks(ROOT / "docs/formats.md", "python")


def _catches_import_error(node: ast.Try) -> bool:
    names = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
    for h in node.handlers:
        types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        if h.type is None or any(isinstance(t, ast.Name) and t.id in names for t in types):
            return True
    return False


def optional_imports(tree: ast.AST) -> set[str]:
    """Optional packages a block imports anywhere (in a function body too), except under a try that catches
    ImportError (the block then runs without them)."""
    guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) and _catches_import_error(t)
               for stmt in t.body for n in ast.walk(stmt)}
    found = set()
    for n in ast.walk(tree):
        if id(n) in guarded:
            continue
        if isinstance(n, ast.Import):
            found |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            found.add(n.module.split(".")[0])
    return found & set(OPTIONAL)


def _bound_names(tree: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return out


def _used_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_python_blocks_run(path, capsys):
    code_blocks = blocks(path, "python")
    if not code_blocks:
        pytest.skip(f"{path.name} has no python blocks")
    namespace: dict = {"__name__": f"doc_{path.stem}"}
    skipped: list[tuple[int, str]] = []  # (line, missing package) of the blocks not run
    unavailable: set[str] = set()  # names that only skipped blocks define
    for line, code in code_blocks:
        tree = ast.parse(code)
        missing = sorted(p for p in optional_imports(tree) if not available(p))
        if not missing and _used_names(tree) & unavailable:  # uses what a skipped block would have defined
            missing = [skipped[-1][1]]
        if missing:
            skipped.append((line, missing[0]))
            unavailable |= _bound_names(tree)
            continue
        compiled = compile("\n" * (line - 1) + code, str(path), "exec")  # tracebacks point into the file
        try:
            exec(compiled, namespace)
        except ModuleNotFoundError as e:  # an optional package imported by numoracle on the block's behalf
            top = (e.name or "").split(".")[0]
            if top not in OPTIONAL or available(top):
                raise
            skipped.append((line, top))
            unavailable |= _bound_names(tree)
            continue
        unavailable -= _bound_names(tree)  # defined again by a block that ran
    if skipped:
        lines = ", ".join(str(ln) for ln, _ in skipped)
        pytest.skip(f"{reason(skipped[0][1])}: {path.name} blocks at lines {lines} not run, the others passed")


def console_examples(path: Path) -> list[tuple[int, str, str]]:
    """(line, command, expected output) for each ``$ numoracle ...`` line of the console blocks."""
    out = []
    for line, code in blocks(path, "console"):
        parts = re.split(r"^\$ ", code, flags=re.M)
        assert parts[0] == "", f"{path.name}:{line}: a console block starts with a $ command"
        for part in parts[1:]:
            cmd, _, expected = part.partition("\n")
            out.append((line, cmd, expected))
    return out


CONSOLE = [(p, *ex) for p in DOCS for ex in console_examples(p)]


@pytest.mark.parametrize(("path", "line", "cmd", "expected"), CONSOLE,
                         ids=[f"{p.name}:{ln}" for p, ln, *_ in CONSOLE])
def test_console_blocks_show_the_real_output(capsys, path, line, cmd, expected):
    argv = shlex.split(cmd)
    assert argv[0] == "numoracle", f"{path.name}:{line}: only numoracle commands are checked"
    assert main(argv[1:]) == 0
    got = capsys.readouterr().out
    assert got.rstrip("\n") == expected.rstrip("\n"), f"{path.name}:{line}: `{cmd}` prints something else now"


def setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Set up", 1)[1].split("\n## ", 1)[0]
    (_, code), = [(m.group(1), m.group(2)) for m in FENCE.finditer(section) if m.group(1) == "bash"]
    return [ln.strip() for ln in code.splitlines() if ln.strip()]


def test_readme_has_exactly_two_setup_commands():
    install_run, install_test = setup_commands()
    assert install_run == "pip install . && numoracle chain int32 fp32 fp16"
    assert install_test == 'pip install -e ".[test]" && python -m pytest'  # the checkout's src/ is tested
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pytest -m exhaustive" in readme and "docs/performance.md" in readme
    assert len(readme.splitlines()) <= 150, "README.md is for a first read: details go to docs/"


def test_readme_main_job_runs(capsys):
    argv = shlex.split(setup_commands()[0].split("&&", 1)[1])
    assert main(argv[1:]) == 0
    assert "EQUALS int32 -(rne)-> fp16 for every source value" in capsys.readouterr().out


def test_ci_runs_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in script.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "set -euo pipefail"
    assert lines[1] == 'cd "$(dirname "${BASH_SOURCE[0]}")/.."'
    # CI's own environment comes last: it may first install the pinned CPU torch (the test extra pins no torch)
    # and the docs extra; then exactly the README's command
    main = lines.index('pip install "torch==2.13.0"')
    assert all(ln.startswith("pip install ") for ln in lines[main:-2]), lines
    assert " && ".join(lines[-2:]) == setup_commands()[1]


def test_ci_tests_the_declared_lower_bounds_before_the_main_run():
    """The oldest environment is built from pyproject's lower bounds (not a copy of them), and fails CI when
    its pytest fails or collects nothing (exit 5)."""
    import importlib.util

    import tomllib

    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    spec = importlib.util.spec_from_file_location("lower_bounds", ROOT / ".ci" / "lower_bounds.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = mod.lower_bounds(project)
    assert {p.split("==")[0] for p in pins} == {"numpy", "ml_dtypes", "mpmath", "tqdm", "hypothesis"}
    for p in pins:
        name, version = p.split("==")
        assert any(r.replace(" ", "") == f"{name}>={version}" for r in
                   project["dependencies"] + project["optional-dependencies"]["test"]), p
    assert 'pins="$(python .ci/lower_bounds.py)"' in script and 'printf \'%s\\n\' $pins > "$constraints"' in script
    assert '"$oldest/bin/pip" install -c "$constraints" -e ".[test]"' in script   # the whole test extra, pinned
    assert '"$oldest/bin/python" -m pytest || rc=$?' in script   # the whole default tier, as the README runs it
    assert script.index('"$oldest/bin/python" -m pytest') < script.index('pip install "torch==2.13.0"')
    assert 'if [ "$rc" -eq 5 ]' in script and 'exit "$rc"' in script
