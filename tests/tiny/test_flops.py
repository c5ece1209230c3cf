"""scaling_lib.flops and memory against the tiny JAX model's compiled programs (XLA's cost analysis, one device).

The model is `tiny_config` widened (D=256, F=1024, H=64) so that the elementwise work XLA also counts (norms, RoPE,
softmax, mask, residuals) is under 1% of the matmul and attention FLOPs; the tolerance is 2%.
"""

import functools

import jax.numpy as jnp
import numpy as np
import pytest

from scaling_lib.flops import decode_step_flops, forward_flops
from scaling_lib.memory import kv_bytes_per_token
from scaling_lib.tiny import flops as tiny_flops
from scaling_lib.tiny import model

WIDE = model.tiny_config().with_(d_model=256, d_ff=1024, head_dim=64, name="tiny-wide")


@functools.cache
def wide_params():
    return model.init_params(WIDE, seed=0)


@pytest.mark.parametrize("tokens, batch", [(16, 1), (128, 2)])
def test_forward_flops_agree_with_xla_within_2pct(tokens, batch):
    measured = tiny_flops.forward_cost(wide_params(), tokens, batch).flops
    analytic = forward_flops(WIDE, tokens, batch).total
    # XLA counts every matmul and attention FLOP plus a little elementwise work: never less, at most 2% more
    assert 1.0 <= measured / analytic <= 1.02


def test_decode_step_flops_agree_with_xla_within_2pct():
    measured = tiny_flops.decode_step_cost(wide_params(), cache_len=256, batch=4).flops
    analytic = decode_step_flops(WIDE, 256, batch=4).total
    assert 1.0 <= measured / analytic <= 1.02


def test_xla_decode_attention_flops_grow_as_4_b_l_n_h_per_cached_token():
    # the difference between two cache lengths isolates attention: the matmuls are the same in both programs
    short = tiny_flops.decode_step_cost(wide_params(), cache_len=64, batch=4).flops
    long = tiny_flops.decode_step_cost(wide_params(), cache_len=256, batch=4).flops
    analytic = decode_step_flops(WIDE, 256, 4).attention - decode_step_flops(WIDE, 64, 4).attention
    assert (long - short) / analytic == pytest.approx(1.0, rel=0.05)  # softmax and mask add ~2-3% per score


def test_lowered_cost_flops_match_compiled_flops_within_half_a_percent():
    compiled = tiny_flops.forward_cost(wide_params(), 16, 1).flops
    assert tiny_flops.forward_cost(wide_params(), 16, 1, compile=False).flops == pytest.approx(compiled, rel=0.005)


@pytest.mark.parametrize("dtype, name", [(jnp.float32, "fp32"), (jnp.bfloat16, "bf16")])
def test_kv_bytes_per_token_equals_the_cache_arrays_bytes_per_slot(dtype, name):
    config = model.tiny_config(n_kv_heads=2)
    params = model.init_params(config, seed=0, dtype=dtype)
    batch, cache_len = 3, 20
    _, cache = model.prefill(params, np.ones((batch, 5), np.int32), cache_len=cache_len)
    assert cache.k.dtype == dtype
    assert (cache.k.nbytes + cache.v.nbytes) / (batch * cache_len) == kv_bytes_per_token(config, name)
