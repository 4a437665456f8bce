"""numoracle: the numerics oracle for low-precision kernels, compilers and quantizers.

The top level holds the verbs a test writes, the value types they take and the errors; everything else lives in a
namespace (``numoracle.formats``, ``.orders``, ``.quant``, ``.testing``, ...: ``NAMESPACES``). ``API`` is the one
table: it drives ``__all__``, the loading on first use and the API page (docs/api/index.md). ``import numoracle``
itself loads neither numpy nor any subpackage; the first access to a name loads the whole top level at once, so
every registration a module makes at import (bound ops, formats) is in place whichever name comes first.
"""

from __future__ import annotations

import importlib
from typing import Any

from .core.lazy import namespace

__version__ = "0.1.0"

# public name -> the module that defines it
API = {
    # conversions
    "cast": ".core.engine.convert",
    "decode": ".core.engine.convert",
    "encode": ".core.engine.convert",
    "explain": ".core.engine.explanation",
    "classify_cast_chain": ".chains.prove",
    "assert_chain_equivalent": ".chains.search",
    # reductions: models, exact references, bounds
    "simulate": ".models.engine.simulation",
    "exact_sum": ".exact.reference",
    "exact_dot": ".exact.reference",
    "exact_matmul": ".exact.reference",
    "expected_error_bound": ".bounds.expected",
    "recommended_tolerance": ".bounds.expected",
    # checks
    "check_sum_close": ".testing.checks",
    "check_dot_close": ".testing.checks",
    "check_matmul_close": ".testing.checks",
    "assert_sum_close": ".testing.checks",
    "assert_dot_close": ".testing.checks",
    "assert_matmul_close": ".testing.checks",
    "compare_runs": ".testing.runs",
    # what a kernel did
    "identify_order": ".identify.search",
    "reveal_order": ".reveal.report",
    "check_invariance": ".invariance.check",
    "assert_batch_invariant": ".invariance.check",
    # quantization
    "quantize": ".quant.quantizer",
    "dequantize": ".quant.quantizer",
    "check_quantized_close": ".quant.checks.check",
    "assert_quantized_close": ".quant.checks.check",
    # value types
    "Arithmetic": ".models.arithmetic",
    "QuantRecipe": ".quant.recipe",
    "Format": ".core.formats.format",
    "Rounding": ".core.formats.policy",
    "Overflow": ".core.formats.policy",
    "NanTo": ".core.formats.policy",
    "Policy": ".core.formats.policy",
    # errors
    "NumoracleError": ".core.errors",
    "ParseError": ".core.errors",
    "ArgumentTypeError": ".core.errors",
    "NumoracleAssertionError": ".core.errors",
}

# the namespaces: numoracle.<name>, each with its own table (its __all__)
NAMESPACES = ("formats", "orders", "chains", "bounds", "identify", "reveal", "composite", "quant", "testing",
              "conformance", "invariance", "strategies")

# modules that register something at import (a bound op) and export nothing here
_REGISTERS = (".quant.bounds.matmul", ".composite.register")

__all__, _getattr, __dir__ = namespace(__name__, API, loads_all=True, also=_REGISTERS)


def __getattr__(name: str) -> Any:
    if name in NAMESPACES:
        return importlib.import_module(f".{name}", __name__)
    return _getattr(name)
