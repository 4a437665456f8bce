"""Progress bars for long work (tables, exhaustive chains, sweeps), on a terminal only.

One place decides whether a bar shows, and every long loop in numoracle asks it through
:func:`progress`. A bar is drawn with `tqdm <https://tqdm.github.io/>`_ on stderr when

* ``enable=True`` is passed, or
* ``enable`` is None (the default), the environment variable ``NUMORACLE_PROGRESS`` is not
  ``0``, and stderr is a terminal (``NUMORACLE_PROGRESS=1`` forces bars on even when it is not).

Otherwise (and when tqdm is not installed) :func:`progress` returns a silent stand-in with the
same methods, so callers never test for it. Bars are left off the screen when they finish.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["progress", "progress_enabled", "ENV"]

ENV = "NUMORACLE_PROGRESS"


def progress_enabled(enable: bool | None = None, stream: Any = None) -> bool:
    """Whether a progress bar shows: ``enable`` if given, else ``NUMORACLE_PROGRESS``, else stderr is a terminal."""
    if enable is not None:
        return bool(enable)
    env = os.environ.get(ENV, "").strip().lower()
    if env in ("0", "false", "no", "off"):
        return False
    if env in ("1", "true", "yes", "on"):
        return True
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class _Silent:
    """What :func:`progress` returns when no bar shows: iterates, counts, and draws nothing."""

    def __init__(self, iterable: Iterable[Any] | None, total: int | None) -> None:
        self.iterable, self.total, self.n = iterable, total, 0
        self.disable = True

    def __iter__(self) -> Iterator[Any]:
        if self.iterable is None:
            raise TypeError("this progress bar was made without an iterable; call update(n) instead")
        for x in self.iterable:
            yield x
            self.n += 1

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@functools.cache
def _bar_type(tqdm: type) -> type:
    """tqdm whose rate and time left show as ``?`` until ``eta_after`` units are done."""

    class Bar(tqdm):  # type: ignore[misc, valid-type]
        eta_after = 1

        @property
        def format_dict(self) -> dict[str, Any]:
            d = super().format_dict
            if self.n < self.eta_after:
                d["rate"] = 0  # tqdm shows '?' for a rate of 0, and for the time left
            return d

    return Bar


def progress(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str | None = None,
             unit: str = "it", enable: bool | None = None, eta_after: int = 1) -> Any:
    """A progress bar over ``iterable`` (or, without one, a bar advanced by ``.update(n)`` up to ``total``).

    ``enable``: True / False force the bar on / off; None (default) follows ``NUMORACLE_PROGRESS`` and
    whether stderr is a terminal. ``eta_after``: the rate and the time left show only once this many units
    are done (``?`` before): a pool of N workers finishes its first N chunks at about the same time, so a
    rate from fewer counts the pool's start-up and not its N workers (a time left N times too long). Use it as an
    iterator, or as a context manager with ``update``::

        for item in progress(items, desc="chains", unit="chain"): ...
        with progress(total=len(parts), desc="sweep", unit="chunk") as bar:
            ...; bar.update(1)
    """
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    if not progress_enabled(enable):
        return _Silent(iterable, total)
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is a dependency; a stripped environment still works, silently
        return _Silent(iterable, total)
    bar = _bar_type(tqdm)(iterable, total=total, desc=desc, unit=unit, file=sys.stderr, leave=False,
                          dynamic_ncols=True, mininterval=0.5)
    bar.eta_after = max(1, int(eta_after))
    return bar
