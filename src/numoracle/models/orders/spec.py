"""Order descriptions for the bounds: strings and ``numoracle.orders`` objects normalised to :class:`OrderSpec`.

:func:`spec_from_text` reads the short forms listed in :mod:`numoracle.bounds.expected` (``"sequential"``,
``"pairwise:<B>"``, ``"blocked:<b>"``, ``"splitk:<s>[:pairwise]"``, ``"blockfma:<N>:<F>[:<out>][:round]"``,
``"promoted:<G>:<N>:<F>"``, ``"numpy"``, ``"any"``) ; order objects describe themselves
through their ``spec()`` method (so this module keeps no list of order classes). Any order or text goes through
:func:`numoracle.models.orders.text.parse_order`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from ...core.formats.format import AnyFormat

__all__ = ["OrderSpec", "spec_from_text", "FORMS"]

# ---- orders ------------------------------------------------------------------------------------
_KINDS_ORD = ("any", "sequential", "pairwise", "blocked", "splitk", "blockfma", "promoted", "numpy", "gpureduce")
_ALIASES = {"recursive": "sequential", "seq": "sequential", "tree": "pairwise", "split_k": "splitk",
            "split-k": "splitk", "block_fma": "blockfma", "tensorcore": "blockfma", "numpy_pairwise": "numpy"}
FORMS = ('"any", "sequential", "pairwise", "pairwise:<base>", "blocked:<b>", "splitk:<s>", "splitk:<s>:pairwise", '
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
        if k == "tree":
            return f"tree(depth={self.n})"
        if k == "schedule":   # an order the bounds read through its schedule (CPU kernels' orders)
            return repr(self.params[0])
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


def spec_from_text(text: str) -> OrderSpec:
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
    raise ValueError(f"unknown order {text!r}{hint}; valid forms: {FORMS}, or an order object "
                     "of numoracle.orders")
