"""QuantRecipe: one value for a quantization recipe, taken by quantize, the bounds and the checks."""

from __future__ import annotations

import numpy as np
import pytest

import numoracle as no


@pytest.fixture
def W():
    return np.random.default_rng(21).standard_normal((16, 256)).astype(np.float32)


RECIPES = [
    no.QuantRecipe("int4", granularity=("group", 128), symmetric=False, scale_fmt="fp16"),
    no.QuantRecipe("int8", granularity="channel", axis=0),
    no.QuantRecipe("fp8_e4m3fn", scale_rule="pow2", rounding="rtz"),
    no.QuantRecipe("fp4_e2m1fn", scale_rule="mx"),
]


@pytest.mark.parametrize("recipe", RECIPES, ids=str)
def test_the_recipe_is_the_keywords(W, recipe):
    q, k = no.quantize(W, recipe), no.quantize(W, **recipe.keywords())
    np.testing.assert_array_equal(q.codes, k.codes)
    np.testing.assert_array_equal(np.asarray(q.scales), np.asarray(k.scales))
    eb_r, eb_k = no.quant.quantization_error_bound(recipe, W), no.quant.quantization_error_bound(recipe.fmt, W, **{
        n: v for n, v in recipe.keywords().items() if n != "fmt"})
    np.testing.assert_array_equal(eb_r.bound, eb_k.bound)
    assert no.check_quantized_close(q.codes, W, recipe).passed
    assert no.assert_quantized_close(q, W, recipe).passed


def test_a_recipe_and_its_keywords_do_not_mix(W):
    r = RECIPES[0]
    with pytest.raises(TypeError, match="either a QuantRecipe or the keywords rounding"):
        no.quantize(W, r, rounding="rtz")
    with pytest.raises(TypeError, match="either a QuantRecipe or the keywords fmt"):
        no.check_quantized_close(no.quantize(W, r).codes, W, r, fmt="int4")
    with pytest.raises(ValueError):
        no.QuantRecipe("int4x")                      # a typo in the format fails at construction
    assert str(r) == "QuantRecipe(fmt=int4, granularity=('group', 128), symmetric=False, scale_fmt='fp16')"
    wrong = no.quantize(W, r.replace(rounding="rtz"))
    assert not no.check_quantized_close(wrong.codes, W, r).passed   # the check follows the recipe it is given


def test_the_quantized_matmul_bound_takes_recipes(W):
    B = np.random.default_rng(22).standard_normal((256, 8)).astype(np.float32)
    ra = no.QuantRecipe("int8", granularity="channel", axis=0)
    rb = no.QuantRecipe("int8", granularity="channel", axis=1)
    by_recipe = no.expected_error_bound("quantized_matmul", ra, 256, dtype_b=rb, scale_fmt="fp32")
    by_params = no.expected_error_bound("quantized_matmul", "int8", 256, scale_fmt="fp32",
                                        a_params={k: v for k, v in ra.keywords().items() if k != "fmt"},
                                        b_params={k: v for k, v in rb.keywords().items() if k != "fmt"})
    np.testing.assert_array_equal(by_recipe.tolerance(W, B), by_params.tolerance(W, B))
    with pytest.raises(TypeError, match="not both"):
        no.expected_error_bound("quantized_matmul", ra, 256, a_params=ra)
