"""The quantisation check for block formats that are not a numoracle Format: codebooks (NF4, bitsandbytes FP4,
yours) with blockwise absmax, and GGUF's blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K).

``check_quantized_close(actual, x, fmt="nf4", granularity=("block", 64))`` and ``check_quantized_close(actual, x,
fmt="Q4_0")`` come here (``quant/checks/check.py`` dispatches on ``fmt``). The reference is ``quantize_codebook`` /
``gguf_reference``; ``actual`` may be:

* codebook: codes (x's shape, integers), bitsandbytes' packed bytes (``(ceil(n / 2), 1)`` uint8), a
  :class:`CodebookQuantized` (its absmax compared too) or dequantised values (a float array of x's shape:
  compared with ``fl_out(v[code] * absmax)`` of the expected code and its two neighbours in value order);
* GGUF: the tensor's bytes (whole blocks), or its dequantised FP32 values (x's shape).

Classes: ``exact``; ``tie`` (one code away, where the reference's scaled value t was a tie: on a codebook
boundary, or a GGUF ``t`` with fraction exactly 1/2); ``mismatch``. Scales: codebook absmax is an exact
maximum (no rounding), GGUF's d / m fields are compared as stored (K-quants: each element's ``d * sc`` and
``dmin * m``, the super-block and sub-block scales together): any difference fails, with the block named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.formats.interop import to_codes
from ..schemes.codebook import (
    Codebook,
    CodebookQuantized,
    _absmax_and_scaled,
    codebook_of,
    codebooks,
    dequantize_codebook,
    quantize_codebook,
)
from ..schemes.gguf import GGUF_TYPES, gguf_blocks, gguf_codes, gguf_dequantize, gguf_reference, gguf_values

__all__ = ["BlockCheckReport", "BlockElement", "block_format", "check_block_quantized"]


class BlockElement(tuple):
    """One listed element: (index, x, actual code, actual value, expected code, expected value, t, class)."""

    __slots__ = ()


@dataclass
class BlockCheckReport:
    """Result of a codebook / GGUF quantisation check (the same summary-then-worst-elements shape as
    :class:`~numoracle.quant.QuantCheckReport`)."""

    passed: bool
    what: str  # "nf4 (blocks of 64)", "GGUF Q4_0"
    mode: str  # "codes", "bytes" or "values"
    n_checked: int
    counts: dict[str, int]
    allow_outliers: int
    worst: list[BlockElement]
    scale_blocks: int = 0  # blocks whose scale fields differ
    scale_witness: list[str] = field(default_factory=list)

    @property
    def n_outliers(self) -> int:
        return self.counts["tie"]

    @property
    def n_mismatch(self) -> int:
        return self.counts["mismatch"]

    def failure(self, msg: Any = None, verbose: bool = False) -> Exception:
        """The exception a failing assertion raises: :class:`QuantizedMismatch`, as for element formats."""
        from .report import QuantizedMismatch

        return QuantizedMismatch(self, msg)

    def summary(self) -> str:
        c = self.counts
        why = []
        if c["mismatch"]:
            why.append(f"{c['mismatch']} element(s) no tie explains")
        if c["tie"] > self.allow_outliers:
            why.append(f"{c['tie']} tie outliers exceed the budget of {self.allow_outliers}")
        if self.scale_blocks:
            why.append(f"{self.scale_blocks} block scale(s) differ")
        head = "Quantized close" if self.passed else "Quantized mismatch" + (f" ({'; '.join(why)})" if why else "")
        return (f"{head}: {self.n_checked} {self.what} {self.mode}: {c['exact']} exact, {c['tie']} tie, "
                f"{c['mismatch']} mismatch; outliers {c['tie']} of {self.allow_outliers} allowed")

    def __str__(self) -> str:
        lines = [self.summary()]
        if self.scale_witness:
            lines.append("block scales that differ (block: actual vs expected):")
            lines += ["  " + w for w in self.scale_witness]
        if self.worst:
            lines.append(f"worst {len(self.worst)} element(s) (t = the scaled value the reference rounded):")
            head = ("index", "x", "actual", "expected", "t", "class")
            body = [(str(e[0]), repr(e[1]), _cv(e[2], e[3]), _cv(e[4], e[5]), repr(e[6]), e[7]) for e in self.worst]
            w = [max(len(r[k]) for r in [head, *body]) for k in range(len(head))]
            lines += ["  " + "  ".join(s.rjust(w[k]) for k, s in enumerate(r)).rstrip() for r in [head, *body]]
        return "\n".join(lines)


def _cv(code: int | None, value: float) -> str:
    return f"{'-' if code is None else code} ({value!r})"


def block_format(fmt: Any) -> Codebook | str | None:
    """The codebook or GGUF type name ``fmt`` names (None: a numoracle Format, for the generic check)."""
    if isinstance(fmt, Codebook):
        return fmt
    name = getattr(fmt, "name", fmt)
    if isinstance(name, str):
        key = name.strip()
        if key.upper() in GGUF_TYPES or key.lower().startswith("gguf:"):
            return key.split(":")[-1].upper()
        if key.lower() in {cb.name.lower() for cb in codebooks()}:
            return codebook_of(key)
    return None


def _block_size(granularity: Any, default: int) -> int:
    if granularity is None:
        return default
    g = granularity
    if isinstance(g, tuple) and len(g) == 2 and g[0] in ("block", "group"):
        g = g[1]
    if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 1:
        raise ValueError(f"a codebook check takes granularity=('block', n) (bitsandbytes' blocksize over the "
                         f"flattened tensor), got {granularity!r}")
    return int(g)


def _report(what: str, mode: str, x: np.ndarray, ac: np.ndarray, av: np.ndarray, ec: np.ndarray, ev: np.ndarray,
            t: np.ndarray, same: np.ndarray, tie: np.ndarray, allow: int, show: int,
            scale_bad: list[str], n_scale: int) -> BlockCheckReport:
    cls = np.where(same, "exact", np.where(tie, "tie", "mismatch"))
    counts = {k: int((cls == k).sum()) for k in ("exact", "tie", "mismatch")}
    bad = np.flatnonzero(cls.ravel() != "exact")
    rank = np.where(cls.ravel()[bad] == "mismatch", 0, 1)
    err = np.abs(np.nan_to_num(av.ravel()[bad] - ev.ravel()[bad], nan=np.inf))
    rows = []
    for i in bad[np.lexsort((-err, rank))][:show]:
        idx = tuple(int(k) for k in np.unravel_index(i, x.shape))
        a = None if ac is None or ac.ravel()[i] < 0 else int(ac.ravel()[i])
        rows.append(BlockElement((idx, float(x.ravel()[i]), a, float(av.ravel()[i]), int(ec.ravel()[i]),
                                  float(ev.ravel()[i]), float(t.ravel()[i]), str(cls.ravel()[i]))))
    passed = counts["mismatch"] == 0 and counts["tie"] <= allow and n_scale == 0
    return BlockCheckReport(passed, what, mode, int(x.size), counts, int(allow), rows, n_scale, scale_bad)


# ---- codebooks -----------------------------------------------------------------------------------
def _codebook_actual(actual: Any, n: int, shape: tuple[int, ...], cb: Codebook) -> tuple[str, np.ndarray, Any]:
    """("codes", codes of x's shape, None) or ("values", float64 values, their format)."""
    from ..schemes.packing import unpack

    a = np.asarray(actual) if not hasattr(actual, "detach") else actual
    codes, afmt = to_codes(a)
    codes = np.asarray(codes)
    if afmt.is_integer:
        if codes.shape == (-(-n // 2), 1) and codes.shape != tuple(shape) and cb.bits == 4:
            return "codes", unpack(codes.astype(np.uint8), "bnb", shape), None
        if codes.shape != tuple(shape):
            raise ValueError(f"actual codes have shape {codes.shape}; x has shape {tuple(shape)} (packed "
                             f"bitsandbytes bytes: ({-(-n // 2)}, 1) uint8)")
        from ...core.engine.convert import decode

        return "codes", np.asarray(decode(codes, afmt)).astype(np.int64), None
    if codes.shape != tuple(shape):
        raise ValueError(f"actual values have shape {codes.shape}; x has shape {tuple(shape)}")
    from ...core.engine.convert import decode

    return "values", np.asarray(decode(codes, afmt), dtype=np.float64), afmt


def _check_codebook(actual: Any, x: Any, cb: Codebook, block: int, actual_scales: Any, allow: int,
                    show: int) -> BlockCheckReport:
    exp = quantize_codebook(x, cb, block=block)
    xv = np.asarray(x, dtype=np.float64).reshape(exp.shape)
    if isinstance(actual, CodebookQuantized):
        if actual_scales is not None:
            raise ValueError("actual is a CodebookQuantized: its absmax is compared; do not also pass actual_scales")
        actual_scales, actual = actual.absmax, actual.codes
    n = xv.size
    mode, a, afmt = _codebook_actual(actual, n, xv.shape, cb)
    scale_bad: list[str] = []
    n_scale = 0
    if actual_scales is not None:
        asc = np.asarray(actual_scales, dtype=np.float64).ravel()
        if asc.shape != exp.absmax.shape:
            raise ValueError(f"actual_scales (absmax) has {asc.size} values; {n} elements in blocks of {block} "
                             f"have {exp.absmax.size}")
        diff = np.flatnonzero(asc != exp.absmax.astype(np.float64))
        n_scale = int(diff.size)
        scale_bad = [f"block {int(i)}: {float(asc[i])!r} vs {float(exp.absmax[i])!r} (absmax is an exact maximum)"
                     for i in diff[:show]]
    pos = np.empty(len(cb.values), np.int64)
    pos[cb.order] = np.arange(len(cb.values))  # each code's place in value order
    ec = exp.codes.astype(np.int64)
    t = _absmax_and_scaled(xv.astype(np.float32).ravel(), block)[1].astype(np.float64).reshape(xv.shape)
    out = "fp32" if afmt is None else afmt
    ev = dequantize_codebook(ec, exp.absmax, cb, block, out)
    if mode == "codes":
        ac, av = a, dequantize_codebook(a, exp.absmax, cb, block, out)
        same = (ac == ec) | (av == ev)  # FP4's +0 and -0: equal values
    else:
        av, same, ac = a, a == ev, np.where(a == ev, ec, -1)
        for d in (-1, 1):  # a neighbour entry in value order explains the value: report its code
            k = pos[ec] + d
            nb = cb.order[np.clip(k, 0, len(cb.values) - 1)]
            hit = (ac < 0) & (k >= 0) & (k < len(cb.values)) & (dequantize_codebook(nb, exp.absmax, cb, block, out)
                                                                 == av)
            ac = np.where(hit, nb, ac)
    dist = np.where(ac >= 0, np.abs(pos[np.maximum(ac, 0)] - pos[ec]), -1)
    tie = ~same & np.isin(t, cb.boundaries) & (dist == 1)
    return _report(f"{cb.name} (blocks of {block})", mode, xv, ac, av, ec, ev, t, same, tie, allow, show,
                   scale_bad, n_scale)


# ---- GGUF ----------------------------------------------------------------------------------------
def _check_gguf(actual: Any, x: Any, name: str, allow: int, show: int) -> BlockCheckReport:
    ref, eq, t = gguf_reference(x, name)
    xv = np.asarray(x, dtype=np.float64)
    shape = xv.shape
    ev = gguf_dequantize(ref, name).astype(np.float64).reshape(shape)
    a = np.asarray(actual)
    frac = np.abs(t) - np.floor(np.abs(t))
    tie_t = (frac == 0.5).reshape(shape)
    if a.dtype.kind == "f" and a.shape == shape:
        av = a.astype(np.float64)
        _, rd, rm = gguf_codes(ref, name)
        same = av == ev
        ac = np.where(same, eq.reshape(shape), -1)
        for step in (-1, 1):  # the neighbouring code, dequantised as the reference block's fields say
            nb = gguf_values(eq + step, rd, rm, name).astype(np.float64).reshape(shape)
            ac = np.where((ac < 0) & (nb == av), (eq + step).reshape(shape), ac)
        tie = ~same & tie_t & (ac >= 0)
        return _report(f"GGUF {name}", "values", xv, ac, av, eq.reshape(shape), ev, t.reshape(shape), same, tie,
                       allow, show, [], 0)
    blocks = gguf_blocks(a, name)
    if blocks.shape != ref.shape:
        raise ValueError(f"{name}: actual holds {blocks.shape[0]} blocks; x ({xv.size} values) makes {ref.shape[0]}")
    aq, ad, am = gguf_codes(blocks, name)
    _, rd, rm = gguf_codes(ref, name)
    differs = ad.view(np.uint32) != rd.view(np.uint32)  # (n, 1); K-quants (n, 256): d * sub-block scale
    if rm is not None:
        differs |= am.view(np.uint32) != rm.view(np.uint32)
    fields_bad = differs.any(axis=1)
    at = differs.argmax(axis=1)
    what = "d * sc" if name.endswith("_K") else "d"
    witness = [f"block {int(i)}{f' element {int(at[i])}' if name.endswith('_K') else ''}: {what} "
               f"{float(ad[i, at[i]])!r} vs {float(rd[i, at[i]])!r}"
               + (f", m {float(am[i, at[i]])!r} vs {float(rm[i, at[i]])!r}" if rm is not None else "")
               for i in np.flatnonzero(fields_bad)[:show]]
    av = gguf_dequantize(blocks, name).astype(np.float64).reshape(shape)
    same = (aq == eq).reshape(shape)
    tie = ~same & tie_t & (np.abs(aq - eq).reshape(shape) == 1)
    return _report(f"GGUF {name}", "bytes", xv, aq.reshape(shape), av, eq.reshape(shape), ev, t.reshape(shape),
                   same, tie, allow, show, witness, int(fields_bad.sum()))


def check_block_quantized(actual: Any, x: Any, fmt: Any, *, granularity: Any = None, actual_scales: Any = None,
                          allow_outliers: int = 0, show: int = 10) -> BlockCheckReport:
    """Compare ``actual`` with numoracle's codebook or GGUF quantisation of ``x`` (see the module doc)."""
    kind = block_format(fmt)
    if isinstance(kind, Codebook):
        return _check_codebook(actual, x, kind, _block_size(granularity, 64), actual_scales, allow_outliers, show)
    if kind is None:
        raise ValueError(f"{fmt!r} is neither a codebook nor a GGUF type")
    if granularity is not None or actual_scales is not None:
        raise ValueError(f"GGUF {kind}: the block size is the type's ({GGUF_TYPES[kind][0]}) and its scales are in "
                         "the bytes; do not pass granularity= or actual_scales=")
    return _check_gguf(actual, x, kind, allow_outliers, show)
