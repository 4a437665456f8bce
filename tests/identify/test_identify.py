"""identify_order on recorded H200 results (tests/data/h200/) and on simulated kernels of known order."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle.formats import FP16, FP32
from numoracle.identify.search import identify_order
from numoracle.models.orders.gpu import ChunkedScan, GpuReduce, TiledSplitK, cutlass_slices

DATA = Path(__file__).resolve().parents[1] / "data" / "h200"
DT = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8_e4m3fn": ml_dtypes.float8_e4m3fn,
      "float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def _mm(tag):
    d = np.load(DATA / "mm_2_subset.npz")
    fmt = tag.split("_1")[0].split("_5")[0]
    return d, d[f"{tag}__A"].view(DT[fmt]), d[f"{tag}__B"].view(DT[fmt]), fmt


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3fn"])
@pytest.mark.parametrize("shape", ["128x4096x128", "512x1024x512"])
def test_triton_runs_are_the_h200_preset(fmt, shape):
    d, a, b, _ = _mm(f"{fmt}_{shape}_cancel")
    kernel = "triton_bk128" if fmt.startswith("fp8") else "triton_bk64"
    rep = identify_order(d[f"{fmt}_{shape}_cancel__{kernel}"], "matmul", a, b)
    assert rep.order == O.preset("h200", "fp8" if fmt.startswith("fp8") else fmt), str(rep)


@pytest.mark.parametrize("fmt", ["fp16", pytest.param("bf16", marks=pytest.mark.slow)])   # bf16: the same path
def test_cublas_k1024_is_the_preset_and_k4096_is_tiled_splitk(fmt):
    d, a, b, _ = _mm(f"{fmt}_512x1024x512_cancel")
    assert identify_order(d[f"{fmt}_512x1024x512_cancel__torch_mm_out_fp32"], "matmul", a, b).order == \
        O.preset("h200", fmt)
    d, a, b, _ = _mm(f"{fmt}_128x4096x128_cancel")
    rep = identify_order(d[f"{fmt}_128x4096x128_cancel__torch_mm_out_fp32"], "matmul", a, b)
    assert rep.order == TiledSplitK(3, 64, O.preset("h200", fmt)), str(rep)
    assert rep.candidates[0] is rep.winner and rep.winner.fraction == 1.0
    assert rep.headline().startswith('REPRODUCED: TiledSplitK(s=3, tile=64, inner=preset("h100", "fp16"), '
                                     'combine=Sequential()')     # a name that parses back to the order
    assert O.parse(rep.winner.to_dict()["name"]) == rep.order
    assert 'preset("h100", "fp16") is the arithmetic of h100, b200, h200, h800 with fp16 or bf16 inputs' in str(rep)
    # the same kernel's output in the input format: rounded once more, same order
    native = no.formats.as_native(d[f"{fmt}_128x4096x128_cancel__torch_mm_native"], fmt)
    assert identify_order(native, "matmul", a, b, candidates=[rep.order]).order == rep.order


@pytest.mark.parametrize("shape", ["128x4096x128", "512x1024x512"])
def test_scaled_mm_fast0_is_deepseek(shape):
    d, a, b, _ = _mm(f"fp8_e4m3fn_{shape}_cancel")
    rep = identify_order(d[f"fp8_e4m3fn_{shape}_cancel__scaled_mm_fast0"], "matmul", a, b)
    assert rep.order == O.preset("deepseek", "fp8"), str(rep)
    assert rep.to_dict()["name"] == 'preset("deepseek", "fp8")'


@pytest.mark.parametrize("dt", ["float32", pytest.param("float16", marks=pytest.mark.slow),
                                pytest.param("bfloat16", marks=pytest.mark.slow)])   # 16-bit: 6-7 s each
def test_torch_sums(dt):
    d = np.load(DATA / f"red_3_{dt}_subset.npz")
    for tag, rows in (("256x1000", 256), ("64x16384", 64)):
        x = d[f"{tag}__X"].view({4: np.float32, 2: np.uint16}[d[f"{tag}__X"].dtype.itemsize]).view(DT[dt])
        rep = identify_order(d[f"{tag}__sum_rows_fp32"], "sum", x, outputs=rows)
        assert isinstance(rep.order, GpuReduce) and rep.order.layout == "vector", str(rep)
        rep = identify_order(d[f"{tag}__sum_cols_fp32"], "sum", x, outputs=rows)
        assert isinstance(rep.order, GpuReduce) and rep.order.layout == "unroll", str(rep)
        rep = identify_order(d[f"{tag}__sum_native"], "sum", x, outputs=rows, out=dt)
        assert rep.order is not None and rep.out_format == no.formats.format_of(dt)


def test_not_reproduced_is_said_plainly():
    """Outputs no model reproduces (recorded sums with the last bit of some flipped): said plainly, ranked honestly."""
    d = np.load(DATA / "red_3_float32_subset.npz")
    x = d["256x1000__X"].view(np.float32)
    y = d["256x1000__sum_rows_fp32"].copy()
    y.view(np.uint32)[::2] ^= np.uint32(1)
    rep = identify_order(y, "sum", x, outputs=256)
    assert rep.order is None and rep.winner is None
    s = str(rep)
    assert s.startswith("NOT REPRODUCED") and "not among the models tried" in s
    best = rep.best
    assert best.confirmed and best.total == 8 and 4 <= best.matched < 8
    assert sum(best.ulps.values()) == best.total - best.matched
    true = next(c for c in rep.candidates if c.order == GpuReduce(4, 32))     # torch's: off by the flipped bit
    assert (true.matched, true.ulps["1"], sum(true.ulps.values())) == (4, 4, 4)
    fr = [c.fraction for c in rep.candidates if c.confirmed]
    assert fr == sorted(fr, reverse=True)


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_torch_cumsum(dt):
    d = np.load(DATA / f"red_3_{dt}_subset.npz")
    x = d["64x16384__X"].view({"float32": np.float32, "bfloat16": np.uint16}[dt]).view(DT[dt])
    rep = identify_order(d["64x16384__cumsum_last"], "sum", x, outputs=64, out=dt)
    assert rep.order == ChunkedScan(512, dt), str(rep)


def test_simulated_kernel_of_known_order_and_report_formats():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((16, 600)).astype(np.float16)
    b = rng.standard_normal((600, 12)).astype(np.float16)
    truth = TiledSplitK(4, 64, O.preset("a100", "fp16"), O.Pairwise())     # slices 192, 192, 192, 24
    y = no.simulate("matmul", a, b, order=truth).astype(np.float32)
    rep = identify_order(y, "matmul", a, b, prune_rows=4)
    assert rep.order == truth, str(rep)
    assert rep.prune_rows == 4 and rep.winner.confirmed and rep.winner.total == y.size
    d = json.loads(rep.to_json())
    assert d["reproduced"] and d["order"] == repr(truth) and d["candidates"][0]["fraction"] == 1.0
    assert rep.to_dict()["shape"] == [16, 12]
    md = rep.to_markdown()
    assert md.startswith("**REPRODUCED") and "| order |" in md
    assert str(rep).startswith("REPRODUCED:")


def test_given_candidates_rows_and_errors():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((10, 300)).astype(np.float32)
    y = no.simulate("sum", x, acc="fp32", order=O.Pairwise()).astype(np.float32)
    rep = identify_order(y, "sum", x, candidates=[O.Sequential(), O.Pairwise()], rows=[1, 3, 5])
    assert rep.order == O.Pairwise() and rep.n_rows == 3 and rep.winner.total == 3
    assert rep.candidates[-1].order == O.Sequential()
    with pytest.raises(ValueError, match="shape"):
        identify_order(y[:5], "sum", x)
    with pytest.raises(ValueError, match="op"):
        identify_order(y, "conv", x)
    assert identify_order(y, "sum", x, candidates=["pairwise"]).order == O.Pairwise()   # a text names an order
    with pytest.raises(TypeError, match="candidates"):
        identify_order(y, "sum", x, candidates=[42])
    with pytest.raises(TypeError, match="input array"):
        identify_order(y, "matmul", x)
    with pytest.raises(ValueError, match="out=fp16: .* not fp16 values"):
        identify_order(y, "sum", x, out="fp16")


# ---- command line ------------------------------------------------------------------------------------------

def test_cli_identify(capsys, tmp_path):
    from numoracle.cli import main

    f, tag = DATA / "mm_2_subset.npz", "bf16_128x4096x128_cancel"
    ab = [f"{f}:{tag}__A", f"{f}:{tag}__B", "--format", "bf16"]
    assert main(["identify", "matmul", f"{f}:{tag}__torch_mm_out_fp32", *ab, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["reproduced"] and d["order"].startswith("TiledSplitK(s=3, tile=64") and d["out_format"] == "fp32"
    # bf16 outputs hide the last 16 bits: the plain preset reproduces these 32 too, and the verdict says so
    assert main(["identify", "matmul", f"{f}:{tag}__torch_mm_native", *ab, "--out", "bf16", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["reproduced"] and d["out_format"] == "bf16" and d["verdict"] == "AMBIGUOUS" and len(d["classes"]) > 1
    assert d["headline"].startswith("AMBIGUOUS:")
    r = DATA / "red_3_float32_subset.npz"
    x = np.load(r)["256x1000__X"].view(np.float32)
    bad = np.load(r)["256x1000__sum_rows_fp32"] * np.float32(1.001)       # no order gives these
    np.save(tmp_path / "bad.npy", bad)
    assert main(["identify", "sum", str(tmp_path / "bad.npy"), f"{r}:256x1000__X", "--format", "fp32",
                 "--outputs", "256"]) == 1
    assert capsys.readouterr().out.startswith("NOT REPRODUCED")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.load(r)["256x1000__sum_rows_fp32"])
    assert main(["identify", "sum", str(tmp_path / "y.npy"), str(tmp_path / "x.npy"), "--outputs", "256",
                 "--markdown"]) == 0
    assert capsys.readouterr().out.startswith("**REPRODUCED: GpuReduce(vec=4, lanes=32")
    assert main(["identify", "matmul", f"{f}:{tag}__torch_mm_native", *ab]) == 2            # codes need --out
    assert "--out" in capsys.readouterr().err
    assert main(["identify", "matmul", f"{f}:nokey", *ab]) == 2
    assert "no key 'nokey'" in capsys.readouterr().err
    assert main(["identify", "sum", str(tmp_path / "y.npy"), str(tmp_path / "x.npy"), str(tmp_path / "x.npy")]) == 2


# ---- the recorder (CPU smoke test: the layout, not a GPU's numbers) ------------------------------------------

def test_recorder_layout_on_cpu(tmp_path):
    torch = pytest.importorskip("torch")
    from numoracle.testing import record

    rec = record.record_matmul({"mm_fp32": lambda a, b: a.float() @ b.float(), "mm_native": torch.mm},
                               shapes=[(4, 64, 3)], fmts=("bf16",), kinds=("cancel",), device="cpu")
    tag = "bf16_4x64x3_cancel"
    assert rec[f"{tag}__A"].dtype == np.uint16 and rec[f"{tag}__A"].shape == (4, 64)
    assert rec[f"{tag}__mm_fp32"].dtype == np.float32 and rec[f"{tag}__mm_native"].dtype == np.uint16
    assert bool(rec[f"{tag}__rerun_identical"])
    a, b = rec[f"{tag}__A"].view(ml_dtypes.bfloat16), rec[f"{tag}__B"].view(ml_dtypes.bfloat16)
    assert (np.abs(a.astype(np.float32)[:, ::16]) > 100).all()        # the cancel kind's scaled terms
    exact = no.exact_matmul(a, b)
    assert np.allclose(rec[f"{tag}__mm_fp32"], exact, rtol=1e-5, atol=1e-2)
    path = record.save(rec, str(tmp_path / "cpu.npz"))
    rep = identify_order(np.load(path)[f"{tag}__mm_fp32"], "matmul", a, b)
    assert rep.best is not None and rep.best.total == 12            # whatever the CPU did, it is scored

    rec = record.record_sum(shapes=[(3, 300)], dtypes=("float16",), device="cpu", seed=1)
    assert rec["float16_3x300__X"].dtype == np.uint16 and rec["float16_3x300__sum_rows_fp32"].shape == (3,)
    assert rec["float16_3x300__sum_native"].dtype == np.uint16 and "cpu" in str(rec["__meta__"])
    assert record.main([str(tmp_path / "s.npz"), "--what", "sum", "--device", "cpu"]) == 0
    assert "float32_64x16384__sum_cols_fp32" in np.load(tmp_path / "s.npz").files
    with pytest.raises(ValueError, match="kind"):
        record.make_inputs("uniform", 2, 2, 2, np.random.default_rng(0))


@pytest.mark.parametrize("kind", ["randn", "spread"])
def test_tf32_runs(kind):
    """FP32 inputs on TF32 tensor cores (K = 1024): triton cuts the inputs to TF32 toward zero and chains the
    H200 block FMA; cuBLAS rounds them to nearest and promotes the block FMA's partial to FP32 every 64 terms."""
    d = np.load(DATA / "mm_tf32_6_subset.npz")
    tag = f"fp32_128x1024x128_{kind}"
    a, b = d[f"{tag}__A"], d[f"{tag}__B"]

    def tf32(x, rounding):
        return no.formats.as_native(no.cast(x, "tf32", rounding=rounding), "tf32")

    rep = identify_order(d[f"{tag}__triton_tf32_bk32"], "matmul", tf32(a, "rtz"), tf32(b, "rtz"))
    assert rep.order == O.preset("h200", "tf32"), str(rep)
    rep = identify_order(d[f"{tag}__torch_mm_tf32"], "matmul", tf32(a, "rne"), tf32(b, "rne"))
    assert rep.order == O.preset("h200", "tf32", promote=64), str(rep)


