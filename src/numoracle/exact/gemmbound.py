"""A rigorous bound on the rounding error of a float64 GEMM taken along K in chunks whose results are added in order.

A classical GEMM (any order, blocking or FMA inside: OpenBLAS, MKL, BLIS) of kc terms is an inner product of
kc terms in some order, so its result errs by at most g_kc sum_k |x_k y_k| plus, where products may underflow,
kc 2^-1074 (g_n = n u / (1 - n u), u = 2^-53; Higham, Accuracy and Stability, 3.1 and 2.2: fl(x op y) =
(x op y)(1 + d) + e, |e| <= 2^-1075, e = 0 for additions). K in nc chunks of at most kc columns, one GEMM each,
whose results c_c are added in order (a recursive sum of nc terms, error <= g_(nc-1) sum_c |c_c| <=
g_(nc-1) ((1 + g_kc) S + K 2^-1074)), errs by at most

    (g_kc + g_(nc-1) (1 + g_kc)) S + (1 + g_(nc-1)) K 2^-1074,   S = sum_k |x_k y_k|,

about (kc + nc) u S instead of K u S: least near kc = sqrt(K). Used by plaingemm.py (the plain GEMM of a narrow
result) and ozaki2.py (the remainders' GEMMs).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

_U = Fraction(1, 1 << 53)
_MIN_CHUNK = 64


def chunk(K: int) -> int:
    """Columns a chunk: twice the power of two nearest sqrt(K) (kc + K / kc is least at sqrt(K); longer chunks run
    the GEMMs faster: 128 at K = 4096), at least _MIN_CHUNK, at most K."""
    kc = 1 << max(round(math.log2(max(K, 1)) / 2) + 1, _MIN_CHUNK.bit_length() - 1)
    return min(kc, max(K, 1))


@lru_cache(maxsize=64)
def gamma_up(n: int) -> float:
    """g_n = n u / (1 - n u), rounded up to a float64 (0 for n <= 0)."""
    if n <= 0:
        return 0.0
    g = Fraction(n) * _U / (1 - n * _U)
    f = float(g)
    return f if Fraction(f) >= g else math.nextafter(f, math.inf)


def factor(kc: int, nc: int) -> float:
    """g_kc + g_(nc-1) (1 + g_kc), rounded up: the relative error bound of nc chunks of at most kc columns, added
    in order (the module doc), before the bound's own float64 steps (the callers' margins cover those)."""
    g = gamma_up(kc)
    return math.nextafter(math.nextafter(g + gamma_up(nc - 1) * (1 + g), math.inf), math.inf)
