"""Presets: the orders of named systems, from one public table (GPU and input format -> tensor-core parameters).

``GPU_PRESETS`` is the table: one :class:`GpuPreset` per (GPU, input format), each with where its figures
come from. ``GPU_ALIASES`` maps GPUs that share another's tensor cores. :func:`preset` builds the order of a
row (and of numpy's ``np.sum`` and DeepSeek-V3's FP8 GEMM); :func:`preset_name` names an order that equals
a preset, so reports can write ``preset("h100", "fp8")`` instead of the order's fields. docs/extending.md
says how to add a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ...core.formats.format import FP16, FP32, FP64
from .basic import BlockFMA, NumpyPairwise, Order, Promoted

__all__ = ["GpuPreset", "GPU_PRESETS", "GPU_ALIASES", "PRESETS", "preset", "preset_name", "gpu_preset",
           "preset_inputs", "preset_systems"]

_KM = ("Khattak & Mikaitis, 'Accurate models of NVIDIA tensor cores' (2025, arXiv:2512.07004), "
       "MATLAB models {gpu}TC.m")


@dataclass(frozen=True)
class GpuPreset:
    """One row of the table: a GPU's tensor-core block FMA for one input format.

    block: terms per block FMA (the products added in one step). extra_bits: alignment bits kept beyond
    FP32's 23 fraction bits (n_eab; negative: fewer), so ``kept_bits = 23 + extra_bits`` fraction bits
    survive the alignment to the largest exponent. truncation: aligned bits past the kept ones are
    dropped (no sticky bit, no rounding). promotion: terms between copies of the partial to FP32 (None:
    the block FMAs chain in the tensor core's own accumulator). source: the paper or measurement.
    """

    gpu: str
    inputs: str
    block: int
    extra_bits: int
    source: str
    truncation: bool = True
    promotion: int | None = None

    @property
    def kept_bits(self) -> int:
        """Fraction bits kept after alignment (and by the chained accumulator when fewer than FP32's 23)."""
        return 23 + self.extra_bits

    def order(self, out: str = "fp32", promote: int | None = None) -> Order:
        """This row's order: ``BlockFMA`` with an FP32 (RZ) or FP16 (RNE) output, promoted when asked."""
        n, fb = self.block, self.kept_bits
        o = out.lower()
        if o in ("fp32", "float32", "single"):
            order: Order = BlockFMA(n, fb, truncate=self.truncation, out_rounding="rtz",
                                    out_frac_bits=fb if self.extra_bits < 0 else None, acc=FP32)
        elif o in ("fp16", "float16", "half"):
            if self.inputs not in ("fp16", "fp8") or self.extra_bits < 0:
                raise ValueError(f"FP16 output is modelled for fp16 inputs (and B200 fp8), not {self.gpu} "
                                 f"{self.inputs}")
            order = BlockFMA(n, fb, truncate=self.truncation, out_rounding="rne", acc=FP16)
        else:
            raise ValueError(f"out must be 'fp32' or 'fp16', got {out!r}")
        every = promote if promote is not None else self.promotion
        return order if every is None else Promoted(every, order, FP32)


def _km(gpu: str, inputs: str, block: int, extra: int, note: str = "") -> GpuPreset:
    return GpuPreset(gpu, inputs, block, extra, _KM.format(gpu=gpu.upper()) + note)


# Figures: Khattak & Mikaitis 2025 (block size N and n_eab per input format); Fasi, Higham, Mikaitis and Pranesh,
# "Numerical behavior of NVIDIA tensor cores" (PeerJ CS 2021) for V100/A100 fp16. H100 FP8: N = 32 (two
# 16-element halves) with 13 fraction bits kept and a 13-fraction-bit chained accumulator, as DeepSeek-V3
# (arXiv:2412.19437, §3.5.2) measured ("around 14 bits"). H200 FP8/FP16/BF16 split-K recordings are
# reproduced bit for bit by the H100 rows (numoracle's identify tests on recorded H200 runs).
GPU_PRESETS: tuple[GpuPreset, ...] = (
    _km("v100", "fp16", 4, 0, "; Fasi et al. 2021"),
    _km("a100", "fp16", 8, 1, "; Fasi et al. 2021"),
    _km("a100", "bf16", 8, 1),
    _km("a100", "tf32", 4, 1),
    _km("h100", "fp16", 16, 2, "; reproduces H200 cuBLAS fp16 recordings"),
    _km("h100", "bf16", 16, 2, "; reproduces H200 cuBLAS bf16 recordings"),
    _km("h100", "tf32", 8, 2),
    _km("h100", "fp8", 32, -10, "; DeepSeek-V3 §3.5.2; reproduces H200 cuBLASLt FP8 recordings"),
    _km("b200", "fp16", 16, 2),
    _km("b200", "bf16", 16, 2),
    _km("b200", "tf32", 8, 2),
    _km("b200", "fp8", 32, 2),
    GpuPreset("deepseek", "fp8", 32, -10, "DeepSeek-V3 technical report (arXiv:2412.19437) §3.5.2: the H100/H800 "
              "FP8 tensor-core partial copied to FP32 every 128 terms", promotion=128),
)

# A GPU whose tensor cores are another's: K&M model the H200 as the H100 (models/H200TC.m); the H800 is the
# H100 variant DeepSeek-V3 measured. T4 is reported similar to V100 but unverified: not aliased.
GPU_ALIASES: dict[str, str] = {"h200": "h100", "h800": "h100"}

_NUMPY = {"fp32": NumpyPairwise(acc=FP32), "fp16": NumpyPairwise(acc=FP32, carry=FP16),
          "fp64": NumpyPairwise(acc=FP64)}

# "system/inputs" names preset() knows (aliases aside)
PRESETS: tuple[str, ...] = tuple([f"{p.gpu}/{p.inputs}" for p in GPU_PRESETS if p.gpu != "deepseek"]
                                 + [f"numpy/{i}" for i in _NUMPY] + ["deepseek/fp8"])

_INPUT_NAMES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
                "fp8_e4m3fn": "fp8", "fp8_e5m2": "fp8", "e4m3": "fp8", "e5m2": "fp8"}


def preset_inputs(inputs: str) -> str:
    """The table's name of an input format: ``"float16"`` -> ``"fp16"``, ``"fp8_e4m3fn"`` -> ``"fp8"``."""
    inp = inputs.lower().replace("-", "_")
    return _INPUT_NAMES.get(inp, inp)


def gpu_preset(system: str, inputs: str) -> GpuPreset:
    """The table row of a GPU (or alias, or ``deepseek``) and input format; a clear error naming what exists."""
    sysname = GPU_ALIASES.get(system.lower(), system.lower())
    inp = preset_inputs(inputs)
    rows = [p for p in GPU_PRESETS if p.gpu == sysname]
    if not rows:
        known = sorted({p.gpu for p in GPU_PRESETS} | set(GPU_ALIASES) | {"numpy"})
        raise ValueError(f"unknown system {system!r}; known: {', '.join(known)}")
    for p in rows:
        if p.inputs == inp:
            return p
    if sysname == "deepseek":
        raise ValueError("the deepseek preset models the FP8 GEMM only: preset('deepseek', 'fp8')")
    raise ValueError(f"{sysname} tensor cores take {', '.join(p.inputs for p in rows)} inputs, not {inputs!r}")


def preset(system: str, inputs: str, *, out: str = "fp32", promote: int | None = None) -> Order:
    """The order of a named system: GPU tensor cores, numpy's ``np.sum``, or DeepSeek-V3's FP8 GEMM.

    ``system``: v100, a100, h100 (h200, h800), b200, numpy, deepseek. ``inputs``: fp16, bf16,
    tf32, fp8 (GPUs; fp8 = E4M3 or E5M2), fp32/fp16/fp64 (numpy). ``out``: fp32 (RZ block output) or
    fp16 (RNE; fp16 inputs, and B200 fp8). ``promote=N``: wrap in ``Promoted(N, ..., FP32)``.
    The returned order fixes its accumulator format, so ``simulate`` needs no ``acc``. The GPU figures
    come from ``GPU_PRESETS``.

    >>> preset("h100", "fp8")
    BlockFMA(n=32, frac_bits=13, truncate=True, out_rounding='rtz', out_frac_bits=13, carry_bit=True, acc=Format(fp32))
    """
    if system.lower() == "numpy":
        inp = preset_inputs(inputs)
        if inp not in _NUMPY:
            raise ValueError(f"numpy presets exist for {sorted(_NUMPY)}, not {inputs!r}")
        return _NUMPY[inp]
    return gpu_preset(system, inputs).order(out, promote)


@lru_cache(maxsize=1)
def _names() -> dict[Order, str]:
    """Each preset order -> the call that builds it, first row first (equal orders share the first name)."""
    out: dict[Order, str] = {}
    for p in GPU_PRESETS:
        out.setdefault(p.order(), f'preset("{p.gpu}", "{p.inputs}")')
        try:
            out.setdefault(p.order("fp16"), f'preset("{p.gpu}", "{p.inputs}", out="fp16")')
        except ValueError:
            pass
    for inp, o in _NUMPY.items():
        out.setdefault(o, f'preset("numpy", "{inp}")')
    return out


def preset_name(order: Order) -> str | None:
    """``'preset("h100", "fp8")'`` for an order equal to a preset's (the first row that builds it), else None."""
    try:
        return _names().get(order)
    except TypeError:   # an unhashable field: no preset
        return None


def preset_systems(order: Order) -> list[tuple[str, str]]:
    """Every (system, inputs) of the table, aliases included, whose preset is this very order (equal orders
    are the same arithmetic): e.g. h100, b200, h200, h800 with fp16 or bf16 inputs for preset("h100", "fp16")."""
    out = []
    rows = [(p.gpu, p.inputs, p) for p in GPU_PRESETS]
    rows += [(a, p.inputs, p) for a, g in GPU_ALIASES.items() for p in GPU_PRESETS if p.gpu == g]
    for system, inputs, p in rows:
        for out_fmt in ("fp32", "fp16"):
            try:
                if p.order(out_fmt) == order:
                    out.append((system, inputs))
            except ValueError:
                continue
    return list(dict.fromkeys(out))
