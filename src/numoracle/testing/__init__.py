"""numoracle in a test suite: closeness checks, goldens, hypothesis strategies and the pytest plugin.

The checks are imported on first use (``numoracle.testing.assert_matmul_close``), so that importing
the pytest plugin (``numoracle.testing.pytest_plugin``) loads neither numpy nor the checks.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers, editors and the API reference
    from .checks import (
        CloseReport,
        NumoracleAssertionError,
        RunComparison,
        assert_dot_close,
        assert_matmul_close,
        assert_sum_close,
        check_dot_close,
        check_matmul_close,
        check_sum_close,
        compare_runs,
        poison_like,
    )

__all__ = [
    "CloseReport", "NumoracleAssertionError", "RunComparison", "assert_dot_close", "assert_matmul_close",
    "assert_sum_close", "check_dot_close", "check_matmul_close", "check_sum_close", "compare_runs", "poison_like",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module(".checks", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'numoracle.testing' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
