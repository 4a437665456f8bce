"""Golden files (public path ``numoracle.golden``)."""

from .testing.golden import *  # noqa: F401,F403
from .testing.golden import __all__  # noqa: F401
