"""``numoracle reveal``: the exact accumulation order of a kernel, found by calling it on crafted inputs.

    numoracle reveal MODULE:FUNCTION OP [--n N | --shape M,K,N] [--dtype FMT] [--max-calls N] [--max-seconds S]
                     [--no-verify] [--order-out PATH] [--draw PATH] [--json]

MODULE is an importable module (``numpy``, ``mypkg.kernels``) or a ``.py`` file; FUNCTION a name in it (dots
for attributes: ``numpy:sum``, ``kernels.py:my_sum``). Prints :class:`numoracle.reveal.RevealReport`; the exit status is
0 when the revealed order reproduces the kernel bit for bit on fresh random data, 1 when it does not (or the
kernel is not deterministic or not a tree), 2 on a usage error or a kernel that cannot be probed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..models.orders.text import order_text
from ..reveal.report import reveal_order
from .argtypes import positive

__all__ = ["add_reveal_parsers", "load_function"]


def load_function(spec: str) -> Callable:
    """``MODULE:FUNCTION`` or ``FILE.py:FUNCTION`` -> the callable."""
    mod_name, sep, attr = spec.rpartition(":")
    if not sep or not mod_name or not attr:
        raise ValueError(f"give the kernel as MODULE:FUNCTION (e.g. numpy:sum or kernels.py:my_sum), got {spec!r}")
    if mod_name.endswith(".py"):
        path = Path(mod_name)
        if not path.is_file():
            raise ValueError(f"no file {mod_name!r}")
        loader = importlib.util.spec_from_file_location(path.stem, path)
        if loader is None or loader.loader is None:
            raise ValueError(f"cannot import {mod_name!r}")
        module: Any = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            raise ValueError(f"cannot import module {mod_name!r}: {e}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{mod_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{spec} is not callable")
    return obj


def _shape(text: str) -> tuple[int, int, int]:
    try:
        s = tuple(int(x) for x in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must be M,K,N (e.g. 16,1024,16), got {text!r}") from None
    if len(s) != 3 or min(s) < 1:
        raise argparse.ArgumentTypeError(f"shape must be three positive sizes M,K,N, got {text!r}")
    return s  # type: ignore[return-value]


def _to_json(rep: Any) -> str:
    return json.dumps({
        "op": rep.op, "n": rep.n, "shape": rep.shape, "dtype": rep.dtype, "out_format": rep.out_format,
        "verdict": rep.verdict, "verified": rep.verified, "calls": rep.calls, "tree_calls": rep.tree_calls,
        "node_calls": rep.node_calls, "verify_calls": rep.verify_calls,
        "carry_calls": rep.carry_calls, "fprev_basic_calls": rep.fprev_basic_calls,
        "probes_per_call": rep.probes_per_call,
        "seconds": round(rep.seconds, 3), "trees": rep.trees,
        "mismatches": {k: {"differ": b, "compared": t} for k, (b, t) in rep.mismatches.items()},
        "order": None if rep.order is None else order_text(rep.order), "notes": rep.notes}, indent=1)


def _cmd_reveal(args: argparse.Namespace) -> tuple[str, int]:
    if args.op == "matmul" and args.shape is None:
        raise ValueError("reveal matmul needs --shape M,K,N")
    if args.op != "matmul" and args.n is None:
        raise ValueError(f"reveal {args.op} needs --n N (the number of terms)")
    fn = load_function(args.kernel)
    rep = reveal_order(fn, args.op, n=args.n, shape=args.shape, dtype=args.dtype, max_calls=args.max_calls,
                       max_seconds=args.max_seconds, verify=not args.no_verify, seed=args.seed,
                       **({"rows": args.rows} if args.rows else {}))
    if args.order_out and rep.order is not None:
        Path(args.order_out).write_text(order_text(rep.order) + "\n")
    if args.draw and rep.order is not None:
        import matplotlib

        matplotlib.use("Agg")
        o: Any = rep.order
        ax = (o.orders[0] if hasattr(o, "orders") else o).draw()
        ax.figure.savefig(args.draw, dpi=120, bbox_inches="tight")
    text = _to_json(rep) if args.json else str(rep)
    return text, 0 if rep.verified or (args.no_verify and rep.order is not None) else 1


_DESCRIPTION = (
    "Calls the kernel on crafted inputs (+M and -M among units: the output counts the "
    "terms outside the smallest subtree holding the two) to find its summation tree, probes "
    "each node's format and rounding and each fused node's parameters, and checks the order "
    "on fresh random data. Example: numoracle reveal numpy:sum sum --n 4096. Exit status: 0 "
    "when the order reproduces the kernel bit for bit, 1 when it does not, 2 on an error."
)


def add_reveal_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``reveal`` to a subparsers object (``cli._parser`` calls this)."""
    s = sub.add_parser("reveal", help="find a kernel's exact accumulation order by probing it",
                       description=_DESCRIPTION)
    s.add_argument("kernel", metavar="MODULE:FUNCTION", help="the kernel: fn(x[n]), fn(a[n], b[n]) or fn(A, B)")
    s.add_argument("op", choices=("sum", "dot", "matmul"), help="what the kernel computes")
    s.add_argument("--n", type=positive, metavar="N", help="sum / dot: the number of terms")
    s.add_argument("--rows", type=positive, metavar="R", default=None,
                   help="sum: the kernel maps R independent rows, fn(x[R, n]) -> [R] (several probes a call)")
    s.add_argument("--shape", type=_shape, metavar="M,K,N", help="matmul: A is M x K, B is K x N")
    s.add_argument("--dtype", default="fp32", metavar="FMT", help="input format (fp32, fp16, bf16, fp8_e4m3fn, ...)")
    s.add_argument("--max-calls", dest="max_calls", type=positive, default=5_000_000, metavar="N",
                   help="call budget (default 5000000)")
    s.add_argument("--max-seconds", dest="max_seconds", type=float, default=600.0, metavar="S",
                   help="time budget in seconds (default 600)")
    s.add_argument("--no-verify", dest="no_verify", action="store_true", help="skip the check on random data")
    s.add_argument("--seed", type=int, default=0, help="seed of the random data (default 0)")
    s.add_argument("--order-out", dest="order_out", metavar="PATH", help="write the order's text (orders.parse "
                   "reads it back) to PATH")
    s.add_argument("--draw", metavar="PATH", help="save a picture of the tree (or its depth histogram) to PATH "
                   "(needs matplotlib)")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.set_defaults(run=_cmd_reveal)
