"""numoracle in a test suite: closeness checks, goldens, hypothesis strategies and the pytest plugin."""

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
