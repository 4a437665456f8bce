"""Order descriptions for the bounds: strings and ``numoracle.orders`` objects normalised to :class:`OrderSpec`.

:func:`parse_order` accepts the strings listed in :mod:`numoracle.bounds` (``"sequential"``,
``"pairwise:<B>"``, ``"blocked:<b>"``, ``"splitk:<s>[:pairwise]"``, ``"blockfma:<N>:<F>[:<out>][:round]"``,
``"promoted:<G>:<N>:<F>"``, ``"numpy"``, ``"any"``) or order objects duck-typed by class name and
fields, so that :mod:`numoracle.orders` (the simulator's orders) need not be imported here.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from .formats import AnyFormat, format_of
from .rounding import Rounding

__all__ = ["OrderSpec", "parse_order"]

# ---- orders ------------------------------------------------------------------------------------
_KINDS_ORD = ("any", "sequential", "pairwise", "blocked", "splitk", "blockfma", "promoted", "numpy", "gpureduce")
_ALIASES = {"recursive": "sequential", "seq": "sequential", "tree": "pairwise", "split_k": "splitk",
            "split-k": "splitk", "block_fma": "blockfma", "tensorcore": "blockfma", "numpy_pairwise": "numpy"}
_CLASSES = {"Sequential": "sequential", "Pairwise": "pairwise", "Blocked": "blocked", "SplitK": "splitk",
            "BlockFMA": "blockfma", "Promoted": "promoted", "NumpyPairwise": "numpy", "TiledSplitK": "splitk",
            "GpuReduce": "gpureduce", "ChunkedScan": "gpureduce"}
_FORMS = ('"any", "sequential", "pairwise", "pairwise:<base>", "blocked:<b>", "splitk:<s>", "splitk:<s>:pairwise", '
          '"blockfma:<n>:<frac_bits>[:<out_frac_bits>][:round]", "promoted:<every>:<n>:<frac_bits>", "numpy"')


@dataclass(frozen=True)
class OrderSpec:
    """A normalised order description: what the bound needs from an order object."""

    kind: str
    n: int = 0  # pairwise base, block size b, slices s, block-FMA N, promotion interval, numpy chunk
    inner: OrderSpec | None = None
    outer: OrderSpec | None = None  # blocked outer order / split-K combine order
    outer_acc: AnyFormat | None = None  # blocked outer_acc, split-K combine_acc, promoted outer_acc, numpy carry
    frac_bits: int = 0
    truncate: bool = True
    acc: AnyFormat | None = None  # the accumulator this order fixes (BlockFMA.acc, NumpyPairwise.acc)
    out_frac_bits: int | None = None  # block-FMA result precision (default: its accumulator's)
    out_rounding: str = "rtz"
    tile: int = 1  # split-K slices rounded up to multiples of this many terms (TiledSplitK)
    params: tuple = ()  # GpuReduce: (vec, lanes, warps, blocks, layout)

    def __post_init__(self) -> None:
        if self.kind == "pairwise" and self.n < 1:
            object.__setattr__(self, "n", 1)  # plain pairwise: leaf blocks of one term

    def __str__(self) -> str:
        k, seq = self.kind, OrderSpec("sequential")
        plain = self.outer_acc is None and self.acc is None
        if k in ("any", "sequential"):
            return k
        if k == "pairwise":
            return "pairwise" if self.n <= 1 else f"pairwise:{self.n}"
        if k == "numpy" and plain and not self.n:
            return "numpy"
        if k == "blockfma" and self.acc is None and self.out_rounding == "rtz":
            return (f"blockfma:{self.n}:{self.frac_bits}" + (f":{self.out_frac_bits}" if self.out_frac_bits else "")
                    + ("" if self.truncate else ":round"))
        if k == "blocked" and self.inner == seq and self.outer == seq and plain:
            return f"blocked:{self.n}"
        if k == "gpureduce" and len(self.params) == 1:
            return f"chunkedscan(width={self.params[0]}" + (f", acc={self.acc.name})" if self.acc else ")")
        if k == "gpureduce":
            return "gpureduce(vec={}, lanes={}, warps={}, blocks={}, layout={})".format(*self.params)
        if k == "splitk" and self.inner == seq and self.outer in (seq, OrderSpec("pairwise")) and plain \
                and self.tile == 1:
            return f"splitk:{self.n}" + ("" if self.outer == seq else ":pairwise")
        i = self.inner
        if k == "promoted" and plain and i and i.kind == "blockfma" and i.truncate and i.acc is None \
                and i.out_frac_bits == i.frac_bits and i.out_rounding == "rtz":
            return f"promoted:{self.n}:{i.n}:{i.frac_bits}"
        extra = "".join(f", {nm}={v.name}" for nm, v in (("outer_acc", self.outer_acc), ("acc", self.acc)) if v)
        extra += f", tile={self.tile}" if self.tile > 1 else ""
        if k == "blocked":
            return f"blocked(b={self.n}, inner={self.inner}, outer={self.outer}{extra})"
        if k == "splitk":
            return f"splitk(s={self.n}, inner={self.inner}, combine={self.outer}{extra})"
        if k == "blockfma":
            return (f"blockfma(n={self.n}, frac_bits={self.frac_bits}, truncate={self.truncate}, out_frac_bits="
                    f"{self.out_frac_bits}, out_rounding={self.out_rounding}{extra})")
        if k == "numpy":
            return f"numpy(chunk={self.n or None}{extra})"
        return f"promoted(every={self.n}, inner={self.inner}{extra})"


def _posint(v: Any, what: str) -> int:
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise ValueError(f"order: {what} must be a positive integer, got {v!r}") from None
    if (n != v and not isinstance(v, str)) or n < 1:
        raise ValueError(f"order: {what} must be a positive integer, got {v!r}")
    return n


def _parse_str(text: str) -> OrderSpec:
    parts = [p.strip().lower() for p in text.strip().split(":")]
    k, args = _ALIASES.get(parts[0], parts[0]), parts[1:]
    seq = OrderSpec("sequential")
    try:
        if k in ("any", "sequential") and not args:
            return OrderSpec(k)
        if k == "numpy" and len(args) <= 1:
            return OrderSpec(k, _posint(args[0], "numpy chunk") if args else 0)
        if k == "pairwise" and len(args) <= 1:
            return OrderSpec(k, _posint(args[0], "pairwise base") if args else 1)
        if k == "blocked" and len(args) == 1:
            return OrderSpec(k, _posint(args[0], "block size b"), seq, seq)
        if k == "splitk" and len(args) in (1, 2) and (len(args) == 1 or args[1] in ("pairwise", "sequential")):
            comb = OrderSpec(args[1] if len(args) == 2 else "sequential")
            return OrderSpec(k, _posint(args[0], "slices s"), seq, comb)
        if k == "blockfma" and 2 <= len(args) <= 4:
            rnd = args[-1] in ("round", "truncate")
            rest = args[2:len(args) - rnd]
            if len(rest) <= 1:
                return OrderSpec(k, _posint(args[0], "block n"), frac_bits=_posint(args[1], "frac_bits"),
                                 truncate=not rnd or args[-1] == "truncate",
                                 out_frac_bits=_posint(rest[0], "out_frac_bits") if rest else None)
        if k == "promoted" and len(args) == 3:
            fb = _posint(args[2], "frac_bits")
            inner = OrderSpec("blockfma", _posint(args[1], "block n"), frac_bits=fb, out_frac_bits=fb)
            return OrderSpec(k, _posint(args[0], "promotion interval"), inner)
    except ValueError as e:
        raise ValueError(f"{e} (in order {text!r})") from None
    close = difflib.get_close_matches(k, _KINDS_ORD, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close and close[0] != k else ""
    raise ValueError(f"unknown order {text!r}{hint}; valid forms: {_FORMS}, or an order object "
                     f"({', '.join(_CLASSES)})")


def parse_order(order: Any) -> OrderSpec:
    """A string, an order object (duck-typed by class name and fields) or None (= "any") -> OrderSpec."""
    if order is None:
        return OrderSpec("any")
    if isinstance(order, OrderSpec):
        return order
    if isinstance(order, str):
        return _parse_str(order)
    k = _CLASSES.get(type(order).__name__)
    if k is None:
        raise ValueError(f"unknown order object of class {type(order).__name__!r}; expected one of "
                         f"{', '.join(_CLASSES)} or a string ({_FORMS})")

    def get(*names: str, default: Any = None) -> Any:
        return next((getattr(order, nm) for nm in names if hasattr(order, nm)), default)

    def sub(v: Any) -> OrderSpec:
        return OrderSpec("sequential") if v is None else parse_order(v)

    def fmt(v: Any) -> AnyFormat | None:
        return None if v is None else format_of(v)

    if k == "sequential":
        return OrderSpec(k)
    if k == "pairwise":
        return OrderSpec(k, _posint(get("base", "block", "leaf", default=1) or 1, "Pairwise base"))
    if k == "numpy":
        return OrderSpec(k, _posint(get("chunk"), "NumpyPairwise.chunk") if get("chunk") else 0,
                         outer_acc=fmt(get("carry")), acc=fmt(get("acc")))
    if k == "blocked":
        return OrderSpec(k, _posint(get("b", "block", "size"), "Blocked.b"), sub(get("inner")), sub(get("outer")),
                         fmt(get("outer_acc")))
    if k == "splitk":
        return OrderSpec(k, _posint(get("s", "splits", "slices"), "SplitK.s"), sub(get("inner")),
                         sub(get("combine")), fmt(get("combine_acc")), tile=_posint(get("tile", default=1), "tile"))
    if k == "gpureduce" and hasattr(order, "width"):   # ChunkedScan
        return OrderSpec(k, _posint(get("width"), "ChunkedScan.width"), acc=fmt(get("acc")), params=(order.width,))
    if k == "gpureduce":
        return OrderSpec(k, _posint(get("vec"), "GpuReduce.vec"), params=(
            order.vec, order.lanes, order.warps, order.blocks, order.layout))
    if k == "blockfma":
        fb = get("frac_bits")
        if fb is None and get("extra_bits") is not None:
            fb = 23 + int(order.extra_bits)
        ofb = get("out_frac_bits")
        return OrderSpec(k, _posint(get("n", "block"), "BlockFMA.n"), frac_bits=_posint(fb, "frac_bits"),
                         truncate=bool(get("truncate", default=True)), acc=fmt(get("acc")),
                         out_frac_bits=None if ofb is None else int(ofb),
                         out_rounding=Rounding.of(get("out_rounding", default="rtz")).value)
    return OrderSpec(k, _posint(get("every", "interval"), "Promoted.every"), sub(get("inner")),
                     outer_acc=fmt(get("outer_acc")))


def gpu_reduce_depth(params: tuple, n: int) -> int:
    """Roundings on the deepest leaf's path of ``GpuReduce(*params)`` (or ``ChunkedScan(width)``) over n terms.

    Per accumulator at most ceil(n / (vec T)) + 1 terms (T threads; +1: the tail or the unrolled
    layout's uneven share), then vec - 1 additions of the accumulators, log2(lanes * warps) tree
    levels, and with blocks > 1 at most ceil(blocks / G) partials per thread (G = lanes * warps) and
    log2 G levels again. A tree of n leaves has depth <= n - 1 (additions of the +0 starts are exact).
    """
    if len(params) == 1:   # ChunkedScan(width): per chunk, the carry addition and log2(width) tree levels
        w = params[0]
        return min(-(-n // w) * (1 + w.bit_length() - 1), max(n - 1, 0))
    vec, lanes, warps, blocks, _ = params
    threads = lanes * warps * blocks
    g = lanes * warps
    h = -(-n // (vec * threads)) + 1 + (vec - 1) + (g.bit_length() - 1)
    if blocks > 1:
        h += -(-blocks // g) + (g.bit_length() - 1)
    return min(h, max(n - 1, 0))
