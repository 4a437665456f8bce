"""identify_order on CPU recordings made with the instruction set forced (benches/record_cpu_kernels.py run under
OPENBLAS_CORETYPE / MKL_ENABLE_INSTRUCTIONS / ATEN_CPU_CAPABILITY): counts per library of named, AMBIGUOUS-then-
resolved (the kernel re-run on the separating inputs names one candidate), unresolved, misresolved (the one
candidate fails on fresh data), not reproduced and wrong (REPRODUCED, but failing on fresh data the kernel computes
live).

Run it under the same environment as the recording (the kernels are re-run to settle AMBIGUOUS reports and to check
named orders on fresh data): ``OPENBLAS_CORETYPE=Haswell ... python benches/sweep_cpu_isa.py DIR [--only SUBSTR]``.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "identify"))
import test_cpu_recordings as T  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--only", action="append", default=[], help="keep recordings whose 'file tag kernel' has this")
    args = ap.parse_args()
    T.DATA = Path(args.dir)
    counts: dict = collections.defaultdict(collections.Counter)
    for fmt, tag, name in T.recordings():
        if args.only and not any(s in f"{fmt} {tag} {name}" for s in args.only):
            continue
        rep, ins, y = T.identify(fmt, tag, name)
        rows = 1 if y.ndim == 0 else y.shape[0]
        v, how, arith = rep.verdict, "named", rep.arithmetic
        if v == "AMBIGUOUS":
            which = T.settle(rep, name, rows)
            how = "ambiguous" if which is not None and len(which) == 1 else "unresolved"
            if how == "ambiguous":
                arith = rep.separating.arithmetics[rep.separating.names.index(which[0])]
                v += f" -> {which[0]}"
        elif v != "REPRODUCED":
            how = "not"
        if how in ("named", "ambiguous") and T.fresh(rep.op, arith, name, ins, rows) is False:
            # a REPRODUCED claim that fails on fresh data is a wrong name; an AMBIGUOUS report whose separating
            # inputs picked a candidate that then fails was honest, but the kernel is none of its candidates
            how = "wrong" if how == "named" else "misresolved"
        counts[name.split("_")[0]][how] += 1
        print(f"{how:<10} {fmt} {tag} {name}: {v} {'' if '->' in v else rep.order}", flush=True)
    for lib, c in sorted(counts.items()):
        print(lib, dict(c))


if __name__ == "__main__":
    main()
