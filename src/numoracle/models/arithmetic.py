"""Arithmetic: one value for a kernel's arithmetic (how its operands are read, its accumulator, order, rounding,
fma, ftz and output format), accepted wherever those keywords are.

``simulate``, ``expected_error_bound``, ``recommended_tolerance``, the ``check_*`` / ``assert_*_close`` checks (and
the detection power they report) and ``compare_runs`` take ``arith=`` (positionally too, after the inputs, for the
checks); :func:`numoracle.identify_order`'s report hands one out (``rep.arithmetic``), so the order a kernel was
identified with checks it::

    rep = numoracle.identify_order(out, "matmul", A, B)
    numoracle.assert_matmul_close(out, A, B, rep.arithmetic)

The keywords stay as the short form; a call gives either ``arith`` or those keywords (both: a clear error, since one
would silently lose). :func:`takes_arithmetic` is the one place that unfolds the value into a function's keywords.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.args import refuse_both, takes_value
from ..core.engine.convert import cast, decode
from ..core.formats.format import FP32, Format, format_of
from ..core.formats.interop import to_codes
from ..core.formats.policy import Rounding
from .orders.basic import Sequential, float_format
from .orders.text import as_order, order_text

__all__ = ["Arithmetic", "takes_arithmetic", "FIELDS"]

_ARRAYS = ("x", "a", "b")   # the checks' input arrays (read as the kernel reads them when operands are rounded)
FIELDS = ("acc", "order", "rounding", "fma", "ftz", "out", "out_rounding", "operands", "operands_rounding")


@dataclass(frozen=True)
class Arithmetic:
    """A kernel's arithmetic, one frozen value.

    operands: the format the kernel reads its inputs in (None: as given), each input rounded once with
      ``operands_rounding`` (e.g. FP32 tensors fed to TF32 tensor cores: ``operands="tf32"`` with "rne" for
      cuBLAS, "rtz" for triton). acc: the accumulator (None: the order's own, else FP32). order: an Order or
      its text (default Sequential()). rounding: the mode of every accumulation step. fma: products enter
      exact. ftz: subnormal results of every step flushed. out / out_rounding: the final rounding of each
      output element (None: the accumulator's value).
    """

    acc: Any = None
    order: Any = Sequential()
    rounding: Any = "rne"
    fma: bool = True
    ftz: bool = False
    out: Any = None
    out_rounding: Any = None
    operands: Any = None
    operands_rounding: Any = "rne"

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        set_("order", as_order(self.order))
        set_("acc", float_format(self.acc, "Arithmetic acc"))
        if self.acc is not None and self.order.acc is not None and self.order.acc != self.acc:
            raise ValueError(f"acc={self.acc.name} conflicts with the order's own accumulator {self.order.acc.name}")
        set_("out", float_format(self.out, "Arithmetic out"))
        set_("operands", float_format(self.operands, "Arithmetic operands"))
        set_("rounding", Rounding.of(self.rounding).value)
        set_("out_rounding", None if self.out_rounding is None else Rounding.of(self.out_rounding).value)
        set_("operands_rounding", Rounding.of(self.operands_rounding).value)
        for name in ("fma", "ftz"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"Arithmetic {name} must be a bool, got {getattr(self, name)!r}")
            set_(name, bool(getattr(self, name)))

    @property
    def accumulator(self) -> Format:
        """The accumulator format in effect: ``acc``, else the order's own, else FP32."""
        return self.acc or self.order.acc or FP32

    def replace(self, **changes: Any) -> Arithmetic:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def read_operands(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        """The inputs as the kernel reads them: each rounded once to ``operands`` (unchanged when None).

        Rounded values come back as float32 arrays when every value of ``operands`` is a float32 value (TF32,
        BF16, FP16, FP8 ...), else float64, so simulate reads them exactly."""
        if self.operands is None:
            return tuple(inputs)
        fits32 = self.operands.precision <= 24 and self.operands.emax <= 127 and self.operands.emin >= -126
        out = []
        for x in inputs:
            codes, fmt = to_codes(x, "input")
            c = cast(codes, self.operands, src=fmt, rounding=self.operands_rounding)
            v = decode(c, self.operands)
            out.append(v.astype(np.float32) if fits32 else v.astype(np.float64))
        return tuple(out)

    def __str__(self) -> str:
        parts = [f"acc={self.accumulator.name}", f"order={order_text(self.order)}"]
        parts += [f"rounding={self.rounding!r}"] if self.rounding != "rne" else []
        parts += ["fma=False"] if not self.fma else []
        parts += ["ftz=True"] if self.ftz else []
        parts += [f"out={self.out.name}"] if self.out else []
        parts += [f"out_rounding={self.out_rounding!r}"] if self.out_rounding else []
        if self.operands:
            parts += [f"operands={self.operands.name}", f"operands_rounding={self.operands_rounding!r}"]
        return f"Arithmetic({', '.join(parts)})"


def _unfold(arith: Arithmetic, names: tuple[str, ...]) -> dict[str, Any]:
    """The keywords of ``arith`` a function takes (its parameter names among FIELDS, plus the bounds' forms)."""
    kw: dict[str, Any] = {}
    for name in names:
        if name == "acc":
            kw["acc"] = arith.accumulator
        elif name == "orders":                     # compare_runs: the candidate orders
            kw["orders"] = [arith.order]
        elif name == "inputs_rounded_from":        # the bounds: operands rounded from the dtype given
            continue
        elif name in FIELDS and name not in ("operands", "operands_rounding"):
            kw[name] = getattr(arith, name)
    return kw


def _refuse_unmodelled(name: str, arith: Arithmetic, names: tuple[str, ...]) -> None:
    """A field that differs from its default where the function has no keyword for it would be lost: refuse."""
    default = Arithmetic()
    takes = set(names) | ({"order"} if "orders" in names else set()) | {"operands", "operands_rounding"}
    lost = [f for f in FIELDS if f not in takes and getattr(arith, f) != getattr(default, f)]
    if lost:
        raise ValueError(f"{name} does not model {', '.join(f'{f}={getattr(arith, f)!r}' for f in lost)} of this "
                         f"arithmetic; check it with a function that does (simulate, expected_error_bound) or "
                         f"drop it with arith.replace({', '.join(f'{f}=...' for f in lost)})")


def _unfold_into(fn_name: str, bound: inspect.BoundArguments, arith: Arithmetic) -> None:
    """takes_arithmetic's unfolding: the keywords ``fn`` models, and for functions with ``*inputs`` the inputs as
    the kernel reads them; functions with ``dtype`` (the bounds) get ``dtype=operands`` and
    ``inputs_rounded_from=dtype`` when the arithmetic rounds its operands."""
    params = bound.signature.parameters
    names = tuple(n for n in params if n in FIELDS or n in ("orders", "inputs_rounded_from"))
    refuse_both(fn_name, "arith=", "arith", [n for n in names if n in bound.arguments])
    _refuse_unmodelled(fn_name, arith, names)
    bound.arguments["arith"] = None
    bound.arguments.update(_unfold(arith, names))
    if arith.operands is None:
        return
    if "inputs" in params and params["inputs"].kind is inspect.Parameter.VAR_POSITIONAL:
        bound.arguments["inputs"] = arith.read_operands(bound.arguments.get("inputs", ()))
    elif "dtype" in params and "inputs_rounded_from" in params:
        if arith.operands_rounding not in ("rne", "rna"):
            raise ValueError(f"{fn_name} bounds operands rounded to nearest (inputs_rounded_from); "
                             f"operands_rounding={arith.operands_rounding!r} errs up to twice as much: bound "
                             f"the rounded operands instead (dtype={arith.operands.name}, "
                             "arith.replace(operands=None))")
        src = bound.arguments.get("dtype")
        bound.arguments["dtype"] = arith.operands
        bound.arguments["inputs_rounded_from"] = None if src is None or format_of(src) == arith.operands else src
    for name in _ARRAYS:   # the checks: compared against the exact result of what the kernel read
        if name in bound.arguments:
            bound.arguments[name] = arith.read_operands((bound.arguments[name],))[0]


takes_arithmetic = takes_value("arith", Arithmetic, _unfold_into, strict=(
    "arith must be a numoracle.Arithmetic (e.g. an identify_order report's .arithmetic)"))
takes_arithmetic.__doc__ = """Let a function take ``arith=`` (an :class:`Arithmetic`) for its arithmetic keywords.

The function declares ``arith`` and the keywords it models; a call that gives both is refused."""

