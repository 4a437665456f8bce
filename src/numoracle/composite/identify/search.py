"""Which model did a composite kernel compute? ``identify_composite(actual, op, x)`` scores candidate models
(``models.py``: sum orders x elementwise functions x step forms, torch's CPU kernels named) by the output elements
they reproduce bit for bit, with identify_order's rules: every candidate is scored (on a seeded subset of rows
first; any that reproduces the subset is confirmed on every row), REPRODUCED only when the models that reproduce
every element give the same bits on every drawn row (``pool.py``: normal, wide, near-tie and offset rows), AMBIGUOUS
with separating rows otherwise, NOT REPRODUCED with the closest when none does."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ...core.args import check_choice, check_int
from ...core.engine.codekeys import to_key
from ...core.engine.convert import cast
from ...core.formats.format import Format
from ...core.formats.interop import as_native, to_codes
from ...core.inputs import exact_float64
from ...identify.report import ulp_histogram
from .models import OPS, CompositeModel, as_models, composite_models
from .pool import KINDS, draw_rows, group_by_bits, same_bits, separate
from .report import CompositeCandidate, CompositeIdentifyReport

__all__ = ["identify_composite"]


def _ulps(a: np.ndarray, b: np.ndarray, fmt: Format) -> dict[str, int]:
    """The differing elements of a (model) and b (kernel) by |ULP distance| in fmt."""
    nan = np.isnan(a) != np.isnan(b)
    d = ~same_bits(a, b) & ~np.isnan(a) & ~np.isnan(b)
    with np.errstate(all="ignore"):
        ka = to_key(np.asarray(cast(a[d], fmt)), fmt).astype(np.int64)
        kb = to_key(np.asarray(cast(b[d], fmt)), fmt).astype(np.int64)
    return ulp_histogram(ka - kb, int(nan.sum()))


def _run(model: CompositeModel, x: np.ndarray, shape: tuple) -> np.ndarray:
    y = np.asarray(model.fn(x), np.float64)
    if y.shape != shape:
        raise ValueError(f"the model returned shape {y.shape}, the kernel's outputs for these rows have {shape}")
    return y


def _score(model: CompositeModel, X: np.ndarray, A: np.ndarray, rows: np.ndarray | None,
           fmt: Format) -> CompositeCandidate:
    """The model on the given rows (None: all), compared with the kernel's outputs bit for bit."""
    x, a = (X, A) if rows is None else (X[rows], A[rows])
    try:
        y = _run(model, x, a.shape)
    except Exception as e:        # a model that cannot take these inputs (a torch model on fp16) scores nothing
        return CompositeCandidate(model, 0, 0, {}, False, f"{type(e).__name__}: {e}")
    same = same_bits(y, a)
    return CompositeCandidate(model, int(same.sum()), int(a.size), _ulps(y[~same], a[~same], fmt), rows is None)


def _pool(op: str, K: int, fmt: Format, rows: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, 38, K])
    kinds = [k for k in KINDS if k != "offset"] if op in ("softmax", "log_softmax", "logsumexp") else list(KINDS)
    return np.concatenate([draw_rows(k, rows, K, fmt, rng) for k in kinds])


def _classes(reproducing: list[CompositeCandidate], op: str, K: int, fmt: Format, pool_rows: int,
             seed: int) -> tuple[list[list[CompositeCandidate]], Any, int]:
    """(classes of the reproducing candidates by their bits on drawn rows, separating rows or None, rows drawn)."""
    if len(reproducing) < 2:
        return [reproducing] if reproducing else [], None, 0
    pool = _pool(op, K, fmt, pool_rows, seed)
    outs = [np.asarray(c.model.fn(pool), np.float64) for c in reproducing]
    groups = group_by_bits(outs)
    classes = [[reproducing[i] for i in g] for g in groups]
    sep = None
    if len(classes) > 1:
        sep = separate([cls[0].name for cls in classes], pool, [outs[g[0]] for g in groups])
    return classes, sep, pool.shape[0]


