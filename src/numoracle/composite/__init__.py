"""Composite operations (``numoracle.composite``): softmax, log-sum-exp, cross-entropy, layer / RMS norms and
attention: exact references correctly rounded to an output format, their error bounds, and order-controlled
bit-exact models of what a kernel computes (``sim/``; torch's CPU kernels as models: ``sim/torchcpu.py``, its
attention: ``sim/torchattn.py``).

The references decide each element by Ziv's strategy (``ziv.py``: a float64 value with a rigorous error bound,
decided by the engine, else an interval retry in mpmath); the bounds are registered with
``expected_error_bound`` ("softmax", "logsumexp", "layernorm", ... : ``register.py``, imported here and by the
facade's first load). The checks built on them are in ``numoracle.testing``. See docs/composite.md. Imports core,
exact, models and bounds; imported by testing and above.
"""

from ..core.lazy import names_from as _from
from ..core.lazy import namespace
from . import register as register  # noqa: F401  (the bound ops, registered with expected_error_bound at import)

API = {
    **_from(".softmax", "softmax_reference", "log_softmax_reference", "logsumexp_reference",
            "cross_entropy_reference"),
    **_from(".norms", "rms_norm_reference", "layer_norm_reference"),
    **_from(".attention", "attention_reference"),
    **_from(".boundbase", "CompositeBound"),
    **_from(".ulps", "ElementwiseError", "ELEMENTWISE"),
    **_from(".sim.model", "simulate_softmax", "simulate_log_softmax", "simulate_logsumexp", "simulate_layer_norm",
            "simulate_rms_norm"),
    **_from(".sim.moments", "rowwise_moments", "Moments"),
    **_from(".sim.elementwise", "exp_cr", "log_cr", "sqrt_cr", "rsqrt_cr", "rsqrt_div_sqrt", "sleef_expf_u10",
            "sleef_logf_u10", "torch_exp_u20", "torch_fexp_u20", "glibc_expf", "fma32"),
    **_from(".sim.torchcpu", "torch_cpu_softmax", "torch_cpu_log_softmax", "torch_cpu_layer_norm", "torch_cpu_rms_norm",
            "torch_softmax_order", "torch_softmax_exp"),
    **_from(".sim.jaxcpu", "jax_cpu_softmax", "jax_softmax_order", "jax_cpu_attention"),
    **_from(".sim.torchattn", "torch_cpu_sdpa", "torch_gemm_order", "torch_flash_exp", "torch_flash_modelled_rows"),
    **_from(".sim.attention", "simulate_attention"),
    **_from(".identify.search", "identify_composite"),
    **_from(".identify.report", "CompositeIdentifyReport", "CompositeCandidate"),
    **_from(".identify.models", "CompositeModel", "composite_models"),
    **_from(".identify.pool", "SeparatingRows"),
}

__all__, __getattr__, __dir__ = namespace(__name__, API)
