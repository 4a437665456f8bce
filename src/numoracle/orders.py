"""Accumulation orders for :func:`numoracle.simulate` and the bounds (``numoracle.orders``).

The order classes, the GPU and CPU kernels' orders, explicit trees, the presets with their table
(``GPU_PRESETS``), and the one order vocabulary: ``parse(str(o)) == o``; every function that takes an order takes
an Order or its text.
"""

from .core.lazy import names_from as _from
from .core.lazy import namespace

API = {
    **_from(".models.orders.basic", "Order", "Sequential", "Pairwise", "Blocked", "SplitK", "BlockFMA", "Promoted",
            "NumpyPairwise", "Schedule", "Wave", "build"),
    **_from(".models.orders.gpu", "TiledSplitK", "GpuReduce", "ChunkedScan", "cutlass_slices", "torch_sum_order",
            "torch_cumsum_order"),
    **_from(".models.orders.cpu", "VectorCascade", "ThreadSplit", "Interleaved", "XlaChunks", "XlaVector", "XlaScan",
            "GotoBlocks"),
    **_from(".models.orders.blasdot", "OpenBlasDot", "MklDot"),
    **_from(".models.orders.ynnpack", "YnnSum"),
    **_from(".models.orders.mklgemm", "ChainApart", "MklSmallGemm"),
    **_from(".models.orders.tree", "TreeOrder", "PerPosition"),
    **_from(".models.orders.compensated", "CompensatedTree"),
    **_from(".models.orders.presets", "preset", "PRESETS", "GPU_PRESETS", "GPU_ALIASES", "GpuPreset", "preset_name"),
    **_from(".models.orders.text", "parse", "as_order", "order_text"),
}

__all__, __getattr__, __dir__ = namespace(__name__, API)
