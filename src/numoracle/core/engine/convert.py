"""Public conversion API: ``cast``, ``decode``, ``encode`` (all exact, vectorised, chunked)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import jit
from ..args import check_bool
from ..fast.lanes import select_fast_path
from ..formats.format import FP64, INT64, UINT64, AnyFormat, format_of
from ..formats.interop import as_array, to_codes
from ..formats.policy import Flags, Policy, Rounding, resolve_policy
from .softfloat import round_pack, unpack, word_bits

__all__ = ["cast", "cast_codes", "engine_cast_codes", "decode", "encode", "CHUNK"]

CHUNK = 1 << 16  # elements per pass: temporaries stay in cache


def check_codes(x: Any, src: AnyFormat, hint: str | None = None, what: str = "x") -> np.ndarray:
    """``x`` as an array of valid codes of ``src``; refuses floats and other non-integers, negatives, codes
    out of range. ``what`` names the argument in messages, ``hint`` replaces the advice on what to pass."""
    a = as_array(x, "codes")
    if a.dtype.kind in "fcVOUS":
        fix = hint or "pass the values without src= (their dtype names the format), or view them as unsigned integers"
        raise TypeError(
            f"with src={src.name}, {what} must hold integer codes (bit patterns) of {src.name}, but it has "
            f"dtype {a.dtype}; {fix}"
        )
    if a.dtype.kind not in "iub":
        # ml_dtypes arrays report kind 'V' for some types; any non-integer is refused above or here
        raise TypeError(f"codes must be integers, got dtype {a.dtype}")
    if a.dtype.kind == "i" and a.size and a.min() < 0:
        raise ValueError(f"codes are unsigned bit patterns; got a negative value {int(a.min())}")
    if a.size and int(a.max()) >= (1 << src.bits):
        bad = int(a.max())
        raise ValueError(f"code {bad:#x} is out of range for {src.name} ({src.bits} bits: "
                         f"0..{(1 << src.bits) - 1:#x})")
    return a.astype(src.code_dtype, copy=False)


def _check_random_bits(random_bits: Any, shape: tuple[int, ...], sr_bits: int) -> tuple[np.ndarray, Any]:
    """The random bits' shape and dtype; their range is checked by the returned function (None: all fit).

    The range check reads the whole array; ``cast_codes`` runs it chunk by chunk in a fast lane (the
    chunk is then in cache for the rounding), else once before the engine.
    """
    if random_bits is None:
        raise ValueError("rounding='sr' needs random_bits: an array of unsigned ints in [0, 2**sr_bits), "
                         "one per element (e.g. np.random.default_rng(0).integers(0, 2**sr_bits, x.shape))")
    r = np.asarray(random_bits)
    if r.shape != shape:
        raise ValueError(f"random_bits has shape {r.shape}, but x has shape {shape}; give one per element")
    if r.dtype.kind not in "iu":
        raise TypeError(f"random_bits must be integers, got dtype {r.dtype}")
    if r.dtype.kind == "u" and r.dtype.itemsize * 8 <= sr_bits:
        return r, None  # every value fits

    def check(chunk: np.ndarray) -> None:
        if chunk.size and ((chunk.dtype.kind == "i" and int(chunk.min()) < 0) or int(chunk.max()) >= (1 << sr_bits)):
            raise ValueError(f"random_bits must lie in [0, 2**{sr_bits}); got {int(r.min())}..{int(r.max())}")

    return r, check


def cast(
    x: Any,
    dst: Any,
    *,
    src: Any = None,
    rounding: Any = "rne",
    overflow: Any = None,
    nan_to: Any = None,
    ftz: bool = False,
    daz: bool = False,
    random_bits: Any = None,
    sr_bits: int | None = None,
    tininess: Any = "before",
    flags: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Convert exactly to ``dst``; return destination codes (and per-element ``Flags`` if asked).

    ``tininess`` ("before" or "after" rounding, IEEE 754-2019 §7.5) only changes when UNDERFLOW is
    flagged; see docs/semantics.md for which hardware does which.

    With ``src`` given, ``x`` holds codes (unsigned bit patterns) of ``src``; otherwise ``x`` is
    a numpy / ml_dtypes / torch array (or Python numbers) whose dtype names the source.

    >>> hex(int(cast(np.float32(65519), "fp16")))
    '0x7bff'
    """
    dst = format_of(dst)
    if src is None:
        codes, src_fmt = to_codes(x, "x")
    else:
        src_fmt = format_of(src)
        codes = check_codes(x, src_fmt)
    pol = resolve_policy(dst, rounding, overflow, nan_to, ftz, daz, sr_bits, tininess)
    flags = check_bool(flags, "flags")
    rand = rand_check = None
    if pol.rounding is Rounding.STOCHASTIC:
        rand, rand_check = _check_random_bits(random_bits, codes.shape, pol.sr_bits)
    elif random_bits is not None:
        raise ValueError(f"random_bits are only used with rounding='sr', not {pol.rounding.value!r}")
    return cast_codes(codes, src_fmt, dst, pol, rand, flags, rand_check=rand_check)


