"""Codebook formats: a format given by its value table (bitsandbytes NF4 and FP4, its 8-bit dynamic map, yours).

A :class:`Codebook` lists the value of each code (code ``i`` means ``values[i]``); quantising a scaled value
``t`` picks the nearest entry, with bitsandbytes' reading of "nearest" (``bitsandbytes/backends/default/ops.py``,
0.50.2, the torch kernel of ``quantize_4bit`` and ``quantize_blockwise``):

* the entries sorted by value (stable, so of two equal entries, the lower code comes first: FP4's +0 (code 0)
  before its -0 (code 8));
* the decision boundaries are the midpoints ``(v[j] + v[j+1]) / 2`` of sorted neighbours, computed in FP32;
* ``t`` goes to the ``j`` with ``bound[j-1] < t <= bound[j]`` (``torch.bucketize(right=False)``): a value
  exactly on a boundary goes to the lower entry (``ties="down"``; ``ties="up"`` is the other choice).

Blockwise quantisation (:func:`quantize_codebook`) is bitsandbytes' absmax scheme over the flattened array:
blocks of ``block`` consecutive elements (the last one may be shorter), ``absmax`` per block in FP32,
``t = clamp(fl32(x * fl32(1 / max(absmax, fl32(1e-38)))), -1, 1)`` and the code of ``t``, except in a last partial
block (or a tensor shorter than one block), where bitsandbytes 0.50.2 stores ``absmax = max(absmax, fl32(1e-38))``
and divides: ``t = clamp(fl32(x / absmax), -1, 1)``; dequantisation is
``fl32(v[code] * absmax)`` (then cast to the output dtype). This is bitsandbytes' torch kernel
(``backends/default/ops.py``): the one of ``quantize_4bit`` on CPU, and of the 8-bit ``quantize_blockwise`` only
where bitsandbytes' native library did not load; its native CPU kernel of ``quantize_blockwise`` picks codes
through a lookup table and is :func:`quantize_blockwise_cpu` (``quant/bnbcpu.py``). Double quantisation of the
absmax values (``compress_statistics=True``, either kernel: ``path=``) is :func:`double_quantize`. Packing (two
codes per byte, the first in the high nibble) is in ``quant/schemes/packing.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.args import check_array, check_int
from ...core.engine.convert import cast
from ...core.formats.format import FP32, format_of
from ...core.inputs import values_in

__all__ = ["Codebook", "NF4", "BNB_FP4", "BNB_DYNAMIC8", "codebook_of", "register_codebook", "codebooks",
           "CodebookQuantized", "quantize_codebook", "dequantize_codebook", "DoubleQuantized", "double_quantize",
           "quantize_blockwise_cpu"]


@dataclass(frozen=True, eq=False)
class Codebook:
    """A format given by its value table: code ``i`` means ``values[i]`` (float64, exact).

    ``ties``: where ``t`` lies exactly on a boundary, ``"down"`` (the lower entry, bitsandbytes) or ``"up"``.
    ``midpoints``: the format the boundaries ``(a + b) / 2`` are computed in (``"fp32"`` as bitsandbytes,
    or ``"fp64"``). ``source``: where the table comes from.
    """

    name: str
    values: tuple[float, ...]
    source: str = ""
    ties: str = "down"
    midpoints: str = "fp32"

    def __post_init__(self) -> None:
        v = np.asarray(self.values, dtype=np.float64)
        n = v.size
        if v.ndim != 1 or n < 2 or n & (n - 1) or n > 1 << 16:
            raise ValueError(f"codebook {self.name!r}: a value table has 2^b entries (2 .. 65536), got {n}")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"codebook {self.name!r}: every entry must be finite")
        if self.ties not in ("down", "up"):
            raise ValueError(f"codebook {self.name!r}: ties must be 'down' or 'up', got {self.ties!r}")
        if self.midpoints not in ("fp32", "fp64"):
            raise ValueError(f"codebook {self.name!r}: midpoints must be 'fp32' or 'fp64', got {self.midpoints!r}")
        if self.midpoints == "fp32" and not np.array_equal(v.astype(np.float32).astype(np.float64), v):
            raise ValueError(f"codebook {self.name!r}: midpoints='fp32' needs FP32 entries; pass midpoints='fp64' "
                             "or round the table to FP32 first")
        object.__setattr__(self, "values", tuple(float(a) for a in v))

    @property
    def bits(self) -> int:
        return len(self.values).bit_length() - 1

    @property
    def table(self) -> np.ndarray:
        return np.asarray(self.values, dtype=np.float64)

    @property
    def max_abs(self) -> float:
        return float(np.max(np.abs(self.table)))

    @property
    def order(self) -> np.ndarray:
        """Codes sorted by value (stable: equal entries keep code order)."""
        return np.argsort(self.table, kind="stable")

    @property
    def boundaries(self) -> np.ndarray:
        """Midpoints of sorted neighbours, in ``midpoints``' format (float64 array of len - 1)."""
        s = self.table[self.order]
        if self.midpoints == "fp32":
            s32 = s.astype(np.float32)
            return ((s32[:-1] + s32[1:]) / np.float32(2)).astype(np.float64)
        return s[:-1] / 2 + s[1:] / 2

    def normalized(self, name: str | None = None) -> Codebook:
        """The table divided by its largest magnitude, rounded as ``midpoints`` says (bitsandbytes: FP32)."""
        v = self.table
        if self.midpoints == "fp32":
            t = v.astype(np.float32) / np.float32(self.max_abs)
        else:
            t = v / self.max_abs
        return Codebook(name or f"{self.name}_normalized", tuple(t.astype(np.float64)), self.source, self.ties,
                        self.midpoints)

    def encode(self, t: Any) -> np.ndarray:
        """Codes of the values ``t`` (nearest entry; boundaries as the class says). NaN raises ValueError."""
        t = np.asarray(t, dtype=np.float64)
        if np.isnan(t).any():
            raise ValueError(f"codebook {self.name}: NaN has no code (the table holds no NaN); "
                             f"{int(np.isnan(t).sum())} NaN value(s) given")
        idx = np.searchsorted(self.boundaries, t, side="left" if self.ties == "down" else "right")
        return self.order[idx].astype(np.uint8 if self.bits <= 8 else np.uint16)

    def decode(self, codes: Any) -> np.ndarray:
        """Values of the codes (float64); a code past the table raises ValueError."""
        c = np.asarray(codes)
        if c.dtype.kind not in "ui":
            raise TypeError(f"codebook {self.name}: codes must be integers, got {c.dtype}")
        if c.size and (int(c.min()) < 0 or int(c.max()) >= len(self.values)):
            raise ValueError(f"codebook {self.name}: codes lie in 0..{len(self.values) - 1}, got "
                             f"{int(c.min())}..{int(c.max())}")
        return self.table[c.astype(np.int64)]

    def __repr__(self) -> str:
        return f"Codebook({self.name}, {len(self.values)} values)"


