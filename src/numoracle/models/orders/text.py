"""The one order vocabulary: text <-> Order, and any order (object or text) -> the OrderSpec the bounds read.

Every function that takes an order (simulate, the bounds, the checks, compare_runs, identify_order, the CLI)
reads it through :func:`as_order` (one evaluation order) or :func:`parse_order` (its rounding structure, which
also has the bound-only forms ``"any"`` and ``"pairwise:<base>"``). Texts:

* ``str(order)``: the order's own constructor text, e.g. ``"Blocked(b=64, inner=Pairwise(), ...)"``;
  :func:`parse` inverts it for every order class: ``parse(str(o)) == o``.
* ``'preset("h100", "fp8")'`` (any arguments of :func:`numoracle.orders.preset`), as reports name presets
  (:func:`order_text`); ``"preset:h100/fp8"`` is the same; ``"preset:h100"`` takes the input format from
  the ``dtype`` argument.
* the short forms of the bounds: ``"sequential"``, ``"pairwise"``, ``"blocked:<b>"``, ``"splitk:<s>[:pairwise]"``,
  ``"blockfma:<n>:<frac_bits>[:<out_frac_bits>][:round]"``, ``"promoted:<every>:<n>:<frac_bits>"``, ``"numpy"``.

Constructor texts are read with :mod:`ast` and only order classes, ``preset``, ``Format`` and literals are
evaluated: nothing else in the text runs.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from ...core.formats.format import format_of
from . import basic, blasdot, compensated, cpu, gpu, mklgemm, tree, ynnpack
from .presets import preset, preset_name
from .spec import FORMS, OrderSpec, spec_from_text

__all__ = ["parse", "as_order", "parse_order", "order_text", "order_label", "ORDER_CLASSES"]

ORDER_CLASSES: dict[str, type] = {c.__name__: c for c in (
    basic.Sequential, basic.Pairwise, basic.Blocked, basic.SplitK, basic.BlockFMA, basic.Promoted,
    basic.NumpyPairwise, gpu.TiledSplitK, gpu.GpuReduce, gpu.ChunkedScan,
    tree.TreeOrder, tree.PerPosition, cpu.VectorCascade, cpu.ThreadSplit,
    cpu.Interleaved, cpu.XlaChunks, cpu.XlaVector, cpu.XlaScan,
    cpu.GotoBlocks, blasdot.OpenBlasDot, blasdot.MklDot, ynnpack.YnnSum, mklgemm.ChainApart, mklgemm.MklSmallGemm,
    compensated.CompensatedTree)}


def _bad(text: str, why: str) -> ValueError:
    return ValueError(f"cannot read order {text!r}: {why}; an order text is str(order) (e.g. "
                      f"'Blocked(b=64, inner=Pairwise())'), 'preset(\"h100\", \"fp8\")' or one of {FORMS}")


def _value(node: ast.AST, text: str) -> Any:
    """Evaluate one node of a constructor text: literals, tuples, order classes, preset() and Format(name)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_value(e, text) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name == "Format" and len(node.args) == 1 and not node.keywords:
            arg = node.args[0]
            fname = arg.id if isinstance(arg, ast.Name) else _value(arg, text)
            return format_of(fname)
        fn = ORDER_CLASSES.get(name) or (preset if name == "preset" else None)
        if fn is None:
            raise _bad(text, f"{name}(...) is not an order class (known: {', '.join(ORDER_CLASSES)}, preset)")
        args = [_value(a, text) for a in node.args]
        if any(k.arg is None for k in node.keywords):    # **{...}: refused, never dropped
            raise _bad(text, f"{name}(...) takes its keywords written out (name=value), not as **mapping")
        kwargs = {k.arg: _value(k.value, text) for k in node.keywords}
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            raise _bad(text, str(e)) from None
    raise _bad(text, f"{ast.unparse(node)!r} is neither a literal nor an order")


