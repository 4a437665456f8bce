"""Compiler-facing helpers on top of the chain classifier: legalisation search and test assertions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..core.formats.format import AnyFormat, format_of
from ..core.formats.policy import Rounding
from .prove import classify_cast_chain
from .verdict import ChainVerdict

__all__ = ["find_equivalent_chains", "assert_chain_equivalent", "candidate_chains", "Cast"]

Cast = tuple  # (src, dst) or (src, dst, modes): one single-step cast an ISA offers


def _offers(hops: Iterable[Sequence[Any]]) -> dict[tuple[AnyFormat, AnyFormat], list[str]]:
    out: dict[tuple[AnyFormat, AnyFormat], list[str]] = {}
    for h in hops:
        if not isinstance(h, (tuple, list)) or len(h) not in (2, 3):
            raise ValueError(f"each offered cast is (src, dst) or (src, dst, modes), got {h!r}")
        a, b = format_of(h[0]), format_of(h[1])
        modes = h[2] if len(h) == 3 else "rne"
        modes = [modes] if isinstance(modes, (str, Rounding)) else list(modes)
        for m in modes:
            r = Rounding.of(m)
            if r is Rounding.STOCHASTIC:
                raise ValueError("stochastic rounding cannot make a chain bit-identical to a cast; leave 'sr' out")
            out.setdefault((a, b), [])
            if r.value not in out[(a, b)]:
                out[(a, b)].append(r.value)
    return out


def find_equivalent_chains(src: Any, dst: Any, hops: Iterable[Sequence[Any]], *, max_len: int = 3,
                           rounding: Any = "rne", overflow: Any = None, ftz: bool = False,
                           first_only: bool = False) -> list[ChainVerdict]:
    """Chains of offered casts that are bit-identical to ``src -> dst`` (under ``rounding`` and
    ``overflow``) for every source value, shortest first.

    ``hops`` lists the single-step casts the hardware has: ``(src, dst)`` (round to nearest even)
    or ``(src, dst, modes)`` with a mode or a list of modes, e.g. ``("fp32", "fp16", ["rne", "rto"])``.
    Intermediate hops may use any offered mode (round-to-odd intermediates make double rounding
    innocuous when the intermediate has two more bits, Boldo & Melquiond); the last hop uses
    ``rounding``. Every returned verdict is a proof; see ``classify_cast_chain``.
    """
    s, d = format_of(src), format_of(dst)
    final = Rounding.of(rounding).value
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be an int >= 1, got {max_len!r:.40}")
    found: list[ChainVerdict] = []
    for path, modes in _chains_of(s, d, _offers(hops), final, max_len):
        overflows = None if overflow is None else [None] * (len(path) - 2) + [overflow]
        v = classify_cast_chain(*path, rounding=modes, overflow=overflows, ftz=ftz)
        if v.equivalent:
            found.append(v)
            if first_only:
                break
    return found


def _chains_of(s: AnyFormat, d: AnyFormat, offered: dict[tuple[AnyFormat, AnyFormat], list[str]], final: str,
               max_len: int) -> list[tuple[list[AnyFormat], list[str]]]:
    """(path, per-hop modes) of every chain of offered casts from s to d, shortest first."""
    paths: list[list[AnyFormat]] = []

    def walk(path: list[AnyFormat]) -> None:
        if len(path) - 1 >= max_len:
            return
        for (a, b) in offered:
            if a == path[-1] and b not in path:
                if b == d:
                    paths.append(path + [b])
                else:
                    walk(path + [b])

    walk([s])
    paths.sort(key=len)
    out = []
    for path in paths:
        if final not in offered[(path[-2], path[-1])]:
            continue
        for modes in _mode_choices([offered[(path[j], path[j + 1])] for j in range(len(path) - 2)]):
            out.append((path, list(modes) + [final]))
    return out


def candidate_chains(src: Any, dst: Any, via: Iterable[Any], *, modes: Iterable[str] = ("rne", "rto"),
                     final: str = "rne", max_len: int = 3) -> list[tuple[list[AnyFormat], list[str]]]:
    """Every chain src -> (some of via) -> dst, assuming every forward cast among them is offered in
    ``modes`` (and ``final`` into dst)."""
    s, d = format_of(src), format_of(dst)
    mids = [format_of(v) for v in via]
    nodes = [s, *mids, d]
    offers = []
    for a in nodes:
        for b in nodes:
            if a != b and b != s and a != d:
                offers.append((a, b, [*modes, final] if b == d else list(modes)))
    return _chains_of(s, d, _offers(offers), Rounding.of(final).value, max_len)


def _mode_choices(per_hop: list[list[str]]) -> list[tuple[str, ...]]:
    """Every combination of the offered modes, same-as-final and round-to-odd first."""
    out: list[tuple[str, ...]] = [()]
    for modes in per_hop:
        ordered = sorted(modes, key=lambda m: (m != "rne", m != "rto", m))
        out = [prev + (m,) for prev in out for m in ordered]
    return out


def assert_chain_equivalent(src: Any, *hops_then_dst: Any, **kw: Any) -> ChainVerdict:
    """Assert that a cast chain equals the single-step cast for every source value.

    On failure the message is the verdict: the smallest witness with every hop's result and the
    region table. Keyword arguments are those of ``classify_cast_chain``.
    """
    v = classify_cast_chain(src, *hops_then_dst, **kw)
    if not v.equivalent:
        raise AssertionError("\n" + str(v))
    return v