@pytest.mark.slow
def test_tf32_cublas_k4096_splits_in_24():
    """cuBLAS TF32 at K = 4096, from the FP32 inputs as recorded: 24 slices of 192 terms (the last 64), each
    chained by the block FMA from zero, on the inputs rounded to TF32 to nearest. The search tries the plain unit's
    splits ahead of its promoted forms (Promoted(192, unit) is one of them), so the 24-way split is reached."""
    d = np.load(DATA / "mm_tf32_6_subset.npz")
    tag = "fp32_128x4096x128_randn"
    a, b = d[f"{tag}__A"], d[f"{tag}__B"]
    rep = identify_order(d[f"{tag}__torch_mm_tf32"], "matmul", a, b)
    assert isinstance(rep.order, TiledSplitK) and rep.order.inner == O.preset("h200", "tf32"), str(rep)
    assert rep.winner.operands == ("tf32", "rne"), str(rep)
    assert cutlass_slices(4096, rep.order.s, rep.order.tile) == [192] * 21 + [64]
    same = O.Promoted(192, O.preset("h200", "tf32"), FP32)                     # the same arithmetic
    ra, rb = (no.formats.as_native(no.cast(x, "tf32"), "tf32") for x in (a, b))
    assert identify_order(d[f"{tag}__torch_mm_tf32"], "matmul", ra, rb, candidates=[same]).order == same


