"""IEEE P3109's 8-bit binary{K}p{P} formats as numoracle Formats (interim report v3; gfloat 0.5.2 format_info_p3109).

binary8pP, P = 1..8: one zero (no -0), one NaN, subnormals; K - P exponent bits when signed.

* signed, extended domain (``binary8p{P}se``): NaN 0x80, +-inf at 0x7F / 0xFF, bias ``2^(K-P-1)``
  (``Format(nan='fnuz', has_inf=True)``, as ``Format.p3109``);
* signed, finite domain (``binary8p{P}sf``): NaN 0x80, no infinities, max finite at 0x7F;
* unsigned, finite domain (``binary8p{P}uf``): K - P + 1 exponent bits, bias ``2^(K-P)``, NaN 0xFF, max at 0xFE
  (``Format(signed=False, nan='fn')``);
* unsigned, extended domain (``binary8p{P}ue``): +inf at 0xFE and NaN at 0xFF: not a ``Format`` (the engine's
  unsigned formats have no infinity); :class:`P3109UnsignedExtended` (``core/p3109ue.py``) carries it on its
  finite sibling, for p3109_cast and p3109_decode.

P3109's saturation modes map onto ``overflow=`` of :func:`p3109_cast` (the table, with the directed modes'
exceptions, is in docs/formats.md, "P3109"): SatFinite -> ``"saturate"`` (finite overflow *and* +-inf to
+-max: numoracle's saturate, which does not keep infinities), SatPropagate -> ``"sat_propagate"`` (finite
overflow to +-max, +-inf kept; NaN in a finite-domain format; p3109_cast only, not the engine's ``Overflow``),
OvfInf / SatNone -> ``"ieee"`` (+-inf; NaN in a finite-domain format, where ``"nan"`` is the same).
P3109's ToOdd (``rto``) rounds with an unbounded exponent and then checks overflow, as gfloat's
``RoundMode.ToOdd`` does (gfloat main, commit de30dee, after the 0.5.2 release, which has no ToOdd): past
+-max it overflows unless max's code is odd and the value lies below the next step; the engine's ``rto``
keeps +-max there, so p3109_cast implements ToOdd itself.

**Round-to-nearest-even at P = 1 (and round-to-odd).** P3109 defines the tie-break on the encoding: in its
RoundToPrecision, ``CodeIsEven`` is ``I`` even for P > 1, and for P = 1 (no trailing significand bits)
``I == 0`` or ``E + bias`` even, i.e. the even code (the even exponent field). numoracle's engine
(``core/softfloat.round_pack``) breaks ties on the least significant bit of the kept significand, which for
P = 1 is the implicit bit, always 1 for normal values: a tie between 2^e and 2^(e+1) (1.5 * 2^e) always goes
to the larger magnitude. That is IEEE 754-2019's roundTiesToEven rule when both neighbours have an odd least
significant digit (only possible at precision 1: "the one with the larger magnitude"), but not P3109's.
So ``numoracle.cast(x, "binary8p1se")`` in ``rne`` (and ``rto``) is wrong for P3109 at those ties (half of
them: where the lower neighbour's code is even); gfloat 0.5.2 follows P3109. :func:`p3109_cast` gives
P3109's result for every P and mode (the engine's, corrected at P = 1 ties), and ``numoracle.quantize``
refuses a P = 1 P3109 element format in ``rne`` / ``rto``, naming it.

The 24 formats (P = 1..8, se / sf / uf) are built here (``P3109_FORMATS``, by name: ``binary8p3se`` ...) but
enter the registry only when asked, with :func:`register_p3109`: the registry drives the tables
(``tables/*.csv``) and every registry-wide test, which 24 more formats would change. The eight unsigned
extended formats (``binary8p{1..8}ue``, ``P3109_UNSIGNED_EXTENDED``) are :class:`P3109UnsignedExtended`
(``core/p3109ue.py``), for p3109_cast and p3109_decode. ``numoracle info binary8p3sf`` finds them either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..args import check_bool, check_choice
from .format import Format, format_of, register
from .p3109ue import P3109UnsignedExtended, decode_unsigned_extended, overflow_unsigned_extended

__all__ = ["p3109_format", "P3109_FORMATS", "register_p3109", "p3109_cast", "P1_TIE_NOTE", "is_p3109_p1",
           "refuse_p1_ties", "refuse_to_odd_overflow", "P3109_SATURATION", "p3109_unsigned_extended",
           "P3109_UNSIGNED_EXTENDED", "p3109_decode"]

P1_TIE_NOTE = ("P = 1: numoracle.cast breaks rne / rto ties on the significand (the larger magnitude, IEEE "
               "754-2019's precision-1 rule); P3109 breaks them on the encoding (the even code): use "
               "numoracle.core.formats.p3109.p3109_cast")


def p3109_format(precision: int, *, signed: bool = True, domain: str = "extended") -> Format:
    """The P3109 binary8p{precision} format of that signedness and domain ("extended" or "finite"), P = 1..8.

    Signed P = 8 has no exponent bits: its 127 magnitudes are ``c / 64``, exactly the values (and the rounding
    grid) of a format with one exponent bit, six trailing bits and bias 1, which carries it (so its ``Format``
    says precision 7). The unsigned extended formats are :func:`p3109_unsigned_extended`.
    """
    if isinstance(precision, bool) or not isinstance(precision, int) or not 1 <= precision <= 8:
        raise ValueError(f"P3109 8-bit formats have precision 1..8, got {precision!r}")
    domain = check_choice(domain, "domain", ("extended", "finite"))
    signed = check_bool(signed, "signed")
    k, p = 8, precision
    tag = f"binary8p{p}{'s' if signed else 'u'}{domain[0]}"
    if signed and p == 8:  # no exponent bits: c / 64, as e1m6 with bias 1 (subnormals m / 64, normals 1 + m / 64)
        return Format(tag, 1, 6, 1, nan="fnuz", has_inf=domain == "extended")
    if signed:
        return Format(tag, k - p, p - 1, 1 << (k - p - 1), nan="fnuz", has_inf=domain == "extended")
    if domain == "extended":
        raise ValueError(f"{tag} (unsigned, extended domain: +inf at 0xFE, NaN at 0xFF) is not a numoracle Format "
                         "(the engine's unsigned formats carry no infinity): "
                         f"numoracle.core.formats.p3109.p3109_unsigned_extended({p}) gives it, for p3109_cast and "
                         "p3109_decode")
    return Format(tag, k - p + 1, p - 1, 1 << (k - p), signed=False, nan="fn", has_inf=False)


P3109_FORMATS: dict[str, Format] = {
    f.name: f for p in range(1, 9)
    for f in (p3109_format(p), p3109_format(p, domain="finite"), p3109_format(p, signed=False, domain="finite"))
}


def register_p3109() -> list[Format]:
    """Register the 24 formats under their names (an equal format already registered is kept)."""
    out = []
    for name, f in P3109_FORMATS.items():
        try:
            existing = format_of(name)
        except ValueError:
            existing = None
        out.append(existing if existing == f else register(f))
    return out


def is_p3109_p1(fmt: Any) -> bool:
    """Whether ``fmt`` is one of the P = 1 P3109 formats (compared by fields, not by name)."""
    return isinstance(fmt, Format) and fmt.precision == 1 and any(fmt == f for f in P3109_FORMATS.values())


def refuse_p1_ties(fmt: Any, rounding: Any, where: str) -> None:
    """Raise ValueError where ``where`` would round into a P = 1 P3109 format in rne / rto through the engine."""
    from .policy import Rounding

    if is_p3109_p1(fmt) and Rounding.of(rounding).value in ("rne", "rto"):
        raise ValueError(f"{where}: {fmt.name} with rounding={Rounding.of(rounding).value!r}: {P1_TIE_NOTE}; or "
                         "pick rounding='rna' / 'rtz' / 'ru' / 'rd', which agree with P3109")


def refuse_to_odd_overflow(fmt: Any, rounding: Any, overflow: Any, where: str) -> None:
    """Raise ValueError where ``where`` would round into a P3109 format in rto through the engine without
    saturation: the engine keeps +-max past it, P3109's ToOdd overflows (p3109_cast implements it)."""
    from .policy import Overflow, Rounding

    if (isinstance(fmt, Format) and any(fmt == f for f in P3109_FORMATS.values())
            and Rounding.of(rounding).value == "rto" and overflow is not None
            and Overflow.of(overflow).value != "saturate"):
        raise ValueError(f"{where}: {fmt.name} with rounding='rto' and overflow={Overflow.of(overflow).value!r}: the "
                         "engine's round-to-odd keeps +-max past the largest finite value, where P3109's ToOdd "
                         "overflows: use numoracle.core.formats.p3109.p3109_cast, or overflow='saturate' (they agree)")


