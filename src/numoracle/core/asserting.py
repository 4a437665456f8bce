"""``assert_X`` made from ``check_X``: the check's parameters, ``msg=`` and ``verbose=``; raises unless it passed.

Every assertion of the package is ``assert_x = asserting(check_x)``: its signature is the check's (editors and
``help()`` show every parameter) plus the two keywords below, so the parameters are written once, in the check.
A check's report says how it fails: ``report.failure(msg, verbose)`` is the exception to raise.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["asserting"]

_EXTRA = (
    inspect.Parameter("msg", inspect.Parameter.KEYWORD_ONLY, default=None,
                      annotation="str | Callable[[str], str] | None"),
    inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, default=False, annotation="bool"),
)


def asserting(check: Callable[..., Any], name: str | None = None) -> Callable[..., Any]:
    """The assertion of ``check`` (named ``name``, default ``check``'s name with ``check_`` -> ``assert_``)."""
    name = name or check.__name__.replace("check_", "assert_", 1)

    def assertion(*args: Any, msg: Any = None, verbose: bool = False, **kwargs: Any) -> Any:
        __tracebackhide__ = True   # pytest shows the caller's line and the report, not this frame
        report = check(*args, **kwargs)
        if not report.passed:
            raise report.failure(msg, verbose)
        return report

    functools.update_wrapper(assertion, check)
    del assertion.__wrapped__   # its own signature, below, not the check's
    sig = inspect.signature(check)
    params = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    assertion.__signature__ = sig.replace(parameters=[*params, *_EXTRA])
    assertion.__name__ = assertion.__qualname__ = name
    assertion.__doc__ = (
        f":func:`{check.__name__}`; raises unless it passed (NumoracleAssertionError with the report), returns the "
        f"report.\n\nmsg: a string shown above the report, or a callable that gets the report's text and returns "
        f"the message (as ``torch.testing.assert_close`` takes it). verbose: the full report (its derivation) "
        f"instead of the compact one. The other parameters are :func:`{check.__name__}`'s.")
    return assertion
