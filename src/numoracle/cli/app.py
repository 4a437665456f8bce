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
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.convert import cast, decode
from ..core.errors import ParseError
from ..core.formats import FP64, INT64, UINT64, AnyFormat, Format, format_of, registry
from ..core.parse import RANGE_EXP, STAND_IN_EXP, Number, parse_number
from ..core.policy import Flags, Policy, Rounding, resolve_policy
from ..core.text import hex_width
from ..core.twins.exact import round_value
from ..tables.build import write_tables
from .bounds import add_bound_parsers
from .chains import add_chain_parsers
from .identify import add_identify_parsers
from .plot import add_plot_parsers
from .sweep import add_sweep_parsers

__all__ = ["main", "show_exact", "exact_decimal"]

_MODES = [m.value for m in Rounding if m is not Rounding.STOCHASTIC]


class CliError(ValueError):
    """A user error the command reports in one line (exit status 2)."""


# ---- exact number formatting ----------------------------------------------------------------
def _decimal_parts(x: Fraction) -> tuple[int, int] | None:
    """(D, k) with x == D * 10^k exactly and D not a multiple of 10; None if x has no finite decimal."""
    d, k = x.denominator, 0
    while d % 10 == 0:
        d, k = d // 10, k + 1
    while d % 2 == 0:
        d, k = d // 2, k + 1
    while d % 5 == 0:
        d, k = d // 5, k + 1
    if d != 1:
        return None
    D, k = x.numerator * 10**k // x.denominator, -k
    while D and D % 10 == 0:
        D, k = D // 10, k + 1
    return D, k


def exact_decimal(x: Fraction) -> str | None:
    """The exact decimal expansion of ``x`` (``0.125``), or None when it has none (``1/3``)."""
    parts = _decimal_parts(x)
    if parts is None:
        return None
    D, k = parts
    sign, digits = ("-" if D < 0 else ""), str(abs(D))
    if k >= 0:
        return sign + digits + "0" * k
    digits = digits.rjust(1 - k, "0")
    return f"{sign}{digits[:k]}.{digits[k:]}"


def _approx(x: Fraction) -> str:
    with localcontext() as ctx:
        ctx.prec = 20
        return format(Decimal(x.numerator) / Decimal(x.denominator), ".8g")


def show_exact(x: Fraction | int, limit: int = 24) -> str:
    """``x`` exactly and readably: ``448``, ``0.125``, ``2^-24 ≈ 5.9604645e-8``, ``1e400``, ``1/3 ≈ 0.33333333``.

    In order of preference: a plain decimal of at most ``limit`` characters; a power of two;
    an exact scientific decimal of at most ``limit`` digits; ``m*2^e`` (dyadic); ``p/q``. The
    power of two, ``m*2^e`` and ``p/q`` forms carry an approximation after ``≈``.
    """
    x = Fraction(x)
    dec = exact_decimal(x)
    if dec is not None and len(dec) <= limit:
        return dec
    n, d = x.numerator, x.denominator
    if d & (d - 1) == 0:  # dyadic: x = m * 2^e with m odd
        tz = (n & -n).bit_length() - 1
        m, e = n >> tz, tz - (d.bit_length() - 1)
        exact = (f"{'-' if m < 0 else ''}2^{e}" if abs(m) == 1 else f"{m}*2^{e}")
        if abs(m) == 1 or dec is None or len(str(abs(_decimal_parts(x)[0]))) > limit:
            return f"{exact} ≈ {_approx(x)}"
    elif dec is None:
        return f"{n}/{d} ≈ {_approx(x)}"
    D, k = _decimal_parts(x)
    digits = str(abs(D))
    mant = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "")
    return f"{'-' if D < 0 else ''}{mant}e{k + len(digits) - 1}"


def _short(x: Fraction | int) -> str:
    """Compact exact form for table cells: ``65504``, ``0.25``, ``2^-24``, ``16777215*2^104``."""
    return show_exact(x, limit=10).split(" ≈ ")[0]


def _hex(code: int, fmt: AnyFormat) -> str:
    return f"0x{code:0{hex_width(fmt)}x}"


# ---- values and codes --------------------------------------------------------------------
def _value_of(code: int, fmt: AnyFormat) -> Fraction | float:
    """Exact value of one code: a Fraction, or float inf/nan."""
    v = decode(np.array([code], dtype=np.uint64), fmt)[0]
    if fmt.is_integer:
        return Fraction(int(v))
    f = float(v)
    return f if not math.isfinite(f) else Fraction(f)


