"""Quantization references (``numoracle.quant``): schemes and their references, error bounds and metrics, checks.

``quantize`` / ``dequantize`` and ``assert_quantized_close`` / ``check_quantized_close`` are at the top level; this
namespace holds the rest. Layout: the elementwise quantizer and its scale rules here (quantizer, scale, scalefit,
params, layout, recipe, arith), ``schemes/`` (GGUF, codebooks, packed int4, torch's quantized tensors),
``bounds/`` (error bounds and metrics), ``checks/`` (the checks and their reports).
"""

from ..core.lazy import names_from as _from
from ..core.lazy import namespace

API = {
    **_from(".quantizer", "Quantized", "QuantParams"),
    **_from(".bounds.error", "quantization_error_bound", "QuantErrorReport", "sqnr", "cosine", "sqnr_bound",
            "cosine_bound"),
    **_from(".bounds.matmul", "quantized_matmul_bound", "QuantMatmulBound"),
    **_from(".bounds.weightonly", "GgufWeights", "DequantMatmulBound"),
    **_from(".bounds.dequantgemm", "dequant_matmul", "dequant_matmul_check", "DequantMatmul"),
    **_from(".checks.report", "QuantCheckReport", "QuantizedMismatch"),
    **_from(".schemes.codebook", "Codebook", "codebook_of", "register_codebook", "quantize_codebook",
            "dequantize_codebook", "quantize_blockwise_cpu", "double_quantize"),
    **_from(".schemes.int4", "Int4Weights", "quantize_int4", "dequantize_int4"),
    **_from(".schemes.gguf", "gguf_quantize", "gguf_dequantize"),
}

__all__, __getattr__, __dir__ = namespace(__name__, API)
