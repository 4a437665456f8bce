"""torch quantized tensors (``qint8``, ``quint8``, ``qint32``) as codes, scales and zero points.

``torch.quantize_per_tensor`` and ``torch.quantize_per_channel`` give tensors whose integer codes
are ``int_repr()`` and whose parameters are ``q_scale()`` / ``q_zero_point()`` (per tensor) or
``q_per_channel_scales()`` / ``q_per_channel_zero_points()`` along ``q_per_channel_axis()``.
:func:`torch_quantized_parts` reads them so that ``check_quantized_close`` compares such a tensor
like a :class:`~numoracle.quant.Quantized`: codes, scales and zero points. torch is never imported here;
the tensor brings it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ...core.formats.format import AnyFormat, format_of
from ...core.formats.interop import is_torch

__all__ = ["is_torch_quantized", "torch_quantized_parts", "TorchQuantized", "TORCH_QUANT_FORMATS"]

TORCH_QUANT_FORMATS = {"torch.qint8": "int8", "torch.quint8": "uint8", "torch.qint32": "int32"}


class TorchQuantized(NamedTuple):
    """A torch quantized tensor taken apart: codes (numpy, the format's native dtype), scales, zero points."""

    codes: np.ndarray
    fmt: AnyFormat
    scales: np.ndarray  # float64: one value (per tensor) or one per channel
    zero_points: np.ndarray  # int64, shaped like scales
    axis: int | None  # the channel axis, None per tensor


def is_torch_quantized(x: Any) -> bool:
    return is_torch(x) and bool(getattr(x, "is_quantized", False))


def torch_quantized_parts(t: Any) -> TorchQuantized:
    """Codes, format, scales and zero points of a torch quantized tensor (per-tensor or per-channel affine)."""
    name = str(t.dtype)
    if name not in TORCH_QUANT_FORMATS:
        raise TypeError(f"torch quantized dtype {name} is not supported; numoracle reads "
                        f"{', '.join(TORCH_QUANT_FORMATS)} (packed quint4x2/quint2x4: unpack them first)")
    fmt = format_of(TORCH_QUANT_FORMATS[name])
    codes = t.detach().cpu().int_repr().contiguous().numpy()
    scheme = str(t.qscheme())
    if scheme in ("torch.per_tensor_affine", "torch.per_tensor_symmetric"):
        return TorchQuantized(codes, fmt, np.array([float(t.q_scale())]), np.array([int(t.q_zero_point())]), None)
    if scheme in ("torch.per_channel_affine", "torch.per_channel_symmetric"):
        scales = t.q_per_channel_scales().detach().cpu().numpy().astype(np.float64)
        zps = t.q_per_channel_zero_points().detach().cpu().numpy().astype(np.int64)
        return TorchQuantized(codes, fmt, scales, zps, int(t.q_per_channel_axis()))
    raise TypeError(f"torch quantization scheme {scheme} is not supported (per-tensor and per-channel affine are)")


def scale_grid(parts: TorchQuantized, grid: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The tensor's scales and zero points laid out on the expected scale grid (ValueError when they do not fit)."""
    ndim = parts.codes.ndim
    if parts.axis is None:
        if int(np.prod(grid)) != 1:
            raise ValueError(f"actual is a per-tensor torch quantized tensor, but the expected quantisation has "
                             f"{int(np.prod(grid))} scales (grid {grid}); pass granularity='tensor'")
        return np.full(grid, parts.scales[0]), np.full(grid, parts.zero_points[0])
    shape = [1] * ndim
    shape[parts.axis] = parts.scales.size
    if tuple(grid) != tuple(shape):
        raise ValueError(f"actual is quantized per channel along axis {parts.axis} ({parts.scales.size} scales), "
                         f"but the expected scale grid is {tuple(grid)}; pass granularity='channel', "
                         f"axis={parts.axis}")
    return parts.scales.reshape(shape), parts.zero_points.reshape(shape)
