"""numoracle: the numerics oracle for low-precision kernels, compilers and quantizers."""

from .chains.prove import classify_cast_chain
from .chains.search import assert_chain_equivalent, find_equivalent_chains
from .chains.verdict import ChainVerdict
from .conformance.boundary import BoundaryValues, boundary_values
from .conformance.sweeper import SweepReport, sweep
from .core.convert import cast, decode, encode
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
from .core.policy import Flags, NanTo, Overflow, Policy, Rounding
from .quant.check import QuantCheckReport, QuantizedMismatch, assert_quantized_close, check_quantized_close
from .quant.error import QuantErrorReport, cosine, cosine_bound, quantization_error_bound, sqnr, sqnr_bound
from .quant.matmul import QuantMatmulBound, quantized_matmul_bound
from .quant.quantizer import Quantized, QuantParams, dequantize, quantize
from .reduce.bounds import ErrorBound, expected_error_bound, recommended_tolerance
from .reduce.reference import exact_dot, exact_matmul, exact_sum
from .reduce.simulation import simulate
from .reduce.tolerance import Tolerance
from .testing.checks import (
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
from .testing.golden import Golden, GoldenDiff, GoldenError, assert_golden, compare_golden, read_golden, write_golden

__version__ = "0.1.0"

__all__ = [
    "cast", "decode", "encode", "as_native", "explain", "Explanation",
    "classify_cast_chain", "ChainVerdict", "find_equivalent_chains", "assert_chain_equivalent",
    "expected_error_bound", "ErrorBound", "recommended_tolerance", "Tolerance",
    "exact_sum", "exact_dot", "exact_matmul", "simulate",
    "assert_sum_close", "assert_dot_close", "assert_matmul_close", "check_sum_close", "check_dot_close",
    "check_matmul_close", "CloseReport", "compare_runs", "RunComparison", "poison_like",
    "quantize", "dequantize", "Quantized", "QuantParams", "quantization_error_bound", "QuantErrorReport",
    "sqnr", "cosine", "sqnr_bound", "cosine_bound", "quantized_matmul_bound", "QuantMatmulBound",
    "assert_quantized_close", "check_quantized_close", "QuantCheckReport", "QuantizedMismatch",
    "boundary_values", "BoundaryValues", "sweep", "SweepReport", "NumoracleAssertionError",
    "write_golden", "read_golden", "compare_golden", "assert_golden", "Golden", "GoldenDiff", "GoldenError",
    "Format", "IntFormat", "AnyFormat", "format_of", "register", "registry",
    "Rounding", "Overflow", "NanTo", "Flags", "Policy",
    "FP64", "FP32", "TF32", "FP16", "BF16", "FP8_E4M3FN", "FP8_E5M2", "FP8_E4M3", "FP8_E3M4", "FP8_E4M3FNUZ",
    "FP8_E5M2FNUZ", "FP8_E4M3B11FNUZ", "FP6_E3M2FN", "FP6_E2M3FN", "FP4_E2M1FN", "E8M0FNU",
    "INT4", "UINT4", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64",
]
