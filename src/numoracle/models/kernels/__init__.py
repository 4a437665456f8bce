"""simulate's compiled kernels (numba, optional), bit-identical to the numpy steps.

Loaded only through ``core.jit.kernel_for`` from ``models.engine.dispatch`` / ``sources``.
"""
