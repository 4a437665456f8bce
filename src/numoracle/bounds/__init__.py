"""Error bounds: expected_error_bound, its components along an order's deepest path, the upward-rounded bound
arithmetic, and tolerances (a bound evaluated on data).

Reads orders only through their OrderSpec (models). Imports core and models.
"""
