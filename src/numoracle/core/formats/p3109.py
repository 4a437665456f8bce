"""IEEE P3109's 8-bit binary{K}p{P} formats as numoracle Formats (interim report v3; gfloat 0.5.2 format_info_p3109).

binary8pP, P = 1..7: one zero (no -0), one NaN, subnormals; K - P exponent bits when signed.

* signed, extended domain (``binary8p{P}se``): NaN 0x80, +-inf at 0x7F / 0xFF, bias ``2^(K-P-1)``
  (``Format(nan='fnuz', has_inf=True)``, as ``Format.p3109``);
* signed, finite domain (``binary8p{P}sf``): NaN 0x80, no infinities, max finite at 0x7F;
* unsigned, finite domain (``binary8p{P}uf``): K - P + 1 exponent bits, bias ``2^(K-P)``, NaN 0xFF, max at 0xFE
  (``Format(signed=False, nan='fn')``);
* unsigned, extended domain: +inf at 0xFE and NaN at 0xFF: refused by :func:`p3109_format` (the engine's
  unsigned formats have no infinity; approximating it would misread 0xFE).

P3109's conversion saturation choices map onto numoracle's ``overflow=``: SatFinite -> ``"saturate"``,
OvfInf (extended domain) -> ``"ieee"`` (inf), SatPropagate -> ``"saturate"`` for finite inputs with an
infinity kept (numoracle's saturate keeps inf -> inf where the format has one).

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

The 21 formats are built here (``P3109_FORMATS``, by name: ``binary8p3se`` ...) but enter the registry only
when asked, with :func:`register_p3109`: the registry drives the tables (``tables/*.csv``) and every
registry-wide test, which 21 more formats would change. ``numoracle info binary8p3sf`` finds them either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..args import check_bool, check_choice
from .format import Format, format_of, register

__all__ = ["p3109_format", "P3109_FORMATS", "register_p3109", "p3109_cast", "P1_TIE_NOTE", "is_p3109_p1",
           "refuse_p1_ties"]

P1_TIE_NOTE = ("P = 1: numoracle.cast breaks rne / rto ties on the significand (the larger magnitude, IEEE "
               "754-2019's precision-1 rule); P3109 breaks them on the encoding (the even code): use "
               "numoracle.core.formats.p3109.p3109_cast")


def p3109_format(precision: int, *, signed: bool = True, domain: str = "extended") -> Format:
    """The P3109 binary8p{precision} format of that signedness and domain ("extended" or "finite")."""
    if isinstance(precision, bool) or not isinstance(precision, int) or not 1 <= precision <= 7:
        raise ValueError(f"P3109 8-bit formats have precision 1..7 here, got {precision!r} (P = 8 has no exponent "
                         "bits, which numoracle's Format cannot carry)")
    domain = check_choice(domain, "domain", ("extended", "finite"))
    signed = check_bool(signed, "signed")
    k, p = 8, precision
    tag = f"binary8p{p}{'s' if signed else 'u'}{domain[0]}"
    if signed:
        return Format(tag, k - p, p - 1, 1 << (k - p - 1), nan="fnuz", has_inf=domain == "extended")
    if domain == "extended":
        raise ValueError(f"{tag} (unsigned, extended domain: +inf at 0xFE, NaN at 0xFF) cannot be represented "
                         "exactly: numoracle's unsigned formats carry no infinity. Use the finite domain "
                         f"(binary8p{p}uf) or a signed format")
    return Format(tag, k - p + 1, p - 1, 1 << (k - p), signed=False, nan="fn", has_inf=False)


P3109_FORMATS: dict[str, Format] = {
    f.name: f for p in range(1, 8)
    for f in (p3109_format(p), p3109_format(p, domain="finite"), p3109_format(p, signed=False, domain="finite"))
}


def register_p3109() -> list[Format]:
    """Register the 21 formats under their names (an equal format already registered is kept)."""
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


def p3109_cast(x: Any, fmt: Any, *, rounding: str = "rne", overflow: Any = None) -> np.ndarray:
    """Codes of ``x`` in a P3109 format rounded as P3109 defines it: ``numoracle.cast`` for P > 1 and every mode but
    ``rne`` / ``rto`` at P = 1, where a tie (``rne``) or an inexact value (``rto``) goes to the even (``rne``)
    or odd (``rto``) code of its two neighbours (P3109's CodeIsEven), not the engine's significand parity."""
    from ..engine.convert import cast, decode
    from ..inputs import exact_float64
    from .policy import Rounding

    f = P3109_FORMATS.get(str(fmt).strip().lower()) if isinstance(fmt, str) else fmt
    if not isinstance(f, Format) or not any(f == g for g in P3109_FORMATS.values()):
        raise ValueError(f"{fmt!r} is not one of the P3109 formats ({', '.join(P3109_FORMATS)})")
    mode = Rounding.of(rounding).value
    codes = np.asarray(cast(x, f, rounding=mode, overflow=overflow))
    if f.precision > 1 or mode not in ("rne", "rto"):
        return codes
    v, _ = exact_float64(x, "x")
    lo = np.asarray(cast(v, f, rounding="rtz", overflow="saturate"))
    with np.errstate(invalid="ignore"):
        lo_v = np.abs(np.asarray(decode(lo, f), dtype=np.float64))
        a = np.abs(v)
        finite = np.isfinite(a) & (lo_v > 0)
        even_lo = (lo.astype(np.int64) % 2) == 0
        if mode == "rne":  # a tie 1.5 * 2^e: the engine took the larger magnitude; P3109 the even code
            fix = finite & (a == 1.5 * lo_v) & even_lo
            return np.where(fix, lo, codes).astype(codes.dtype)
        # rto: the engine truncates normal values (its kept bit is 1); P3109 rounds away from an even code
        away = np.asarray(cast(v, f, rounding="ru", overflow=overflow)), np.asarray(cast(v, f, rounding="rd",
                                                                                         overflow=overflow))
        fix = finite & (a != lo_v) & even_lo
        return np.where(fix, np.where(v > 0, away[0], away[1]), codes).astype(codes.dtype)
