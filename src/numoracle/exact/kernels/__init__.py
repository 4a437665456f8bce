"""exact_matmul's compiled passes (numba, optional), twins of the numpy passes of ``exact.ozaki`` (ozaki.py, limbs.py)
and ``exact.ozaki2`` (crt.py); held.py keeps their large arrays per thread for reuse.

Loaded only through ``core.jit.kernel_for`` from ``exact.ozaki`` and ``exact.ozaki2``.
"""
