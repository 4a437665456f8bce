"""Accumulation orders for :func:`numoracle.simulate` and the bounds (public path ``numoracle.orders``)."""

from .reduce.gpuorders import (  # noqa: F401  GPU kernels' orders (identified on recorded H200 runs)
    ChunkedScan,
    GpuReduce,
    TiledSplitK,
    cutlass_slices,
    torch_cumsum_order,
    torch_sum_order,
)
from .reduce.orders import *  # noqa: F401,F403
from .reduce.orders import __all__ as _base_all

__all__ = [*_base_all, "TiledSplitK", "GpuReduce", "ChunkedScan", "cutlass_slices", "torch_sum_order",
           "torch_cumsum_order"]
