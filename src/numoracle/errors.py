"""numoracle's own exception types.

Every user error numoracle raises is a ``ValueError`` or ``TypeError`` (or a subclass of one),
so ``except ValueError`` keeps working; the classes here let callers (and the command line)
tell numoracle's refusals from other failures.

* :class:`NumoracleError` (a ``ValueError``): an argument numoracle refuses; the message names
  the argument and the fix.
* :class:`ArgumentTypeError` (a ``NumoracleError`` and a ``TypeError``): an argument of the wrong
  type (a string where a bool belongs, a float where an int does).
* :class:`ParseError` (a ``NumoracleError``): text that is not a number numoracle reads, or
  one past a documented limit (the limit is in the message).
"""

from __future__ import annotations

__all__ = ["NumoracleError", "ParseError", "ArgumentTypeError"]


class NumoracleError(ValueError):
    """An argument numoracle refuses; the message names the argument and the fix."""


class ParseError(NumoracleError):
    """Text that is not a number numoracle reads (or one past a documented limit)."""


class ArgumentTypeError(NumoracleError, TypeError):
    """An argument of the wrong type (both a ValueError and a TypeError, so either ``except`` catches it)."""
