"""Hypothesis strategies over formats (public path ``numoracle.strategies``; needs hypothesis)."""

from .testing.strategies import *  # noqa: F401,F403
from .testing.strategies import __all__  # noqa: F401
