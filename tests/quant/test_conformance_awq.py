"""Conformance: numoracle's AWQ int4 packing against AutoAWQ 0.2.9 itself (``WQLinear_GEMM.from_linear`` packs,
``awq.utils.packing_utils.dequantize_gemm`` unpacks and dequantises), on CPU.

AutoAWQ's package ``__init__`` imports its model zoo (transformers); its packing modules need torch, accelerate
(and that one's packaging, safetensors, pyyaml, psutil) only, so the test imports ``awq.modules.linear.gemm``
without running the package ``__init__``. Weights are ``(q - z) * s`` with power-of-two
FP16 scales, so AutoAWQ's ``round((w + z s) / s)`` recovers q exactly and the comparison is of the layout alone.
Default tier 2^14 codes, ``-m slow`` 2^20. Report: docs/conformance.md ("AutoAWQ").
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
def awq():
    torch = needs("torch")
    spec = importlib.util.find_spec("awq")
    if spec is None or importlib.util.find_spec("accelerate") is None:
        pytest.skip("needs autoawq (not installed: pip install autoawq==0.2.9 --no-deps, with torch and accelerate)")
    if "awq" not in sys.modules:
        stub = types.ModuleType("awq")  # the package without its __init__ (which imports transformers' models)
        stub.__path__ = list(spec.submodule_search_locations)
        sys.modules["awq"] = stub
    gemm = importlib.import_module("awq.modules.linear.gemm")
    packing = importlib.import_module("awq.utils.packing_utils")
    return torch, gemm, packing


def _weights(K: int, N: int, group: int, seed: int) -> Int4Weights:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 16, (K, N))
    codes[:2], codes[2:4] = 0, 15  # both ends of the range
    zeros = rng.integers(0, 16, (K // group, N))
    scales = np.ldexp(1.0, rng.integers(-12, -2, (K // group, N)))  # exact (q - z) * s in FP16
    return Int4Weights(codes, scales, zeros, group, "awq")


@pytest.mark.parametrize("K, N, group", [(256, 64, 128), pytest.param(4096, 256, 128, marks=pytest.mark.slow)])
def test_from_linear_packs_as_numoracle(awq, K, N, group):
    torch, gemm, packing = awq
    w = _weights(K, N, group, K + N)
    linear = torch.nn.Linear(K, N, bias=False)
    linear.weight.data = torch.from_numpy(w.dequantize().T.copy()).half()  # (N, K): (q - z) * s, exact
    zeros = torch.from_numpy(w.zeros.astype(np.int32))
    scales = torch.from_numpy(w.scales.astype(np.float16))
    theirs = gemm.WQLinear_GEMM.from_linear(linear, 4, group, scales=scales, zeros=zeros)
    ours = w.pack()
    assert np.array_equal(theirs.qweight.numpy(), ours["qweight"]) and theirs.qweight.dtype == torch.int32
    assert np.array_equal(theirs.qzeros.numpy(), ours["qzeros"])
    assert np.array_equal(theirs.scales.numpy().view(np.uint16), ours["scales"].view(np.uint16))
    # and AutoAWQ's own unpacking of numoracle's tensors gives numoracle's dequantised FP16 values
    y = packing.dequantize_gemm(torch.from_numpy(ours["qweight"]), torch.from_numpy(ours["qzeros"]),
                                torch.from_numpy(ours["scales"]), 4, group)
    assert np.array_equal(y.numpy().view(np.uint16), np.asarray(w.dequantize(), np.float16).view(np.uint16))
    back = Int4Weights.from_packed({k: v.numpy() for k, v in (("qweight", theirs.qweight), ("qzeros", theirs.qzeros),
                                                              ("scales", theirs.scales))},
                                   convention="awq", shape=(K, N), group=group)
    assert np.array_equal(back.codes, w.codes) and np.array_equal(back.zeros, w.zeros)
