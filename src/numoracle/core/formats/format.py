"""Number formats: one frozen descriptor for every floating format, one for integers.

A :class:`Format` describes a binary floating-point encoding by its fields
(sign, exponent, mantissa, bias) and its special-value conventions; every
derived constant (``max_finite``, ``min_subnormal``, ``unit_roundoff`` ...)
is computed exactly, as a :class:`fractions.Fraction` or an ``int``.

Special-value encodings (``nan=``):

* ``"ieee"``: exponent field all ones is special; mantissa 0 is +-inf, any
  other mantissa is NaN (FP64, FP32, TF32, FP16, BF16, FP8_E5M2).
* ``"fn"``: "finite": only the all-ones magnitude (S.1111.111) is NaN; no
  infinities (FP8_E4M3FN; E8M0FNU, which is unsigned, uses 0xFF).
* ``"fnuz"``: the single code with only the sign bit set (0x80) is NaN; there
  is no negative zero; optionally ``has_inf`` puts +-inf at the all-ones
  magnitude (IEEE P3109 style).
* ``"none"``: every code is a finite number (MX FP6/FP4).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property, lru_cache
from typing import Any

from .intformat import IntFormat, code_dtype_name, overflow_rule
from .limits import MAX_EMAX, MAX_PRECISION, MIN_EXPONENT, from_numpy_code, is_numpy_code  # noqa: F401 - the carried range, re-exported
from .limits import check_carried as _check_carried
from .limits import check_fields as _check_fields
from .limits import check_widths as _check_widths
from .policy import Rounding

__all__ = [
    "Format",
    "IntFormat",
    "AnyFormat",
    "format_of",
    "register",
    "registry",
    "FP64",
    "FP32",
    "TF32",
    "FP16",
    "BF16",
    "FP8_E4M3FN",
    "FP8_E4M3", "FP8_E3M4",
    "FP8_E5M2",
    "FP8_E4M3FNUZ",
    "FP8_E5M2FNUZ",
    "FP8_E4M3B11FNUZ",
    "FP6_E3M2FN",
    "FP6_E2M3FN",
    "FP4_E2M1FN",
    "E8M0FNU",
    "FP8_E5M3FNU",
    "INT2",
    "UINT2",
    "INT4",
    "UINT4",
    "INT8",
    "UINT8",
    "INT16",
    "UINT16",
    "INT32",
    "UINT32",
    "INT64",
    "UINT64",
]

_NAN_KINDS = ("ieee", "fn", "fnuz", "none")


@dataclass(frozen=True)
class Format:
    """A binary floating-point format (frozen; compare and hash by fields)."""

    name: str = field(compare=False)
    exp_bits: int
    man_bits: int
    bias: int
    signed: bool = True
    nan: str = "ieee"
    has_inf: bool = True
    has_subnormals: bool = True
    aliases: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        _check_fields(self)
        if self.nan not in _NAN_KINDS:
            raise ValueError(f"nan must be one of {_NAN_KINDS}, got {self.nan!r}")
        if self.exp_bits < 1 or self.man_bits < 0:
            raise ValueError("a float format needs exp_bits >= 1 and man_bits >= 0")
        if self.bits > 64:
            raise ValueError(f"{self.name}: formats wider than 64 bits are not supported")
        _check_carried(self)
        if self.nan == "ieee" and not self.has_inf:
            raise ValueError(f"{self.name}: IEEE encoding has infinities; use nan='fn' or 'fnuz'")
        if self.nan == "ieee" and self.man_bits == 0:
            raise ValueError(f"{self.name}: IEEE encoding needs a mantissa bit to tell NaN from inf")
        if self.nan in ("fn", "none") and self.has_inf:
            raise ValueError(f"{self.name}: nan={self.nan!r} formats have no infinities")
        if self.nan == "fnuz" and not self.signed:
            raise ValueError(f"{self.name}: the FNUZ NaN is the sign bit; an unsigned format cannot use it")
        if not self.has_subnormals and self.signed:
            # no subnormals: no zero, code 0 is +min; a signed format would need a -min code (under FNUZ
            # the NaN), which keys, values and the engine's sign step do not carry
            raise ValueError(
                f"{self.name}: a signed format must have subnormals (has_subnormals=True); only unsigned, "
                "zero-less formats (like E8M0) may omit them. To flush subnormals of a signed format use "
                "the ftz/daz policies, or pass signed=False"
            )
        if self.max_mag_code < 1:
            raise ValueError(f"{self.name}: the format has no positive finite value")

    # ---- construction helpers -------------------------------------------------
    @classmethod
    def ieee_like(cls, exp_bits: int, man_bits: int, *, name: str | None = None, bias: int | None = None) -> Format:
        """An IEEE 754 style format (inf, NaNs, subnormals, -0) with the given fields."""
        _check_widths(exp_bits, man_bits)
        bias = (1 << (exp_bits - 1)) - 1 if bias is None else bias
        return cls(name or f"e{exp_bits}m{man_bits}", exp_bits, man_bits, bias)

    @classmethod
    def fn(cls, exp_bits: int, man_bits: int, *, name: str | None = None, bias: int | None = None) -> Format:
        """OCP "FN" style: no inf, NaN only at the all-ones magnitude."""
        _check_widths(exp_bits, man_bits)
        bias = (1 << (exp_bits - 1)) - 1 if bias is None else bias
        return cls(name or f"e{exp_bits}m{man_bits}fn", exp_bits, man_bits, bias, nan="fn", has_inf=False)

    @classmethod
    def fnuz(cls, exp_bits: int, man_bits: int, *, name: str | None = None, bias: int | None = None) -> Format:
        """Graphcore/AMD "FNUZ" style: NaN = 0x80, no -0, no inf; default bias 2^(e-1)."""
        _check_widths(exp_bits, man_bits)
        bias = 1 << (exp_bits - 1) if bias is None else bias
        return cls(name or f"e{exp_bits}m{man_bits}fnuz", exp_bits, man_bits, bias, nan="fnuz", has_inf=False)

    @classmethod
    def p3109(cls, precision: int, *, bits: int = 8) -> Format:
        """IEEE P3109 interim binary{bits}p{P}: NaN 0x80, +-inf at the top, no -0."""
        from ..args import check_int

        e = check_int(bits, "bits", 2, 64) - check_int(precision, "precision", 1, 63)
        if e < 1:
            raise ValueError(f"P3109 needs precision < bits, got P={precision} for {bits} bits")
        return cls(f"binary{bits}p{precision}", e, precision - 1, 1 << (e - 1), nan="fnuz", has_inf=True)

    @classmethod
    def finite(cls, exp_bits: int, man_bits: int, *, name: str | None = None, bias: int | None = None) -> Format:
        """Every code finite (no inf, no NaN), like the MX FP6/FP4 element formats."""
        _check_widths(exp_bits, man_bits)
        bias = (1 << (exp_bits - 1)) - 1 if bias is None else bias
        return cls(name or f"e{exp_bits}m{man_bits}", exp_bits, man_bits, bias, nan="none", has_inf=False)

    # ---- layout ------------------------------------------------------------------
    is_integer = False

    @property
    def bits(self) -> int:
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def code_dtype(self) -> str:
        """numpy dtype name of the unsigned container of one code."""
        return code_dtype_name(self.bits)

    @property
    def sign_bit(self) -> int:
        return (1 << (self.bits - 1)) if self.signed else 0

    @property
    def mag_mask(self) -> int:
        return (1 << (self.exp_bits + self.man_bits)) - 1

    @property
    def has_nan(self) -> bool:
        return self.nan != "none"

    @property
    def quiet_bit(self) -> int:
        """The mantissa bit that marks a NaN quiet (IEEE 754-2019 §6.2.1), or 0 where no NaN signals.

        IEEE-encoded formats with at least two mantissa bits use the top mantissa bit: a NaN with it
        clear is signalling. FN/FNUZ formats (a single NaN) and those without NaN have no sNaN.
        """
        return 1 << (self.man_bits - 1) if self.nan == "ieee" and self.man_bits >= 2 else 0

    def is_signalling_nan(self, code: int) -> bool:
        """True for the codes of signalling NaNs (see :attr:`quiet_bit`)."""
        q = self.quiet_bit
        e_all = ((1 << self.exp_bits) - 1) << self.man_bits
        return bool(q) and (code & e_all) == e_all and (code & (q - 1)) != 0 and not code & q

    @property
    def has_zero(self) -> bool:
        return self.has_subnormals

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and self.has_zero and self.nan != "fnuz"

    @property
    def precision(self) -> int:
        """p: significand bits counting the implicit bit."""
        return self.man_bits + 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal value."""
        return (1 if self.has_subnormals else 0) - self.bias

    @cached_property
    def max_mag_code(self) -> int:
        """Magnitude bits of the largest finite code."""
        top = self.mag_mask
        if self.nan == "ieee":
            return (((1 << self.exp_bits) - 1) << self.man_bits) - 1
        if self.nan == "fn" or (self.nan == "fnuz" and self.has_inf):
            return top - 1
        return top

    @property
    def emax(self) -> int:
        """Exponent of the largest finite value."""
        return (self.max_mag_code >> self.man_bits) - self.bias

    @property
    def max_significand(self) -> int:
        """Integer significand of max_finite, in units of ``top_ulp``: p bits with the implicit bit, or
        the bare mantissa field where the largest finite code is subnormal (exp_bits=1 IEEE-like formats)."""
        mant = self.max_mag_code & ((1 << self.man_bits) - 1)
        return mant if self._max_is_subnormal else (1 << self.man_bits) | mant

    @property
    def _max_is_subnormal(self) -> bool:
        return self.has_subnormals and (self.max_mag_code >> self.man_bits) == 0

    @property
    def top_ulp(self) -> Fraction:
        """Spacing of the values at max_finite (the next value, with an unbounded exponent, is max + top_ulp)."""
        return Fraction(2) ** ((self.emin if self._max_is_subnormal else self.emax) - self.man_bits)

    @property
    def max_finite(self) -> Fraction:
        return Fraction(self.max_significand) * self.top_ulp

    @property
    def min_normal(self) -> Fraction:
        return Fraction(2) ** self.emin

    @property
    def min_subnormal(self) -> Fraction:
        """Smallest positive value (the min normal when there are no subnormals)."""
        if not self.has_subnormals:
            return self.min_normal
        return Fraction(2) ** (self.emin - self.man_bits)

    @property
    def eps(self) -> Fraction:
        """Distance from 1 to the next larger value: 2^(1-p)."""
        return Fraction(2) ** (1 - self.precision)

    def unit_roundoff(self, rounding: str = "rne") -> Fraction:
        """u = 2^-p for nearest modes, 2^(1-p) for directed, odd and stochastic ones."""
        mode = Rounding.of(rounding)
        return Fraction(2) ** (-self.precision if mode.is_nearest else 1 - self.precision)

    def overflow_threshold(self, rounding: str = "rne", *, sign: int = 1) -> tuple[Fraction, bool]:
        """Smallest magnitude that overflows when rounded with an unbounded exponent.

        Returns ``(t, inclusive)``: values with ``|x| > t`` overflow, and ``|x| == t``
        overflows iff ``inclusive``. ``sign`` (+1/-1) matters for the directed modes.
        Stochastic rounding may overflow anywhere above ``max_finite``; its threshold
        is reported as ``(max_finite, False)``.
        FP16 rne: (65520, True). FP8_E4M3FN rne: (464, False).
        """
        return _overflow_threshold(self, Rounding.of(rounding), sign)

    # ---- misc ------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"Format({self.name})"

    def __str__(self) -> str:
        return self.name

    def describe(self) -> dict[str, Any]:
        """Every derived constant, exact, as a flat dict (the rows of tables/formats.csv)."""
        t_rne, inc = self.overflow_threshold("rne")
        return {
            "name": self.name,
            "kind": "float",
            "bits": self.bits,
            "signed": self.signed,
            "exp_bits": self.exp_bits,
            "man_bits": self.man_bits,
            "bias": self.bias,
            "nan": self.nan,
            "has_inf": self.has_inf,
            "has_negative_zero": self.has_negative_zero,
            "has_subnormals": self.has_subnormals,
            "precision": self.precision,
            "emin": self.emin,
            "emax": self.emax,
            "max_finite": self.max_finite,
            "min_normal": self.min_normal,
            "min_subnormal": self.min_subnormal,
            "unit_roundoff_rne": self.unit_roundoff("rne"),
            "unit_roundoff_rtz": self.unit_roundoff("rtz"),
            "overflow_threshold_rne": f"{'>=' if inc else '>'} {t_rne}",
            "overflow_threshold_rtz": f">= {self.overflow_threshold('rtz')[0]}",
        }


