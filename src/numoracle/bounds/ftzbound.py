"""Flush-to-zero in the error bounds: the absolute error sites an FTZ accumulator adds.

With FTZ a rounding whose result would be subnormal gives zero instead: the operation errs by less
than the smallest normal value of its format, absolutely, and not at all relatively. In the
standard model every operation is ``fl(x) = x (1 + d) + e`` with ``|e| < min_normal`` (``e d = 0``),
so the bound gains ``sum |e_k|`` times the largest amplification of a later rounding, which is the
``sites x eta x amplification`` form the bounds already use for gradual underflow. Per output
element we count, generously, every operation that can round: the K - 1 additions, the K products
(an exact product can still be subnormal and be flushed) and up to K conversions between the
order's accumulators; the output rounding adds one site of the output format.

Block-FMA orders (``blockfma``, ``promoted``) align their terms to a shared exponent inside the
block, where FTZ has no single meaning: ``ftz=True`` is refused for them. DAZ (subnormal *inputs*
read as zero) is not modelled; ``daz`` is refused by the checks.
"""

from __future__ import annotations

from fractions import Fraction

from ..core.formats.format import AnyFormat
from ..models.orders.spec import OrderSpec

__all__ = ["ftz_sites", "FTZ_LABEL"]

FTZ_LABEL = "results below min normal flushed to zero (FTZ)"


def _formats(o: OrderSpec | None) -> list[AnyFormat]:
    if o is None:
        return []
    return [f for f in (o.acc, o.outer_acc) if f is not None] + _formats(o.inner) + _formats(o.outer)


def _kinds(o: OrderSpec | None) -> set[str]:
    return set() if o is None else {o.kind} | _kinds(o.inner) | _kinds(o.outer)


def ftz_sites(op: str, K: int, acc: AnyFormat, o: OrderSpec, out: AnyFormat | None) -> list[tuple[str, int, Fraction]]:
    """(label, sites per output element, largest absolute error per site) of an FTZ evaluation."""
    block = _kinds(o) & {"blockfma", "promoted"}
    if block:
        raise ValueError(f"ftz=True is not modelled for {sorted(block)[0]} orders (terms are aligned inside the "
                         "block, where flushing has no single meaning); check with ftz=False, or compare bit for "
                         "bit with numoracle.simulate(..., ftz=True)")
    fmts = [acc, *_formats(o)]
    if any(f.is_integer for f in fmts):
        raise ValueError(f"ftz=True flushes subnormal float results; the accumulator {acc.name} is an integer "
                         "format: drop ftz")
    n_ops = (K - 1) + (K if op != "sum" else 0) + K
    sites = [(FTZ_LABEL, n_ops, max(f.min_normal for f in fmts))]
    if out is not None and not out.is_integer:
        sites.append(("the output flushed to zero (FTZ)", 1, out.min_normal))
    return sites
