"""Command-line subcommands for error bounds: ``numoracle bound`` and ``numoracle tolerance``.

    numoracle bound matmul --dtype bf16 --acc fp32 -K 4096 [--order blocked:128] [--kind probabilistic]
                           [--out bf16] [--confidence 0.999] [--shape 64x64] [--json]
    numoracle tolerance matmul --dtype bf16 --acc fp32 -K 4096 [--max-abs 1,1 | --kappa 1]

Both return text; user errors raise ValueError (``numoracle.cli`` prints one line and exits with 2).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..bounds.expected import KINDS, OPS, ErrorBound, expected_error_bound

__all__ = ["add_bound_parsers"]


def _shape(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(t) for t in text.lower().replace("x", ",").split(",") if t.strip())
    except ValueError:
        raise ValueError(f"--shape takes sizes like 64x64 or 64,64, got {text!r}") from None


def _bound(args: argparse.Namespace) -> ErrorBound:
    return expected_error_bound(
        args.op, args.dtype, args.K, acc=args.acc, order=args.order, fma=not args.no_fma, kind=args.kind,
        confidence=args.confidence, out=args.out, inputs_rounded_from=args.inputs_from, shape=_shape(args.shape),
        rounding=args.rounding, out_rounding=args.out_rounding, tight_rn=args.tight_rn)


def _cmd_bound(args: argparse.Namespace) -> str:
    b = _bound(args)
    return json.dumps(b.to_dict(), indent=2) if args.json else str(b)


def _cmd_tolerance(args: argparse.Namespace) -> str:
    b = _bound(args)
    max_abs: Any = None
    if args.max_abs is not None:
        try:
            max_abs = [float(t) for t in args.max_abs.split(",")]
        except ValueError:
            raise ValueError(f"--max-abs takes one or two numbers (a,b), got {args.max_abs!r}") from None
    tol = b.rtol_atol(max_abs=max_abs, kappa=args.kappa)
    if args.json:
        return json.dumps({"rtol": tol.rtol, "atol": tol.atol, "coefficient": b.to_dict()["coefficient"],
                           "vacuous": b.vacuous, "assumptions": tol.assumptions.splitlines()}, indent=2)
    head = f"tolerance for {b._head()}"
    warn = ["WARNING: the bound is vacuous (c >= 1); this tolerance accepts anything of that size"] if b.vacuous else []
    return "\n".join([head, *warn, str(tol)])


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("op", metavar="OP", help=f"one of {', '.join(OPS)}")
    p.add_argument("--dtype", required=True, metavar="FMT", help="format of the inputs the kernel reads")
    p.add_argument("-K", "--K", dest="K", type=int, required=True, metavar="K", help="reduction length")
    p.add_argument("--acc", metavar="FMT", help="accumulator format (default: the input format)")
    p.add_argument("--order", metavar="ORDER", help="any (default), sequential, pairwise, blocked:<b>, splitk:<s>, "
                   "splitk:<s>:pairwise, blockfma:<n>:<frac_bits>, promoted:<every>:<n>:<frac_bits>")
    p.add_argument("--kind", default="worst", metavar="KIND", help=f"{' or '.join(KINDS)} (default worst)")
    p.add_argument("--confidence", type=float, default=0.999, metavar="P", help="for --kind probabilistic (0.999)")
    p.add_argument("--out", metavar="FMT", help="output storage format (one rounding at the end)")
    p.add_argument("--inputs-from", dest="inputs_from", metavar="FMT",
                   help="the format the inputs were rounded from (the reference uses the unrounded values)")
    p.add_argument("--shape", metavar="MxN", help="output shape, for the probabilistic union bound")
    p.add_argument("--rounding", default="rne", metavar="R", help="accumulator rounding mode (default rne)")
    p.add_argument("--out-rounding", dest="out_rounding", metavar="R", help="output rounding (default: --rounding)")
    p.add_argument("--no-fma", dest="no_fma", action="store_true", help="products rounded separately")
    p.add_argument("--tight-rn", dest="tight_rn", action="store_true",
                   help="also try the k*u bound (RN, one precision, sequential) and keep the smaller")
    p.add_argument("--json", action="store_true", help="print a JSON object")


def add_bound_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``bound`` and ``tolerance`` to a subparsers object (``cli._parser`` calls this)."""
    b = sub.add_parser("bound", help="error bound of a sum / dot / matmul (K-aware, order-aware)",
                       description="|y_hat - y| <= c * sum|a_k b_k| (+ u_out |y|): the coefficient, its components "
                       "and their sources. Example: numoracle bound matmul --dtype bf16 --acc fp32 -K 4096")
    _common(b)
    b.set_defaults(run=_cmd_bound)
    t = sub.add_parser("tolerance", help="rtol/atol for assert_close from the bound, with assumptions",
                       description="(rtol, atol) with the assumptions that make them valid. Without --max-abs or "
                       "--kappa, assumes no cancellation (kappa = 1).")
    _common(t)
    t.add_argument("--max-abs", dest="max_abs", metavar="A[,B]", help="bound on |inputs|: a guaranteed atol")
    t.add_argument("--kappa", type=float, metavar="KAPPA", help="assume sum|t| <= kappa |y| (default 1)")
    t.set_defaults(run=_cmd_tolerance)
