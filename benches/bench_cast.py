"""Conversion throughput: numoracle.cast against the fastest native cast of each pair, in one process.

Run: python benches/bench_cast.py [--log2n 22] [--repeat 5] [--src fp32] [--dst bf16,fp8_e4m3fn] [--mix all]
                                  [--modes rne] [--backends numpy,numba] [--sr-bits 16] [--sr-dtype uint32]

For each (source, destination, data mix, rounding mode, backend) it prints numoracle's time per element,
the fastest native cast's (numpy astype, ml_dtypes astype, torch CPU ``.to`` on one thread; native casts
round to nearest even only, so every mode is compared with that one time) and the ratio ours / native
(lower is better; 1.0 = as fast; for integer destinations also the ratio to the fastest native that rounds
and clamps as numoracle does, ``same_work``; stochastic rounding reads ``--sr-bits`` random bits per element, held in
``--sr-dtype``, so it reads more memory than the natives' RNE). The times are the median of ``--repeat``
runs, the runs of every candidate interleaved so that load on the machine hits all alike. Backends:
``numpy`` (no compiled kernel: ``jit.backend("numpy")``) and ``numba`` (``jit.backend("numba")``, where numba
is installed).

Data mixes (values of the destination's own ranges, generated in FP64 and rounded to the source):
  normal     log-uniform magnitudes over the destination's normal range, random signs
  subnormal  magnitudes whose results are subnormal (from half the smallest subnormal to the smallest normal)
  overflow   magnitudes above the destination's largest finite value (up to the source's), 1% infinities
  nan        NaNs with random payloads and signs
  mixed      magnitudes 2^-10..2^10 log-uniform, plus 2% huge (2^100), 2% tiny (2^-100), 1% specials
             (+-0, +-inf, NaN)
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from timing import median_times

import numoracle as no
from numoracle.core import jit
from numoracle.core.formats.format import format_of
from numoracle.core.formats.interop import native_dtype

MODES = ("rne", "rna", "rtz", "ru", "rd", "rto", "sr")
MIXES = ("normal", "subnormal", "overflow", "nan", "mixed")
DSTS = ("bf16", "fp16", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp6_e2m3fn", "fp6_e3m2fn",
        "fp4_e2m1fn", "e8m0fnu", "int8", "int32")
_TORCH = {"bf16": "bfloat16", "fp16": "float16", "fp8_e4m3fn": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
          "fp8_e4m3fnuz": "float8_e4m3fnuz", "fp8_e5m2fnuz": "float8_e5m2fnuz", "int8": "int8", "int32": "int32",
          "fp32": "float32", "fp64": "float64"}


def values(mix: str, dst, n: int, rng: np.random.Generator) -> np.ndarray:
    """n float64 values of the mix, in the destination's ranges."""
    sign = rng.choice([-1.0, 1.0], n)
    if dst.is_integer:
        lo, hi = 0.0, float(2 ** (dst.bits - 1))
        sub_lo, sub_hi = 2.0 ** -20, 1.0
    else:
        lo, hi = float(dst.min_normal), float(dst.max_finite)
        sub_lo, sub_hi = float(dst.min_subnormal) / 2, lo
    if mix == "normal":
        mag = _loguniform(rng, max(lo, 2.0 ** -20), hi, n) if dst.is_integer else _loguniform(rng, lo, hi, n)
    elif mix == "subnormal":
        mag = _loguniform(rng, sub_lo, sub_hi, n)
    elif mix == "overflow":
        mag = _loguniform(rng, hi * 1.002, 3.4e38, n)
        mag[rng.random(n) < 0.01] = np.inf
    elif mix == "nan":
        bits = rng.integers(0x7FF0000000000001, 0x7FFFFFFFFFFFFFFF, n, dtype=np.int64)
        bits[rng.random(n) < 0.5] |= np.int64(-(1 << 63))
        return bits.view(np.float64)
    else:
        mag = _loguniform(rng, 2.0 ** -10, 2.0 ** 10, n)
        u = rng.random(n)
        mag[u < 0.02] = 2.0 ** 100
        mag[(u >= 0.02) & (u < 0.04)] = 2.0 ** -100
        spec = (u >= 0.04) & (u < 0.05)
        mag[spec] = rng.choice([0.0, np.inf, np.nan], int(spec.sum()))
    if not dst.is_integer and not dst.signed:
        sign = np.abs(sign)
    return sign * mag


def _loguniform(rng, lo: float, hi: float, n: int) -> np.ndarray:
    return np.exp2(rng.uniform(np.log2(lo), np.log2(hi), n))