# P3109's saturation modes (interim report, "Projection"; gfloat's ``sat`` flag) as p3109_cast's ``overflow=``
P3109_SATURATION = {"satfinite": "saturate", "satpropagate": "sat_propagate", "ovfinf": "ieee", "satnone": "ieee"}


def _p3109_of(fmt: Any) -> Format:
    f = P3109_FORMATS.get(str(fmt).strip().lower()) if isinstance(fmt, str) else fmt
    if not isinstance(f, Format) or not any(f == g for g in P3109_FORMATS.values()):
        raise ValueError(f"{fmt!r} is not one of the P3109 formats ({', '.join(P3109_FORMATS)})")
    return f


def _overflow_of(overflow: Any, f: Format | P3109UnsignedExtended) -> str:
    """numoracle's name of the policy: ``saturate``, ``sat_propagate``, ``ieee`` or ``nan`` (P3109's names mapped
    by P3109_SATURATION; ``ieee`` in a format without infinities is ``nan``, P3109's overflow to NaN there)."""
    from .policy import Overflow, default_overflow

    if overflow is None:
        return default_overflow(f).value
    key = str(overflow).strip().lower().replace("_", "").replace("-", "") if isinstance(overflow, str) else None
    if key in P3109_SATURATION:
        name = P3109_SATURATION[key]
    else:
        name = Overflow.of(overflow).value
        if name == "wrap":
            raise ValueError("overflow='wrap' applies to integer destinations only; P3109 formats take "
                             "'saturate' (SatFinite), 'sat_propagate' (SatPropagate) or 'ieee' (OvfInf)")
    return "nan" if name == "ieee" and not f.has_inf else name


