"""``numoracle formats`` and ``numoracle info``: the registry, and every derived constant of one format.

Both print a fixed-width table, or with ``--json`` one JSON object (docs/cli.md gives the keys).
Numbers in JSON are exact: integers as JSON integers, other values as ``str(Fraction)``
("65504", "1/16777216"), codes as hex strings.
"""

from __future__ import annotations

import argparse
import json
import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.convert import cast
from ..core.formats import AnyFormat, Format, format_of, registry
from ..core.policy import Rounding, resolve_policy
from .text import code_of, hex_code, jsonable, short, show_exact, table

__all__ = ["add_info_parsers", "format_summary", "format_info"]

_MODES = [m.value for m in Rounding if m is not Rounding.STOCHASTIC]


# ---- formats ------------------------------------------------------------------------------------
def format_summary(f: AnyFormat) -> dict[str, Any]:
    """One row of ``numoracle formats --json``: the format's fields and extremes, exact."""
    if isinstance(f, Format):
        return {"name": f.name, "kind": "float", "bits": f.bits, "exp_bits": f.exp_bits, "man_bits": f.man_bits,
                "bias": f.bias, "nan": f.nan, "has_inf": f.has_inf, "has_negative_zero": f.has_negative_zero,
                "has_subnormals": f.has_subnormals, "max_finite": str(f.max_finite),
                "min_normal": str(f.min_normal),
                "min_subnormal": str(f.min_subnormal) if f.has_subnormals else None, "aliases": list(f.aliases)}
    return {"name": f.name, "kind": "int", "bits": f.bits, "signed": f.signed, "min_value": f.min_value,
            "max_value": f.max_value, "aliases": list(f.aliases)}


def _cmd_formats(args: argparse.Namespace) -> str:
    if args.json:
        return json.dumps({"formats": [format_summary(f) for f in registry()]}, indent=2)
    header = ["name", "bits", "e", "m", "bias", "nan", "inf", "-0", "subnormals",
              "max finite", "min normal", "min subnormal"]
    yn = {True: "yes", False: "no"}
    rows = []
    for f in registry():
        if isinstance(f, Format):
            rows.append([f.name, str(f.bits), str(f.exp_bits), str(f.man_bits), str(f.bias), f.nan,
                         yn[f.has_inf], yn[f.has_negative_zero], yn[f.has_subnormals],
                         short(f.max_finite), short(f.min_normal), short(f.min_subnormal) if f.has_subnormals else "-"])
        else:
            rows.append([f.name, str(f.bits), "-", "-", "-", "none", "no", "no", "-",
                         str(f.max_value), "-", "-"])
    return table(rows, header)


# ---- info ---------------------------------------------------------------------------------------
def _thresholds(f: Format, mode: str) -> dict[str, dict[str, Any]]:
    """The overflow threshold of each sign the format has: {"positive": {value, inclusive}, "negative": ...}."""
    out = {}
    for key, sign in (("positive", 1), ("negative", -1)):
        if sign < 0 and not f.signed:
            continue  # an unsigned format has no negative values to overflow
        t, inclusive = f.overflow_threshold(mode, sign=sign)
        out[key] = {"value": t, "inclusive": inclusive}
    return out


def _threshold_text(th: dict[str, dict[str, Any]]) -> str:
    def one(d: dict[str, Any]) -> str:
        return f"|x| {'>=' if d['inclusive'] else '>'} {show_exact(d['value'])}"

    pos = one(th["positive"])
    if "negative" not in th:
        return f"x {'>=' if th['positive']['inclusive'] else '>'} {show_exact(th['positive']['value'])}"
    neg = one(th["negative"])
    return pos if pos == neg else f"{pos} for x > 0; {neg} for x < 0"


def _special_code(f: Format, x: float) -> int:
    return int(cast(np.array([x]), f)[0])


