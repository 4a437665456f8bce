"""Error bounds: expected_error_bound, its components along an order's deepest path, the upward-rounded bound
arithmetic, and tolerances (a bound evaluated on data).

Reads orders only through their OrderSpec (models). Imports core and models.
"""

from ..core.lazy import namespace

API = {"ErrorBound": ".errorbound", "Tolerance": ".errorbound", "register_bound_op": ".expected"}

__all__, __getattr__, __dir__ = namespace(__name__, API)