def test_unit_from_a_small_k_slice_then_the_split():
    """A kernel with a block FMA no preset has: a K = 64 recording fixes the unit, which the K = 1024 search splits."""
    rng = np.random.default_rng(9)
    unit = O.BlockFMA(8, 24, truncate=False, carry_bit=False, acc=FP32)
    a = (rng.standard_normal((8, 1024)) * np.exp2(rng.integers(-6, 7, (8, 1024)))).astype(np.float16)
    b = rng.standard_normal((1024, 8)).astype(np.float16)
    small = no.simulate("matmul", a[:, :64], b[:64], order=unit).astype(np.float32)
    rep = identify_order(small, "matmul", a[:, :64], b[:64])
    assert rep.order == unit and rep.winner.stage == "unit", str(rep)
    y = no.simulate("matmul", a, b, order=TiledSplitK(3, 128, unit)).astype(np.float32)    # slices 384, 384, 256
    found = identify_order(y, "matmul", a, b, units=[rep.order]).order
    assert isinstance(found, TiledSplitK) and found.inner == unit                  # (3, 64) cuts the same slices
    assert cutlass_slices(1024, found.s, found.tile) == [384, 384, 256]
    with pytest.raises(TypeError, match="units"):
        identify_order(y, "matmul", a, b, units=["blockfma"])


