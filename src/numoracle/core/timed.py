"""A call of a black-box function that is waited for at most so long: a kernel that hangs is reported, never
waited for (reveal's first call, the invariance checks' calls)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["CallTimedOut", "call_within"]


class CallTimedOut(Exception):
    """The function had not returned when the time was up (its thread is left to finish: it cannot be stopped)."""


def call_within(fn: Callable[..., Any], args: tuple, seconds: float) -> Any:
    """``fn(*args)`` run in a daemon thread and waited for at most ``seconds``: its result, the exception it raised
    (re-raised here), or :class:`CallTimedOut`."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["out"] = fn(*args)
        except Exception as e:  # re-raised in the caller's thread
            box["err"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(seconds)
    if th.is_alive():
        raise CallTimedOut(f"no return within {seconds} s")
    if "err" in box:
        raise box["err"]
    return box["out"]