def _inputs(actual: Any, op: str, x: Any) -> tuple[np.ndarray, np.ndarray, Any, Any, tuple]:
    """x as native rows (R, K), the kernel's outputs as float64 (R, K) or (R,), their formats, x's shape."""
    codes, in_fmt = to_codes(x, "x")
    if in_fmt.is_integer or codes.ndim == 0:
        raise TypeError("x must be a floating-point array with at least one dimension (the last is normalised)")
    X = as_native(codes, in_fmt)
    a, out_fmt = exact_float64(actual, "actual")
    want = X.shape[:-1] if op == "logsumexp" else X.shape
    if a.shape != want:
        raise ValueError(f"actual has shape {a.shape}; {op} of x (shape {X.shape}) gives {want}: pass the kernel's "
                         f"outputs for exactly these inputs")
    K = X.shape[-1]
    return X.reshape(-1, K), a.reshape((-1,) if op == "logsumexp" else (-1, K)), in_fmt, out_fmt, X.shape


def identify_composite(actual: Any, op: str, x: Any, *, candidates: Any = "auto", weight: Any = None,
                       bias: Any = None, eps: float | None = None, exp: Any = None, log: Any = None,
                       rsqrt: Any = None, prune_rows: int = 8, keep: int = 3, pool_rows: int = 16,
                       seed: int = 0) -> CompositeIdentifyReport:
    """Rank candidate models of a composite kernel by the fraction of its outputs they reproduce bit for bit.

    actual: the kernel's outputs on x (numpy or torch), op: "softmax", "log_softmax", "logsumexp", "rms_norm" or
    "layer_norm" over the last axis. candidates: "auto" (the grid of ``composite.identify.models``: torch's CPU
    model, then every sum order with each exp / log / rsqrt and step form) or models (``CompositeModel``, callables
    ``f(x) -> outputs``, or a name -> callable mapping; they must be row-wise). exp / log / rsqrt: library
    functions to add to the grid (``torch.exp``, ``jnp.exp``: called on the exact float32 arguments, see
    ``simulate_softmax``). weight / bias / eps: the norms' (eps None: torch's defaults, 2^-23 for rms_norm and
    1e-5 for layer_norm). prune_rows: rows every candidate is scored on first; keep: how many of the closest are
    scored on every row when none reproduces; pool_rows: rows of each kind drawn to tell reproducing models apart.
    """
    t0 = time.perf_counter()
    op = check_choice(op, "op", OPS)
    prune_rows = check_int(prune_rows, "prune_rows", 1)
    keep = check_int(keep, "keep", 1)
    pool_rows = check_int(pool_rows, "pool_rows", 1, 4096)
    X, A, in_fmt, out_fmt, shape = _inputs(actual, op, x)
    given = not (isinstance(candidates, str) and candidates == "auto")
    models = as_models(candidates) if given else composite_models(op, in_fmt, exp=exp, log=log, rsqrt=rsqrt,
                                                                   weight=weight, bias=bias, eps=eps)
    R = X.shape[0]
    rng = np.random.default_rng(seed)
    sub = None if R <= prune_rows else np.sort(rng.choice(R, prune_rows, replace=False))
    scored = [_score(m, X, A, sub, out_fmt) for m in models]
    if sub is not None:
        full = {i for i, c in enumerate(scored) if c.total and c.matched == c.total}
        if not full:
            full = set(sorted(range(len(scored)), key=lambda i: -scored[i].fraction)[:keep])
        scored = [_score(m, X, A, None, out_fmt) if i in full else c for i, (m, c) in enumerate(zip(models, scored))]
    reproducing = [c for c in scored if c.reproduces]
    classes, sep, drawn = _classes(reproducing, op, X.shape[1], in_fmt, pool_rows, seed)
    notes = []
    if given:
        notes.append(f"only the {len(models)} given candidates were scored: a model outside them may reproduce the "
                     "outputs as well")
    failed = [c for c in scored if c.error]
    if failed:
        notes.append(f"{len(failed)} candidate(s) could not run on these inputs, e.g. {failed[0].name}: "
                     f"{failed[0].error}")
    if len(classes) > 1:
        notes.append("AMBIGUOUS: call the kernel on rep.separating.inputs and rep.separating.which(output)")
    first = {id(c): k for k, cls in enumerate(classes) for c in cls}
    scored.sort(key=lambda c: (first.get(id(c), len(classes)), not c.confirmed, -c.fraction))
    return CompositeIdentifyReport(op, shape, in_fmt, out_fmt, scored, classes, sep, drawn, R,
                                   None if sub is None else len(sub), time.perf_counter() - t0, notes)
