"""The candidate models of a composite kernel that identify_composite scores: each a name and a function of the
input rows (``CompositeModel``), built from ``composite/sim``'s models over a grid of sum orders, elementwise
functions and step forms, with torch's CPU kernels as named models first."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from itertools import product
from typing import Any

import numpy as np

from ...core.formats.format import BF16, FP32, Format
from ...models.orders.basic import Pairwise, Sequential
from ...models.orders.cpu import Interleaved, VectorCascade, XlaChunks
from ...models.orders.text import order_text
from ...models.orders.ynnpack import YnnSum
from ..sim import elementwise as ew
from ..sim import model as sm
from ..sim import torchcpu as tc

__all__ = ["CompositeModel", "composite_models", "as_models", "OPS", "SUM_ORDERS", "named_fns"]

OPS = ("softmax", "log_softmax", "logsumexp", "rms_norm", "layer_norm")

# the row sums' orders of the grid: sequential, pairwise, 8 / 16 lanes by halving (tail in the lanes or after),
# torch's CPU cascade, XLA's chunks, YNNPACK's sum
SUM_ORDERS = (Sequential(), Pairwise(), Interleaved(8, combine="halving"),
              Interleaved(8, combine="halving", tail="after"), Interleaved(16, combine="halving"),
              Interleaved(16, combine="halving", tail="after"), VectorCascade(8), VectorCascade(16), XlaChunks(32),
              YnnSum("k1"))


@dataclass(frozen=True)
class CompositeModel:
    """One candidate: ``fn(x)`` gives the model's outputs (float64 values of the output format) for input rows x;
    ``parts`` says what it is made of (order, exp, ...) and ``name`` is how the report names it."""

    name: str
    fn: Callable[[Any], np.ndarray] = field(compare=False, repr=False)
    parts: dict = field(default_factory=dict, compare=False)


def _fn_name(f: Any) -> str:
    mod = getattr(f, "__module__", None) or ""
    name = getattr(f, "__name__", None) or type(f).__name__
    return f"{mod.split('.')[0]}.{name}" if mod and not mod.startswith("numoracle") else name


def named_fns(given: Any, what: str) -> dict[str, Any]:
    """Elementwise functions the caller adds to the grid: a callable, a sequence of them or a name -> callable
    mapping."""
    if given is None:
        return {}
    if callable(given):
        given = [given]
    items = given.items() if isinstance(given, Mapping) else ((_fn_name(f), f) for f in given)
    out = {}
    for name, f in items:
        if not callable(f):
            raise TypeError(f"{what} must be callables (or a name -> callable mapping), got {type(f).__name__}")
        out[str(name)] = f
    return out


def _softmax_family(op: str, fmt: Format, exps: dict, logs: dict) -> list[CompositeModel]:
    models: list[CompositeModel] = []
    if fmt in (FP32, BF16):
        named = {"softmax": tc.torch_cpu_softmax, "log_softmax": tc.torch_cpu_log_softmax}.get(op)
        if named is not None:
            models.append(CompositeModel(f"torch_cpu_{op} (torch 2.13.0 CPU)", named, {"model": f"torch_cpu_{op}"}))
    exps = {"exp correctly rounded": None, "sleef_expf_u10": ew.sleef_expf_u10, **exps}
    if op == "softmax":
        for o, (en, e), norm in product(SUM_ORDERS, exps.items(), ("reciprocal", "divide")):
            name = f"{order_text(o)}, {en}, {norm}"
            models.append(CompositeModel(name, _bind(sm.simulate_softmax, o, exp=e, normalize=norm),
                                         {"order": o, "exp": en, "normalize": norm}))
        return models
    logs = {"log correctly rounded": None, "sleef_logf_u10": ew.sleef_logf_u10, **logs}
    stats = (None, BF16) if fmt == BF16 else (None,)
    sim = sm.simulate_log_softmax if op == "log_softmax" else sm.simulate_logsumexp
    for o, (en, e), (ln, lg), st in product(SUM_ORDERS, exps.items(), logs.items(), stats):
        name = f"{order_text(o)}, {en}, {ln}" + ("" if st is None else f", stats {st.name}")
        models.append(CompositeModel(name, _bind(sim, o, exp=e, log=lg, stats=st),
                                     {"order": o, "exp": en, "log": ln, "stats": st}))
    return models


def _bind(sim: Callable, order: Any, **kw: Any) -> Callable[[Any], np.ndarray]:
    def fn(x: Any) -> np.ndarray:
        return sim(x, order, **kw)
    return fn


def _norms(op: str, fmt: Format, rsqrts: dict, weight: Any, bias: Any, eps: float | None) -> list[CompositeModel]:
    rsqrts = {"rsqrt correctly rounded": None, "1/sqrt": ew.rsqrt_div_sqrt, **rsqrts}
    models: list[CompositeModel] = []
    if op == "rms_norm":
        if fmt in (FP32, BF16):
            models.append(CompositeModel("torch_cpu_rms_norm (torch 2.13.0 CPU)",
                                         lambda x: tc.torch_cpu_rms_norm(x, weight, eps),
                                         {"model": "torch_cpu_rms_norm"}))
        e = 2.0**-23 if eps is None else eps
        for o, (rn, r), sq, sc in product(SUM_ORDERS, rsqrts.items(), ("rounded", "fma"), ("separate", "folded")):
            models.append(CompositeModel(
                f"{order_text(o)}, squares {sq}, {rn}, scale {sc}",
                partial(sm.simulate_rms_norm, weight=weight, eps=e, order=o, rsqrt=r, squares=sq, scale=sc),
                {"order": o, "rsqrt": rn, "squares": sq, "scale": sc}))
        return models
    e = 1e-5 if eps is None else eps
    if fmt in (FP32, BF16):
        models.append(CompositeModel("torch_cpu_layer_norm (torch 2.13.0 CPU)",
                                     lambda x: tc.torch_cpu_layer_norm(x, weight, bias, e),
                                     {"model": "torch_cpu_layer_norm"}))
    forms: list[tuple[str, Any, str, bool]] = [("two_pass", o, "centered", c) for o in SUM_ORDERS
                                               for c in (False, True)]
    forms += [("welford", None, "centered", c) for c in (False, True)]
    forms += [("rowwise", k, a, True) for k in (8, 16) for a in ("centered", "scaled")]
    for (var, o, aff, con), (rn, r) in product(forms, rsqrts.items()):
        kw: dict[str, Any] = {"variance": var, "rsqrt": r, "affine": aff, "contract": con}
        what = {"two_pass": f"two-pass variance along {order_text(o)}", "welford": "Welford",
                "rowwise": f"RowwiseMoments({o} lanes)"}[var]
        if var == "two_pass":
            kw["order"] = o
        elif var == "rowwise":
            kw["lanes"] = o
            kw["load"] = 2 if fmt == BF16 else 1
        models.append(CompositeModel(f"{what}, {rn}, affine {aff}" + (", FMAs" if con else ""),
                                     partial(sm.simulate_layer_norm, weight=weight, bias=bias, eps=e, **kw),
                                     {**kw, "rsqrt": rn, "order": o}))
    return models


def composite_models(op: str, fmt: Format, *, exp: Any = None, log: Any = None, rsqrt: Any = None,
                     weight: Any = None, bias: Any = None, eps: float | None = None) -> list[CompositeModel]:
    """The auto grid of candidate models of ``op`` for inputs of ``fmt``: torch's CPU model (named) first, then
    every sum order of SUM_ORDERS with each elementwise function (correctly rounded, SLEEF's where torch uses it,
    and the callables given as ``exp`` / ``log`` / ``rsqrt``) and each step form (softmax: reciprocal or divide;
    rms_norm: squares rounded or fused, scale separate or folded; layer_norm: the variance two-pass along each
    order, Welford or torch's RowwiseMoments of 8 / 16 lanes, with and without FMAs)."""
    if op in ("softmax", "log_softmax", "logsumexp"):
        return _softmax_family(op, fmt, named_fns(exp, "exp"), named_fns(log, "log"))
    return _norms(op, fmt, named_fns(rsqrt, "rsqrt"), weight, bias, eps)


def as_models(candidates: Any, what: str = "candidates") -> list[CompositeModel]:
    """Given candidates as CompositeModel values: CompositeModel values, callables ``f(x) -> outputs`` (named by
    their ``__name__``), or a name -> callable mapping."""
    if isinstance(candidates, Mapping):
        items: list[tuple[Any, Any]] = list(candidates.items())
    else:
        seq = list(candidates) if isinstance(candidates, (list, tuple)) else [candidates]
        items = [(c.name, c) if isinstance(c, CompositeModel) else (getattr(c, "__name__", repr(c)), c) for c in seq]
    out = []
    for name, c in items:
        if isinstance(c, CompositeModel):
            out.append(c)
        elif callable(c):
            out.append(CompositeModel(str(name), c))
        else:
            raise TypeError(f"{what} must be 'auto', CompositeModel values, callables x -> outputs or a name -> "
                            f"callable mapping, got {type(c).__name__}")
    if not out:
        raise ValueError(f"{what} is empty: give at least one model, or 'auto'")
    return out