AnyFormat = Format | IntFormat


# ---- the registry ------------------------------------------------------------------
FP64 = Format("fp64", 11, 52, 1023, aliases=("float64", "double", "f64", "binary64"))
FP32 = Format("fp32", 8, 23, 127, aliases=("float32", "float", "single", "f32", "binary32"))
TF32 = Format("tf32", 8, 10, 127, aliases=("tensorfloat32", "e8m10"))
FP16 = Format("fp16", 5, 10, 15, aliases=("float16", "half", "f16", "binary16", "e5m10"))
BF16 = Format("bf16", 8, 7, 127, aliases=("bfloat16", "e8m7"))
FP8_E4M3FN = Format("fp8_e4m3fn", 4, 3, 7, nan="fn", has_inf=False, aliases=("float8_e4m3fn", "e4m3fn"))
FP8_E5M2 = Format("fp8_e5m2", 5, 2, 15, aliases=("float8_e5m2", "e5m2"))
FP8_E4M3 = Format("fp8_e4m3", 4, 3, 7, aliases=("float8_e4m3",))  # ml_dtypes' IEEE-style E4M3: inf, NaNs
FP8_E3M4 = Format("fp8_e3m4", 3, 4, 3, aliases=("float8_e3m4", "e3m4"))  # ml_dtypes' IEEE-style E3M4
FP8_E4M3FNUZ = Format(
    "fp8_e4m3fnuz", 4, 3, 8, nan="fnuz", has_inf=False, aliases=("float8_e4m3fnuz", "e4m3fnuz")
)
FP8_E5M2FNUZ = Format(
    "fp8_e5m2fnuz", 5, 2, 16, nan="fnuz", has_inf=False, aliases=("float8_e5m2fnuz", "e5m2fnuz")
)
FP8_E4M3B11FNUZ = Format(
    "fp8_e4m3b11fnuz", 4, 3, 11, nan="fnuz", has_inf=False, aliases=("float8_e4m3b11fnuz", "e4m3b11fnuz")
)
FP6_E3M2FN = Format("fp6_e3m2fn", 3, 2, 3, nan="none", has_inf=False, aliases=("float6_e3m2fn", "e3m2"))
FP6_E2M3FN = Format("fp6_e2m3fn", 2, 3, 1, nan="none", has_inf=False, aliases=("float6_e2m3fn", "e2m3"))
FP4_E2M1FN = Format("fp4_e2m1fn", 2, 1, 1, nan="none", has_inf=False, aliases=("float4_e2m1fn", "e2m1", "fp4"))
E8M0FNU = Format(
    "e8m0fnu",
    8,
    0,
    127,
    signed=False,
    nan="fn",
    has_inf=False,
    has_subnormals=False,
    aliases=("float8_e8m0fnu", "e8m0", "fp8_e8m0fnu", "ue8m0"),
)
# ml_dtypes' float8_e5m3fnu (0.7): unsigned, 5 exponent bits (bias 15) and 3 mantissa bits, subnormals and +0,
# no inf, NaN 0xFF; max 0xFE = 1.75 * 2^16 = 114688
FP8_E5M3FNU = Format(
    "fp8_e5m3fnu", 5, 3, 15, signed=False, nan="fn", has_inf=False, aliases=("float8_e5m3fnu", "e5m3fnu")
)
INT2, UINT2 = IntFormat(2, True), IntFormat(2, False)
INT4, UINT4 = IntFormat(4, True), IntFormat(4, False)
INT8, UINT8 = IntFormat(8, True), IntFormat(8, False)
INT16, UINT16 = IntFormat(16, True), IntFormat(16, False)
INT32, UINT32 = IntFormat(32, True), IntFormat(32, False)
INT64, UINT64 = IntFormat(64, True), IntFormat(64, False)

