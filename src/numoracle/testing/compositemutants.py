"""What an attention check can detect: a FlashAttention-2-style forward in float32 and six broken variants of it.

``fa2_forward`` is the online-softmax forward (Dao 2023, Algorithm 1) in numpy float32: per key block of ``block``
keys, S = scale q k^T, m_new = max(m, rowmax S), P = exp(S - m_new), l = exp(m - m_new) l + rowsum P,
O = exp(m - m_new) O + P v, and O / l at the end. Its switches make the mutants: no rescaling of l and O when the max
grows, P rounded to a narrow format before PV, a key block dropped, the causal mask off by one, a wrong scale, and
an all-zero output. :func:`attention_mutants` runs each through ``check_attention_close`` (the bound of the correct
kernel: block size, float32, exp as numpy's, taken as SLEEF _u35) and through a plain (rtol, atol) comparison
against the same exact reference, and reports both verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..composite.attention import attention_reference
from ..core.inputs import exact_float64
from .composite import _compare, check_attention_close

__all__ = ["fa2_forward", "attention_mutants", "MutantReport", "MUTANTS"]

MUTANTS = ("correct", "all-zero output", "missing rescale", "P rounded to e4m3", "dropped key block",
           "off-by-one mask", "wrong scale")


def fa2_forward(q: Any, k: Any, v: Any, *, scale: float | None = None, causal: bool = False, block: int = 32,
                rescale: bool = True, p_dtype: Any = None, drop_block: int | None = None, mask_offset: int = 0) -> Any:
    """Online-softmax attention forward in float32 (see the module docstring); float32 output."""
    qf, kf, vf = (np.asarray(exact_float64(a, n)[0], np.float32) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    L, D, Lk = qf.shape[-2], qf.shape[-1], kf.shape[-2]
    sc = np.float32(1 / np.sqrt(D) if scale is None else scale)
    m = np.full(qf.shape[:-1] + (1,), -np.inf, np.float32)
    lsum = np.zeros_like(m)
    acc = np.zeros(qf.shape[:-1] + (vf.shape[-1],), np.float32)
    rows = np.arange(L)[:, None]
    with np.errstate(all="ignore"):
        for b0 in range(0, Lk, block):
            if drop_block is not None and b0 // block == drop_block:
                continue
            cols = np.arange(b0, min(b0 + block, Lk))
            s = (qf @ np.swapaxes(kf[..., cols, :], -1, -2)) * sc
            if causal:
                s = np.where(cols[None, :] <= rows + mask_offset, s, np.float32(-np.inf))
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            p = np.exp(s - np.where(np.isfinite(m_new), m_new, 0)).astype(np.float32)
            alpha = np.exp(m - m_new).astype(np.float32) if rescale else np.float32(1)
            alpha = np.where(np.isfinite(m_new), alpha, np.float32(1))
            pv = p if p_dtype is None else p.astype(p_dtype).astype(np.float32)
            lsum = alpha * lsum + p.sum(axis=-1, keepdims=True, dtype=np.float32)
            acc = alpha * acc + pv @ vf[..., cols, :]
            m = m_new
        return (acc / lsum).astype(np.float32)


@dataclass(frozen=True)
class MutantReport:
    """Per kernel variant: does numoracle's check fail it, does the (rtol, atol) comparison pass it."""

    rtol: float
    atol: float
    rows: tuple[tuple[str, bool, bool, float], ...]  # (variant, numoracle check fails, (rtol, atol) passes, max ratio)

    def __str__(self) -> str:
        lines = [f"{'variant':<20} {'numoracle fails it':>19} {'rtol/atol passes it':>20}   max err/bound"]
        lines += [f"{n:<20} {str(f):>19} {str(p):>20}   {r:.3g}" for n, f, p, r in self.rows]
        return "\n".join(lines + [f"(rtol={self.rtol:g}, atol={self.atol:g})"])


def attention_mutants(q: Any, k: Any, v: Any, *, causal: bool = True, block: int = 32, rtol: float = 1.3e-6,
                      atol: float = 1e-5, **bound_kw: Any) -> MutantReport:
    """The correct fa2_forward and its mutants, each judged by check_attention_close and by (rtol, atol).

    The defaults (rtol, atol) are torch.testing.assert_close's for float32.
    """
    import ml_dtypes

    Lk = np.shape(exact_float64(k, "k")[0])[-2]
    variants = {"correct": {}, "missing rescale": {"rescale": False}, "P rounded to e4m3":
                {"p_dtype": ml_dtypes.float8_e4m3fn}, "dropped key block": {"drop_block": (Lk - 1) // block},
                "off-by-one mask": {"mask_offset": 1}, "wrong scale": {"scale": 1 / exact_float64(q, "q")[0].shape[-1]}}
    kw = {"acc": "fp32", "exp": "sleef_u35", "scale_rounded": True, "block": block, **bound_kw}
    base = check_attention_close(fa2_forward(q, k, v, causal=causal, block=block), q, k, v, causal=causal, **kw)
    ref = attention_reference(q, k, v, causal=causal, out="fp32")  # the same exact reference, rounded to fp32
    tol = base.bound.tolerance(q, k, v, causal=causal) + 2.0**-24 * np.abs(ref)
    rows = []
    for name in MUTANTS:
        if name == "all-zero output":
            out = np.zeros(ref.shape, np.float32)
        else:
            out = fa2_forward(q, k, v, causal=causal, block=block, **variants[name])
        rep = _compare("attention", out, ref, tol, base.bound)
        plain = bool(np.all(np.abs(out.astype(np.float64) - ref) <= atol + rtol * np.abs(ref)))
        rows.append((name, not rep.passed, plain, rep.max_ratio))
    return MutantReport(rtol, atol, tuple(rows))
