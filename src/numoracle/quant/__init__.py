"""Quantization references: quantize/dequantize, scale rules, error bounds and checks."""
