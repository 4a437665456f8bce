"""``assert_quantized_close``: a quantizer's output against numoracle's exact quantisation, with an outlier budget.

``check_quantized_close(actual, x, allow_outliers=0, actual_scales=None, **quantize_params)`` computes
``numoracle.quantize(x, **quantize_params)`` and compares ``actual`` with it element by element:

* ``actual`` may be codes of the element format (unsigned integers, e.g. uint8 bit patterns), a
  native array of the element dtype (np.int8, ml_dtypes float8/float4, torch tensors), a
  :class:`~numoracle.quant.Quantized` (its scales are then compared too), or dequantized values
  (a float array of another format: compared as values, each candidate code's dequantized value
  rounded once to that format);
* exact codes (equal values: +0/-0 count as equal) pass;
* an element one code away (ordered-code distance 1, ``numoracle.codekeys``) where the exact
  pre-cast value t was a tie (``Quantized.ties``) is a "tie" outlier;
* where the caller's scale (``actual_scales`` or the Quantized's) is one ULP of ``scale_fmt`` from
  the expected one, elements that match a quantisation with the caller's scale, or lie one code
  away, are "scale off by one ULP" outliers;
* everything else fails ("mismatch"), as do scales off by more than one ULP.

The check passes when there is no mismatch and at most ``allow_outliers`` outliers. The report
(:class:`QuantCheckReport`) has a summary line (counts by class, the budget), then the worst elements
(index, x, actual code in hex and its value, expected code and value, t, scale, code distance,
class), and the margin of the actual values against the quantisation error bound. Actual NaN or inf
values where the reference is finite, and numbers where it is NaN, are counted in the summary and
listed first, and make the check fail; NaN / inf where the reference is finite make the error ratio inf.
``assert_quantized_close`` raises :class:`QuantizedMismatch` (an AssertionError whose message is the
report; ``.report`` holds the object) or returns the report.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.args import check_int
from ...core.asserting import asserting
from ...core.engine.codekeys import from_key, is_nan, key_bounds, to_key
from ...core.engine.convert import cast, decode
from ...core.formats.format import UINT4, AnyFormat, Format, format_of
from ...core.formats.interop import is_torch, to_codes
from ...core.formats.policy import Flags
from ..bounds.error import _as_values, _expand, quantization_error_bound
from ..recipe import QuantRecipe, takes_recipe
from ..scale import div_values, mul_round
from ..schemes.torchq import is_torch_quantized, scale_grid, torch_quantized_parts
from .blockcheck import block_format, check_block_quantized
from .report import CLASSES, RANK, QuantCheckReport, QuantElement, QuantizedMismatch, code_hex

__all__ = ["assert_quantized_close", "check_quantized_close", "QuantCheckReport", "QuantizedMismatch",
           "QuantElement", "CLASSES"]



# ---- inputs --------------------------------------------------------------------------------------------
def _actual_codes(actual: Any, fmt: AnyFormat, shape: tuple[int, ...]) -> tuple[str, np.ndarray, AnyFormat]:
    """("codes", codes of fmt, fmt) or ("values", codes of their own format, that format)."""
    try:
        codes, afmt = to_codes(actual)
    except (TypeError, ValueError) as e:
        raise TypeError(f"actual: {e}; give codes of {fmt.name} (unsigned ints), a {fmt.name} array, a Quantized, "
                        "or dequantized float values") from None
    codes = np.asarray(codes)
    if codes.shape != tuple(shape):
        raise ValueError(f"actual has shape {codes.shape}, but x has shape {tuple(shape)}; the check compares "
                         "element by element")
    if afmt == fmt:
        return "codes", codes, fmt
    if afmt.is_integer and not afmt.signed:
        if codes.size and int(codes.max()) >= 1 << fmt.bits:
            raise ValueError(f"actual holds {afmt.name} code {int(codes.max()):#x}, beyond the {fmt.bits} bits of "
                             f"{fmt.name}; pass codes of {fmt.name} (or its native dtype)")
        return "codes", codes.astype(np.dtype(fmt.code_dtype)), fmt
    if afmt.is_integer and fmt.is_integer:
        vals = decode(codes, afmt).astype(np.int64)
        bad = (vals < fmt.min_value) | (vals > fmt.max_value)
        if bad.any():
            i = int(np.flatnonzero(bad.ravel())[0])
            raise ValueError(f"actual holds {vals.ravel()[i]} (flat index {i}), outside {fmt.name}'s range "
                             f"[{fmt.min_value}, {fmt.max_value}]")
        return "codes", cast(vals, fmt), fmt
    if isinstance(afmt, Format) and afmt.bits >= 16 and not afmt.is_integer:
        return "values", codes, afmt
    raise TypeError(f"actual is a {afmt.name} array, but the expected quantisation is to {fmt.name}: give codes of "
                    f"{fmt.name} (unsigned ints), an array of {fmt.name}, a Quantized, or dequantized values in a "
                    "float format of >= 16 bits")


def _scale_codes(scales: Any, sfmt: AnyFormat, shape: tuple[int, ...]) -> np.ndarray:
    a = scales if is_torch(scales) else np.asarray(scales)
    codes, f = to_codes(a)
    codes = np.asarray(codes)
    if codes.shape != tuple(shape):
        raise ValueError(f"actual_scales has shape {codes.shape}, but the expected scale grid has shape "
                         f"{tuple(shape)}")
    if f == sfmt:
        return codes
    if f.is_integer and not f.signed and not sfmt.is_integer:
        return codes.astype(np.dtype(sfmt.code_dtype))
    v = _as_values(a, "actual_scales")
    out, fl = cast(v, sfmt, flags=True)
    if np.any((fl & (Flags.INEXACT | Flags.OVERFLOW | Flags.INVALID)) != 0):
        raise ValueError(f"actual_scales holds values that are not {sfmt.name} values; pass the scales the kernel "
                         f"used, as {sfmt.name} values or codes")
    return out


# ---- the check ---------------------------------------------------------------------------------------
def _requantize(x: Any, scales: np.ndarray, q: Any, params: dict) -> np.ndarray | None:
    """Codes of x quantised with the given block scales (numoracle.quantize's scale=), or None where it cannot."""
    from ..quantizer import quantize

    if q.params.scale_rule == "nvfp4" or not np.all(np.isfinite(scales) & (scales > 0)):
        return None  # NVFP4 divides by fl(d * S_dec), which given scales do not model
    kw = {k: v for k, v in params.items() if k not in ("scale_rule", "global_scale", "global_amax", "scale_range",
                                                       "scale", "zero_point", "scale_rounding")}
    kw["granularity"], kw["axis"] = q.params.granularity, q.params.axis
    kw["scale_fmt"], kw["clip"] = q.params.scale_fmt, q.params.clip
    try:
        r = quantize(x, scale=scales, zero_point=q.zero_points, **kw)
    except ValueError:
        return None
    return np.asarray(r.codes).astype(np.uint64)


_QUANTIZE_KEYS = ("fmt", "granularity", "axis", "symmetric", "scale_fmt", "scale_rule", "rounding", "clip",
                  "reciprocal", "compute", "overflow", "nan", "global_scale", "scale", "zero_point", "scale_rounding",
                  "compute_rounding", "scale_range", "global_amax", "random_bits", "sr_bits",
                  "global_scale_convention")


def _element_format(fmt: Any, actual: Any, tq: Any) -> Any:
    """``fmt``, or the element format ``actual`` carries (a torch quantized tensor, a Quantized)."""
    from ..quantizer import Quantized

    if fmt is None:
        fmt = tq.fmt if tq is not None else actual.fmt if isinstance(actual, Quantized) else None
    if fmt is None:
        raise TypeError("check_quantized_close needs the element format: fmt=... (and the other quantize "
                        "parameters: granularity=, axis=, scale_fmt=, ...)")
    return fmt


def _int4_params(w: Any, fmt: Any) -> dict[str, Any]:
    """An Int4Weights checked against the round-to-nearest reference (quantize_int4's parameters unless fmt=...
    says otherwise; {} for anything else). HQQ's float zero points come from its optimiser: no reference codes."""
    from ..schemes.int4 import Int4Weights

    if not isinstance(w, Int4Weights):
        return {}
    if w.convention == "hqq":
        raise ValueError("hqq: the codes and float zero points come from HQQ's half-quadratic optimiser, which "
                         "numoracle does not re-run, so there are no reference codes to compare; check what the "
                         "weights do: quantized_matmul_bound(A, B, qb=weights) (dequantise-then-accumulate bound) or "
                         "dequant_matmul_check")
    if fmt is None:
        return {"fmt": UINT4, "granularity": ("group", w.group), "axis": 0, "symmetric": False,
                "scale_fmt": w.scale_fmt}
    return {}


def _unwrap(actual: Any, actual_scales: Any, q: Any, tq: Any, notes: list[str]) -> tuple[Any, Any, Any, bool]:
    """(codes or array, scales, zero points, zero points differ) of a torch quantized tensor, a Quantized or
    an Int4Weights (codes (K, N) in 0..15, its scales and integer zero points)."""
    from ..quantizer import Quantized
    from ..schemes.int4 import Int4Weights

    if isinstance(actual, Int4Weights):
        if actual_scales is not None:
            raise ValueError("actual is an Int4Weights: its scales are compared; do not also pass actual_scales")
        if q.fmt != UINT4:
            raise TypeError(f"actual is an Int4Weights (uint4 codes), but the expected quantisation is to {q.fmt.name}")
        return actual.codes.astype(np.uint8), actual.scales, actual.zeros.astype(np.int64), False

    fmt, a_zp, zp_differ = q.fmt, None, False
    if tq is not None:
        if actual_scales is not None:
            raise ValueError("actual is a torch quantized tensor: its scales are compared; do not also pass "
                             "actual_scales")
        if tq.fmt != fmt:
            raise TypeError(f"actual is a torch {tq.fmt.name} quantized tensor, but the expected quantisation is to "
                            f"{fmt.name}")
        actual_scales, a_zp = scale_grid(tq, np.asarray(q.scales).shape)
        if np.any(actual_scales.astype(np.float32) != actual_scales):
            notes.append("the tensor's float64 scales are not float32 values: compared as float32, the precision "
                         "torch's CPU quantize kernels compute with")
            actual_scales = actual_scales.astype(np.float32)
        if q.zero_points is None and np.any(a_zp != 0):
            notes.append("the tensor has nonzero zero points where the expected quantisation is symmetric")
            zp_differ = True
        return tq.codes, actual_scales, (a_zp if q.zero_points is not None else None), zp_differ
    if isinstance(actual, Quantized):
        if actual_scales is not None:
            raise ValueError("actual is a Quantized: its scales are compared; do not also pass actual_scales")
        if actual.fmt != fmt:
            raise TypeError(f"actual is quantised to {actual.fmt.name}, but the expected quantisation is to {fmt.name}")
        mine, theirs = q.params.global_scale_convention, actual.params.global_scale_convention
        if actual.global_scale is not None and mine != theirs:
            raise ValueError(f"actual's NVFP4 global scale is stored in global_scale_convention={theirs!r} "
                             f"({actual.global_scale!r}), but the check assumes {mine!r}: pass "
                             f"global_scale_convention={theirs!r}")
        if actual.global_scale is not None and actual.global_scale != q.global_scale:
            notes.append(f"actual's global scale {actual.global_scale!r} differs from the expected "
                         f"{q.global_scale!r} ({mine} convention)")
        return np.asarray(actual.codes), actual.scale_codes, actual.zero_points, False
    return actual, actual_scales, a_zp, zp_differ


@takes_recipe("recipe")
def check_quantized_close(actual: Any, x: Any, recipe: QuantRecipe | None = None, *,
                          fmt: Any = None, granularity: Any = None, axis: Any = -1,
                          symmetric: bool = True, scale_fmt: Any = None, scale_rule: str = "absmax",
                          rounding: Any = "rne", clip: str | None = None, reciprocal: bool = False,
                          compute: Any = "fp32", overflow: Any = None, nan: str = "propagate",
                          global_scale: float | None = None, scale: Any = None, zero_point: Any = None,
                          scale_rounding: Any = "rne", compute_rounding: Any = "rne", scale_range: str | None = None,
                          global_amax: float | None = None, random_bits: Any = None, sr_bits: int | None = None,
                          global_scale_convention: str = "decode", allow_outliers: int = 0, actual_scales: Any = None,
                          show: int = 10) -> QuantCheckReport:
    """Compare ``actual`` with ``numoracle.quantize(x, fmt, ...)`` (see the module docstring).

    The quantisation parameters (``fmt`` to ``global_scale_convention``) are :func:`numoracle.quantize`'s. ``fmt``
    may be left out when ``actual`` says it: a :class:`~numoracle.quant.Quantized` or a torch quantized tensor (qint8,
    quint8, qint32; its scales and zero points compared too). ``allow_outliers``: the budget of tie and
    scale-off-by-one-ULP outliers; ``actual_scales``: the kernel's scales; ``show``: rows listed.
    """
    from ..quantizer import quantize

    check_int(allow_outliers, "allow_outliers", 0), check_int(show, "show", 0)
    if block_format(fmt) is not None:  # a codebook (NF4 ...) or a GGUF block type: quant/checks/blockcheck.py
        return check_block_quantized(actual, x, fmt, granularity=granularity, actual_scales=actual_scales,  # type: ignore[return-value]
                                     allow_outliers=allow_outliers, show=show)
    tq = torch_quantized_parts(actual) if is_torch_quantized(actual) else None
    int4 = _int4_params(actual, fmt)  # an Int4Weights: quantize_int4's parameters unless fmt= is given
    fmt = _element_format(int4.get("fmt", fmt), actual, tq)
    given = locals()
    quantize_params = {k: given[k] for k in _QUANTIZE_KEYS} | int4  # the arguments quantize() takes, as passed
    xv = _as_values(x, "x")
    q = quantize(x, **quantize_params)
    fmt, notes = q.fmt, list[str]()
    actual, actual_scales, a_zp, zp_differ_t = _unwrap(actual, actual_scales, q, tq, notes)
    mode, acodes, afmt = _actual_codes(actual, fmt, xv.shape)
    ec = np.asarray(q.codes).astype(np.uint64)
    zp = np.zeros(xv.shape) if q.zero_points is None else _expand(np.asarray(q.zero_points, np.float64), xv.shape)
    S_exp = np.asarray(q.scale_per_element(), np.float64)
    ties = np.asarray(q.ties, bool)
    sfmt = format_of(q.params.scale_fmt) if getattr(q.params, "scale_fmt", None) is not None else None
    grid = np.asarray(q.scales).shape
    off1, offm, witness, S_act, act_grid = _compare_scales(q, actual_scales, sfmt, S_exp, show)
    zp_e = None if q.zero_points is None else np.asarray(q.zero_points)
    zp_differ = zp_differ_t
    if a_zp is not None and zp_e is not None and not np.array_equal(np.asarray(a_zp), zp_e):
        notes.append("zero points differ from the expected ones: every element is compared with the expected codes")
        zp_differ = True
    in1 = _expand(off1, xv.shape)
    # classify
    ev = np.asarray(q.values(), np.float64)
    ke_nan = is_nan(ec, fmt)
    ke = to_key(np.where(ke_nan, 0, ec), fmt)
    signed_zeros = 0
    if mode == "codes":
        a_code, a_vals, same, known, dist, signed_zeros = _codes_mode(acodes, fmt, ec, ev, ke, ke_nan, zp, S_act)
    else:
        a_code, a_vals, same, known, dist = _values_mode(acodes, afmt, q, ec, ke, zp, S_act, fmt)
    scale_ok = _scale_off_by_one_ok(in1 & ~same, x, act_grid, q, quantize_params, mode, dist, known, a_code,
                                    notes)
    tie = ~same & known & (np.abs(dist) == 1) & ties
    cls = np.full(xv.shape, "mismatch", dtype=object)
    cls[same] = "exact"
    cls[~same & scale_ok] = "scale off by one ULP"
    cls[~same & ~scale_ok & tie] = "tie"
    counts = {c: int((cls == c).sum()) for c in CLASSES}
    rep = quantization_error_bound(q, xv)
    fin = ~rep.nonfinite & np.isfinite(a_vals) & ~rep.void
    r = rep.ratio(np.where(fin, a_vals, xv))
    mr = float(np.nanmax(np.where(fin, r, 0.0))) if xv.size else 0.0
    nan_fin, inf_fin, fin_nan = _nonfinite(a_vals, ke_nan, ev, zp, S_exp)
    nonfinite = nan_fin | inf_fin | fin_nan
    if (nan_fin | inf_fin).any():
        mr = math.inf
    n_out = counts["tie"] + counts["scale off by one ULP"]
    passed = (counts["mismatch"] == 0 and n_out <= allow_outliers and not offm.any() and not zp_differ
              and not nonfinite.any())
    rows = _worst_rows(cls, known, dist, q, xv, a_code, a_vals, ec, ev, zp, S_exp, show, nonfinite)
    first = [tuple(int(v) for v in np.unravel_index(i, xv.shape)) for i in np.flatnonzero(nonfinite.ravel())[:3]]
    return QuantCheckReport(passed, mode, fmt, int(xv.size), counts, int(allow_outliers), rows, sfmt,
                            int(np.prod(grid)) if actual_scales is not None else 0, int(off1.sum()), int(offm.sum()),
                            witness, signed_zeros, mr, rep, afmt if mode == "values" else None, notes, zp_differ,
                            int(nan_fin.sum()), int(inf_fin.sum()), int(fin_nan.sum()), first)


def _scale_off_by_one_ok(where: np.ndarray, x: Any, act_grid: np.ndarray, q: Any, quantize_params: dict, mode: str,
                         dist: np.ndarray, known: np.ndarray, a_code: Any, notes: list[str]) -> np.ndarray:
    """Elements (of ``where``: differing, in a block whose scale is one ULP off) that the caller's scale explains:
    equal to a requantisation with that scale, or one code away."""
    scale_ok = np.zeros(where.shape, bool)
    idx = np.flatnonzero(where.ravel())
    if not idx.size:
        return scale_ok
    rq = _requantize(x, act_grid, q, quantize_params) if mode == "codes" else None
    if rq is None and mode == "codes":
        notes.append("note: no requantisation with the actual scales for these parameters: elements in "
                     "blocks whose scale is off by one ULP are accepted when one code away")
    ok = (np.abs(dist.ravel()[idx]) == 1) & known.ravel()[idx]
    if rq is not None:
        ok |= a_code.ravel()[idx].astype(np.uint64) == rq.ravel()[idx]
    scale_ok.ravel()[idx] = ok
    return scale_ok


def _nonfinite(a_vals: np.ndarray, ke_nan: np.ndarray, ev: np.ndarray, zp: np.ndarray,
               S_exp: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NaN / inf in the actual values where the reference is finite, and numbers where it is NaN: the error
    ratio skips them, so it would read like a pass (about 1); they make it inf and are reported by count, first."""
    with np.errstate(invalid="ignore"):
        e_vals = np.where(ke_nan, np.nan, (ev - zp) * S_exp)
    return (np.isnan(a_vals) & np.isfinite(e_vals), np.isinf(a_vals) & np.isfinite(e_vals),
            ~np.isnan(a_vals) & np.isnan(e_vals))


def _compare_scales(q: Any, actual_scales: Any, sfmt: Any, S_exp: np.ndarray, show: int) -> tuple:
    """Step 1: the actual scales against the expected ones: (one-ULP-off mask, further-off mask, witness lines,
    the per-element actual scale, the actual scale grid)."""
    grid = np.asarray(q.scales).shape
    off1 = np.zeros(grid, bool)
    offm = np.zeros(grid, bool)
    witness: list[str] = []
    S_act, act_grid = S_exp, np.asarray(q.scales, np.float64)
    if actual_scales is not None and sfmt is None:
        raise ValueError("actual_scales given, but the expected quantisation has no scale format")
    if actual_scales is None:
        return off1, offm, witness, S_act, act_grid
    asc = _scale_codes(actual_scales, sfmt, grid).astype(np.uint64)
    esc = np.asarray(q.scale_codes).astype(np.uint64)
    nan_s = is_nan(asc, sfmt) | is_nan(esc, sfmt)
    dk = np.where(nan_s, 2, to_key(np.where(nan_s, 0, asc), sfmt) - to_key(np.where(nan_s, 0, esc), sfmt))
    dk = np.where((asc == esc), 0, dk)
    off1, offm = np.abs(dk) == 1, np.abs(dk) > 1
    for i in np.flatnonzero((off1 | offm).ravel())[:show]:
        idx = tuple(int(t) for t in np.unravel_index(i, grid))
        av_s = float(decode(asc.ravel()[i:i + 1], sfmt)[0])
        witness.append(f"{idx}: {code_hex(int(asc.ravel()[i]), sfmt)} ({av_s!r}) vs "
                       f"{code_hex(int(esc.ravel()[i]), sfmt)} "
                       f"({float(np.asarray(q.scales).ravel()[i])!r})")
    act_grid = np.where(asc == esc, np.asarray(q.scales, np.float64), decode(asc, sfmt).astype(np.float64))
    if q.params.global_scale_convention == "encode":  # compressed-tensors multiplies by fl(d / G)
        S_act = q.layout.expand(div_values(act_grid, q.global_scale, q.params.compute))
    else:
        S_act = q.layout.expand(act_grid) * (q.global_scale if q.global_scale is not None else 1.0)
    return off1, offm, witness, S_act, act_grid


def _codes_mode(acodes: np.ndarray, fmt: AnyFormat, ec: np.ndarray, ev: np.ndarray, ke: np.ndarray,
                ke_nan: np.ndarray, zp: np.ndarray, S_act: np.ndarray) -> tuple:
    """Step 2 for actual codes: (codes, dequantised values, same, comparable, key distance, signed-zero count)."""
    ac = acodes.astype(np.uint64)
    an = is_nan(ac, fmt)
    av = decode(np.where(an, 0, ac), fmt).astype(np.float64)
    av = np.where(an, np.nan, av)
    same = (ac == ec) | (an & ke_nan) | (~an & ~ke_nan & (av == ev))
    signed_zeros = int((same & (ac != ec) & ~an).sum())
    known = ~an & ~ke_nan
    dist = np.where(known, to_key(np.where(an, 0, ac), fmt) - ke, 0)
    if isinstance(fmt, Format) and fmt.has_negative_zero:  # -0 and +0 are one point
        ka = to_key(np.where(an, 0, ac), fmt)
        dist = np.where((ka < 0) & (ke >= 0), dist + 1, np.where((ka >= 0) & (ke < 0), dist - 1, dist))
    a_vals = np.where(an, np.nan, (av - zp) * S_act)
    return ac, a_vals, same, known, dist, signed_zeros


def _worst_rows(cls: np.ndarray, known: np.ndarray, dist: np.ndarray, q: Any, xv: np.ndarray, a_code: Any,
                a_vals: np.ndarray, ec: np.ndarray, ev: np.ndarray, zp: np.ndarray, S_exp: np.ndarray,
                show: int, nonfinite: np.ndarray) -> list:
    """Step 4: the ``show`` worst elements: mismatches first, among them NaN / inf where the reference is
    finite (or the reverse: ``nonfinite``), then by code distance."""
    bad = np.flatnonzero((cls != "exact").ravel() | nonfinite.ravel())
    rank = np.array([RANK[c] for c in cls.ravel()[bad]])
    mag = np.where(known.ravel()[bad], -np.abs(dist.ravel()[bad]), -np.iinfo(np.int64).max)
    order = bad[np.lexsort((mag, ~nonfinite.ravel()[bad], rank))][:show]
    t = np.asarray(q.scaled, np.float64)
    rows = []
    for i in order:
        idx = tuple(int(v) for v in np.unravel_index(i, xv.shape)) if xv.ndim else ()
        acode = None if a_code is None or a_code.ravel()[i] is None else int(a_code.ravel()[i])
        rows.append(QuantElement(idx, float(xv.ravel()[i]), acode, float(a_vals.ravel()[i]), int(ec.ravel()[i]),
                                 float((ev.ravel()[i] - zp.ravel()[i]) * S_exp.ravel()[i]), float(t.ravel()[i]),
                                 float(S_exp.ravel()[i]), int(dist.ravel()[i]) if known.ravel()[i] else None,
                                 str(cls.ravel()[i])))
    return rows


def _values_mode(acodes: np.ndarray, afmt: AnyFormat, q: Any, ec: np.ndarray, ke: np.ndarray, zp: np.ndarray,
                 S: np.ndarray, fmt: AnyFormat) -> tuple:
    """Dequantized values: match each against the expected code and its two neighbours, rounded to afmt."""
    av = decode(acodes, afmt).astype(np.float64)
    lo, hi = key_bounds(fmt)
    a_n = np.isnan(av)
    ac = acodes.astype(np.uint64)
    same = np.zeros(av.shape, bool)
    dist = np.zeros(av.shape, np.int64)
    code = np.full(av.shape, None, dtype=object)
    e_nan = is_nan(ec, fmt)
    for d in (0, -1, 1):
        k = ke + d
        valid = (k >= lo) & (k <= hi) & ~e_nan
        c = from_key(np.where(valid, k, ke), fmt)
        cn = is_nan(c, fmt)
        v = decode(np.where(cn, 0, c), fmt).astype(np.float64) - zp
        rc = np.asarray(mul_round(v, S, afmt)).astype(np.uint64)  # the exact product, rounded once
        hit = valid & ~cn & (rc == ac) & (code == None) & ~a_n  # noqa: E711 (object array)
        hit |= valid & ~cn & ~a_n & (code == None) & (decode(rc, afmt).astype(np.float64) == av)  # noqa: E711
        code[hit] = c[hit].astype(np.int64)
        dist[hit] = d
        if d == 0:
            same = hit.copy()
    same |= a_n & e_nan
    known = code != None  # noqa: E711
    # unexplained values: the nearest element code of actual / S, for the report
    miss = ~known & ~a_n & ~e_nan
    if miss.any():
        with np.errstate(all="ignore"):
            est = np.asarray(cast(np.where(miss, av / S + zp, 0.0), fmt, overflow="saturate")).astype(np.uint64)
        dist = np.where(miss, to_key(est, fmt) - ke, dist)
        known = known | miss
    return code, av, same, known & ~a_n, dist


assert_quantized_close = asserting(check_quantized_close)
