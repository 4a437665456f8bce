"""Bit-exact models of composite kernels (``numoracle.composite.simulate_softmax``, ...): what a softmax,
log_softmax, logsumexp, layer_norm or rms_norm kernel stores, every step rounded to its compute format, every sum
along a numoracle order, the elementwise functions as parameters; torch's CPU kernels as such models
(``torchcpu.py``). Owns the exact arithmetic of a compute format (``accarith.py``), the elementwise functions
(``elementwise.py``), torch's row moments (``moments.py``). Imports core, models and composite's ``ziv``; imported
by the ``composite`` namespace.
"""