_REGISTRY: dict[str, AnyFormat] = {}
# names that more than one format could mean: resolved only with the candidates listed
_AMBIGUOUS: dict[str, tuple[str, ...]] = {
    "e4m3": ("fp8_e4m3fn", "fp8_e4m3", "fp8_e4m3fnuz", "fp8_e4m3b11fnuz"),
    "fp8": ("fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz"),
    "fp6": ("fp6_e3m2fn", "fp6_e2m3fn"),
    "int": ("int32", "int64"),
}


def _norm(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "")


def register(fmt: AnyFormat, *, replace: bool = False) -> AnyFormat:
    """Add a format (and its aliases) to the registry so names resolve to it."""
    if not isinstance(fmt, (Format, IntFormat)):
        raise TypeError(f"register takes a Format or IntFormat (fmt), got {type(fmt).__name__}")
    for key in (fmt.name, *fmt.aliases):
        k = _norm(key)
        if k in _REGISTRY and _REGISTRY[k] != fmt and not replace:
            raise ValueError(f"format name {key!r} is already taken by {_REGISTRY[k].name}; pass replace=True")
        _REGISTRY[k] = fmt
    return fmt


for _f in (
    FP64, FP32, TF32, FP16, BF16, FP8_E4M3FN, FP8_E5M2, FP8_E4M3, FP8_E3M4, FP8_E4M3FNUZ, FP8_E5M2FNUZ,
    FP8_E4M3B11FNUZ, FP6_E3M2FN, FP6_E2M3FN, FP4_E2M1FN, E8M0FNU, FP8_E5M3FNU,
):
    register(_f)
