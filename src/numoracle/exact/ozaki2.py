"""exact_matmul's second engine: Ozaki scheme II, the integer product modulo primes, rebuilt by the CRT.

Ozaki, Uchino & Imamura, "Ozaki Scheme II: A GEMM-oriented emulation of floating-point matrix
multiplication using an integer modular technique" (2024-2025). Row i of A is scaled to integers,
Ah_i = rint(A_i 2^(pA - 1 - E_i)) (|Ah| <= 2^(pA - 1); the scaling is exact for spans <= ozaki.MAX_SPAN,
the remainder dA = A_i 2^(pA - 1 - E_i) - Ah_i too, |dA| <= 1/2), B's columns likewise with pB. The
integer product Ah @ Bh is computed modulo odd primes p with K ((p - 1)/2)^2 <= 2^53: the balanced
residues' float64 GEMM is exact (every partial sum an integer <= 2^53), one GEMM a prime whatever the
data's exponent range, against the split's quadratic count of slice pairs (ozaki.py); where the process has an
exact int8 GEMM (intgemm.py: torch's, where torch is loaded), also modulo odd primes below 2^8, whose residues'
int8 GEMM is exact in int32 and costs a few hundredths of a float64 one (``choose`` weighs both). Garner's
algorithm in balanced digits gives the exact integer (primes enough that their product exceeds twice
a bound on |Ah @ Bh|), its digits times the primes' partial products go into int64 limbs (exactsum.py).

With pA, pB covering every line's bits (span + 1) the remainders are 0 and the result is exact. Else
(a rounded result, P bits a side: see ``plan``) the remainders' part dA tB + Ah dB is two plain float64
GEMMs, within a rigorous bound of its exact value (``tail_error``, from the rows' and columns' sums and
maxima), and the entries that this bound cannot change are rounded at once (ozakitail.round_bracketed);
the others are computed exactly (one by one when few, else by an exact product of their rows and columns).
``choose`` takes this engine where its GEMMs are fewer than the split's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from ..core import jit
from . import gemmbound, intgemm, ozaki, ozakitail
from .exactsum import L, limbs_to_fractions, round_limbs

_MARGIN = 8  # the fewest bits of cancellation below 2^(E_i + E_j) that a rounded plan's bracket decides (see plan)
_EXTRA = 2  # primes beyond the fewest that a rounded plan weighs against the undecided entries they save
_EXTRA_SMALL = 8  # the same for small primes (about the bits of two large ones)
_SAMPLE = (8, 64)  # rows of A and columns of B whose plain product estimates how far the entries cancel
_ENTRY = {True: 128, False: 2048}  # an undecided entry's exact dot product in GEMM entries (float32 compiled, else)
_MAX_PRIMES = 24  # more primes than this: the split (ozaki.py) is cheaper
_INT8_PIECE = 512  # the remainder GEMMs' pieces with small primes (see _piece)
_SMALL_PRIMES = 32  # primes below 2^8 (int8 residues, intgemm.py): 251 down to 83, about 234 bits
INT8_COST = 0.15  # one small prime's cost in float64 GEMMs: its int8 GEMM (0.06) and its share of the residue
# pass and Garner (measured, 256 x 4096 x 256; an estimate: only the time depends on it)
_BYTES = 1 << 30  # the most memory the engine holds at once (its outputs do not go in blocks); beyond: the split
_CHUNK_BYTES = 1 << 23
_MIN_CHUNK = 512
OVERHEAD = 0.6  # GEMMs of margin for its other passes (residues, Garner, two roundings) over the split's (an estimate)


def _kernels():
    from .kernels import crt
    return crt


@lru_cache(maxsize=8)
def primes_below(K: int, count: int = _MAX_PRIMES) -> tuple[int, ...]:
    """The ``count`` largest odd primes p < 2^22 with K ((p - 1) / 2)^2 <= 2^53, largest first (below 2^22 the
    residue and Garner steps stay below 2^51: see ``residues``, ``garner_limbs``; K >= 4096 is not capped)."""
    h = min(math.isqrt((1 << 53) // max(K, 1)), (1 << 21) - 1)  # (p - 1) / 2 <= h
    out, p = [], 2 * h + 1
    while len(out) < count and p > 2:
        if all(p % d for d in range(3, math.isqrt(p) + 1, 2)):
            out.append(p)
        p -= 2
    return tuple(out)


@lru_cache(maxsize=1)
def small_primes() -> tuple[int, ...]:
    """The _SMALL_PRIMES largest odd primes below 2^8, largest first: balanced residues |r| <= 125 fit int8, and a
    GEMM of at most intgemm.MAX_K columns sums them exactly in int32 (intgemm.py); over chunks of K their sums
    go into float64, exact while K 125^2 <= 2^53."""
    out = [p for p in range(255, 2, -2) if all(p % d for d in range(3, math.isqrt(p) + 1, 2))]
    return tuple(out[:_SMALL_PRIMES])


def _primes(K: int, int8: bool) -> tuple[int, ...]:
    return small_primes() if int8 else primes_below(K)


@dataclass(frozen=True)
class Plan:
    """Bits pA / pB of A's rows and B's columns as integers, and the primes (one GEMM each: float64, or with
    ``int8`` an int8 GEMM of primes below 2^8, intgemm.py)."""

    pA: int
    pB: int
    primes: tuple[int, ...]
    tails: int  # float64 GEMMs of the remainders (sides whose lines keep bits below the integers)
    undecided: float = 0.0  # the predicted cost of the entries its bracket leaves, in GEMMs (an estimate)
    int8: bool = False

    @property
    def gemms(self) -> float:
        """Its cost in float64 GEMMs (a small prime counts INT8_COST)."""
        return len(self.primes) * (INT8_COST if self.int8 else 1) + self.tails


def _sum_ratio(X: np.ndarray, E: np.ndarray, axis: int) -> float:
    """An upper bound on max over lines of sum |x| / 2^E (>= 0): the float64 sums (K terms, rounded to
    nearest) times 1 + (K + 8) 2^-52, scaled by 2^-E (exact: a sum of a nonzero line is >= 2^(E - 1)). A sum
    that overflows is taken again from the values scaled first (each |x| 2^-E <= 1 exact or underflowing by
    < 2^-1075: plus K 2^-1074)."""
    K = X.shape[axis]
    kern = jit.kernel_for(ozaki.Pass("residues", X.dtype, bool(X.flags.c_contiguous)), _kernels)
    s = kern.abs_sums(X, axis) if kern is not None else np.abs(X).sum(axis=axis, dtype=np.float64)
    if not np.isfinite(s).all():
        k = (-E).astype(np.int32).reshape((-1, 1) if axis == 1 else (1, -1))
        s = np.ldexp(np.abs(X.astype(np.float64, copy=False)), k).sum(axis=axis) + K * 2.0**-1074
    else:
        s = np.ldexp(s, (-E).astype(np.int32))
    return float(s.max(initial=0.0)) * (1 + (K + 8) * 2.0**-52)


def _head_bound(pA: int, pB: int, rA: float, rB: float, K: int) -> int:
    """>= max |(Ah @ Bh)_ij| (an integer, in exact arithmetic): min(sum |Ah_i| max |Bh_j|, max |Ah_i| sum |Bh_j|)
    with sum |Ah_i| <= 2^(pA - 1) rA + K/2 (|rint(t)| <= |t| + 1/2) and max |Bh_j| <= 2^(pB - 1)."""
    (na, da), (nb, db) = rA.as_integer_ratio(), rB.as_integer_ratio()  # exact: r = n / d
    a, b = 1 << (pA - 1), 1 << (pB - 1)  # the same bound in integers: (a n / d + K / 2) b = (2 a n + K d) b / (2 d)
    return min(-(-(2 * a * na + K * da) * b // (2 * da)), -(-a * (2 * b * nb + K * db) // (2 * db)))


def _count(bound: int, primes: tuple[int, ...]) -> int:
    """The fewest leading primes whose product exceeds 2 bound + 1 (len(primes) + 1 if none do)."""
    need, prod = 2 * bound + 1, 1
    for n, p in enumerate(primes, 1):
        prod *= p
        if prod > need:
            return n
    return len(primes) + 1


class Sample:
    """What the plans of both kinds of primes read of A and B, taken once for a product: the bounds on the lines'
    sums of |x| over 2^E (``_sum_ratio``) and how far the entries cancel (``_cancellation``, where a plan needs it)."""

    def __init__(self, A: np.ndarray, B: np.ndarray, EA: np.ndarray, EB: np.ndarray) -> None:
        self._args = (A, B, EA, EB)

    @cached_property
    def ratios(self) -> tuple[float, float]:
        A, B, EA, EB = self._args
        return _sum_ratio(A, EA, 1), _sum_ratio(B, EB, 0)

    @cached_property
    def d(self) -> np.ndarray:
        return _cancellation(*self._args)


def plan(A: np.ndarray, B: np.ndarray, EA: np.ndarray, sA: np.ndarray, EB: np.ndarray, sB: np.ndarray,
         exact: bool, int8: bool = False, sample: Sample | None = None) -> Plan | None:
    """The bits and primes (``int8``: the small ones) for A @ B (None: more primes than there are, or an empty
    product).

    Exact: every line's bits (span + 1). Rounded: the remainders' products are float64 GEMMs in pieces of K
    (``_piece`` columns) whose error is below F 2^-53 (rA + rB) 2^(P - 2) units, F = kc + nc (see tail_error), rA
    the largest row sum of |A| over its row's 2^E; against the scale 2^(2P - 2) of 2^(E_i + E_j) that is
    2^-(54 + m) for P = log2 F + log2(rA + rB) + 1 + m, so entries within about 2^m of that scale round at once.
    For each count of primes from the fewest that hold P at m = _MARGIN to _EXTRA (_EXTRA_SMALL) more, P grows
    while they hold the product; the plan taken has the least GEMMs plus the predicted cost of its undecided
    entries (``_leave``: more primes where the entries cancel far below their scale). ``sample``: A's and B's
    statistics when another plan has taken them. Only the time depends on the choice."""
    M, K = A.shape
    if K == 0 or not A.size or not B.size:
        return None
    fullA, fullB = int(sA.max(initial=0)) + 1, int(sB.max(initial=0)) + 1
    sample = Sample(A, B, EA, EB) if sample is None else sample
    rA, rB = sample.ratios
    primes = _primes(K, int8)
    base = _error_bits(K, int8) + math.ceil(math.log2(max(rA + rB, 1.0))) + 1
    pA, pB = (fullA, fullB) if exact else (min(base + _MARGIN, fullA), min(base + _MARGIN, fullB))
    if pA + pB > 2100:
        return None
    n = _count(_head_bound(pA, pB, rA, rB, K), primes)
    if n > len(primes):
        return None
    if exact:
        return Plan(pA, pB, primes[:n], 0, int8=int8)
    best = None
    for m in range(n, min(n + (_EXTRA_SMALL if int8 else _EXTRA), len(primes)) + 1):
        while pA < fullA or pB < fullB:  # the same m primes hold more bits
            qA, qB = min(pA + 1, fullA), min(pB + 1, fullB)
            if _count(_head_bound(qA, qB, rA, rB, K), primes) > m:
                break
            pA, pB = qA, qB
        tails = (pA < fullA) + (pB < fullB)
        und = 0.0
        if tails:
            und = _leave(sample.d, min(pA, pB) - base) * _ENTRY[A.dtype == np.float32 and B.dtype == np.float32]
        cand = Plan(pA, pB, primes[:m], tails, und, int8)
        if best is None or cand.gemms + cand.undecided < best.gemms + best.undecided:
            best = cand
        if not tails:
            break
    return best


def _cancellation(A: np.ndarray, B: np.ndarray, EA: np.ndarray, EB: np.ndarray) -> np.ndarray:
    """log2(2^(E_i + E_j) / |C_ij|) on the entries of _SAMPLE evenly spaced rows and columns (inf where C_ij is
    0), C from a plain float64 product of them (within about K 2^-53 of the scale: an estimate for ``plan``)."""
    M, N = A.shape[0], B.shape[1]
    rows = np.unique(np.linspace(0, M - 1, min(M, _SAMPLE[0])).astype(np.int64))
    cols = np.unique(np.linspace(0, N - 1, min(N, _SAMPLE[1])).astype(np.int64))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        C = np.abs(A[rows].astype(np.float64) @ B[:, cols].astype(np.float64))
        d = (EA[rows][:, None] + EB[cols][None, :]) - np.log2(C)
    return np.where(np.isfinite(d), d, np.inf)


def _leave(d: np.ndarray, margin: int) -> float:
    """The share of entries that a bracket of 2^-(54 + margin) of their scale leaves undecided, predicted from the
    entries' cancellation d (``_cancellation``): an entry 2^-d below its scale has a last bit of 2^-(52 + d), so
    about 2^(d - margin - 1) of such entries lie within the bracket of a rounding boundary."""
    if not d.size:
        return 0.0
    with np.errstate(over="ignore"):
        return float(np.minimum(1.0, np.exp2(d - margin - 1.0)).mean())


def choose(A: np.ndarray, B: np.ndarray, EA, sA, EB, sB, exact: bool) -> Plan | None:
    """This engine's cheapest plan (float64 primes, or small primes where the int8 GEMM runs: intgemm.py) where it
    costs less than the split (ozaki.planned_gemms) and its residue pass runs compiled, else None (the numpy pass
    is the reference: tests/exact/test_ozaki2.py forces it)."""
    if jit.kernel_for(ozaki.Pass("residues", A.dtype, bool(A.flags.c_contiguous)), _kernels) is None:
        return None  # numpy's residue passes cost more than the GEMMs saved (ill-conditioned set: 30x against 22x)
    M, K = A.shape
    N = B.shape[1]
    split = ozaki.planned_gemms(sA, sB, K, M, N, exact)
    best, sample = None, Sample(A, B, EA, EB)
    for int8 in _kinds():
        if least_gemms(sA, sB, K, exact, int8) + OVERHEAD >= split:  # without the row sums' passes
            continue
        p = plan(A, B, EA, sA, EB, sB, exact, int8, sample)
        if p is None or p.gemms + p.undecided + OVERHEAD >= split:
            continue
        n = len(p.primes)
        kc = _chunk(n, M, N, K, int8)
        planes = (n if int8 else 8 * n) * (M + N) * kc  # then integers and remainders, products and limbs
        held = planes + 8 * (3 * (M + N) * kc + (2 * n + 4 + limb_count(p.primes)) * M * N)
        if held <= _BYTES and (best is None or p.gemms + p.undecided < best.gemms + best.undecided):
            best = p
    return best


def _piece(K: int, int8: bool) -> int:
    """Columns of the remainder GEMMs' pieces: gemmbound.chunk (error about (kc + K / kc) u, the least); with
    small primes _INT8_PIECE (whole GEMMs of a residue chunk: faster, and the bits lost cost a small prime)."""
    return min(max(gemmbound.chunk(K), _INT8_PIECE), max(K, 1)) if int8 else gemmbound.chunk(K)


def _error_bits(K: int, int8: bool = False) -> int:
    """ceil(log2(kc + nc)) for the remainder GEMMs' pieces at K (at least 1): their error in units of 2^-53."""
    kc = _piece(K, int8)
    return max(kc + -(-K // kc) - 1, 1).bit_length()


def least_gemms(sA: np.ndarray, sB: np.ndarray, K: int, exact: bool, int8: bool = False) -> float:
    """A lower bound on ``plan(...).gemms`` from the spans alone: plan's bits are at least these (its row sums
    over 2^E are at least 1/2 on nonzero lines) and grow; a side without remainders has all its bits."""
    fullA, fullB = int(sA.max(initial=0)) + 1, int(sB.max(initial=0)) + 1
    P = _error_bits(K, int8) + 1 + _MARGIN
    pA, pB = (fullA, fullB) if exact else (min(P, fullA), min(P, fullB))
    primes = _primes(K, int8)

    def gemms(qA: int, qB: int) -> float:
        n = _count(_head_bound(qA, qB, 0.5, 0.5, 0), primes) if qA + qB <= 2100 else len(primes) + 1
        return n * (INT8_COST if int8 else 1) + (qA < fullA) + (qB < fullB)
    return min(gemms(qA, qB) for qA in {pA, fullA} for qB in {pB, fullB})


def fewest_gemms(sA: np.ndarray, sB: np.ndarray, K: int, exact: bool) -> float:
    """least_gemms over the primes that run here (the small ones where the int8 GEMM does: intgemm.py)."""
    return min(least_gemms(sA, sB, K, exact, int8) for int8 in _kinds())


def _kinds() -> tuple[bool, ...]:
    """The kinds of primes that run here (int8: the small ones, where the int8 GEMM runs)."""
    return (False, True) if intgemm.matmul() is not None else (False,)


# ---- residues ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Residues:
    """One operand's balanced residues (a float64 plane a prime, shaped like the operand), per line the
    statistics of the integers h and remainders d: sum |h|, max |h|, sum |d|, max |d| (4, lines), h, d = t - h
    and (``want_t``; else None) the scaled operand t, all exact."""

    planes: np.ndarray
    stats: np.ndarray
    h: np.ndarray
    t: np.ndarray | None
    d: np.ndarray | None


@lru_cache(maxsize=16)
def pow2_table(primes: tuple[int, ...], top: int) -> np.ndarray:
    """T[j, z] = 2^z mod primes[j] for z < top (float64; exact). Read-only (cached)."""
    T = np.empty((len(primes), top))
    for j, p in enumerate(primes):
        v = 1
        for z in range(top):
            T[j, z] = v
            v = v * 2 % p
    T.flags.writeable = False
    return T


def balanced(x: np.ndarray, p: float) -> np.ndarray:
    """x mod p in [-(p - 1)/2, (p - 1)/2], for float64 integers |x| < 2^51 and odd p < 2^22 (exact).

    q = rint(x / p) is within 1 of the nearest quotient, so r = x - q p (exact: integers < 2^52) has
    |r| < 3p/2; r / p is never a half-integer (p odd), and its rounding error is far below its
    distance 1/(2p) to one, so the second step's quotient is the nearest: |r| <= (p - 1)/2."""
    r = x - np.rint(x * (1.0 / p)) * p
    r -= np.rint(r * (1.0 / p)) * p
    return r


def residues(X: np.ndarray, E: np.ndarray, bits: int, axis: int, primes: tuple[int, ...],
             want_t: bool = False, slot: str | None = None, int8: bool = False) -> Residues:
    """The integers h = rint(t), t = X 2^(bits - 1 - E) per line (rows: axis=1), modulo each prime, and their stats
    (``int8``: the planes as int8, for primes below 2^8).

    h = m 2^z with z = max(e - 53, 0) (frexp's e): m is an integer below 2^53 (exact: h's bits lie at
    2^z and above), m = m1 2^27 + m0 with |m1| < 2^26, |m0| < 2^27 (exact truncation), and
    h mod p = m1 (2^(z+27) mod p) + m0 (2^z mod p): each term < 2^49 and their sum < 2^50, exact.
    The compiled twin (exact/kernels/crt.py) gives the same planes, h, d and t; its sums in the stats
    may differ in the last bits (another order), which the bounds that read them cover; with ``slot`` its arrays
    are reused by its next call for that slot (``product``'s chunks: each is read before the next)."""
    shape = (-1, 1) if axis == 1 else (1, -1)
    k = (bits - 1 - E).astype(np.int64)
    top = max(bits - 53, 0) + 28
    T = pow2_table(primes, top)
    step = ozaki.Pass("residues", X.dtype, bool(X.flags.c_contiguous))
    kern = jit.kernel_for(step, _kernels)
    if kern is not None:
        planes, t, d, h, stats = kern.residues(X, k, axis, primes, T, want_t, bits, slot, int8)
        return Residues(planes, stats, h, t, d)
    t = np.ldexp(X.astype(np.float64, copy=False), k.reshape(shape).astype(np.int32))  # exact (see ozaki._digits)
    h = np.rint(t)
    d = t - h  # exact: t's bits below the unit (or t when h = 0)
    ah, ad = np.abs(h), np.abs(d)
    stats = np.array([ah.sum(axis=axis), ah.max(axis=axis, initial=0.0), ad.sum(axis=axis),
                      ad.max(axis=axis, initial=0.0)])
    z = np.maximum(np.frexp(h)[1] - 53, 0)
    m = np.ldexp(h, -z)
    m1 = np.trunc(m * 2.0**-27)
    m0 = m - m1 * 2.0**27
    planes = np.array([balanced(m1 * T[j][z + 27] + m0 * T[j][z], float(p)) for j, p in enumerate(primes)])
    if int8:
        planes = planes.astype(np.int8)  # |r| <= (p - 1)/2 <= 125: exact
    return Residues(planes, stats, h, t if want_t else None, d)


# ---- reconstruction ---------------------------------------------------------------------------------
def garner_limbs(C: list[np.ndarray] | np.ndarray, primes: tuple[int, ...], nl: int, shift: int) -> np.ndarray:
    """2^shift x for the integers x with |x| <= (prod p - 1)/2 and x = C[j] mod primes[j] (C: float64 integers
    with |C| <= 2^53, or int32), as int64 limbs (nl, n).

    Balanced mixed-radix digits (Garner): x = sum_j v_j W_j, W_j = p_0 ... p_(j-1), |v_j| <= (p_j - 1)/2,
    v_j = (C_j - sum_(i<j) v_i W_i) / W_j mod p_j, in float64 integers that stay below 2^51 (``balanced``:
    exact): C = c1 2^26 + c0 (exact truncation) reduces to c1 (2^26 mod p) + c0 < 2^49; the sum of at most
    _MAX_PRIMES terms v_i (W_i mod p_j) < 2^47 (of _SMALL_PRIMES small ones, < 2^20); the product by W_j's
    inverse < 2^44. The limbs are sum_j v_j w_jk with w_jk the 32-bit limbs of 2^shift W_j: |v_j w_jk| < 2^53,
    their sum < 2^58."""
    n = len(primes)
    kern = jit.kernel_for(ozaki.Pass("residues", np.dtype(np.float64)), _kernels) if n else None
    if kern is not None:  # the compiled twin: the same steps, one pass a prime
        limbs = np.zeros((nl, np.asarray(C[0]).size), np.int64)
        W = (1 << shift) * math.prod(primes)
        if W >> (L * nl - 2):
            raise AssertionError("internal: too few limbs for the CRT")
        Ca = C if isinstance(C, np.ndarray) else np.array([np.asarray(c, np.float64).ravel() for c in C])
        kern.garner(Ca, tuple(primes), limbs, shift)
        return limbs
    v: list[np.ndarray] = []
    for j, p in enumerate(primes):
        c = np.asarray(C[j], np.float64)
        c1 = np.trunc(c * 2.0**-26)
        acc = balanced(c1 * float((1 << 26) % p) + (c - c1 * 2.0**26), float(p))
        if j:
            W, s = 1, np.zeros_like(acc)
            for i in range(j):
                s += v[i] * float(W % p)
                W *= primes[i]
            acc = balanced(balanced(acc - s, float(p)) * float(pow(W % p, -1, p)), float(p))
        v.append(acc)
    limbs = np.zeros((nl, v[0].size if n else 0), np.int64)
    W = 1 << shift
    for j in range(n):
        vj = v[j].astype(np.int64)
        for k in range(nl):
            w = (W >> (L * k)) & ((1 << L) - 1)
            if w:
                limbs[k] += vj * w
        if (W * primes[j]) >> (L * nl - 2):
            raise AssertionError("internal: too few limbs for the CRT")
        W *= primes[j]
    return limbs


def limb_count(primes: tuple[int, ...]) -> int:
    return (sum(math.log2(p) for p in primes).__ceil__() + 1) // L + 4


# ---- the product --------------------------------------------------------------------------------------
def product(A: np.ndarray, B: np.ndarray, EA, sA, EB, sB, exact: bool, pl: Plan) -> tuple:
    """Exact A @ B (finite, spans <= MAX_SPAN) by the plan ``pl``: (RNE, RO, Fractions or None), raveled.

    Entry (i, j) = 2^(fA_i + fB_j) (H + T) with H = (Ah Bh)_ij (exact, by the primes) and T =
    (dA tB + Ah dB)_ij (tB = Bh + dB, B's scaled columns). T's two float64 GEMMs G1, G2 are within
    tail_error of their exact values; with 2^s G rounded to integers g (|g| <= 2^53, error <= 1/2) the
    limbs hold m = 2^sh H + 2^(sh - s) (g1 + g2) in units 2^(base - sh), and the exact entry lies
    within R = 2^sh (err1 + err2 + 2^-s) of m: rounded at once where R cannot matter
    (ozakitail.round_bracketed), else exactly (``undecided``)."""
    M, K = A.shape
    N = B.shape[1]
    kern = ozaki.compiled("split", A)
    n = len(pl.primes)
    C = np.empty((n, M, N), np.int32 if pl.int8 and K <= intgemm.MAX_K else np.float64)  # int32: exact (intgemm.py)
    G = np.zeros((2, M, N))
    tmp = np.empty((M, N))
    sta, stb = np.zeros((4, M)), np.zeros((4, N))
    kc = _chunk(n, M, N, K, pl.int8)
    mm = intgemm.matmul() if pl.int8 else None
    if pl.int8 and mm is None:
        raise AssertionError("internal: a plan of small primes without the int8 GEMM")
    pc = min(_piece(K, pl.int8), kc)  # the remainder GEMMs' pieces: at most pc columns, ``pieces`` of them
    pieces = 0
    for k0 in range(0, K, kc):  # partial sums of the exact GEMMs stay exact (the bound is over all K)
        k1 = min(K, k0 + kc)
        ra = residues(np.ascontiguousarray(A[:, k0:k1]), EA, pl.pA, 1, pl.primes, slot="crtA", int8=pl.int8)
        rb = residues(B[k0:k1], EB, pl.pB, 0, pl.primes, want_t=True, slot="crtB", int8=pl.int8)
        for j in range(n):
            if mm is None:
                _gemm_add(C[j], ra.planes[j], rb.planes[j], k0 == 0, tmp)
            elif k0 == 0:  # int32 sums, exact (intgemm.MAX_K); over all of K in int32 or float64, exact
                C[j] = mm(ra.planes[j], rb.planes[j])
            else:
                C[j] += mm(ra.planes[j], rb.planes[j])
        for g, x, y, any_d in ((G[0], ra.d, rb.t, ra.stats[2].any()), (G[1], ra.h, rb.d, rb.stats[2].any())):
            if any_d:  # each piece's GEMM, then its result added in order (gemmbound.py)
                for j0 in range(0, k1 - k0, pc):
                    _gemm_add(g, x[:, j0:j0 + pc], y[j0:j0 + pc], False, tmp)
        pieces += -(-(k1 - k0) // pc)
        merge_stats(sta, ra.stats)
        merge_stats(stb, rb.stats)
    C = C.reshape(n, M * N)  # (a list of the primes' results is read the same way)
    base = ((EA - pl.pA + 1)[:, None] + (EB - pl.pB + 1)[None, :]).ravel().astype(np.int64)
    rnd = kern.round_limbs if kern is not None else round_limbs
    dA, dB = sta[2].any(), stb[2].any()
    if not (dA or dB):  # every bit in the integers: the product is exact
        limbs = garner_limbs(C, pl.primes, limb_count(pl.primes), 0)
        fr = limbs_to_fractions(limbs, base) if exact else None
        rne, ro = rnd(limbs, base)
        return rne, ro, fr
    if exact:
        raise AssertionError("internal: an exact plan left remainders")
    G = ([G[0]] if dA else []) + ([G[1]] if dB else [])
    err = tail_error(sta, stb, K, dA, dB, pc, pieces)
    top = max(float(np.abs(g).max(initial=0.0)) for g in G)
    s = 52 - (int(np.frexp(top)[1]) if top > 0 else 0)  # 2^s |G| < 2^52: rint(2^s G) fits 53 bits
    sh = max(s, 0)
    limbs = garner_limbs(C, pl.primes, limb_count(pl.primes) + (sh + L - 1) // L + 1, sh)
    rows, cols = np.arange(M), np.arange(N)
    for g in G:  # exact: integers below 2^53, at 2^(sh - s) >= 1
        ozaki._add(limbs.reshape(-1, M, N), np.rint(np.ldexp(g, s)), sh - s, rows, cols, kern)
    with np.errstate(over="ignore", invalid="ignore"):
        R = np.ceil(np.ldexp((err + len(G) * 2.0 ** (-s - 1)) * (1 + 2.0**-50), sh))
    rne, ro, und = ozakitail.round_bracketed(limbs, base - sh, R.ravel(), kern)
    if und.size:
        rne[und], ro[und] = undecided(A, B, EA, sA, EB, sB, und, N, kern)
    return rne, ro, None


def _gemm_add(acc: np.ndarray, x: np.ndarray, y: np.ndarray, first: bool, tmp: np.ndarray) -> None:
    """acc = x @ y (first) or acc += x @ y, the GEMM written into ``tmp`` (no fresh array a call)."""
    if first:
        np.matmul(x, y, out=acc)
        return
    np.matmul(x, y, out=tmp)
    acc += tmp


def merge_stats(st: np.ndarray, new: np.ndarray) -> None:
    """st (4, lines) of the columns so far (sum |h|, max |h|, sum |d|, max |d|) joined with a chunk's, in place."""
    st[0] += new[0]
    st[2] += new[2]
    np.maximum(st[1], new[1], out=st[1])
    np.maximum(st[3], new[3], out=st[3])


def _chunk(n: int, M: int, N: int, K: int, int8: bool = False) -> int:
    """Columns of A (rows of B) a chunk: the residue planes (int8 ones: a byte a value), integers and remainders
    of both operands in about _CHUNK_BYTES (they stay in cache from the residue pass to the GEMMs), a power of
    two of at least _MIN_CHUNK (int8: at most intgemm.MAX_K)."""
    per = (n if int8 else 8 * n) * (M + N) + 8 * (2 * M + 3 * N)
    kc = 1 << max(_MIN_CHUNK.bit_length() - 1, (_CHUNK_BYTES // max(per, 1)).bit_length() - 1)
    return max(1, min(kc, K, intgemm.MAX_K if int8 else K))


def tail_error(sta: np.ndarray, stb: np.ndarray, K: int, dA: bool, dB: bool, kc: int | None = None,
               nc: int = 1) -> np.ndarray:
    """(M, N): >= the error of float64 GEMMs dA @ tB and Ah @ dB (those taken: dA, dB), units 2^(fA + fB), each
    taken in ``nc`` pieces of at most ``kc`` columns (None: K) whose results are added in order.

    Such a GEMM errs by at most gemmbound.factor(kc, nc) sum |x_k y_k| plus K underflow errors of 2^-1074
    at most (gemmbound.py; one piece: gamma_K, Higham, Accuracy and Stability, 3.1 and 2.2);
    sum_k |x_k y_k| <= min(sum |x| max |y|, max |x| sum |y|), from the stats of ``residues``
    (|tB| <= |Bh| + |dB| per entry). The bound's own float64 steps round to nearest: the result times
    1 + (K + 16) 2^-51 covers them, and 12 more units of 2^-1074 the at most six that underflow (overflow
    gives inf, which leaves the entry undecided)."""
    sa, ma, sda, mda = (x[:, None] for x in sta)
    sb, mb, sdb, mdb = (x[None, :] for x in stb)
    st, mt = sb + sdb, mb + mdb
    gamma = gemmbound.factor(K if kc is None else kc, nc)
    with np.errstate(over="ignore", invalid="ignore"):
        S = np.zeros(np.broadcast_shapes(sa.shape, sb.shape))
        if dA:
            S += np.minimum(sda * mt, mda * st)
        if dB:
            S += np.minimum(sa * mdb, ma * sdb)
        return (S * gamma + (2 * K + 16) * 2.0**-1074) * (1 + (K + 16) * 2.0**-51)


def undecided(A, B, EA, sA, EB, sB, und: np.ndarray, N: int, kern) -> tuple[np.ndarray, np.ndarray]:
    """(RNE, RO) of the flat entries ``und`` that early rounding left: exact dot products one by one
    where that is cheaper, else the exact product of their rows and columns (either engine)."""
    M, K = A.shape
    ii, jj = und // N, und % N
    rows, cols = np.unique(ii), np.unique(jj)
    ea, sa_, eb, sb_ = EA[rows], sA[rows], EB[cols], sB[cols]
    compiled = ozakitail.compiled_entries(A, B, kern)
    least = min(fewest_gemms(sa_, sb_, K, True), ozaki.planned_gemms(sa_, sb_, K, rows.size, cols.size, True))
    if ozakitail.affordable(und.size, K, max(1, math.floor(least)), rows.size, cols.size, compiled):
        return ozakitail.entries(A, B, ii, jj, kern)  # cheaper than the fewest GEMMs either engine takes
    a, b = A[rows], B[:, cols]
    pl = choose(a, b, ea, sa_, eb, sb_, True)
    gemms = pl.gemms if pl is not None else ozaki.planned_gemms(sa_, sb_, K, rows.size, cols.size, True)
    if ozakitail.affordable(und.size, K, math.ceil(gemms), rows.size, cols.size, compiled):
        return ozakitail.entries(A, B, ii, jj, kern)
    if pl is not None:
        rne, ro, _ = product(a, b, ea, sa_, eb, sb_, True, pl)
    else:
        rne, ro, _ = ozaki.ozaki_product(a, b, ea, sa_, eb, sb_, False)
    at = np.searchsorted(rows, ii) * cols.size + np.searchsorted(cols, jj)
    return rne[at], ro[at]


def exact_product(A: np.ndarray, B: np.ndarray, EA, sA, EB, sB, exact: bool) -> tuple:
    """Exact A @ B (finite float64 / float32, spans <= MAX_SPAN): (RNE, RO, Fractions or None), raveled, by
    this engine where ``choose`` takes it, else by the split (ozaki.ozaki_product)."""
    pl = choose(A, B, EA, sA, EB, sB, exact)
    if pl is None:
        return ozaki.ozaki_product(A, B, EA, sA, EB, sB, exact)
    return product(A, B, EA, sA, EB, sB, exact, pl)
