"""Transitional: the pytest plugin now lives in numoracle.testing.pytest_plugin."""

from .testing import pytest_plugin as _plugin

globals().update({k: v for k, v in vars(_plugin).items() if not k.startswith("__")})
