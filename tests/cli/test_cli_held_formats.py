"""numoracle formats --all / --kind / --json and numoracle info for the formats users hold: codebooks, GGUF block
types, packed int4 conventions, P3109 formats (not registered by default)."""

from __future__ import annotations

import json

import pytest

from numoracle.cli.app import main
from numoracle.core.formats.p3109 import P3109_FORMATS
from numoracle.formats import registry
from numoracle.quant.schemes.codebook import codebooks
from numoracle.quant.schemes.gguf import GGUF_TYPES
from numoracle.quant.schemes.packing import PACKINGS


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _section(out: str, head: str) -> list[str]:
    """The first column of the table under the line starting with ``head``."""
    block = out.split(head, 1)[1].split("\n\n", 1)[0].splitlines()
    return [ln.split()[0] for ln in block[3:] if ln.strip()]


def test_formats_all_lists_every_section(capsys):
    rc, out, _ = run(capsys, "formats", "--all")
    assert rc == 0
    assert out.splitlines()[0].split()[:2] == ["name", "bits"]
    assert _section(out, "codebooks") == [cb.name for cb in codebooks()]
    assert _section(out, "GGUF block types") == list(GGUF_TYPES)
    assert _section(out, "packed int4 conventions") == list(PACKINGS)
    assert _section(out, "IEEE P3109") == list(P3109_FORMATS)
    q4k = next(ln for ln in out.splitlines() if ln.startswith("Q4_K "))
    assert q4k.split() == ["Q4_K", "256", "144", "4.5", "yes", "yes"]
    p3 = next(ln for ln in out.splitlines() if ln.startswith("binary8p3se "))
    assert p3.split()[:6] == ["binary8p3se", "8", "5", "2", "16", "fnuz"]


def test_formats_default_lists_every_section_and_kind_picks_one(capsys):
    rc, out, _ = run(capsys, "formats")
    rc_all, out_all, _ = run(capsys, "formats", "--all")
    assert rc == rc_all == 0 and out == out_all and _section(out, "GGUF block types") == list(GGUF_TYPES)
    rc, out, _ = run(capsys, "formats", "--kind", "registry")
    assert rc == 0 and "codebooks" not in out and len(out.splitlines()) == len(registry()) + 2
    rc, out, _ = run(capsys, "formats", "--kind", "gguf")
    assert rc == 0 and out.startswith("GGUF block types") and "fp16" not in out


def test_formats_json_has_every_kind(capsys):
    rc, out, _ = run(capsys, "formats", "--json")
    d = json.loads(out)
    assert set(d) == {"formats", "codebooks", "gguf", "int4", "p3109"}
    assert [r["name"] for r in d["p3109"]] == list(P3109_FORMATS)
    nf4 = next(r for r in d["codebooks"] if r["name"] == "nf4")
    assert nf4["codes"] == 16 and nf4["bits"] == 4 and nf4["max_abs"] == 1.0
    q80 = next(r for r in d["gguf"] if r["name"] == "Q8_0")
    assert q80 == {"name": "Q8_0", "block_values": 32, "block_bytes": 34, "bits_per_value": "8.5",
                   "quantise": True, "dequantise": True}
    assert {r["name"] for r in d["int4"]} == set(PACKINGS)


@pytest.mark.parametrize("name, kind, key, value", [
    ("nf4", "codebook", "codes", "16"), ("bnb_fp4", "codebook", "ties", "down"),
    ("Q5_1", "GGUF block type", "block_bytes", "24"), ("gguf:q2_k", "GGUF block type", "quantise", "yes"),
    ("awq", "packed int4 convention", "source", PACKINGS["awq"])])
def test_info_describes_held_formats(capsys, name, kind, key, value):
    rc, out, _ = run(capsys, "info", name)
    assert rc == 0
    r = {ln.split(None, 1)[0]: ln.split(None, 1)[1].strip() for ln in out.splitlines() if ln.strip()}
    assert r["kind"] == kind and r[key] == value


def test_info_json_of_a_codebook_lists_its_values(capsys):
    rc, out, _ = run(capsys, "info", "nf4", "--json")
    d = json.loads(out)
    assert d["values"][0] == -1.0 and d["values"][-1] == 1.0 and len(d["values"]) == 16


def test_info_p3109_p1_says_how_its_ties_differ(capsys):
    rc, out, _ = run(capsys, "info", "binary8p1se")
    assert rc == 0 and "p3109_cast" in out
    rc, out, _ = run(capsys, "info", "binary8p3se")
    assert rc == 0 and "p3109_cast" not in out


def test_info_unknown_name_still_says_unknown_format(capsys):
    rc, _, err = run(capsys, "info", "q9_9")
    assert rc == 2 and "unknown format" in err


def test_info_finds_p3109_unsigned_extended_and_p8(capsys):
    rc, out, _ = run(capsys, "info", "binary8p4ue", "--json")
    d = json.loads(out)
    assert rc == 0 and d["max_finite"] == 53248.0 and d["inf_code"] == "0xfe" and "p3109_cast" in d["use"]
    rc, out, _ = run(capsys, "info", "binary8p8se")
    assert rc == 0 and "1.96875" in out