def cast_codes(codes: np.ndarray, src: AnyFormat, dst: AnyFormat, pol: Policy, rand: np.ndarray | None = None,
               flags: bool = False, *, rand_check: Any = None) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``cast`` for callers that already hold valid codes and a resolved Policy (no checks).

    The hottest pairs take a specialised path (``fastpaths.py``), bit-identical to the engine.
    ``rand_check`` (from ``cast``): a function that raises where a chunk of ``rand`` is out of range.
    """
    codes = np.asarray(codes)
    shape = codes.shape
    flat = codes.ravel().astype(src.code_dtype, copy=False)
    rflat = rand.ravel() if rand is not None else None
    with jit.for_work(flat.size):  # the compiled kernel where it repays its loading (core/jit.py)
        fast = select_fast_path(src, dst, pol)
    if fast is None:
        if rflat is not None and rand_check is not None:
            rand_check(rflat)
        out, fl = _engine(flat, src, dst, pol, rflat, flags)
    else:
        out, fl = fast(flat, rflat, flags, lambda c, r: _engine(c, src, dst, pol, r, flags), rand_check)
    out = out.reshape(shape)
    if flags:
        return out, fl.reshape(shape)
    return out


def engine_cast_codes(codes: np.ndarray, src: AnyFormat, dst: AnyFormat, pol: Policy,
                      rand: np.ndarray | None = None, flags: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """``cast_codes`` through the generic engine only (no fast path): flat codes and flags (or None)."""
    flat = np.asarray(codes).ravel().astype(src.code_dtype, copy=False)
    return _engine(flat, src, dst, pol, None if rand is None else np.asarray(rand).ravel(), flags)


def _engine(flat: np.ndarray, src: AnyFormat, dst: AnyFormat, pol: Policy, rflat: np.ndarray | None,
            flags: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The generic engine over flat codes, in chunks: unpack, then round_pack."""
    W = word_bits(src, dst, pol.sr_bits)
    out = np.empty(flat.size, np.dtype(dst.code_dtype))
    fl = np.empty(flat.size, np.uint8) if flags else None
    for lo in range(0, flat.size, CHUNK):
        hi = min(lo + CHUNK, flat.size)
        r = None if rflat is None else rflat[lo:hi]
        nan = _many_nans(flat[lo:hi], src)
        if nan is None:
            u = unpack(flat[lo:hi], src, W, daz=pol.daz)
            c, f = round_pack(u, dst, pol, r, flags)
        else:
            c, f = _nans_apart(flat[lo:hi], nan, src, dst, pol, r, flags, W)
        out[lo:hi] = c
        if fl is not None:
            fl[lo:hi] = f
    return out, fl


def _many_nans(codes: np.ndarray, src: AnyFormat) -> np.ndarray | None:
    """Where the codes are NaNs, when a quarter of them or more are (judged on a sample first), else None."""
    if src.is_integer or not src.has_nan or codes.size < 256:
        return None

    def nan_of(c: np.ndarray) -> np.ndarray:
        if src.nan == "fnuz":
            return c == src.sign_bit
        mag = c & np.array(src.mag_mask, c.dtype)
        return mag == src.mag_mask if src.nan == "fn" else mag > src.max_mag_code + 1

    if np.count_nonzero(nan_of(codes[::61])) * 4 < codes[::61].size:
        return None
    nan = nan_of(codes)
    return nan if np.count_nonzero(nan) * 4 >= codes.size else None


def _nans_apart(codes: np.ndarray, nan: np.ndarray, src: AnyFormat, dst: AnyFormat, pol: Policy,
                rand: np.ndarray | None, flags: bool, W: int) -> tuple[np.ndarray, np.ndarray | None]:
    """A chunk of mostly NaNs: the engine on the other elements and on one quiet and one signalling NaN of the chunk,
    whose code and flags every NaN of its kind takes (a NaN's result reads neither its payload nor its sign:
    docs/semantics.md)."""
    signalling = nan & ((codes & np.array(src.quiet_bit, codes.dtype)) == 0) if src.quiet_bit else None
    quiet = nan if signalling is None else nan & ~signalling
    kinds = [m for m in (quiet, signalling) if m is not None and m.any()]
    reps = [int(np.argmax(m)) for m in kinds]            # the first NaN of each kind
    pick = np.concatenate([np.flatnonzero(~nan), reps])
    u = unpack(codes[pick], src, W, daz=pol.daz)
    c, f = round_pack(u, dst, pol, None if rand is None else rand[pick], flags)
    n_rest = pick.size - len(reps)
    # every element the first kind's result, the second kind's blended in arithmetically (random masks), the rest
    out = np.full(codes.size, c[n_rest], c.dtype)
    fl = np.full(codes.size, f[n_rest], np.uint8) if flags else None
    if len(kinds) == 2:
        out ^= (c[n_rest] ^ c[n_rest + 1]) * kinds[1].astype(c.dtype)
        if fl is not None:
            fl ^= (f[n_rest] ^ f[n_rest + 1]) * kinds[1].view(np.uint8)
    out[pick[:n_rest]] = c[:n_rest]
    if fl is not None:
        fl[pick[:n_rest]] = f[:n_rest]
    return out, fl


