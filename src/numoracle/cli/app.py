"""The ``numoracle`` command: ``formats``, ``info``, ``cast``, ``chain(s)``, ``bound``, ``tolerance``, ``boundary``,
``sweep``, ``plot``, ``tables``.

Every number printed is exact: integers and short decimals as they are, other dyadic values
as ``m*2^e`` (or ``2^e``) with an approximation after ``≈``. Exit status: 0 done; 1 the command's
verdict failed (``sweep``); 2 a user error (an unknown format, a bad policy, a value that cannot be
parsed, a missing optional dependency), one line on stderr; 3 an internal error, one line asking for
a report; 130 interrupted (Ctrl-C). Never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.engine.convert import cast
from ..core.errors import ParseError
from ..core.formats.format import FP64, INT64, UINT64, AnyFormat, Format, format_of
from ..core.formats.policy import Flags, Policy, Rounding, resolve_policy
from ..core.parse import RANGE_EXP, STAND_IN_EXP, Number, parse_number
from ..core.scalar import NEG_ZERO, is_subnormal_code, round_value
from ..tables.build import write_tables
from .bounds import add_bound_parsers
from .chains import add_chain_parsers
from .identify import add_identify_parsers
from .info import add_info_parsers
from .invariance import add_invariance_parsers
from .plot import add_plot_parsers
from .reveal import add_reveal_parsers
from .sweep import add_sweep_parsers
from .text import code_of as _code_of
from .text import exact_decimal, show_exact, table
from .text import hex_code as _hex
from .text import show_value as _show_value
from .text import value_of as _value_of

__all__ = ["main", "show_exact", "exact_decimal"]

_MODES = [m.value for m in Rounding if m is not Rounding.STOCHASTIC]


class CliError(ValueError):
    """A user error the command reports in one line (exit status 2)."""


def _flag_names(f: int) -> list[str]:
    return [m.name for m in Flags if m.value and f & m.value]


# ---- parsing VALUE -------------------------------------------------------------------------
def _parse_value(text: str) -> Number:
    """VALUE -> its exact Number (decimals, fractions, hex floats, inf, nan: parse.parse_number)."""
    t = text.strip().lower()
    body = t.lstrip("+-")
    if body.startswith("0x") and "p" not in body:
        raise CliError(f"{text!r} looks like a code: give its format with --from (e.g. {text} --from fp16), "
                       "or write a hex float with an exponent (0x1.8p3)")
    if body.startswith(("0b", "0o")):
        raise CliError(f"{text!r} looks like a code: give its format with --from")
    try:
        return parse_number(text, "VALUE")
    except ParseError as e:
        raise CliError(f"{e}, or a code with --from (0x7bff --from fp16)") from None


def _is_code_literal(text: str) -> bool:
    return text.strip().lower().startswith(("0x", "0b", "0o")) and "p" not in text.lower()


def _fp64_code(x: float) -> int:
    return int(np.array([x], np.float64).view(np.uint64)[0])


def _rto_proxy_ok(dst: AnyFormat, x: Fraction) -> bool:
    """Whether the FP64 round-to-odd value of x rounds to ``dst`` exactly as x does.

    Rounding to odd at precision p + 2 or more, then rounding once to precision p, gives the
    correctly rounded result for every nearest and directed mode (Boldo & Melquiond 2008), as
    long as the FP64 grid refines the destination's by 2 bits wherever x lies: float
    destinations with p <= 51 whose range lies inside FP64's, integers where |x| < 2^51.
    """
    if dst.is_integer:
        return abs(x) < 2**51
    assert isinstance(dst, Format)
    return dst.precision <= 51 and dst.min_subnormal >= Fraction(1, 2**1072) and dst.emax < 1023


def _rto_fp64(x: Fraction) -> float:
    """The odd one of x's two FP64 neighbours (x not exact in FP64); FP64's max past its range."""
    try:
        f = float(x)  # correctly rounded (nearest); one of the two neighbours
    except OverflowError:
        f = math.inf if x > 0 else -math.inf
    if math.isinf(f):
        return math.copysign(sys.float_info.max, f)  # all-ones significand: odd
    g = math.nextafter(f, math.inf if Fraction(f) < x else -math.inf)
    return f if _fp64_code(abs(f)) & 1 else g


@dataclass
class _Input:
    """What ``cast`` converts: ``code`` of ``src``, standing for the exact input ``value``.

    ``code`` is None when no code of a format numoracle carries stands for the value: the exact
    reference (``exact.round_value``) then rounds ``value`` itself (for values beyond the reader's
    range, ``parse.Number.rounding_value``'s stand-in).
    """

    code: int | None
    src: AnyFormat | None
    value: Fraction | float  # exact input (float only for inf / nan), or the stand-in of a huge / tiny value
    proxy: bool = False  # code is a round-to-odd stand-in that rounds exactly as value does
    shown: str | None = None  # how to show the value when it is a stand-in
    notes: list[str] = field(default_factory=list)


def _source(args: argparse.Namespace, dst: AnyFormat) -> _Input:
    """The source code and format standing for VALUE (with --from: a code or a value of that format)."""
    text = args.value.strip()
    if args.src is not None:
        src = format_of(args.src)
        if _is_code_literal(text):
            try:
                code = int(text, 0)
            except ValueError:
                raise CliError(f"cannot parse code {text!r}") from None
            if not 0 <= code < 1 << src.bits:
                raise CliError(f"code {text} is out of range for {src.name} ({src.bits} bits: "
                               f"0..{_hex((1 << src.bits) - 1, src)})")
        else:
            n = _parse_value(text)
            try:
                if not n.exact:
                    raise ValueError(text)
                code = _code_of(src, n.rounding_value())
            except (ValueError, OverflowError):
                raise CliError(f"{text} is not a value of {src.name}; give one it represents exactly, "
                               f"or a code (0x...), or leave out --from to round {text} itself") from None
        return _Input(code, src, _value_of(code, src))
    n = _parse_value(text)
    v = n.rounding_value()
    if isinstance(v, float):
        return _Input(_fp64_code(v), FP64, Fraction(0) if v == 0 else v)
    shown = None if n.exact else f"{'-' if n.negative else ''}beyond 2^{'-' if n.kind == 'tiny' else ''}{RANGE_EXP}"
    if n.exact:
        f = float(v) if abs(v) < 2**1024 else math.inf
        if math.isfinite(f) and Fraction(f) == v:
            return _Input(_fp64_code(f), FP64, v)
        if v.denominator == 1 and -(2**63) <= v < 2**64:
            return _Input(int(v) & (2**64 - 1), INT64 if v < 2**63 else UINT64, v)
    if _rto_proxy_ok(dst, v):
        p = _rto_fp64(v)
        note = (f"{text} is not exact in FP64; it is cast through its FP64 round-to-odd neighbour {p!r} "
                f"({_hex(_fp64_code(p), FP64)}), which rounds to {dst.name} exactly as {text} does "
                "(same result, flags and neighbours in every mode)")
        return _Input(_fp64_code(p), FP64, v, proxy=True, shown=shown, notes=[note])
    note = (f"{text} is not exact in FP64 and no FP64 stand-in rounds to {dst.name} as it does: the exact "
            "reference (exact.round_value) rounds the value itself")
    if not n.exact:
        note += f" (through +-2^+-{STAND_IN_EXP}, which every format rounds as it rounds {text})"
    return _Input(None, None, v, shown=shown, notes=[note])


def _daz_read(inp: _Input, daz: bool) -> tuple[Any, bool]:
    """(the input as the conversion reads it, whether daz flushed it).

    With daz a subnormal source value reads as a zero of its sign, before anything else. The source is the
    format of ``inp.code``: --from's, else FP64, which holds VALUE exactly or, where VALUE needs more bits,
    stands for it (round-to-odd); a VALUE no FP64 code stands for is read exactly, as a value of FP64's
    range with unbounded precision, so it is subnormal where FP64's are: 0 < |VALUE| < 2^-1022.
    """
    v = inp.value
    if not daz or isinstance(v, float):  # inf / nan
        return v, False
    if inp.code is not None and inp.src is not None:
        sub = is_subnormal_code(inp.code, inp.src)
    else:
        sub = 0 < abs(v) < FP64.min_normal
    if not sub:
        return v, False
    return (NEG_ZERO if v < 0 else Fraction(0)), True


def _round_input(inp: _Input, dst: AnyFormat, pol: Policy) -> tuple[int, int]:
    """(code, flags) of the input rounded to ``dst`` under ``pol``."""
    if inp.code is None:
        c, f = round_value(_daz_read(inp, pol.daz)[0], dst, rounding=pol.rounding, overflow=pol.overflow,
                           nan_to=pol.nan_to, ftz=pol.ftz, tininess=pol.tininess, flags=True)
        return int(c), int(f)
    out, fl = cast(np.array([inp.code], np.uint64), dst, src=inp.src, rounding=pol.rounding,
                   overflow=pol.overflow, nan_to=pol.nan_to, ftz=pol.ftz, daz=pol.daz, tininess=pol.tininess,
                   flags=True)
    return int(out[0]), int(fl[0])


# ---- subcommands ---------------------------------------------------------------------------
def _neighbour(inp: _Input, dst: AnyFormat, mode: str, daz: bool) -> dict[str, str] | None:
    """The representable value next to the input on one side (``rd``: below, ``ru``: above), or None."""
    c, _ = _round_input(inp, dst, resolve_policy(dst, mode, daz=daz))
    v = _value_of(c, dst)
    x, flushed = _daz_read(inp, daz)
    if flushed:
        x = Fraction(0)  # daz read it as a zero: its neighbours are the zeros, not those of the value typed
    if isinstance(v, float) and math.isnan(v) or (mode == "rd" and v > x) or (mode == "ru" and v < x):
        return None  # nothing on that side: beyond max finite (saturated or NaN), or below E8M0's least
    return {"code": _hex(c, dst), "value": _show_value(v, dst, c)}


def _cmd_cast(args: argparse.Namespace) -> str:
    dst = format_of(args.to)
    if Rounding.of(args.rounding) is Rounding.STOCHASTIC:
        raise CliError("rounding 'sr' needs random bits per element; use numoracle.cast(x, dst, "
                       "rounding='sr', sr_bits=..., random_bits=...) from Python")
    pol = resolve_policy(dst, args.rounding, args.overflow, args.nan_to, args.ftz, args.daz, tininess=args.tininess)
    inp = _source(args, dst)
    c, flags = _round_input(inp, dst, pol)
    res = _value_of(c, dst)
    xnan = isinstance(inp.value, float) and math.isnan(inp.value)
    below = None if xnan else _neighbour(inp, dst, "rd", pol.daz)
    above = None if xnan else _neighbour(inp, dst, "ru", pol.daz)
    how = "round-to-odd stand-in" if inp.proxy else "exact reference" if inp.code is None else "exact"
    notes = list(inp.notes)
    if _daz_read(inp, pol.daz)[1]:
        sign = "-" if inp.value < 0 else ""
        src_fmt = inp.src or FP64
        assert isinstance(src_fmt, Format)  # daz flushes float sources only
        notes.append(f"--daz: {args.value.strip()} lies below {src_fmt.name}'s smallest normal (2^{src_fmt.emin}): "
                     f"a subnormal input, read as {sign}0")
    src = None if inp.src is None else {"format": inp.src.name, "code": _hex(inp.code, inp.src)}
    info: dict[str, Any] = {
        "input": args.value.strip(),
        "value": inp.shown or _show_value(inp.value, inp.src, None if (inp.proxy or inp.code is None) else inp.code),
        "source": {**(src or {"format": None, "code": None}), "how": how},
        "dst": dst.name,
        "policy": {"rounding": pol.rounding.value, "overflow": pol.overflow.value,
                   "nan_to": pol.nan_to.value if pol.nan_to else None, "ftz": pol.ftz, "daz": pol.daz,
                   "tininess": pol.tininess.value},
        "code": _hex(c, dst),
        "result": _show_value(res, dst, c),
        "flags": _flag_names(flags),
        "exact": not xnan and inp.shown is None and res == inp.value,
        "below": below,
        "above": above,
        "notes": notes,
    }
    if args.json:
        return json.dumps(info, indent=2)
    none = "none (NaN)" if xnan else "none (no value of the format on this side)"
    where = f"as {inp.src.name} {info['source']['code']} ({how})" if src else f"({how})"
    rows = [
        ["code", info["code"]],
        ["value", info["result"]],
        ["flags", "|".join(info["flags"]) or "none"],
        ["below", f"{below['code']}  {below['value']}" if below else none],
        ["above", f"{above['code']}  {above['value']}" if above else none],
        ["input", f"{info['value']}  {where}"],
    ]
    head = f"{info['input']} -> {dst.name}  ({pol})" + ("  [exactly representable]" if info["exact"] else "")
    return "\n".join([head, table([["  " + k, v] for k, v in rows]), *[f"note: {n}" for n in notes]])


def _cmd_tables(args: argparse.Namespace) -> str:
    only = None if args.only is None else [n.strip() for n in args.only.split(",")]
    if only is not None and not all(only):
        raise CliError(f"--only {args.only!r} has an empty entry; name tables: formats, chains, bounds, boundary")
    paths = write_tables(args.out, only)
    written = [(p, len(p.read_text().splitlines()) - 1) for p in paths]
    if args.json:
        return json.dumps({"written": [{"path": str(p), "rows": n} for p, n in written]}, indent=2)
    return "\n".join(f"wrote {p} ({n} rows)" for p, n in written)


def _cmd_boundary(args: argparse.Namespace) -> str:
    from ..conformance.boundary import boundary_values

    if Rounding.of(args.rounding) is Rounding.STOCHASTIC:
        raise CliError(f"boundary --rounding takes one of {', '.join(_MODES)}; for 'sr' (which needs sr_bits) use "
                       "numoracle.conformance.boundary_values(src, dst, rounding='sr') from Python")
    via = tuple(v for v in (args.via or "").split(",") if v)
    bv = boundary_values(args.src, args.dst, via=via, rounding=args.rounding, overflow=args.overflow)
    if args.json:
        return json.dumps({"src": bv.src.name, "dst": bv.dst.name, "via": [f.name for f in bv.via],
                           "rounding": bv.rounding.value, "overflow": bv.overflow.value, "values": bv.rows()},
                          indent=2)
    return bv.table()


# ---- entry point ---------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block
        raise CliError(f"{message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="numoracle", description="Exact oracle for low-precision number formats.",
                epilog="Exit status: 0 done; 1 the command's verdict failed (sweep: unexplained mismatches or "
                "converter faults; chain --check: the chain differs); 2 usage error (one line on stderr); 3 "
                "internal error (a bug: please report it); 130 interrupted. docs/cli.md has every subcommand.")
    p.add_argument("--version", action="version", version=f"numoracle {_version()}",
                   help="print the version and exit")
    p.set_defaults(run=lambda args: p.format_help().rstrip())  # bare `numoracle`: the help, exit 0
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    add_info_parsers(sub)
    c = sub.add_parser("cast", help="convert one value exactly, with flags and neighbours",
                       description="VALUE: a decimal (65519, 1e9), a fraction (1/3), inf, nan, a hex float "
                       "(0x1.8p3), or with --from a code (0x7bff) or a value of that format.")
    c.add_argument("value", metavar="VALUE", help="the value (or with --from, a code) to convert")
    c.add_argument("--to", required=True, metavar="FMT", help="destination format")
    c.add_argument("--from", dest="src", metavar="FMT", help="source format of VALUE (a code or a value of it)")
    c.add_argument("--rounding", default="rne", metavar="R", help=f"one of {', '.join(_MODES)} (default rne)")
    c.add_argument("--overflow", metavar="O", help="ieee, saturate, nan, wrap (default: the destination's)")
    c.add_argument("--nan-to", dest="nan_to", metavar="N", help="max, zero, min, raise (formats without NaN)")
    c.add_argument("--ftz", action="store_true", help="flush subnormal results to zero")
    c.add_argument("--daz", action="store_true", help="read subnormal inputs as zero")
    c.add_argument("--tininess", default="before", choices=["before", "after"],
                   help="when UNDERFLOW judges a result tiny: before rounding (ARM, default) or after (x86 SSE/AVX)")
    c.add_argument("--json", action="store_true", help="print a JSON object")
    c.set_defaults(run=_cmd_cast)
    add_chain_parsers(sub)
    add_bound_parsers(sub)
    bd = sub.add_parser("boundary", help="the source values that matter for a conversion or chain, labelled")
    bd.add_argument("src", metavar="SRC", help="source format")
    bd.add_argument("dst", metavar="DST", help="destination format")
    bd.add_argument("--via", metavar="FMT[,FMT]", help="intermediate formats of a chain")
    bd.add_argument("--rounding", default="rne", metavar="R", help=f"one of {', '.join(_MODES)} (default rne)")
    bd.add_argument("--overflow", metavar="O", help="ieee, saturate, nan, wrap (default: the destination's)")
    bd.add_argument("--json", action="store_true", help="print a JSON object")
    bd.set_defaults(run=_cmd_boundary)
    add_sweep_parsers(sub)
    add_plot_parsers(sub)
    add_identify_parsers(sub)
    add_reveal_parsers(sub)
    add_invariance_parsers(sub)
    t = sub.add_parser("tables", help="write the reference tables (CSV)")
    t.add_argument("--out", default="tables", metavar="DIR", help="output folder (default ./tables)")
    t.add_argument("--only", metavar="NAME[,NAME]", help="write only these tables (formats, chains, bounds, boundary)")
    t.add_argument("--json", action="store_true", help="print a JSON object")
    t.set_defaults(run=_cmd_tables)
    return p


def _version() -> str:
    """The running package's version (the package is imported whenever its command line runs)."""
    return str(getattr(sys.modules.get("numoracle"), "__version__", "unknown"))


_NEG_VALUE = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)


EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 2, 3, 130
_PIP = {"torch": "torch", "matplotlib": "numoracle[plot]", "distributed": "numoracle[dask]",
        "ml_dtypes": "ml_dtypes", "mpmath": "mpmath"}


def _error(msg: str) -> None:
    print(f"numoracle: {msg}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    0: done. 1: the command's verdict failed (``sweep``: unexplained mismatches or converter faults).
    2: a usage error (bad argument, unknown format, missing optional dependency): one line on stderr.
    3: an internal error (a numoracle bug): one line on stderr asking for a report. 130: interrupted
    (Ctrl-C). Never a traceback.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    # argparse takes "-1e9" or "-inf" for an option; a leading space makes it a value (stripped later)
    argv = [f" {a}" if _NEG_VALUE.match(a) else a for a in argv]
    try:
        args = _parser().parse_args(argv)
        text = args.run(args)
        status = 0
        if isinstance(text, tuple):  # (text, exit status): a command whose verdict is its status (sweep)
            text, status = text
    except SystemExit as e:  # --help
        return int(e.code or 0) if isinstance(e.code, (int, type(None))) else EXIT_USAGE
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except ImportError as e:  # an optional dependency that is not installed
        name = (e.name or "").split(".")[0]
        _error(f"error: {name or e} is not installed; pip install {_PIP.get(name, name)}")
        return EXIT_USAGE
    except (ValueError, TypeError, OSError, OverflowError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        _error(f"error: {msg}")
        return EXIT_USAGE
    except MemoryError:
        _error("error: the request needs more memory than this machine has; ask for less")
        return EXIT_USAGE
    except Exception as e:  # noqa: BLE001 - a bug: one line, not a traceback
        msg = str(e).splitlines()[0] if str(e) else ""
        _error(f"internal error: {type(e).__name__}{': ' + msg if msg else ''} (a numoracle bug: please report it "
               "with the command line)")
        return EXIT_INTERNAL
    try:
        print(text)
    except BrokenPipeError:  # `numoracle ... | head`: the reader left; not an error
        sys.stderr.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
