"""Where numpy, ml_dtypes, torch and jax casts differ from numoracle's contract, kept as data.

numoracle's conversions follow ``docs/semantics.md``. The native libraries implement the same
semantics for most pairs (RNE, their own overflow choice) and are used as independent oracles
in the tests; where they do not, the difference is recorded here as a :class:`Deviation` with
a witness (one source code, the library's result, numoracle's result) that a test reproduces.
Every witness was checked by hand against exact rational arithmetic; the reason numoracle's
code is the right one is in each ``description``.

A deviation is a fact about some versions of a library: each record says which (``versions``,
e.g. ``"ml_dtypes <0.7"``: ml_dtypes 0.7.0 rounds float64 sources correctly, where 0.5 and 0.6
went through float32) and where its witness was reproduced (``seen_on``). :func:`deviations_for`,
:func:`classify` and the sweeps apply only the records that hold for the installed version
(every record of a library that is not installed, whose version is unknown);
:func:`fixed_for` lists those that no longer do (``Deviation.status``: ``"fixed in 0.7"``).

:func:`native_cast` runs a library's own cast and returns codes; :func:`classify` labels each
element of a comparison with the known deviation that explains it (or ``"unexplained"``):

>>> import numpy as np
>>> codes = np.array([0x3FF0100000400000], np.uint64)  # 1 + 2^-8 + 2^-30, just above a BF16 midpoint
>>> str(classify("ml_dtypes", "fp64", "bf16", codes, [0x3F80], version="0.6.0")[0])  # 0.6 rounded via float32
'double_rounding'
>>> str(classify("ml_dtypes", "fp64", "bf16", codes, [0x3F80], version="0.7.0")[0])  # 0.7 does not
'unexplained'
>>> [d.status("0.7.0") for d in deviations_for("ml_dtypes", "fp64", "bf16", version="any")
...  if d.kind == "double_rounding"]
['fixed in 0.7']

Kinds, and the predicate :func:`classify` applies to a mismatching element for each:

* ``nan_payload_or_sign``: both results are NaN (the libraries keep the source's sign and
  payload; numoracle gives the canonical positive quiet NaN). Compare NaN by class.
* ``nan_to_policy``: a NaN source into a format without NaN (FP6/FP4): the library gives a zero
  (ml_dtypes 0.6: the zero of the *opposite* sign), numoracle ``nan_to='max'``.
* ``saturation_vs_nan``: the library saturates where numoracle's default overflow is NaN; the
  library's code equals numoracle's with ``overflow='saturate'``.
* ``double_rounding``: the library rounds to float32 first; its code equals numoracle's cast
  of the float32-rounded source (possibly combined with another known deviation of that pair).
* ``subnormal``: a source below 2^-126 (a float32 subnormal) into E8M0: the library returns
  the next code up (2^-126 where 2^-127 is nearest).
* ``sign_dropped``: a negative source into unsigned E8M0: the library casts ``|x|``, numoracle
  gives NaN (negative values have no representation).
* ``zero_to_min``: +-0 into zero-less E8M0: the library gives the smallest value 2^-127,
  numoracle NaN (0 has no representation and is not "below the smallest value").
* ``tie_break``: the source lies exactly midway between the library's result and numoracle's
  (two neighbours): the library breaks the tie the other way (ml_dtypes 0.5.0 into E8M0).
* ``flush_to_zero``: the library's code is numoracle's with ``ftz=True`` and/or ``daz=True``
  (jax on the CPU flushes float32 subnormals, inputs and results).
* ``other``: documented only; it explains no element (a sweep reports such elements as unexplained).
"""

from __future__ import annotations

import fnmatch
import math
import re
import sys
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import numpy as np

from ..core.codekeys import is_nan
from ..core.convert import cast as _engine_cast
from ..core.convert import decode
from ..core.formats import FP32, TORCH_NAMES, UINT64, AnyFormat, format_of
from ..core.interop import as_native, is_torch, native_dtype, to_codes
from ..core.policy import Rounding

_NARROW = ("fp6_e3m2fn", "fp6_e2m3fn", "fp4_e2m1fn")

__all__ = [
    "Deviation", "KNOWN_DEVIATIONS", "KINDS", "LIBRARIES", "native_cast", "classify", "classify_ids",
    "deviations_for", "fixed_for", "installed_version",
]

