"""The simulation engine: an order's schedule compiled to typed steps, run on exact values (the numpy
reference of every step) or by a compiled kernel.

Imports ``models.orders`` and ``core``; ``simulate`` is its entry point.
"""
