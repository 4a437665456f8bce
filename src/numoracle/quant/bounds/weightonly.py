"""Weight-only formats in the matmul bound: codebooks (NF4 ...), packed int4 and GGUF blocks, dequantised, then
accumulated.

The kernel modelled: each weight is dequantised into ``w~`` (every rounding of its format's dequantiser, then
rounded once into ``weights_fmt``, the format the kernel multiplies in), and ``C = A @ w~`` is accumulated in
``acc`` along ``order`` and stored in ``out``. With B the original weights (K, N):

    |C - A @ B| <= tol(A, w~) + |A| @ |w~ - B|

``tol`` is ``expected_error_bound("matmul", F, K, acc=acc, order=order, out=out).tolerance(A, w~)`` (F: the
wider of A's format and ``weights_fmt``), the second term the weights' quantisation error, exact in float64
and rounded upward. ``quantized_matmul_bound(A, B, qb=weights)`` and ``expected_error_bound("quantized_matmul",
A_FORMAT, K, dtype_b="nf4" | "gguf:Q4_0" | "int4", ...)`` return a :class:`DequantMatmulBound`.

Weights (``qb``): an :class:`~numoracle.quant.Int4Weights` (codes (K, N): B itself; FP16 kernels: ``weights_fmt``
FP16); a :class:`CodebookQuantized` or :class:`GgufWeights` of the layer's (N, K) tensor (``nn.Linear`` and
ggml store a row of K inputs per output; bitsandbytes' blocks and GGUF's run along it): B is its transpose.
bitsandbytes dequantises into the activations' dtype and llama.cpp's dequantise + GEMM path into FP16 / FP32:
``weights_fmt`` defaults to A's format for these two.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...bounds.boundmath import add_up, margin, mul_up, nested
from ...bounds.expected import ErrorBound, expected_error_bound
from ...core.engine.convert import cast, decode
from ...core.formats.format import FP16, FP32, AnyFormat, format_of
from ...core.inputs import exact_float64
from ..schemes.codebook import CodebookQuantized, dequantize_codebook
from ..schemes.gguf import GGUF_TYPES, gguf_blocks, gguf_dequantize, gguf_type_name
from ..schemes.int4 import Int4Weights

_INT4_NAMES = ("gptq", "gptq_v2", "awq", "ct", "hqq")

__all__ = ["GgufWeights", "DequantMatmulBound", "is_weight_only", "weight_only_kind", "dequant_matmul_bound"]


@dataclass(frozen=True, eq=False)
class GgufWeights:
    """A GGUF tensor: its bytes, type and shape (rows, cols) = (N, K), blocks along each row (ggml's ne1 x ne0)."""

    data: Any
    qtype: str
    shape: tuple[int, int]

    def __post_init__(self) -> None:
        name = gguf_type_name(self.qtype)
        object.__setattr__(self, "qtype", name)
        n = GGUF_TYPES[name][0]
        rows, cols = (int(s) for s in self.shape)
        if cols % n:
            raise ValueError(f"{name}: each row of {cols} values must hold whole blocks of {n}")
        blocks = gguf_blocks(self.data, name)
        if blocks.shape[0] != rows * cols // n:
            raise ValueError(f"{name}: shape ({rows}, {cols}) needs {rows * cols // n} blocks, the data has "
                             f"{blocks.shape[0]}")
        object.__setattr__(self, "shape", (rows, cols))

    def dequantize(self) -> np.ndarray:
        """The FP32 values (rows, cols) ggml's dequantiser gives, as float64."""
        return gguf_dequantize(self.data, self.qtype, self.shape).astype(np.float64)


def is_weight_only(q: Any) -> bool:
    return isinstance(q, (Int4Weights, CodebookQuantized, GgufWeights))


def weight_only_kind(spec: Any) -> str | None:
    """'int4', 'codebook' or 'gguf' for a weights object or a name (None: a numoracle format)."""
    from ..checks.blockcheck import block_format

    if isinstance(spec, Int4Weights):
        return "int4"
    if isinstance(spec, CodebookQuantized):
        return "codebook"
    if isinstance(spec, GgufWeights):
        return "gguf"
    if isinstance(spec, str):  # "int4" alone is numoracle's INT4 format: the packed conventions go by name
        key = spec.strip().lower()
        if key in _INT4_NAMES or (key.startswith("int4:") and key[5:] in _INT4_NAMES):
            return "int4"
    kind = block_format(spec)
    if kind is None:
        return None
    return "gguf" if isinstance(kind, str) else "codebook"


def _describe(q: Any) -> str:
    if isinstance(q, Int4Weights):
        return f"int4 {q.convention}, groups of {q.group} along K, {q.scale_fmt.name} scales"
    if isinstance(q, CodebookQuantized):
        return f"{q.codebook.name}, absmax blocks of {q.block}"
    return f"GGUF {q.qtype}"


def _weights(q: Any, B_shape: tuple[int, ...], wfmt: AnyFormat) -> np.ndarray:
    """w~ (K, N): the dequantised weights rounded into wfmt, as float64 values."""
    if isinstance(q, Int4Weights):
        w, shape = q.dequantize(wfmt), tuple(q.codes.shape)
    else:
        if isinstance(q, CodebookQuantized):
            w = dequantize_codebook(q.codes, q.absmax, q.codebook, q.block, "fp32")
        else:
            w = q.dequantize()
        w = np.asarray(decode(cast(w, wfmt), wfmt), dtype=np.float64).T
        shape = tuple(w.shape)
    if shape != tuple(B_shape):
        how = "codes (K, N)" if isinstance(q, Int4Weights) else "the (N, K) layer tensor, B its transpose"
        raise ValueError(f"{_describe(q)}: the weights have shape {shape} as B (K, N) ({how}), but B has shape "
                         f"{tuple(B_shape)}")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{_describe(q)}: dequantised weights overflow {wfmt.name}; the bound needs finite weights")
    return w


@dataclass(frozen=True, eq=False)
class DequantMatmulBound:
    """The dequantise-then-accumulate bound of ``A @ B`` for weight-only formats (see the module doc)."""

    weights: str  # what B holds
    dtype: AnyFormat  # A's format
    weights_fmt: AnyFormat  # w~'s format
    K: int
    inner: ErrorBound  # the accumulation of A @ w~
    qb: Any = None

    op = "quantized_matmul"
    kind = "worst"
    model = "dequantize-then-accumulate"

    @property
    def coefficient(self) -> Any:
        return self.inner.coefficient

    def __repr__(self) -> str:
        return (f"<DequantMatmulBound {self.weights}: A {self.dtype.name} @ w~ {self.weights_fmt.name}, K = {self.K}, "
                f"acc {self.inner.acc.name}, order {self.inner.order}>")

    def __str__(self) -> str:
        return "\n".join([
            f"DequantMatmulBound  weights {self.weights} dequantised into {self.weights_fmt.name}; "
            f"A {self.dtype.name}; K = {self.K}",
            "  |C - A B| <= tol(A, w~) + |A| |w~ - B|   (per output element; w~ = the dequantised weights)",
            "  tol: the accumulation of A @ w~ (expected_error_bound('matmul', ...)):",
            *("    " + line for line in str(self.inner).splitlines()),
            "  |A| |w~ - B|: the weights' quantisation error, from the data (float64, rounded upward)"])

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "model": self.model, "weights": self.weights, "dtype": self.dtype.name,
                "weights_fmt": self.weights_fmt.name, "K": self.K, "inner": self.inner.to_dict()}

    def rtol_atol(self, *args: Any, **kw: Any) -> Any:
        raise ValueError("the bound depends on the weights' quantisation error, which depends on the data: use "
                         "bound.tolerance(A, B, qb=weights)")

    def tolerance(self, A: Any, B: Any, *, qa: Any = None, qb: Any = None, parts: bool = False) -> Any:
        """Elementwise bound on |C - A @ B| (float64, rounded upward); ``qb``: the weights (default: the bound's)."""
        if qa is not None:
            raise ValueError("the dequantise-then-accumulate model reads A as its values (weight-only kernels); a "
                             "quantised A with block scales is quantized_matmul's model: quantize both with "
                             "numoracle.quantize and pass Quantized operands")
        q = self.qb if qb is None else qb
        if not is_weight_only(q):
            raise ValueError("give the weights: tolerance(A, B, qb=Int4Weights | CodebookQuantized | GgufWeights)")
        a = np.asarray(to_values(A), dtype=np.float64)
        b = np.asarray(to_values(B), dtype=np.float64)
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        if a2.ndim != 2 or b.ndim != 2 or a2.shape[1] != b.shape[0] or b.shape[0] != self.K:
            raise ValueError(f"A @ B needs A (M, K) or (K,) and B (K, N) with K = {self.K}; "
                             f"got {a.shape} and {b.shape}")
        w = _weights(q, b.shape, self.weights_fmt)
        kern = np.asarray(self.inner.tolerance(a2, w), dtype=np.float64)
        err = np.abs(w - b)
        err = add_up(err, mul_up(err, 2.0**-52))  # the float64 difference, rounded: half an ulp more
        quant = mul_up(np.matmul(np.abs(a2), err), margin(self.K))
        total = add_up(kern, quant)
        shape = (b.shape[1],) if a.ndim == 1 else total.shape
        out = {"quantization": quant.reshape(shape), "kernel": kern.reshape(shape),
               "output": np.zeros(shape), "total": total.reshape(shape)}
        return out if parts else out["total"]

    def check(self, C: Any, A: Any, B: Any, *, qb: Any = None, against: str = "dequantized") -> None:
        """Raise AssertionError naming the worst element outside the bound. ``against="dequantized"``: |C - A @ w~|
        within the accumulation bound alone (the kernel multiplies w~); ``"weights"``: |C - A @ B| within the total."""
        from ...exact.reference import exact_matmul

        if against not in ("dequantized", "weights"):
            raise ValueError(f"against must be 'dequantized' or 'weights', got {against!r}")
        p = self.tolerance(A, B, qb=qb, parts=True)
        a = np.asarray(to_values(A), dtype=np.float64)
        a = a.reshape(1, -1) if a.ndim == 1 else a
        b = np.asarray(to_values(B), np.float64)
        rhs = b if against == "weights" else _weights(self.qb if qb is None else qb, b.shape, self.weights_fmt)
        tol = p["total"] if against == "weights" else p["kernel"]
        ref = np.asarray(exact_matmul(a, rhs), dtype=np.float64).reshape(tol.shape)
        c = np.asarray(to_values(C), dtype=np.float64).reshape(tol.shape)
        tol = add_up(tol, mul_up(np.abs(ref), 2.0**-52))  # the reference rounded to float64
        err = np.abs(c - ref)
        bad = ~(err <= tol)
        if bad.any():
            i = np.unravel_index(int(np.argmax(np.where(bad, err / np.maximum(tol, 1e-300), -1))), c.shape)
            what = "A @ B" if against == "weights" else "A @ w~"
            raise AssertionError(f"{int(bad.sum())} of {c.size} outputs outside the dequantise-then-accumulate bound "
                                 f"({self.weights}; acc {self.inner.acc.name}, order {self.inner.order}; against "
                                 f"{against}); worst at {tuple(int(k) for k in i)}: got {float(c[i])!r}, "
                                 f"{what} = {float(ref[i])!r}, "
                                 f"|error| {err[i]:.6g} > bound {tol[i]:.6g}")