def _show_value(v: Fraction | float, fmt: AnyFormat | None = None, code: int | None = None) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return "+inf" if v > 0 else "-inf"
    if v == 0 and fmt is not None and code and fmt.signed:
        return "-0"  # a zero code with the sign bit set
    return show_exact(v, limit=64)


def _code_of(fmt: AnyFormat, x: Fraction | float) -> int:
    """The code of a value ``fmt`` represents exactly (inf and nan included); ValueError otherwise."""
    if isinstance(x, Fraction) and (x.denominator != 1 or not -(2**63) <= x < 2**64):
        f = float(x)  # OverflowError past FP64's range
        if Fraction(f) != x:
            raise ValueError(f"{x} is not exact in FP64")
        arr = np.array([f], np.float64)
    elif isinstance(x, Fraction):
        arr = np.array([int(x)], np.uint64 if x >= 2**63 else np.int64)
    else:
        arr = np.array([x], np.float64)
    code = int(cast(arr, fmt)[0])
    v = _value_of(code, fmt)
    same = v == x or (isinstance(v, float) and math.isnan(v) and isinstance(x, float) and math.isnan(x))
    if not same:
        raise ValueError(f"{x} is not a value of {fmt.name}")
    return code


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


def _round_input(inp: _Input, dst: AnyFormat, pol: Policy) -> tuple[int, int]:
    """(code, flags) of the input rounded to ``dst`` under ``pol``."""
    if inp.code is None:
        c, f = round_value(inp.value, dst, rounding=pol.rounding, overflow=pol.overflow, nan_to=pol.nan_to,
                           ftz=pol.ftz, tininess=pol.tininess, flags=True)
        return int(c), int(f)
    out, fl = cast(np.array([inp.code], np.uint64), dst, src=inp.src, rounding=pol.rounding,
                   overflow=pol.overflow, nan_to=pol.nan_to, ftz=pol.ftz, daz=pol.daz, tininess=pol.tininess,
                   flags=True)
    return int(out[0]), int(fl[0])


