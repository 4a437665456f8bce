"""Cast-chain proofs: is a chain of casts the same as the direct cast, for every source value?"""
