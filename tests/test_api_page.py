"""The public API in one page (docs/api/index.md: each name once, one line) and a reference page per namespace
that documents only its public names (no internal helper in the reference site).

The pages are generated from the one table of each namespace (``numoracle.API`` for the top level, and the ``API``
of each of ``numoracle.NAMESPACES``); when the API changes, regenerate them with
``python tests/test_api_page.py --write`` and add a new page to mkdocs.yml's nav.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"
TITLES = {
    "numoracle": "The top level: verbs, value types, errors", "formats": "Formats and policies",
    "orders": "Accumulation orders", "chains": "Cast chains", "bounds": "Error bounds",
    "identify": "Identifying a kernel's order", "reveal": "Revealing a kernel's order by probing",
    "composite": "Composite operations: softmax, norms, attention",
    "quant": "Quantization", "testing": "Checks' reports, run comparisons and goldens",
    "conformance": "Conformance sweeps", "invariance": "Batch invariance", "strategies": "Hypothesis strategies",
}


def namespaces() -> list[tuple[str, object]]:
    """(page name, module) of the top level and every namespace; strategies needs hypothesis."""
    import numoracle

    out = [("numoracle", numoracle)]
    for ns in numoracle.NAMESPACES:
        try:
            mod = importlib.import_module(f"numoracle.{ns}")
            [getattr(mod, n) for n in mod.__all__]
        except ImportError:
            continue
        out.append((ns, mod))
    return out


def _public() -> list[tuple[str, str, object]]:
    """(public name as a user writes it, the page it is on, the object) for the whole API."""
    out = []
    for page, mod in namespaces():
        prefix = "numoracle" if page == "numoracle" else f"numoracle.{page}"
        for name in mod.API:
            out.append((f"{prefix}.{name}", page, getattr(mod, name)))
    return out


def _qualified(pub: str, obj: object) -> str:
    """Where mkdocstrings finds the object's documentation: its defining module."""
    module = getattr(obj, "__module__", None)
    name = pub.rpartition(".")[2]
    return f"{module}.{name}" if module and module.startswith("numoracle") else pub


def test_no_name_is_exported_from_two_places():
    seen: dict[int, str] = {}
    twice = []
    for pub, _, obj in _public():
        if isinstance(obj, (int, float, str, tuple, dict, frozenset)) and not callable(obj):
            continue   # plain data: equal values may be distinct constants
        if id(obj) in seen:
            twice.append(f"{pub} and {seen[id(obj)]}")
        seen[id(obj)] = pub
    assert not twice, "one object, two public names: " + "; ".join(twice)


def test_the_top_level_is_small():
    import numoracle

    assert len(numoracle.__all__) <= 40, numoracle.__all__
    assert list(numoracle.__all__) == list(numoracle.API)


# Data constants carry no docstring of their own: their one line lives here (a new one fails the docstring test).
DATA_LINES = {
    "numoracle.identify.VARIANTS": "the CPU libraries' kernel variants per instruction set (OpenBLAS per core type, "
                                   "MKL's AVX-512 dot), each with its order and the CPU features it needs",
    "numoracle.composite.ELEMENTWISE": "documented maximum errors in ULPs of common exp / log / rsqrt / division "
                                       "implementations (CUDA's, SLEEF's), each with its source",
    "numoracle.conformance.KNOWN_DEVIATIONS": "every recorded deviation of numpy, ml_dtypes, torch and jax casts, each "
                                              "with its witness and the versions it holds for",
    "numoracle.reveal.KINDS": "the kinds of random inputs reveal_order's verification draws",
    "numoracle.orders.PRESETS": "the \"system/inputs\" names orders.preset() knows",
    "numoracle.orders.GPU_PRESETS": "the GPU preset table: one GpuPreset (block, kept bits, truncation, source) per "
                                    "GPU and input format",
    "numoracle.orders.GPU_ALIASES": "GPUs whose tensor cores are another's (h200, h800 -> h100)",
}


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
    """{file name: text} of docs/api: index.md and one page per namespace."""
    pages: dict[str, list[tuple[str, object]]] = {}
    for pub, page, obj in _public():
        pages.setdefault(page, []).append((pub, obj))
    index = ["# API reference", "",
             "The public API: the top level (`import numoracle as no; no.cast(...)`) and its namespaces",
             "(`numoracle.formats`, `numoracle.orders`, ...), each name once, one line each. Anything else is",
             "internal and may change. The linked pages document each name from its docstring.", ""]
    files = {}
    for p, entries in pages.items():
        title = TITLES.get(p, p)
        index += [f"## [{title}]({p}.md)", "", "| name | what it is |", "|---|---|"]
        index += [f"| `{pub}` | {DATA_LINES.get(pub) or _line(obj)} |" for pub, obj in entries]
        index.append("")
        where = "numoracle" if p == "numoracle" else f"numoracle.{p}"
        body = [f"# {title}", "", f"The public names of `{where}` ([all names](index.md)).", ""]
        data = [(pub, obj) for pub, obj in entries if not (inspect.isclass(obj) or inspect.isroutine(obj))]
        if data:   # constants (formats, tables) are made at import: listed here, not collected from the source
            body += ["| constant | what it is |", "|---|---|"]
            body += [f"| `{pub}` | {DATA_LINES.get(pub) or _line(obj)} |" for pub, obj in data] + [""]
        for pub, obj in entries:
            if inspect.isclass(obj) or inspect.isroutine(obj):
                body += [f"::: {_qualified(pub, obj)}", "    options:", "      show_root_full_path: false", ""]
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
