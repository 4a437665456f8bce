"""Cast-chain proofs: is a chain of casts the same as the direct cast, for every source value?"""

from ..core.lazy import namespace

API = {"ChainVerdict": ".verdict", "find_equivalent_chains": ".search"}

__all__, __getattr__, __dir__ = namespace(__name__, API)
