"""The documentation runs: README.md and docs/*.md.

- ```python blocks of one file run in order, in one namespace (fresh per file);
- ```console blocks hold ``$ numoracle ...`` commands followed by their exact output;
- ```text blocks (and any other language) are not run.
The README's set-up commands are checked against .ci/run, which CI runs on a clean clone.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from numoracle.cli import main

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


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_python_blocks_run(path, capsys):
    code_blocks = blocks(path, "python")
    if not code_blocks:
        pytest.skip(f"{path.name} has no python blocks")
    namespace: dict = {"__name__": f"doc_{path.stem}"}
    for line, code in code_blocks:
        compiled = compile("\n" * (line - 1) + code, str(path), "exec")  # tracebacks point into the file
        exec(compiled, namespace)


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
    assert "pytest -m exhaustive" in readme and "## Benchmarks" in readme


def test_readme_main_job_runs(capsys):
    argv = shlex.split(setup_commands()[0].split("&&", 1)[1])
    assert main(argv[1:]) == 0
    assert "EQUALS int32 -(rne)-> fp16 for every source value" in capsys.readouterr().out


def test_ci_runs_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in script.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "set -euo pipefail"
    assert lines[1] == 'cd "$(dirname "${BASH_SOURCE[0]}")/.."'
    # CI may first install the pinned CPU torch (the test extra pins no torch); then exactly the README's command
    assert all(ln.startswith("pip install ") for ln in lines[2:-2]), lines
    assert " && ".join(lines[-2:]) == setup_commands()[1]
