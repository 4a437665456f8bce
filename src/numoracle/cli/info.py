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

from ..core.engine.convert import cast
from ..core.formats.format import AnyFormat, Format, format_of, registry
from ..core.formats.policy import Rounding, resolve_policy
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
    from ..core.formats.p3109 import P3109_FORMATS

    kinds = [args.kind] if args.kind else _KINDS  # every section by default (--all: the same, kept for scripts)
    if args.json:
        d: dict[str, Any] = {"formats": [format_summary(f) for f in registry()]}
        d.update({k: _held_rows(k, json_=True) for k in _KINDS[1:] if k in kinds or not args.kind})
        return json.dumps(d, indent=2)
    parts = []
    for k in kinds:
        if k == "registry":
            parts.append(_format_table(registry()))
        elif k == "p3109":
            parts.append(_HEADS[k] + "\n" + _format_table(list(P3109_FORMATS.values())))
        else:
            parts.append(_HEADS[k] + "\n" + table(_held_rows(k), _HELD_HEADER[k]))
    return "\n\n".join(parts)


# the formats users hold that are not registry formats (numoracle formats lists them after the registry)
_KINDS = ["registry", "codebooks", "gguf", "int4", "p3109"]
_HEADS = {"codebooks": "codebooks (a value table per code; quantize_codebook, fmt=NAME in the checks and bounds):",
          "gguf": "GGUF block types (gguf_quantize / gguf_dequantize; fmt='Q4_0' in the checks, GgufWeights in the "
                  "bounds):",
          "int4": "packed int4 conventions (Int4Weights.pack / from_packed, quant/schemes/packing.py):",
          "p3109": "IEEE P3109 8-bit formats (not registered: numoracle.core.formats.p3109.register_p3109() adds them; "
                   "numoracle info finds them):"}
_HELD_HEADER = {"codebooks": ["name", "codes", "bits", "max |v|", "min |v| > 0", "source"],
                "gguf": ["name", "values/block", "bytes/block", "bits/value", "quantise", "dequantise"],
                "int4": ["name", "source"]}


_JSON_KEYS = {"codebooks": ["name", "codes", "bits", "max_abs", "min_abs_nonzero", "source"],
              "gguf": ["name", "block_values", "block_bytes", "bits_per_value", "quantise", "dequantise"],
              "int4": ["name", "source"]}
_GGUF_LAYOUT = {
    "Q8_0": "d FP16, 32 int8 q; y = q d (d = amax / 127, q = roundf(x / d))",
    "Q4_0": "d FP16, 16 bytes (q[j] low nibble, q[j + 16] high); y = (q - 8) d (d = max / -8)",
    "Q4_1": "d, m FP16, 16 bytes; y = q d + m (d = (max - min) / 15, m = min)",
    "Q5_0": "d FP16, qh (bit 4 of each q, little-endian uint32), 16 bytes; y = (q - 16) d",
    "Q5_1": "d, m FP16, qh, 16 bytes; y = q d + m (31 steps)",
    "Q2_K": "16 sub-blocks of 16: 4-bit scale and min each, 2-bit q, d and dmin FP16; y = d sc q - dmin m",
    "Q3_K": "hmask, 2-bit q, sixteen 6-bit scales (s - 32), d FP16; y = d (s - 32) q, q in -4..3",
    "Q4_K": "8 sub-blocks of 32: 6-bit scales and mins, 4-bit q, d and dmin FP16; y = d sc q - dmin m",
    "Q5_K": "as Q4_K with a fifth bit in qh",
    "Q6_K": "4-bit ql, 2-bit qh, sixteen int8 scales, d FP16; y = d s (q - 32)"}
