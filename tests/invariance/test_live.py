"""check_invariance on this machine's kernels (slow tier): row 0 of a float32 batch, M = 1..256, against brute force
(row 0's bits at every M on random rows, grouped) and, for the versions measured, against the recorded thresholds.

Measured (AMD EPYC, 2 cores; numpy 2.4.6 with OpenBLAS, torch 2.13.0+cpu, jax 0.10.2), K = 256 and 4096, N = 16:
numpy ``A @ B`` changes order at M = 1 -> 2 (gemv -> gemm) and 3 -> 4; torch ``mm`` at 3 -> 4;
``nn.functional.linear`` at 1 -> 2 and 3 -> 4.
"""

from __future__ import annotations

import numpy as np
import pytest
from brute import brute

from numoracle import check_invariance

pytestmark = pytest.mark.slow

MS = range(1, 257)
# kernel -> (version it was measured with, thresholds of M)
RECORDED = {"numpy_matmul": ("numpy 2.4.6", [(1, 2), (3, 4)]), "torch_mm": ("torch 2.13.0+cpu", [(3, 4)]),
            "torch_linear": ("torch 2.13.0+cpu", [(1, 2), (3, 4)])}


def _kernel(name):
    if name == "numpy_matmul":
        return "matmul", (lambda A, B: A @ B), f"numpy {np.__version__}"
    if name.startswith("torch"):
        torch = pytest.importorskip("torch", reason="the torch kernels need torch")
        ver = f"torch {torch.__version__}"
        if name == "torch_mm":
            return "matmul", (lambda A, B: torch.mm(torch.from_numpy(A), torch.from_numpy(B)).numpy()), ver
        if name == "torch_linear":
            return "matmul", (lambda A, B: torch.nn.functional.linear(
                torch.from_numpy(A), torch.from_numpy(np.ascontiguousarray(B.T))).numpy()), ver
        return "sum", (lambda X: torch.from_numpy(X).sum(dim=-1).numpy()), ver
    jax = pytest.importorskip("jax", reason="jax dot needs jax")
    import jax.numpy as jnp

    return "matmul", (lambda A, B: np.asarray(jnp.dot(A, B))), f"jax {jax.__version__}"


@pytest.mark.parametrize("K", [256, 4096])
@pytest.mark.parametrize("name", ["numpy_matmul", "torch_mm", "torch_linear", "jax_dot", "torch_sum"])
def test_live_kernel_classes_equal_brute_force(name, K):
    op, fn, ver = _kernel(name)
    at = {"K": K} if op == "sum" else {"K": K, "N": 16}
    # generous budgets: on the loaded 2-core machine one reveal at K = 4096 took up to ~100 s (torch's threads)
    rep = check_invariance(fn, op, vary={"M": MS}, at=at, max_seconds=3000, reveal_seconds=1200)
    assert not rep.undetermined, str(rep)
    brute_cls = brute(op, fn, K, 16, MS, draws=6)
    thresholds = [(a, a + 1) for a in MS[:-1] if brute_cls[a] != brute_cls[a + 1]]
    assert [(t.below.get("M"), t.above.get("M")) for t in rep.thresholds] == thresholds
    assert all(t.exact for t in rep.thresholds)
    pairs = {(p.cls, brute_cls[p.config.get("M")]) for p in rep.points}
    assert len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})   # the same partition
    assert all(c.confirmed for c in rep.counterexamples) and len(rep.counterexamples) == len(rep.thresholds)
    assert all("TreeOrder" in c.description for c in rep.classes)
    if name in RECORDED and RECORDED[name][0] == ver:
        assert thresholds == RECORDED[name][1]