def p3109_cast(x: Any, fmt: Any, *, rounding: str = "rne", overflow: Any = None) -> np.ndarray:
    """Codes of ``x`` in a P3109 format rounded and saturated as P3109 defines them (gfloat's reading).

    ``rounding``: numoracle's modes; ``rne`` at P = 1 breaks a tie on the encoding (the even code, P3109's
    CodeIsEven), not on the engine's significand parity; ``rto`` is P3109's ToOdd at every P: an inexact value goes
    to the odd code of its two neighbours, rounded with an unbounded exponent and only then checked for overflow
    (gfloat's ``RoundMode.ToOdd``), so a finite value past the largest one overflows unless that largest code is
    odd and the value lies below the next step. ``overflow``: ``"saturate"`` (P3109 SatFinite: overflow and
    infinities to +-max), ``"sat_propagate"`` (SatPropagate: finite overflow to +-max, infinities kept; NaN in a
    finite-domain format), ``"ieee"`` (OvfInf / SatNone: to +-inf, or NaN in a finite-domain format; directed modes
    keep +-max on the side they round toward), ``"nan"``; P3109's names are accepted (``"SatFinite"``, ...).
    Other modes: ``numoracle.cast``.
    """
    from ..engine.convert import cast

    if _is_unsigned_extended(fmt):
        return _cast_unsigned_extended(x, fmt, rounding, overflow)
    f = _p3109_of(fmt)
    mode = _rounding_of(rounding)
    policy = _overflow_of(overflow, f)
    engine = "saturate" if policy == "sat_propagate" else policy
    if mode == "rto" or (mode == "rne" and f.precision == 1) or policy == "sat_propagate":
        from ..inputs import exact_float64

        v = exact_float64(x, "x")[0]
    if mode == "rto":
        codes = _to_odd(v, f, engine)
    else:
        codes = np.asarray(cast(x, f, rounding=mode, overflow=engine))
        if mode == "rne" and f.precision == 1:
            codes = _p1_ties_to_even(v, f, codes)
    if policy == "sat_propagate":  # infinities stay infinite (NaN where the format has none)
        kept = np.asarray(cast(v, f, rounding="rne", overflow="ieee" if f.has_inf else "nan"))
        codes = np.where(np.isinf(v), kept, codes).astype(codes.dtype)
    return codes


def p3109_unsigned_extended(precision: int) -> P3109UnsignedExtended:
    """binary8p{precision}ue, P = 1..8 (``core/p3109ue.py``): for p3109_cast and p3109_decode."""
    return P3109UnsignedExtended(f"binary8p{precision}ue", precision,
                                 p3109_format(precision, signed=False, domain="finite"))


P3109_UNSIGNED_EXTENDED: dict[str, P3109UnsignedExtended] = {
    f.name: f for f in (p3109_unsigned_extended(p) for p in range(1, 9))}


def _ue_of(fmt: Any) -> P3109UnsignedExtended:
    f = P3109_UNSIGNED_EXTENDED.get(fmt.strip().lower()) if isinstance(fmt, str) else fmt
    if not isinstance(f, P3109UnsignedExtended):
        raise ValueError(f"{fmt!r} is not one of the P3109 unsigned extended formats "
                         f"({', '.join(P3109_UNSIGNED_EXTENDED)})")
    return f


