"""Claim R4, measured: arithmetic intensities read off XLA's cost analysis of the tiny model's attention and matmuls.

Float32 on the CPU, one device. XLA's CPU backend does not fuse attention into one kernel, so its measured bytes
exceed the flash-attention count of `roofline.attention_bytes`; the claims tested here are the trends, which do not
depend on that: decode attention intensity grows with G = N/K and does not depend on the batch; prefill intensity
grows with the prompt length; a weight matmul's intensity grows with its rows (tokens).
"""

import functools

import jax.numpy as jnp
import pytest

from scaling_lib.roofline import arithmetic_intensity, attention_flops, attention_intensity, matmul_intensity
from scaling_lib.tiny import flops as tiny_flops
from scaling_lib.tiny import model
from scaling_lib.tiny.xla import compiled_cost

WIDE = model.tiny_config().with_(d_model=256, d_ff=1024, head_dim=64, name="tiny-wide")  # N = 4 heads
CONTEXT = 1024


@functools.cache
def attention_intensity_measured(n_kv_heads, query_len, kv_len, batch):
    cost = tiny_flops.attention_cost(WIDE.with_(n_kv_heads=n_kv_heads), query_len, kv_len, batch)
    return arithmetic_intensity(cost.flops, cost.bytes_accessed)


def test_r4_measured_decode_attention_intensity_grows_with_the_group_size_and_not_with_the_batch():
    mha, gqa, mqa = (attention_intensity_measured(k, 1, CONTEXT, 1) for k in (4, 2, 1))  # G = 1, 2, 4
    # each halving of the KV heads halves the K and V bytes read: at least 1.5x the intensity per step
    assert gqa > 1.5 * mha and mqa > 1.5 * gqa
    for n_kv_heads in (4, 2):
        one, many = (attention_intensity_measured(n_kv_heads, 1, CONTEXT, batch) for batch in (1, 32))
        assert many == pytest.approx(one, rel=0.02)
    # The model's own attention: one decode query per sequence against S = 1,024 cached bf16 keys and values (N = 8
    # heads of H = 128), MHA, GQA (K = 2) and MQA. XLA on the CPU also counts the scores and converted copies it
    # materializes, so its bytes exceed the K, V read; its FLOPs are at least the attention's.
    S, N, H, B = 1024, 8, 128, 2
    q_pos, k_pos = jnp.full((B, 1), S - 1), jnp.broadcast_to(jnp.arange(S), (B, S))
    measured = {}
    for K in (8, 2, 1):
        q, kv = jnp.zeros((B, 1, N, H), jnp.bfloat16), jnp.zeros((B, S, K, H), jnp.bfloat16)
        cost = compiled_cost(model.attention, q, kv, kv, q_pos, k_pos)
        assert cost.bytes_accessed >= 2 * kv.nbytes and cost.flops >= attention_flops(1, S, N, H, B)
        measured[N // K] = cost.flops / cost.bytes_accessed
    assert measured[1] < measured[4] < measured[8]
    assert measured[8] / measured[1] > 8 / 2  # at least half the predicted G ratio
    assert attention_intensity(1, S, 8) / attention_intensity(1, S, 1) == pytest.approx(8, rel=0.01)


def test_r4_measured_prefill_attention_intensity_grows_with_prompt_length():
    short, mid, long = (attention_intensity_measured(4, t, t, 1) for t in (16, 128, 1024))
    assert short < mid < long
    assert mid > 2 * short  # a real rise, not noise
    assert long > 10 * attention_intensity_measured(4, 1, CONTEXT, 1)  # prefill is far denser than decode


@pytest.mark.parametrize("rows", [8, 64, 1024])
def test_measured_linear_layer_intensity_matches_matmul_intensity(rows):
    # XLA reads x and w and writes y once: the measured intensity is roofline.matmul_intensity in fp32
    cost = tiny_flops.linear_cost(model.init_params(WIDE, seed=0), rows)
    expected = matmul_intensity(rows, WIDE.d_model, WIDE.d_ff, "fp32", "fp32")
    assert arithmetic_intensity(cost.flops, cost.bytes_accessed) == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("call, says", [
    pytest.param(lambda: tiny_flops.attention_cost(WIDE, 8, 4), "exceeds kv_len", id="more queries than keys"),
    pytest.param(lambda: tiny_flops.linear_cost(model.init_params(model.tiny_config(), seed=0), 4, weight="wq"),
                 "w_gate", id="a weight that is not the MLP's"),
    pytest.param(lambda: tiny_flops.linear_cost(model.init_params(model.tiny_config(), seed=0), 0), "rows",
                 id="no rows"),
])
def test_bad_shapes_are_refused(call, says):
    with pytest.raises(ValueError, match=says):
        call()
