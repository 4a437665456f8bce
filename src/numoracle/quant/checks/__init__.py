"""Quantization checks: ``assert_quantized_close`` / ``check_quantized_close``, their report, and the
check for block formats that are not numoracle formats.

Imports ``quant.bounds``, ``quant.schemes`` and ``quant``'s core modules.
"""
