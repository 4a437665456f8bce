"""Generated reference tables (``tables/*.csv``), written by ``numoracle tables``.

Each table is a function returning rows (dicts with the same keys, in a fixed order);
:data:`TABLES` maps a table's name to its generator, and :func:`write_tables` renders every
registered table as ``<name>.csv``. To add a table, write a generator and add it to ``TABLES``;
``tests/test_tables.py`` then checks the checked-in CSV against a fresh run, so a change in the
library that changes a table fails until someone runs ``numoracle tables`` and commits the result.

Cells are exact: ``Fraction`` values are written as ``str(Fraction)`` (``65504``, ``1/16777216``,
which ``fractions.Fraction`` parses back), booleans as ``true``/``false``, missing cells empty.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..core.formats.format import AnyFormat, registry
from ..core.progress import progress

__all__ = ["TABLES", "formats_table", "render_csv", "write_tables"]

Row = dict[str, Any]


def formats_table(formats: Iterable[AnyFormat] | None = None) -> list[Row]:
    """One row per format (the registry's order: floats, widest first, then integers).

    The columns are the union of every ``describe()`` key, in order of first appearance; a
    column a format has no value for (``exp_bits`` of an integer) is left empty.
    """
    fmts = registry() if formats is None else list(formats)
    rows = [f.describe() for f in fmts]
    columns: list[str] = []
    for r in rows:
        columns.extend(k for k in r if k not in columns)
    return [{k: r.get(k) for k in columns} for r in rows]


def _chains() -> list[Row]:
    from .chains import chains_table

    return chains_table()


def _bounds() -> list[Row]:
    from .bounds import bounds_table

    return bounds_table()


def _boundary() -> list[Row]:
    from .boundary import boundary_table

    return boundary_table()


TABLES: dict[str, Callable[[], list[Row]]] = {
    "formats": formats_table,
    "chains": _chains,
    "bounds": _bounds,
    "boundary": _boundary,
}


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, Fraction, str)):
        return str(v)
    raise TypeError(f"table cell {v!r} of type {type(v).__name__} has no exact text form")


def render_csv(rows: list[Row]) -> str:
    """Rows -> CSV text (header from the first row's keys, ``\\n`` line ends, exact cells)."""
    if not rows:
        raise ValueError("a table needs at least one row")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    header = list(rows[0])
    w.writerow(header)
    for r in rows:
        if list(r) != header:
            raise ValueError(f"table rows have different columns: {list(r)} vs {header}")
        w.writerow(_cell(r[k]) for k in header)
    return buf.getvalue()


def write_tables(outdir: str | Path = "tables", names: Iterable[str] | None = None) -> list[Path]:
    """Write ``<outdir>/<name>.csv`` for each table (all of :data:`TABLES` by default)."""
    out = Path(outdir)
    chosen = list(TABLES) if names is None else list(names)
    for n in chosen:
        if n not in TABLES:
            raise ValueError(f"unknown table {n!r}; tables: {', '.join(TABLES)}")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in progress(chosen, desc="tables", unit="table"):
        p = out / f"{n}.csv"
        p.write_text(render_csv(TABLES[n]()), encoding="utf-8", newline="")
        paths.append(p)
    return paths
