"""The exact conversion engine: codes unpacked to an exact triple, rounded and packed again in numbered steps
(docs/semantics.md), and the vectorised ``cast`` / ``decode`` / ``encode`` built on it.

Imports ``core.formats`` and the base modules; the fast lanes and the compiled kernels are chosen here.
"""