_INT4_LAYOUT = {
    "gptq": "qweight int32 (K/8, N), nibble i of a word = row 8w + i; qzeros int32 (G, N/8) storing z - 1; FP16 "
            "scales (G, N); w = (q - z) s",
    "gptq_v2": "as gptq, qzeros storing z",
    "awq": "qweight int32 (K, N/8), nibble i = column 8w + [0, 2, 4, 6, 1, 3, 5, 7][i]; qzeros likewise (G, N/8)",
    "ct": "weight_packed int32 (N, K/8) of q + 8 (signed int4), sequential nibbles; weight_zero_point (N/8, G)",
    "hqq": "W_q uint8 (K/2, N): row r in the high nibble, row r + K/2 in the low; FP16 float zero points and "
           "scales; w = fl16(fl16(q - z) s)",
    "bnb": "uint8 (ceil(n/2), 1) of the flattened codes, the first of each pair in the high nibble"}


def _held_info(name: str) -> dict[str, Any] | None:
    """What ``numoracle info`` shows for a codebook, a GGUF type or a packed int4 convention (None: none)."""
    from ..quant.checks.blockcheck import block_format
    from ..quant.schemes.gguf import GGUF_QUANTISERS, GGUF_TYPES
    from ..quant.schemes.packing import PACKINGS

    key = str(name).strip()
    kind = block_format(key)
    if kind is not None and not isinstance(kind, str):
        cb = kind
        return {"name": cb.name, "kind": "codebook", "codes": len(cb.values), "bits": cb.bits,
                "values": list(cb.values), "max_abs": cb.max_abs, "ties": cb.ties, "midpoints": cb.midpoints,
                "source": cb.source, "use": f"quantize_codebook(x, '{cb.name}', block=64); "
                f"assert_quantized_close(actual, x, fmt='{cb.name}', granularity=('block', 64)); "
                "quantized_matmul_bound(A, B, qb=CodebookQuantized)"}
    if isinstance(kind, str):
        e, b = GGUF_TYPES[kind]
        return {"name": kind, "kind": "GGUF block type", "block_values": e, "block_bytes": b,
                "bits_per_value": 8 * b / e, "layout": _GGUF_LAYOUT[kind], "quantise": kind in GGUF_QUANTISERS,
                "dequantise": True, "source": "ggml ggml-quants.c; gguf-py 0.19.0 gguf/quants.py",
                "use": (f"gguf_quantize(x, '{kind}'); assert_quantized_close(bytes, x, fmt='{kind}'); "
                        if kind in GGUF_QUANTISERS else f"gguf_dequantize(bytes, '{kind}'); ")
                + f"quantized_matmul_bound(A, B, qb=GgufWeights(bytes, '{kind}', (N, K)))"}
    if key.lower() in PACKINGS:
        c = key.lower()
        return {"name": c, "kind": "packed int4 convention", "layout": _INT4_LAYOUT[c], "source": PACKINGS[c],
                "use": "Int4Weights.from_packed(tensors, convention=..., shape=(K, N), group=...); "
                       "assert_quantized_close(weights, W); quantized_matmul_bound(A, B, qb=weights)"
                if c != "bnb" else "quant/schemes/packing.py pack / unpack (NF4 / FP4 codes)"}
    return _unsigned_extended_info(key.lower())


def _unsigned_extended_info(key: str) -> dict[str, Any] | None:
    """P3109's binary8p{P}ue (core/p3109ue.py): not an engine Format, found by name."""
    from ..core.formats.p3109 import P3109_UNSIGNED_EXTENDED

    f = P3109_UNSIGNED_EXTENDED.get(key)
    if f is None:
        return None
    return {"name": f.name, "kind": "P3109 unsigned extended (not an engine Format)", "bits": 8,
            "precision": f.precision, "max_finite": float(f.max_finite), "max_finite_code": "0xfd",
            "inf_code": "0xfe", "nan_code": "0xff", "min_subnormal": float(f.min_subnormal),
            "values": f"those of {f.finite.name} below 0xfe", "source": "gfloat 0.5.2 format_info_p3109",
            "use": f"numoracle.core.formats.p3109.p3109_cast(x, '{f.name}', rounding=..., overflow=...); "
                   f"p3109_decode(codes, '{f.name}')"}


