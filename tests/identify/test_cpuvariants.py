"""The CPU kernels per instruction set (identify/cpuvariants.py): OpenBLAS 0.3.31's sgemm (numpy 2.4.6) recorded
with OPENBLAS_CORETYPE=Sandybridge and Haswell on an AMD EPYC (Zen 5), torch 2.13.0+cpu's ``sum(dtype=float32)`` of
fp16 and jax 0.10.2's fp16 dot with ``preferred_element_type=float32`` (tests/data/cpu/isa, recorded by
benches/record_cpu_kernels.py; the orders were fitted on other data, seed 5, and these recordings are seeds 300 /
400)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from numoracle import orders as O
from numoracle.core.formats.format import FP16, FP32
from numoracle.identify.cpuvariants import VARIANTS, cpu_features, runs_here, variant_orders, variants_of
from numoracle.identify.families import cpu_sums, units
from numoracle.identify.search import identify_order
from numoracle.models.orders.cpu import goto_blocks
from optional import torch_on_amd

DATA = Path(__file__).resolve().parents[1] / "data" / "cpu" / "isa"


def test_openblas_splits_the_rest_at_its_unroll():
    # level3.c: a rest r in (Q, 2Q] is cut at floor(r / 2) rounded up to GEMM_UNROLL_M
    assert goto_blocks(1000, 320, 8) == [320, 320, 184, 176]
    assert goto_blocks(1000, 384, 16) == [384, 320, 296]
    assert goto_blocks(1000, 384) == [384, 308, 308]      # unroll 0: the halves, as before
    assert goto_blocks(100, 320, 8) == [100]
    with pytest.raises(ValueError, match="unroll"):
        O.GotoBlocks(320, O.Sequential(), -1)


def test_cpu_features_and_variants():
    feats = cpu_features("processor : 0\nflags\t\t: fpu avx avx2 fma\n")
    assert feats == {"fpu", "avx", "avx2", "fma"}
    by_isa = {v.isa.split()[0]: v for v in VARIANTS}
    assert runs_here(by_isa["Haswell"], feats) and not runs_here(by_isa["SkylakeX"], feats)
    assert runs_here(by_isa["Haswell"], frozenset()) is None
    assert len(variant_orders()) == len(VARIANTS)
    here = variant_orders(feats)       # an AVX2 CPU: the Sandybridge and Haswell kernels, not the AVX-512 ones
    assert O.GotoBlocks(320, O.Sequential(), 8) in here and O.Interleaved(16, "pairwise") not in here
    assert O.MklDot() not in here and len(here) == 4
    assert [v.isa for v in variants_of(O.GotoBlocks(320, O.Sequential(), 8))] == ["Haswell / Zen (AVX2 + FMA)"]


def _load(isa: str):
    d = np.load(DATA / f"{isa}.npz")
    return d, json.loads(str(d["meta"]))


@pytest.mark.parametrize(("isa", "core", "order"), [
    ("avx", "Sandybridge", O.GotoBlocks(384, O.Interleaved(1, fma=False), 16)),
    ("avx2", "Haswell", O.GotoBlocks(320, O.Sequential(), 8)),
])
def test_sgemm_named_per_core_type(isa, core, order):
    d, meta = _load(isa)
    assert meta["OPENBLAS_CORETYPE"] == core and meta["numpy"] == "2.4.6"
    tag = "fp32__matmul_4x1000x3_cancel"
    a, b, y = d[f"{tag}__A"], d[f"{tag}__B"], d[f"{tag}__numpy_matmul"]
    rep = identify_order(y, "matmul", a, b, candidates=variant_orders() + [O.GotoBlocks(384), O.Sequential()])
    assert rep.verdict == "REPRODUCED" and rep.order == order, str(rep)
    assert f"OpenBLAS 0.3.31 sgemm [{core}" in str(rep)


def test_half_inputs_with_a_float32_output_get_cpu_families():
    assert O.VectorCascade(8) in cpu_sums(FP16, 100, 16)
    assert (O.XlaChunks(32, fma=False), None, None) in units(FP16, FP32, FP32, [])
    assert (O.XlaChunks(32, fma=False), None, None) not in units(FP16, FP16, FP32, [])


@pytest.mark.parametrize("isa", ["avx", "avx2"])
def test_torch_sum_dtype_float32_of_fp16(isa):
    d, meta = _load(isa)
    x, y = d["fp16__sum_16x100_wide__X"], d["fp16__sum_16x100_wide__torch_sumf"]
    assert y.dtype == np.float32 and meta["ATEN_CPU_CAPABILITY"] == "avx2"
    rep = identify_order(y, "sum", x, candidates=[O.VectorCascade(8, load=2), O.VectorCascade(8),
                                                  O.VectorCascade(16)])
    assert rep.verdict == "REPRODUCED" and rep.order == O.VectorCascade(8), str(rep)


def test_jax_fp16_dot_with_float32_output():
    d, _ = _load("avx2")
    a, b, y = d["fp16__dot_37_normal__A"], d["fp16__dot_37_normal__B"], d["fp16__dot_37_normal__jax_dotf"]
    rep = identify_order(y, "dot", a, b)
    assert rep.winner is not None and rep.winner.matched == rep.winner.total, str(rep)
    assert rep.verdict in ("REPRODUCED", "AMBIGUOUS")
    if rep.verdict == "REPRODUCED":
        assert rep.order == O.XlaChunks(32, fma=False), str(rep)


@pytest.mark.parametrize(("isa", "fma"), [("avx", False), ("avx2", True)])
def test_sdot_per_core_type(isa, fma):
    d, _ = _load(isa)
    order = O.OpenBlasDot(4, 8, 0, fma, "fp64", "pairwise")
    skylakex = O.OpenBlasDot()
    differs = 0
    for tag in ("dot_37_normal", "dot_1000_normal", "dot_1000_cancel"):
        a, b, y = (d[f"fp32__{tag}__{k}"] for k in ("A", "B", "numpy_dot"))
        assert np.float32(no_simulate(a, b, order)) == y, tag
        differs += np.float32(no_simulate(a, b, skylakex)) != y
    assert differs       # the AVX-512 model is not this kernel
    assert [v.isa.split()[0] for v in variants_of(order)] == [{"avx": "Sandybridge", "avx2": "Haswell"}[isa]]
    with pytest.raises(ValueError, match="registers"):
        O.OpenBlasDot(registers="tree")


def no_simulate(a, b, order):
    import numoracle as no
    return no.simulate("dot", a, b, order=order)


def test_identified_dot_arithmetic_rounds_to_the_kernels_output():
    # regression: OpenBlasDot's sum ends in float64 (its tail_acc); the report's arithmetic left out=fp32 away,
    # so simulate(arith=rep.arithmetic) returned a float64 value the kernel never stores
    import numoracle as no
    from numoracle.core.formats.interop import to_codes
    d, _ = _load("avx2")
    a, b, y = (d[f"fp32__dot_1000_cancel__{k}"] for k in ("A", "B", "numpy_dot"))
    rep = identify_order(y, "dot", a, b, candidates=[O.OpenBlasDot(4, 8, 0, True, "fp64", "pairwise")])
    assert rep.verdict == "REPRODUCED"
    got = no.simulate("dot", a, b, arith=rep.arithmetic, codes=True)
    assert int(got) == int(to_codes(np.asarray(y), "kernel")[0])


AMD_MKL_DOT = O.MklDot(4, 4, fma=False, registers="order", lanes="halves", rest="lane0")


def test_amd_mkl_dot_by_hand_at_6_terms():
    # products rounded to float32 first; terms 0..3 one per lane of register 0, the rest (4, 5) added one by one
    # to lane 0; the other registers +0; then the lanes by halves: (v0 + v2) + (v1 + v3)
    rng = np.random.default_rng(9)
    for _ in range(20):
        a, b = (rng.standard_normal(6) * np.exp2(rng.integers(-9, 9, 6))).astype(np.float32), \
            rng.standard_normal(6).astype(np.float32)
        p = a * b                                                   # float32 products, each rounded
        v = [((p[0] + p[4]) + p[5]), p[1], p[2], p[3]]
        want = (v[0] + v[2]) + (v[1] + v[3])
        got = np.float32(no_simulate(a, b, AMD_MKL_DOT))
        assert got.view(np.uint32) == np.float32(want).view(np.uint32)
    assert O.parse(str(AMD_MKL_DOT)) == AMD_MKL_DOT and O.MklDot() == O.MklDot(16, 4, True, "pairwise")
    for bad in ({"registers": "tree"}, {"lanes": "pairs"}, {"rest": "tail"}):
        with pytest.raises(ValueError, match="must be one of"):
            O.MklDot(**bad)


@pytest.mark.parametrize("isa", ["avx", "avx2"])
def test_amd_mkl_dot_is_the_recorded_torch_dot(isa):
    # torch 2.13.0+cpu's torch.dot recorded on the AMD EPYC under MKL_ENABLE_INSTRUCTIONS=AVX2 (seeds 300 / 400;
    # the model was fitted on seed 5): every recorded dot, and the variant names it
    d, meta = _load(isa)
    assert meta["MKL_ENABLE_INSTRUCTIONS"] == "AVX2" and meta["cpu"] == "AMD EPYC"
    differs = 0
    for tag in ("dot_37_normal", "dot_1000_normal", "dot_1000_cancel"):
        a, b, y = (d[f"fp32__{tag}__{k}"] for k in ("A", "B", "torch_dot"))
        assert np.float32(no_simulate(a, b, AMD_MKL_DOT)).view(np.uint32) == y.view(np.uint32), tag
        differs += np.float32(no_simulate(a, b, O.MklDot())).view(np.uint32) != y.view(np.uint32)
    assert differs       # the Xeon's AVX-512 model is not this kernel
    assert [v.isa for v in variants_of(AMD_MKL_DOT)] == ["AMD Zen 5 (any MKL_ENABLE_INSTRUCTIONS)"]
    assert AMD_MKL_DOT in variant_orders()


def test_amd_mkl_dot_on_fresh_data():
    # the live kernel, where it is the recording's: torch 2.13.0+cpu on an AMD CPU (fresh seed 8, n = 1 .. 40, 1000)
    torch = torch_on_amd()
    rng = np.random.default_rng(8)
    for n in list(range(1, 41)) + [1000]:
        a = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 21, n))).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        y = torch.dot(torch.from_numpy(a), torch.from_numpy(b)).numpy()
        assert np.float32(no_simulate(a, b, AMD_MKL_DOT)).view(np.uint32) == y.view(np.uint32), n


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_jax_half_dot_with_float32_output_on_fresh_lengths(dtype):
    # jax 0.10.2's jnp.dot(a, b, preferred_element_type=float32) of fp16 / bf16 vectors is XlaChunks(32, fma=False)
    # (one chain up to 32 terms; 37: 19 + 18; 64: 32 + 32; 100: 18 + 32 + 32 + 18): fresh seed 41, lengths it was
    # not read off (the live kernel; skips without jax)
    jax = pytest.importorskip("jax")
    import ml_dtypes

    import numoracle as no
    jnp = jax.numpy
    dt = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    f = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))
    rng = np.random.default_rng(41)
    misses = 0
    for n in (1, 31, 33, 65, 66, 97, 131, 700, 2049):
        a = (rng.standard_normal(n) * np.exp2(rng.integers(-6, 7, n))).astype(dt)
        b = rng.standard_normal(n).astype(dt)
        y = np.float32(f(a, b))
        got = np.float32(no.simulate("dot", a, b, order=O.XlaChunks(32, fma=False), acc="fp32", out="fp32"))
        assert got.view(np.uint32) == y.view(np.uint32), n
        misses += np.float32(no.simulate("dot", a, b, order=O.Sequential(), acc="fp32", out="fp32")) != y
    assert misses       # a single chain is not the kernel
