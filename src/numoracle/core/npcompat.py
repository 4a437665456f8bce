"""numpy API that moved between the versions numoracle supports (numpy 1.24, the oldest declared, to 2.x)."""

from __future__ import annotations

try:  # numpy >= 2.0 names it publicly
    from numpy.lib.array_utils import normalize_axis_tuple
except ImportError:  # pragma: no cover - numpy < 2 keeps it in numpy.core.numeric
    from numpy.core.numeric import normalize_axis_tuple

__all__ = ["normalize_axis_tuple"]
