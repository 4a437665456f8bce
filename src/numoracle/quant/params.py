"""quantize's keywords validated into a :class:`QuantParams`, the rule's defaults filled in (errors say what to
pass instead)."""

from __future__ import annotations

from typing import Any

from ..core.formats.format import E8M0FNU, FP8_E4M3FN, FP32, AnyFormat, IntFormat, format_of
from ..core.formats.policy import Rounding, resolve_policy
from .layout import QuantParams, parse_granularity

__all__ = ["resolve_params", "RULES", "RULE_ALIASES", "NAN_POLICIES", "GLOBAL_SCALE_CONVENTIONS"]

RULES = ("absmax", "pow2", "rceil", "mx", "nvfp4")
RULE_ALIASES = {"floor": "mx"}  # OCP MX's rule rounds the power of two down: floor(log2 amax) - emax_elem
NAN_POLICIES = ("propagate", "ignore", "raise")
_DEFAULT_GRANULARITY = {"mx": ("block", 32), "rceil": ("block", 32), "nvfp4": ("block", 16)}
_DEFAULT_SCALE_FMT = {"mx": E8M0FNU, "rceil": E8M0FNU, "nvfp4": FP8_E4M3FN}
# NVFP4's per-tensor FP32 scale, as a library stores it (docs/quantization.md#nvfp4)
GLOBAL_SCALE_CONVENTIONS = {
    "decode": "the decode scale S_dec = amax / (448 * 6) (TransformerEngine; element divisor fl(d * S_dec))",
    "encode": "the encode scale G = 448 * 6 / amax (compressed-tensors' global_scale; element divisor fl(d / G))",
}


def _mode(x: Any, what: str) -> Rounding:
    r = Rounding.of(x)
    if r is Rounding.STOCHASTIC:
        raise ValueError(f"{what} must be a deterministic rounding mode, not 'sr' (stochastic rounding applies "
                         "to the final element cast: rounding='sr')")
    return r


def _int_range(fmt: IntFormat, clip: str) -> tuple[int, int]:
    lo = fmt.min_value + (1 if clip == "narrow" else 0)
    return lo, fmt.max_value


def resolve_params(shape: tuple[int, ...], fmt: AnyFormat, *, granularity: Any, axis: Any, symmetric: bool,
             scale_fmt: Any, scale_rule: str, rounding: Any, clip: str | None, reciprocal: bool, compute: Any,
             overflow: Any, nan: str, scale_rounding: Any, compute_rounding: Any, scale_range: str | None,
             sr_bits: int | None, given: bool, global_scale_convention: str = "decode") -> QuantParams:
    """Validate quantize's keywords and fill in the rule's defaults (errors say what to pass instead)."""
    if not isinstance(scale_rule, str):
        raise TypeError(f"scale_rule must be a rule's name ({', '.join(RULES)}), got {type(scale_rule).__name__} "
                        f"{scale_rule!r:.40}")
    scale_rule = RULE_ALIASES.get(scale_rule, scale_rule)
    rule = "given" if given else scale_rule
    if given and scale_rule not in ("absmax", "given"):
        raise ValueError(f"scale= gives the scales; scale_rule={scale_rule!r} would compute them: pass one")
    if rule not in (*RULES, "given"):
        raise ValueError(f"unknown scale_rule {scale_rule!r}; valid: {', '.join(RULES)} (or 'floor', OCP's 'mx')")
    if nan not in NAN_POLICIES:
        raise ValueError(f"unknown nan policy {nan!r}; valid: {', '.join(NAN_POLICIES)}")
    gran = _DEFAULT_GRANULARITY.get(rule, "tensor") if granularity is None else granularity
    gran, ax, block = parse_granularity(gran, axis, shape)
    sfmt = format_of(scale_fmt) if scale_fmt is not None else _DEFAULT_SCALE_FMT.get(rule, FP32)
    if sfmt.is_integer:
        raise ValueError(f"scale_fmt must be a float format, got {sfmt.name}")
    cfmt = format_of(compute)
    if cfmt.is_integer or cfmt.precision > 53:
        raise ValueError(f"compute must be a float format of at most 53 bits of precision, got {cfmt.name}")
    if fmt.is_integer and fmt.bits > 32:
        raise ValueError(f"element formats of more than 32 bits are not supported, got {fmt.name}")
    if not symmetric:
        if not fmt.is_integer:
            raise ValueError(f"symmetric=False (a zero point) needs an integer element format; {fmt.name} is a "
                             "float format: use symmetric=True")
        if rule not in ("absmax", "given"):
            raise ValueError(f"asymmetric quantisation uses scale_rule='absmax' (the min/max range), not {rule!r}")
    if rule == "nvfp4" and fmt.is_integer:
        raise ValueError("scale_rule='nvfp4' needs a float element format (FP4 E2M1 for NVFP4)")
    if global_scale_convention not in GLOBAL_SCALE_CONVENTIONS:
        raise ValueError(f"unknown global_scale_convention {global_scale_convention!r}; valid: "
                         + "; ".join(f"{k!r}: {v}" for k, v in GLOBAL_SCALE_CONVENTIONS.items()))
    if global_scale_convention != "decode" and rule != "nvfp4":
        raise ValueError(f"global_scale_convention={global_scale_convention!r} says how NVFP4's per-tensor scale is "
                         "stored; it needs scale_rule='nvfp4'")
    if clip is None:
        clip = "narrow" if fmt.is_integer and fmt.signed and symmetric else "full"
    if clip not in ("narrow", "full"):
        raise ValueError(f"unknown clip {clip!r}; valid: 'narrow', 'full'")
    if clip == "narrow" and not (fmt.is_integer and fmt.signed):
        raise ValueError(f"clip='narrow' drops the most negative code of a signed integer format; {fmt.name} has "
                         "none to drop: use clip='full'")
    pol = resolve_policy(fmt, rounding, "saturate" if overflow is None else overflow, sr_bits=sr_bits)
    if scale_range is None:
        scale_range = "clamp" if rule in ("mx", "rceil") else "raise"
    if scale_range not in ("raise", "clamp"):
        raise ValueError(f"unknown scale_range {scale_range!r}; valid: 'raise', 'clamp'")
    if fmt.is_integer:
        qmin, qmax = _int_range(fmt, clip)
    else:
        qmin, qmax = -float(fmt.max_finite), float(fmt.max_finite)
    return QuantParams(gran, ax, block, bool(symmetric), sfmt, rule, pol.rounding, clip, bool(reciprocal),
                       cfmt, pol.overflow.value, nan, _mode(scale_rounding, "scale_rounding"),
                       _mode(compute_rounding, "compute_rounding"), scale_range, pol.sr_bits, qmin, qmax,
                       global_scale_convention=global_scale_convention)
