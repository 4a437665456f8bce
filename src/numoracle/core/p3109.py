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

The 21 formats are built here (``P3109_FORMATS``, by name: ``binary8p3se`` ...) but enter the registry only
when asked, with :func:`register_p3109`: the registry drives the tables (``tables/*.csv``) and every
registry-wide test, which 21 more formats would change. ``numoracle info binary8p3sf`` finds them either way.
"""

from __future__ import annotations

from .formats import Format, format_of, register

__all__ = ["p3109_format", "P3109_FORMATS", "register_p3109"]


def p3109_format(precision: int, *, signed: bool = True, domain: str = "extended") -> Format:
    """The P3109 binary8p{precision} format of that signedness and domain ("extended" or "finite")."""
    if isinstance(precision, bool) or not isinstance(precision, int) or not 1 <= precision <= 7:
        raise ValueError(f"P3109 8-bit formats have precision 1..7 here, got {precision!r} (P = 8 has no exponent "
                         "bits, which numoracle's Format cannot carry)")
    if domain not in ("extended", "finite"):
        raise ValueError(f"domain must be 'extended' or 'finite', got {domain!r}")
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
