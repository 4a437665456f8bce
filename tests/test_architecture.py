"""The package's shape: one-way layers, no import circles, no private names across subpackages.

The import graph comes from grimp (every import statement, function-level ones included). The layer rule leaves
TYPE_CHECKING imports out (they never run); the circle rule counts them (an annotation is a dependency too).
The layer rule is the one docs/architecture.md states.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp", reason="the architecture test needs grimp: pip install grimp")

PKG = "numoracle"
SRC = Path(__file__).resolve().parents[1] / "src" / PKG

# Bottom to top; subpackages in one layer are independent of each other.
LAYERS = [
    ("core",),
    ("chains", "exact", "models"),
    ("bounds", "identify", "reveal"),
    ("quant", "conformance", "plot", "composite"),
    ("testing", "tables"),
    ("invariance",),
    ("cli",),
]
LEVEL = {name: i for i, names in enumerate(LAYERS) for name in names}


def _room(module: str) -> str | None:
    """The subpackage a module lives in; None for the package's own top-level modules (the facade)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LEVEL else None


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph(PKG, exclude_type_checking_imports=True)


@pytest.fixture(scope="module")
def full_graph():
    """Every import, annotation-only (TYPE_CHECKING) ones included: a circle there is a circle of concepts."""
    return grimp.build_graph(PKG, exclude_type_checking_imports=False)


def _edges(graph):
    for m in sorted(graph.modules):
        for t in sorted(graph.find_modules_directly_imported_by(m)):
            if t.startswith(PKG):
                yield m, t


def test_every_subpackage_has_a_layer():
    rooms = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == set(LEVEL), \
        f"add the new subpackage to LAYERS here and in docs/architecture.md: {rooms ^ set(LEVEL)}"


def test_no_import_goes_up_or_sideways(graph):
    bad = []
    for m, t in _edges(graph):
        a, b = _room(m), _room(t)
        if a is None or b is None or a == b:
            if a is not None and b is None:
                bad.append(f"{m} -> {t} (a subpackage imports the top-level facade)")
            continue
        if LEVEL[b] >= LEVEL[a]:
            bad.append(f"{m} -> {t} ({a} is layer {LEVEL[a]}, {b} is layer {LEVEL[b]})")
    assert not bad, "imports must only go down the layers:\n" + "\n".join(bad)


def test_no_import_circles(full_graph):
    sorter = graphlib.TopologicalSorter()
    for m in full_graph.modules:
        sorter.add(m)
    for m, t in _edges(full_graph):
        if t != m and not m.startswith(t + "."):  # a module importing its own package's __init__ is no circle
            sorter.add(m, t)
    try:
        sorter.prepare()
    except graphlib.CycleError as e:
        pytest.fail(f"import circle: {' -> '.join(e.args[1])}")


