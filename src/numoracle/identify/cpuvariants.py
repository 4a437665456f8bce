"""The CPU libraries' kernels per instruction set: which order each kernel variant is, and which variants this CPU runs.

OpenBLAS, MKL and XNNPACK pick their kernels at run time by the CPU's instruction set, so "numpy's matmul" is one of
several arithmetics. Each entry of ``VARIANTS`` is one kernel variant, measured (bit for bit, on data it was not
fitted to) with the variant forced (OpenBLAS 0.3.31 as numpy 2.4.6 ships it, ``OPENBLAS_CORETYPE``; torch
2.13.0+cpu, ``MKL_ENABLE_INSTRUCTIONS`` / ``ATEN_CPU_CAPABILITY``). identify_order tries every variant's order
(a recording from another machine is identified without running there); its report names the variants an order is,
and where two variants give the same outputs on the recorded inputs the verdict is AMBIGUOUS with inputs that
separate them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models.orders.basic import Order, Sequential
from ..models.orders.blasdot import MklDot, OpenBlasDot
from ..models.orders.cpu import GotoBlocks, Interleaved
from ..models.orders.mklgemm import MklSmallGemm

__all__ = ["KernelVariant", "VARIANTS", "variant_orders", "variants_of", "cpu_features", "runs_here", "variant_notes"]


@dataclass(frozen=True)
class KernelVariant:
    """One library kernel on one instruction set: ``order`` is its arithmetic; ``needs`` the CPU flags
    (/proc/cpuinfo names) it requires; ``where`` the shapes it was measured on."""

    library: str
    kernel: str
    isa: str
    order: Order
    needs: tuple[str, ...]
    where: str

    @property
    def name(self) -> str:
        return f"{self.library} {self.kernel} [{self.isa}]"


_DOT_SIZES = "fp32 dot, n = 1 .. 69 and 19 sizes from 95 to 4099, two seeds"

VARIANTS: tuple[KernelVariant, ...] = (
    # OpenBLAS sgemm, OPENBLAS_CORETYPE=Sandybridge: AVX without FMA (products rounded, then added), K blocks of
    # GEMM_Q = 384, a rest between Q and 2Q split at floor(r/2) rounded up to GEMM_UNROLL_M = 16 (level3.c)
    KernelVariant("OpenBLAS 0.3.31", "sgemm", "Sandybridge (AVX)",
                  GotoBlocks(384, Interleaved(1, fma=False), 16), ("avx",), "fp32 matmul, K = 37 .. 4096"),
    # OPENBLAS_CORETYPE=Haswell (also what Zen runs): one FMA chain per output, K blocks of 320, unroll 8
    KernelVariant("OpenBLAS 0.3.31", "sgemm", "Haswell / Zen (AVX2 + FMA)", GotoBlocks(320, Sequential(), 8),
                  ("avx2", "fma"), "fp32 matmul, K = 37 .. 4096"),
    # OPENBLAS_CORETYPE=SkylakeX (Cooperlake, SapphireRapids): small sizes go to sgemm_direct, 16 FMA lanes
    KernelVariant("OpenBLAS 0.3.31", "sgemm (small: sgemm_direct)", "SkylakeX (AVX-512)",
                  Interleaved(16, "pairwise"), ("avx512f",), "fp32 matmul of 8 x K x 6, K = 37 .. 4096"),
    # OpenBLAS sdot (kernel/x86_64/sdot.c): 8 accumulators of 4 lanes over blocks of 32, added pairwise, the
    # n % 32 tail's products summed in double; Sandybridge without FMA, Haswell with it; SkylakeX: OpenBlasDot()
    KernelVariant("OpenBLAS 0.3.31", "sdot", "Sandybridge (AVX)", OpenBlasDot(4, 8, 0, False, "fp64", "pairwise"),
                  ("avx",), _DOT_SIZES),
    KernelVariant("OpenBLAS 0.3.31", "sdot", "Haswell / Zen (AVX2 + FMA)",
                  OpenBlasDot(4, 8, 0, True, "fp64", "pairwise"), ("avx2", "fma"), _DOT_SIZES),
    KernelVariant("OpenBLAS 0.3.31", "sdot", "SkylakeX (AVX-512)", OpenBlasDot(), ("avx512f",),
                  _DOT_SIZES),
    # MKL's sdot as torch 2.13.0+cpu calls it with AVX-512 (on an Intel Xeon)
    KernelVariant("MKL (torch 2.13.0+cpu)", "sdot", "AVX-512", MklDot(), ("avx512f",), "fp32 dot, n = 1 .. 4099"),
    # the same on an AMD EPYC (Zen 5), MKL_ENABLE_INSTRUCTIONS=AVX2, AVX512 or unset alike: 4 registers of 4 lanes
    # (SSE width), products rounded before they are added, registers in order, lanes by halves, the n % 4 rest
    # added one by one to lane 0 (reveal_order's trees at n = 5 .. 40; fitted on seed 5, confirmed on seeds 6, 7)
    KernelVariant("MKL (torch 2.13.0+cpu)", "sdot", "AMD Zen 5 (any MKL_ENABLE_INSTRUCTIONS)",
                  MklDot(4, 4, fma=False, registers="order", lanes="halves", rest="lane0"), ("sse2",),
                  "fp32 dot, n = 1 .. 69 and 8 sizes to 4099, normal and wide data, three seeds; inputs on 16-byte "
                  "aligned addresses (fresh arrays): elsewhere MKL peels terms to an aligned address, another order"),
    # MKL's small sgemm as torch 2.13.0+cpu's torch.mm calls it on the AMD EPYC (Zen 5): plain chains without FMA,
    # four outputs at a time on 16-byte aligned addresses of C, the elements before them another order
    # (models/orders/mklgemm.py); fitted on seeds 0 .. 5, confirmed on seeds 10 .. 13
    KernelVariant("MKL (torch 2.13.0+cpu)", "sgemm (small)", "AMD Zen 5 (any MKL_ENABLE_INSTRUCTIONS)",
                  MklSmallGemm(), ("sse2",),
                  "fp32 matmul, N = 2 .. 11 for M = 1 .. 16 and M = 1 .. 3 for N = 2 .. 16 (K = 40), K = 1 .. 69 "
                  "and 100 .. 4096 (M = 5, 8; N = 6, 7); not N = 1, not N >= 12 with M >= 4 (other MKL paths)"),
)


def variant_orders(features: frozenset[str] | None = None) -> list[Order]:
    """The variants' orders, each once: all of them (identify_order's search tries all: a recording may be from any
    CPU, or flags unknown: an empty set), or with ``features`` (``cpu_features()``: this machine) those a CPU with these
    flags runs, e.g.
    ``identify_order(y, "matmul", a, b, candidates=variant_orders(cpu_features()))`` for a kernel run here."""
    chosen = VARIANTS if not features else [v for v in VARIANTS if runs_here(v, frozenset(features))]   # unknown: all
    return list(dict.fromkeys(v.order for v in chosen))


def variants_of(order: Order) -> list[KernelVariant]:
    """The kernel variants whose arithmetic is ``order``."""
    return [v for v in VARIANTS if v.order == order]


def cpu_features(cpuinfo: str | None = None) -> frozenset[str]:
    """This CPU's flags (Linux /proc/cpuinfo; an empty set where it cannot be read), or those of ``cpuinfo``'s text."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            return frozenset()
    line = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
    return frozenset(line.split(":", 1)[1].split()) if ":" in line else frozenset()


def runs_here(variant: KernelVariant, features: frozenset[str] | None = None) -> bool | None:
    """Can this CPU (or one with ``features``) run the variant? None where the flags are unknown."""
    feats = cpu_features() if features is None else features
    return None if not feats else set(variant.needs) <= feats


def variant_notes(order: Order) -> list[str]:
    """Report notes: the kernel variants the order is (with whether this CPU could run each)."""
    notes = []
    for v in variants_of(order):
        here = runs_here(v)
        where = {True: "this CPU has", False: "this CPU lacks", None: "this CPU's flags unknown:"}[here]
        notes.append(f"this is the arithmetic of {v.name} (measured: {v.where}; {where} "
                     f"{'+'.join(v.needs)})")
    return notes
