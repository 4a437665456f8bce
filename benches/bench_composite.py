"""Composite operations: attention's exact reference and bound at B*H = 32, L = 1024, D = 128 (fp32), and the
observed error of torch's CPU kernels against the bounds (the table of docs/composite.md).

Run: python benches/bench_composite.py [--bh 32 --seq 1024 --dim 128] [--table [--jax]]
The target (issue 38): reference + bound in at most 30 s on the 2-core machine. The machine is shared with other
work; times vary by 2x or more under load. The float64 SDPA time is printed next to it as the same-shape baseline.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import numoracle.composite  # noqa: F401  (registers the bound ops)
from numoracle.bounds.expected import expected_error_bound
from numoracle.composite.attention import attention_reference


def speed(bh: int, seq: int, dim: int) -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((bh, seq, dim)).astype(np.float32) for _ in range(3))
    t0 = time.perf_counter()
    ref = attention_reference(q, k, v, causal=True)
    t1 = time.perf_counter()
    tol = expected_error_bound("attention", "fp32", seq, head_dim=dim, block=64).tolerance(q, k, v, causal=True)
    t2 = time.perf_counter()
    base = float("nan")
    try:
        import torch

        t3 = time.perf_counter()
        torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a).double() for a in (q, k, v)),
                                                         is_causal=True)
        base = time.perf_counter() - t3
    except ImportError:
        pass
    print(f"attention B*H={bh} L={seq} D={dim} fp32, causal: reference {t1 - t0:.1f} s, bound {t2 - t1:.1f} s, "
          f"total {t2 - t0:.1f} s (target <= 30 s); float64 torch SDPA {base:.2f} s; "
          f"max tolerance {float(tol.max()):.3g}, output checksum {float(np.abs(ref).sum()):.6g}")


def torch_moments_depth(K: int) -> int:
    """The most Welford updates and merges on one element's path in torch 2.13.0's CPU ``RowwiseMoments`` (read from
    ATen's moments_utils.h, composite/sim/moments.py): <= 16 updates in a chunk, the chunk stack's merges
    (ceil(log2(chunks)) + 1), up to 16 lane merges (bf16: two float vectors of 8 per step) and up to 15 tail updates."""
    return min(K - 1, 34 + (-(-K // 16) - 1).bit_length())


def _stats(name: str, how: str, rows: int, ratios: list) -> None:
    r = np.concatenate([np.ravel(x) for x in ratios])
    print(f"| {name} | {how} | {rows} | {r.size} | {np.median(r):.3g} | {r.max():.3g} |", flush=True)


_KINDS = ("0.5", "3", "20", "1000", "ties", "masked")
_ROWS = {8: 768, 100: 768, 1000: 256, 4096: 64}  # rows per (K, kind): >= 10^4 rows per kernel


def _logits(rng, R: int, K: int, kind: str) -> tuple:
    """(x float64, keep or None): scaled normal rows, near-ties (pairs 2^-20 apart) or rows with masked entries
    (a random half, the first entry kept; one row in 16 keeps only that entry)."""
    if kind == "ties":
        x = rng.standard_normal((R, K)) * 3
        x[:, 1::2] = x[:, ::2][:, : K // 2] * (1 + 2.0**-20)
        return x, None
    if kind == "masked":
        keep = rng.random((R, K)) < 0.5
        keep[:, 0] = True
        keep[::16, 1:] = False
        return rng.standard_normal((R, K)) * 20, keep
    return rng.standard_normal((R, K)) * float(kind), None


def _softmax_rows(torch, fmt: str, dt, rng) -> None:
    kw = dict(acc="fp32", out=fmt, exp="sleef_u10", log="sleef_u10")
    ops = (("softmax", torch.softmax, {"div": 1}, "div=1 (e * fl(1/S))"),
           ("log_softmax", torch.log_softmax, {"stats": "bf16"} if fmt == "bf16" else {},
            'stats="bf16"' if fmt == "bf16" else "fused"),
           ("logsumexp", torch.logsumexp, {"form": "composed"}, 'form="composed"'))
    for op, fn, extra, how in ops:
        ratios, rows = [], 0
        for K, R in _ROWS.items():
            b = expected_error_bound(op, fmt, K, **kw, **extra)
            for kind in _KINDS:
                x, keep = _logits(rng, R, K, kind)
                xt = torch.tensor(x).to(dt)
                if keep is not None:
                    xt = xt.masked_fill(~torch.from_numpy(keep), float("-inf"))
                got, exact = fn(xt, -1).double().numpy(), fn(xt.double(), -1).numpy()
                tol = b.tolerance(torch.where(torch.isinf(xt), 0, xt), mask=keep) + 1e-13 * (np.abs(exact) + 1)
                with np.errstate(invalid="ignore"):
                    r = np.abs(got - exact) / tol
                ratios.append(r if keep is None or op == "logsumexp" else r[keep])
                rows += R
        _stats(f"{op} {fmt}", how + ", exp/log SLEEF u10", rows, ratios)


def _norm_rows(torch, fmt: str, dt, rng, kind: str = "worst") -> None:
    F = torch.nn.functional
    for op in ("layer_norm", "rms_norm"):
        ratios, rows = [], 0
        for K, R in ((16, 2560), (1000, 128), (4096, 32), (16384, 8)):
            for off, sc in ((5, 3), (100, 1), (1, 0.01), (0, 1000)):
                x = torch.tensor(rng.standard_normal((R, K)) * sc + off).to(dt)
                w, bb = (torch.tensor(rng.standard_normal(K)).to(dt) for _ in range(2))
                if op == "layer_norm":
                    b = expected_error_bound("layernorm", fmt, K, acc="fp32", out=fmt, eps=1e-5, affine="folded",
                                             rsqrt=1, variance="welford", moments_depth=torch_moments_depth(K),
                                             kind=kind)
                    got = F.layer_norm(x, (K,), w, bb, eps=1e-5).double().numpy()
                    ex = F.layer_norm(x.double(), (K,), w.double(), bb.double(), eps=1e-5).numpy()
                    ratios.append(np.abs(got - ex) / (b.tolerance(x, w, bb, eps=1e-5) + 1e-13 * (np.abs(ex) + 1)))
                else:
                    b = expected_error_bound("rmsnorm", fmt, K, acc="fp32", out=fmt, eps=1e-6, rsqrt=1, kind=kind)
                    got = F.rms_norm(x, (K,), w, eps=1e-6).double().numpy()
                    ex = F.rms_norm(x.double(), (K,), w.double(), eps=1e-6).numpy()
                    ratios.append(np.abs(got - ex) / (b.tolerance(x, w, eps=1e-6) + 1e-13 * (np.abs(ex) + 1)))
                rows += R
        how = ('variance="welford", moments_depth (RowwiseMoments), affine="folded"' if op == "layer_norm"
               else "composite: squares, sum, 1/sqrt") + ", rsqrt 1 ulp (1/fl(sqrt))" + (
                   ', kind="probabilistic"' if kind != "worst" else "")
        _stats(f"{op} {fmt}", how, rows, ratios)


def _attention_rows(torch, fmt: str, dt, rng, kind: str = "worst") -> None:
    F = torch.nn.functional
    ratios, rows = [], 0
    for L, D, causal, sc, masked in ((64, 32, False, 1, False), (256, 64, True, 1, False), (512, 128, True, 1, False),
                                     (256, 64, False, 4, False), (256, 256, False, 1, False),
                                     (1024, 64, True, 1, False), (256, 64, False, 1, True)):
        q, k, v = (torch.tensor(rng.standard_normal((4, L, D)) * s).to(dt) for s in (sc, sc, 1))
        keep = None
        if masked:
            keep = rng.random((L, L)) < 0.3
            keep[:, 0] = True
        am = None if keep is None else torch.from_numpy(keep)
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=am, is_causal=causal).double().numpy()
        ex = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=am,
                                            is_causal=causal).numpy()
        b = expected_error_bound("attention", fmt, L, acc="fp32", out=fmt, exp="sleef_u35", scale_rounded=True,
                                 block=32, kind=kind)
        ratios.append(np.abs(got - ex) / (b.tolerance(q, k, v, causal=causal, mask=keep) + 1e-13 * (np.abs(ex) + 1)))
        rows += 4 * L
    _stats(f"scaled_dot_product_attention {fmt} (default CPU backend)", 'block=32, scale_rounded, exp "sleef_u35"'
           + (', kind="probabilistic"' if kind != "worst" else ""), rows, ratios)


def table() -> None:
    """err / bound of torch CPU kernels (torch in float64 as the exact value) over random and adversarial rows,
    each bound given the kernel's evaluation (docs/composite.md, "Bit-exact models")."""
    import torch

    rng = np.random.default_rng(1)
    print(f"| kernel (torch {torch.__version__}) | the bound's evaluation | rows | elements | median err/bound | "
          "max err/bound |")
    print("|---|---|---|---|---|---|")
    for fmt, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        _softmax_rows(torch, fmt, dt, rng)
        _norm_rows(torch, fmt, dt, rng)
        _attention_rows(torch, fmt, dt, rng)
    for fmt, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):  # the probabilistic forms (HM 2019)
        _norm_rows(torch, fmt, dt, rng, "probabilistic")
        _attention_rows(torch, fmt, dt, rng, "probabilistic")


