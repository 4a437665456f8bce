"""Conformance: numoracle's GPTQ int4 packing (v1, "zeros minus one") against auto-gptq 0.7.1 itself
(``auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py``, ``QuantLinear.pack``), on CPU.

auto-gptq's package ``__init__`` imports its model zoo and CUDA kernels; ``qlinear_cuda_old`` needs torch and
transformers only (its CUDA extension is optional there), so the test imports that module without running the
package ``__init__``. Weights are ``(q - z) * s`` with power-of-two FP16 scales, so ``round((w + z s) / s)``
recovers q exactly and the comparison is of the layout alone. Default tier 2^14 codes, ``-m slow`` 2^20.
Report: docs/conformance.md ("auto-gptq").
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

import numpy as np
import pytest

from numoracle.quant import Int4Weights
from optional import needs


@pytest.fixture(scope="module")
def gptq():
    torch = needs("torch")
    spec = importlib.util.find_spec("auto_gptq")
    if spec is None or importlib.util.find_spec("transformers") is None:
        pytest.skip("needs auto_gptq (not installed: pip install --no-deps auto-gptq==0.7.1, with torch and "
                    "transformers)")
    if "auto_gptq" not in sys.modules:
        stub = types.ModuleType("auto_gptq")  # the package without its __init__ (model zoo, CUDA kernels)
        stub.__path__ = list(spec.submodule_search_locations)
        sys.modules["auto_gptq"] = stub
    return torch, importlib.import_module("auto_gptq.nn_modules.qlinear.qlinear_cuda_old")


@pytest.mark.parametrize("K, N, group", [(256, 64, 128), pytest.param(4096, 256, 128, marks=pytest.mark.slow)])
def test_pack_as_numoracle(gptq, K, N, group):
    torch, ql = gptq
    rng = np.random.default_rng(K + N)
    codes = rng.integers(0, 16, (K, N))
    codes[:2], codes[2:4] = 0, 15
    zeros = rng.integers(1, 16, (K // group, N))  # v1 stores z - 1: z = 0 cannot be stored (numoracle refuses it)
    scales = np.ldexp(1.0, rng.integers(-12, -2, (K // group, N)))
    w = Int4Weights(codes, scales, zeros, group, "gptq")
    linear = torch.nn.Linear(K, N, bias=False)
    linear.weight.data = torch.from_numpy(np.asarray(w.dequantize(), np.float16).T.copy())  # (N, K), exact
    layer = ql.QuantLinear(4, group, K, N, False)
    g_idx = torch.arange(K, dtype=torch.int32) // group
    layer.pack(linear, torch.from_numpy(scales.T.astype(np.float16)), torch.from_numpy(zeros.T.copy()), g_idx)
    ours = w.pack()
    assert np.array_equal(layer.qweight.numpy(), ours["qweight"]) and layer.qweight.dtype == torch.int32
    assert np.array_equal(layer.qzeros.numpy(), ours["qzeros"])
    assert np.array_equal(layer.scales.numpy().view(np.uint16), ours["scales"].view(np.uint16))
    back = Int4Weights.from_packed({"qweight": layer.qweight.numpy(), "qzeros": layer.qzeros.numpy(),
                                    "scales": layer.scales.numpy()}, convention="gptq", shape=(K, N), group=group)
    assert np.array_equal(back.codes, codes) and np.array_equal(back.zeros, zeros)