def test_compare_runs_names_sum_orders_along_an_axis():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 50, 200)).astype(np.float32)         # reduced along axis 2 ...
    ra = no.simulate("sum", x, acc="fp32", order=O.Pairwise()).astype(np.float32)
    rb = no.simulate("sum", x, acc="fp32", order=O.Sequential()).astype(np.float32)
    xt = np.ascontiguousarray(np.moveaxis(x, 2, 1))                     # ... or stored with it as axis 1
    for inp, axis in ((x, -1), (xt, 1)):
        c = no.compare_runs(ra, rb, "sum", inp, axis=axis)
        assert c.verdict == "REORDERING" and c.identified == {"run_a": O.Pairwise(), "run_b": O.Sequential()}
    assert no.compare_runs(ra, rb, "sum", x, identify=False).identified == {}


def test_partials_added_in_the_output_format():
    rng = np.random.default_rng(12)
    a = rng.standard_normal((8, 512)).astype(np.float16)
    b = rng.standard_normal((512, 8)).astype(np.float16)
    kernel = O.SplitK(6, O.preset("h100", "fp16"), combine_acc=FP16)     # partials rounded to fp16, added there
    y = no.simulate("matmul", a, b, order=kernel, out="fp16")
    rep = identify_order(y.astype(np.float16), "matmul", a, b)
    assert rep.order == kernel and rep.winner.stage == "split", str(rep)
    assert "other orders may reproduce them" not in str(rep)              # the order's last rounding is fp16's


