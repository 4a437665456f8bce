"""Identification: which accumulation order reproduces a black-box kernel's outputs (identify_order), and its report.

Searches over the orders of models and confirms every claim through simulate. Imports core and models.
"""

from ..core.lazy import namespace

API = {"IdentifyReport": ".report", "separating_inputs": ".separate", "SeparatingInputs": ".separate",
       "KernelVariant": ".cpuvariants", "VARIANTS": ".cpuvariants", "variant_orders": ".cpuvariants",
       "cpu_features": ".cpuvariants"}

__all__, __getattr__, __dir__ = namespace(__name__, API)