def decode(codes: Any, fmt: Any) -> np.ndarray:
    """Exact values of codes: float64 for float formats, int64/uint64 for integers."""
    fmt = format_of(fmt)
    c = check_codes(codes, fmt, hint="decode() takes codes; for values already in a native dtype use "
                     "np.asarray(values, np.float64), or get codes with cast()/encode()")
    if fmt.is_integer:
        if fmt.signed:
            v = c.astype(np.int64)
            return np.where(v >= (1 << (fmt.bits - 1)), v - (1 << fmt.bits), v) if fmt.bits < 64 else c.view(np.int64)
        return c.astype(np.uint64)
    return cast(c, FP64, src=fmt).view(np.float64)


def encode(values: Any, fmt: Any) -> np.ndarray:
    """Codes of values that ``fmt`` represents exactly; raises naming the first that it does not.

    Takes arrays and scalars of numbers: native dtypes, and Python ints, Fractions, Decimals,
    numeric strings and ``np.longdouble`` (read exactly, through ``exact.round_value``).
    None, booleans and complex numbers are refused.
    """
    fmt = format_of(fmt)
    v = as_array(values, "values")
    if v.dtype.kind == "c":
        raise TypeError(f"encode takes real numbers; values has dtype {v.dtype}")
    if v.dtype.kind == "b":
        raise TypeError("encode takes numbers, not booleans; convert them (e.g. values.astype(np.uint8))")
    nan_to = "zero" if (fmt.is_integer or not fmt.has_nan) else None
    if v.dtype.kind in "OUS" or (v.dtype.kind == "f" and v.dtype.itemsize > 8):
        return _encode_exact(v, fmt, nan_to)
    if v.dtype.kind in "iu":
        v64 = v.astype(np.uint64 if v.dtype.kind == "u" else np.int64)
        src = UINT64 if v.dtype.kind == "u" else INT64
        codes = v64.view(np.uint64)
    else:
        codes, src = np.asarray(v, np.float64).view(np.uint64), FP64
    out, fl = cast(codes, fmt, src=src, nan_to=nan_to, flags=True)
    bad = (fl & (Flags.INEXACT | Flags.OVERFLOW | Flags.INVALID)) != 0
    if src is FP64 and not fmt.has_inf:
        bad |= np.isinf(v.astype(np.float64))
    if bad.any():
        i = np.flatnonzero(bad.ravel())[0]
        _not_representable(v.ravel()[i], i, fmt)
    return out


def _not_representable(x: Any, i: int, fmt: AnyFormat) -> None:
    raise ValueError(f"{x!r} (element {i}) is not representable in {fmt.name}; use cast() to round it")


def _encode_exact(v: np.ndarray, fmt: AnyFormat, nan_to: str | None) -> np.ndarray:
    """encode() for values numpy cannot hold exactly (Python objects, strings, long doubles): one by one."""
    from ..parse import parse_number, read_exact
    from ..scalar import round_value

    flat = v.ravel()
    out = np.empty(flat.size, np.dtype(fmt.code_dtype))
    for i, e in enumerate(flat.tolist() if v.dtype.kind in "OUS" else flat):
        if isinstance(e, str):
            n = parse_number(e, f"values[{i}]")
            if not n.exact:
                _not_representable(e, i, fmt)
            x = n.rounding_value()
        elif isinstance(e, (float, np.floating)) and e == 0:
            x = -0.0 if np.signbit(e) else 0.0
        else:
            x = read_exact(e, f"values[{i}]", finite=False)
        code, fl = round_value(x, fmt, nan_to=nan_to, flags=True)
        if fl & (Flags.INEXACT | Flags.OVERFLOW | Flags.INVALID) or (
                isinstance(x, float) and np.isinf(x) and not fmt.is_integer and not fmt.has_inf):
            _not_representable(e, i, fmt)
        out[i] = code
    return out.reshape(v.shape)
