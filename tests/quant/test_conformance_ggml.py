"""Conformance: numoracle's K-quant quantisers against ggml's own C code (``ggml_quantize_chunk`` without an
importance matrix, i.e. ``quantize_row_q*_K_ref``), byte for byte.

ggml is found as the ``libggml-base`` shared library that llama-cpp-python installs (``llama_cpp/lib``), or at
the path in ``NUMORACLE_LIBGGML``. Default tier 2^16 elements per type plus boundary super-blocks; ``-m slow``
2^20. Report: docs/conformance.md ("ggml").
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os

import numpy as np
import pytest

from numoracle.quant.schemes.gguf import GGUF_TYPES, gguf_quantize
from numoracle.quant.schemes.gguf_kquants import K_QUANTISERS

# ggml.h enum ggml_type
GGML_TYPE = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8,
             "Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14}


def _lib_path() -> str | None:
    path = os.environ.get("NUMORACLE_LIBGGML")
    if path:
        return path
    spec = importlib.util.find_spec("llama_cpp")  # located, not imported
    for d in (spec.submodule_search_locations or []) if spec else []:
        hits = sorted(glob.glob(os.path.join(d, "lib", "libggml-base.*")))
        if hits:
            return hits[0]
    return None


@pytest.fixture(scope="module")
def ggml():
    path = _lib_path()
    if path is None:
        pytest.skip("needs llama_cpp (not installed: pip install llama-cpp-python), or NUMORACLE_LIBGGML="
                    "path/to/libggml-base.so")
    lib = ctypes.CDLL(path)
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    lib.ggml_quantize_init.argtypes = [ctypes.c_int]

    def quantize(x: np.ndarray, name: str) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        per, size = GGUF_TYPES[name]
        out = np.zeros(x.size // per * size, np.uint8)
        lib.ggml_quantize_init(GGML_TYPE[name])
        n = lib.ggml_quantize_chunk(GGML_TYPE[name], x.ctypes.data, out.ctypes.data, 0, x.size // 256, 256, None)
        assert n == out.size
        return out

    return quantize


def _x(n: int, seed: int) -> np.ndarray:
    """Random super-blocks of spread magnitudes, and 14 kinds of boundary super-block."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * np.exp(rng.uniform(-12, 12, n // 256).repeat(256))).astype(np.float32)
    b = x.reshape(-1, 256)
    special = [np.zeros(256), np.full(256, 1.5), np.full(256, -0.75), rng.integers(-4, 4, 256),
               rng.integers(-40, 40, 256) / 8, rng.standard_normal(256) * 2.0**-130,  # subnormal values
               rng.standard_normal(256) * 1e6, rng.standard_normal(256) * 3e4,        # FP16 overflow of d
               np.abs(rng.standard_normal(256)), -np.abs(rng.standard_normal(256)),   # min > 0, max < 0
               np.where(rng.random(256) < 0.8, 0, rng.standard_normal(256)),          # sparse
               rng.standard_cauchy(256), rng.standard_normal(256) * 1e-12,            # heavy tails, near 1e-15
               rng.standard_normal(256) * np.exp(rng.uniform(-30, 30, 16)).repeat(16)]  # sub-blocks apart
    for i, s in enumerate(special):
        b[i] = np.asarray(s, np.float32)
    b[len(special), ::2] = 0  # every other value zero
    return x


def _compare(ggml, name: str, n: int, seed: int) -> None:
    x = _x(n, seed)
    ours, theirs = gguf_quantize(x, name), ggml(x, name)
    size = GGUF_TYPES[name][1]
    bad = np.flatnonzero((ours.reshape(-1, size) != theirs.reshape(-1, size)).any(axis=1))
    assert bad.size == 0, f"{name}: {bad.size} of {n // 256} super-blocks differ, first {bad[:5].tolist()}"


@pytest.mark.parametrize("name", K_QUANTISERS)
def test_k_quantisers_byte_for_byte(ggml, name):
    _compare(ggml, name, 1 << 16, 11)


@pytest.mark.parametrize("name", ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
def test_legacy_quantisers_byte_for_byte(ggml, name):
    _compare(ggml, name, 1 << 16, 12)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GGML_TYPE))
def test_quantisers_byte_for_byte_2_20(ggml, name):
    _compare(ggml, name, 1 << 20, 13)
