"""Accumulation orders for :func:`numoracle.simulate` and the bounds (public path ``numoracle.orders``)."""

from .reduce.orders import *  # noqa: F401,F403
from .reduce.orders import __all__  # noqa: F401