LIBRARIES = ("numpy", "ml_dtypes", "torch", "jax")
KINDS = (
    "double_rounding", "nan_payload_or_sign", "nan_to_policy", "saturation_vs_nan", "subnormal",
    "sign_dropped", "zero_to_min", "tie_break", "flush_to_zero", "other",
)
_NUMPY_BUILTIN = frozenset(
    ["float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
)


# ---- library versions ---------------------------------------------------------------------------
@cache
def installed_version(library: str) -> str | None:
    """The installed version of ``library`` (``"0.7.0"``, ``"2.13.0+cpu"``); None where it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(library)
    except PackageNotFoundError:
        mod = sys.modules.get(library)
        v = getattr(mod, "__version__", None)
        return v if isinstance(v, str) else None


def _release(v: str) -> tuple[int, ...]:
    """The release numbers of a version string: ``"2.13.0+cpu"`` -> (2, 13, 0); ``"0.7.0rc1"`` -> (0, 7, 0)."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", v)
    if m is None:
        raise ValueError(f"not a version: {v!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a > b) - (a < b)


_CLAUSE = re.compile(r"(<=|>=|==|!=|<|>)?\s*(\d+(?:\.\d+)*)(\.\*)?")
_OPS = {"<": lambda c: c < 0, "<=": lambda c: c <= 0, ">": lambda c: c > 0, ">=": lambda c: c >= 0,
        "==": lambda c: c == 0, "!=": lambda c: c != 0}


def _clauses(spec: str) -> list[tuple[str, tuple[int, ...], bool]]:
    """``"<0.7"``, ``">=0.6,<0.7"``, ``"2.13.*"`` -> [(op, release, prefix)]; ``""`` or ``"*"``: no clause."""
    spec = spec.strip()
    if spec in ("", "*"):
        return []
    out = []
    for part in spec.split(","):
        m = _CLAUSE.fullmatch(part.strip())
        if m is None:
            raise ValueError(f"bad version clause {part.strip()!r} in {spec!r}; use e.g. '<0.7', '>=0.5,<0.6', "
                             "'0.6.0' or '2.13.*'")
        out.append((m.group(1) or "==", _release(m.group(2)), m.group(3) is not None))
    return out


def _matches(clauses: list[tuple[str, tuple[int, ...], bool]], version: str) -> bool:
    v = _release(version)
    for op, ref, prefix in clauses:
        if prefix:
            hit = v[: len(ref)] == ref
            if hit != (op == "=="):
                return False
        elif not _OPS[op](_cmp(v, ref)):
            return False
    return True


@dataclass(frozen=True)
class Deviation:
    """One known difference between a library's cast and numoracle's, with a witness.

    ``versions``: the library versions that show it, as ``"<library> <clauses>"``: ``"ml_dtypes <0.7"``,
    ``"ml_dtypes >=0.6,<0.7"``, ``"torch 2.13.*"``, a bare version (``"ml_dtypes 0.6.0"``: that one),
    or the library name alone (every version: nothing has fixed it yet). ``seen_on``: the versions
    where the witness was reproduced. ``witness_source_hex`` is a code of ``src``; the library's
    cast to ``dst`` gives ``library_code_hex`` and ``numoracle.cast(..., rounding=rounding)`` with
    the destination's default policy gives ``correct_code_hex``. ``scope`` lists further
    ``"src->dst"`` patterns (``fnmatch`` style, format names) where the same kind of deviation occurs.
    """

    library: str
    versions: str
    src: str
    dst: str
    rounding: str
    description: str
    witness_source_hex: str
    library_code_hex: str
    correct_code_hex: str
    kind: str
    scope: tuple[str, ...] = ()
    seen_on: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.library not in LIBRARIES:
            raise ValueError(f"library must be one of {LIBRARIES}, got {self.library!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        for name in (self.src, self.dst):
            format_of(name)
        Rounding.of(self.rounding)
        lib, _, _ = self.versions.partition(" ")
        if lib != self.library:
            raise ValueError(f"versions must start with the library's name ({self.library!r}), got {self.versions!r}")
        self._clauses()
        for v in self.seen_on:
            if not self.holds_for(v):
                raise ValueError(f"seen on {self.library} {v}, outside its versions {self.versions!r}")

    def _clauses(self) -> list[tuple[str, tuple[int, ...], bool]]:
        return _clauses(self.versions.partition(" ")[2])

    def covers(self, library: str, src: AnyFormat | str, dst: AnyFormat | str) -> bool:
        """True when this deviation may occur in ``library``'s cast from ``src`` to ``dst`` (any version)."""
        if library != self.library:
            return False
        pair = f"{format_of(src).name}->{format_of(dst).name}"
        return pair == f"{self.src}->{self.dst}" or any(fnmatch.fnmatchcase(pair, p) for p in self.scope)

    def holds_for(self, version: str | None) -> bool:
        """True when the library at ``version`` shows this deviation (None, an unknown version: True)."""
        return version is None or _matches(self._clauses(), version)

    @property
    def fixed_in(self) -> str | None:
        """The first version without it (the bound of a ``<X`` clause), None while no version has fixed it."""
        bounds = [ref for op, ref, prefix in self._clauses() if op == "<" and not prefix]
        return ".".join(map(str, min(bounds))) if bounds else None

    def status(self, version: str | None) -> str:
        """``"holds"`` for ``version``, ``"fixed in X.Y"`` past its range, else ``"not in <version>"``."""
        if self.holds_for(version):
            return "holds"
        fixed = self.fixed_in
        if fixed is not None and _cmp(_release(version), _release(fixed)) >= 0:
            return f"fixed in {fixed}"
        return f"not in {version}"

    @property
    def witness(self) -> tuple[int, int, int]:
        """(source code, library code, correct code) as ints."""
        return int(self.witness_source_hex, 16), int(self.library_code_hex, 16), int(self.correct_code_hex, 16)


# Which versions show each deviation. The witnesses were reproduced on the versions in ``seen_on``
# (tests/core/test_native.py checks each one against the installed version on every run).
_NP = ("numpy", ("1.24.0", "2.4.6"))
_ML_ALL = ("ml_dtypes", ("0.5.0", "0.5.1", "0.5.3", "0.5.4", "0.6.0", "0.7.0"))  # still there in the newest release
_ML_BEFORE_07 = ("ml_dtypes <0.7", ("0.5.0", "0.5.1", "0.5.3", "0.5.4", "0.6.0"))  # 0.7.0 rounds these correctly
_ML_051_TO_07 = ("ml_dtypes >=0.5.1,<0.7", ("0.5.1", "0.5.3", "0.5.4", "0.6.0"))
_ML_050 = ("ml_dtypes <0.5.1", ("0.5.0",))  # 0.5.1 breaks E8M0 ties as numoracle does
_TORCH = ("torch", ("2.13.0",))
_JAX = ("jax", ("0.10.2",))  # jax.Array.astype on the CPU device (XLA's convert), jaxlib of the same version

_DR_F64 = ("float64 -> {dst} converts to float32 first and rounds again: {w} (just above a {dst} midpoint) "
           "rounds onto the midpoint in float32, then the tie goes to even; the exact value lies above the "
           "midpoint, so the correctly rounded result is the upper neighbour.")
_DR_INT = ("{src} -> {dst} converts to float32 first: the integer {w} (above a {dst} midpoint) rounds onto "
           "the midpoint in float32 and the tie goes to even; correctly rounded it is the upper neighbour.")
_DR_INT_DOWN = ("{src} -> {dst} converts to float32 first: the integer {w} (just below a {dst} midpoint) rounds "
                "up onto the midpoint in float32 and the tie goes to the upper, even, neighbour; correctly "
                "rounded it is the lower neighbour.")


def _dev(lib: tuple[str, tuple[str, ...]], *args, scope: tuple[str, ...] = ()) -> Deviation:
    versions, seen = lib
    return Deviation(versions.partition(" ")[0], versions, *args, scope=scope, seen_on=seen)


def _dr(lib, src: str, dst: str, w: str, lc: str, cc: str, wdesc: str, tmpl: str = _DR_F64) -> Deviation:
    return _dev(lib, src, dst, "rne", tmpl.format(src=src, dst=dst, w=wdesc), w, lc, cc, "double_rounding")


# float64 -> dst through float32: (witness fp64 code, the library's code, the correct code, the value)
_DR_WITNESSES = {
    "fp16": ("0x3ff0020000400000", "0x3c00", "0x3c01", "1 + 2^-11 + 2^-30"),
    "bf16": ("0x3ff0100000400000", "0x3f80", "0x3f81", "1 + 2^-8 + 2^-30"),
    "fp8_e4m3fn": ("0x3ff1000000400000", "0x38", "0x39", "1.0625 + 2^-30"),
    "fp8_e5m2": ("0x3ff2000000400000", "0x3c", "0x3d", "1.125 + 2^-30"),
    "fp8_e4m3": ("0x3ff1000000400000", "0x38", "0x39", "1.0625 + 2^-30"),
    "fp8_e3m4": ("0x3ff0800000400000", "0x30", "0x31", "1.03125 + 2^-30"),
    "fp8_e4m3fnuz": ("0x3ff1000000400000", "0x40", "0x41", "1.0625 + 2^-30"),
    "fp8_e5m2fnuz": ("0x3ff2000000400000", "0x40", "0x41", "1.125 + 2^-30"),
    "fp8_e4m3b11fnuz": ("0x3ff1000000400000", "0x58", "0x59", "1.0625 + 2^-30"),
    "fp6_e3m2fn": ("0x3ff2000000400000", "0xc", "0xd", "1.125 + 2^-30"),
    "fp6_e2m3fn": ("0x3ff1000000400000", "0x8", "0x9", "1.0625 + 2^-30"),
    "fp4_e2m1fn": ("0x3ff4000000400000", "0x2", "0x3", "1.25 + 2^-30"),
}
_DR_ML = ("bf16", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3", "fp8_e3m4", "fp8_e4m3fnuz", "fp8_e5m2fnuz",
          "fp8_e4m3b11fnuz", "fp6_e3m2fn", "fp6_e2m3fn", "fp4_e2m1fn")
_DR_TORCH = ("fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz")


KNOWN_DEVIATIONS: tuple[Deviation, ...] = (
    # ---- NaN sign and payload: every library keeps them; numoracle gives the canonical NaN ----
    _dev(
        _NP, "fp32", "fp16", "rne",
        "NaN sign and payload propagate (float32 -NaN 0xFFC00001 -> float16 0xFE00); numoracle returns the "
        "canonical positive quiet NaN 0x7E00 (docs/semantics.md, Specials). Both are NaN: compare by class.",
        "0xffc00001", "0xfe00", "0x7e00", "nan_payload_or_sign", scope=("*->*",),
    ),
    _dev(
        _ML_ALL, "fp32", "fp8_e5m2", "rne",
        "NaN sign propagates (float32 -NaN -> e5m2 0xFE, bfloat16 0xFFC0); numoracle returns the canonical "
        "NaN 0x7E. Both are NaN: compare by class.",
        "0xffc00000", "0xfe", "0x7e", "nan_payload_or_sign", scope=("*->*",),
    ),
    _dev(
        _TORCH, "fp32", "bf16", "rne",
        "float32 -> bfloat16 gives 0xFFFF (a negative NaN) for every NaN, +NaN included; other torch casts "
        "keep the NaN's sign (float32 -NaN -> float16 0xFE00). numoracle returns the canonical NaN 0x7FC0.",
        "0x7fc00000", "0xffff", "0x7fc0", "nan_payload_or_sign", scope=("*->*",),
    ),
    _dev(
        _JAX, "fp32", "bf16", "rne",
        "NaN sign and payload propagate (float32 -NaN 0xFFC00000 -> bfloat16 0xFFC0, float16 0x7C01 -> "
        "0x7C01: a signalling NaN stays signalling); numoracle returns the canonical quiet NaN 0x7FC0. Both "
        "are NaN: compare by class.",
        "0xffc00000", "0xffc0", "0x7fc0", "nan_payload_or_sign", scope=("*->*",),
    ),
    # ---- double rounding through float32 (the same witnesses for both libraries) ----
    *(_dr(lib, "fp64", dst, w, got, want, what)
      for lib, dsts in ((_ML_BEFORE_07, _DR_ML), (_TORCH, _DR_TORCH))
      for dst, (w, got, want, what) in _DR_WITNESSES.items() if dst in dsts),
    *(_dev(
        lib, "fp64", "e8m0fnu", "rne",
        "float64 -> e8m0 converts to float32 first: 1.5 - 2^-30 rounds up onto 1.5 (the midpoint between 1 and "
        "2) in float32, and the tie goes to 2 (0x80); the exact value is below 1.5, so the nearest is 1 (0x7F).",
        "0x3ff7ffffffc00000", "0x80", "0x7f", "double_rounding",
    ) for lib in (_ML_BEFORE_07, _TORCH)),
    *(_dev(
        lib, "int32", "bf16", "rne", _DR_INT.format(src="int32", dst="bf16", w="2^25 + 2^17 + 1"),
        "0x2020001", "0x4c00", "0x4c01", "double_rounding", scope=("uint32->bf16", "int64->bf16", "uint64->bf16"),
    ) for lib in (_ML_BEFORE_07, _TORCH)),
    *(_dev(
        lib, "int32", "e8m0fnu", "rne",
        _DR_INT_DOWN.format(src="int32", dst="e8m0fnu", w="3*2^24 - 1 (midpoint 1.5*2^25)"),
        "0x2ffffff", "0x99", "0x98", "double_rounding",
        scope=("uint32->e8m0fnu", "int64->e8m0fnu", "uint64->e8m0fnu"),
    ) for lib in (_ML_051_TO_07, _TORCH)),
    _dev(
        _ML_050, "int32", "e8m0fnu", "rne",
        "int32 -> e8m0fnu converts to float32 first: the integer 3*2^24 + 1 (just above the midpoint 1.5*2^25 "
        "of 2^25 and 2^26) rounds down onto the midpoint in float32, and ml_dtypes 0.5.0 breaks that tie "
        "towards 2^25 (0x98, see tie_break); correctly rounded it is the upper neighbour 2^26 (0x99).",
        "0x3000001", "0x98", "0x99", "double_rounding",
        scope=("uint32->e8m0fnu", "int64->e8m0fnu", "uint64->e8m0fnu"),
    ),
    _dr(_JAX, "fp64", "bf16", *_DR_WITNESSES["bf16"]),
    _dev(
        _JAX, "fp64", "e8m0fnu", "rne",
        "float64 -> e8m0 converts to float32 first: (1.5 - 2^-52) * 2^-127, nearest to 2^-127 (0x00), rounds to "
        "the float32 subnormal 1.5 * 2^-127, which jax then rounds up to 2^-126 (0x01; see subnormal).",
        "0x3807ffffffffffff", "0x01", "0x00", "double_rounding",
    ),
    _dev(
        _JAX, "int32", "bf16", "rne", _DR_INT.format(src="int32", dst="bf16", w="2^25 + 2^17 + 1"),
        "0x2020001", "0x4c00", "0x4c01", "double_rounding", scope=("uint32->bf16", "int64->bf16", "uint64->bf16"),
    ),
    _dev(
        _JAX, "int32", "e8m0fnu", "rne",
        _DR_INT_DOWN.format(src="int32", dst="e8m0fnu", w="3*2^24 - 1 (midpoint 1.5*2^25)"),
        "0x2ffffff", "0x99", "0x98", "double_rounding",
        scope=("uint32->e8m0fnu", "int64->e8m0fnu", "uint64->e8m0fnu"),
    ),
    # ---- subnormals flushed (jax on the CPU runs XLA with flush-to-zero and denormals-are-zero) ----
    _dev(
        _JAX, "fp32", "fp64", "rne",
        "float32 subnormals read as zero: 2^-149 (0x00000001) -> float64 +0, where the exact value 2^-149 is a "
        "float64 (0x36A0000000000000); float64 -> float32 and -> bfloat16 results below 2^-126 give 0 as well "
        "(0x37A142C800000000 -> float32 0). numoracle with daz=True / ftz=True gives jax's codes.",
        "0x00000001", "0x0000000000000000", "0x36a0000000000000", "flush_to_zero", scope=("*->*",),
    ),
    # ---- NaN into formats without NaN ----
    *(
        _dev(
            _ML_ALL, "fp32", dst, "rne",
            f"NaN into {dst} (no NaN) gives a zero of the opposite sign (+NaN -> -0 {neg0}, -NaN -> +0); "
            f"numoracle's default nan_to='max' gives +max {mx} (as PTX cvt .satfinite does).",
            "0x7fc00000", neg0, mx, "nan_to_policy", scope=(f"*->{dst}",),
        )
        for dst, neg0, mx in (
            ("fp6_e3m2fn", "0x20", "0x1f"), ("fp6_e2m3fn", "0x20", "0x1f"), ("fp4_e2m1fn", "0x8", "0x7")
        )
    ),
    _dev(
        _JAX, "fp32", "fp4_e2m1fn", "rne",
        "NaN into fp4_e2m1fn (no NaN) gives -0 (0x8) whatever the NaN's sign; numoracle's default nan_to='max' "
        "gives +max 0x7 (as PTX cvt .satfinite does).",
        "0x7fc00000", "0x8", "0x7", "nan_to_policy", scope=("*->fp4_e2m1fn",),
    ),
    _dev(
        _JAX, "fp4_e2m1fn", "int8", "rtz",
        "fp4_e2m1fn +-6.0 (0x7, 0xF), its largest magnitude, converts to the integer type's max / min (int8 "
        "127 / -128) as if it were an infinity; 6 is in range of every integer type, and numoracle gives 6. "
        "No kind explains this: recorded, and reported as unexplained by sweeps.",
        "0x7", "0x7f", "0x6", "other", scope=("fp4_e2m1fn->*",),
    ),
    _dev(
        _JAX, "bf16", "e8m0fnu", "rne",
        "bfloat16 0x0041 = (65/64) * 2^-127: the nearest E8M0 value is 2^-127 (0x00); jax rounds every value "
        "in (2^-127, 2^-126) up to 2^-126 (0x01).",
        "0x0041", "0x01", "0x00", "subnormal", scope=("*->e8m0fnu",),
    ),
    # ---- E8M0 ----
    _dev(
        _ML_BEFORE_07, "bf16", "e8m0fnu", "rne",
        "bfloat16 0x0041 = 65 * 2^-133 = (65/64) * 2^-127 lies between the E8M0 values 2^-127 (0x00, distance "
        "2^-133) and 2^-126 (0x01, distance 63 * 2^-133): the nearest is 2^-127. ml_dtypes rounds every value in "
        "(2^-127, 2^-126) - the float32 subnormals - up to 2^-126.",
        "0x0041", "0x01", "0x00", "subnormal", scope=("*->e8m0fnu",),
    ),
    _dev(
        _ML_050, "fp32", "e8m0fnu", "rne",
        "3.0 lies midway between the E8M0 values 2 (0x80) and 4 (0x81). E8M0's significand is the implicit 1 "
        "alone, so RNE's even neighbour is the even multiple of the quantum 2^1, 4 (as IEEE rounding of the "
        "significand 1.1b to no fraction bits carries into the exponent; docs/semantics.md); ml_dtypes 0.5.0 "
        "takes the even code (0x80) instead, at every tie 3 * 2^k whose lower neighbour has an even code, the "
        "overflow tie 1.5 * 2^127 included (0xFE, where numoracle overflows to NaN).",
        "0x40400000", "0x80", "0x81", "tie_break", scope=("*->e8m0fnu",),
    ),
    _dev(
        _TORCH, "bf16", "e8m0fnu", "rne",
        "bfloat16 0x0041 = (65/64) * 2^-127: the nearest E8M0 value is 2^-127 (0x00); torch rounds every value "
        "in (2^-127, 2^-126) up to 2^-126 (0x01).",
        "0x0041", "0x01", "0x00", "subnormal", scope=("*->e8m0fnu",),
    ),
    _dev(
        _TORCH, "fp32", "e8m0fnu", "rne",
        "A negative value into unsigned E8M0 casts its magnitude (-1.0 -> 0x7F = 1.0); E8M0 has no negative "
        "values, so numoracle gives NaN (0xFF), as ml_dtypes does.",
        "0xbf800000", "0x7f", "0xff", "sign_dropped", scope=("*->e8m0fnu",),
    ),
    _dev(
        _TORCH, "fp32", "e8m0fnu", "rne",
        "+-0 into E8M0, which has no zero, gives its smallest value 2^-127 (0x00); 0 is not a value below "
        "2^-127 that rounds to it but a value with no representation, so numoracle gives NaN (0xFF), as "
        "ml_dtypes does.",
        "0x00000000", "0x00", "0xff", "zero_to_min", scope=("*->e8m0fnu",),
    ),
    # ---- saturation ----
    _dev(
        _TORCH, "fp32", "fp8_e4m3fn", "rne",
        "torch's CPU cast to float8_e4m3fn saturates: 464.5, 480, 1e6 and inf all give 448 (0x7E), -inf gives "
        "-448; 464 -> 448 agrees (the tie goes to the even 448). numoracle's default for FN formats is OCP's "
        "non-saturating mode (what ml_dtypes does): 464.5 rounds past 448 to NaN (0x7F). With "
        "overflow='saturate' numoracle gives torch's codes; NaN stays NaN.",
        "0x43e84000", "0x7e", "0x7f", "saturation_vs_nan", scope=("*->fp8_e4m3fn",),
    ),
)


def _deviation_version(library: str, version: str | None) -> str | None:
    return installed_version(library) if version is None else version


def deviations_for(library: str, src: AnyFormat | str, dst: AnyFormat | str, *,
                   version: str | None = None) -> tuple[Deviation, ...]:
    """The known deviations that may occur in ``library``'s cast from ``src`` to ``dst``.

    ``version``: the library's version whose records apply; None (the default) the installed one
    (every record where the library is not installed); ``"any"`` every record, whatever its versions.
    """
    if version == "any":
        return tuple(d for d in KNOWN_DEVIATIONS if d.covers(library, src, dst))
    v = _deviation_version(library, version)
    return tuple(d for d in KNOWN_DEVIATIONS if d.covers(library, src, dst) and d.holds_for(v))


def fixed_for(library: str, src: AnyFormat | str, dst: AnyFormat | str, *,
              version: str | None = None) -> tuple[Deviation, ...]:
    """The recorded deviations of the pair that ``library`` at ``version`` (None: installed) does not show."""
    v = _deviation_version(library, version)
    if v is None:
        return ()
    return tuple(d for d in KNOWN_DEVIATIONS if d.covers(library, src, dst) and not d.holds_for(v))


# ---------------------------------------------------------------------------------------
def _torch_dtype(fmt: AnyFormat):
    import torch

    for tname, fname in TORCH_NAMES.items():
        if fname == fmt.name:
            return getattr(torch, tname)
    raise ValueError(f"torch has no dtype for {fmt.name}")


def _to_torch(codes: np.ndarray, fmt: AnyFormat):
    import torch

    if fmt.is_integer:
        return torch.from_numpy(np.ascontiguousarray(as_native(codes, fmt)))
    signed = {8: np.uint8, 16: np.int16, 32: np.int32, 64: np.int64}[fmt.bits]
    t = torch.from_numpy(np.ascontiguousarray(codes.view(signed)))
    return t.view(_torch_dtype(fmt))


def _array_codes(a: np.ndarray) -> tuple[np.ndarray, AnyFormat]:
    """Codes and format of a numpy / ml_dtypes array (FP6/FP4 codes masked to their bits)."""
    fmt = format_of(a.dtype)
    codes = np.ascontiguousarray(a).view(fmt.code_dtype)
    if fmt.name in _NARROW:
        codes = codes & np.array((1 << fmt.bits) - 1, codes.dtype)
    return codes, fmt


def native_cast(x, dst, library: str) -> np.ndarray:
    """Run ``library``'s own cast of ``x`` to ``dst``; return the destination codes.

    ``x`` is a numpy / ml_dtypes array (for ``"torch"`` also a tensor, for ``"jax"`` a jax array).
    ``"numpy"`` and ``"ml_dtypes"`` call ``x.astype(dtype)`` (``"numpy"`` only between numpy's own
    dtypes, ``"ml_dtypes"`` only where one side is an ml_dtypes type); ``"torch"`` calls
    ``tensor.to(dtype)`` on the CPU; ``"jax"`` calls ``jax_array.astype(dtype)`` on the CPU device,
    with 64-bit types enabled for the call (so float64 and int64 arrays are not narrowed on the way
    in). Raises TypeError where the library has no such cast.
    """
    dst = format_of(dst)
    if library not in LIBRARIES:
        raise ValueError(f"library must be one of {LIBRARIES}, got {library!r}")
    if library == "jax":
        return _jax_cast(x, dst)
    if library == "torch":
        t = x if is_torch(x) else _to_torch(*_array_codes(np.asarray(x)))
        try:
            out = t.to(_torch_dtype(dst))
        except (RuntimeError, NotImplementedError) as e:
            raise TypeError(f"torch cannot cast {t.dtype} to {dst.name}: {e}") from None
        return to_codes(out)[0]
    a = np.asarray(x)
    dt = native_dtype(dst)
    if dt is None:
        raise ValueError(f"{dst.name} has no numpy or ml_dtypes dtype")
    builtin = a.dtype.name in _NUMPY_BUILTIN and dt.name in _NUMPY_BUILTIN
    if library == "numpy" and not builtin:
        raise ValueError(f"{a.dtype} -> {dt} is an ml_dtypes cast; use library='ml_dtypes'")
    if library == "ml_dtypes" and builtin:
        raise ValueError(f"{a.dtype} -> {dt} is numpy's own cast; use library='numpy'")
    with np.errstate(invalid="ignore", over="ignore"):
        out = a.astype(dt)
    return _array_codes(out)[0]


def _jax_x64():
    """A context in which jax keeps 64-bit types (jax narrows float64/int64 to 32 bits by default)."""
    import jax

    enable = getattr(jax, "enable_x64", None)  # jax >= 0.7
    if enable is not None:
        return enable(True)
    from jax.experimental import enable_x64  # older jax

    return enable_x64()


def _jax_cast(x, dst: AnyFormat) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    dt = native_dtype(dst)
    if dt is None or dst.name == "tf32":
        raise ValueError(f"{dst.name} has no jax dtype")
    with _jax_x64():
        cpu = jax.devices("cpu")[0]
        a = x if type(x).__module__.startswith(("jax", "jaxlib")) else np.asarray(x)
        try:
            t = jax.device_put(jnp.asarray(a), cpu)
            if t.dtype != np.asarray(a).dtype:
                raise TypeError(f"jax reads {np.asarray(a).dtype} as {t.dtype}")
            out = np.asarray(t.astype(dt))
        except (RuntimeError, NotImplementedError, ValueError) as e:
            raise TypeError(f"jax cannot cast {np.asarray(a).dtype} to {dst.name}: {e}") from None
    if out.dtype != dt:
        raise TypeError(f"jax cast to {dst.name} gave {out.dtype}")
    return _array_codes(out)[0]


# ---------------------------------------------------------------------------------------
# classification: why does the library's code differ from numoracle's?
def _cast(x, dst, **kw) -> np.ndarray:
    """numoracle.cast on a private copy (the engine writes into uint64 source arrays it is given)."""
    return _engine_cast(np.array(x, copy=True), dst, **kw)


def _values(codes: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Exact values as float64 (floats) or int64/uint64 (integers)."""
    return decode(codes, fmt)


def _negative(codes: np.ndarray, fmt: AnyFormat) -> np.ndarray:
    """Negative nonzero, non-NaN values (-inf included)."""
    v = _values(codes, fmt)
    return v < 0


def _abs_codes(codes: np.ndarray, fmt: AnyFormat) -> tuple[np.ndarray, AnyFormat]:
    if fmt.is_integer:
        v = _values(codes, fmt)
        if fmt.signed:
            mag = np.where(v < 0, (~v.view(np.uint64)) + np.uint64(1), v.view(np.uint64))
            return mag.astype(np.uint64), UINT64
        return codes, fmt
    if not fmt.signed:
        return codes, fmt
    return (codes & np.array(fmt.mag_mask, codes.dtype)).astype(codes.dtype), fmt


def _leaf(kind: str, src, dst, x, lib, ref, pol) -> np.ndarray:
    """Mask of elements where ``lib`` differs from ``ref`` exactly as ``kind`` says."""
    if kind == "nan_payload_or_sign":
        return is_nan(lib, dst) & is_nan(ref, dst)
    if kind == "nan_to_policy":
        if dst.is_integer or dst.has_nan or src.is_integer:
            return np.zeros(x.shape, bool)
        return is_nan(x, src) & (_values(lib, dst) == 0)
    if kind == "saturation_vs_nan":
        if dst.is_integer or not dst.has_nan:
            return np.zeros(x.shape, bool)
        sat = _cast(x, dst, src=src, rounding=pol["rounding"], overflow="saturate")
        return ~is_nan(x, src) & is_nan(ref, dst) & (lib == sat)
    if kind == "subnormal":
        if src.is_integer or dst.is_integer:
            return np.zeros(x.shape, bool)
        v = np.abs(_values(x, src))
        tiny = (v > 0) & (v < 2.0**-126)
        up = lib.astype(np.int64) == ref.astype(np.int64) + 1
        return tiny & up & ~is_nan(ref, dst)
    if kind == "zero_to_min":
        if dst.is_integer:
            return np.zeros(x.shape, bool)
        zero = (_values(x, src) == 0) & ~is_nan(x, src)
        return zero & is_nan(ref, dst) & (_values(lib, dst) == float(dst.min_subnormal))
    if kind == "tie_break":
        return _at_midpoint(x, src, lib, ref, dst)
    if kind == "flush_to_zero":
        hit = np.zeros(x.shape, bool)
        if dst.is_integer or src.is_integer:
            return hit
        for kw in ({"ftz": True}, {"daz": True}, {"ftz": True, "daz": True}):
            hit |= lib == _cast(x, dst, src=src, rounding=pol["rounding"], overflow=pol["overflow"], **kw)
        return hit & (lib != ref)
    return np.zeros(x.shape, bool)  # "other" explains nothing by itself; describe it as data only


def _at_midpoint(x: np.ndarray, src, lib: np.ndarray, ref: np.ndarray, dst) -> np.ndarray:
    """Where the source value is exactly midway between the values of ``lib`` and ``ref`` (then, with
    ``ref`` correctly rounded and ``lib != ref``, they are its two neighbours and ``x`` is a tie), or, where
    ``ref`` overflowed (inf or NaN), exactly at the overflow tie max_finite + ulp/2 with ``lib`` = +-max."""
    out = np.zeros(x.shape, bool)
    ok = ~is_nan(x, src) & ~is_nan(lib, dst) & (lib != ref)
    if not ok.any():
        return out
    idx = np.flatnonzero(ok)
    a, b, v = _values(lib[idx], dst), _values(ref[idx], dst), _values(x[idx], src)
    over = is_nan(ref[idx], dst) | (np.isinf(b) if not dst.is_integer else False)
    if src.is_integer or dst.is_integer:  # exactly, in Fractions: integers beyond 2^53 are not all float64s
        hit = np.array([all(map(math.isfinite, t)) and 2 * Fraction(t[0]) == Fraction(t[1]) + Fraction(t[2])
                        for t in zip(v.tolist(), a.tolist(), b.tolist())], bool)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            mid = a / 2 + b / 2  # exact: float64 values of formats the engine carries halve exactly
            hit = np.isfinite(v) & (v == mid)
    if np.any(over) and not dst.is_integer:
        top, mx = dst.max_finite + dst.top_ulp / 2, dst.max_finite
        for j in np.flatnonzero(over):
            vj, aj = v[j].item(), a[j].item()
            if math.isfinite(vj) and math.isfinite(aj) and Fraction(aj) in (mx, -mx):
                hit[j] = Fraction(vj) == (top if aj > 0 else -top)
    out[idx[hit]] = True
    return out


def _transform(kind: str, src, x):
    """(selected mask, new source format, new codes) for the kinds that change the input."""
    if kind == "double_rounding":
        if src.is_integer or src.bits > 32:
            return np.ones(x.shape, bool), FP32, _cast(x, FP32, src=src)
        return None
    if kind == "sign_dropped":
        sel = _negative(x, src) & ~is_nan(x, src)
        c, f = _abs_codes(x, src)
        return sel, f, c
    return None


def _explain(kinds: tuple[str, ...], src, dst, x, lib, ref, pol, labels: list[str]) -> np.ndarray:
    """Label ids per element (into ``labels``): the chain of kinds explaining lib != ref, 0 where none does."""
    out = np.zeros(x.shape, np.int16)

    def lid(name: str) -> int:
        if name not in labels:
            labels.append(name)
        return labels.index(name)

    for kind in kinds:
        idx = np.flatnonzero(out == 0)
        if not idx.size:
            break
        tr = _transform(kind, src, x[idx])
        if tr is None:
            hit = _leaf(kind, src, dst, x[idx], lib[idx], ref[idx], pol)
            out[idx[hit]] = lid(kind)
            continue
        sel, src2, x2 = tr
        idx, x2 = idx[sel], x2[sel]
        if not idx.size:
            continue
        ref2 = _cast(x2, dst, src=src2, **pol)
        same = lib[idx] == ref2
        out[idx[same]] = lid(kind)
        rest = ~same
        if rest.any():
            others = tuple(k for k in kinds if k != kind)
            sub = _explain(others, src2, dst, x2[rest], lib[idx[rest]], ref2[rest], pol, labels)
            for j in np.unique(sub[sub != 0]):
                out[idx[rest][sub == j]] = lid(f"{kind}+{labels[j]}")
    return out


def classify_ids(library: str, src, dst, src_codes, lib_codes, *, rounding: str = "rne",
                 overflow=None, version: str | None = None) -> tuple[np.ndarray, tuple[str, ...]]:
    """:func:`classify` as compact ids: (int16 array shaped like ``src_codes``, the label of each id).

    Id 0 is ``""`` (the codes agree), id 1 ``"unexplained"``; use this form for large sweeps.
    """
    src, dst = format_of(src), format_of(dst)
    x = np.asarray(src_codes).astype(src.code_dtype)
    lib = np.asarray(lib_codes).astype(dst.code_dtype)
    if x.shape != lib.shape:
        raise ValueError(f"src_codes has shape {x.shape}, lib_codes {lib.shape}")
    pol = {"rounding": rounding, "overflow": overflow}
    ref = _cast(x, dst, src=src, **pol)
    out = np.zeros(x.shape, np.int16)
    labels = ["", "unexplained"]
    mm = np.flatnonzero(lib.ravel() != ref.ravel())
    if mm.size:
        kinds = tuple(dict.fromkeys(d.kind for d in deviations_for(library, src, dst, version=version)))
        ids = _explain(kinds, src, dst, x.ravel()[mm], lib.ravel()[mm], ref.ravel()[mm], pol, labels)
        out.ravel()[mm] = np.where(ids == 0, 1, ids)
    return out, tuple(labels)


def classify(library: str, src, dst, src_codes, lib_codes, *, rounding: str = "rne", overflow=None,
             version: str | None = None) -> np.ndarray:
    """Label each element of a library-vs-numoracle comparison.

    Returns a string array shaped like ``src_codes``: ``""`` where the library's code equals
    ``numoracle.cast(src_codes, dst, src=src, rounding=rounding, overflow=overflow)``, the kind
    (or ``"kind+kind"`` chain) of the known deviation of ``library`` that explains the
    difference, or ``"unexplained"``. Only the deviations that ``library`` at ``version`` shows
    apply (None: the installed version; ``"any"``: every record, see :func:`deviations_for`).
    """
    ids, labels = classify_ids(library, src, dst, src_codes, lib_codes, rounding=rounding, overflow=overflow,
                               version=version)
    return np.array(labels)[ids]
