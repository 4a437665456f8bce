"""reveal_order on this machine's kernels: time (revealed and verified) against the targets, calls against FPRev.

Run: python benches/bench_reveal.py [--quick]
Cases and targets (2 CPU cores): numpy float32 sum n = 4096 (<= 3 s) and n = 32768 (<= 30 s); numpy (OpenBLAS)
matmul 16 x 1024 x 16 (<= 20 s). The ratio column is time / target (below 1: met). Calls are printed next to
FPRev's basic form (one call per pair of terms, n(n-1)/2), which this bench implements and runs where it fits
(``fprev_basic``: the pair sizes, then the tree by merging pairs in order of size), and next to the calls of
reveal's own tree search (FPRev's recursive search; the rest of reveal's calls probe the nodes and verify).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from numoracle import reveal_order


def fprev_basic(fn, n: int) -> tuple[int, float, int]:
    """FPRev's basic probe: size(i, j) = n - fn(ones with +M at i, -M at j) for every pair, then the tree by
    merging the pairs in increasing size (union-find). Returns (calls, seconds, nodes)."""
    t0 = time.perf_counter()
    M = np.float32(2.0**100)
    x = np.ones(n, np.float32)
    pairs = []
    calls = 0
    for i in range(n):
        for j in range(i + 1, n):
            x[i], x[j] = M, -M
            pairs.append((n - int(fn(x)), i, j))
            calls += 1
            x[i] = x[j] = 1
    parent = list(range(n))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    nodes = 0
    made: dict[int, int] = {}                     # set root -> size of the node made for it (multi-way merges)
    for s, i, j in sorted(pairs):
        a, b = find(i), find(j)
        if a == b:
            continue
        parent[b] = a
        if made.get(a) != s:
            nodes += 1
        made[a] = s
    return calls, time.perf_counter() - t0, nodes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip n = 32768")
    args = ap.parse_args()
    cases = [("numpy float32 sum", np.sum, "sum", {"n": 4096}, 3.0),
             ("numpy float32 sum", np.sum, "sum", {"n": 32768}, 30.0),
             ("numpy matmul (OpenBLAS)", lambda A, B: A @ B, "matmul", {"shape": (16, 1024, 16)}, 20.0)]
    if args.quick:
        cases.pop(1)
    print(f"{'case':<28} {'size':>12} {'seconds':>8} {'target':>7} {'ratio':>6} {'verdict':>11} {'calls':>8} "
          f"{'tree':>8} {'FPRev basic':>12} {'basic/tree':>10}")
    for name, fn, op, kw, target in cases:
        t0 = time.perf_counter()
        rep = reveal_order(fn, op, dtype="fp32", **kw)
        dt = time.perf_counter() - t0
        size = f"n={kw['n']}" if "n" in kw else "x".join(map(str, kw["shape"]))
        print(f"{name:<28} {size:>12} {dt:8.2f} {target:7.0f} {dt / target:6.2f} {rep.verdict:>11} {rep.calls:8d} "
              f"{rep.tree_calls:8d} {rep.fprev_basic_calls:12d} {rep.fprev_basic_calls / rep.tree_calls:10.1f}")
    print("\nFPRev's basic form run here (numpy float32 sum), against reveal's tree search on the same kernel:")
    print(f"{'n':>6} {'basic calls':>12} {'basic s':>8} {'reveal tree calls':>18} {'reveal s (all)':>15} {'ratio':>6}")
    for n in (64, 256, 1024):
        calls, secs, nodes = fprev_basic(np.sum, n)
        t0 = time.perf_counter()
        rep = reveal_order(np.sum, "sum", n=n)
        dt = time.perf_counter() - t0
        assert nodes >= 1 and rep.verdict == "reproduced"
        print(f"{n:6d} {calls:12d} {secs:8.2f} {rep.tree_calls:18d} {dt:15.2f} {calls / rep.tree_calls:6.1f}")


if __name__ == "__main__":
    main()
