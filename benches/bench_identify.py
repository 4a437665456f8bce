"""identify_order on recorded H200 runs: the time to name the order of one cuBLAS matmul and of one reduction.

Run: python benches/bench_identify.py [--dir tests/data/h200] [--suffix _subset] [--rows N]
The defaults read the small recordings the tests use (4 x 8 matmul outputs, 8 sums); point ``--dir`` at full
recordings (e.g. ones ``numoracle.testing.record`` wrote, 128 x 128 outputs) with ``--suffix ''`` for a whole run.
Cases: cuBLAS ``torch.mm`` fp16, K = 4096 (the guided search goes through units, splits and combines:
the slowest case that succeeds), cuBLAS bf16 at K = 1024 (found at the first stage), the fp16 run with the
last bit of every output flipped (no model reproduces it: the whole search), torch's bf16 row sums (16384 long);
a simulated 16x4096x16 fp16 matmul with every output's last bit flipped (NOT REPRODUCED: target at most 10 s);
``--tf32 FILE``: every FP32 run of a TF32 recording (tags ``fp32_*``, triton and cuBLAS) from its FP32 inputs as
recorded (the search finds the operand rounding): verdict, order, rounding, seconds; ``--cpu``: every recording of
this machine's CPU kernels (tests/data/cpu, benches/record_cpu_kernels.py): seconds per verdict.
Targets: NOT REPRODUCED at 16x4096x16 in at most 10 s, a typical REPRODUCED in at most 2 s, on 2 cores.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import ml_dtypes
import numpy as np

from numoracle.identify.search import identify_order
from numoracle.orders import order_text

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=str(ROOT / "tests" / "data" / "h200"))
    ap.add_argument("--suffix", default="_subset")
    ap.add_argument("--rows", type=int, default=None, help="use only the first N output rows")
    ap.add_argument("--tf32", default=None, help="a TF32 recording (.npz with fp32_* tags) to identify run by run")
    ap.add_argument("--cpu", action="store_true", help="the CPU kernels' recordings (tests/data/cpu): time per verdict")
    args = ap.parse_args()
    if args.tf32:
        return tf32(args.tf32, args.rows)
    if args.cpu:
        return cpu()
    d = Path(args.dir)
    mm = np.load(d / f"mm_2{args.suffix}.npz")
    red = np.load(d / f"red_3_bfloat16{args.suffix}.npz")
    rows = None if args.rows is None else np.arange(args.rows)
    cases = []
    for fmt, dt, shape in (("fp16", np.float16, "128x4096x128"), ("bf16", ml_dtypes.bfloat16, "512x1024x512")):
        tag = f"{fmt}_{shape}_cancel"
        a, b = mm[f"{tag}__A"].view(dt), mm[f"{tag}__B"].view(dt)
        cases.append((f"cuBLAS torch.mm {fmt} {shape}", lambda a=a, b=b, y=mm[f"{tag}__torch_mm_out_fp32"]:
                      identify_order(y, "matmul", a, b, rows=None if rows is None else rows[:a.shape[0]])))
    tag = "fp16_128x4096x128_cancel"
    a, b = mm[f"{tag}__A"].view(np.float16), mm[f"{tag}__B"].view(np.float16)
    flipped = (mm[f"{tag}__torch_mm_out_fp32"].view(np.uint32) ^ np.uint32(1)).view(np.float32)
    cases.append(("no model: cuBLAS fp16 K=4096, last bits flipped", lambda: identify_order(flipped, "matmul", a, b)))
    rng = np.random.default_rng(0)
    a16 = rng.standard_normal((16, 4096)).astype(np.float16)
    b16 = rng.standard_normal((4096, 16)).astype(np.float16)
    from numoracle import orders, simulate
    y16 = simulate("matmul", a16, b16,
                   order=orders.TiledSplitK(3, 64, orders.preset("h200", "fp16"))).astype(np.float32)
    cases.append(("16x4096x16 simulated cuBLAS-like", lambda: identify_order(y16, "matmul", a16, b16)))
    y16f = (y16.view(np.uint32) ^ np.uint32(1)).view(np.float32)
    cases.append(("no model: 16x4096x16, last bits flipped", lambda: identify_order(y16f, "matmul", a16, b16)))
    x = red["64x16384__X"].view(ml_dtypes.bfloat16)
    cases.append(("torch X.sum(dim=-1) bf16 rows of 16384", lambda: identify_order(
        red["64x16384__sum_rows_fp32"], "sum", x, outputs=64)))
    print(f"{'case':<42} {'outputs':>8} {'tried':>5} {'seconds':>8}  verdict: found")
    for name, fn in cases:
        t0 = time.perf_counter()
        rep = fn()
        dt_s = time.perf_counter() - t0
        found = order_text(rep.order)[:80] if rep.order is not None else rep.headline().split(": ", 1)[1][:60]
        print(f"{name:<42} {rep.winner.total if rep.winner else 0:>8} {len(rep.candidates):>5} {dt_s:>8.2f}  "
              f"{rep.verdict}: {found}")


def tf32(path: str, rows: int | None) -> None:
    d = np.load(path)
    tags = sorted({k.split("__")[0] for k in d.files if k.startswith("fp32_")})
    print(f"{'run':<48} {'verdict':<11} {'tried':>5} {'seconds':>8}  order [operand rounding]")
    named = total = 0
    for tag in tags:
        a, b = d[f"{tag}__A"], d[f"{tag}__B"]
        r = a.shape[0] if rows is None else rows
        for kernel in (k.split("__")[1] for k in d.files if k.startswith(tag + "__") and "tf32" in k):
            t0 = time.perf_counter()
            rep = identify_order(d[f"{tag}__{kernel}"][:r], "matmul", a[:r], b)
            total += 1
            named += rep.verdict == "REPRODUCED"
            name = rep.winner.name[:90] if rep.winner else rep.headline()[:90]
            print(f"{tag + '__' + kernel:<48} {rep.verdict:<11} {len(rep.candidates):>5} "
                  f"{time.perf_counter() - t0:>8.2f}  {name}")
    print(f"{named} of {total} runs REPRODUCED bit for bit from their FP32 inputs")


def cpu() -> None:
    """identify_order on every CPU recording (no re-runs, no fresh data: the search alone), timed per verdict."""
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "identify"))
    from test_cpu_recordings import identify, recordings
    times: dict[str, list[float]] = {}
    for fmt, tag, name in recordings():
        t0 = time.perf_counter()
        rep = identify(fmt, tag, name)[0]
        times.setdefault(rep.verdict, []).append(time.perf_counter() - t0)
    print(f"{'verdict':<15} {'runs':>5} {'mean s':>7} {'max s':>7}")
    for v, ts in sorted(times.items()):
        print(f"{v:<15} {len(ts):>5} {np.mean(ts):>7.2f} {max(ts):>7.2f}")
    print(f"all {sum(len(t) for t in times.values())} recordings: {sum(sum(t) for t in times.values()):.1f} s")


if __name__ == "__main__":
    main()
