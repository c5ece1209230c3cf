"""scaling_lib.flops and memory against the tiny JAX model's compiled programs (XLA's cost analysis, one device).

The model is `tiny_config` widened (D=256, F=1024, H=64) so that the elementwise work XLA also counts (norms, RoPE,
softmax, mask, residuals) is under 1% of the matmul and attention FLOPs; the tolerance is 2%.
"""

import functools

import jax.numpy as jnp
import numpy as np
import pytest

from scaling_lib.flops import decode_step_flops, forward_flops
from scaling_lib.memory import kv_bytes_per_token, kv_cache_bytes
from scaling_lib.tiny import flops as tiny_flops
from scaling_lib.tiny import model

WIDE = model.tiny_config().with_(d_model=256, d_ff=1024, head_dim=64, name="tiny-wide")


@functools.cache
def wide_params():
    return model.init_params(WIDE, seed=0)


@pytest.mark.parametrize("program, analytic", [
    pytest.param(lambda: tiny_flops.forward_cost(wide_params(), 16, 1), lambda: forward_flops(WIDE, 16, 1),
                 id="a forward pass of 16 tokens"),
    pytest.param(lambda: tiny_flops.forward_cost(wide_params(), 128, 2), lambda: forward_flops(WIDE, 128, 2),
                 id="a forward pass of 2 x 128 tokens"),
    pytest.param(lambda: tiny_flops.decode_step_cost(wide_params(), cache_len=256, batch=4),
                 lambda: decode_step_flops(WIDE, 256, batch=4), id="a decode step of 4 over 256 cached tokens"),
])
def test_flops_agree_with_xla_within_2pct(program, analytic):
    # XLA counts every matmul and attention FLOP plus a little elementwise work: never less, at most 2% more
    assert 1.0 <= program().flops / analytic().total <= 1.02


def test_xla_decode_attention_flops_grow_as_4_b_l_n_h_per_cached_token():
    # the difference between two cache lengths isolates attention: the matmuls are the same in both programs
    short = tiny_flops.decode_step_cost(wide_params(), cache_len=64, batch=4).flops
    long = tiny_flops.decode_step_cost(wide_params(), cache_len=256, batch=4).flops
    analytic = decode_step_flops(WIDE, 256, 4).attention - decode_step_flops(WIDE, 64, 4).attention
    assert (long - short) / analytic == pytest.approx(1.0, rel=0.05)  # softmax and mask add ~2-3% per score


def test_lowered_cost_flops_match_compiled_flops_within_half_a_percent():
    compiled = tiny_flops.forward_cost(wide_params(), 16, 1).flops
    assert tiny_flops.forward_cost(wide_params(), 16, 1, compile=False).flops == pytest.approx(compiled, rel=0.005)


@pytest.mark.parametrize("n_kv_heads, dtype, name", [(2, jnp.float32, "fp32"), (2, jnp.bfloat16, "bf16"),
                                                     (1, jnp.float32, "fp32")])
def test_kv_cache_bytes_are_the_cache_arrays_bytes(n_kv_heads, dtype, name):
    config = model.tiny_config(n_kv_heads=n_kv_heads)
    params = model.init_params(config, seed=0, dtype=dtype)
    batch, cache_len = 3, 20
    _, cache = model.prefill(params, np.ones((batch, 5), np.int32), cache_len=cache_len)
    assert cache.k.dtype == dtype
    assert (cache.k.nbytes + cache.v.nbytes) / (batch * cache_len) == kv_bytes_per_token(config, name)
    assert cache.k.nbytes + cache.v.nbytes == kv_cache_bytes(config, cache_len, batch=batch, dtype=name)
