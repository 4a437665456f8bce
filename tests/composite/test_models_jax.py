"""jax 0.10.2's CPU jax.nn.softmax (float32) bit for bit against the model numoracle.composite.sim.jaxcpu (its exp
given as jnp.exp), on seeded rows of several lengths and batch sizes; and the order switch at 4096 elements."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.composite.sim.jaxcpu import jax_cpu_softmax, jax_softmax_order
from numoracle.composite.sim.model import simulate_softmax
from numoracle.orders import XlaChunks, YnnSum
from optional import needs


@pytest.fixture(scope="module")
def jax():
    needs("jax")
    import jax
    return jax


@pytest.mark.parametrize("kind", ["normal", "large", "ties"])
def test_jax_softmax_bit_exact(jax, kind):
    import jax.numpy as jnp
    rng = np.random.default_rng(500 + len(kind))
    for rows, n in ((16, 7), (16, 33), (3, 300), (16, 255), (16, 256), (1, 2048), (2, 2048), (16, 1000), (4, 4096)):
        x = rng.standard_normal((rows, n))
        if kind == "large":
            x = x * 1e3
        elif kind == "ties":
            x[:, 1::2] = x[:, ::2][:, : x[:, 1::2].shape[1]] * (1 + 2.0**-20)
        x = x.astype(np.float32)
        want = np.asarray(jax.nn.softmax(jnp.asarray(x), axis=-1)).astype(np.float64)
        assert (jax_cpu_softmax(x) == want).all(), (n, kind)


def test_the_order_switch_matters(jax):
    import jax.numpy as jnp
    jexp = lambda d: np.asarray(jnp.exp(jnp.asarray(d)))  # noqa: E731
    rng = np.random.default_rng(600)
    for n, wrong in ((200, YnnSum("k1")), (1000, XlaChunks(32))):
        x = (rng.standard_normal((16, n)) * 3).astype(np.float32)
        want = np.asarray(jax.nn.softmax(jnp.asarray(x), axis=-1)).astype(np.float64)
        assert (simulate_softmax(x, jax_softmax_order(x.size), exp=jexp) == want).all()
        assert (simulate_softmax(x, wrong, exp=jexp) != want).any()
    with pytest.raises(ValueError, match="float32 inputs only"):
        jax_cpu_softmax(np.zeros((1, 4), np.float16))