def p3109_decode(codes: Any, fmt: Any) -> np.ndarray:
    """Values (float64) of codes of any P3109 format: one of ``P3109_FORMATS`` or binary8p{P}ue."""
    from ..engine.convert import decode

    if _is_unsigned_extended(fmt):
        return decode_unsigned_extended(codes, _ue_of(fmt))
    return np.asarray(decode(np.asarray(codes).astype(np.uint8), _p3109_of(fmt)), dtype=np.float64)


def _cast_unsigned_extended(x: Any, fmt: Any, rounding: Any, overflow: Any) -> np.ndarray:
    """p3109_cast into binary8p{P}ue: the finite sibling's rounding, saturated at its 0xFE, then ue's overflow."""
    from ..inputs import exact_float64

    f = _ue_of(fmt)
    mode = _rounding_of(rounding)
    policy = "ieee" if overflow is None else _overflow_of(overflow, f)  # f has +inf: ieee stays ieee
    if policy == "nan":
        raise ValueError(f"overflow='nan' is for formats without infinities; {f.name} has +inf: use 'ieee' "
                         "(OvfInf), 'saturate' (SatFinite) or 'sat_propagate' (SatPropagate)")
    v = exact_float64(x, "x")[0]
    sibling = np.asarray(p3109_cast(v, f.finite, rounding=mode, overflow="saturate"))
    return overflow_unsigned_extended(v, sibling, mode, policy)


def _is_unsigned_extended(fmt: Any) -> bool:
    name = fmt.strip().lower() if isinstance(fmt, str) else getattr(fmt, "name", None)
    return isinstance(name, str) and name.startswith("binary8p") and name.endswith("ue")


def _rounding_of(rounding: Any) -> str:
    from .policy import Rounding

    return Rounding.of(rounding).value


def _p1_ties_to_even(v: np.ndarray, f: Format, codes: np.ndarray) -> np.ndarray:
    """P = 1, rne: the engine takes the larger magnitude at a tie 1.5 * 2^e; P3109 takes the even code."""
    from ..engine.convert import cast, decode

    lo = np.asarray(cast(v, f, rounding="rtz", overflow="saturate"))
    with np.errstate(invalid="ignore"):
        lo_v = np.abs(np.asarray(decode(lo, f), dtype=np.float64))
        a = np.abs(v)
        fix = np.isfinite(a) & (lo_v > 0) & (a == 1.5 * lo_v) & (lo.astype(np.int64) % 2 == 0)
    return np.where(fix, lo, codes).astype(codes.dtype)


def _to_odd(v: np.ndarray, f: Format, policy: str) -> np.ndarray:
    """P3109 ToOdd (gfloat's ``RoundMode.ToOdd``): the value truncated to the format's precision with an unbounded
    exponent; if inexact and its code is even, the next code away from zero; past +-max, overflow (``policy``)."""
    import math

    from ..engine.convert import cast, decode

    # step 1: truncation (rtz, clamped to +-max) and its exactness; parity of the code is P3109's CodeIsEven
    lo = np.asarray(cast(v, f, rounding="rtz", overflow="saturate"))
    with np.errstate(invalid="ignore"):
        lo_v = np.asarray(decode(lo, f), dtype=np.float64)
        a = np.abs(v)
    top = float(f.max_finite)
    own = np.isfinite(v) & (f.signed | ~(v < 0))  # negative values of an unsigned format: the engine's rule
    exact = own & (lo_v == v)
    odd = lo.astype(np.int64) % 2 == 1
    # step 2: in range, an inexact value on an even code goes one code away from zero
    away = np.where(v > 0, np.asarray(cast(v, f, rounding="ru", overflow="saturate")),
                    np.asarray(cast(v, f, rounding="rd", overflow="saturate")))
    inside = own & (a <= top)
    out = np.where(inside & ~exact & ~odd, away, lo)
    # step 3: past max, the unbounded result is max only when max's code is odd and |v| < max + ulp(max)
    max_odd = int(np.asarray(cast(np.array([top]), f, rounding="rtz"))[0]) % 2 == 1
    step = math.ldexp(1.0, math.frexp(top)[1] - f.precision)
    with np.errstate(invalid="ignore"):
        over = own & (a > top) & ~(max_odd & (a < top + step))
    if policy != "saturate":
        big = np.asarray(cast(np.where(v < 0, -np.inf, np.inf), f, rounding="rne", overflow=policy))
        out = np.where(over, big, out)
    # not ours (NaN, +-inf, negative values of an unsigned format): the engine's round-to-odd and overflow
    rest = np.asarray(cast(v, f, rounding="rto", overflow=policy))
    return np.where(own, out, rest).astype(lo.dtype)
