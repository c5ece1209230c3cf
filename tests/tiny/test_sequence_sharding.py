"""Sequence-sharded KV cache (scaling_lib.tiny.sequence_sharding) on the emulated mesh: equal to unsharded attention,
and the compiled program moves exactly the two all-reduces `scaling_lib.sequence_sharding` prices; a mesh that does
not split the cache is refused."""

import jax.numpy as jnp
import numpy as np
import pytest

from scaling_lib.book.portable import FLOAT32_ROUNDING, relative_difference
from scaling_lib.sequence_sharding import sequence_sharded_attention as priced
from scaling_lib.tiny import model as tiny
from scaling_lib.tiny.sequence_sharding import reference, sequence_sharded_attention, sequence_sharded_collectives
from scaling_lib.tiny.xla import emulated_mesh

S = 32


def _case(n_kv_heads, window=None):
    config = tiny.tiny_config(n_kv_heads=n_kv_heads, sliding_window=window)
    params = tiny.init_params(config, seed=0)
    prompt = np.random.default_rng(0).integers(0, 256, (2, S))
    _, cache = tiny.prefill(params, prompt, lengths=np.array([S, 20]), cache_len=S)
    positions = jnp.array([[S - 1], [19]])  # attend over the whole cache, and over a partly filled one
    q, _, _ = tiny.qkv(params.layer(0), params.embed[jnp.array([3, 4])][:, None, :], positions)
    slots = jnp.broadcast_to(jnp.arange(S), (2, S))
    return config, (q, cache.k[0], cache.v[0], positions, slots)


@pytest.mark.parametrize("n_kv_heads, window, shape, refusal", [
    (1, None, (4,), None), (2, None, (8,), None), (4, 8, (2,), None),
    (1, None, (3,), "do not split"),  # 32 slots over 3 devices
    (1, None, (2, 2), "one-axis"),
])
def test_sequence_sharded_attention_equals_unsharded_attention_on_a_mesh_that_splits_the_cache(n_kv_heads, window, shape,
                                                                                              refusal):
    """On a one-axis mesh whose size divides the cache's slots, the same output; on any other mesh, a ValueError."""
    _, args = _case(n_kv_heads, window)
    mesh = emulated_mesh(shape, ("seq",) if len(shape) == 1 else ("a", "b"))
    if refusal:
        with pytest.raises(ValueError, match=refusal):
            sequence_sharded_attention(mesh, *args, window=window)
        return
    out = sequence_sharded_attention(mesh, *args, window=window)
    np.testing.assert_allclose(np.asarray(out), np.asarray(reference(*args, window)), atol=2e-6, rtol=0)
    # Chapter 14 prints "below FLOAT32_ROUNDING of its largest output": it holds with 4x to spare.
    assert relative_difference(out, reference(*args, window)) <= FLOAT32_ROUNDING / 4


def test_only_two_all_reduces_move_and_their_bytes_are_the_closed_form():
    config, args = _case(1)
    ops = sequence_sharded_collectives(emulated_mesh((4,), ("seq",)), *args)
    assert [op.op for op in ops] == ["all-reduce", "all-reduce"] and all(op.group_size == 4 for op in ops)
    model = config.with_(n_layers=1)
    cost = priced(model, "tpu-v5e", 4, batch=2, context_len=S, activation_dtype="fp32")
    assert sorted(op.bytes for op in ops) == [2 * config.n_heads * 4, cost.combine_bytes]

