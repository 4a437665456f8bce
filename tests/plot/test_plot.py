"""``numoracle.plot.curves`` (bound curves against emulated errors) and ``numoracle plot bound``."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle.cli import main
from numoracle.plot.curves import BoundViolation, bound_curve_data, order_object, plot_bound
from optional import requires

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def small():
    return bound_curve_data("dot", ["bf16", "fp16"], ["sequential", "pairwise", "blocked:8"], [4, 16, 64],
                            acc=["fp32", "fp16"], samples=4, seed=3)


# ---- data ----------------------------------------------------------------------------------------
def test_coefficients_are_expected_error_bounds(small):
    assert len(small.curves) == 2 * 2 * 3
    assert small.Ks == (4, 16, 64) and small.kinds == ("worst", "probabilistic")
    for c in small.curves:
        for i, K in enumerate(c.Ks):
            w = no.expected_error_bound("dot", c.dtype, K, acc=c.acc, order=c.order)
            p = no.expected_error_bound("dot", c.dtype, K, acc=c.acc, order=c.order, kind="probabilistic",
                                        confidence=0.999)
            assert c.worst[i] == w.coefficient_float and Fraction(c.worst[i]) >= w.coefficient
            assert c.probabilistic[i] == p.coefficient_float


def test_emulated_errors_stay_below_their_worst_case_bounds(small):
    for c in small.curves:
        assert all(0 <= r <= 1 for r in c.max_ratio)
        for i in range(len(c.Ks)):
            assert c.largest_error(i) <= c.worst[i]
            for d in small.datasets:
                assert 0 <= c.median_error[d][i] <= c.max_error[d][i]
    # the accumulator matters: fp16 accumulation errs far more than fp32 on the same inputs
    by = {(c.dtype, c.acc, c.order): c for c in small.curves}
    assert by[("fp16", "fp16", "sequential")].max_error["uniform"][-1] > \
        100 * by[("fp16", "fp32", "sequential")].max_error["uniform"][-1]


def test_errors_match_an_independent_fraction_computation():
    """The documented data recipe, rounded to fp16 by numpy (RNE), summed in Fractions."""
    K, s, seed = 16, 4, 11
    d = bound_curve_data("dot", ["fp16"], ["pairwise"], [K], acc="fp32", samples=s, seed=seed)
    c = d.curves[0]
    for j, name in enumerate(("uniform", "normal")):
        rng = np.random.default_rng([seed, K, j])
        draw = rng.random if name == "uniform" else rng.standard_normal
        a, b = draw((s, K)).astype(np.float16), draw((s, K)).astype(np.float16)
        rel = []
        for i in range(s):
            exact = sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a[i], b[i]))
            total = sum(abs(Fraction(float(x)) * Fraction(float(y))) for x, y in zip(a[i], b[i]))
            got = Fraction(float(no.simulate("dot", a[i], b[i], acc="fp32", order=O.Pairwise())))
            rel.append(float(abs(got - exact) / total))
        assert c.max_error[name][0] == pytest.approx(max(rel), rel=1e-12, abs=1e-300)
        assert c.median_error[name][0] == pytest.approx(float(np.median(rel)), rel=1e-12, abs=1e-300)


def test_a_wrong_emulation_is_caught(monkeypatch):
    import numoracle.plot.curves as P

    real = P._emulate
    monkeypatch.setattr(P, "_emulate", lambda op, ins, acc, order: real(op, ins, acc, order) * (1 + 2.0**-10))
    with pytest.raises(BoundViolation, match="exceeds the worst-case bound"):
        bound_curve_data("dot", ["bf16"], ["sequential"], [64], samples=2)


def test_stagnation_breaks_the_probabilistic_bound_but_not_the_worst_case():
    """fp16 accumulation of 16384 positive products stagnates at 2048 (THEORY §3 caveat i)."""
    d = bound_curve_data("dot", ["fp16"], ["sequential"], [16384], acc="fp16", samples=4, data="uniform")
    c = d.curves[0]
    assert c.max_error["uniform"][0] > c.probabilistic[0]
    assert c.prob_violations[0] >= 1
    assert c.max_error["uniform"][0] <= c.worst[0]


def test_biased_orders_get_no_probabilistic_curve():
    d = bound_curve_data("dot", ["fp8_e4m3fn"], ["preset:h100", "sequential"], [64], samples=2)
    tc, seq = d.curves
    assert tc.order == "preset:h100" and tc.probabilistic is None and tc.prob_violations is None
    assert "no probabilistic bound" in tc.note and seq.probabilistic is not None
    assert tc.max_ratio[0] <= 1


def test_same_seed_same_numbers_other_seed_other_data():
    a = bound_curve_data("sum", ["bf16"], ["sequential"], [256], samples=3, seed=5)
    b = bound_curve_data("sum", ["bf16"], ["sequential"], [256], samples=3, seed=5)
    c = bound_curve_data("sum", ["bf16"], ["sequential"], [256], samples=3, seed=6)
    assert a == b and a.to_csv() == b.to_csv()
    assert a.curves[0].max_error != c.curves[0].max_error


def test_table_and_csv(small):
    rows = small.to_csv().splitlines()
    assert len(rows) == 1 + len(small.curves) * len(small.Ks)
    head = rows[0].split(",")
    assert head[:7] == ["op", "dtype", "acc", "order", "K", "worst", "probabilistic"]
    first = dict(zip(head, rows[1].split(",")))
    assert float(first["worst"]) == small.curves[0].worst[0]
    lines = small.table().splitlines()
    assert any(ln.split()[:4] == ["fp16", "fp16", "blocked:8", "64"] for ln in lines)


@pytest.mark.parametrize(("text", "expected"), [
    ("sequential", O.Sequential()), ("pairwise", O.Pairwise()), ("blocked:128", O.Blocked(128)),
    ("splitk:4:pairwise", O.SplitK(4, O.Sequential(), O.Pairwise())), ("numpy", O.NumpyPairwise()),
    ("blockfma:32:13:13", O.BlockFMA(32, 13, out_frac_bits=13)),
])
def test_order_strings_become_the_orders_simulate_runs(text, expected):
    label, obj = order_object(text)
    assert obj == expected and label == text


def test_preset_orders_need_the_dtype_and_match_orders_preset():
    assert order_object("preset:A100", "bf16") == ("preset:a100", O.preset("a100", "bf16"))
    with pytest.raises(ValueError, match="give the dtype"):
        order_object("preset:h100")


@pytest.mark.parametrize(("kw", "msg"), [
    ({"op": "matmul"}, "dot product of length K"), ({"dtypes": ["int8"]}, "integer format"),
    ({"orders": ["any"]}, "no single evaluation"), ({"orders": ["pairwise:8"]}, "no single evaluation"),
    ({"Ks": [0]}, "K"), ({"kind": "worse"}, "unknown kind"), ({"data": "gaussian"}, "unknown data set"),
    ({"samples": 0}, "samples"), ({"orders": ["preset:h100"], "acc": "fp16", "dtypes": ["bf16"]}, "fixes its acc"),
])
def test_bad_arguments_raise_value_error(kw, msg):
    args = {"op": "dot", "dtypes": ["bf16"], "orders": ["sequential"], "Ks": [16], "samples": 1, **kw}
    with pytest.raises(ValueError, match=msg):
        bound_curve_data(**args)


# ---- figure and CLI -----------------------------------------------------------------------------
def test_importing_plot_does_not_import_matplotlib():
    code = "import sys, numoracle.plot.curves, numoracle.cli.app; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@requires("matplotlib")
def test_cli_writes_png_and_csv(capsys, tmp_path):
    png, csv = tmp_path / "b.png", tmp_path / "b.csv"
    rc, out, err = run(capsys, "plot", "bound", "--dtype", "fp16", "--acc", "fp32,fp16", "--order",
                       "sequential,pairwise", "--K", "16:64", "--samples", "2", "--out", str(png), "--csv", str(csv))
    assert rc == 0, err
    data = png.read_bytes()
    assert data[:8] == PNG and len(data) > 10_000
    assert len(csv.read_text().splitlines()) == 1 + 4 * 3
    lines = out.splitlines()
    assert lines[-2:] == [f"wrote {csv}", f"wrote {png}"]
    row = next(ln.split() for ln in lines if ln.startswith("fp16   fp16  sequential"))
    b = no.expected_error_bound("dot", "fp16", 16, acc="fp16", order="sequential")
    assert row[3] == "16" and float(row[4]) == pytest.approx(b.coefficient_float, rel=5e-3)


@requires("matplotlib")
def test_figure_files_are_reproducible(tmp_path):
    d = bound_curve_data("dot", ["bf16"], ["sequential", "pairwise"], [16, 64], samples=2)
    for ext, magic in ((".png", PNG), (".svg", b"<?xml"), (".pdf", b"%PDF")):
        p1, p2 = plot_bound(d, tmp_path / f"a{ext}"), plot_bound(d, tmp_path / f"b{ext}")
        assert p1.read_bytes()[:len(magic)] == magic
        assert p1.read_bytes() == p2.read_bytes(), f"{ext} output differs between two writes"
    with pytest.raises(ValueError, match="png, .svg or .pdf|PNG, SVG or PDF"):
        plot_bound(d, tmp_path / "a.jpg")


def test_missing_matplotlib_is_one_clear_line(capsys, monkeypatch, tmp_path):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    rc, out, err = run(capsys, "plot", "bound", "--K", "16", "--out", str(tmp_path / "x.png"))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and 'pip install "numoracle[plot]"' in err
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(ImportError, match=re.escape('pip install "numoracle[plot]"')):
        plot_bound(bound_curve_data("dot", ["bf16"], ["pairwise"], [16], samples=1), tmp_path / "y.png")
    rc, out, _ = run(capsys, "plot", "bound", "--K", "16", "--samples", "1")  # the table needs no matplotlib
    assert rc == 0 and "pairwise" in out


@pytest.mark.parametrize("argv", [
    ["--dtype", "bf17"], ["--order", "sequentail"], ["--order", "any"], ["--K", "16:100"], ["--K", "64:16"],
    ["--K", "abc"], ["--K", "16:"], ["--K", "16,,32"], ["--kind", "worse"], ["--data", "gauss"],
    ["--samples", "0"], ["--seed", "-1"], ["--out", "x.jpg"], ["--op", "matmul"], ["--acc", "int8"],
    ["--confidence", "2"], ["--samples", "many"],
])
def test_bad_cli_arguments_exit_2_with_one_line(capsys, argv):
    rc, out, err = run(capsys, "plot", "bound", "--K", "16", *argv)
    assert rc == 2 and out == ""
    assert err.startswith("numoracle: error: ") and err.count("\n") == 1, err


def test_parse_K_ranges():
    from numoracle.cli.plot import parse_Ks

    assert parse_Ks("16:4096") == [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert parse_Ks("1:1") == [1] and parse_Ks("100, 7") == [100, 7]


# ---- the guide's figure ----------------------------------------------------------------------
def test_the_guides_figure_command_is_valid_and_its_figure_is_checked_in():
    """The ```bash block of docs/tolerances.md parses, and names the checked-in figure the guide shows."""
    from numoracle.cli.app import _parser
    from numoracle.cli.plot import parse_Ks

    text = (ROOT / "docs" / "tolerances.md").read_text(encoding="utf-8")
    cmds = [ln.strip() for blk in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S) for ln in blk.splitlines()
            if ln.strip().startswith("numoracle plot bound")]
    assert len(cmds) == 1
    args = _parser().parse_args(shlex.split(cmds[0])[1:])
    assert args.out == "docs/figures/bound.png" and f"]({args.out.removeprefix('docs/')})" in text
    fig = (ROOT / args.out).read_bytes()
    assert fig[:8] == PNG and len(fig) > 10_000
    # the checked-in numbers are what the command computes (each K has its own seeded data: a subset reproduces)
    Ks = parse_Ks(args.K)
    assert Ks[-1] >= 4096
    d = bound_curve_data(args.op, args.dtype.split(","), args.order.split(","), [k for k in Ks if k <= 128],
                         acc=args.acc.split(","), kind=args.kind.split(","), samples=args.samples, seed=args.seed,
                         data=args.data.split(","), confidence=args.confidence)
    fresh = d.to_csv().splitlines()
    stored = (ROOT / args.csv).read_text(encoding="utf-8").splitlines()
    assert fresh[0] == stored[0]
    assert set(fresh[1:]) <= set(stored[1:]) and len(stored) == 1 + len(d.curves) * len(Ks)
