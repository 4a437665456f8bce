"""Group-wise int4 weights with scales and zero points, as GPTQ, AWQ, compressed-tensors and HQQ store them.

:class:`Int4Weights` holds a weight matrix in one canonical orientation: codes ``(K, N)`` (K the reduction axis,
groups of ``group`` consecutive rows sharing a scale and a zero point per column), scales and zero points
``(K / group, N)``. :meth:`Int4Weights.pack` writes the tensors of a convention (``quant/schemes/packing.py``:
``gptq``, ``gptq_v2``, ``awq``, ``ct``; ``hqq`` keeps float zero points) and :meth:`Int4Weights.from_packed`
reads them back, checking every shape, dtype and range.

Dequantisation, each rounding as the libraries' kernels do it (sources in docs/quantization.md, "Packed int4"):

* ``gptq``, ``gptq_v2``, ``awq``, ``ct``: integer zero points; ``w = fl_out((q - z) * s)``: ``q - z`` is an exact
  small integer, the product is rounded once into ``out`` (FP16 in their kernels; ``quant/arith.mul_values``,
  exact for any float64 scale);
* ``hqq``: zero points are floating-point values (FP16); ``w = fl_out(fl_out(q - z) * s)``: two roundings
  (hqq/core/quantize.py ``Quantizer.dequantize``: ``(W_r - zero) * scale`` in ``compute_dtype``).

:func:`quantize_int4` is the round-to-nearest reference (min/max per group, ``numoracle.quantize`` with
``symmetric=False``: ONNX's zero point, then ``q = sat(round(x / s) + z)``); GPTQ's and AWQ's own codes come from
their algorithms (error feedback, scale search), which numoracle does not re-run: it checks what they store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.args import check_array, check_choice, check_int
from ...core.eft import two_sum_error
from ...core.engine.convert import cast, decode
from ...core.formats.format import FP16, UINT4, AnyFormat, format_of
from ...core.inputs import values_in
from ..arith import mul_values
from .packing import pack, pack_zeros, unpack, unpack_zeros

__all__ = ["Int4Weights", "quantize_int4", "dequantize_int4", "INT4_CONVENTIONS"]

INT4_CONVENTIONS = ("gptq", "gptq_v2", "awq", "ct", "hqq")


def _round(v: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Exact float64 values rounded once (RNE) into fmt, back as float64 values."""
    return np.asarray(decode(cast(v, fmt), fmt), dtype=np.float64)


def _values_of(a: Any, fmt: AnyFormat, what: str) -> np.ndarray:
    return values_in(a, fmt, what, f"the kernel reads them in {fmt.name}: round them first")


