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

A library's own cast is :func:`numoracle.conformance.native.native_cast`; which record explains each
mismatching element is :func:`numoracle.conformance.attribution.classify`.

>>> [d.status("0.7.0") for d in deviations_for("ml_dtypes", "fp64", "bf16", version="any")
...  if d.kind == "double_rounding"]
['fixed in 0.7']

Kinds, and the predicate ``classify`` applies to a mismatching element for each:

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
from dataclasses import dataclass

from ..core.formats.format import AnyFormat, format_of
from ..core.formats.policy import Rounding
from .native import LIBRARIES
from .versions import cpu_matches, installed_version, version_at_least, version_clauses, version_matches

__all__ = ["Deviation", "KNOWN_DEVIATIONS", "KINDS", "LIBRARIES", "deviations_for", "fixed_for", "installed_version"]

KINDS = (
    "double_rounding", "nan_payload_or_sign", "nan_to_policy", "saturation_vs_nan", "subnormal",
    "sign_dropped", "zero_to_min", "tie_break", "flush_to_zero", "other",
)


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
    ``cpu``: where the library's result depends on the CPU it runs on, the CPUs that show it (``"without
    avx512_fp16"``: those whose /proc/cpuinfo flags lack it; ``""``: every CPU); on the others the witness gives
    the correct code, and the record does not apply there (``on_this_cpu``).
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
    cpu: str = ""

    def __post_init__(self) -> None:
        if self.cpu and not (self.cpu.startswith("without ") and len(self.cpu.split()) == 2):
            raise ValueError(f"cpu must be '' or 'without FLAG' (a /proc/cpuinfo flag), got {self.cpu!r}")
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
        return version_clauses(self.versions.partition(" ")[2])

    def covers(self, library: str, src: AnyFormat | str, dst: AnyFormat | str) -> bool:
        """True when this deviation may occur in ``library``'s cast from ``src`` to ``dst`` (any version)."""
        if library != self.library:
            return False
        pair = f"{format_of(src).name}->{format_of(dst).name}"
        return pair == f"{self.src}->{self.dst}" or any(fnmatch.fnmatchcase(pair, p) for p in self.scope)

    def on_this_cpu(self) -> bool:
        """Does this machine's CPU show it (``cpu``; True where its flags cannot be read)?"""
        return cpu_matches(self.cpu)

    def holds_for(self, version: str | None) -> bool:
        """True when the library at ``version`` shows this deviation (None, an unknown version: True)."""
        return version is None or version_matches(self._clauses(), version)

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
        if fixed is not None and version_at_least(version, fixed):
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


def _dev(lib: tuple[str, tuple[str, ...]], *args, scope: tuple[str, ...] = (), cpu: str = "") -> Deviation:
    versions, seen = lib
    return Deviation(versions.partition(" ")[0], versions, *args, scope=scope, seen_on=seen, cpu=cpu)


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
        _JAX, "fp64", "fp16", "rne",
        _DR_F64.format(dst="fp16", w="1 + 2^-11 + 2^-30") + " Only on CPUs without AVX512-FP16 (seen on an AMD "
        "EPYC, Zen 5): on a CPU that converts float64 to float16 in one instruction (an Intel CPU with AVX512-FP16) "
        "the same jax gives the correctly rounded 0x3c01.",
        *_DR_WITNESSES["fp16"][:3], "double_rounding", cpu="without avx512_fp16",
    ),
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
    (every record where the library is not installed); ``"any"`` every record, whatever its versions
    and CPUs. Records of a CPU condition (``Deviation.cpu``) apply where this machine's CPU meets it.
    """
    if version == "any":
        return tuple(d for d in KNOWN_DEVIATIONS if d.covers(library, src, dst))
    v = _deviation_version(library, version)
    return tuple(d for d in KNOWN_DEVIATIONS if d.covers(library, src, dst) and d.holds_for(v) and d.on_this_cpu())


def fixed_for(library: str, src: AnyFormat | str, dst: AnyFormat | str, *,
              version: str | None = None) -> tuple[Deviation, ...]:
    """The recorded deviations of the pair that ``library`` at ``version`` (None: installed) does not show (on a
    CPU that the record's ``cpu`` condition names: on the others it is not fixed, it does not occur)."""
    v = _deviation_version(library, version)
    if v is None:
        return ()
    return tuple(d for d in KNOWN_DEVIATIONS if d.covers(library, src, dst) and not d.holds_for(v) and d.on_this_cpu())


