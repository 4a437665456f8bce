"""The public API in one page (docs/api/index.md: each name, one line) and a reference page per subpackage that
documents only the public names (no internal helper in the reference site).

The pages are generated from ``numoracle.__all__`` and the public modules (orders, strategies, golden); when the API
changes, regenerate them with ``python tests/test_api_page.py --write`` and add a new page to mkdocs.yml's nav.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"
PUBLIC_MODULES = ("orders", "strategies", "golden")
TITLES = {
    "core": "Formats, policies and conversions", "chains": "Cast chains", "exact": "Exact references",
    "models": "Accumulation models and orders", "bounds": "Error bounds", "identify": "Identifying a kernel's order",
    "reveal": "Revealing a kernel's order by probing", "quant": "Quantization", "conformance": "Conformance sweeps",
    "testing": "Checks, goldens and strategies for test suites",
    "orders": "Preset tables (numoracle.orders)", "golden": "Golden-file constants (numoracle.golden)",
}


def _public() -> list[tuple[str, str, object]]:
    """(public name as a user writes it, qualified path of its definition, the object) for the whole API."""
    import numoracle

    numoracle._load()
    out = []
    for name in numoracle.__all__:
        where = numoracle._WHERE[name]
        out.append((f"numoracle.{name}", f"numoracle{where}.{name}", getattr(numoracle, name)))
    for mod_name in PUBLIC_MODULES:
        try:
            mod = __import__(f"numoracle.{mod_name}", fromlist=["__all__"])
        except ImportError:   # strategies needs hypothesis
            continue
        for name in mod.__all__:
            obj = getattr(mod, name)
            defined = getattr(obj, "__module__", None) or mod.__name__
            if not defined.startswith("numoracle"):
                defined = mod.__name__
            out.append((f"numoracle.{mod_name}.{name}", f"{defined}.{name}", obj))
    return out


# Data constants carry no docstring of their own: their one line lives here (a new one fails the docstring test).
DATA_LINES = {
    "numoracle.orders.PRESETS": "the \"system/inputs\" names orders.preset() knows",
    "numoracle.orders.GPU_PRESETS": "the GPU preset table: one GpuPreset (block, kept bits, truncation, source) per "
                                    "GPU and input format",
    "numoracle.orders.GPU_ALIASES": "GPUs whose tensor cores are another's (h200, h800 -> h100)",
    "numoracle.golden.GOLDEN_SUFFIX": "the file name ending of golden files",
    "numoracle.golden.MAGIC": "the first bytes of a golden file",
    "numoracle.golden.VERSION": "the golden-file format version this numoracle writes",
}


def _page(qualified: str) -> str:
    return qualified.split(".")[1]


def _line(obj: object) -> str:
    """One line: the first line of the object's own docstring (a format constant: its name and kind)."""
    import types

    if isinstance(obj, types.UnionType):
        return f"the type {obj} (annotations)"
    name = getattr(obj, "name", None)
    if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismethod(obj) or callable(obj)) or \
            (name is not None and type(obj).__name__ in ("Format", "IntFormat")):
        return f"the {name} format" if name else type(obj).__name__
    doc = inspect.getdoc(obj) or ""
    first = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
    if first.startswith(f"{getattr(obj, '__name__', '')}("):   # a dataclass's generated signature, not a docstring
        first = ""
    return first.replace("|", "\\|") or "(no docstring)"


def render() -> dict[str, str]:
    """{file name: text} of docs/api: index.md and one page per subpackage with public names."""
    entries = _public()
    pages: dict[str, list[tuple[str, str, object]]] = {}
    for e in entries:
        pages.setdefault(_page(e[1]), []).append(e)
    order = [p for p in TITLES if p in pages] + sorted(p for p in pages if p not in TITLES)
    index = ["# API reference", "",
             "The public API: every name `numoracle` exports (`import numoracle as no; no.cast(...)`) and the public",
             "modules `numoracle.orders`, `numoracle.strategies` and `numoracle.golden`, one line each. Anything",
             "else is internal and may change. The linked pages document each name from its docstring.", ""]
    files = {}
    for p in order:
        title = TITLES.get(p, p)
        index += [f"## [{title}]({p}.md)", "", "| name | what it is |", "|---|---|"]
        index += [f"| `{pub}` | {DATA_LINES.get(pub) or _line(obj)} |" for pub, _, obj in pages[p]]
        index.append("")
        body = [f"# {title}", "", f"The public names defined in `numoracle.{p}` ([all names](index.md)).", ""]
        data = [(pub, obj) for pub, _, obj in pages[p] if not (inspect.isclass(obj) or inspect.isroutine(obj))]
        if data:   # constants (formats, tables) are made at import: listed here, not collected from the source
            body += ["| constant | what it is |", "|---|---|"]
            body += [f"| `{pub}` | {DATA_LINES.get(pub) or _line(obj)} |" for pub, obj in data] + [""]
        for _, qual, obj in pages[p]:
            if inspect.isclass(obj) or inspect.isroutine(obj):
                body += [f"::: {qual}", "    options:", "      show_root_full_path: false", ""]
        files[f"{p}.md"] = "\n".join(body)
    files["index.md"] = "\n".join(index)
    return files


def test_the_api_pages_are_current():
    stale = [name for name, text in render().items()
             if not (API / name).exists() or (API / name).read_text(encoding="utf-8") != text]
    assert not stale, f"docs/api/{', '.join(stale)} out of date: run python tests/test_api_page.py --write"


def test_every_api_page_is_in_the_nav_and_no_internal_page_is():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = set(render())
    listed = {line.split("api/")[1].strip() for line in nav.splitlines() if "api/" in line}
    assert listed == pages, f"mkdocs.yml's API nav should list exactly {sorted(pages)}; it lists {sorted(listed)}"
    extra = {p.name for p in API.glob("*.md")} - pages
    assert not extra, f"docs/api/ holds pages of no public name (internal helpers): {sorted(extra)}; delete them"


def test_every_public_name_has_a_one_line_description():
    missing = [pub for pub, _, obj in _public() if pub not in DATA_LINES and _line(obj) in (
        "(no docstring)", type(obj).__name__)]
    assert not missing, f"public names without a docstring: {missing}"


if __name__ == "__main__":
    if "--write" in sys.argv:
        for name, text in render().items():
            (API / name).write_text(text, encoding="utf-8")
            print("wrote", API / name)