def dequantize_int4(codes: Any, scales: Any, zeros: Any, *, group: int, convention: str = "gptq",
                    out: Any = "fp16") -> np.ndarray:
    """Dequantised weights ``(K, N)`` as float64 values of ``out`` (see the module doc for each convention)."""
    convention = check_choice(convention, "convention", INT4_CONVENTIONS)
    q = check_array(codes, "codes")
    if q.ndim != 2 or q.dtype.kind not in "iu":
        raise ValueError(f"{convention}: codes are a 2-D integer matrix (K, N), got {q.dtype} {q.shape}")
    s, z = check_array(scales, "scales", np.float64), check_array(zeros, "zeros", np.float64)
    K, N = q.shape
    group = check_int(group, "group", 1)
    if K % group:
        raise ValueError(f"{convention}: codes {q.shape} in groups of {group} along K: K must be a multiple of group")
    for name, v in (("scales", s), ("zeros", z)):
        if v.shape != (K // group, N):
            raise ValueError(f"{convention}: codes {q.shape} in groups of {group} along K need {name} of shape "
                             f"({K // group}, {N}), got {v.shape}")
    dst = format_of(out)
    se, ze = np.repeat(s, group, axis=0), np.repeat(z, group, axis=0)
    qf = q.astype(np.float64)
    d = qf - ze  # exact for small integers, or an integer minus an FP16 value; checked below for any float64
    if convention == "hqq":
        if np.any(two_sum_error(qf, -ze, d) != 0):
            raise ValueError("hqq: q - zero is not exact in float64 for these zero points, so it cannot be rounded "
                             "once into out as HQQ does; zero points are values of the kernel's format (FP16): "
                             "round them first")
        d = _round(d, dst)
    elif not np.array_equal(z, np.round(z)):
        raise ValueError(f"{convention}: zero points are integers in this convention; HQQ's are floats "
                         "(convention='hqq')")
    return np.asarray(mul_values(d, se, dst), dtype=np.float64)  # (q - z) * s rounded once, for any scale


@dataclass(frozen=True, eq=False)
class Int4Weights:
    """Codes (K, N) in 0..15, scales and zero points (K / group, N): values of ``scale_fmt`` and integers
    (``hqq``: values of ``scale_fmt`` too). Dequantise with :meth:`dequantize`; store with :meth:`pack`."""

    codes: np.ndarray
    scales: np.ndarray
    zeros: np.ndarray
    group: int
    convention: str = "gptq"
    scale_fmt: AnyFormat = FP16

    def dequantize(self, out: Any = "fp16") -> np.ndarray:
        return dequantize_int4(self.codes, self.scales, self.zeros, group=self.group, convention=self.convention,
                               out=out)

    def pack(self) -> dict[str, np.ndarray]:
        """The convention's tensors as numpy arrays: qweight / qzeros / scales (ct: weight_packed,
        weight_zero_point, weight_scale in (N, ...) orientation; hqq: W_q, zero, scale)."""
        c, sd = self.convention, self.scale_fmt
        scales = np.asarray(cast(self.scales, sd)).view(np.float16) if sd == FP16 else self.scales
        if c == "hqq":
            z = np.asarray(cast(self.zeros, sd)).view(np.float16) if sd == FP16 else self.zeros
            return {"W_q": pack(self.codes, "hqq"), "zero": z, "scale": scales}
        z = self.zeros.astype(np.int64)
        if c == "ct":
            return {"weight_packed": pack(self.codes.T - 8, "ct"), "weight_zero_point": pack_zeros(z.T - 8, "ct"),
                    "weight_scale": scales.T.copy()}
        return {"qweight": pack(self.codes, c), "qzeros": pack_zeros(z, c), "scales": scales}

    @classmethod
    def from_packed(cls, tensors: dict[str, Any], *, convention: str, shape: tuple[int, int], group: int,
                    scale_fmt: Any = FP16) -> Int4Weights:
        """Read a convention's tensors back (``shape`` = (K, N)); wrong shapes, dtypes or ranges raise ValueError."""
        convention = check_choice(convention, "convention", INT4_CONVENTIONS)
        group = check_int(group, "group", 1)
        if len(tuple(shape)) != 2:
            raise ValueError(f"shape must be (K, N), got {shape!r}")
        K, N = (check_int(d, "shape", 1) for d in shape)
        if K % group:
            raise ValueError(f"{convention}: K = {K} is not a multiple of group = {group}; the layout stores "
                             f"one scale and zero point per {group} rows, so pass the group the weights were made with")
        G = K // group
        need = {"hqq": ("W_q", "scale", "zero"), "ct": ("weight_packed", "weight_zero_point", "weight_scale")}.get(
            convention, ("qweight", "qzeros", "scales"))
        missing = [k for k in need if k not in tensors]
        if missing:
            raise ValueError(f"{convention} stores its weights as {', '.join(need)}; the tensors given lack "
                             f"{', '.join(missing)} (keys: {', '.join(map(str, tensors)) or 'none'})")
        sf = format_of(scale_fmt)
        if convention == "hqq":
            codes = unpack(tensors["W_q"], "hqq", (K, N))
            return cls(codes, _values_of(tensors["scale"], sf, "hqq: scale"),
                       _values_of(tensors["zero"], sf, "hqq: zero"), group, convention, sf)
        if convention == "ct":
            codes = unpack(tensors["weight_packed"], "ct", (N, K)).T + 8
            zeros = unpack_zeros(tensors["weight_zero_point"], "ct", (N, G)).T + 8
            scales = np.asarray(tensors["weight_scale"]).T
        else:
            codes = unpack(tensors["qweight"], convention, (K, N))
            zeros = unpack_zeros(tensors["qzeros"], convention, (G, N))
            scales = np.asarray(tensors["scales"])
        return cls(codes.copy(), _values_of(scales, sf, f"{convention}: scales").copy(), zeros.copy(), group,
                   convention, sf)


def quantize_int4(W: Any, *, group: int = 128, convention: str = "gptq", scale_fmt: Any = FP16) -> Int4Weights:
    """Round-to-nearest asymmetric uint4 per group of ``group`` rows of W (K, N): ``numoracle.quantize(W, 'uint4',
    granularity=('group', group), axis=0, symmetric=False, scale_fmt=scale_fmt)``, stored for ``convention``."""
    from ..quantizer import quantize

    convention = check_choice(convention, "convention", INT4_CONVENTIONS)
    group = check_int(group, "group", 1)
    try:
        scale_fmt = format_of(scale_fmt)
    except (ValueError, TypeError) as e:
        raise type(e)(f"scale_fmt: {e}") from None
    q = quantize(W, UINT4, granularity=("group", group), axis=0, symmetric=False, scale_fmt=scale_fmt)
    if q.codes.ndim != 2:
        raise ValueError(f"W must be a 2-D matrix (K, N), got shape {q.codes.shape}")
    zeros = np.asarray(q.zero_points, dtype=np.float64)
    return Int4Weights(q.codes.astype(np.int64), np.asarray(q.scales, dtype=np.float64), zeros, int(group),
                       convention, format_of(scale_fmt))
