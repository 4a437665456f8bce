"""assert_softmax_close / assert_norm_close / assert_attention_close and the attention mutant report."""

from __future__ import annotations

import numpy as np
import pytest

from numoracle.core.errors import NumoracleAssertionError
from numoracle.testing.composite import (
    assert_attention_close,
    assert_norm_close,
    assert_softmax_close,
    check_softmax_close,
)
from numoracle.testing.compositemutants import attention_mutants, fa2_forward


def _softmax32(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_softmax_check_passes_a_correct_fp32_kernel_and_fails_a_shifted_one():
    x = (np.random.default_rng(0).standard_normal((16, 200)) * 4).astype(np.float32)
    rep = assert_softmax_close(_softmax32(x), x, exp="sleef_u35")
    assert rep.passed and rep.max_ratio < 1 and rep.elements == x.size
    bad = _softmax32(x * np.float32(1.001))  # a slightly wrong scale
    with pytest.raises(NumoracleAssertionError, match="FAILED"):
        assert_softmax_close(bad, x, exp="sleef_u35")
    ls = check_softmax_close(np.log(_softmax32(x)), x, op="log_softmax", exp="sleef_u35", log="sleef_u35")
    assert ls.passed, str(ls)


def test_masked_entries_must_match_exactly():
    x = np.array([[1.0, -np.inf, 2.0], [-np.inf, -np.inf, -np.inf]], np.float32)
    good = np.array([[0.26894142, 0.0, 0.7310586], [np.nan] * 3], np.float32)
    assert check_softmax_close(good, x).passed
    zeros = good.copy()
    zeros[1] = 0.0  # the FlashAttention convention where the reference says NaN
    rep = check_softmax_close(zeros, x)
    assert not rep.passed and rep.mismatched_specials == 3
    assert check_softmax_close(zeros, x, empty_rows="zero").passed


def test_norm_check_on_torch():
    torch = pytest.importorskip("torch", reason="the live norm kernels need torch")
    x = torch.tensor(np.random.default_rng(1).standard_normal((8, 512)) * 3 + 1, dtype=torch.float32)
    w, b = torch.ones(512), torch.zeros(512)
    y = torch.nn.functional.layer_norm(x, (512,), w, b, eps=1e-5)
    assert assert_norm_close(y, x, w, b, eps=1e-5, affine="folded", rsqrt="sleef_u35").passed
    r = torch.nn.functional.rms_norm(x, (512,), w, eps=1e-6)
    assert assert_norm_close(r, x, w, op="rmsnorm", eps=1e-6, rsqrt="sleef_u35").passed
    with pytest.raises(NumoracleAssertionError):
        assert_norm_close(y * 1.0001, x, w, b, eps=1e-5, affine="folded", rsqrt="sleef_u35")


def test_attention_check_and_mutant_report():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 96, 32)).astype(np.float32) for _ in range(3))
    out = fa2_forward(q, k, v, causal=True, block=32)
    assert assert_attention_close(out, q, k, v, causal=True, block=32, exp="sleef_u35", scale_rounded=True).passed
    rep = attention_mutants(q, k, v, causal=True, block=32)
    verdicts = {name: (fails, plain) for name, fails, plain, _ in rep.rows}
    assert verdicts["correct"] == (False, True)
    assert all(fails for name, (fails, _) in verdicts.items() if name != "correct"), str(rep)
    loose = attention_mutants(q, k, v, causal=True, block=32, rtol=0.0, atol=0.1)  # a loose user tolerance
    passed_loose = {name for name, fails, plain, _ in loose.rows if plain and fails}
    assert "P rounded to e4m3" in passed_loose, str(loose)  # the loose (rtol, atol) passes it, numoracle does not
