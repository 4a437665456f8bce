"""numoracle's exception types, in one place (every layer raises these; none imports a higher layer for them).

- ``NumoracleError`` (a ``ValueError``): numoracle refuses an argument or an input; the message names the
  argument and the fix. ``ArgumentTypeError`` (also a ``TypeError``): an argument of the wrong type (a string
  where a bool belongs). ``ParseError``: text that is not a number numoracle reads, or past a documented limit.
  Every user error is a ``ValueError`` or ``TypeError``, so ``except ValueError`` keeps working.
  ``FlushToZeroError``: the calling thread flushes subnormals (FTZ / DAZ), which exact steps cannot run in
  (core/fpmode.py).
- ``NumoracleAssertionError`` (an ``AssertionError``): a numoracle ``assert_*`` check failed; the message is the
  report's text and ``.report`` the report object. numoracle's pytest plugin shows such failures as their
  report, without numoracle's own frames in the traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["NumoracleError", "ParseError", "ArgumentTypeError", "FlushToZeroError", "NumoracleAssertionError",
           "failure_message"]


class NumoracleError(ValueError):
    """numoracle refuses an argument or input; the message says which and what to do instead."""


class ParseError(NumoracleError):
    """Text that is not a number numoracle reads (or one past a documented limit, named in the message)."""


class ArgumentTypeError(NumoracleError, TypeError):
    """An argument of the wrong type (both a ValueError and a TypeError, so either ``except`` catches it)."""


class FlushToZeroError(NumoracleError):
    """The calling thread flushes subnormals (FTZ / DAZ mode): numoracle's exact results need IEEE arithmetic."""


class NumoracleAssertionError(AssertionError):
    """A numoracle ``assert_*`` check failed: the message is the report's text, ``.report`` the report object.

    Raised by the closeness checks, the quantization checks, chain assertions, sweeps and goldens.
    """

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


def failure_message(text: str, msg: str | Callable[[str], str] | None) -> str:
    """The message of a failed ``assert_*``: ``msg`` called on the report's text, or put above it.

    As in ``torch.testing.assert_close``, a callable gets the generated message and returns the one
    to show; a string is shown first (torch shows only the string; here the report follows it).
    """
    if msg is None:
        return text
    if callable(msg):
        return str(msg(text))
    if isinstance(msg, str):
        return f"{msg}\n{text}"
    raise TypeError(f"msg must be a str or a callable taking the report's text, got {type(msg).__name__}")
