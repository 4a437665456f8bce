"""Quantization schemes with their own layouts: GGUF blocks and K-quants, codebooks (NF4, bitsandbytes FP4),
packed int4 weights (GPTQ, AWQ, ...), torch quantized tensors.

Imports ``quant``'s core modules (quantizer, scale, layout, arith) and ``core``.
"""
