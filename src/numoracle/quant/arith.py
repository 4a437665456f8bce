"""Exact quantization arithmetic: x/s and x*s of float64 operands rounded once into any format (<= FP64).

The quotient/product is split into words with Dekker's TwoProduct (Veltkamp splitting), the residual's sign
makes the sticky bit, and the engine's round_pack rounds once: no double rounding through float64."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.eft import two_prod
from ..core.engine.convert import decode
from ..core.engine.softfloat import FINITE, INF, NAN, ZERO, Unpacked, bit_length, round_pack
from ..core.formats.format import AnyFormat, format_of
from ..core.formats.policy import Policy, Rounding, resolve_policy


# ---- exact arithmetic ---------------------------------------------------------------------
def _quotient_words(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(word, exp2) with word * 2^exp2 an exact stand-in for a / b (a, b > 0 finite); see the module doc."""
    ma, ea = np.frexp(a)
    mb, eb = np.frexp(b)
    q = ma / mb
    p, e = two_prod(q, mb)
    r = (ma - p) - e  # ma - p is exact (Sterbenz); the sign of the difference is exact
    mq, eq = np.frexp(q)
    word = np.ldexp(mq, 53).astype(np.int64) * 8 + np.sign(r).astype(np.int64)
    return word, eq.astype(np.int64) + ea - eb - 56


def _product_words(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(word, exp2) with word * 2^exp2 an exact stand-in for a * b (a, b > 0 finite): 61 bits + sticky."""
    ma, ea = np.frexp(a)
    mb, eb = np.frexp(b)
    p, e = two_prod(ma, mb)
    mp, ep = np.frexp(p)
    d = np.ldexp(e, 61 - ep)  # e in units of ulp(p) / 256; |d| <= 128, exact
    fl = np.floor(d)
    word = ((np.ldexp(mp, 53).astype(np.int64) << 8) + fl.astype(np.int64)) * 2 + (d != fl)
    return word, ep.astype(np.int64) + ea + eb - 62


def _round_words(neg: np.ndarray, word: np.ndarray, exp2: np.ndarray, cls: np.ndarray, fmt: AnyFormat, pol: Policy,
                 want_flags: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Round the exact triples (finite where cls == FINITE) into fmt with round_pack."""
    spec = np.flatnonzero(cls != FINITE)
    word = word.astype(np.uint64)
    word[spec] = 1
    nb = bit_length(word)
    sig = word << (64 - nb).astype(np.uint64)
    E = (exp2 + nb - 1).astype(np.int32)
    sig[spec] = 0
    E[spec] = 0
    u = Unpacked(neg, sig, E, spec, cls[spec].astype(np.uint8), 64)
    return round_pack(u, fmt, pol, None, want_flags)


def _binary(op: str, a: Any, b: Any, fmt: Any, rounding: Any, overflow: Any, flags: bool) -> Any:
    fmt_ = format_of(fmt)
    pol = resolve_policy(fmt_, rounding, overflow)
    if pol.rounding is Rounding.STOCHASTIC:
        raise ValueError("div_round/mul_round take a deterministic rounding mode, not 'sr'")
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    shape = a.shape
    a, b = a.ravel(), b.ravel()
    neg = np.signbit(a) ^ np.signbit(b)
    aa, ab = np.abs(a), np.abs(b)
    nan = np.isnan(a) | np.isnan(b)
    if op == "div":
        nan |= (np.isinf(aa) & np.isinf(ab)) | ((aa == 0) & (ab == 0))
        inf = (np.isinf(aa) | (ab == 0)) & ~nan
        zero = ((aa == 0) | np.isinf(ab)) & ~nan
    else:
        nan |= (np.isinf(aa) & (ab == 0)) | ((aa == 0) & np.isinf(ab))
        inf = (np.isinf(aa) | np.isinf(ab)) & ~nan
        zero = ((aa == 0) | (ab == 0)) & ~nan
    cls = np.full(a.shape, FINITE, np.uint8)
    cls[zero], cls[inf], cls[nan] = ZERO, INF, NAN
    fin = cls == FINITE
    one = np.ones(1)
    word, exp2 = (_quotient_words if op == "div" else _product_words)(np.where(fin, aa, one), np.where(fin, ab, one))
    codes, fl = _round_words(neg, word, exp2, cls, fmt_, pol, flags)
    codes = codes.reshape(shape)
    return (codes, fl.reshape(shape)) if flags else codes


def div_round(a: Any, b: Any, fmt: Any, rounding: Any = "rne", overflow: Any = None, flags: bool = False) -> Any:
    """Codes of ``a / b`` rounded once into ``fmt`` (IEEE specials: x/0 = +-inf, 0/0 = NaN)."""
    return _binary("div", a, b, fmt, rounding, overflow, flags)


def mul_round(a: Any, b: Any, fmt: Any, rounding: Any = "rne", overflow: Any = None, flags: bool = False) -> Any:
    """Codes of ``a * b`` rounded once into ``fmt`` (IEEE specials: 0 * inf = NaN)."""
    return _binary("mul", a, b, fmt, rounding, overflow, flags)


def div_values(a: Any, b: Any, fmt: Any, rounding: Any = "rne", overflow: Any = None) -> np.ndarray:
    """Exact float64 values of :func:`div_round` (``fmt`` at most FP64)."""
    return decode(div_round(a, b, fmt, rounding, overflow), fmt)


def mul_values(a: Any, b: Any, fmt: Any, rounding: Any = "rne", overflow: Any = None) -> np.ndarray:
    """Exact float64 values of :func:`mul_round` (``fmt`` at most FP64)."""
    return decode(mul_round(a, b, fmt, rounding, overflow), fmt)