def test_a_named_order_is_confirmed_by_simulate_itself():
    """A 6-term FP32 dot with an FP64 unit: the split stage's shortcut rounds each FP64 partial to float32
    before the combine, which SplitK does not; with no more rows than prune_rows that shortcut's score was
    taken as the confirmation and an order that does not reproduce y was named. Every named order must
    reproduce the outputs through simulate."""
    unit = O.preset("numpy", "fp64")
    named = 0
    for seed in range(200, 212):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal(6).astype(np.float32)
        b = (rng.standard_normal(6) * np.exp2(rng.integers(-20, 20, 6))).astype(np.float32)
        p = a.astype(np.float64) * b
        y = np.float32(0)
        for lo, hi in ((0, 1), (1, 3), (3, 4), (4, 6)):   # FP64 partials rounded to FP32, added in FP32
            y = np.float32(y + np.float32(p[lo:hi].sum()))
        rep = identify_order(y, "dot", a, b, units=[unit])
        if rep.order is not None:
            named += 1
            got = no.simulate("dot", a, b, order=rep.order, acc=rep.order.acc or "fp32", out="fp32")
            assert np.float32(got) == y, (seed, str(rep))
    assert named


def test_the_text_table_columns_follow_their_content():
    """A stage name longer than the old fixed width (10) pushed the columns after it out of line."""
    from numoracle.identify.report import Candidate, IdentifyReport
    from numoracle.models.orders.basic import Pairwise, Sequential

    fmt = no.formats.format_of("fp16")
    cands = [Candidate(Sequential(), "a very long stage name", 5, 8, {"1": 2, "2-3": 1, "nan": 0}, 0.0, True),
             Candidate(Pairwise(), "unit", 123456, 200000, {"1": 76544, "4-15": 1, "16-255": 7, ">=256": 2},
                       1.0, False)]
    rep = IdentifyReport("sum", (8, 4), fmt, fmt, no.formats.format_of("fp32"), cands, None, 4, 8, 2, 0.1, [])
    lines = str(rep).splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["identical", "fraction"])
    table = lines[head:head + 3]
    for col in ("stage", "ULPs of the rest", "order"):  # each column starts where its header does, on every row
        at = table[0].index(col)
        assert all(ln[at - 2:at] == "  " and ln[at] != " " for ln in table), (col, table)
    assert table[0].index("identical") + len("identical") == table[2].index("123456") + len("123456")  # numbers right
