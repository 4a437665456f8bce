"""Bit-exact models of composite kernels (``numoracle.composite.simulate_softmax``, ...): what a softmax,
log_softmax, logsumexp, layer_norm, rms_norm or attention kernel stores, every step rounded to its compute format,
every sum along a numoracle order, the elementwise functions as parameters; torch's CPU kernels as such models
(``torchcpu.py``; scaled_dot_product_attention: ``torchattn.py``; jax's: ``jaxcpu.py``). Owns the exact arithmetic
of a compute format (``accarith.py``), the elementwise functions (``elementwise.py``), torch's row moments
(``moments.py``). Imports core, models and composite's ``ziv``; imported by the ``composite`` namespace.
"""
