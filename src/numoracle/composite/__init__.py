"""Composite operations: softmax, log-sum-exp, cross-entropy, layer / RMS norms, attention (references, bounds).

``reference.py``-style modules give each operation's exact result correctly rounded to an output format (Ziv's
strategy: a float64 value with a rigorous error bound, decided by the engine, else an interval retry in mpmath);
``bounds.py`` registers their error bounds with ``expected_error_bound``. See docs/composite.md.
"""

from . import register as register  # noqa: E402  (the bound ops, registered with expected_error_bound at import)
