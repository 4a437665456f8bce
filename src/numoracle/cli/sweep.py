"""``numoracle sweep``: a library's cast against the engine over many source codes.

    numoracle sweep fp32 fp8_e4m3fn --against ml_dtypes|torch|numpy [--inputs exhaustive|boundary|N]
                    [--rounding R] [--overflow O] [--nan-to P] [--ftz] [--daz] [--workers N] [--chunk C]
                    [--seed S] [--witnesses K] [--timeout S] [--json | --markdown] [--progress | --no-progress]

Prints the report (:class:`numoracle.conformance.SweepReport`); its second line is the verdict (CLEAN,
EXPLAINED, UNEXPLAINED or ERROR). The exit status is 0 for CLEAN and EXPLAINED, 1 for
UNEXPLAINED and ERROR (so a CI step fails on what no known deviation explains); user errors (an
unknown format or library, a cast the library lacks, exhaustive inputs for a 64-bit source) exit
with 2 through ``numoracle.cli``. ``--inputs`` defaults to ``exhaustive`` for sources of 32 bits
or fewer and to ``boundary`` for wider ones.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
from typing import Any

from ..conformance.deviations import LIBRARIES
from ..conformance.sweeper import sweep
from ..core.formats.format import format_of
from .argtypes import count, positive

__all__ = ["add_sweep_parsers"]


def _inputs(text: str | None, src_bits: int) -> str | int:
    if text is None:
        return "exhaustive" if src_bits <= 32 else "boundary"
    t = text.strip().lower()
    if t in ("exhaustive", "boundary"):
        return t
    n = count(t)
    if n is None:
        raise ValueError(f"--inputs takes exhaustive, boundary or a count N >= 1 (e.g. 1000000 or 1e6), got {text!r}")
    return n




def _against(text: str) -> Any:
    """A library name, or ``module:function`` naming a converter (native array of SRC -> array of DST)."""
    if text in LIBRARIES:
        return text
    mod, sep, name = text.partition(":")
    if not sep or not mod or not name:
        raise ValueError(f"--against takes {', '.join(LIBRARIES)} or module:function (a converter), got {text!r}")
    _cwd_importable()
    try:
        fn = getattr(importlib.import_module(mod), name)
    except ImportError as e:
        raise ValueError(f"--against {text}: cannot import {mod!r} ({e})") from None
    except AttributeError:
        raise ValueError(f"--against {text}: module {mod!r} has no {name!r}") from None
    if not callable(fn):
        raise ValueError(f"--against {text}: {name} is not callable")
    return fn


def _cwd_importable() -> None:
    """Put the current directory first on sys.path, as ``python -m`` does (the ``numoracle`` script has its own
    folder there instead), so MODULE may be a file here; the sweep's spawned workers inherit sys.path."""
    cwd = os.getcwd()
    if not any(os.path.abspath(p or os.curdir) == cwd for p in sys.path):
        sys.path.insert(0, cwd)


def _cmd_sweep(args: argparse.Namespace) -> tuple[str, int]:
    src = format_of(args.src)
    r = sweep(_against(args.against), src, args.dst, inputs=_inputs(args.inputs, src.bits), rounding=args.rounding,
              overflow=args.overflow, nan_to=args.nan_to, ftz=args.ftz, daz=args.daz, workers=args.workers,
              chunk=args.chunk, progress=args.progress, seed=args.seed, witnesses=args.witnesses,
              timeout=args.timeout)
    status = 1 if r.verdict in ("unexplained", "error") else 0  # a CI step fails on what no deviation explains
    if args.json:
        return r.to_json(), status
    if args.markdown:
        return r.to_markdown(), status
    return str(r), status


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not 0 < v < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return v




_DESCRIPTION = (
    "Runs LIBRARY's own cast SRC -> DST over the inputs, compares every code with "
    "numoracle's and classifies the mismatches (NaN payload, saturation, double rounding, ...), "
    "marking those a known deviation of the library explains. Example: numoracle sweep fp32 "
    "fp8_e4m3fn --against torch. Exit status: 0 when every mismatch is a known deviation (or "
    "there is none), 1 when some mismatch is unexplained or the converter failed, 2 on a usage "
    "error."
)


def add_sweep_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``sweep`` to a subparsers object (``cli._parser`` calls this)."""
    s = sub.add_parser("sweep", help="compare a library's cast with numoracle over many source codes",
                       description=_DESCRIPTION)
    s.add_argument("src", metavar="SRC", help="source format (its codes are the inputs)")
    s.add_argument("dst", metavar="DST", help="destination format")
    s.add_argument("--against", required=True, metavar="|".join(LIBRARIES) + "|MODULE:FUNCTION",
                   help="the library whose cast is swept, or a converter function (importable: native array of "
                   "SRC -> array of DST)")
    s.add_argument("--inputs", metavar="exhaustive|boundary|N",
                   help="every code (default for sources <= 32 bits), the boundary values (default for wider "
                   "ones), or N seeded random codes, half of them near DST's rounding ties")
    s.add_argument("--rounding", default="rne", metavar="R", help="numoracle's rounding mode (default rne)")
    s.add_argument("--overflow", metavar="O", help="numoracle's overflow policy (default: DST's)")
    s.add_argument("--nan-to", dest="nan_to", metavar="P", help="NaN into formats without NaN: max|zero|min")
    s.add_argument("--ftz", action="store_true", help="numoracle flushes subnormal results to zero")
    s.add_argument("--daz", action="store_true", help="numoracle reads subnormal inputs as zero")
    s.add_argument("--workers", type=positive, metavar="N", help="worker processes (default: CPU count)")
    s.add_argument("--chunk", type=positive, default=1 << 24, metavar="C", help="inputs per task (default 2^24)")
    s.add_argument("--seed", type=int, default=0, help="seed of --inputs N (default 0)")
    s.add_argument("--witnesses", type=int, default=4, metavar="K", help="witnesses kept per class (default 4)")
    s.add_argument("--timeout", type=_seconds, metavar="S", help="seconds one chunk may take; a chunk past it is "
                   "a converter fault and its worker is killed (default: no limit)")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the report as JSON")
    fmt.add_argument("--markdown", action="store_true", help="print the report as Markdown")
    prog = s.add_mutually_exclusive_group()
    prog.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="progress bar on stderr (default: when stderr is a terminal and NUMORACLE_PROGRESS "
                      "is not 0)")
    prog.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    s.set_defaults(run=_cmd_sweep)
