"""reveal_order on this machine's real CPU kernels: numpy (OpenBLAS), torch, jax; reproduced on fresh data."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no
from numoracle import reveal_order
from numoracle.core.formats.interop import native_dtype
from numoracle.core.inputs import exact_float64

KINDS = ("normal", "mixed", "cancelling")        # the fresh data of the acceptance check (besides reveal's own)


def _fresh(op, dims, dtype, kind, rng):
    dt = native_dtype(no.formats.format_of(dtype))
    shapes = {"sum": [(dims,)], "dot": [(dims,), (dims,)]}.get(op) or [dims[:2], dims[1:]]
    out = []
    for s in shapes:
        x = rng.standard_normal(s)
        if kind == "mixed":
            x = x * np.exp2(rng.integers(-8, 9, s))
        elif kind == "cancelling":
            x = np.concatenate([x.ravel()[: x.size // 2], -x.ravel()[: x.size // 2][::-1] * 1.0001,
                                x.ravel()[2 * (x.size // 2):]]).reshape(s)
        out.append(x.astype(dt))
    return out


def _check(fn, op, dims, dtype, draws=3):
    kw = {"shape": dims} if op == "matmul" else {"n": dims}
    rep = reveal_order(fn, op, dtype=dtype, **kw)
    assert rep.verdict == "reproduced", str(rep)
    rng = np.random.default_rng(2024)
    for kind in KINDS:
        for _ in range(draws):
            ins = _fresh(op, dims, dtype, kind, rng)
            want, _ = exact_float64(fn(*ins), "fn")
            got = no.simulate(op, *ins, order=rep.order)
            assert np.array_equal(np.asarray(got).reshape(want.shape), want, equal_nan=True), (kind, rep)
    return rep


@pytest.mark.parametrize(("dtype", "n"), [("fp32", 4096), ("fp32", 1000), ("fp16", 1000)])
def test_numpy_sum(dtype, n):
    rep = _check(np.sum, "sum", n, dtype)
    assert rep.tree_calls < n * (n - 1) // 2


def test_numpy_dot():
    _check(np.dot, "dot", 1000, "fp32")


@pytest.mark.parametrize("K", [256, 1000])
def test_numpy_matmul_openblas(K):
    rep = _check(lambda A, B: A @ B, "matmul", (8, K, 6), "fp32", draws=1)
    assert rep.tree_calls < K - 1      # a probe pair per row of A: fewer calls than even a chain needs one by one


def test_torch_cpu():
    torch = pytest.importorskip("torch")
    _check(lambda x: torch.from_numpy(x).sum(), "sum", 1024, "fp32")
    _check(lambda A, B: torch.from_numpy(A) @ torch.from_numpy(B), "matmul", (8, 256, 5), "fp32", draws=1)
    _check(lambda x: torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16).sum(dtype=torch.float32),
           "sum", 1024, "bf16")


@pytest.mark.slow
def test_torch_cpu_sum_4096():
    torch = pytest.importorskip("torch")
    _check(lambda x: torch.from_numpy(x).sum(), "sum", 4096, "fp32")


def test_jax_cpu():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_platforms", "cpu")
    fsum, fdot = jax.jit(jnp.sum), jax.jit(jnp.dot)
    _check(lambda x: fsum(x), "sum", 1000, "fp32")
    _check(lambda a, b: fdot(a, b), "dot", 1000, "fp32")
