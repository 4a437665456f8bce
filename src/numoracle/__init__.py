"""numoracle: the numerics oracle for low-precision kernels, compilers and quantizers.

The names below are imported on first use: ``import numoracle`` itself loads neither numpy nor any
subpackage, so an environment with numoracle installed (and its pytest plugin active) pays nothing
until a program or a test touches ``numoracle.<name>``. The first such access loads the whole public
API at once (as an eager import would), so every registration a module makes at import (bound ops,
formats) is in place whichever name comes first.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers, editors and the API reference
    from . import golden as golden  # the public module numoracle.golden
    from . import orders as orders  # the public module numoracle.orders
    from .bounds.errorbound import Tolerance
    from .bounds.expected import ErrorBound, expected_error_bound, recommended_tolerance
    from .chains.prove import classify_cast_chain
    from .chains.search import assert_chain_equivalent, find_equivalent_chains
    from .chains.verdict import ChainVerdict
    from .conformance.boundary import BoundaryValues, boundary_values
    from .conformance.sweeper import SweepReport, sweep
    from .core.convert import cast, decode, encode
    from .core.errors import ArgumentTypeError, NumoracleError, ParseError
    from .core.explanation import Explanation, explain
    from .core.formats import (
        BF16,
        E8M0FNU,
        FP4_E2M1FN,
        FP6_E2M3FN,
        FP6_E3M2FN,
        FP8_E3M4,
        FP8_E4M3,
        FP8_E4M3B11FNUZ,
        FP8_E4M3FN,
        FP8_E4M3FNUZ,
        FP8_E5M2,
        FP8_E5M2FNUZ,
        FP16,
        FP32,
        FP64,
        INT4,
        INT8,
        INT16,
        INT32,
        INT64,
        TF32,
        UINT4,
        UINT8,
        UINT16,
        UINT32,
        UINT64,
        AnyFormat,
        Format,
        IntFormat,
        format_of,
        register,
        registry,
    )
    from .core.interop import as_native
    from .core.p3109 import p3109_format
    from .core.policy import Flags, NanTo, Overflow, Policy, Rounding
    from .exact.reference import exact_dot, exact_matmul, exact_sum
    from .identify.search import IdentifyReport, identify_order
    from .identify.separate import SeparatingInputs, separating_inputs
    from .models.arithmetic import Arithmetic
    from .models.simulation import simulate
    from .quant.check import QuantCheckReport, QuantizedMismatch, assert_quantized_close, check_quantized_close
    from .quant.codebook import Codebook, codebook_of, dequantize_codebook, quantize_codebook, register_codebook
    from .quant.dequantgemm import DequantMatmul, dequant_matmul, dequant_matmul_check
    from .quant.error import QuantErrorReport, cosine, cosine_bound, quantization_error_bound, sqnr, sqnr_bound
    from .quant.gguf import gguf_dequantize, gguf_quantize
    from .quant.int4 import Int4Weights, dequantize_int4, quantize_int4
    from .quant.matmul import QuantMatmulBound, quantized_matmul_bound
    from .quant.quantizer import Quantized, QuantParams, dequantize, quantize
    from .quant.recipe import QuantRecipe
    from .quant.weightonly import DequantMatmulBound, GgufWeights
    from .reveal.report import RevealReport, reveal_order
    from .testing.checks import (
        CloseReport,
        NumoracleAssertionError,
        assert_dot_close,
        assert_matmul_close,
        assert_sum_close,
        check_dot_close,
        check_matmul_close,
        check_sum_close,
        poison_like,
    )
    from .testing.golden import (
        Golden,
        GoldenDiff,
        GoldenError,
        assert_golden,
        compare_golden,
        read_golden,
        write_golden,
    )
    from .testing.runs import RunComparison, compare_runs

__version__ = "0.1.0"

__all__ = [
    "cast", "decode", "encode", "as_native", "explain", "Explanation",
    "classify_cast_chain", "ChainVerdict", "find_equivalent_chains", "assert_chain_equivalent",
    "expected_error_bound", "ErrorBound", "recommended_tolerance", "Tolerance",
    "exact_sum", "exact_dot", "exact_matmul", "simulate", "Arithmetic",
    "identify_order", "IdentifyReport", "separating_inputs", "SeparatingInputs", "reveal_order", "RevealReport",
    "assert_sum_close", "assert_dot_close", "assert_matmul_close", "check_sum_close", "check_dot_close",
    "check_matmul_close", "CloseReport", "compare_runs", "RunComparison", "poison_like",
    "quantize", "dequantize", "Quantized", "QuantParams", "QuantRecipe", "quantization_error_bound", "QuantErrorReport",
    "sqnr", "cosine", "sqnr_bound", "cosine_bound", "quantized_matmul_bound", "QuantMatmulBound",
    "assert_quantized_close", "check_quantized_close", "QuantCheckReport", "QuantizedMismatch",
    "Codebook", "codebook_of", "register_codebook", "quantize_codebook", "dequantize_codebook",
    "Int4Weights", "quantize_int4", "dequantize_int4", "dequant_matmul", "dequant_matmul_check", "DequantMatmul",
    "gguf_quantize", "gguf_dequantize", "p3109_format", "GgufWeights", "DequantMatmulBound",
    "boundary_values", "BoundaryValues", "sweep", "SweepReport", "NumoracleAssertionError",
    "write_golden", "read_golden", "compare_golden", "assert_golden", "Golden", "GoldenDiff", "GoldenError",
    "Format", "IntFormat", "AnyFormat", "format_of", "register", "registry",
    "Rounding", "Overflow", "NanTo", "Flags", "Policy",
    "FP64", "FP32", "TF32", "FP16", "BF16", "FP8_E4M3FN", "FP8_E5M2", "FP8_E4M3", "FP8_E3M4", "FP8_E4M3FNUZ",
    "FP8_E5M2FNUZ", "FP8_E4M3B11FNUZ", "FP6_E3M2FN", "FP6_E2M3FN", "FP4_E2M1FN", "E8M0FNU",
    "INT4", "UINT4", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64",
    "NumoracleError", "ParseError", "ArgumentTypeError",
]

# name -> the module that defines it
_WHERE = {
    "classify_cast_chain": ".chains.prove",
    "assert_chain_equivalent": ".chains.search",
    "find_equivalent_chains": ".chains.search",
    "ChainVerdict": ".chains.verdict",
    "BoundaryValues": ".conformance.boundary",
    "boundary_values": ".conformance.boundary",
    "SweepReport": ".conformance.sweeper",
    "sweep": ".conformance.sweeper",
    "cast": ".core.convert",
    "decode": ".core.convert",
    "encode": ".core.convert",
    "ArgumentTypeError": ".core.errors",
    "NumoracleError": ".core.errors",
    "ParseError": ".core.errors",
    "Explanation": ".core.explanation",
    "explain": ".core.explanation",
    "BF16": ".core.formats",
    "E8M0FNU": ".core.formats",
    "FP4_E2M1FN": ".core.formats",
    "FP6_E2M3FN": ".core.formats",
    "FP6_E3M2FN": ".core.formats",
    "FP8_E3M4": ".core.formats",
    "FP8_E4M3": ".core.formats",
    "FP8_E4M3B11FNUZ": ".core.formats",
    "FP8_E4M3FN": ".core.formats",
    "FP8_E4M3FNUZ": ".core.formats",
    "FP8_E5M2": ".core.formats",
    "FP8_E5M2FNUZ": ".core.formats",
    "FP16": ".core.formats",
    "FP32": ".core.formats",
    "FP64": ".core.formats",
    "INT4": ".core.formats",
    "INT8": ".core.formats",
    "INT16": ".core.formats",
    "INT32": ".core.formats",
    "INT64": ".core.formats",
    "TF32": ".core.formats",
    "UINT4": ".core.formats",
    "UINT8": ".core.formats",
    "UINT16": ".core.formats",
    "UINT32": ".core.formats",
    "UINT64": ".core.formats",
    "AnyFormat": ".core.formats",
    "Format": ".core.formats",
    "IntFormat": ".core.formats",
    "format_of": ".core.formats",
    "register": ".core.formats",
    "registry": ".core.formats",
    "as_native": ".core.interop",
    "Flags": ".core.policy",
    "NanTo": ".core.policy",
    "Overflow": ".core.policy",
    "Policy": ".core.policy",
    "Rounding": ".core.policy",
    "QuantCheckReport": ".quant.check",
    "QuantizedMismatch": ".quant.check",
    "assert_quantized_close": ".quant.check",
    "check_quantized_close": ".quant.check",
    "QuantErrorReport": ".quant.error",
    "cosine": ".quant.error",
    "cosine_bound": ".quant.error",
    "quantization_error_bound": ".quant.error",
    "sqnr": ".quant.error",
    "sqnr_bound": ".quant.error",
    "QuantMatmulBound": ".quant.matmul",
    "quantized_matmul_bound": ".quant.matmul",
    "Quantized": ".quant.quantizer",
    "QuantParams": ".quant.quantizer",
    "dequantize": ".quant.quantizer",
    "quantize": ".quant.quantizer",
    "QuantRecipe": ".quant.recipe",
    "Codebook": ".quant.codebook",
    "codebook_of": ".quant.codebook",
    "register_codebook": ".quant.codebook",
    "quantize_codebook": ".quant.codebook",
    "dequantize_codebook": ".quant.codebook",
    "Int4Weights": ".quant.int4",
    "quantize_int4": ".quant.int4",
    "dequantize_int4": ".quant.int4",
    "dequant_matmul": ".quant.dequantgemm",
    "dequant_matmul_check": ".quant.dequantgemm",
    "DequantMatmul": ".quant.dequantgemm",
    "gguf_quantize": ".quant.gguf",
    "gguf_dequantize": ".quant.gguf",
    "GgufWeights": ".quant.weightonly",
    "DequantMatmulBound": ".quant.weightonly",
    "p3109_format": ".core.p3109",
    "ErrorBound": ".bounds.expected",
    "expected_error_bound": ".bounds.expected",
    "recommended_tolerance": ".bounds.expected",
    "IdentifyReport": ".identify.search",
    "identify_order": ".identify.search",
    "separating_inputs": ".identify.separate",
    "SeparatingInputs": ".identify.separate",
    "RevealReport": ".reveal.report",
    "reveal_order": ".reveal.report",
    "exact_dot": ".exact.reference",
    "exact_matmul": ".exact.reference",
    "exact_sum": ".exact.reference",
    "simulate": ".models.simulation",
    "Arithmetic": ".models.arithmetic",
    "Tolerance": ".bounds.errorbound",
    "CloseReport": ".testing.checks",
    "NumoracleAssertionError": ".testing.checks",
    "RunComparison": ".testing.runs",
    "assert_dot_close": ".testing.checks",
    "assert_matmul_close": ".testing.checks",
    "assert_sum_close": ".testing.checks",
    "check_dot_close": ".testing.checks",
    "check_matmul_close": ".testing.checks",
    "check_sum_close": ".testing.checks",
    "compare_runs": ".testing.runs",
    "poison_like": ".testing.checks",
    "Golden": ".testing.golden",
    "GoldenDiff": ".testing.golden",
    "GoldenError": ".testing.golden",
    "assert_golden": ".testing.golden",
    "compare_golden": ".testing.golden",
    "read_golden": ".testing.golden",
    "write_golden": ".testing.golden",
}


def _load() -> None:
    """Import every module of the public API and bind its names here (once)."""
    g = globals()
    for name, mod in _WHERE.items():
        if name not in g:
            g[name] = getattr(importlib.import_module(mod, __name__), name)


_MODULES = ("golden", "orders")  # public modules: numoracle.orders works after import numoracle, as before


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)
    _load()
    g = globals()
    if name in g:  # a public name, or a subpackage the load imported (numoracle.core ...)
        return g[name]
    import difflib

    close = difflib.get_close_matches(name, [*__all__, *_MODULES], n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else " (numoracle.__all__ lists them)"
    raise AttributeError(f"module 'numoracle' has no attribute {name!r}{hint}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
