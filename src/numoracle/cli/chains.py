"""Command-line subcommands for cast chains: ``numoracle chain`` and ``numoracle chains``."""

from __future__ import annotations

import argparse
import json

from ..chains.prove import classify_cast_chain
from ..chains.search import candidate_chains
from ..core.formats.format import format_of
from ..core.progress import progress
from .argtypes import positive

__all__ = ["add_chain_parsers"]


def _split(text: str | None, option: str) -> list[str] | str | None:
    if text is None:
        return None
    parts = [t.strip() for t in text.split(",")]
    if not all(parts):
        raise ValueError(f"{option} {text!r} has an empty entry; give one value, or one per hop separated by commas")
    return parts if len(parts) > 1 else parts[0]




def _cmd_chain(args: argparse.Namespace) -> tuple[str, int]:
    if len(args.formats) < 2:
        raise ValueError("numoracle chain needs at least two formats: SRC [HOP ...] DST, e.g. int32 fp32 fp16")
    v = classify_cast_chain(*args.formats, rounding=_split(args.rounding, "--rounding") or "rne",
                            overflow=_split(args.overflow, "--overflow"),
                            ftz=args.ftz, method="exhaustive" if args.exhaustive else "auto")
    status = 1 if args.check and not v.equivalent else 0  # --check: a CI step fails on a chain that differs
    if args.json:
        return json.dumps(v.to_dict(), indent=2), status
    if args.markdown:
        return v.to_markdown(), status
    return str(v), status


def _cmd_chains(args: argparse.Namespace) -> str:
    via = [format_of(f) for f in (args.via.split(",") if args.via else [])]
    src, dst = format_of(args.src), format_of(args.dst)
    modes = _split(args.modes, "--modes")
    modes = modes if isinstance(modes, list) else [modes]
    lines, verdicts = [], []
    cands = list(candidate_chains(src, dst, via, modes=modes, final=args.rounding, max_len=args.max_len))
    for path, rounding in progress(cands, desc="chains", unit="chain"):
        v = classify_cast_chain(*path, rounding=rounding, ftz=args.ftz)
        verdicts.append(v)
        mark = "EQUAL " if v.equivalent else "differ"
        extra = v.reason if v.equivalent else f"{v.reason}; witness {v.witness.describe(v.spec)}"
        lines.append(f"{mark}  {v.chain}  ({extra})")
    n_eq = sum(v.equivalent for v in verdicts)
    if args.json:
        return json.dumps({"src": src.name, "dst": dst.name, "via": [f.name for f in via], "rounding": args.rounding,
                           "modes": modes, "n_chains": len(verdicts), "n_equal": n_eq,
                           "chains": [v.to_dict() for v in verdicts]}, indent=2)
    through = f"via {', '.join(f.name for f in via)}" if via else "with no intermediate format (the direct cast only)"
    head = (f"{n_eq} of {len(lines)} chains from {src.name} to {dst.name} {through} "
            f"equal the direct cast ({args.rounding}); intermediate modes tried: {', '.join(modes)}")
    return "\n".join([head, *lines])


def add_chain_parsers(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("chain", help="prove a cast chain equals the direct cast, or give the smallest witness",
                       description="SRC HOP ... DST: e.g. `numoracle chain int32 fp32 fp16`.")
    c.add_argument("formats", nargs="+", metavar="FMT", help="the source, each intermediate, and the destination")
    c.add_argument("--rounding", metavar="R[,R...]", help="one mode, or one per hop (default rne)")
    c.add_argument("--overflow", metavar="O[,O...]", help="one policy, or one per hop (default: each format's)")
    c.add_argument("--ftz", action="store_true", help="flush subnormal results to zero at every hop")
    c.add_argument("--exhaustive", action="store_true", help="enumerate every source code (sources <= 32 bits)")
    out = c.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the verdict as JSON")
    out.add_argument("--markdown", action="store_true", help="print the verdict as Markdown")
    c.add_argument("--check", action="store_true", help="exit with status 1 when the chain differs (for CI)")
    c.set_defaults(run=_cmd_chain)
    s = sub.add_parser("chains", help="which chains of offered casts equal the direct cast",
                       description="Tries every chain from --from to --to through the --via formats (each hop "
                       "offered in --modes; the last hop uses --rounding) and classifies each.")
    s.add_argument("--from", dest="src", required=True, metavar="FMT", help="source format")
    s.add_argument("--to", dest="dst", required=True, metavar="FMT", help="destination format")
    s.add_argument("--via", default="", metavar="FMT[,FMT...]",
                   help="intermediate formats the chains may pass through (default: none)")
    s.add_argument("--modes", default="rne,rto", metavar="R[,R...]", help="modes of intermediate hops (rne,rto)")
    s.add_argument("--rounding", default="rne", metavar="R", help="mode of the direct cast and the last hop")
    s.add_argument("--max-len", dest="max_len", type=positive, default=3, metavar="N",
                   help="most hops per chain (3)")
    s.add_argument("--ftz", action="store_true", help="flush subnormal results to zero at every hop")
    s.add_argument("--json", action="store_true", help="print a JSON object")
    s.set_defaults(run=_cmd_chains)
