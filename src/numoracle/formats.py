"""Formats and policies (``numoracle.formats``): every format as a constant, the registry, integer and P3109
formats, the policy enums' companions, the native dtypes, and what ``explain`` returns."""

from .core.lazy import namespace

_F = ".core.formats.format"
API = {
    **{name: _F for name in (
        "FP64", "FP32", "TF32", "FP16", "BF16", "FP8_E4M3FN", "FP8_E5M2", "FP8_E4M3", "FP8_E3M4", "FP8_E4M3FNUZ",
        "FP8_E5M2FNUZ", "FP8_E4M3B11FNUZ", "FP6_E3M2FN", "FP6_E2M3FN", "FP4_E2M1FN", "E8M0FNU",
        "INT4", "UINT4", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64",
        "AnyFormat", "format_of", "register", "registry")},
    "IntFormat": ".core.formats.intformat",
    "p3109_format": ".core.formats.p3109",
    "p3109_cast": ".core.formats.p3109",
    "p3109_decode": ".core.formats.p3109",
    "p3109_unsigned_extended": ".core.formats.p3109",
    "Flags": ".core.formats.policy",
    "Tininess": ".core.formats.policy",
    "as_native": ".core.formats.interop",
    "Explanation": ".core.engine.explanation",
}

__all__, __getattr__, __dir__ = namespace(__name__, API)