def _held_rows(kind: str, json_: bool = False) -> list[Any]:
    """Rows of the codebooks, GGUF types or int4 conventions (dicts for JSON)."""
    from ..quant.schemes.codebook import codebooks
    from ..quant.schemes.gguf import GGUF_QUANTISERS, GGUF_TYPES
    from ..quant.schemes.packing import PACKINGS

    if kind == "codebooks":
        rows = [[cb.name, len(cb.values), cb.bits, cb.max_abs, float(np.min(np.abs(cb.table)[cb.table != 0])),
                 cb.source] for cb in codebooks()]
    elif kind == "gguf":
        rows = [[n, e, b, f"{8 * b / e:g}", "yes" if n in GGUF_QUANTISERS else "no", "yes"]
                for n, (e, b) in GGUF_TYPES.items()]
    elif kind == "p3109":
        from ..core.formats.p3109 import P3109_FORMATS

        return [format_summary(f) for f in P3109_FORMATS.values()] if json_ else []
    else:
        rows = [[n, src] for n, src in PACKINGS.items()]
    if json_:
        return [{k: (v == "yes" if k in ("quantise", "dequantise") else v) for k, v in zip(_JSON_KEYS[kind], r)}
                for r in rows]
    return [[str(c) if not isinstance(c, float) else f"{c!r}" for c in r] for r in rows]


def _format_table(formats: list[AnyFormat]) -> str:
    header = ["name", "bits", "e", "m", "bias", "nan", "inf", "-0", "subnormals",
              "max finite", "min normal", "min subnormal"]
    yn = {True: "yes", False: "no"}
    rows = []
    for f in formats:
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
    from ..core.formats.p3109 import P1_TIE_NOTE, P3109_FORMATS, is_p3109_p1  # built, not registered: found by name

    f = P3109_FORMATS.get(str(args.format).strip().lower())
    if f is None:
        try:
            f = format_of(args.format)
        except ValueError:
            held = _held_info(args.format)  # a codebook, a GGUF type, a packed int4 convention
            if held is None:
                raise
            if args.json:
                return json.dumps(jsonable(held), indent=2)
            return table([[k, ", ".join(f"{v:.9g}" for v in val) if isinstance(val, list) else
                           "yes" if val is True else "no" if val is False else str(val)] for k, val in held.items()])
    d = format_info(f)
    if is_p3109_p1(f):
        d["note"] = P1_TIE_NOTE
    if args.json:
        return json.dumps(_info_json(f, d), indent=2)
    return table(_info_rows(f, d))


def add_info_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``formats`` and ``info`` to a subparsers object (``cli.app`` calls this)."""
    fm = sub.add_parser("formats", help="every format as tables", description="Every registered format with its "
                        "fields and extremes (exact), then the formats users hold that are not registry formats, "
                        "each kind in its own section: codebooks, GGUF block types, packed int4 conventions, IEEE "
                        "P3109. --json: {\"formats\": [...], \"codebooks\": [...], ...}, see docs/cli.md.")
    fm.add_argument("--json", action="store_true", help="print a JSON object (every section's key)")
    fm.add_argument("--all", action="store_true", help="every section (the default; kept for scripts)")
    fm.add_argument("--kind", choices=_KINDS, help="one section only (--kind registry: the registry alone)")
    fm.set_defaults(run=_cmd_formats)
    i = sub.add_parser("info", help="every derived constant of one format",
                       description="Fields, extremes with their codes, eps, unit roundoffs, overflow thresholds "
                       "per rounding mode, special codes and the default policy of one format.")
    i.add_argument("format", metavar="FMT", help="a format name (numoracle formats lists them), e.g. fp8_e4m3fn")
    i.add_argument("--json", action="store_true", help="print a JSON object")
    i.set_defaults(run=_cmd_info)
