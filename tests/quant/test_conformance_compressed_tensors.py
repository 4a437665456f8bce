"""Conformance: numoracle's ``ct`` packing against compressed-tensors 0.20.0's pack_to_int32 / unpack_from_int32.

compressed-tensors' package import needs transformers; its packing helpers do not, so the test loads
``compressors/pack_quantized/helpers.py`` by path. Default tier 2^16 codes, ``-m slow`` 2^20.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch")

from numoracle.quant.schemes.packing import pack, pack_zeros, unpack, unpack_zeros  # noqa: E402


def _helpers():
    spec = importlib.util.find_spec("compressed_tensors")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs compressed-tensors: pip install compressed-tensors")
    path = f"{list(spec.submodule_search_locations)[0]}/compressors/pack_quantized/helpers.py"
    s = importlib.util.spec_from_file_location("_ct_pack_helpers", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


def _case(n: int, seed: int) -> int:
    h = _helpers()
    rng = np.random.default_rng(seed)
    N, K = 64, n // 64
    q = rng.integers(-8, 8, (N, K)).astype(np.int8)
    q[0, :8] = [-8, 7, -8, 7, 0, -1, 1, 0]
    theirs = h.pack_to_int32(torch.from_numpy(q), 4).numpy()
    mism = int(np.count_nonzero(theirs != pack(q.astype(np.int64), "ct")))
    back = h.unpack_from_int32(torch.from_numpy(theirs), 4, torch.Size((N, K))).numpy()
    mism += int(np.count_nonzero(back != unpack(theirs, "ct", (N, K))))
    z = rng.integers(-8, 8, (N + 3, 5)).astype(np.int8)  # N not a multiple of 8: padded along dim 0
    tz = h.pack_to_int32(torch.from_numpy(z), 4, packed_dim=0).numpy()
    mism += int(np.count_nonzero(tz != pack_zeros(z.astype(np.int64), "ct")))
    mism += int(np.count_nonzero(unpack_zeros(tz, "ct", z.shape) != z))
    return mism


def test_ct_packing_bit_for_bit():
    assert _case(1 << 16, 0) == 0


@pytest.mark.slow
def test_ct_packing_million_codes():
    assert _case(1 << 20, 1) == 0
