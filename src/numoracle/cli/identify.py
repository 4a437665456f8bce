"""``numoracle identify``: which accumulation order reproduces a kernel's recorded outputs.

    numoracle identify OP OUTPUT INPUT [INPUT] [--format FMT] [--out FMT] [--acc FMT] [--outputs N]
                       [--rows N] [--prune-rows N] [--json | --markdown]

OUTPUT and INPUT are ``PATH.npy`` or ``PATH.npz:KEY`` (the layout ``numoracle.testing.record`` writes:
``rec.npz:fp16_128x4096x128_randn__A``). Integer arrays hold codes: of ``--format`` for inputs, of
``--out`` for outputs. Prints :class:`numoracle.identify.IdentifyReport`; the exit status is 0 when an
order reproduces every element, 1 when none does, 2 on a usage error (through ``numoracle.cli``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ..core.formats.format import format_of
from ..core.formats.interop import as_native
from ..identify.search import identify_order
from .argtypes import positive

__all__ = ["add_identify_parsers", "load_array"]


def load_array(spec: str, fmt: str | None, what: str) -> np.ndarray:
    """``PATH.npy`` or ``PATH.npz:KEY`` as a native array; integer arrays are codes of ``fmt``."""
    path, _, key = spec.partition(".npz:")
    if key:
        path += ".npz"
    if not Path(path).is_file():
        raise ValueError(f"{what}: no file {path!r} (give PATH.npy or PATH.npz:KEY)")
    if key:
        with np.load(path) as d:
            if key not in d.files:
                raise ValueError(f"{what}: {path} has no key {key!r}; keys: {', '.join(sorted(d.files)[:12])}")
            arr = d[key]
    elif path.endswith(".npz"):
        raise ValueError(f"{what}: name the array in the .npz as {path}:KEY")
    else:
        arr = np.load(path)
    if arr.dtype.kind in "iu":
        if fmt is None:
            raise ValueError(f"{what} holds integer codes ({arr.dtype}); say their format with "
                             f"{'--out' if what == 'OUTPUT' else '--format'} (e.g. fp16, bf16, fp8_e4m3fn)")
        f = format_of(fmt)
        return as_native(arr.view(np.dtype(f"u{arr.dtype.itemsize}")), f)
    return arr


def _cmd_identify(args: argparse.Namespace) -> tuple[str, int]:
    need = 1 if args.op == "sum" else 2
    if len(args.inputs) != need:
        raise ValueError(f"identify {args.op} takes {need} INPUT array(s), got {len(args.inputs)}")
    ins = [load_array(s, args.format, f"INPUT {i + 1}") for i, s in enumerate(args.inputs)]
    actual = load_array(args.output, args.out, "OUTPUT")
    rows = None if args.rows is None else np.arange(min(args.rows, actual.shape[0] if actual.ndim else 1))
    rep = identify_order(actual, args.op, *ins, acc=args.acc, out=args.out, rows=rows, prune_rows=args.prune_rows,
                         outputs=args.outputs)
    text = rep.to_json() if args.json else rep.to_markdown() if args.markdown else str(rep)
    return text, 0 if rep.order is not None else 1




_DESCRIPTION = (
    "Simulates candidate orders (GPU block FMAs, split-K slicings and their "
    "combines, torch's CUDA reduction trees, sequential, pairwise, ...) on the inputs and ranks "
    "them by the fraction of output elements they reproduce bit for bit. Example: numoracle "
    "identify matmul rec.npz:fp16_128x4096x128_randn__torch_mm_out_fp32 rec.npz:fp16_128x4096x"
    "128_randn__A rec.npz:fp16_128x4096x128_randn__B --format fp16. Exit status: 0 when an "
    "order reproduces every element, 1 when none does, 2 on a usage error."
)


def add_identify_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``identify`` to a subparsers object (``cli._parser`` calls this)."""
    s = sub.add_parser("identify", help="find the accumulation order that reproduces a kernel's outputs",
                       description=_DESCRIPTION)
    s.add_argument("op", choices=("matmul", "dot", "sum"), help="what the kernel computed (sum: over the last axis)")
    s.add_argument("output", metavar="OUTPUT", help="the kernel's outputs: PATH.npy or PATH.npz:KEY")
    s.add_argument("inputs", nargs="+", metavar="INPUT", help="its inputs (A B for matmul/dot, X for sum)")
    s.add_argument("--format", metavar="FMT", help="format of integer-coded inputs (fp16, bf16, fp8_e4m3fn, ...)")
    s.add_argument("--out", metavar="FMT", help="format the outputs were rounded to (default: OUTPUT's dtype); "
                   "integer-coded OUTPUT holds codes of it")
    s.add_argument("--acc", default="fp32", metavar="FMT", help="accumulator where an order fixes none (default fp32)")
    s.add_argument("--outputs", type=positive, metavar="N", help="sum: how many sums the kernel's launch computed "
                   "(torch picks its reduction tree by it; default: the rows given)")
    s.add_argument("--rows", type=positive, metavar="N", help="use only the first N output rows")
    s.add_argument("--prune-rows", dest="prune_rows", type=positive, default=8, metavar="N",
                   help="rows each candidate is first scored on (default 8)")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the report as JSON")
    fmt.add_argument("--markdown", action="store_true", help="print the report as Markdown")
    s.set_defaults(run=_cmd_identify)
