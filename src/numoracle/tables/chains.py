"""tables/chains.csv: the verdict of every (src, intermediate, dst) triple of the registry's formats
of 32 bits or fewer, under each deterministic rounding mode (the same mode at both hops, each
format's default overflow policy)."""

from __future__ import annotations

import os
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any

from ..chains.prove import classify_cast_chain
from ..core.formats.format import AnyFormat, registry
from ..core.progress import progress
from ..core.text import hex_width

__all__ = ["chain_triples", "chain_row", "chains_table", "MODES"]

MODES = ("rne", "rna", "rtz", "ru", "rd", "rto")


def _formats() -> list[AnyFormat]:
    return [f for f in registry() if f.bits <= 32]


def chain_triples() -> list[tuple[str, str, str, str]]:
    """(src, via, dst, mode) in table order; the intermediate differs from both ends."""
    fs = _formats()
    return [(s.name, i.name, d.name, m) for s in fs for i in fs for d in fs for m in MODES if i != s and i != d]


def chain_row(triple: tuple[str, str, str, str]) -> dict[str, Any]:
    s, i, d, m = triple
    v = classify_cast_chain(s, i, d, rounding=m)
    w = v.witness
    hexw = hex_width(v.spec.src)
    dw = hex_width(v.spec.dst)
    return {
        "src": s, "via": i, "dst": d, "rounding": m,
        "equivalent": v.equivalent, "reason": v.reason,
        "witness_code": "" if w is None else f"0x{w.source_code:0{hexw}x}",
        "witness_value": "" if w is None else w.source_value,
        "chain_code": "" if w is None else f"0x{w.chain_code:0{dw}x}",
        "direct_code": "" if w is None else f"0x{w.direct_code:0{dw}x}",
    }


def _rows(batch: list[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    return [chain_row(t) for t in batch]


def chains_table(executor: Executor | None = None) -> list[dict[str, Any]]:
    """Every row (66,792 classifications: about 160 CPU-s, 81 s on 2 cores with the default pool)."""
    triples = chain_triples()
    batches = [triples[k:k + 256] for k in range(0, len(triples), 256)]
    desc = f"chains.csv ({len(triples)} chains)"
    if executor is None:
        from ..conformance.sweeppool import (
            init_worker,  # workers die with this process (SIGTERM/SIGKILL) and ignore Ctrl-C
        )

        with ProcessPoolExecutor(max_workers=os.cpu_count() or 1, initializer=init_worker,
                                 initargs=(os.getpid(),)) as ex:
            parts = list(progress(ex.map(_rows, batches), total=len(batches), desc=desc, unit="batch"))
    else:
        parts = list(progress(executor.map(_rows, batches), total=len(batches), desc=desc, unit="batch"))
    return [r for p in parts for r in p]
