"""Claim V5 on the emulated mesh: an expert-parallel top-k MoE layer equals the dense reference and routes its
tokens with exactly two all-to-alls, each moving the dispatch buffer."""

import jax.numpy as jnp
import numpy as np
import pytest

from scaling_lib.moe import capacity_buffer_bytes
from scaling_lib.book.portable import FLOAT32_ROUNDING, relative_difference
from scaling_lib.tiny.moe import dispatch_buffer_bytes, init_moe, moe_dense, moe_expert_parallel, route
from scaling_lib.tiny.xla import collectives, emulated_mesh

D, F, T = 32, 64, 64


def _x(seed=0, tokens=T):
    return jnp.asarray(np.random.default_rng(seed).standard_normal((tokens, D), np.float32))


@pytest.mark.parametrize("n_experts, k, mesh_shape, names", [(8, 2, (8,), ("expert",)),
                                                             (16, 4, (4, 2), ("expert", "replica"))])
def test_v5_expert_parallel_moe_equals_dense_reference(n_experts, k, mesh_shape, names):
    params = init_moe(D, F, n_experts, seed=n_experts + k)
    x = _x(k)
    mesh = emulated_mesh(mesh_shape, names)
    np.testing.assert_allclose(moe_expert_parallel(params, x, k, mesh, "expert"), moe_dense(params, x, k),
                               atol=1e-5, rtol=0)
    # Chapter 10 prints "below FLOAT32_ROUNDING of the largest output": it holds with 4x to spare.
    assert relative_difference(moe_expert_parallel(params, x, k, mesh, "expert"), moe_dense(params, x, k)) <= (
        FLOAT32_ROUNDING / 4)


def test_v5_routing_takes_exactly_two_all_to_alls_of_the_dispatch_buffer():
    params, x = init_moe(D, F, 8, seed=1), _x(1)
    for shape, names in (((8,), ("expert",)), ((4, 2), ("expert", "replica"))):
        mesh = emulated_mesh(shape, names)
        ops = collectives(lambda p, x: moe_expert_parallel(p, x, 2, mesh, "expert"), params, x)
        assert [op.op for op in ops] == ["all-to-all", "all-to-all"]  # dispatch and return, nothing else
        n = shape[0]
        for op in ops:
            assert op.group_size == n
            assert op.bytes == dispatch_buffer_bytes(params, T, n, dtype="fp32")  # E x (T / n) x D x 4 bytes
    # A smaller capacity shrinks the buffer, empty slots and all: E x kappa x D x 4 bytes, whatever k routes.
    mesh = emulated_mesh((8,), ("expert",))
    for k in (1, 2):
        ops = collectives(lambda p, x: moe_expert_parallel(p, x, k, mesh, "expert", capacity=3), params, x)
        assert [op.bytes for op in ops] == [8 * 3 * D * 4] * 2 == [capacity_buffer_bytes(8, 3, D, "fp32")] * 2


def test_default_capacity_drops_nothing_even_when_every_token_picks_one_expert():
    # A router that sends every token to expert 0 first: expert 0 receives T / n tokens from every device.
    params = init_moe(D, F, 8, seed=2)
    skewed = params.router.at[:, 0].add(100.0)
    params = type(params)(router=skewed, w_gate=params.w_gate, w_up=params.w_up, w_down=params.w_down)
    x = jnp.abs(_x(2))  # positive activations, so the +100 column wins for every token
    assert bool(jnp.all(route(params.router, x, 2)[1][:, 0] == 0))
    mesh = emulated_mesh((8,), ("expert",))
    reference = moe_dense(params, x, 2)
    np.testing.assert_allclose(moe_expert_parallel(params, x, 2, mesh, "expert"), reference, atol=1e-5, rtol=0)
    # With too small a capacity, tokens are dropped and the result no longer matches: the capacity matters.
    dropped = moe_expert_parallel(params, x, 2, mesh, "expert", capacity=2)
    assert not np.allclose(dropped, reference, atol=1e-3)


def test_moe_jax_bad_input():
    mesh = emulated_mesh((8,), ("expert",))
    with pytest.raises(ValueError, match="n_experts=12 is not divisible by the 8 devices"):
        moe_expert_parallel(init_moe(D, F, 12), _x(), 2, mesh, "expert")
    with pytest.raises(ValueError, match="k=9 exceeds the number of experts E=8"):
        moe_dense(init_moe(D, F, 8), _x(), 9)
    with pytest.raises(ValueError, match="k=9 exceeds"):
        moe_expert_parallel(init_moe(D, F, 8), _x(), 9, mesh, "expert")
    with pytest.raises(ValueError, match="T=60 tokens do not split"):
        moe_expert_parallel(init_moe(D, F, 8), _x(tokens=60), 2, mesh, "expert")
    with pytest.raises(ValueError, match="axis 'model' is not an axis"):
        moe_expert_parallel(init_moe(D, F, 8), _x(), 2, mesh, "model")
