"""Counterexamples: inputs of the watched row on which two classes' orders give the most different bits (searched
through simulate), then confirmed by calling the kernel at both configurations."""

from __future__ import annotations

import numpy as np

from ..core.formats.interop import native_dtype
from ..models.orders.basic import Order
from .kernel import KINDS, KernelAt, KernelCallError, RowData, draw_row, same_bits
from .report import Counterexample

__all__ = ["find_counterexample", "ulp_gap"]

DRAWS = 8          # random rows per kind scored first
CLIMB = 24         # perturbation steps from the best of them


def ulp_gap(a: np.ndarray, b: np.ndarray, dt: np.dtype | None) -> int:
    """The largest distance in ULPs of ``dt`` (the kernel's output type) between a and b, elementwise; NaN against
    a number counts as 2^40."""
    if np.isnan(a).any() or np.isnan(b).any():
        return 0 if np.array_equal(np.isnan(a), np.isnan(b)) and same_bits(a, b).all() else 1 << 40
    dt = dt if dt is not None and dt.itemsize in (2, 4, 8) else np.dtype(np.float64)
    it = np.dtype(f"int{dt.itemsize * 8}")
    mag = np.int64(np.iinfo(it).max)

    def key(v: np.ndarray) -> np.ndarray:
        i = np.asarray(v).astype(dt).view(it).astype(np.int64)
        return np.where(i < 0, -(i & mag), i)
    return int(np.abs(key(a) - key(b)).max()) if a.size else 0


def _perturb(rng: np.random.Generator, d: RowData) -> RowData:
    """A neighbour of d: one term in eight scaled by 2^-4..2^4 (exponent moves are what make orders differ)."""
    x = d.x.astype(np.float64)
    pick = rng.random(x.size) < 0.125
    x[pick] *= np.exp2(rng.integers(-4, 5, int(pick.sum())))
    return RowData(x.astype(d.x.dtype), d.y, d.kind, d.perm)


def _search(ka: KernelAt, kb: KernelAt, oa: Order, ob: Order, rng: np.random.Generator,
            dt: np.dtype | None) -> tuple[RowData, int, int]:
    """(best row, its ULP gap between the two orders' simulations, rows scored): DRAWS rows of each kind (sharing
    one y per kind, so each batch is simulated at once), then CLIMB perturbations of the best, in batches."""
    def best_of(ds: list[RowData]) -> tuple[RowData, int]:
        gaps = [ulp_gap(a, b, dt) for a, b in zip(ka.simulate_rows(oa, ds), kb.simulate_rows(ob, ds))]
        i = int(np.argmax(gaps))
        return ds[i], gaps[i]
    best, top, tried = None, -1, 0
    for kind in KINDS:
        first = draw_row(rng, ka.op, ka.K, ka.N, kind, ka.dt)
        ds = [first] + [draw_row(rng, ka.op, ka.K, ka.N, kind, ka.dt, like=first) for _ in range(DRAWS - 1)]
        d, s = best_of(ds)
        tried += len(ds)
        if s > top:
            best, top = d, s
    assert best is not None
    for _ in range(CLIMB // DRAWS if top > 0 else 0):
        ds = [_perturb(rng, best) for _ in range(DRAWS)]
        d, s = best_of(ds)
        tried += len(ds)
        if s > top:
            best, top = d, s
    return best, top, tried


def find_counterexample(ka: KernelAt, kb: KernelAt, names: tuple[str, str], oa: Order, ob: Order,
                        seed: int) -> Counterexample | None:
    """The watched row's inputs maximising the difference of the two orders' outputs, and the kernel's outputs on
    them at both configurations; when the orders never differ on the inputs tried, random rows are given to the
    kernel directly. None when the kernel raises."""
    rng = np.random.default_rng([seed, 11])
    if ka.out_fmt is None:          # tried in a worker: one call here learns the kernel's output format
        try:
            ka.watched(draw_row(rng, ka.op, ka.K, ka.N, KINDS[0], ka.dt))
        except KernelCallError:
            return None
    fmt = ka.out_fmt
    dt = native_dtype(fmt) if fmt is not None else None
    best, top, tried = _search(ka, kb, oa, ob, rng, dt)
    how = f"found through simulate (the orders' outputs {top} ULPs apart, the largest found)"
    try:
        oa_, ob_ = ka.watched(best), kb.watched(best)
        if top == 0:
            for i in range(DRAWS * len(KINDS)):
                d = draw_row(rng, ka.op, ka.K, ka.N, KINDS[i % len(KINDS)], ka.dt)
                oa_, ob_, best, tried = ka.watched(d), kb.watched(d), d, tried + 1
                if not same_bits(oa_, ob_).all():
                    break
            how = "the two orders' simulations never differed; random rows given to the kernel directly"
    except KernelCallError:
        return None
    agrees = bool(same_bits(oa_, ka.simulate(oa, best)).all() and same_bits(ob_, kb.simulate(ob, best)).all())
    confirmed = not same_bits(oa_, ob_).all()
    return Counterexample(ka.config, kb.config, names[0], names[1], ka.batch(best), kb.batch(best), ka.row, kb.row,
                          oa_, ob_, ulp_gap(oa_, ob_, dt) if confirmed else 0, confirmed, agrees, tried, how)
