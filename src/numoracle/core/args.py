"""Strict argument checks shared by the public functions: a bool is a bool, an int is an int.

Python would take ``ftz="no"`` as true and ``sr_bits=True`` as 1; numoracle refuses both,
naming the argument and what it takes. numpy's ``bool_`` and integer scalars are accepted as
what they are.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from .errors import ArgumentTypeError, NumoracleError

__all__ = ["check_bool", "check_int", "check_choice", "check_number", "check_array", "refuse_both", "takes_value"]


def check_bool(x: Any, name: str) -> bool:
    """``x`` as a bool; refuses anything that is not a Python or numpy bool (strings, ints, None)."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    raise ArgumentTypeError(f"{name} must be True or False, got {type(x).__name__} {x!r:.40}")


def check_int(x: Any, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """``x`` as an int in [lo, hi]; refuses bools, floats (even 2.0), strings and None."""
    count = lo == 0 and (hi is None or hi >= 2**62)
    what = "a count >= 0 (an int)" if count else "an int"
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise ArgumentTypeError(f"{name} must be {what}, got {type(x).__name__} {x!r:.40}")
    v = int(x)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        if count and v < 0:
            raise NumoracleError(f"{name} must be {what}, got {v}")
        lo_s = "" if lo is None else f"{lo:#x}" if lo > 2**16 else str(lo)
        hi_s = "" if hi is None else f"{hi:#x}" if hi > 2**16 else str(hi)
        raise NumoracleError(f"{name} must lie in [{lo_s}, {hi_s}], got {v:.6g}" if abs(v) > 2**64 else
                             f"{name} must lie in [{lo_s}, {hi_s}], got {v}")
    return v


def check_choice(x: Any, name: str, choices: Sequence[str]) -> str:
    """``x`` as one of the strings ``choices``; refuses anything else (other strings, arrays, None)."""
    if isinstance(x, str) and x in choices:
        return x
    got = repr(x) if isinstance(x, str) else f"{type(x).__name__} {x!r:.40}"
    raise (NumoracleError if isinstance(x, str) else ArgumentTypeError)(
        f"{name} must be one of {', '.join(repr(c) for c in choices)}, got {got}")


def check_number(x: Any, name: str, lo: float = 0.0, hi: float = math.inf) -> float:
    """``x`` as a float in (lo, hi]; refuses bools, strings, complex numbers, arrays and NaN."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a number, got {type(x).__name__} {x!r:.40}")
    try:
        v = float(x)
    except OverflowError:  # an int past float's range
        v = math.inf if cast(int, x) > 0 else -math.inf
    if not lo < v <= hi:
        raise NumoracleError(f"{name} must be a number in ({lo:g}, {hi:g}], got {x!r:.40}")
    return v


def check_array(x: Any, name: str, dtype: Any = None) -> np.ndarray:
    """``x`` as a numpy array of real numbers (ints or floats; ml_dtypes floats too), converted to ``dtype`` if
    given; refuses ragged lists, strings, bools, complex numbers and objects, naming ``name``."""
    try:
        a = np.asarray(x)
    except (ValueError, TypeError) as e:
        raise NumoracleError(f"{name} must be an array of numbers, got {type(x).__name__} ({e})") from None
    ok = a.dtype.kind in "iuf"
    if a.dtype.kind == "V":  # ml_dtypes' floats (bfloat16, float8_*) convert to float64; other records do not
        try:
            a.astype(np.float64)
            ok = True
        except (ValueError, TypeError):
            ok = False
    if not ok:
        raise ArgumentTypeError(f"{name} must be an array of real numbers, got {type(x).__name__} of dtype {a.dtype}")
    return a if dtype is None else a.astype(dtype)


def refuse_both(fn_name: str, value_label: str, var: str, given: Sequence[str]) -> None:
    """A function that takes a frozen value (an Arithmetic, a QuantRecipe) in place of some of its keywords:
    refuse a call that gives the value and any of those keywords (``given``), saying how to change the value
    instead (``var.replace(name=...)``)."""
    if given:
        change = ", ".join(f"{n}=..." for n in given)
        raise TypeError(f"{fn_name}: give either {value_label} or the keywords {', '.join(given)}, not both "
                        f"(to change the {var}, pass {var}.replace({change}))")


def takes_value(param: str, cls: type, unfold: Callable[[str, inspect.BoundArguments, Any], None], *,
                strict: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Let a function take a frozen value (an Arithmetic, a QuantRecipe) in parameter ``param`` for some of its
    keywords: the one place a value object is unfolded for every function that takes one.

    When the call gives ``param`` an instance of ``cls``, ``unfold(function name, bound arguments, value)`` rewrites
    the bound arguments (refusing, with :func:`refuse_both`, a keyword given twice) and the function is called with
    them; otherwise it is called as it was. ``strict``: the TypeError message for a ``param`` that is neither None
    nor a ``cls``."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind_partial(*args, **kwargs)
            value = bound.arguments.get(param)
            if not isinstance(value, cls):
                if strict and value is not None:
                    raise TypeError(f"{strict}, got {type(value).__name__}")
                return fn(*args, **kwargs)
            unfold(fn.__name__, bound, value)
            return fn(*bound.args, **bound.kwargs)

        return wrapper

    return deco
