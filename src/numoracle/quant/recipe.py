"""QuantRecipe: a quantization recipe as one value (the element format and every keyword of ``quantize`` that
describes the kernel, not the data), accepted by quantize, the quantization bounds and the quantization checks.

::

    recipe = numoracle.QuantRecipe("int4", granularity=("group", 128), symmetric=False, scale_fmt="fp16")
    q = numoracle.quantize(W, recipe)                        # the recipe in the format's place
    numoracle.quant.quantization_error_bound(recipe, W)            # as for a format
    numoracle.assert_quantized_close(codes, W, recipe)       # positionally after the data
    numoracle.expected_error_bound("quantized_matmul", recipe, K, ...)   # A's recipe (a_params=, b_params= too)

The keywords stay as the short form; a call gives either the recipe or those keywords (both: a clear error).
Per-call data (``scale``, ``zero_point``, ``global_amax``, ``random_bits``) are not part of a recipe.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.args import refuse_both, takes_value

__all__ = ["QuantRecipe", "takes_recipe", "RECIPE_FIELDS"]


@dataclass(frozen=True)
class QuantRecipe:
    """A quantization recipe: ``fmt`` and the keywords of :func:`numoracle.quantize` that say how a kernel
    quantises (the same names, meanings and defaults)."""

    fmt: Any
    granularity: Any = None
    axis: Any = -1
    symmetric: bool = True
    scale_fmt: Any = None
    scale_rule: str = "absmax"
    rounding: Any = "rne"
    clip: str | None = None
    reciprocal: bool = False
    compute: Any = "fp32"
    overflow: Any = None
    nan: str = "propagate"
    scale_rounding: Any = "rne"
    compute_rounding: Any = "rne"
    scale_range: str | None = None
    sr_bits: int | None = None
    global_scale_convention: str = "decode"

    def __post_init__(self) -> None:
        from ..core.formats.format import format_of

        object.__setattr__(self, "fmt", format_of(self.fmt))   # a typo fails here, not at first use

    def keywords(self) -> dict[str, Any]:
        """``quantize``'s keyword arguments, ``fmt`` included: ``quantize(x, **recipe.keywords())``."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> QuantRecipe:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def __str__(self) -> str:
        default = QuantRecipe(self.fmt)
        parts = [f"fmt={self.fmt.name}"] + [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)
                                            if f.name != "fmt" and getattr(self, f.name) != getattr(default, f.name)]
        return f"QuantRecipe({', '.join(parts)})"


RECIPE_FIELDS = tuple(f.name for f in dataclasses.fields(QuantRecipe))


def takes_recipe(param: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Let a function take a :class:`QuantRecipe` in parameter ``param`` for the recipe's keywords (``param``
    becomes the recipe's ``fmt`` when it is the format's own parameter); a call that gives both is refused."""

    def unfold(fn_name: str, bound: inspect.BoundArguments, recipe: QuantRecipe) -> None:
        names = tuple(n for n in RECIPE_FIELDS if n in bound.signature.parameters and n != param)
        both = [n for n in names if n in bound.arguments and n != "fmt"]
        if not both and param != "fmt" and bound.arguments.get("fmt") is not None:
            both = ["fmt"]
        refuse_both(fn_name, "a QuantRecipe", "recipe", both)
        kw = recipe.keywords()
        bound.arguments[param] = kw["fmt"] if param == "fmt" else None
        bound.arguments.update({n: kw[n] for n in names})

    return takes_value(param, QuantRecipe, unfold)
