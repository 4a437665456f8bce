"""``numoracle invariance``: does a kernel's order for one output change with batch size, row or a parameter?

    numoracle invariance MODULE:FUNCTION OP --vary M=1:256 [--vary row=0:7 ...] --at K=4096 [--at N=16]
                         [--factory] [--dtype FMT] [--exhaustive] [--evidence match|reveal] [--max-seconds S]
                         [--call-seconds S] [--workers N] [--progress] [--json]

The kernel: ``fn(X[M, K]) -> [M]`` (sum over the last axis), ``fn(A[M, K], B[M, K]) -> [M]`` (dot, one per row)
or ``fn(A[M, K], B[K, N]) -> [M, N]`` (matmul) or ``fn(X[M, K]) -> [M, K]`` (softmax, log_softmax,
rms_norm, layer_norm: the watched row's outputs compared bit for bit, docs/invariance.md); with ``--factory``,
FUNCTION is ``make_fn(**params)`` and the axes other than M, row, K, N are its parameters. Prints a table of the
classes (configurations sharing one order), the thresholds and counterexamples; exit status 0 when INVARIANT, 1
otherwise (VARIANT, UNDETERMINED, NOT DETERMINISTIC), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..invariance.check import check_invariance
from ..invariance.composite import COMPOSITE_OPS
from ..invariance.report import InvarianceReport
from ..invariance.space import parse_range
from .reveal import load_function
from .text import table

__all__ = ["add_invariance_parsers"]


def _axis(text: str) -> tuple[str, list[int]]:
    name, sep, values = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"an axis is NAME=VALUES (M=1:256, row=0,3,7, K=4096), got {text!r}")
    try:
        return name.strip(), parse_range(values)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _spans(values: list[int]) -> str:
    """Sorted integers as runs: 1..3, 7, 9..12."""
    out, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}..{values[j]}")
        i = j + 1
    return ", ".join(out)


def class_table(rep: InvarianceReport) -> str:
    """One row per class: its order, where it was revealed, and the tried values of each varying axis in it."""
    rows = []
    for c in rep.classes:
        tried = "; ".join(f"{a}: {_spans(sorted({m.get(a) for m in c.members}))}" for a in rep.varying)
        rows.append([c.name, c.description, str(c.revealed_at), tried])
    composite = rep.op in COMPOSITE_OPS
    head = ["class", "outputs" if composite else "order", "first seen at" if composite else "revealed at", "tried"]
    return table(rows, head) if rows else "(no class: nothing was revealed)"


def _cmd_invariance(args: argparse.Namespace) -> tuple[str, int]:
    fn = load_function(args.kernel)
    vary, at = dict(args.vary or []), {n: (v[0] if len(v) == 1 else v) for n, v in (args.at or [])}
    if not vary:
        raise ValueError("give at least one --vary AXIS=VALUES (e.g. --vary M=1:256)")
    progress = (lambda s: print(s, file=sys.stderr)) if args.progress else False
    rep = check_invariance(None if args.factory else fn, args.op, make_fn=fn if args.factory else None, vary=vary,
                           at=at, dtype=args.dtype, exhaustive=args.exhaustive, evidence=args.evidence,
                           max_seconds=args.max_seconds, call_seconds=args.call_seconds, progress=progress,
                           seed=args.seed, workers=args.workers)
    status = 0 if rep.verdict == "INVARIANT" else 1
    if args.json:
        return json.dumps(rep.to_dict(), indent=1), status
    return f"{class_table(rep)}\n\n{rep}", status


def add_invariance_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``invariance`` to a subparsers object (``cli._parser`` calls this)."""
    s = sub.add_parser("invariance", help="is a kernel's order the same at every batch size, row and parameter?",
                       description="Reveals the watched row's order at the configurations that matter (ends, powers "
                       "of two, multiples of 8..128 and their neighbours, then bisection between different orders), "
                       "reports the classes, exact thresholds and a confirmed counterexample. Example: numoracle "
                       "invariance numpy:matmul matmul --vary M=1:256 --at K=256 --at N=16. Exit status: 0 "
                       "INVARIANT, 1 otherwise, 2 on an error.")
    s.add_argument("kernel", metavar="MODULE:FUNCTION", help="the kernel (or with --factory, make_fn(**params))")
    s.add_argument("op", choices=("sum", "dot", "matmul", *COMPOSITE_OPS), help="what the kernel computes")
    s.add_argument("--vary", type=_axis, action="append", metavar="AXIS=VALUES",
                   help="an axis that varies: M, row, K, N or a factory parameter; VALUES LO:HI, LO:HI:STEP or a,b,c")
    s.add_argument("--at", type=_axis, action="append", metavar="AXIS=VALUE", help="a fixed axis (K=4096, N=16)")
    s.add_argument("--factory", action="store_true", help="MODULE:FUNCTION is make_fn(**params) -> kernel")
    s.add_argument("--dtype", default="fp32", metavar="FMT", help="input format (fp32, bf16, fp16, ...)")
    s.add_argument("--exhaustive", action="store_true", help="try every configuration")
    s.add_argument("--evidence", choices=("match", "reveal"), default="match",
                   help="match: reveal only where no known order reproduces the kernel (default); reveal: everywhere")
    s.add_argument("--max-seconds", dest="max_seconds", type=float, default=600.0, metavar="S",
                   help="time budget of the whole check (default 600)")
    s.add_argument("--call-seconds", dest="call_seconds", type=float, default=60.0, metavar="S",
                   help="limit of each configuration's first call (default 60)")
    s.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    s.add_argument("--workers", type=int, default=0, metavar="N", help="spread the first configurations over N "
                   "processes (the kernel must be a module-level function; default 0: here)")
    s.add_argument("--progress", action="store_true", help="one line per configuration on stderr")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.set_defaults(run=_cmd_invariance)
