"""check_invariance on this machine's kernels: classes and thresholds against brute force, and the speed target.

Run: python benches/bench_invariance.py [--quick] [--kernels numpy,torch_mm,...] [--K 256,4096] [--no-speed]

Live kernels (row 0 of a float32 batch, M = 1..256): numpy ``A @ B``, torch CPU ``mm`` and
``nn.functional.linear``, jax ``dot``, torch CPU ``sum(dim=-1)``. Brute force: the watched row's bits at every M
on ``--draws`` random rows (the same rows at every M), grouped; its classes and thresholds must equal
check_invariance's (on the configurations check_invariance tried; the untried ones are "not claimed").
Speed: M = 1..256 for a float32 matmul of 16 x 4096 per row (K = 4096, N = 16), target <= 60 s on the 2-core
machine, and the number of reveals against one reveal per configuration (256). The machine is shared: timings
are noisy.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

from numoracle import check_invariance

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "invariance"))
from brute import brute  # noqa: E402  (the tests' brute force, shared)

MS = range(1, 257)


def kernels() -> dict:
    """name -> (op, fn, versions)."""
    out: dict = {"numpy_matmul": ("matmul", lambda A, B: A @ B, f"numpy {np.__version__}")}
    try:
        import torch

        out["torch_mm"] = ("matmul", lambda A, B: torch.mm(torch.from_numpy(A), torch.from_numpy(B)).numpy(),
                           f"torch {torch.__version__}")
        out["torch_linear"] = ("matmul", lambda A, B: torch.nn.functional.linear(
            torch.from_numpy(A), torch.from_numpy(np.ascontiguousarray(B.T))).numpy(), f"torch {torch.__version__}")
        out["torch_sum"] = ("sum", lambda X: torch.from_numpy(X).sum(dim=-1).numpy(), f"torch {torch.__version__}")
    except ImportError:
        pass
    try:
        import jax
        import jax.numpy as jnp

        out["jax_dot"] = ("matmul", lambda A, B: np.asarray(jnp.dot(A, B)), f"jax {jax.__version__}")
    except ImportError:
        pass
    return out


def compare(rep, cls: dict[int, int]) -> tuple[bool, str]:
    """Brute-force classes and thresholds against the report's, on the configurations the report tried."""
    ms = sorted(cls)
    bt = [(a, b) for a, b in zip(ms, ms[1:]) if cls[a] != cls[b]]
    rt = [(t.below.get("M"), t.above.get("M")) for t in rep.thresholds]
    tried = {p.config.get("M"): p.cls for p in rep.points}
    pairs = {(tried[m], cls[m]) for m in tried}
    same_partition = len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})
    ok = bt == rt and same_partition
    part = "equal" if same_partition else "DIFFERS"
    return ok, f"brute thresholds {bt}; report {rt}; partition on tried points {part}"


def live(names: list[str], Ks: list[int], draws: int) -> None:
    ks = kernels()
    print(f"machine: {platform.processor() or platform.machine()}, {platform.python_version()}")
    for name in names:
        if name not in ks:
            print(f"{name}: not installed, skipped")
            continue
        op, fn, ver = ks[name]
        for K in Ks:
            at = {"K": K} if op == "sum" else {"K": K, "N": 16}
            t0 = time.perf_counter()
            rep = check_invariance(fn, op, vary={"M": MS}, at=at, max_seconds=3000, reveal_seconds=1200)
            dt = time.perf_counter() - t0
            t1 = time.perf_counter()
            cls = brute(op, fn, K, 16, MS, draws)
            bt = time.perf_counter() - t1
            ok, how = compare(rep, cls)
            print(f"\n{name} ({ver}) K={K}: {rep.summary()}; {dt:.1f} s (brute force {bt:.1f} s)")
            for c in rep.classes:
                ms = sorted(m.get("M") for m in c.members)
                print(f"  class {c.name}: {c.description}; M tried: {ms[0]}..{ms[-1]} ({len(ms)})")
            for t in rep.thresholds:
                print(f"  threshold {t}")
            for ce in rep.counterexamples:
                print(f"  {ce.text()}")
            for p in rep.undetermined:
                print(f"  undetermined at {p.config}: {p.detail}")
            print(f"  {'MATCH' if ok else 'MISMATCH'}: {how}")


def speed(rounds: int) -> None:
    """M = 1..256, float32 matmul K = 4096, N = 16 (numpy): time and reveals against one per configuration; the
    per-configuration side is estimated from evidence="reveal" at M = 1, 128, 256 (interleaved with the check)."""
    fn = lambda A, B: A @ B  # noqa: E731
    at = {"K": 4096, "N": 16}
    for r in range(rounds):
        t0 = time.perf_counter()
        rep = check_invariance(fn, "matmul", vary={"M": MS}, at=at)
        dt = time.perf_counter() - t0
        print(f"\nspeed round {r + 1}: M=1..256, 16 x 4096 per row (numpy matmul): {dt:.1f} s, target 60 s, ratio "
              f"{dt / 60:.2f}; {rep.reveals} reveals against 256 (one per configuration): {rep.reveals / 256:.3f}; "
              f"{len(rep.points)} configurations tried, {rep.calls} kernel calls; {rep.summary()}")
        t0 = time.perf_counter()
        each = check_invariance(fn, "matmul", vary={"M": [1, 128, 256]}, at=at, evidence="reveal")
        per = (time.perf_counter() - t0) / 3
        print(f"  one reveal per configuration: {per:.1f} s per reveal (M = 1, 128, 256; {each.reveals} reveals), "
              f"about {per * 256:.0f} s for 256; the check took {dt / (per * 256):.3f} of that")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="numpy only, K = 256, and one speed round")
    ap.add_argument("--kernels", default="numpy_matmul,torch_mm,torch_linear,jax_dot,torch_sum")
    ap.add_argument("--K", default="256,4096")
    ap.add_argument("--draws", type=int, default=8, help="brute force: random rows per M (default 8)")
    ap.add_argument("--no-speed", dest="no_speed", action="store_true")
    ap.add_argument("--no-live", dest="no_live", action="store_true")
    a = ap.parse_args()
    names = ["numpy_matmul"] if a.quick else a.kernels.split(",")
    Ks = [256] if a.quick else [int(k) for k in a.K.split(",")]
    if not a.no_live:
        live(names, Ks, a.draws)
    if not a.no_speed:
        speed(1 if a.quick else 2)


if __name__ == "__main__":
    main()