def _imported_names(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield node, alias.name


def _resolve(module: str, node: ast.ImportFrom, is_pkg: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def test_no_private_name_crosses_a_subpackage():
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        is_pkg = rel.name == "__init__"
        module = ".".join(rel.parts[:-1] if is_pkg else rel.parts)
        for node, name in _imported_names(path):
            target = _resolve(module, node, is_pkg)
            if not target.startswith(PKG) or not name.startswith("_") or name.startswith("__"):
                continue
            if _room(module) != _room(target):
                bad.append(f"{module}:{node.lineno} imports {name} from {target}")
    assert not bad, "a private name is used outside its subpackage (make it public there):\n" + "\n".join(bad)


def test_modules_hold_one_concept():
    """A module is one concept, however long; one of more than 800 lines has almost always grown a second."""
    big = [f"{p.relative_to(SRC)}: {n} lines" for p in sorted(SRC.rglob("*.py"))
           if (n := len(p.read_text().splitlines())) > 800]
    assert not big, "modules over 800 lines (do they hold two concepts? split by concept, not by size):\n" + \
        "\n".join(big)


# round_pack's numbered steps are one unit on purpose (docs/architecture.md); nothing else may grow this long.
LONG_FUNCTION_ALLOWED = {"core/engine/softfloat.py:round_pack"}


def test_functions_stay_short():
    long = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                where = f"{path.relative_to(SRC)}:{node.name}"
                if n > 80 and where not in LONG_FUNCTION_ALLOWED:
                    long.append(f"{where}: {n} lines")
    assert not long, "functions over 80 lines (split into named steps):\n" + "\n".join(long)


def test_typed_package_for_mypy(tmp_path):
    """The package ships py.typed: mypy type-checks code that imports it (no "missing library stubs")."""
    api = pytest.importorskip("mypy.api", reason="needs mypy: pip install mypy")
    user = tmp_path / "user.py"
    user.write_text("import numoracle\n\nbits: int = numoracle.formats.FP16.bits\n")
    out, err, status = api.run([str(user), "--follow-imports=silent", "--no-incremental",
                                "--cache-dir", str(tmp_path / "cache")])
    assert "missing library stubs" not in out + err and "py.typed" not in out + err, out + err
    assert status == 0, out + err


# ---------------------------------------------------------------------------------------------------------------
# docs/architecture.md's tree: every module in its folder, with its docstring's first line (generated)
# ---------------------------------------------------------------------------------------------------------------

DOC = SRC.parents[1] / "docs" / "architecture.md"
BEGIN, END = "<!-- tree: generated by python tests/test_architecture.py --write -->", "<!-- /tree -->"
WIDTH = 116


def _first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    line = doc.strip().split("\n\n")[0].replace("\n", " ")
    return line if len(line) <= 80 else line[:77].rstrip() + "..."


def render_tree() -> str:
    """The package as a tree: folders with their layer, each module with its docstring's first line."""
    lines = ["```text", "numoracle/"]

    def walk(folder: Path, depth: int) -> None:
        pad = "  " * depth
        for path in sorted(p for p in folder.iterdir() if p.suffix == ".py" and p.name != "__init__.py"):
            lines.append(f"{pad}{path.name:<{24 - len(pad)}} {_first_line(path)}")
        for sub in sorted(p for p in folder.iterdir() if (p / "__init__.py").exists()):
            room = sub.name if folder == SRC else None
            layer = f"   (layer {LEVEL[room]})" if room in LEVEL else ""
            lines.append(f"{pad}{sub.name + '/':<{24 - len(pad)}} {_first_line(sub / '__init__.py')}{layer}")
            walk(sub, depth + 1)

    walk(SRC, 1)
    return "\n".join([BEGIN, *lines, "```", END])


def test_architecture_page_names_every_module_in_its_folder():
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, f"docs/architecture.md lost its tree markers ({BEGIN})"
    current = text[text.index(BEGIN):text.index(END) + len(END)]
    assert current == render_tree(), "docs/architecture.md's tree is stale: python tests/test_architecture.py --write"


def test_no_production_module_imports_the_twins(graph):
    """The twins (core/twins/) are written apart from the engine to check it; production code never reads them."""
    bad = [f"{m} -> {t}" for m, t in _edges(graph) if ".core.twins" in t and ".core.twins" not in m]
    assert not bad, "production modules import the twins:\n" + "\n".join(bad)


def test_extending_names_one_folder_for_each_kind_of_addition():
    import re

    text = (SRC.parents[1] / "docs" / "extending.md").read_text(encoding="utf-8")
    for title in ("A number format", "An accumulation order", "A compiled kernel", "A quantization scheme"):
        assert f"\n## {title}\n" in text, f"docs/extending.md has no section '{title}'"
        section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
        line = next((ln for ln in section.splitlines() if ln.startswith("*Folder:*")), "")
        folders = [f for f in re.findall(r"`([\w/]+)/`", line) if (SRC / f).is_dir()]
        assert folders, f"docs/extending.md, '{title}': its *Folder:* line names no folder of src/numoracle"


def test_folders_stay_small():
    big = [f"{p.relative_to(SRC)}: {n} modules" for p in [SRC, *SRC.rglob("*")] if p.is_dir()
           and (n := len([q for q in p.glob("*.py") if q.name != "__init__.py"])) > 15]
    assert not big, "folders of more than 15 modules (split by concept):\n" + "\n".join(big)


def test_every_folder_says_what_it_owns():
    bare = [str(p.relative_to(SRC)) for p in SRC.rglob("__init__.py") if not _first_line(p)]
    assert not bare, f"packages without a docstring saying what they own: {bare}"


if __name__ == "__main__":
    import sys

    if "--write" in sys.argv:
        text = DOC.read_text(encoding="utf-8")
        text = text[:text.index(BEGIN)] + render_tree() + text[text.index(END) + len(END):]
        DOC.write_text(text, encoding="utf-8")
        print("wrote", DOC)