_BNB = "bitsandbytes 0.50.2, bitsandbytes/functional.py get_4bit_type"
# NF4 (QLoRA, arXiv:2305.14314, appendix E): the FP32 values bitsandbytes hard-codes, in code order
NF4 = Codebook("nf4", tuple(float.fromhex(h) for h in (
    "-0x1p+0", "-0x1.647362p-1", "-0x1.0cd66p-1", "-0x1.94654p-2", "-0x1.23449ap-2", "-0x1.7a6a7ep-3",
    "-0x1.74f0e2p-4", "0x0p+0", "0x1.45f5fep-4", "0x1.4995c6p-3", "0x1.f809bap-3", "0x1.5a0674p-2",
    "0x1.c3497p-2", "0x1.200f56p-1", "0x1.722766p-1", "0x1p+0")), _BNB + " ('nf4')")
# bitsandbytes FP4: sign, 2 exponent bits (bias 2 as bitsandbytes builds it), 1 mantissa bit, codes in bit order,
# [0, 0.0625, 8, 12, 4, 6, 2, 3] (and the negatives) divided by 12 in FP32
BNB_FP4 = Codebook("bnb_fp4", (0.0, 0.0625, 8.0, 12.0, 4.0, 6.0, 2.0, 3.0,
                               -0.0, -0.0625, -8.0, -12.0, -4.0, -6.0, -2.0, -3.0),
                   _BNB + " ('fp4')").normalized("bnb_fp4")