def _from_spec(s: OrderSpec, text: str) -> basic.Order:
    """The one order an OrderSpec of a short form names (the bound-only forms have none)."""
    k = s.kind
    if k == "sequential":
        return basic.Sequential()
    if k == "pairwise" and s.n <= 1:
        return basic.Pairwise()
    if k == "blocked":
        return basic.Blocked(s.n, _from_spec(s.inner, text), _from_spec(s.outer, text), s.outer_acc)
    if k == "splitk":
        return basic.SplitK(s.n, _from_spec(s.inner, text), _from_spec(s.outer, text), combine_acc=s.outer_acc)
    if k == "blockfma":
        return basic.BlockFMA(s.n, s.frac_bits, truncate=s.truncate, out_frac_bits=s.out_frac_bits)
    if k == "promoted":
        return basic.Promoted(s.n, _from_spec(s.inner, text), s.outer_acc)
    if k == "numpy":
        return basic.NumpyPairwise(s.n or None)
    what = "'any' bounds every order" if k == "any" else f"'{s}' bounds every order of its leaf blocks"
    raise ValueError(f"order {text!r}: {what}, so there is no single evaluation to run; name one order "
                     "(sequential, pairwise, blocked:<b>, splitk:<s>, blockfma:..., promoted:..., numpy, "
                     "preset:<system>/<inputs>, or str(order))")


def parse(text: str, dtype: Any = None) -> basic.Order:
    """The order a text names (see the module docstring); ``parse(str(o)) == o`` for every order.

    ``dtype`` gives the input format of ``"preset:<system>"`` (a preset depends on it).

    >>> from numoracle import orders
    >>> o = basic.Blocked(64, basic.Pairwise())
    >>> parse(str(o)) == o
    True
    >>> parse("preset:h100/fp8") == orders.preset("h100", "fp8")
    True
    """
    if not isinstance(text, str):
        raise TypeError(f"parse takes an order's text, got {type(text).__name__}; an Order needs no parsing")
    t = text.strip()
    if t.lower().startswith("preset:"):
        name = t.split(":", 1)[1].strip()
        system, _, inputs = name.replace(":", "/").partition("/")
        if not inputs:
            if dtype is None:
                raise ValueError(f"order {text!r}: a preset depends on the input format; write "
                                 f"'preset:{system}/<inputs>' (e.g. preset:{system}/bf16) or give the dtype")
            inputs = format_of(dtype).name
        return preset(system.strip(), inputs.strip())
    if "(" in t:
        try:
            tree = ast.parse(t, mode="eval")
        except SyntaxError as e:
            raise _bad(text, f"not a constructor call ({e.msg})") from None
        value = _value(tree.body, text)
        if not isinstance(value, basic.Order):
            raise _bad(text, f"it gives {type(value).__name__}, not an order")
        return value
    return _from_spec(spec_from_text(t), text)


def as_order(order: Any, dtype: Any = None, default: basic.Order | None = None) -> basic.Order:
    """An Order as it is, its text parsed; None gives ``default`` (an error when there is none)."""
    if order is None and default is not None:
        return default
    if isinstance(order, basic.Order):
        return order
    if isinstance(order, str):
        return parse(order, dtype)
    raise TypeError(f"order must be a numoracle.orders Order (Sequential(), Pairwise(), ...) or its text "
                    f"('pairwise', 'blocked:64', 'preset:h100/fp8', str(order)), got {order!r}")


def parse_order(order: Any, dtype: Any = None) -> OrderSpec:
    """What the bounds read of an order: an Order, any order text, an OrderSpec, or None (= "any")."""
    if order is None:
        return OrderSpec("any")
    if isinstance(order, OrderSpec):
        return order
    if isinstance(order, str):
        t = order.strip()
        if "(" in t or t.lower().startswith("preset:"):
            return parse(t, dtype).spec()
        return spec_from_text(t)
    spec = getattr(order, "spec", None)
    if not callable(spec):
        raise ValueError(f"unknown order object of class {type(order).__name__!r}: an order defines spec() (see "
                         f"numoracle.orders), or give its text ({FORMS})")
    return spec()


def order_text(order: Any) -> str:
    """``str(order)`` with every preset inside it written as the ``preset(...)`` call that builds it.

    It parses back to the same order: ``parse(order_text(o)) == o``.
    """
    name = preset_name(order) if isinstance(order, basic.Order) else None
    if name is not None:
        return name
    if isinstance(order, basic.Order) and dataclasses.is_dataclass(order):
        fields = [f for f in dataclasses.fields(order) if f.repr]
        args = ", ".join(f"{f.name}={order_text(getattr(order, f.name))}" for f in fields)
        return f"{type(order).__name__}({args})"
    return repr(order)


def order_label(order: basic.Order) -> str:
    """The shortest text that names the order: the bounds' short form (``"blocked:64"``) where that parses back
    to this very order, else :func:`order_text`."""
    short = str(order.spec())
    try:
        if "(" not in short and parse(short) == order:
            return short
    except ValueError:
        pass
    return order_text(order)