def as_source(v: np.ndarray, src: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        if src == "fp64":
            return v
        if src == "fp32":
            return v.astype(np.float32)
        return v.astype(np.float32).astype(native_dtype(format_of(src)))


def natives(src: str, dst: str) -> dict:
    """The native casts of (src, dst): name -> function of the source array."""
    out = {}
    fmt = format_of(dst)
    dt = native_dtype(fmt)
    if dt is not None:
        lib = "numpy" if dt.type.__module__ == "numpy" else "ml_dtypes"
        out[lib] = lambda x, dt=dt: x.astype(dt)
    try:
        import torch
    except ImportError:  # pragma: no cover
        return out
    torch.set_num_threads(1)
    td = getattr(torch, _TORCH.get(dst, "none"), None)
    if td is not None and src in ("fp32", "fp64"):
        out["torch"] = lambda x, td=td: torch.from_numpy(x).to(td)
    elif td is not None and src in ("bf16", "fp16"):  # the codes, viewed as torch's dtype
        tsrc = getattr(torch, _TORCH[src])
        out["torch"] = lambda x, td=td, tsrc=tsrc: torch.from_numpy(x.view(np.int16)).view(tsrc).to(td)
    return out


def same_work(src: str, dst: str) -> dict:
    """For integer destinations, native casts that do numoracle's work too: round to nearest even and clamp to the
    range before the conversion (numpy ``rint`` + ``clip`` + ``astype``, torch ``round`` + ``clamp`` + ``.to``),
    where the plain casts above truncate and wrap. The same work as ``cast(x, dst)`` in RNE, and the same result but
    for NaN (their conversion of NaN is undefined, numoracle's maps it by the policy) and INT32's top (its max
    rounds to 2^31 as a float32 bound, which then converts out of range); timed beside the others for the second
    ratio."""
    fmt = format_of(dst)
    if not fmt.is_integer:
        return {}
    lo, hi = float(fmt.min_value), float(fmt.max_value)
    dt = native_dtype(fmt)
    out = {}
    if src in ("fp32", "fp64", "fp16"):
        out["numpy rint+clip"] = lambda x: np.clip(np.rint(x), lo, hi).astype(dt)
    try:
        import torch
    except ImportError:  # pragma: no cover
        return out
    td = getattr(torch, _TORCH[dst])
    if src in ("fp32", "fp64"):
        out["torch round+clamp"] = lambda x: torch.from_numpy(x).round().clamp_(lo, hi).to(td)
    else:  # (in float32: INT32's bounds are no FP16 values)
        tsrc = getattr(torch, _TORCH[src])
        out["torch round+clamp"] = lambda x: torch.from_numpy(x.view(np.int16)).view(tsrc).float().round() \
            .clamp_(lo, hi).to(td)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=22)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--src", default="fp32", help="comma-separated: fp32, fp16, bf16, fp64")
    ap.add_argument("--dst", default=",".join(DSTS))
    ap.add_argument("--mix", default=",".join(MIXES))
    ap.add_argument("--modes", default="rne")
    ap.add_argument("--backends", default="numpy,numba")
    ap.add_argument("--sr-bits", type=int, default=16, help="stochastic rounding's random bits per element")
    ap.add_argument("--sr-dtype", default="uint32", help="their dtype (uint8, uint16, uint32, int32, ...)")
    args = ap.parse_args()
    n = 1 << args.log2n
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    rbits = rng.integers(0, 1 << args.sr_bits, n, dtype=np.uint64).astype(args.sr_dtype)
    backends = [b for b in args.backends.split(",") if b != "numba" or jit._numba() is not None]
    print(f"{'src':<5} {'dst':<13} {'mix':<9} {'mode':<4} {'backend':<6} {'ours ns':>8} {'native':<9} "
          f"{'nat ns':>7} {'ratio':>6}")
    for src in args.src.split(","):
        for dst in args.dst.split(","):
            fmt = format_of(dst)
            if fmt == format_of(src):
                continue
            for mix in args.mix.split(","):
                if mix == "subnormal" and fmt.is_integer or (mix == "nan" and src == "int"):
                    continue
                x = as_source(values(mix, fmt, n, rng), src)
                nat, same = natives(src, dst), same_work(src, dst)
                runs, names = [], []
                for kind, cands in (("native", nat), ("same", same)):
                    for name, f in cands.items():
                        runs.append(lambda f=f, x=x: f(x))
                        names.append((kind, name))
                for mode in args.modes.split(","):
                    kw = {"rounding": mode}
                    if mode == "sr":
                        kw.update(sr_bits=args.sr_bits, random_bits=rbits)
                    for b in backends:
                        def ours(x=x, kw=kw, b=b, fmt=fmt):
                            with jit.backend(b):
                                no.cast(x, fmt, **kw)
                        runs.append(ours)
                        names.append((mode, b))
                for r in runs:  # warm up: kernels loaded (compiled on a machine's first run), pages touched
                    r()
                times = median_times(runs, args.repeat)
                nat_t = {nm[1]: t for nm, t in zip(names, times) if nm[0] == "native"}
                best_lib = min(nat_t, key=nat_t.get) if nat_t else "-"
                t_nat = nat_t.get(best_lib, float("nan"))
                same_t = {nm[1]: t for nm, t in zip(names, times) if nm[0] == "same"}
                best_same = min(same_t, key=same_t.get) if same_t else None
                for (mode, b), t in zip(names, times):
                    if mode in ("native", "same"):
                        continue
                    extra = "" if best_same is None else \
                        f"   {t / same_t[best_same]:>5.2f} vs {best_same} ({same_t[best_same] / n * 1e9:.2f} ns)"
                    print(f"{src:<5} {dst:<13} {mix:<9} {mode:<4} {b:<6} {t / n * 1e9:>8.2f} {best_lib:<9} "
                          f"{t_nat / n * 1e9:>7.2f} {t / t_nat:>6.2f}{extra}", flush=True)


if __name__ == "__main__":
    main()