# bitsandbytes' signed 8-bit dynamic map (create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8),
# Dettmers 2016, arXiv:1511.04561): the 256 FP32 values, sorted, as bit patterns (from bitsandbytes 0.50.2)
_DYN_HEX = (
    'bf7e3333bf7a999abf770000bf736666bf6fcccdbf6c3333bf68999abf650000bf616666bf5dcccdbf5a3333bf56999a'
    'bf530000bf4f6666bf4bcccdbf483333bf44999abf410000bf3d6666bf39cccdbf363334bf32999abf2f0000bf2b6666'
    'bf27cccdbf243334bf20999abf1d0000bf196666bf15cccdbf123334bf0e999abf0b0000bf076666bf03ccccbf003333'
    'bef93332bef20000beeaccccbee3999abedc6666bed53333bece0000bec6ccccbebf999abeb86666beb13333beaa0000'
    'bea2ccccbe9b999abe946666be8d3334be860000be7d9999be6f3333be60cccdbe526666be440000be35999abe273333'
    'be18cccdbe0a6666bdf80000bddb3334bdc9eb85bdc428f7bdbe6667bdb8a3d7bdb2e148bdad1eb8bda75c2abda1999a'
    'bd9bd70abd96147bbd9051ebbd8a8f5dbd84cccdbd7e147bbd728f5dbd670a3dbd5b851fbd500000bd447ae1bd38f5c3'
    'bd2d70a3bd21eb85bd166667bd0ae148bcfeb852bce7ae15bcd0a3d7bcb9999abca28f5dbc8b851fbc68f5c3bc3ae148'
    'bc1f3b64bc160418bc0ccccdbc039581bbf4bc6abbe24dd3bbcfdf3bbbbd70a4bbab020dbb989374bb8624ddbb676c8a'
    'bb428f5cbb1db22dbaf1a9fcbaa7ef9dba7765ffba59e83eba3c6a80ba1eecc1ba016f01b9c7e283b98ce705b923d70b'
    'b8ba1f4bb88aefb3b8378034b7b24206b70205ffb65a1a94b513a3b7000000003513a3b7365a1a94370205ff37b24206'
    '38378034388aefb338ba1f4b3923d70b398ce70539c7e2833a016f013a1eecc13a3c6a803a59e83e3a7765ff3aa7ef9d'
    '3af1a9fc3b1db22d3b428f5c3b676c8a3b8624dd3b9893743bab020d3bbd70a43bcfdf3b3be24dd33bf4bc6a3c039581'
    '3c0ccccd3c1604183c1f3b643c3ae1483c68f5c33c8b851f3ca28f5d3cb9999a3cd0a3d73ce7ae153cfeb8523d0ae148'
    '3d1666673d21eb853d2d70a33d38f5c33d447ae13d5000003d5b851f3d670a3d3d728f5d3d7e147b3d84cccd3d8a8f5d'
    '3d9051eb3d96147b3d9bd70a3da1999a3da75c2a3dad1eb83db2e1483db8a3d73dbe66673dc428f73dc9eb853ddb3334'
    '3df800003e0a66663e18cccd3e2733333e35999a3e4400003e5266663e60cccd3e6f33333e7d99993e8600003e8d3334'
    '3e9466663e9b999a3ea2cccc3eaa00003eb133333eb866663ebf999a3ec6cccc3ece00003ed533333edc66663ee3999a'
    '3eeacccc3ef200003ef933323f0033333f03cccc3f0766663f0b00003f0e999a3f1233343f15cccd3f1966663f1d0000'
    '3f20999a3f2433343f27cccd3f2b66663f2f00003f32999a3f3633343f39cccd3f3d66663f4100003f44999a3f483333'
    '3f4bcccd3f4f66663f5300003f56999a3f5a33333f5dcccd3f6166663f6500003f68999a3f6c33333f6fcccd3f736666'
    '3f7700003f7a999a3f7e33333f800000'
)
BNB_DYNAMIC8 = Codebook("bnb_dynamic8", tuple(
    np.frombuffer(bytes.fromhex("".join(_DYN_HEX)), dtype=">u4").astype(np.uint32).view(np.float32).astype(float)),
    "bitsandbytes 0.50.2, bitsandbytes/functional.py create_dynamic_map (the second level of double quantisation)")

_CODEBOOKS: dict[str, Codebook] = {}


def register_codebook(cb: Codebook, *, replace: bool = False) -> Codebook:
    """Make ``codebook_of(cb.name)`` find ``cb`` (a name taken by another codebook needs replace=True)."""
    if not isinstance(cb, Codebook):
        raise TypeError(f"register_codebook takes a Codebook, got {type(cb).__name__}")
    key = cb.name.strip().lower()
    if key in _CODEBOOKS and _CODEBOOKS[key] is not cb and not replace:
        raise ValueError(f"codebook name {cb.name!r} is already taken; pass replace=True")
    _CODEBOOKS[key] = cb
    return cb


for _cb in (NF4, BNB_FP4, BNB_DYNAMIC8):
    register_codebook(_cb)


def codebooks() -> list[Codebook]:
    """Every registered codebook."""
    return list(_CODEBOOKS.values())


