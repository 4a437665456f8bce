"""torch's CPU kernels as composite models: the orders, elementwise functions and step forms found for torch 2.13.0
(x86-64, CPU capability AVX512; docs/composite.md, "Bit-exact models"), as ready calls of ``sim/model.py``.

* softmax / log_softmax (ATen ``SoftMaxKernel.cpp``, AVX-512 build: 16 float lanes): max; d = x - max;
  exp = SLEEF ``expf_u10`` (``Vectorized<float>::exp``, not ``torch.exp``, which differs on ~1% of arguments);
  fp32 sum: ``vec::reduce_all``, rows under 16 sequential, else 16 lanes (the tail into the first lanes) combined
  by halving; y = e * fl(1 / S). bf16 softmax: 16 lanes over the first n - n % 16 terms, halving, then the tail
  added in order, its exp by ``std::exp`` (glibc ``expf``, taken as correctly rounded), y rounded to bf16.
  log_softmax: y = (x - max) - log S, log = SLEEF ``logf_u10`` (``xlogf_u1``; correctly rounded log differs on
  ~0.3% of sums); bf16: S and log S stored in bf16 between the steps.
* layer_norm (``layer_norm_kernel.cpp``; 8 lanes, AVX2's width, reproduce it): torch's ``RowwiseMoments``
  (``sim/moments.py``, fused, the scalar merges contracted; bf16: two float vectors per loaded vector),
  rstd = fl(1 / fl(sqrt(var + eps))), y = fl(fl((x - mean) rstd) w + b) (one FMA); bf16 (the mixed-type
  kernel): t = fl(x rstd - fl(rstd mean)), y = fl(t w + b), FMAs, then rounded to bf16.
* rms_norm (composite in ATen: x * rsqrt(mean(x^2) + eps) * w): the squares rounded, torch's CPU sum
  (``VectorCascade(8)``), mean = sum / n, rsqrt = 1 / sqrt; eps None: float32's machine epsilon.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.formats.format import BF16, FP32, format_of
from ...core.inputs import exact_float64
from ...models.orders.basic import Order, Sequential
from ...models.orders.cpu import Interleaved, VectorCascade
from . import elementwise as ew
from .model import simulate_layer_norm, simulate_log_softmax, simulate_rms_norm, simulate_softmax

__all__ = ["torch_cpu_softmax", "torch_cpu_log_softmax", "torch_cpu_layer_norm", "torch_cpu_rms_norm",
           "torch_softmax_order", "torch_softmax_exp"]

SOFTMAX_LANES = 16     # AVX-512: Vectorized<float> has 16 lanes
NORM_LANES = 8         # what reproduces the layer_norm kernel (an AVX2-width vector)


def _format(x: Any) -> Any:
    _, fmt = exact_float64(x, "x")
    if fmt not in (FP32, BF16):
        raise ValueError(f"the torch CPU models cover float32 and bfloat16 inputs, got {fmt.name}")
    return fmt


def torch_softmax_order(n: int, fmt: Any = FP32, lanes: int = SOFTMAX_LANES) -> Order:
    """The order of torch's CPU softmax sum over a row of n (``fmt``: the input's format)."""
    if format_of(fmt) == BF16:
        return Interleaved(lanes, combine="halving", tail="after")
    return Sequential() if n < lanes else Interleaved(lanes, combine="halving", tail="lanes")


def torch_softmax_exp(fmt: Any = FP32, lanes: int = SOFTMAX_LANES) -> Any:
    """The exp of torch's CPU softmax on (rows, n) arguments: SLEEF expf_u10 (bf16: on the first n - n % lanes
    columns; the tail's ``std::exp`` correctly rounded)."""
    if format_of(fmt) != BF16:
        return ew.sleef_expf_u10

    def exp(d: np.ndarray) -> np.ndarray:
        main = d.shape[-1] - d.shape[-1] % lanes
        return np.concatenate([ew.sleef_expf_u10(d[..., :main]), ew.exp_cr(d[..., main:])], axis=-1)
    return exp


def torch_cpu_softmax(x: Any) -> np.ndarray:
    """``torch.softmax(x, -1)`` on CPU (float32 or bfloat16 x), bit for bit; float64 values of x's format."""
    fmt = _format(x)
    return simulate_softmax(x, lambda n: torch_softmax_order(n, fmt), exp=torch_softmax_exp(fmt))


def torch_cpu_log_softmax(x: Any) -> np.ndarray:
    """``torch.log_softmax(x, -1)`` on CPU (float32 or bfloat16 x), bit for bit."""
    fmt = _format(x)
    return simulate_log_softmax(x, lambda n: torch_softmax_order(n, FP32), exp=ew.sleef_expf_u10,
                                log=ew.sleef_logf_u10, stats=BF16 if fmt == BF16 else None)


def torch_cpu_layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> np.ndarray:
    """``torch.nn.functional.layer_norm(x, (n,), weight, bias, eps)`` on CPU, bit for bit."""
    fmt = _format(x)
    return simulate_layer_norm(x, weight, bias, eps=eps, variance="rowwise", lanes=NORM_LANES, fused=True,
                               contract=True, rsqrt=ew.rsqrt_div_sqrt,
                               affine="scaled" if fmt == BF16 else "centered", load=2 if fmt == BF16 else 1)


def torch_cpu_rms_norm(x: Any, weight: Any = None, eps: float | None = None) -> np.ndarray:
    """``torch.rms_norm(x, (n,), weight, eps)`` on CPU, bit for bit (eps None: float32's machine epsilon 2^-23, for
    bf16 inputs too: the statistics are float32; bf16's own 2^-7 differs)."""
    _format(x)
    if eps is None:
        eps = 2.0**-23
    return simulate_rms_norm(x, weight, eps=eps, order=VectorCascade(NORM_LANES), rsqrt=ew.rsqrt_div_sqrt)
