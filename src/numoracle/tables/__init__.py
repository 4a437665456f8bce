"""The generated tables (``tables/*.csv``): formats, chains, bounds and boundary values."""

from .build import TABLES, formats_table, render_csv, write_tables

__all__ = ["TABLES", "formats_table", "render_csv", "write_tables"]
