"""The documentation site builds: ``mkdocs build --strict`` (guides, walkthrough, API reference from the docstrings).

A broken link, a missing page or an unresolvable reference fails the strict build. Skipped where mkdocs
(the ``docs`` extra: ``pip install -e ".[docs]"``) is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from optional import needs

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path):
    for package in ("mkdocs", "mkdocstrings", "material"):  # the docs extra
        needs(package)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                        "-d", str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    site = tmp_path / "site"
    for page in ("index.html", "walkthrough/index.html", "testing/index.html", "cli/index.html"):
        assert (site / page).exists(), page
    top = (site / "api" / "numoracle" / "index.html").read_text(encoding="utf-8")
    assert 'id="numoracle.core.engine.convert.cast"' in top  # the API reference comes from the docstrings
    assert 'id="numoracle.testing.checks.check_matmul_close"' in top


def test_every_guide_is_in_the_site():
    import re

    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r":\s*([\w/]+\.md)\s*$", nav, re.M))
    guides = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert guides == listed, f"pages missing from mkdocs.yml's nav: {sorted(guides - listed)}; " \
                             f"listed but missing: {sorted(listed - guides)}"
    # the API pages are the public API's (tests/test_api_page.py keeps them and the nav in step with it)
