"""The CPU kernels' orders (models/orders/cpu.py) against trees reveal_order read off torch 2.13 and jax 0.10 on
this machine (tests/reveal shows how), and their bounds' depth against the schedule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O
from numoracle.models.orders.cpu import goto_blocks, schedule_depth, xla_chunk_sizes

# revealed trees (reveal_order(torch.sum / jax.jit(jnp.sum), "sum", n=n, dtype="fp32").order.text())
TORCH = {
    7: "((((((0+4)+5)+6)+1)+2)+3)",
    12: "((((((((0+(11+((8+9)+10)))+1)+2)+3)+4)+5)+6)+7)",
    20: "(((((((((0+8)+(19+((16+17)+18)))+(9+1))+(10+2))+(11+3))+(12+4))+(13+5))+(14+6))+(15+7))",
    40: "(((((((((((0+32)+8)+16)+24)+((((33+1)+9)+17)+25))+((((34+2)+10)+18)+26))+((((35+3)+11)+19)+27))+((((36+4)"
        "+12)+20)+28))+((((37+5)+13)+21)+29))+((((38+6)+14)+22)+30))+((((39+7)+15)+23)+31))",
}


def _chain(lo, hi):
    s = str(lo)
    for i in range(lo + 1, hi):
        s = f"({s}+{i})"
    return s


def _slices_in_order(sizes):
    """The text of consecutive slices, each a chain from its first term, their sums added in order."""
    starts = np.cumsum([0] + sizes)
    text = _chain(0, sizes[0])
    for lo, hi in zip(starts[1:-1], starts[2:]):
        text = f"({text}+{_chain(int(lo), int(hi))})"
    return text


def _same(order, tree, draws=4):
    rng = np.random.default_rng(3)
    shape = (draws * 8, tree.n)
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-10, 10, shape))).astype(np.float32)
    np.testing.assert_array_equal(no.simulate("sum", x, order=order), no.simulate("sum", x, order=tree))


@pytest.mark.parametrize("n", sorted(TORCH))
def test_vector_cascade_is_torchs_revealed_tree(n):
    _same(O.VectorCascade(), O.TreeOrder.from_text(TORCH[n]))


@pytest.mark.parametrize(("n", "sizes"), [(20, [20]), (33, [17, 16]), (64, [32, 32]), (65, [17, 32, 16]),
                                          (130, [17, 32, 32, 32, 17]), (1000, [20] + [32] * 30 + [20])])
def test_xla_chunks_as_revealed(n, sizes):
    assert xla_chunk_sizes(n, 32) == sizes
    _same(O.XlaChunks(), O.TreeOrder.from_text(_slices_in_order(sizes)))


def test_xla_chunks_chunk_their_sums_again():
    # n = 2000: XLA's reduce-window pads 2000 to 63 windows of 32 (8 low, 8 high: 24, 61 x 32, 24); the 63 sums
    # are windowed again (0 low, 1 high: 32 and 31 of them), and those two added
    assert xla_chunk_sizes(2000, 32) == [24] + [32] * 61 + [24] and xla_chunk_sizes(63, 32) == [32, 31]
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((6, 2000)) * np.exp2(rng.integers(-10, 10, (6, 2000)))).astype(np.float32)

    def chain(v):
        s = np.float32(0)
        for e in v:
            s = np.float32(s + e)
        return s
    starts = np.cumsum([0] + xla_chunk_sizes(2000, 32))
    want = []
    for r in x:
        sums = [chain(r[lo:hi]) for lo, hi in zip(starts[:-1], starts[1:])]
        want.append(np.float32(chain(sums[:32]) + chain(sums[32:])))
    np.testing.assert_array_equal(no.simulate("sum", x, order=O.XlaChunks()), want)


def test_interleaved_and_the_cascade_levels():
    # 16 lanes with FMA chains, a pairwise tree over lanes (numpy's OpenBLAS sgemm at K = 37)
    lanes = [f"(({j}+{j + 16})+{j + 32})" if j + 32 < 37 else f"({j}+{j + 16})" for j in range(16)]

    def pw(v):
        return v[0] if len(v) == 1 else f"({pw(v[:len(v) - len(v) // 2])}+{pw(v[len(v) - len(v) // 2:])})"
    _same(O.Interleaved(16, "pairwise"), O.TreeOrder.from_text(pw(lanes)))
    # the cascade: level 0 takes 16 items at a time, so a plain cascade of 40 terms is (c(0..15)+c(16..31))+c(32..39)
    # added as lvl0 (the last 8) + lvl1 (the two blocks of 16)
    text = f"({_chain(32, 40)}+({_chain(0, 16)}+{_chain(16, 32)}))"
    _same(O.VectorCascade(1, 1), O.TreeOrder.from_text(text))


def test_thread_split_chunks_and_depths():
    ts = O.ThreadSplit(2, 32768)
    assert ts.chunks(40000) == [20000, 20000] and ts.chunks(30000) == [30000] and ts.chunks(70001) == [35001, 35000]
    assert O.ThreadSplit(8, 1000).chunks(2500) == [834, 834, 832]
    assert schedule_depth(O.Sequential(), 100) == 100            # the +0 start counts
    assert schedule_depth(O.Interleaved(4, "pairwise"), 64) == 16 + 2
    b = no.expected_error_bound("sum", "fp32", 4096, order=O.VectorCascade())
    assert b.depth < 200 < no.expected_error_bound("sum", "fp32", 4096, order="sequential").depth
    assert no.expected_error_bound("sum", "fp32", 4096, order=str(O.XlaVector())) == \
        no.expected_error_bound("sum", "fp32", 4096, order=O.XlaVector())


def test_xla_scan_as_revealed():
    # jax.jit(jnp.cumsum)(X)[:, -1] at n = 300: chains of 16, the first 16 block sums chained, the next two added,
    # then the levels from the top down: (G + (b16 + b17)) + rest
    blocks = [_chain(16 * i, 16 * i + 16) for i in range(18)]
    g = blocks[0]
    for blk in blocks[1:16]:
        g = f"({g}+{blk})"
    text = f"(({g}+({blocks[16]}+{blocks[17]}))+{_chain(288, 300)})"
    _same(O.XlaScan(), O.TreeOrder.from_text(text))


@pytest.mark.parametrize(("K", "sizes"), [(600, [300, 300]), (1000, [384, 308, 308]), (1001, [384, 309, 308]),
                                          (1500, [384, 384, 366, 366]), (385, [193, 192]), (384, [384])])
def test_goto_blocks_as_revealed(K, sizes):
    # torch.mm on this machine's CPU: chains over K blocks, each from +0, added in order (reveal_order's trees)
    assert goto_blocks(K, 384) == sizes
    _same(O.GotoBlocks(384), O.TreeOrder.from_text(_slices_in_order(sizes)), draws=1)


@pytest.mark.parametrize(("make", "msg"), [
    (lambda: O.Interleaved(4, fma="no"), "Interleaved fma must be True or False"),
    (lambda: O.XlaChunks(32, fma=0), "XlaChunks fma must be True or False"),
    (lambda: O.VectorCascade(min_power=2.5), "VectorCascade min_power must be an int"),
    (lambda: O.VectorCascade(min_power=31), r"VectorCascade min_power must lie in \[0, 30\]"),
])
def test_bad_parameters_are_refused(make, msg):
    # fma="no" was read as True (bool("no")): a silently different order
    with pytest.raises(ValueError, match=msg):
        make()


# ---- BLAS dot kernels (models/orders/blasdot.py) ---------------------------------------------------------------------

def _f32(x):
    return np.float32(x)


def test_openblas_dot_by_hand_at_37_terms():
    """One block of 32 products in four 8-lane registers (from +0: each product rounded), the registers added in
    order, 8 -> 4 lanes, two horizontal adds; the 5 tail products summed in double, plus the vector part."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal(37).astype(np.float32)
    b = (rng.standard_normal(37) * np.exp2(rng.integers(-9, 9, 37))).astype(np.float32)
    p = a * b                                                       # float32 products, each rounded once
    r = ((p[0:8] + p[8:16]) + p[16:24]) + p[24:32]
    v = r[:4] + r[4:]
    s = (v[0] + v[1]) + (v[2] + v[3])
    t = 0.0
    for x in p[32:]:
        t += float(x)
    want = _f32(t + float(s))
    got = no.simulate("dot", a, b, order=O.OpenBlasDot())
    assert _f32(got).view(np.uint32) == want.view(np.uint32)
    assert O.parse(str(O.OpenBlasDot())) == O.OpenBlasDot()


