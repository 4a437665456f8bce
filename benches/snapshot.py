"""A seeded snapshot of numoracle's results, hashed: run before and after a refactoring and compare.

    python benches/snapshot.py > before.json        # on the old code
    python benches/snapshot.py > after.json         # on the new code
    python benches/snapshot.py --compare before.json after.json

Each item (simulate for every order and preset, the bounds, exact_*, casts in every mode, quantize for every
scheme, identify and reveal reports on fixed inputs) is computed on both backends (the numpy reference and the
compiled kernels, where numba is installed) and hashed; the two backends must agree, and the hashes must equal the
other snapshot's. Names are looked up in the public namespaces, so the script runs on both sides of a move.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zlib

import numpy as np

import numoracle

_SPACES = ("", "orders", "formats", "quant", "testing", "bounds", "exact")


def _get(name: str):
    """A public name, wherever the version of numoracle running keeps it."""
    for space in _SPACES:
        mod = numoracle if not space else getattr(numoracle, space, None)
        if mod is not None and hasattr(mod, name):
            return getattr(mod, name)
    raise AttributeError(name)


def _digest(value) -> str:
    h = hashlib.sha256()

    def feed(v):
        if isinstance(v, np.ndarray):
            h.update(str(v.dtype).encode() + str(v.shape).encode())
            h.update(np.ascontiguousarray(v).view(np.uint8).tobytes())
        elif isinstance(v, (list, tuple)):
            for x in v:
                feed(x)
        elif isinstance(v, dict):
            for k in sorted(v):
                h.update(str(k).encode())
                feed(v[k])
        elif isinstance(v, (str, int, float, bool, type(None), np.generic)):
            h.update(repr(v).encode())
        elif hasattr(v, "__dict__") or hasattr(v, "__slots__"):   # a result object: its arrays and plain fields
            names = sorted(getattr(v, "__dataclass_fields__", None) or vars(v))
            feed({k: getattr(v, k) for k in names if isinstance(getattr(v, k), (np.ndarray, str, int, float))})
        else:
            h.update(repr(v).encode())

    feed(value)
    return h.hexdigest()[:16]


def _rng(tag: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(tag.encode()))


def _orders():
    o = numoracle.orders
    yield "sequential", o.Sequential()
    yield "pairwise", o.Pairwise()
    yield "blocked64", o.parse("blocked:64")
    yield "splitk4", o.SplitK(4)
    yield "numpy_pairwise", o.NumpyPairwise()
    for name in sorted(o.PRESETS):
        yield f"preset:{name}", o.parse(f"preset:{name}")
    yield "gpureduce", o.GpuReduce()
    yield "vectorcascade", o.parse("VectorCascade()") if hasattr(o, "VectorCascade") else None
    yield "ynnsum", o.YnnSum()


def _items():
    simulate = _get("simulate")
    out = {}
    # simulate: every order and preset on sum and matmul, FP16 / BF16 / FP32 inputs
    for name, order in _orders():
        if order is None:
            continue
        for dt in ("float16", "float32"):
            r = _rng(name + dt)
            x = r.standard_normal((4, 300)).astype(dt)
            a = r.standard_normal((6, 200)).astype(dt)
            b = r.standard_normal((200, 5)).astype(dt)
            for op, args in (("sum", (x,)), ("matmul", (a, b))):
                try:
                    out[f"simulate/{name}/{dt}/{op}"] = simulate(op, *args, order=order, codes=True)
                except Exception as e:  # an order that does not take this op or format: its error is the result
                    out[f"simulate/{name}/{dt}/{op}"] = type(e).__name__ + ": " + str(e)
    for acc in ("fp16", "bf16", "fp32"):
        for mode in ("rne", "rtz", "ru", "rd"):
            r = _rng(acc + mode)
            a = r.standard_normal((8, 256)).astype(np.float32)
            b = r.standard_normal((256, 8)).astype(np.float32)
            out[f"simulate/seq/{acc}/{mode}"] = simulate("matmul", a, b, acc=acc, rounding=mode, codes=True)
    # exact references
    r = _rng("exact")
    x = (r.standard_normal((7, 513)) * 2.0 ** r.integers(-40, 40, (7, 513))).astype(np.float32)
    A = (r.standard_normal((9, 300)) * 2.0 ** r.integers(-20, 20, (9, 300))).astype(np.float32)
    B = (r.standard_normal((300, 11)) * 2.0 ** r.integers(-20, 20, (300, 11))).astype(np.float32)
    for out_fmt in ("fp32", "bf16", "fp16"):
        out[f"exact_sum/{out_fmt}"] = _get("exact_sum")(x, out=out_fmt)
        out[f"exact_dot/{out_fmt}"] = _get("exact_dot")(x[0], x[1], out=out_fmt)
        out[f"exact_matmul/{out_fmt}"] = _get("exact_matmul")(A, B, out=out_fmt)
    # bounds
    bound = _get("expected_error_bound")
    for op in ("sum", "dot", "matmul"):
        for dt in ("fp32", "bf16", "fp16", "fp8_e4m3fn"):
            for kind in ("worst", "probabilistic"):
                for K in (16, 1000, 4096):
                    try:
                        out[f"bound/{op}/{dt}/{kind}/{K}"] = str(bound(op, dt, K, kind=kind))
                    except Exception as e:
                        out[f"bound/{op}/{dt}/{kind}/{K}"] = type(e).__name__ + ": " + str(e)
    # casts in every mode and the main overflow policies
    cast = _get("cast")
    r = _rng("cast")
    bits32 = r.integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32)
    bits64 = r.integers(0, 2**63, 20_000, dtype=np.uint64) | (r.integers(0, 2, 20_000, dtype=np.uint64) << 63)
    dsts = ("bf16", "fp16", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp6_e2m3fn", "fp4_e2m1fn", "e8m0fnu",
            "int8", "uint8", "int32")
    for dst in dsts:
        for mode in ("rne", "rtz", "ru", "rd", "rna", "rno"):
            for src, bits in (("fp32", bits32), ("fp64", bits64)):
                key = f"cast/{src}/{dst}/{mode}"
                try:
                    out[key] = cast(bits, dst, src=src, rounding=mode)
                except Exception as e:
                    out[key] = type(e).__name__ + ": " + str(e)
            try:
                out[f"cast/fp32/{dst}/{mode}/saturate"] = cast(bits32, dst, src="fp32", rounding=mode,
                                                              overflow="saturate")
            except Exception as e:
                out[f"cast/fp32/{dst}/{mode}/saturate"] = type(e).__name__ + ": " + str(e)
    # quantize: every scheme
    r = _rng("quant")
    W = r.standard_normal((256, 64)).astype(np.float32)
    quantize = _get("quantize")
    for fmt in ("int8", "fp8_e4m3fn", "int4", "fp4_e2m1fn"):
        for gran in ("tensor", "channel", ("group", 32)):
            q = quantize(W, fmt, granularity=gran)
            out[f"quantize/{fmt}/{gran}"] = q
    for fmt in ("mxfp8", "mxfp4", "nvfp4"):
        try:
            q = quantize(W, fmt)
            out[f"quantize/{fmt}"] = q
        except Exception as e:
            out[f"quantize/{fmt}"] = type(e).__name__ + ": " + str(e)
    for cb in ("nf4", "bnb_fp4"):
        q = _get("quantize_codebook")(W, cb)
        out[f"codebook/{cb}"] = q
    for qt in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"):
        out[f"gguf/{qt}"] = _get("gguf_quantize")(W.ravel(), qt)
    i4 = _get("quantize_int4")(W, group=64)
    out["int4"] = i4
    # identify and reveal on fixed inputs
    r = _rng("identify")
    a = r.standard_normal((8, 512)).astype(np.float32)
    b = r.standard_normal((512, 8)).astype(np.float32)
    actual = simulate("matmul", a, b, order=numoracle.orders.Pairwise(), out="fp32")
    rep = _get("identify_order")(actual, "matmul", a, b, candidates=[numoracle.orders.Sequential(),
                                                                      numoracle.orders.Pairwise()])
    out["identify"] = (rep.verdict, [(str(c.order), c.matched, c.total) for c in rep.candidates])

    def kernel(x):
        return simulate("sum", x, order=numoracle.orders.parse("blocked:8"))

    rev = _get("reveal_order")(kernel, "sum", n=64, max_seconds=120)
    out["reveal"] = str(rev.order)
    return out


def snapshot() -> dict:
    from numoracle.core import jit

    with jit.disabled():
        a = {k: _digest(v) for k, v in _items().items()}
    if jit._numba() is None:
        return {"items": a, "compiled": "numba not installed"}
    with jit.forced():
        b = {k: _digest(v) for k, v in _items().items()}
    differ = sorted(k for k in a if a[k] != b.get(k))
    return {"items": a, "compiled_differs": differ}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--compare"]:
        x, y = (json.load(open(p)) for p in argv[1:3])
        bad = sorted(k for k in set(x["items"]) | set(y["items"]) if x["items"].get(k) != y["items"].get(k))
        print(f"{len(x['items'])} items; differ: {len(bad)}")
        for k in bad:
            print("  ", k, x["items"].get(k), y["items"].get(k))
        return 1 if bad else 0
    snap = snapshot()
    json.dump(snap, sys.stdout, indent=1, sort_keys=True)
    print()
    print(f"{len(snap['items'])} items; numpy and compiled paths differ on: {snap.get('compiled_differs')}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