def format_info(f: AnyFormat) -> dict[str, Any]:
    """Every derived constant of ``f`` (exact Fractions, codes as ints): what ``numoracle info`` shows."""
    d: dict[str, Any] = {"name": f.name, "aliases": list(f.aliases)}
    pol = resolve_policy(f)
    if f.is_integer:
        d.update({k: f.describe()[k] for k in ("kind", "bits", "signed", "precision")})
        d["code_dtype"] = str(np.dtype(f.code_dtype))
        d["min_value"] = {"value": f.min_value, "code": code_of(f, Fraction(f.min_value))}
        d["max_value"] = {"value": f.max_value, "code": code_of(f, Fraction(f.max_value))}
        d["default_policy"] = str(pol)
        return d
    assert isinstance(f, Format)
    desc = f.describe()
    for k in ("kind", "bits", "signed", "exp_bits", "man_bits", "bias", "nan", "has_inf", "has_negative_zero",
              "has_subnormals", "precision", "emin", "emax"):
        d[k] = desc[k]
    d["code_dtype"] = str(np.dtype(f.code_dtype))
    d["max_finite"] = {"value": f.max_finite, "code": code_of(f, f.max_finite)}
    if f.signed:
        d["-max_finite"] = {"value": -f.max_finite, "code": code_of(f, -f.max_finite)}
    d["min_normal"] = {"value": f.min_normal, "code": code_of(f, f.min_normal)}
    # a format without subnormals has none: its least positive value is min_normal
    d["min_subnormal"] = {"value": f.min_subnormal, "code": code_of(f, f.min_subnormal)} if f.has_subnormals \
        else None
    d["eps"] = f.eps
    d["unit_roundoff"] = {"rne,rna": f.unit_roundoff("rne"), "rtz,ru,rd,rto,sr": f.unit_roundoff("rtz")}
    d["overflow_threshold"] = {m: _thresholds(f, m) for m in _MODES}
    d["inf_code"] = _special_code(f, math.inf) if f.has_inf else None
    d["nan_code"] = _special_code(f, math.nan) if f.has_nan else None
    d["negative_zero_code"] = _special_code(f, -0.0) if f.has_negative_zero else None
    d["default_policy"] = str(pol)
    return d


def _info_json(f: AnyFormat, d: dict[str, Any]) -> dict[str, Any]:
    out = dict(d)
    for k, v in d.items():
        if isinstance(v, dict) and "code" in v:
            out[k] = {"value": jsonable(v["value"]), "code": hex_code(v["code"], f)}
        elif k.endswith("_code") and v is not None:
            out[k] = hex_code(v, f)
    return jsonable(out)


def _info_rows(f: AnyFormat, d: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []

    def text(val: Any) -> str:
        if isinstance(val, bool):
            return "yes" if val else "no"
        if isinstance(val, (int, Fraction)):
            return show_exact(val)
        return str(val)

    aliases = ", ".join(d["aliases"])
    rows.append(["name", d["name"] + (f"  (also: {aliases})" if aliases else "")])
    labels = {"eps": "eps (1+eps is next after 1)", "inf_code": "+inf", "nan_code": "canonical NaN",
              "negative_zero_code": "-0", "default_policy": "default policy"}
    for k, v in d.items():
        if k in ("name", "aliases"):
            continue
        label = labels.get(k, k)
        if k == "min_subnormal" and v is None:
            rows.append([label, "none (no subnormals; the least positive value is min_normal)"])
        elif v is None:
            continue
        elif k == "unit_roundoff":
            rows += [[f"unit_roundoff[{m}]", text(u)] for m, u in v.items()]
        elif k == "overflow_threshold":
            rows += [[f"overflow_threshold[{m}]", _threshold_text(th)] for m, th in v.items()]
        elif isinstance(v, dict):
            rows.append([label, f"{text(v['value'])}  ({hex_code(v['code'], f)})"])
        elif k.endswith("_code"):
            rows.append([label, hex_code(v, f)])
        else:
            rows.append([label, text(v)])
    return rows


def _cmd_info(args: argparse.Namespace) -> str:
    from ..core.p3109 import P3109_FORMATS  # built, not registered: found by name here

    f = P3109_FORMATS.get(str(args.format).strip().lower()) or format_of(args.format)
    d = format_info(f)
    if args.json:
        return json.dumps(_info_json(f, d), indent=2)
    return table(_info_rows(f, d))


def add_info_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``formats`` and ``info`` to a subparsers object (``cli.app`` calls this)."""
    fm = sub.add_parser("formats", help="the registry as a table", description="Every registered format with its "
                        "fields and extremes (exact). --json: {\"formats\": [...]}, see docs/cli.md.")
    fm.add_argument("--json", action="store_true", help="print a JSON object")
    fm.set_defaults(run=_cmd_formats)
    i = sub.add_parser("info", help="every derived constant of one format",
                       description="Fields, extremes with their codes, eps, unit roundoffs, overflow thresholds "
                       "per rounding mode, special codes and the default policy of one format.")
    i.add_argument("format", metavar="FMT", help="a format name (numoracle formats lists them), e.g. fp8_e4m3fn")
    i.add_argument("--json", action="store_true", help="print a JSON object")
    i.set_defaults(run=_cmd_info)