# ---- subcommands ---------------------------------------------------------------------------
def _table(rows: list[list[str]], header: list[str] | None = None) -> str:
    allrows = ([header] if header else []) + rows
    widths = [max(len(r[i]) for r in allrows) for i in range(len(allrows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in allrows]
    if header:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cmd_formats(args: argparse.Namespace) -> str:
    header = ["name", "bits", "e", "m", "bias", "nan", "inf", "-0", "subnormals",
              "max finite", "min normal", "min subnormal"]
    yn = {True: "yes", False: "no"}
    rows = []
    for f in registry():
        if isinstance(f, Format):
            rows.append([f.name, str(f.bits), str(f.exp_bits), str(f.man_bits), str(f.bias), f.nan,
                         yn[f.has_inf], yn[f.has_negative_zero], yn[f.has_subnormals],
                         _short(f.max_finite), _short(f.min_normal), _short(f.min_subnormal)])
        else:
            rows.append([f.name, str(f.bits), "-", "-", "-", "none", "no", "no", "-",
                         str(f.max_value), "-", "-"])
    return _table(rows, header)


def _threshold_text(f: Format, mode: str) -> str:
    def one(sign: int) -> str:
        t, inclusive = f.overflow_threshold(mode, sign=sign)
        return f"|x| {'>=' if inclusive else '>'} {show_exact(t)}"

    pos, neg = one(1), one(-1)
    return pos if pos == neg else f"{pos} for x > 0; {neg} for x < 0"


def _info_rows(f: AnyFormat) -> list[list[str]]:
    d = f.describe()
    rows: list[list[str]] = []

    def add(key: str, val: Any, code: int | None = None) -> None:
        if val is None:
            text = ""
        elif isinstance(val, bool):
            text = "yes" if val else "no"
        elif isinstance(val, (int, Fraction)):
            text = show_exact(val)
        else:
            text = str(val)
        if code is not None:
            text = f"{text}  ({_hex(code, f)})" if text else _hex(code, f)
        rows.append([key, text])

    aliases = ", ".join(f.aliases)
    add("name", f.name + (f"  (also: {aliases})" if aliases else ""))
    pol = resolve_policy(f)
    if f.is_integer:
        for k in ("kind", "bits", "signed", "precision"):
            add(k, d[k])
        add("min_value", f.min_value, _code_of(f, Fraction(f.min_value)))
        add("max_value", f.max_value, _code_of(f, Fraction(f.max_value)))
        add("code_dtype", f.code_dtype)
        add("default policy", str(pol))
        return rows
    assert isinstance(f, Format)
    for k in ("kind", "bits", "signed", "exp_bits", "man_bits", "bias", "nan", "has_inf",
              "has_negative_zero", "has_subnormals", "precision", "emin", "emax"):
        add(k, d[k])
    add("code_dtype", f.code_dtype)
    add("max_finite", f.max_finite, _code_of(f, f.max_finite))
    if f.signed:
        add("-max_finite", -f.max_finite, _code_of(f, -f.max_finite))
    add("min_normal", f.min_normal, _code_of(f, f.min_normal))
    add("min_subnormal", f.min_subnormal, _code_of(f, f.min_subnormal))
    add("eps (1+eps is next after 1)", f.eps)
    for modes in (("rne", "rna"), ("rtz", "ru", "rd", "rto", "sr")):
        add(f"unit_roundoff[{','.join(modes)}]", f.unit_roundoff(modes[0]))
    for mode in _MODES:
        add(f"overflow_threshold[{mode}]", _threshold_text(f, mode))
    if f.has_inf:
        add("+inf", None, int(cast(np.array([math.inf]), f)[0]))
    if f.has_nan:
        add("canonical NaN", None, int(cast(np.array([math.nan]), f)[0]))
    if f.has_negative_zero:
        add("-0", None, int(cast(np.array([-0.0]), f)[0]))
    add("default policy", str(pol))
    return rows


def _cmd_info(args: argparse.Namespace) -> str:
    return _table(_info_rows(format_of(args.format)))


def _neighbour(inp: _Input, dst: AnyFormat, mode: str, daz: bool) -> dict[str, str] | None:
    """The representable value next to the input on one side (``rd``: below, ``ru``: above), or None."""
    c, _ = _round_input(inp, dst, resolve_policy(dst, mode, daz=daz))
    v = _value_of(c, dst)
    x = inp.value
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
        "notes": inp.notes,
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
    return "\n".join([head, _table([["  " + k, v] for k, v in rows]), *[f"note: {n}" for n in inp.notes]])


def _cmd_tables(args: argparse.Namespace) -> str:
    only = None if args.only is None else [n.strip() for n in args.only.split(",")]
    if only is not None and not all(only):
        raise CliError(f"--only {args.only!r} has an empty entry; name tables: formats, chains, bounds, boundary")
    paths = write_tables(args.out, only)
    return "\n".join(f"wrote {p} ({len(p.read_text().splitlines()) - 1} rows)" for p in paths)


def _cmd_boundary(args: argparse.Namespace) -> str:
    from ..conformance.boundary import boundary_values

    if Rounding.of(args.rounding) is Rounding.STOCHASTIC:
        raise CliError(f"boundary --rounding takes one of {', '.join(_MODES)}; for 'sr' (which needs sr_bits) use "
                       "numoracle.boundary_values(src, dst, rounding='sr') from Python")
    via = tuple(v for v in (args.via or "").split(",") if v)
    bv = boundary_values(args.src, args.dst, via=via, rounding=args.rounding, overflow=args.overflow)
    return bv.table()


# ---- entry point ---------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block
        raise CliError(f"{message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="numoracle", description="Exact oracle for low-precision number formats.",
                epilog="Exit status: 0 done; 1 the command's verdict failed (sweep: unexplained mismatches or "
                "converter faults); 2 usage error (one line on stderr); 3 internal error (a bug: please "
                "report it); 130 interrupted.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("formats", help="the registry as a table").set_defaults(run=_cmd_formats)
    i = sub.add_parser("info", help="every derived constant of one format")
    i.add_argument("format")
    i.set_defaults(run=_cmd_info)
    c = sub.add_parser("cast", help="convert one value exactly, with flags and neighbours",
                       description="VALUE: a decimal (65519, 1e9), a fraction (1/3), inf, nan, a hex float "
                       "(0x1.8p3), or with --from a code (0x7bff) or a value of that format.")
    c.add_argument("value", metavar="VALUE")
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
    bd.add_argument("src", metavar="SRC")
    bd.add_argument("dst", metavar="DST")
    bd.add_argument("--via", metavar="FMT[,FMT]", help="intermediate formats of a chain")
    bd.add_argument("--rounding", default="rne", metavar="R", help=f"one of {', '.join(_MODES)} (default rne)")
    bd.add_argument("--overflow", metavar="O", help="ieee, saturate, nan, wrap (default: the destination's)")
    bd.set_defaults(run=_cmd_boundary)
    add_sweep_parsers(sub)
    add_plot_parsers(sub)
    add_identify_parsers(sub)
    t = sub.add_parser("tables", help="write the reference tables (CSV)")
    t.add_argument("--out", default="tables", metavar="DIR", help="output folder (default ./tables)")
    t.add_argument("--only", metavar="NAME[,NAME]", help="write only these tables (formats, chains, bounds, boundary)")
    t.set_defaults(run=_cmd_tables)
    return p


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