for _i in (INT2, UINT2, INT4, UINT4, INT8, UINT8, INT16, UINT16, INT32, UINT32, INT64, UINT64):
    register(_i)
    if not _i.signed:
        _REGISTRY[_norm(_i.name.replace("int", "i"))] = _i  # ui8, ui16 ... (i8 is numpy's int64: see format_of)
    if _i.signed:
        _REGISTRY[f"s{_i.bits}"] = _i


def registry() -> list[AnyFormat]:
    """Every registered format, each once, floats first (widest first), then integers."""
    seen: list[AnyFormat] = []
    for f in _REGISTRY.values():
        if f not in seen:
            seen.append(f)
    return seen


def _from_dtype_name(name: str) -> AnyFormat | None:
    k = _norm(name)
    return _REGISTRY.get(k)


# torch dtype names -> numoracle names (torch is never imported for this: a dtype's str() names it)
TORCH_NAMES = {
    "float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
    "float8_e4m3fn": "fp8_e4m3fn", "float8_e5m2": "fp8_e5m2", "float8_e4m3fnuz": "fp8_e4m3fnuz",
    "float8_e5m2fnuz": "fp8_e5m2fnuz", "float8_e8m0fnu": "e8m0fnu", "int8": "int8", "uint8": "uint8",
    "int16": "int16", "uint16": "uint16", "int32": "int32", "uint32": "uint32", "int64": "int64",
    "uint64": "uint64",
}


