"""ChainSpec: a resolved cast chain (formats, one policy per hop) and the hops it runs, shared by the proof,
its pieces and its verdict."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..core.engine.convert import cast_codes
from ..core.formats.format import AnyFormat, format_of
from ..core.formats.policy import Policy, Rounding, resolve_policy

__all__ = ["ChainSpec", "chain_spec"]

_TABLE_BITS = 16         # hops out of formats this narrow are table lookups (_hop)


def _hop(codes: np.ndarray, a: AnyFormat, b: AnyFormat, pol: Policy) -> np.ndarray:
    """``cast_codes`` of one hop; out of a format of at most _TABLE_BITS bits, a lookup in the table of
    every code's result (made once by the engine: a proof and a chain table ask such a hop many times)."""
    if a.bits > _TABLE_BITS:
        return cast_codes(codes, a, b, pol)
    idx = np.asarray(codes).astype(np.intp) & ((1 << a.bits) - 1)
    return _hop_table(a, b, pol)[idx]


# at most 65,536 codes each (1-4 bytes a code): at most 256 MB if every entry were a 16-bit source with a
# 32-bit destination; `numoracle tables` fills it with a process peak of about 150 MB
@functools.lru_cache(maxsize=1024)
def _hop_table(a: AnyFormat, b: AnyFormat, pol: Policy) -> np.ndarray:
    t = cast_codes(np.arange(1 << a.bits, dtype=np.uint64).astype(a.code_dtype), a, b, pol)
    t.flags.writeable = False
    return t


class ChainSpec:
    """A resolved chain: formats[0] -> formats[1] -> ... -> formats[-1], one Policy per hop."""

    def __init__(self, formats: list[AnyFormat], policies: list[Policy], direct: Policy):
        self.formats, self.policies, self.direct = formats, policies, direct

    @property
    def src(self) -> AnyFormat:
        return self.formats[0]

    @property
    def dst(self) -> AnyFormat:
        return self.formats[-1]

    def prefix(self, codes: np.ndarray, upto: int) -> np.ndarray:
        """Codes after the first ``upto`` hops (0: the source codes themselves)."""
        c = codes
        for j in range(upto):
            c = _hop(c, self.formats[j], self.formats[j + 1], self.policies[j])
        return c

    def hops(self, codes: np.ndarray) -> list[np.ndarray]:
        """Codes after each hop, in order."""
        out, c = [], codes
        for j in range(len(self.policies)):
            c = _hop(c, self.formats[j], self.formats[j + 1], self.policies[j])
            out.append(c)
        return out

    def chain(self, codes: np.ndarray) -> np.ndarray:
        return self.prefix(codes, len(self.policies))

    def direct_cast(self, codes: np.ndarray) -> np.ndarray:
        return _hop(codes, self.src, self.dst, self.direct)

    def label(self) -> str:
        parts = [self.formats[0].name]
        for f, p in zip(self.formats[1:], self.policies):
            parts.append(f"-({p.rounding.value})-> {f.name}")
        return " ".join(parts)


def _per_hop(value: Any, n: int, what: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{what} has {len(value)} entries but the chain has {n} hops; give one per hop "
                             "(or a single value for all)")
        return list(value)
    return [value] * n


def chain_spec(src: Any, *hops_then_dst: Any, rounding: Any = "rne", overflow: Any = None,
               ftz: bool = False) -> ChainSpec:
    """Resolve formats and per-hop policies (the direct cast takes the last hop's)."""
    if not hops_then_dst:
        raise ValueError("a cast chain needs at least two formats: the source and the destination "
                         "(and usually intermediates), e.g. classify_cast_chain(INT32, FP32, FP16)")
    formats = [format_of(src)] + [format_of(f) for f in hops_then_dst]
    n = len(formats) - 1
    rs, os_ = _per_hop(rounding, n, "rounding"), _per_hop(overflow, n, "overflow")
    for j, r in enumerate(rs):
        if Rounding.of(r) is Rounding.STOCHASTIC:
            raise ValueError(f"hop {j + 1} uses stochastic rounding, whose result depends on random bits, not on "
                             "the value alone, so there is no single answer to compare; classify the chain for "
                             "each deterministic mode instead, or compare fixed bits with numoracle.cast")
    pols = []
    for j in range(n):
        try:
            pols.append(resolve_policy(formats[j + 1], rs[j], os_[j], ftz=ftz and not formats[j + 1].is_integer))
        except ValueError as e:
            raise ValueError(f"hop {j + 1} ({formats[j].name} -> {formats[j + 1].name}): {e}") from None
    return ChainSpec(formats, pols, pols[-1])