def to_values(x: Any) -> np.ndarray:
    """Exact float64 values of any array (numpy, ml_dtypes, torch)."""
    return exact_float64(x, "the array")[0]


def dequant_matmul_bound(dtype: Any, K: int, weights: Any, *, acc: Any = None, order: Any = None, fma: bool = True,
                         out: Any = None, rounding: Any = "rne", weights_fmt: Any = None, qb: Any = None
                         ) -> DequantMatmulBound:
    """The bound for A of ``dtype`` times weights of kind ``weights`` (a weights object, or 'int4', 'nf4',
    'gguf:Q4_0', ...): the accumulation is ``expected_error_bound('matmul', F, K, ...)``."""
    kind = weight_only_kind(weights)
    if kind is None:
        raise ValueError(f"{weights!r} is not a weight-only format (int4, a codebook, a GGUF type)")
    da = format_of(dtype)
    wf = format_of(weights_fmt) if weights_fmt is not None else FP16 if kind == "int4" else da
    if wf.is_integer or da.is_integer:
        raise ValueError(f"dequantise-then-accumulate multiplies float values: A is {da.name}, w~ {wf.name}")
    inner_fmt = wf if nested(da, wf) else da if nested(wf, da) else None
    if inner_fmt is None:
        raise ValueError(f"A's format {da.name} and the weights' {wf.name}: neither holds the other's values; pass "
                         "weights_fmt= (the format the kernel multiplies the dequantised weights in)")
    inner = expected_error_bound("matmul", inner_fmt, K, acc=acc if acc is not None else FP32, order=order,
                                 fma=fma, out=out, rounding=rounding)
    what = _describe(weights) if is_weight_only(weights) else str(getattr(weights, "name", weights))
    return DequantMatmulBound(what, da, wf, int(K), inner, weights if is_weight_only(weights) else qb)
