"""Quantization error bounds and metrics: elementwise bounds, SQNR and cosine, the quantized-matmul and
weight-only bounds (registered with ``bounds.expected``), the dequantise-then-accumulate reference.

Imports ``quant.schemes``, ``quant``'s core modules and the layers below.
"""
