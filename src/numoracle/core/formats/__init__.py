"""Formats and policies: the format descriptors and their registry, integer formats, IEEE P3109, the
rounding / overflow / NaN policies, and the mapping to numpy / ml_dtypes / torch dtypes.

Imported by every layer above; imports only ``core``'s base modules (errors, args, parse, text).
"""