def codebook_of(x: Any) -> Codebook:
    """A Codebook from itself or its name ('nf4', 'bnb_fp4', 'bnb_dynamic8', or one you registered)."""
    if isinstance(x, Codebook):
        return x
    if isinstance(x, str) and x.strip().lower() in _CODEBOOKS:
        return _CODEBOOKS[x.strip().lower()]
    raise ValueError(f"unknown codebook {x!r}; known: {', '.join(_CODEBOOKS)} (register_codebook adds yours)")


# ---- blockwise absmax quantisation (bitsandbytes) -------------------------------------------------
def _fp32_values(x: Any, what: str) -> np.ndarray:
    return values_in(x, FP32, what, "bitsandbytes quantises FP16 / BF16 / FP32 inputs (read as FP32): cast to one "
                     "of them first").astype(np.float32)


@dataclass(frozen=True, eq=False)
class CodebookQuantized:
    """Codes (one per element, x's shape), FP32 absmax per block of the flattened array, and the codebook."""

    codes: np.ndarray
    absmax: np.ndarray
    codebook: Codebook
    block: int
    shape: tuple[int, ...]

    def absmax_per_element(self) -> np.ndarray:
        return self.absmax[_block_index(int(np.prod(self.shape, dtype=np.int64)), self.block)]

    def dequantize(self, out: Any = "fp32") -> np.ndarray:
        """``fl32(v[code] * absmax)``, then cast to ``out`` (FP16 / BF16 round once more), as float64 values."""
        return dequantize_codebook(self.codes, self.absmax, self.codebook, self.block, out)


def _block_index(n: int, block: int) -> np.ndarray:
    """The block of each of n elements (blocks of ``block``; any block >= n is one block)."""
    return np.arange(n) // min(block, max(n, 1))


