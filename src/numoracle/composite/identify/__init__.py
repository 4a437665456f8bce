"""Identification of composite kernels (``numoracle.composite.identify_composite``): which bit-exact model
(``composite/sim/``: the order of each sum, the elementwise functions, the step forms) reproduces a softmax,
log_softmax, logsumexp, rms_norm or layer_norm kernel's outputs. Owns the candidate models (``models.py``), the
drawn rows that tell models apart (``pool.py``), the search (``search.py``) and its report (``report.py``). Imports
core, models and composite's ``sim``; imported by the ``composite`` namespace and by invariance.
"""