def test_mkl_dot_by_hand_at_32_and_5_terms():
    rng = np.random.default_rng(5)
    for n in (32, 5):
        a = rng.standard_normal(n).astype(np.float32)
        b = (rng.standard_normal(n) * np.exp2(rng.integers(-9, 9, n))).astype(np.float32)
        p = np.zeros(32, np.float32)
        p[:n] = a * b
        r = p[:16] + p[16:]                                         # registers 0 and 1 (2 and 3 are +0)
        r = r[:8] + r[8:]
        r = r[:4] + r[4:]
        want = (r[0] + r[1]) + (r[2] + r[3])
        got = no.simulate("dot", a, b, order=O.MklDot())
        assert _f32(got).view(np.uint32) == _f32(want).view(np.uint32), n
    assert O.parse(str(O.MklDot())) == O.MklDot()


@pytest.mark.parametrize(("lib", "order"), [("numpy", O.OpenBlasDot()), ("torch", O.MklDot())])
def test_dot_models_reproduce_the_recorded_dots(lib, order):
    """The recorded dots (tests/data/cpu: numpy 2.4.6's OpenBLAS and torch 2.13.0+cpu's MKL on an AVX-512 machine),
    37 and 1000 terms, normal and cancelling data: the model gives the recorded bits."""
    d = np.load(Path(__file__).resolve().parents[1] / "data" / "cpu" / "fp32.npz")
    for tag in ("dot_37_normal", "dot_1000_normal", "dot_1000_cancel"):
        got = no.simulate("dot", d[f"{tag}__A"], d[f"{tag}__B"], order=order)
        assert _f32(got).view(np.uint32) == d[f"{tag}__{lib}_dot"].view(np.uint32), tag


def test_dot_models_refuse_bad_shapes():
    with pytest.raises(ValueError, match="power of two"):
        O.OpenBlasDot(vec=6)
    with pytest.raises(ValueError, match="wide"):
        O.OpenBlasDot(vec=16, wide=8)
    with pytest.raises(ValueError, match="power of two"):
        O.MklDot(accumulators=3)
