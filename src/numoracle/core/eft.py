"""Error-free transformations of float64 operations: the one TwoSum and the one TwoProduct of the package.

Each returns the rounded result and its exact error, so that ``s + e == a + b`` (``p + e == a * b``) holds
exactly in real arithmetic. References: Knuth, TAOCP vol. 2 §4.2.2 (TwoSum); Dekker 1971, "A floating-point
technique for extending the available precision" (TwoProduct with Veltkamp's splitting); Ogita, Rump & Oishi
2005, "Accurate sum and dot product" §2.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["two_sum", "two_sum_error", "two_prod"]

_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's constant, splits a float64 into two 26-bit halves


def two_sum_error(a: Any, b: Any, s: Any) -> Any:
    """The exact error ``(a + b) - s`` of ``s = fl(a + b)`` (any float64 a, b without overflow; Knuth)."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)


def two_sum(a: Any, b: Any) -> tuple[Any, Any]:
    """Knuth's TwoSum: ``(s, e)`` with ``s = fl(a + b)`` and ``a + b == s + e`` exactly (finite results)."""
    s = np.add(a, b)
    return s, two_sum_error(a, b, s)


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's TwoProduct: ``(p, e)`` with ``p = fl(a * b)`` and ``a * b == p + e`` exactly.

    Needs no overflow in ``_SPLIT * a`` and no underflow of the partial products: callers pass mantissas.
    """
    p = a * b
    ca = _SPLIT * a  # Veltkamp: ah holds the top 26 bits of a, al the rest (exactly)
    ah = ca - (ca - a)
    al = a - ah
    cb = _SPLIT * b
    bh = cb - (cb - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl
