"""The compiled conversion kernels (numba, optional): each gives the same codes as the engine, its reference.

Loaded only through ``core.jit.kernel_for`` (numba is imported there, never at ``import numoracle``).
"""
