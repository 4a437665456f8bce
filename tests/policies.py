"""Policy lists the engine tests share: modes, and the overflow / nan_to policies each destination takes."""

from __future__ import annotations

from numoracle.formats import registry

SMALL = [f for f in registry() if f.bits <= 16]
MODES = ["rne", "rna", "rtz", "ru", "rd", "rto"]


def overflows(dst):
    if dst.is_integer:
        return ["saturate", "wrap"]
    if dst.has_inf:
        return ["ieee", "saturate"]
    return ["nan", "saturate"] if dst.has_nan else ["saturate"]


def nan_tos(dst):
    return ["max", "zero", "min"] if dst.is_integer or not dst.has_nan else [None]
