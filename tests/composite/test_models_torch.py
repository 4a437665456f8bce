"""The torch CPU models (numoracle.composite.sim.torchcpu) bit for bit against live torch 2.13.0 CPU kernels, on seeded
rows of several lengths, large logits and near-ties; and the steps they pin: a wrong order, exp or form differs.

The models are of the x86-64 build with CPU capability AVX512 (softmax's 16 float lanes); elsewhere the tests skip.
"""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.composite.sim import elementwise as ew
from numoracle.composite.sim.model import simulate_layer_norm, simulate_log_softmax, simulate_softmax
from numoracle.composite.sim.torchcpu import (
    torch_cpu_layer_norm,
    torch_cpu_log_softmax,
    torch_cpu_rms_norm,
    torch_cpu_softmax,
    torch_softmax_order,
)
from numoracle.orders import Sequential
from optional import needs

LENGTHS = (7, 64, 1000, 4096, 1001)


@pytest.fixture(scope="module")
def torch():
    t = needs("torch")
    cap = t.backends.cpu.get_cpu_capability()
    if cap != "AVX512":
        pytest.skip(f"the torch CPU models are of the AVX512 build; this machine runs {cap}")
    return t


def _rows(rng, n, kind, rows=6):
    if kind == "large":
        return (rng.standard_normal((rows, n)) * 1e3).astype(np.float32)
    if kind == "ties":
        x = rng.standard_normal((rows, n)).astype(np.float32)
        x[:, 1::2] = np.nextafter(x[:, ::2][:, : x[:, 1::2].shape[1]], np.float32(np.inf))
        return x
    return (rng.standard_normal((rows, n)) * rng.choice([0.5, 3.0, 20.0])).astype(np.float32)


def _inputs(torch, x, dtype):
    t = torch.from_numpy(x)
    if dtype == "bf16":
        import ml_dtypes
        t = t.bfloat16()
        return t, t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t, x


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("kind", ["normal", "large", "ties"])
def test_softmax_and_log_softmax_bit_exact(torch, dtype, kind):
    rng = np.random.default_rng(100 + len(kind) + (dtype == "bf16"))
    for n in LENGTHS:
        t, x = _inputs(torch, _rows(rng, n, kind), dtype)
        assert (torch_cpu_softmax(x) == torch.softmax(t, -1).double().numpy()).all(), (n, kind, dtype)
        assert (torch_cpu_log_softmax(x) == torch.log_softmax(t, -1).double().numpy()).all(), (n, kind, dtype)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_norms_bit_exact(torch, dtype):
    rng = np.random.default_rng(200 + (dtype == "bf16"))
    F = torch.nn.functional
    for n in LENGTHS:
        t, x = _inputs(torch, (rng.standard_normal((6, n)) * 3 + 2).astype(np.float32), dtype)
        tw, w = _inputs(torch, rng.standard_normal(n).astype(np.float32), dtype)
        tb, b = _inputs(torch, rng.standard_normal(n).astype(np.float32), dtype)
        assert (torch_cpu_layer_norm(x, eps=1e-5) == F.layer_norm(t, (n,), eps=1e-5).double().numpy()).all()
        assert (torch_cpu_layer_norm(x, w, b, eps=1e-5)
                == F.layer_norm(t, (n,), tw, tb, eps=1e-5).double().numpy()).all(), n
        assert (torch_cpu_rms_norm(x) == torch.rms_norm(t, (n,)).double().numpy()).all(), n
        assert (torch_cpu_rms_norm(x, w, eps=1e-6) == torch.rms_norm(t, (n,), tw, eps=1e-6).double().numpy()).all()


def test_layer_norm_statistics_bit_exact(torch):
    """mean and rstd as native_layer_norm returns them: the moments' order and forms, seen directly."""
    from numoracle.composite.sim.moments import rowwise_moments
    from numoracle.core.formats.format import FP32
    rng = np.random.default_rng(300)
    for n in (7, 15, 23, 64, 257, 4099):
        x = (rng.standard_normal((20, n)) * 3 + 1).astype(np.float32)
        _, mean, rstd = torch.native_layer_norm(torch.from_numpy(x), (n,), None, None, 0.0)
        mo = rowwise_moments(x.astype(np.float64), FP32, lanes=8, fused=True, contract=True)
        assert (mo.mean == mean.numpy().ravel()).all() and (ew.rsqrt_div_sqrt(mo.var) == rstd.numpy().ravel()).all()
        if n >= 23:     # 16 lanes (the softmax's) or no contraction: wrong somewhere
            wrong = rowwise_moments(x.astype(np.float64), FP32, lanes=16, contract=True)
            assert (wrong.mean != mean.numpy().ravel()).any()
            assert (rowwise_moments(x.astype(np.float64), FP32, lanes=8).mean != mean.numpy().ravel()).any()


def test_the_pinned_steps_matter(torch):
    """Each finding is needed: torch.exp in place of SLEEF's, a sequential sum, division by S, two roundings in
    layer_norm's affine step, or an fp32 log_softmax statistic for bf16 all differ from the kernel somewhere."""
    rng = np.random.default_rng(400)
    x = (rng.standard_normal((8, 1000)) * 3).astype(np.float32)
    t = torch.from_numpy(x)
    want = torch.softmax(t, -1).double().numpy()
    order = lambda n: torch_softmax_order(n)   # noqa: E731
    assert (simulate_softmax(x, order, exp=ew.sleef_expf_u10) == want).all()
    assert (simulate_softmax(x, order, exp=torch.exp) != want).any()
    assert (simulate_softmax(x, Sequential(), exp=ew.sleef_expf_u10) != want).any()
    assert (simulate_softmax(x, order, exp=ew.sleef_expf_u10, normalize="divide") != want).any()
    w, b = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    ln = torch.nn.functional.layer_norm(t, (1000,), torch.from_numpy(w), torch.from_numpy(b)).double().numpy()
    assert (simulate_layer_norm(x, w, b, variance="rowwise", lanes=8, contract=False, rsqrt=ew.rsqrt_div_sqrt)
            != ln).any()
    import ml_dtypes
    tb = t.bfloat16()
    xb = tb.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    lb = torch.log_softmax(tb, -1).double().numpy()
    assert (simulate_log_softmax(xb, order, exp=ew.sleef_expf_u10) != lb).any()
    assert (simulate_log_softmax(xb, order, exp=ew.sleef_expf_u10, stats="bf16") == lb).all()
