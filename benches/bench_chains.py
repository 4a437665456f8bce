"""Cast-chain classification time: 32- and 64-bit sources, brute force, the whole table.

Run: python benches/bench_chains.py [--full-brute] [--table]
- one classification per chain (median of 3), for 32-bit and 64-bit sources;
- brute force over every source code of a 32-bit-source chain: timed on 2^26 codes and scaled
  to 2^32 (or run in full with --full-brute, several minutes), and the ratio to the proof;
- --table: the whole tables/chains.csv computation (66,792 chains) over a process pool.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import numoracle as no
from numoracle.chains.spec import chain_spec

CHAINS_32 = [("int32", "fp32", "fp16"), ("int32", "fp32", "bf16"), ("fp32", "fp16", "fp8_e4m3fn"),
             ("fp32", "bf16", "fp8_e4m3fn"), ("int32", "bf16", "fp8_e4m3fn")]
CHAINS_64 = [("fp64", "fp32", "bf16"), ("fp64", "fp32", "fp16"), ("int64", "fp64", "fp32"), ("fp64", "fp32", "int32")]


def median_time(fn, n=3) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def brute_force_seconds(chain, full: bool) -> tuple[float, str]:
    spec = chain_spec(*chain)
    n = 1 << 32 if full else 1 << 26
    step = 1 << 22
    t0 = time.perf_counter()
    for a in range(0, n, step):
        c = np.arange(a, a + step, dtype=np.uint64).astype(np.uint32)
        _ = spec.chain(c) != spec.direct_cast(c)
    dt = time.perf_counter() - t0
    return (dt, "measured") if full else (dt * (1 << 32) / n, "scaled from 2^26 codes")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full-brute", action="store_true")
    ap.add_argument("--table", action="store_true")
    args = ap.parse_args()
    print(f"{'chain':<36} {'verdict':<9} {'proof s':>8}")
    for chain in CHAINS_32 + CHAINS_64:
        t = median_time(lambda chain=chain: no.classify_cast_chain(*chain))
        v = no.classify_cast_chain(*chain)
        print(f"{' -> '.join(chain):<36} {'equal' if v.equivalent else 'differs':<9} {t:>8.3f}")
    chain = CHAINS_32[0]
    t_proof = median_time(lambda: no.classify_cast_chain(*chain))
    t_brute, how = brute_force_seconds(chain, args.full_brute)
    print(f"\nbrute force {' -> '.join(chain)} over 2^32 codes: {t_brute:.1f} s ({how}); "
          f"proof {t_proof:.3f} s; ratio {t_brute / t_proof:.0f}x")
    if args.table:
        from numoracle.tables.chains import chain_triples, chains_table

        t0 = time.perf_counter()
        rows = chains_table()
        print(f"whole table: {len(rows)} chains ({len(chain_triples())} triples x modes) in "
              f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