def dequantize_codebook(codes: Any, absmax: Any, codebook: Any, block: int, out: Any = "fp32") -> np.ndarray:
    """bitsandbytes' dequantisation: ``fl32(v[code] * absmax[block])`` then rounded to ``out``; float64 values."""
    cb = codebook_of(codebook)
    c = check_array(codes, "codes")
    a = check_array(absmax, "absmax", np.float32).ravel()
    block = check_int(block, "block", 1)
    n = c.size
    if a.size != -(-n // block):
        raise ValueError(f"{n} codes in blocks of {block} need {-(-n // block)} absmax values, got {a.size}")
    v = cb.decode(c.ravel()).astype(np.float32)
    y = (v * a[_block_index(n, block)]).astype(np.float64)  # one FP32 rounding (numpy float32 multiply)
    dst = format_of(out)
    if dst != FP32:
        from ...core.engine.convert import decode

        y = np.asarray(decode(cast(y, dst), dst), dtype=np.float64)
    return y.reshape(c.shape)


def _finite_fp32(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """x's FP32 values and their flattened view; NaN and inf refused (absmax quantisation has no rule for them)."""
    xv = _fp32_values(x, "x")
    flat = xv.ravel()
    if not np.all(np.isfinite(flat)):
        raise ValueError(f"x holds {int(np.count_nonzero(~np.isfinite(flat)))} NaN/inf values; blockwise absmax "
                         "quantisation has no rule for them (bitsandbytes returns garbage codes): remove them")
    return xv, flat


def quantize_codebook(x: Any, codebook: Any = "nf4", *, block: int = 64) -> CodebookQuantized:
    """bitsandbytes' blockwise absmax quantisation of ``x`` (flattened, C order) into ``codebook``.

    The codebook's largest magnitude must be 1 (``Codebook.normalized()``). NaN / inf inputs raise ValueError
    (bitsandbytes has no rule for them: its absmax becomes NaN or inf and every code of the block is garbage).
    """
    cb = codebook_of(codebook)
    if cb.max_abs != 1.0:
        raise ValueError(f"codebook {cb.name}: blockwise absmax quantisation maps absmax to +-1, but the table's "
                         f"largest magnitude is {cb.max_abs!r}; use codebook.normalized()")
    block = check_int(block, "block", 1)
    xv, flat = _finite_fp32(x)
    absmax, t = _absmax_and_scaled(flat, block)
    codes = cb.encode(t).reshape(xv.shape)
    return CodebookQuantized(codes, absmax, cb, int(block), tuple(xv.shape))


def _absmax_and_scaled(flat: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """bitsandbytes 0.50.2's absmax per block and ``t`` in [-1, 1] (backends/default/ops.py, quantize_4bit and
    quantize_blockwise): full blocks and the last partial block (or a tensor shorter than a block) differ."""
    full = flat.size - flat.size % block
    # full blocks: absmax as is (0 for a zero block), t = fl32(x * fl32(1 / max(absmax, 1e-38)))
    com = flat[:full].reshape(-1, block) if full else flat[:0].reshape(0, 1)   # (a block may exceed any shape)
    absmax = np.abs(com).max(axis=1) if full else np.zeros(0, np.float32)
    recip = np.float32(1) / np.maximum(absmax, np.float32(1e-38))
    t = (com * recip[:, None]).ravel()
    if full < flat.size:
        # the partial block: absmax clamped to 1e-38 *and stored clamped*, t = fl32(x / absmax) (a division)
        am = np.maximum(np.abs(flat[full:]).max(), np.float32(1e-38))
        absmax = np.append(absmax, am)
        t = np.concatenate([t, flat[full:] / am])
    return absmax.astype(np.float32), np.clip(t, np.float32(-1), np.float32(1))


@dataclass(frozen=True, eq=False)
class DoubleQuantized:
    """Double quantisation of absmax values: ``absmax ~ fl32(fl32(v2[code] * absmax2) + offset)``."""

    inner: CodebookQuantized  # the codes of absmax - offset, in BNB_DYNAMIC8, and their own absmax
    offset: np.float32

    def absmax(self) -> np.ndarray:
        """The absmax values the dequantiser uses (FP32, as float32)."""
        d = self.inner.dequantize("fp32").astype(np.float32)
        return (d + self.offset).astype(np.float32)


def double_quantize(absmax: Any, *, block: int = 256, offset: Any = None, path: str = "default") -> DoubleQuantized:
    """bitsandbytes' ``compress_statistics=True``: ``absmax - offset`` quantised blockwise (256) into BNB_DYNAMIC8.

    ``path``: which of bitsandbytes 0.50.2's two ``quantize_blockwise`` kernels quantises them (their codes
    differ; ``quant/bnbcpu.py`` says which runs when): ``"default"``, ``bitsandbytes/backends/default/ops.py``
    (the torch kernel: nearest entry, :func:`quantize_codebook`), or ``"cpu"``, the native CPU kernel
    ``cquantize_blockwise_cpu_fp32`` of ``libbitsandbytes_cpu`` (``csrc/cpu_ops.cpp``, a 65,536-bin lookup
    table; what a CPU install with its native library runs). ``offset``: bitsandbytes uses ``absmax.mean()`` as
    torch computes it in FP32 (its summation order is torch's); pass that value to reproduce its codes bit for
    bit. Default: the exact mean rounded once to FP32.
    """
    if path not in ("default", "cpu"):
        raise ValueError(f"path must be 'default' (bitsandbytes' torch kernel) or 'cpu' (its native CPU kernel), "
                         f"got {path!r}")
    a = _fp32_values(absmax, "absmax").ravel()
    off = np.float32(np.mean(a.astype(np.float64))) if offset is None else np.float32(offset)
    if offset is not None and float(off) != float(offset):
        raise ValueError(f"offset {offset!r} is not an FP32 value; bitsandbytes keeps it in FP32")
    shifted = (a - off).astype(np.float32)
    if path == "cpu":
        return DoubleQuantized(quantize_blockwise_cpu(shifted, BNB_DYNAMIC8, block=block), off)
    return DoubleQuantized(quantize_codebook(shifted, BNB_DYNAMIC8, block=block), off)


def quantize_blockwise_cpu(x: Any, codebook: Any = BNB_DYNAMIC8, *, block: int = 4096) -> CodebookQuantized:
    """bitsandbytes 0.50.2's native CPU ``quantize_blockwise`` (``libbitsandbytes_cpu`` ``quantize_cpu_impl``,
    x86-64; ``quant/bnbcpu.py`` states its steps) of ``x`` (FP32 / FP16 / BF16 values, flattened, C order):
    codes through its 65,536-bin table, and absmax per block (not clamped: a zero block stores 0, codes 0)."""
    from .bnbcpu import blockwise_cpu_codes

    cb = codebook_of(codebook)
    if len(cb.values) != 256 or np.any(np.diff(cb.table) < 0) or cb.max_abs != 1.0:
        raise ValueError(f"codebook {cb.name}: bitsandbytes' native CPU kernel takes a 256-entry table sorted by "
                         "value with largest magnitude 1 (as create_dynamic_map gives); use quantize_codebook "
                         "(its torch kernel) for other tables")
    block = check_int(block, "block", 1)
    xv, flat = _finite_fp32(x)
    codes, absmax = blockwise_cpu_codes(flat, cb.values, block)
    return CodebookQuantized(codes.reshape(xv.shape), absmax, cb, int(block), tuple(xv.shape))
