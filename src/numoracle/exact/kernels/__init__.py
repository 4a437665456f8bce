"""exact_matmul's compiled passes (numba, optional), twins of the numpy passes of ``exact.ozaki``.

Loaded only through ``core.jit.kernel_for`` from ``exact.ozaki``.
"""
