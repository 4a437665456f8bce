"""Order-controlled accumulation models: which terms a reduction adds in which order, in which format.

An *order* says how the K terms of one reduction (the inputs of a sum, the exact products a_k*b_k of
a dot product or of one matmul output) are associated, and where the rounding steps happen. Orders
are small, frozen, composable objects; :func:`numoracle.simulate.simulate` evaluates them bit for bit.

Every addition is ``fl(x + y)``: the exact sum, rounded once to the accumulator format (``acc``). A
*term* enters its first addition exact when ``fma=True`` and rounded to ``acc`` first when
``fma=False`` (for a sequential dot product that is FMA versus multiply-then-add).

* ``Sequential()``: ``s = +0; s = fl(s + t_k)`` for k = 1..K (a register initialised to zero).
* ``Pairwise()``: recursive halving. n = 1: the term itself (``fl(t)`` when it is the whole reduction);
  n >= 2: the first ``ceil(n/2)`` terms form the left subtree, the rest the right one, and the result
  is ``fl(left + right)``. So two single terms combine as ``fl(t_i + t_j)``.
* ``Blocked(b, inner, outer, outer_acc)``: terms cut into consecutive blocks of ``b`` (the last one
  shorter); each block reduced by ``inner`` in ``acc`` (a one-term block gives fl(t)); the ceil(K/b)
  partials reduced by ``outer`` in ``outer_acc`` (default ``acc``). Partials enter the outer
  additions exactly.
* ``SplitK(s, inner, combine, permutation)``: slice j holds terms ``[j*K//s, (j+1)*K//s)``; each is
  reduced by ``inner``; the s partials are then reduced by ``combine`` in the order
  ``partial[permutation[0]], partial[permutation[1]], ...`` (e.g. the order atomics landed).
* ``BlockFMA(n, frac_bits, ...)``: tensor-core block FMA, chained: ``d_0 = +0``, ``d_j = BFMA(d_{j-1};
  next n terms)``; see the class for the exact step list (Khattak & Mikaitis 2025).
* ``Promoted(every, inner, outer_acc)``: ``Blocked(every, inner, Sequential(), outer_acc)``: e.g. the
  DeepSeek-V3 FP8 GEMM that copies the tensor-core partial to FP32 every 128 terms.
* ``NumpyPairwise(chunk, acc, carry)``: numpy's ``pairwise_sum`` and reduce loop (``np.sum`` order).

Presets for real systems: :func:`numoracle.models.orders.presets.preset` (the table ``GPU_PRESETS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ...core.errors import NumoracleError
from ...core.formats.format import FP32, Format, format_of
from ...core.formats.policy import Rounding
from .schedule import (
    Schedule,
    Wave,
    chain_schedule,
    combine2,
    const_schedule,
    parallel_schedules,
    split_groups,
    substitute,
)
from .spec import OrderSpec

__all__ = [
    "Order", "Sequential", "Pairwise", "Blocked", "SplitK", "BlockFMA", "Promoted", "NumpyPairwise",
    "Schedule", "Wave", "build",
]

def slices_then(sizes: list[int], inner: Order, key: tuple, outer: Order, outer_key: tuple,
                 perm: np.ndarray | None = None) -> Schedule:
    """Reduce each slice with ``inner``, then the partials (in slice order, or ``perm``) with ``outer``."""
    groups, pos = split_groups(sizes, lambda size: _build_value(inner, size, key))
    waves, res_grouped, nv = parallel_schedules(groups)
    partial = np.empty(len(sizes), np.int64)
    partial[pos] = res_grouped
    if perm is not None:
        partial = partial[np.asarray(perm, np.int64)]
    outer_s = _build_value(outer, len(sizes), outer_key)
    owaves, result = substitute(outer_s, partial, nv)
    return Schedule(int(sum(sizes)), nv + outer_s.n_vals, waves + owaves, result)


# =====================================================================================================
# Orders
# =====================================================================================================


def float_format(x: Any, what: str) -> Format | None:
    if x is None:
        return None
    f = format_of(x)
    if not isinstance(f, Format):
        raise TypeError(f"{what} must be a float format, got {f.name}")
    return f


def check_suborders(owner: str, partials: str | None = None, **orders: Any) -> None:
    """The orders a composite order is built of (``inner=``, ``outer=``, ``combine=``) are Orders; the one named
    ``partials`` reduces partial results, so it must be built of orders that reduce values."""
    for what, o in orders.items():
        if not isinstance(o, Order):
            raise TypeError(f"{owner} {what} must be an Order, got {o!r}")
    if partials is not None:
        check_reduces_values(orders[partials], f"{owner} {partials}")


def check_reduces_values(o: Order, what: str) -> None:
    """An order that reduces partials (accumulator values) cannot hold a block FMA or numpy's loop:
    those read products / array elements."""
    if isinstance(o, (BlockFMA, NumpyPairwise, Promoted)):
        raise ValueError(f"{what} must be built of Sequential, Pairwise, Blocked and SplitK: it reduces "
                         f"partial results (accumulator values), not products; got {type(o).__name__}")
    for sub in (getattr(o, "inner", None), getattr(o, "outer", None), getattr(o, "combine", None)):
        if sub is not None:
            check_reduces_values(sub, what)


def positive_int(x: Any, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
        raise ValueError(f"{what} must be a positive int, got {x!r}")
    return int(x)


class Order:
    """Base class of accumulation orders (frozen dataclasses: hashable, comparable, reusable)."""

    def spec(self) -> OrderSpec:
        """What the error bounds need of this order: its rounding structure as an :class:`OrderSpec`.

        A new order defines this (built from the kinds of OrderSpec) next to ``_schedule``; nothing else in
        the bounds needs to know the class.
        """
        raise NotImplementedError(f"{type(self).__name__} defines no spec(): the bounds cannot describe it")

    def _schedule(self, n: int, key: tuple) -> Schedule:  # pragma: no cover - abstract
        raise NotImplementedError

    def slots(self) -> int:
        """How many slices, accumulators or lanes the schedule keeps whatever the number of terms (its cost grows
        with them, not with the data); an order with such a parameter says it, and :func:`build` refuses one whose
        slots dwarf its reduction (:data:`MAX_SLOTS`). Default 1: an order whose schedule grows with n only."""
        return 1

    @property
    def acc(self) -> Format | None:
        """Accumulator format this order fixes (None: simulate's ``acc``)."""
        return None


@dataclass(frozen=True)
class Sequential(Order):
    """``s = +0; s = fl(s + t_k)`` for k = 1..K: one running accumulator."""

    def spec(self) -> OrderSpec:
        return OrderSpec("sequential")

    def _schedule(self, n, key):
        return chain_schedule(n, key, 0.0)


@dataclass(frozen=True)
class Pairwise(Order):
    """Recursive halving: left = first ceil(n/2) terms, right = the rest; result fl(left + right)."""

    def spec(self) -> OrderSpec:
        return OrderSpec("pairwise", 1)

    def _schedule(self, n, key):
        if n == 0:
            return const_schedule(0, 0.0, key)
        if n == 1:
            return Schedule(1, 0, [], -1)
        left = n - n // 2
        return combine2(_build(self, left, key), _build(self, n - left, key), key)


@dataclass(frozen=True)
class Blocked(Order):
    """Blocks of ``b`` consecutive terms reduced by ``inner``; the partials by ``outer`` in ``outer_acc``."""

    b: int
    inner: Order = Sequential()
    outer: Order = Sequential()
    outer_acc: Any = None

    def __post_init__(self):
        object.__setattr__(self, "b", positive_int(self.b, "Blocked block size b"))
        object.__setattr__(self, "outer_acc", float_format(self.outer_acc, "outer_acc"))
        check_suborders("Blocked", "outer", inner=self.inner, outer=self.outer)

    def spec(self) -> OrderSpec:
        return OrderSpec("blocked", self.b, self.inner.spec(), self.outer.spec(), self.outer_acc)

    def _schedule(self, n, key):
        if n == 0:
            return const_schedule(0, 0.0, key)
        sizes = [self.b] * (n // self.b) + ([n % self.b] if n % self.b else [])
        okey = (self.outer_acc, key[1]) if self.outer_acc is not None else key
        return slices_then(sizes, self.inner, key, self.outer, okey)


@dataclass(frozen=True)
class SplitK(Order):
    """s slices ``[j*K//s, (j+1)*K//s)`` reduced by ``inner``; the partials by ``combine`` in ``permutation`` order."""

    s: int
    inner: Order = Sequential()
    combine: Order = Sequential()
    permutation: Any = None
    combine_acc: Any = None

    def __post_init__(self):
        object.__setattr__(self, "s", positive_int(self.s, "SplitK slice count s"))
        object.__setattr__(self, "combine_acc", float_format(self.combine_acc, "combine_acc"))
        if self.permutation is not None:
            p = tuple(int(i) for i in self.permutation)
            if sorted(p) != list(range(self.s)):
                raise ValueError(f"permutation must list each of 0..{self.s - 1} once, got {p}")
            object.__setattr__(self, "permutation", p)
        check_suborders("SplitK", "combine", inner=self.inner, combine=self.combine)

    def spec(self) -> OrderSpec:
        return OrderSpec("splitk", self.s, self.inner.spec(), self.combine.spec(), self.combine_acc)

    def slots(self) -> int:
        return self.s

    def _schedule(self, n, key):
        sizes = [(j + 1) * n // self.s - j * n // self.s for j in range(self.s)]
        ckey = (self.combine_acc, key[1]) if self.combine_acc is not None else key
        return slices_then(sizes, self.inner, key, self.combine, ckey, self.permutation)


@dataclass(frozen=True)
class BlockFMA(Order):
    """Tensor-core block FMA chained over K (Khattak & Mikaitis 2025; docs/theory.md §4).

    One block ``d = BFMA(c; t_1..t_n)`` (the terms are the exact products a_k*b_k; for a sum, the inputs):

    1. Zero products are dropped. Each product gets the label ``ea + eb`` (input exponents, clamped
       below at their format's emin, so subnormal inputs keep the emin label), plus 1 when its
       significand ``|t| / 2^(ea+eb)`` is >= 2 (for a sum, a term's label is its own exponent, clamped
       at its format's emin). c's label is its exponent, clamped at FP32's -126 (an FP32 register).
    2. ``carry_bit``: if some product with the largest raw label ``ea+eb`` has significand >= 2, and
       that label is >= c's (or c = 0), the block keeps one more fraction bit (K&M's ``spcFlag``).
    3. E = the largest label. Every term and c is truncated toward zero to a multiple of
       2^(E - F), F = frac_bits (+1 from step 2): no guard or sticky bits. ``truncate=False``: each
       term instead keeps a sticky bit one place below the window (the OR of the bits shifted out).
    4. The truncated terms are added exactly; the sum is normalised once and rounded to the output
       format (the accumulator's exponent range with ``out_frac_bits`` fraction bits, default the
       accumulator's) with ``out_rounding`` (RZ for FP32 output, RNE for FP16 output). A result that
       reaches 2^(emax+1) becomes +-inf, as in K&M's model (also under RZ). A zero sum is +0.
    5. The output is c for the next block (K > n chains blocks); the first c is +0.

    NaN or inf among the terms or c makes d their IEEE sum (inf + -inf = NaN). ``simulate``'s
    ``fma`` and ``rounding`` do not apply inside the block (its products are exact by construction).
    Where K&M's code versions differ: step 2 follows their Generic_BFMA_TC with ``spcFlag`` (docs/theory.md
    §4 step 2), and the newer ``min_exp_limit`` (E >= -133 for H100) is not modelled; it matters only
    when every term of a block is below 2^-133.
    """

    n: int
    frac_bits: int
    truncate: bool = True
    out_rounding: str = "rtz"
    out_frac_bits: int | None = None
    carry_bit: bool = True
    acc: Any = None

    def __post_init__(self):
        object.__setattr__(self, "n", positive_int(self.n, "BlockFMA block size n"))
        if not isinstance(self.frac_bits, (int, np.integer)) or not 1 <= self.frac_bits <= 40:
            raise ValueError(f"frac_bits must be an int in 1..40 (the aligned window stays exact in float64), "
                             f"got {self.frac_bits!r}")
        if (self.n + 1) << (self.frac_bits + 3) > 1 << 53:
            raise ValueError(f"BlockFMA(n={self.n}, frac_bits={self.frac_bits}): the block sum needs "
                             "(n + 1) * 2^(frac_bits + 3) <= 2^53 to stay exact in float64")
        r = Rounding.of(self.out_rounding)
        if r is Rounding.STOCHASTIC:
            raise ValueError("BlockFMA out_rounding='sr' is not modelled")
        object.__setattr__(self, "out_rounding", r.value)
        if self.out_frac_bits is not None and not 1 <= int(self.out_frac_bits) <= 50:
            raise ValueError(f"out_frac_bits must be in 1..50, got {self.out_frac_bits!r}")
        object.__setattr__(self, "acc", float_format(self.acc, "BlockFMA acc"))

    def spec(self) -> OrderSpec:
        return OrderSpec("blockfma", self.n, frac_bits=self.frac_bits, truncate=bool(self.truncate), acc=self.acc,
                         out_frac_bits=self.out_frac_bits, out_rounding=Rounding.of(self.out_rounding).value)

    def _schedule(self, n, key):
        k = (self, key[0] if self.acc is None else self.acc)
        waves = [Wave("const", (key[0] if self.acc is None else self.acc, None), np.array([0]), const=0.0)]
        for j, lo in enumerate(range(0, n, self.n)):
            tids = -1 - np.arange(lo, min(lo + self.n, n), dtype=np.int64)
            waves.append(Wave("bfma", k, np.array([j + 1]), np.array([j]), tids[None, :]))
        return Schedule(n, len(waves), waves, len(waves) - 1)


@dataclass(frozen=True)
class Promoted(Order):
    """``inner`` over each chunk of ``every`` terms; the chunk results added in ``outer_acc`` (RNE by default).

    ``Promoted(128, preset("h100", "fp8"), FP32)`` is DeepSeek-V3's FP8 GEMM (§3.3.2): the tensor-core
    partial of every 128 terms is copied to FP32 registers and added there (scales omitted).
    """

    every: int = 128
    inner: Order = BlockFMA(32, 13, out_frac_bits=13, acc=FP32)
    outer_acc: Any = FP32

    def __post_init__(self):
        object.__setattr__(self, "every", positive_int(self.every, "Promoted interval every"))
        object.__setattr__(self, "outer_acc", float_format(self.outer_acc, "outer_acc"))
        if not isinstance(self.inner, Order):
            raise TypeError(f"Promoted inner must be an Order, got {self.inner!r}")

    @property
    def acc(self):
        return self.inner.acc

    def spec(self) -> OrderSpec:
        return OrderSpec("promoted", self.every, self.inner.spec(), outer_acc=self.outer_acc)

    def _schedule(self, n, key):
        return _build(Blocked(self.every, self.inner, Sequential(), self.outer_acc), n, key)


@dataclass(frozen=True)
class NumpyPairwise(Order):
    """numpy's ``np.add.reduce`` / ``np.sum`` over one axis (numpy 2.x ``loops_utils.h.src``), all RNE.

    ``PW(n)``: n < 8: ``r = -0.0; r = fl(r + t_i)`` in order. 8 <= n <= 128: eight accumulators
    ``r_j = t_j`` (j < 8), then ``r_j = fl(r_j + t_{i+j})`` for i = 8, 16, .. < n - n%8, then
    ``res = ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))``, then ``res = fl(res + t_i)`` for the n%8 rest.
    n > 128: ``n2 = n//2 - (n//2) % 8``; ``fl(PW(first n2) + PW(rest))``.

    The reduce loop: ``out = +0`` (the identity) in ``carry``; for each inner-loop chunk c:
    ``out = fl_carry(fl_acc(out + PW(c)))``. A contiguous or strided array with no cast is one
    chunk (``chunk=None``); a buffered reduction (a cast, e.g. ``np.sum(x16, dtype=np.float32)``)
    gets chunks of ``np.getbufsize()`` = 8192. float16: ``acc=FP32``, ``carry=FP16``
    (``preset("numpy", "fp16")``). numpy 1.x (1.24-1.26) buffers a contiguous float32 reduction too: there
    ``np.sum`` is ``NumpyPairwise(chunk=8192)`` (measured on numpy 1.24.0; the preset is numpy 2's).
    Reducing a non-last axis is not pairwise: ``np.sum(X, axis=0)``
    of a C-contiguous X adds row after row, which is ``Sequential()`` on X.T. All verified against
    numpy 2.4 in tests/test_simulate.py.
    """

    chunk: int | None = None
    acc: Any = None
    carry: Any = None

    def __post_init__(self):
        if self.chunk is not None:
            object.__setattr__(self, "chunk", positive_int(self.chunk, "NumpyPairwise chunk"))
        object.__setattr__(self, "acc", float_format(self.acc, "NumpyPairwise acc"))
        object.__setattr__(self, "carry", float_format(self.carry, "NumpyPairwise carry"))

    def spec(self) -> OrderSpec:
        return OrderSpec("numpy", self.chunk or 0, outer_acc=self.carry, acc=self.acc)

    def _schedule(self, n, key):
        akey = (key[0] if self.acc is None else self.acc, "rne")
        ckey = (self.carry, "rne") if self.carry is not None else akey
        step = n if self.chunk is None else self.chunk
        sizes = [min(step, n - lo) for lo in range(0, n, step)] or [0]
        groups, pos = split_groups(sizes, lambda size: _numpy_pw(size, akey))
        waves, res_grouped, nv = parallel_schedules(groups)
        partial = np.empty(len(sizes), np.int64)
        partial[pos] = res_grouped
        # out = +0 (carry); out = fl_carry(fl_acc(out + PW(chunk))) chunk by chunk (few chunks: plain adds)
        waves.append(Wave("const", ckey, np.array([nv]), const=0.0))
        out = nv
        nv += 1
        for p in partial:
            waves.append(Wave("add", akey, np.array([nv]), np.array([out]), np.array([p])))
            waves.append(Wave("load", ckey, np.array([nv + 1]), np.array([nv])))
            out, nv = nv + 1, nv + 2
        return Schedule(n, nv, waves, out)


@lru_cache(maxsize=4096)
def _numpy_pw(n: int, key: tuple) -> Schedule:
    if n < 8:
        return chain_schedule(n, key, -0.0)
    if n <= 128:
        waves = [Wave("load", key, np.arange(8), -1 - np.arange(8))]      # r_j = t_j
        r = np.arange(8)
        nv = 8
        steps = (n - n % 8) // 8 - 1
        if steps:   # r_j = fl(r_j + t_{8i+j}), i = 1..steps: eight chains side by side
            tids = 8 + 8 * np.arange(steps)[None, :] + np.arange(8)[:, None]
            waves.append(Wave("chain", key, nv + np.arange(8), r, -1 - tids))
            r, nv = nv + np.arange(8), nv + 8
        for width in (4, 2, 1):  # ((r0+r1)+(r2+r3)) + ((r4+r5)+(r6+r7))
            waves.append(Wave("add", key, nv + np.arange(width), r[0::2], r[1::2]))
            r, nv = nv + np.arange(width), nv + width
        res = int(r[0])
        if n % 8:   # the rest, one by one
            waves.append(Wave("chain", key, np.array([nv]), np.array([res]), -1 - np.arange(n - n % 8, n)[None, :]))
            res, nv = nv, nv + 1
        return Schedule(n, nv, waves, res)
    n2 = n // 2
    n2 -= n2 % 8
    return combine2(_numpy_pw(n2, key), _numpy_pw(n - n2, key), key)


# slots an order may keep beyond its n terms: max(MAX_SLOTS_PER_TERM * n, MAX_SLOTS); more is refused before any
# array is made (SplitK(10**12) over 16 terms would otherwise build 10**12 empty slices)
MAX_SLOTS, MAX_SLOTS_PER_TERM = 1 << 16, 16


def check_slots(order: Order, n: int) -> None:
    """Refuse an order whose slices, accumulators or lanes (:meth:`Order.slots`) dwarf its reduction of n terms."""
    k = order.slots()
    if k > max(MAX_SLOTS_PER_TERM * n, MAX_SLOTS):
        raise NumoracleError(f"{type(order).__name__} keeps {k} slices, accumulators or lanes for a reduction of "
                             f"{n} terms; simulate takes at most max({MAX_SLOTS_PER_TERM} * n, {MAX_SLOTS}) (its cost "
                             "grows with them, not with the data): give parameters of the size of the reduction, "
                             "as a kernel has (e.g. SplitK(s) with s <= K)")


@lru_cache(maxsize=4096)
def _build(order: Order, n: int, key: tuple) -> Schedule:
    check_slots(order, n)
    return order._schedule(n, key)


@lru_cache(maxsize=4096)
def _build_value(order: Order, n: int, key: tuple) -> Schedule:
    """``_build`` whose result is an accumulator value: a reduction that is one bare term is fl(t)."""
    s = _build(order, n, key)
    if s.result >= 0:
        return s
    waves = s.waves + [Wave("load", key, np.array([s.n_vals]), np.array([s.result]))]
    return Schedule(s.n_terms, s.n_vals + 1, waves, s.n_vals)


def build(order: Order, n: int, key: tuple = (None, None)) -> Schedule:
    """The schedule of ``order`` over ``n`` terms (its result is a value: a lone term is loaded, fl(t))."""
    if not isinstance(order, Order):
        raise TypeError(f"order must be a numoracle.orders Order (Sequential(), Pairwise(), ...), got {order!r}")
    return _build_value(order, n, key)
