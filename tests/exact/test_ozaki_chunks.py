"""exact_matmul's Ozaki split in K-chunks (exact/ozaki.py ``_products``): every chunk size gives the
results of the per-product path (``exact_dot`` on the float64 values, which shares no code with the
split), on both the numpy path and the kernels.

Chunking sums each slice product over the chunks in float64, which is exact only while every
partial sum stays within 2^53: the "digit sums at 2^b" case puts the Karatsuba middle product just
under that bound over 2048 columns, so a chunked sum carried past its flush point would round.
All randomness is seeded.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import pytest
from test_jitozaki import same  # bitwise equality of float64 arrays

from numoracle.core import jit
from numoracle.exact import ozaki, ozakitail
from numoracle.exact.reference import exact_dot, exact_matmul

OUTS = ("fp64", "fp32", "bf16", "fp8_e4m3fn")


@pytest.fixture(autouse=True)
def _kernels_at_every_size(monkeypatch):
    """The kernels at these small sizes, and chunks wherever a test asks for them (on these shapes
    the time rule would keep K in one chunk)."""
    monkeypatch.setattr(ozaki, "_chunks_pay", lambda *args: True)
    with jit.forced():
        yield


def cases():
    rng = np.random.default_rng(71)
    out = []
    a = rng.standard_normal((9, 700)).astype(np.float32)
    b = rng.standard_normal((700, 7)).astype(np.float32)
    a[[3, 5], [7, 8]] = np.float32(-1.2345678 * 2.0**-31)  # a third, sparse slice on two rows
    b[600, 2] = np.float32(1.7654321 * 2.0**-33)
    out.append(("fp32, sparse last slices", a, b))
    K = 4096
    beta = (55 - (K - 1).bit_length()) // 2
    d1 = rng.integers(2 ** (beta - 1) - 2 ** (beta - 6), 2 ** (beta - 1), (5 + 4, K))
    x = np.ldexp(2.0 ** (beta - 1) - 1 + np.ldexp(d1.astype(np.float64), -beta), 2 - beta)
    out.append(("digit sums at 2^b", x[:5], x[5:].T.copy()))
    a = rng.standard_normal((6, 300)) * np.exp2(rng.integers(-200, 200, (6, 300)))  # fp64: plain pairs
    b = rng.standard_normal((300, 5)) * np.exp2(rng.integers(-200, 200, (300, 5)))
    out.append(("fp64 wide", a, b))
    a = (rng.standard_normal((8, 1000)) * np.exp2(rng.integers(-14, 14, (8, 1000)))).astype(np.float32)
    b = rng.standard_normal((1000, 6)).astype(np.float32)
    a[:, 1::2] = -a[:, 0::2] * np.float32(1 + 2.0**-20)  # cancellation: early rounding leaves some undecided
    out.append(("fp32 ill-conditioned", a, b))
    return out


CASES = cases()


@functools.cache
def fractions(case: int) -> list:
    """The exact products of CASES[case], entry by entry, in Python Fractions."""
    _, a, b = CASES[case]
    fa = [[Fraction(float(x)) for x in row] for row in a.astype(np.float64)]
    fb = [[Fraction(float(x)) for x in col] for col in b.astype(np.float64).T]
    return [[sum((x * y for x, y in zip(r, c)), Fraction(0)) for c in fb] for r in fa]


# a chunk per column of K: the small cases (for K = 4096, chunks of 64 cover the flush points)
RUNS = [(case, chunk) for chunk in (1, 64, None) for case in range(len(CASES))
        if not (chunk == 1 and CASES[case][1].shape[1] > 1000)]


@pytest.mark.parametrize("case, chunk", RUNS, ids=[f"{CASES[c][0]}-{k}" for c, k in RUNS])
def test_chunked_products_are_exact(monkeypatch, case, chunk):
    """chunk: columns of A per K-chunk (None: as few chunks as the Karatsuba middle product allows).
    Rounded results against the per-product path, and exact=True against Fractions (an error far
    below the last place of a float64 result shows only there)."""
    name, a, b = CASES[case]
    monkeypatch.setattr(ozaki, "_CHUNK_BYTES", 1 if chunk else 1 << 50)
    monkeypatch.setattr(ozaki, "_MIN_CHUNK", chunk or 1)
    seen = []
    real = ozaki._split

    def spy(side, k0, k1, kern, keep=None):
        seen.append(k1 - k0)
        return real(side, k0, k1, kern, keep)

    monkeypatch.setattr(ozaki, "_split", spy)
    A, B = a.astype(np.float64), b.astype(np.float64)
    want = exact_dot(A[:, None, :], B.T[None, :, :], out=OUTS)
    for path in (jit.disabled, jit.forced):
        with path():
            seen.clear()
            got = exact_matmul(a, b, out=OUTS)
            assert all(same(x, y) for x, y in zip(got, want)), (name, path.__name__)
            if chunk:
                assert max(seen) == chunk, seen[:4]  # K really went in chunks of that size
            assert exact_matmul(a, b, exact=True).tolist() == fractions(case), (name, path.__name__)


def test_chunked_remaining_pairs_and_exact_fractions(monkeypatch):
    """The pairs left after early rounding go in chunks too (the GEMM fallback), and exact=True."""
    name, a, b = CASES[3]
    monkeypatch.setattr(ozaki, "_CHUNK_BYTES", 1)
    monkeypatch.setattr(ozaki, "_MIN_CHUNK", 128)
    monkeypatch.setattr(ozakitail, "affordable", lambda *args: False)
    A, B = a.astype(np.float64), b.astype(np.float64)
    want = exact_dot(A[:, None, :], B.T[None, :, :], out=OUTS)
    for path in (jit.disabled, jit.forced):
        with path():
            assert all(same(x, y) for x, y in zip(exact_matmul(a, b, out=OUTS), want)), path.__name__
            ex = exact_matmul(a, b, exact=True)
            assert ex[2, 3] == sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(A[2], B[:, 3]))


@pytest.mark.parametrize("chunked", [True, False])
def test_column_blocks_and_unchunked_pieces(monkeypatch, chunked):
    """Small _LIMBS: B's columns go in blocks, K in chunks within each; or, where the accumulators
    would take too much memory (_use_chunks), K goes in one chunk and the Karatsuba middle product
    in pieces of its exact span (2048 here), each added into the limbs at once."""
    name, a, b = CASES[1]
    monkeypatch.setattr(ozaki, "_CHUNK_BYTES", 1)
    monkeypatch.setattr(ozaki, "_MIN_CHUNK", 512)
    monkeypatch.setattr(ozaki, "_LIMBS", 100)
    monkeypatch.setattr(ozaki, "_use_chunks", lambda *args: chunked)
    seen = []
    real = ozaki._split
    monkeypatch.setattr(ozaki, "_split", lambda side, k0, k1, kern, keep=None:
                        seen.append((side.axis, side.S.size, k1 - k0)) or real(side, k0, k1, kern, keep))
    A, B = a.astype(np.float64), b.astype(np.float64)
    want = exact_dot(A[:, None, :], B.T[None, :, :], out=OUTS)
    for path in (jit.disabled, jit.forced):
        with path():
            seen.clear()
            assert all(same(x, y) for x, y in zip(exact_matmul(a, b, out=OUTS), want)), path.__name__
            assert max(n for axis, n, _ in seen if axis == 0) < b.shape[1]  # several column blocks
            assert {k for _, _, k in seen} == ({512} if chunked else {a.shape[1]})
            assert exact_matmul(a, b, exact=True).tolist() == fractions(1), path.__name__