def torch_dtype_format(dt: Any) -> AnyFormat | None:
    """Format of a torch dtype (``torch.float16`` -> FP16), or None."""
    name = str(dt).removeprefix("torch.")
    key = TORCH_NAMES.get(name) or ("fp4_e2m1fn" if name == "float4_e2m1fn_x2" else None)  # packed pairs
    return format_of(key) if key else None


def format_of(x: Any) -> AnyFormat:
    """Resolve a format from a name, a Format, a numpy / ml_dtypes / torch dtype, or an array.

    >>> format_of("half") is FP16
    True
    """
    if isinstance(x, (Format, IntFormat)):
        return x
    if x is None:
        raise TypeError("format is None; give a format: a name ('fp16'), a Format, or a dtype")
    if isinstance(x, str):
        k = _norm(x)
        if is_numpy_code(k):
            return from_numpy_code(x, _from_dtype_name)
        if k in _REGISTRY:
            return _REGISTRY[k]
        if k in _AMBIGUOUS:
            raise ValueError(f"format name {x!r} is ambiguous; say which: {', '.join(_AMBIGUOUS[k])}")
        close = difflib.get_close_matches(k, list(_REGISTRY), n=4, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"unknown format {x!r}{hint} (numoracle formats lists them all)")
    mod = type(x).__module__ or ""
    if mod.startswith("torch"):
        if hasattr(x, "dtype") and not isinstance(x, type):
            x = x.dtype  # a tensor: its dtype names the format
        fmt = torch_dtype_format(x)
        if fmt is not None:
            return fmt
        raise ValueError(f"torch dtype {x} has no numoracle format")
    import numpy as np

    if hasattr(x, "dtype") and not isinstance(x, type) and not isinstance(x, np.dtype):
        return format_of(x.dtype)
    try:
        dt = np.dtype(x)
    except TypeError:
        raise TypeError(f"cannot resolve a format from {x!r} (type {type(x).__name__})") from None
    if dt == np.bool_:
        raise ValueError("bool arrays have no numoracle format; convert to uint8 first")
    fmt = _from_dtype_name(dt.name)
    if fmt is None:
        given = "" if isinstance(x, np.dtype) else f" (read from {x!r:.60})"
        raise ValueError(f"dtype {dt}{given} has no numoracle format")
    return fmt


@lru_cache(maxsize=1024)
def _overflow_threshold(fmt: Format, mode: Rounding, sign: int) -> tuple[Fraction, bool]:
    """``Format.overflow_threshold``, cached: proofs and bounds ask it per value."""
    return overflow_rule(fmt.max_finite, fmt.top_ulp, bool(fmt.max_significand & 1), mode, sign)
