"""numoracle in a test suite (``numoracle.testing``): the checks' reports, run comparisons, poison fills, goldens.

The checks themselves (``assert_*_close`` / ``check_*_close``, ``compare_runs``) are at the top level. Every name
is imported on first use, so that importing the pytest plugin (``numoracle.testing.pytest_plugin``) loads neither
numpy nor the checks.
"""

from ..core.lazy import names_from as _from
from ..core.lazy import namespace

API = {
    **_from(".closereport", "CloseReport"),
    **_from(".runs", "RunComparison"),
    **_from(".poison", "poison_like"),
    **_from(".composite", "check_softmax_close", "assert_softmax_close", "check_norm_close", "assert_norm_close",
            "check_attention_close", "assert_attention_close", "CompositeReport"),
    **_from(".compositemutants", "attention_mutants", "MutantReport"),
    **_from(".golden", "Golden", "GoldenDiff", "GoldenError", "write_golden", "read_golden", "compare_golden",
            "assert_golden"),
}

__all__, __getattr__, __dir__ = namespace(__name__, API)
