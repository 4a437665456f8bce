"""YnnSum (models/orders/ynnpack.py): YNNPACK's float sum, the mechanism of jax 0.10.2's CPU ``jnp.sum``, against a
scalar transcription of ``ynnpack/kernels/reduce/sum.h``, a case by hand, the recorded jax outputs (tests/data/cpu)
and, where jax is installed, the live kernel on fresh data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import numoracle as no
from numoracle import orders as O

F = np.float32
DATA = Path(__file__).resolve().parents[1] / "data" / "cpu"


def _kahan(a, acc, err):
    y = F(a - err)
    t = F(acc + y)
    e = F(F(t - acc) - y)
    return t, (e if np.isfinite(e) else F(0))


def _tree(partials, clocks):
    """sum.h's accumulate(): partials with the clock after each (None: no tick), then the final flush."""
    acc0 = acc1 = acc2 = err = F(0)
    for p, clock in [*zip(partials, clocks), (F(0), 0)]:
        acc0 = F(acc0 + p)
        if clock is not None and clock % 16 == 0:
            acc1, acc0 = F(acc1 + acc0), F(0)
            if clock % 256 == 0:
                (acc2, err), acc1 = _kahan(acc1, acc2, err), F(0)
    return acc2


def _chain(xs):
    s = F(0)
    for x in xs:
        s = F(s + x)
    return s


def ref_kn(col):
    """sum_float_kn for one output: partials of 4 rows, clock += 4."""
    k = col.size
    if k <= 4:
        return _chain(col)
    parts = [_chain(col[r:r + 4]) for r in range(0, k, 4)]
    return _tree(parts, [4 * (j + 1) if 4 * (j + 1) <= k else None for j in range(len(parts))])