def jax_table() -> None:
    """err / bound of jax's CPU softmax and dot_product_attention (exact references rounded to fp32, that rounding
    added to the bound); outputs flushed to zero (jax's CPU flushes results below 2^-126) counted apart."""
    import jax
    import ml_dtypes

    from numoracle.composite.softmax import softmax_reference

    rng = np.random.default_rng(2)
    print(f"| kernel (jax {jax.__version__}, CPU) | the bound's evaluation | rows | elements | flushed to 0 | "
          "median err/bound | max err/bound |")
    print("|---|---|---|---|---|---|---|")
    for fmt, dt in (("fp32", np.float32), ("bf16", ml_dtypes.bfloat16)):
        ratios, rows, flushed = [], 0, 0
        extra = {"form": "composed"} if fmt == "bf16" else {}
        for K, R in _ROWS.items():
            b = expected_error_bound("softmax", fmt, K, acc="fp32", out=fmt, exp="sleef_u35", div=1, **extra)
            for kind in _KINDS:
                x, keep = _logits(rng, R, K, kind)
                x = x.astype(dt)
                xj = x if keep is None else np.where(keep, x, -np.inf).astype(dt)  # masked entries: -inf
                got = np.asarray(jax.nn.softmax(jax.numpy.asarray(xj), axis=-1)).astype(np.float64)
                ref = softmax_reference(x, mask=keep, out="fp32")
                fl = (got == 0) & (ref < 2.0**-125)
                kept = ~fl if keep is None else ~fl & keep
                flushed += int((fl if keep is None else fl & keep).sum())
                with np.errstate(invalid="ignore"):  # masked entries: 0 / 0, left out
                    ratios.append((np.abs(got - ref) / (b.tolerance(x, mask=keep) + 2.0**-24 * ref))[kept])
                rows += R
        how = 'form="composed" (every step may store bf16), div=1' if fmt == "bf16" else "fused, div=1"
        r = np.concatenate([np.ravel(a) for a in ratios])
        print(f"| jax.nn.softmax {fmt} | {how} | {rows} | {r.size + flushed} | {flushed} | {np.median(r):.3g} | "
              f"{r.max():.3g} |", flush=True)
    from numoracle.composite.attention import attention_reference

    for fmt, dt in (("fp32", np.float32), ("bf16", ml_dtypes.bfloat16)):
        ratios, rows = [], 0
        extra = {"normalize": "before", "p_format": "bf16"} if fmt == "bf16" else {}
        for L, D, causal, sc in ((64, 32, True, 1), (256, 64, False, 1), (256, 64, True, 4), (256, 256, True, 1),
                                 (1024, 64, True, 1)):
            q, k, v = ((rng.standard_normal((2, L, 4, D)) * s).astype(dt) for s in (sc, sc, 1))
            got = np.swapaxes(np.asarray(jax.nn.dot_product_attention(q, k, v, is_causal=causal)), 1, 2)
            qt, kt, vt = (np.swapaxes(a, 1, 2) for a in (q, k, v))
            ref = attention_reference(qt, kt, vt, causal=causal, out="fp32")
            b = expected_error_bound("attention", fmt, L, acc="fp32", out=fmt, exp="sleef_u35", scale_rounded=True,
                                     div=1, **extra)
            tol = b.tolerance(qt, kt, vt, causal=causal) + 2.0**-24 * np.abs(ref)
            ratios.append(np.abs(got.astype(np.float64) - ref) / tol)
            rows += 8 * L
        how = 'normalize="before", p_format="bf16"' if fmt == "bf16" else "normalize after (same bound: fp32 P)"
        r = np.concatenate([np.ravel(a) for a in ratios])
        print(f"| jax.nn.dot_product_attention {fmt} | {how} | {rows} | {r.size} | 0 | {np.median(r):.3g} | "
              f"{r.max():.3g} |", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bh", type=int, default=32)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--table", action="store_true", help="print the observed-error table instead of timing")
    p.add_argument("--jax", action="store_true", help="with --table: jax's softmax and dot_product_attention")
    a = p.parse_args()
    if a.table:
        jax_table() if a.jax else table()
    else:
        speed(a.bh, a.seq, a.dim)


if __name__ == "__main__":
    main()
