"""Accumulation orders for :func:`numoracle.simulate` and the bounds (public path ``numoracle.orders``).

The order classes, the GPU kernels' orders, the presets with their table (``GPU_PRESETS``), and the one order
vocabulary: ``parse(str(o)) == o``; every function that takes an order takes an Order or its text.
"""

from .models.cpuorders import (  # noqa: F401  CPU kernels' orders (torch, XLA, BLAS lanes, thread splits)
    GotoBlocks,
    Interleaved,
    ThreadSplit,
    VectorCascade,
    XlaChunks,
    XlaScan,
    XlaVector,
)
from .models.dotorders import MklDot, OpenBlasDot  # noqa: F401  BLAS dot kernels' orders
from .models.gpuorders import (  # noqa: F401  GPU kernels' orders (identified on recorded H200 runs)
    ChunkedScan,
    GpuReduce,
    TiledSplitK,
    cutlass_slices,
    torch_cumsum_order,
    torch_sum_order,
)
from .models.orders import *  # noqa: F401,F403
from .models.orders import __all__ as _base_all
from .models.ordertext import as_order, order_text, parse  # noqa: F401
from .models.presets import GPU_ALIASES, GPU_PRESETS, PRESETS, GpuPreset, preset, preset_name  # noqa: F401
from .models.treeorder import PerPosition, TreeOrder  # noqa: F401  explicit trees (numoracle.reveal_order)
from .models.ynnorders import YnnSum  # noqa: F401  YNNPACK's float sums (jax's CPU reductions)

__all__ = [*_base_all, "TiledSplitK", "GpuReduce", "ChunkedScan", "cutlass_slices", "torch_sum_order",
           "torch_cumsum_order", "preset", "PRESETS", "GPU_PRESETS", "GPU_ALIASES", "GpuPreset", "preset_name",
           "parse", "as_order", "order_text", "TreeOrder", "PerPosition", "VectorCascade", "ThreadSplit",
           "Interleaved", "XlaChunks", "XlaVector", "XlaScan", "GotoBlocks", "OpenBlasDot", "MklDot", "YnnSum"]