def ref_k1(row, lanes=16):
    """sum_float_k1 for one row: 4*lanes-term blocks, unrolled by 4 while 16*lanes terms remain; halving."""
    k, blk = row.size, 4 * lanes
    nb, clocks, clock = k // blk, [], 0
    for j in range(nb):
        if j < 4 * (nb // 4):
            clock += 4 * lanes if j % 4 == 3 else 0
            clocks.append(clock if j % 4 == 3 else None)
        else:
            clock += lanes
            clocks.append(clock)
    clocks += [None] if k % blk else []
    pad = np.zeros(-(-k // blk) * blk, F)
    pad[:k] = row
    blocks = pad.reshape(-1, 4, lanes)
    acc = [_tree([_chain(b[:, lane]) for b in blocks], clocks) for lane in range(lanes)]
    while len(acc) > 1:
        h = len(acc) // 2
        acc = [F(acc[i] + acc[i + h]) for i in range(h)]
    return acc[0]


def _data(n, m=6, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, n)) * np.exp2(rng.integers(-8, 8, (m, n)))
    x[-1] = rng.standard_normal(n) + 1e4 * (np.arange(n) == 0) - 1e4 * (np.arange(n) == n - 1)     # cancelling
    return x.astype(F)


KN_SIZES = [1, 4, 5, 17, 255, 256, 257, 512, 777, 1024, 1300, 4099]
K1_SIZES = [1, 63, 64, 65, 255, 256, 1000, 1024, 1025, 2100, 5000]


@pytest.mark.parametrize(("layout", "n", "split"), [("kn", n, 300) for n in KN_SIZES] +
                         [("k1", n, 700) for n in K1_SIZES])
def test_the_transcribed_kernel(layout, n, split):
    """YnnSum against the kernel transcribed step by step (ref_kn / ref_k1), whole and split into pieces of
    ``split`` whose sums the same kernel adds."""
    ref = {"kn": ref_kn, "k1": ref_k1}[layout]
    x = _data(n, seed=n)
    got = no.simulate("sum", x, order=O.YnnSum(layout))
    np.testing.assert_array_equal(got, [ref(r) for r in x])
    parts = no.simulate("sum", x, order=O.YnnSum(layout, split=split))
    np.testing.assert_array_equal(parts, [ref(np.array([ref(r[s:s + split]) for s in range(0, n, split)], F))
                                          for r in x])


def test_by_hand_six_rows_and_the_kahan_correction():
    # kn over 6 rows: ((((t0 + t1) + t2) + t3) + (t4 + t5)), the 256-row Kahan level not reached
    t = np.array([1.0, 2.0**-24, 2.0**-24, 0.0, 2.0**-24, 2.0**-24], F)
    assert no.simulate("sum", t, order=O.YnnSum("kn")) == F(1.0) + F(2.0**-23)   # (1 + 2^-24 + 2^-24) stays 1
    # 768 rows: three 256-row blocks 1, 2^-24 and 2^-24 (one partial each). Kahan: t = fl(1 + 2^-24) = 1 (a tie,
    # to even), err = (1 - 1) - 2^-24 = -2^-24; then y = 2^-24 - err = 2^-23 and t = 1 + 2^-23, where a plain
    # fp32 sum of the three stays at 1
    col = np.zeros(768, F)
    col[0], col[256], col[512] = 1.0, 2.0**-24, 2.0**-24
    assert no.simulate("sum", col, order=O.YnnSum("kn")) == F(1.0) + F(2.0**-23) == ref_kn(col)
    assert no.simulate("sum", col, order=O.Sequential()) == F(1.0)
    col[767] = -F(2.0**-22)   # the last block -2^-22 + 2^-24: the compensation of the step before it still counts
    assert no.simulate("sum", col, order=O.YnnSum("kn")) == ref_kn(col)


def _recorded(fmt, tag, name):
    d = np.load(DATA / f"{fmt}.npz")
    return d[f"{tag}__X"], d[f"{tag}__{name}"]


@pytest.mark.parametrize("fmt,tag,name,order", [
    ("fp32", "sum_8x1000_normal", "jax_sum0", O.YnnSum("kn")),
    ("fp32", "sum_8x1000_wide", "jax_sum0", O.YnnSum("kn")),
    ("fp32", "sum_8x1000_cancel", "jax_sum0", O.YnnSum("kn")),
    ("fp16", "sum_8x1000_normal", "jax_sum0", O.YnnSum("kn")),
    ("fp16", "sum_8x1000_cancel", "jax_sum0", O.YnnSum("kn")),
    ("fp32", "sum_2x5000_normal", "jax_sum", O.YnnSum("k1")),
    ("fp32", "sum_2x5000_wide", "jax_sum", O.YnnSum("k1")),
    ("fp32", "sum_2x5000_normal", "jax_sum0", O.YnnSum("kn")),
    ("fp32", "sum_2x5000_wide", "jax_sum0", O.YnnSum("kn")),
    ("fp32", "sum_1x40000_normal", "jax_sum", O.YnnSum("k1", split=32768)),
    ("fp32", "sum_1x40000_normal", "jax_sum0", O.YnnSum("k1", split=32768)),   # one column: contiguous
])
def test_recorded_jax_sums_reproduced(fmt, tag, name, order):
    x, y = _recorded(fmt, tag, name)
    out = "fp16" if fmt == "fp16" else None
    got = no.simulate("sum", x, order=order, acc="fp32", out=out)
    np.testing.assert_array_equal(np.asarray(got).astype(y.dtype).view(np.uint8), y.view(np.uint8))


@pytest.mark.parametrize("make,msg", [
    (lambda: O.YnnSum("k2"), "layout must be 'k1'"),
    (lambda: O.YnnSum("k1", 12), "power of two"),
    (lambda: O.YnnSum("k1", 0), "lanes"),
    (lambda: O.YnnSum("kn", 16, 1, -1), "split"),
    (lambda: O.YnnSum("kn", 16, 2), "pack applies to the k1 layout"),
])
def test_bad_parameters_are_refused(make, msg):
    with pytest.raises(Exception, match=msg):
        make()


def test_text_round_trip():
    for o in (O.YnnSum(), O.YnnSum("kn"), O.YnnSum("k1", 8, 2, 32768)):
        assert O.parse(str(o)) == o


def _cancelling(n, rows, seed):
    """Normal data with four +2^14 and four -2^14 per row: the large partial sums round the rest."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, n))
    for r in range(rows):
        pos = rng.choice(n, 8, replace=False)
        x[r, pos[:4]], x[r, pos[4:]] = 2.0**14, -2.0**14
    return x


@pytest.mark.parametrize("n,rows", [(1000, 8), (3000, 8), (5000, 2), (20000, 3), (40000, 1), (70000, 1),
                                    (40000, 4), (3000, 64), (2000, 256)])
def test_live_jax_on_fresh_data(n, rows):
    pytest.importorskip("jax")
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from cpu_kernels import kernel, versions
    if versions().get("jax") != "0.10.2":
        pytest.skip("checked against jax 0.10.2's YNNPACK")
    from numoracle.models.orders.ynnpack import ynn_split
    x = _cancelling(n, rows, seed=n + rows).astype(F)
    k1 = O.YnnSum("k1", split=ynn_split("k1", n, rows))
    np.testing.assert_array_equal(kernel("jax_sum")(x), no.simulate("sum", x, order=k1))
    kn = O.YnnSum("k1", split=ynn_split("k1", n, 1)) if rows == 1 else O.YnnSum("kn", split=ynn_split("kn", n, rows))
    np.testing.assert_array_equal(kernel("jax_sum0")(x), no.simulate("sum", x, order=kn))


def test_live_jax_bf16_reads_two_inputs_a_lane():
    pytest.importorskip("jax")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from cpu_kernels import kernel, versions
    if versions().get("jax") != "0.10.2":
        pytest.skip("checked against jax 0.10.2's YNNPACK")
    x = _cancelling(3000, 8, seed=1).astype(ml_dtypes.bfloat16)
    live = kernel("jax_sum")(x)
    got = no.simulate("sum", x, order=O.YnnSum("k1", pack=2), acc="fp32", out="bf16")
    np.testing.assert_array_equal(np.asarray(got).astype(np.float32), np.asarray(live).astype(np.float32))
    one = no.simulate("sum", x, order=O.YnnSum("k1"), acc="fp32", out="bf16")
    assert (np.asarray(one).astype(np.float32) != np.asarray(live).astype(np.float32)).any()


def test_live_jax_small_arrays_are_xlas_own_loop():
    # below 4096 elements XLA keeps its reduce-window rewrite (XlaChunks, chunked again past 32 windows)
    pytest.importorskip("jax")
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from cpu_kernels import kernel, versions
    if versions().get("jax") != "0.10.2":
        pytest.skip("checked against jax 0.10.2")
    for n, rows in ((3001, 1), (2000, 2), (250, 16)):
        x = _cancelling(n, rows, seed=n).astype(F)
        np.testing.assert_array_equal(kernel("jax_sum")(x), no.simulate("sum", x, order=O.XlaChunks(32)))
        np.testing.assert_array_equal(kernel("jax_sum0")(x), no.simulate("sum", x, order=O.XlaChunks(32)))
    x = _cancelling(4096, 1, seed=4096).astype(F)                 # 4096 elements: YNNPACK
    np.testing.assert_array_equal(kernel("jax_sum")(x), no.simulate("sum", x, order=O.YnnSum("k1")))
