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


def test_modules_stay_small():
    big = [f"{p.relative_to(SRC)}: {n} lines" for p in sorted(SRC.rglob("*.py"))
           if (n := len(p.read_text().splitlines())) > 500]
    assert not big, "modules over 500 lines (split by concept):\n" + "\n".join(big)


# round_pack's numbered steps are one unit on purpose (docs/architecture.md); nothing else may grow this long.
LONG_FUNCTION_ALLOWED = {"core/softfloat.py:round_pack"}


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
    user.write_text("import numoracle\n\nbits: int = numoracle.FP16.bits\n")
    out, err, status = api.run([str(user), "--follow-imports=silent", "--no-incremental",
                                "--cache-dir", str(tmp_path / "cache")])
    assert "missing library stubs" not in out + err and "py.typed" not in out + err, out + err
    assert status == 0, out + err
