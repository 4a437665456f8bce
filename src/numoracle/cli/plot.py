"""``numoracle plot bound``: error bounds against emulated errors, as a figure, a CSV and a table.

    numoracle plot bound [--op dot] [--dtype bf16,fp16] [--acc fp32[,fp16]] [--order sequential,pairwise,blocked:128]
                         [--K 16:4096 | --K 64,256,4096] [--kind worst,probabilistic] [--data uniform,normal]
                         [--samples 8] [--seed 0] [--confidence 0.999] [--out FILE.png|.svg|.pdf] [--csv FILE.csv]

Prints the summary table (per curve and K: the bounds, the largest emulated errors, max/worst) and
the paths written. Without --out no figure is drawn (and matplotlib is not needed). User errors
raise ValueError (``numoracle.cli`` prints one line and exits with 2), a missing matplotlib included.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .text import jsonable

__all__ = ["add_plot_parsers", "parse_Ks"]

_MAX_K = 1 << 20


def _items(text: str, what: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise ValueError(f"--{what} takes a comma-separated list with no empty items, got {text!r}")
    return items


def parse_Ks(text: str) -> list[int]:
    """``"16:4096"`` -> the powers of two from 16 to 4096; ``"100,1000"`` -> those values."""
    t = text.strip()
    if ":" in t:
        parts = t.split(":")
        try:
            lo, hi = (int(p) for p in parts)
        except ValueError:
            raise ValueError(f"--K takes LO:HI (powers of two, e.g. 16:4096) or a list like 64,256,4096; got "
                             f"{text!r}") from None
        for v in (lo, hi):
            if v < 1 or v & (v - 1):
                raise ValueError(f"--K {text}: the ends of a LO:HI range must be powers of two (e.g. 16:4096), "
                                 f"{v} is not; or give a list like 100,1000,4096")
        if lo > hi:
            raise ValueError(f"--K {text}: LO must not exceed HI (e.g. 16:4096)")
        Ks = [1 << e for e in range(lo.bit_length() - 1, hi.bit_length())]
    else:
        try:
            Ks = [int(v) for v in _items(t, "K")]
        except ValueError:
            raise ValueError(f"--K takes LO:HI (powers of two, e.g. 16:4096) or a list like 64,256,4096; got "
                             f"{text!r}") from None
        if any(k < 1 for k in Ks):
            raise ValueError(f"--K {text}: every K must be >= 1")
    if max(Ks) > _MAX_K:
        raise ValueError(f"--K {text}: K up to {_MAX_K} (2^20): larger K takes minutes and gigabytes")
    return Ks


def _cmd_plot_bound(args: argparse.Namespace) -> str:
    from ..plot import curves as plot

    if args.out is not None:
        out = Path(args.out)
        if out.suffix.lower() not in (".png", ".svg", ".pdf"):
            raise ValueError(f"--out {args.out}: name the figure *.png, *.svg or *.pdf")
        try:
            plot.require_matplotlib()  # before the work, not after
        except ImportError as e:
            raise ValueError(f"{e}; or drop --out to print the table only") from None
    if args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}")
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    data = plot.bound_curve_data(
        args.op, _items(args.dtype, "dtype"), _items(args.order, "order"), parse_Ks(args.K),
        acc=_items(args.acc, "acc"), kind=_items(args.kind, "kind"), samples=args.samples, seed=args.seed,
        data=_items(args.data, "data"), confidence=args.confidence)
    written = []
    if args.csv:
        Path(args.csv).write_text(data.to_csv(), encoding="utf-8")
        written.append(args.csv)
    if args.out:
        plot.plot_bound(data, args.out, title=args.title)
        written.append(args.out)
    if args.json:
        return json.dumps({"op": data.op, "Ks": list(data.Ks), "kinds": list(data.kinds),
                           "datasets": list(data.datasets), "samples": data.samples, "seed": data.seed,
                           "confidence": data.confidence, "rows": jsonable(data.rows()), "notes": list(data.notes),
                           "written": written}, indent=2)
    return "\n".join([data.table(), *(f"wrote {w}" for w in written)])


def add_plot_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``plot`` (with the figure ``bound``) to a subparsers object (``cli._parser`` calls this)."""
    p = sub.add_parser("plot", help="figures: error bounds against emulated errors (needs numoracle[plot])",
                       description="Figures made from numoracle's bounds and emulations.")
    figs = p.add_subparsers(dest="figure", required=True, parser_class=type(p), metavar="FIGURE")
    b = figs.add_parser("bound", help="relative error against K: bounds (lines) and emulated errors (markers)",
                        description="For every (dtype, accumulator, order) and K: the worst-case and probabilistic "
                        "coefficients of expected_error_bound and the errors of seeded random reductions emulated "
                        "bit for bit (numoracle.simulate), relative to sum|a_k b_k|. Example: numoracle plot bound "
                        "--dtype fp16 --acc fp32,fp16 --order sequential,pairwise,blocked:128 --K 16:4096 --out "
                        "bound.png")
    b.add_argument("--op", default="dot", metavar="OP", help="dot (default) or sum")
    b.add_argument("--dtype", default="bf16", metavar="FMT[,FMT]", help="input formats (default bf16)")
    b.add_argument("--acc", default="fp32", metavar="FMT[,FMT]", help="accumulator formats (default fp32)")
    b.add_argument("--order", default="sequential,pairwise,blocked:128", metavar="ORDER[,ORDER]",
                   help="sequential, pairwise, blocked:<b>, splitk:<s>[:pairwise], blockfma:<n>:<frac_bits>, "
                   "promoted:<every>:<n>:<frac_bits>, numpy, preset:<system> (default sequential,pairwise,"
                   "blocked:128)")
    b.add_argument("--K", default="16:4096", metavar="LO:HI|K,K",
                   help="reduction lengths: powers of two LO..HI, or a list (default 16:4096)")
    b.add_argument("--kind", default="worst,probabilistic", metavar="KIND[,KIND]",
                   help="bounds to show: worst, probabilistic (default both)")
    b.add_argument("--data", default="uniform,normal", metavar="SET[,SET]",
                   help="random data: uniform (U[0,1), no cancellation), normal (N(0,1)) (default both)")
    b.add_argument("--samples", type=int, default=8, metavar="N", help="reductions per K and data set (default 8)")
    b.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the random data (default 0)")
    b.add_argument("--confidence", type=float, default=0.999, metavar="P",
                   help="probability per element of the probabilistic bound (default 0.999)")
    b.add_argument("--out", metavar="FILE", help="write the figure (.png, .svg or .pdf; needs matplotlib)")
    b.add_argument("--csv", metavar="FILE", help="write the numbers as CSV")
    b.add_argument("--title", metavar="TEXT", help="figure title (default: what was emulated)")
    b.add_argument("--json", action="store_true", help="print the numbers as a JSON object instead of the table")
    b.set_defaults(run=_cmd_plot_bound)
