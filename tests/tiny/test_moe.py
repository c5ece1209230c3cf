"""The MoE layer in JAX (scaling_lib.tiny.moe) against an independent float64 NumPy reference written from the
definition, and claim V5 on the emulated mesh: expert parallelism equals the dense layer and routes its tokens with
exactly two all-to-alls, each moving the dispatch buffer.

The reference shares no code with the layer: a router that forgot to renormalise its top-k weights, or expert
parallelism that shared the dense path's mistakes, is caught by it.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from scaling_lib.book.portable import FLOAT32_ROUNDING, relative_difference
from scaling_lib.moe import capacity_buffer_bytes
from scaling_lib.tiny.moe import dispatch_buffer_bytes, init_moe, moe_dense, moe_expert_parallel, route
from scaling_lib.tiny.xla import collectives, emulated_mesh

D, F, T = 32, 64, 64


def reference_moe(params, x, k):
    """softmax(x W_router); each token keeps its k most probable experts with weights p / sum of those k p's, and sums
    weight x W_down(silu(x W_gate) * x W_up) over them."""
    router, w_gate, w_up, w_down = (np.asarray(a, np.float64) for a in
                                    (params.router, params.w_gate, params.w_up, params.w_down))
    x = np.asarray(x, np.float64)
    logits = x @ router
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    out = np.zeros_like(x)
    chosen = np.zeros((len(x), k), int)
    for t in range(len(x)):
        top = np.argsort(-probs[t], kind="stable")[:k]
        chosen[t] = top
        weights = probs[t, top] / probs[t, top].sum()
        for e, weight in zip(top, weights):
            gate = x[t] @ w_gate[e]
            out[t] += weight * ((gate / (1 + np.exp(-gate)) * (x[t] @ w_up[e])) @ w_down[e])
    return out, chosen


def _x(seed, tokens=T):
    return np.random.default_rng(seed).standard_normal((tokens, D)).astype(np.float32)


@pytest.mark.parametrize("n_experts, k, mesh_shape, names", [
    (8, 2, (8,), ("expert",)), (16, 4, (4, 2), ("expert", "replica")), (12, 3, (6,), ("expert",)), (8, 1, None, None),
])
def test_v5_dense_and_expert_parallel_moe_equal_the_float64_numpy_reference(n_experts, k, mesh_shape, names):
    params = init_moe(D, F, n_experts, seed=n_experts + k)
    x = _x(k, 60 if mesh_shape == (6,) else T)  # 60 tokens split 6 ways
    expected, chosen = reference_moe(params, x, k)
    weights, experts = route(params.router, x, k)
    np.testing.assert_array_equal(np.sort(np.asarray(experts), -1), np.sort(chosen, -1))
    np.testing.assert_allclose(np.asarray(weights).sum(-1), 1.0, rtol=1e-6)  # renormalised over the k kept
    dense = moe_dense(params, x, k)
    np.testing.assert_allclose(np.asarray(dense), expected, atol=2e-5, rtol=0)
    if mesh_shape is None:
        return
    parallel = moe_expert_parallel(params, x, k, emulated_mesh(mesh_shape, names), "expert")
    np.testing.assert_allclose(np.asarray(parallel), expected, atol=2e-5, rtol=0)
    np.testing.assert_allclose(parallel, dense, atol=1e-5, rtol=0)
    # Chapter 10 prints "below FLOAT32_ROUNDING of the largest output": it holds with 4x to spare.
    assert relative_difference(parallel, dense) <= FLOAT32_ROUNDING / 4


def test_v5_routing_takes_exactly_two_all_to_alls_of_the_dispatch_buffer():
    params, x = init_moe(D, F, 8, seed=1), jnp.asarray(_x(1))
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
    x = jnp.abs(jnp.asarray(_x(2)))  # positive activations, so the +100 column wins for every token
    assert bool(jnp.all(route(params.router, x, 2)[1][:, 0] == 0))
    mesh = emulated_mesh((8,), ("expert",))
    reference = moe_dense(params, x, 2)
    np.testing.assert_allclose(moe_expert_parallel(params, x, 2, mesh, "expert"), reference, atol=1e-5, rtol=0)
    # With too small a capacity, tokens are dropped and the result no longer matches: the capacity matters.
    dropped = moe_expert_parallel(params, x, 2, mesh, "expert", capacity=2)
    assert not np.allclose(dropped, reference, atol=1e-3)


@pytest.mark.parametrize("call, says", [
    pytest.param(lambda mesh: moe_expert_parallel(init_moe(D, F, 12), _x(0), 2, mesh, "expert"),
                 "n_experts=12 is not divisible by the 8 devices", id="experts that do not split"),
    pytest.param(lambda mesh: moe_dense(init_moe(D, F, 8), _x(0), 9), "k=9 exceeds the number of experts E=8",
                 id="dense: k past the experts"),
    pytest.param(lambda mesh: moe_expert_parallel(init_moe(D, F, 8), _x(0), 9, mesh, "expert"), "k=9 exceeds",
                 id="expert-parallel: k past the experts"),
    pytest.param(lambda mesh: moe_expert_parallel(init_moe(D, F, 8), _x(0, 60), 2, mesh, "expert"),
                 "T=60 tokens do not split", id="tokens that do not split"),
    pytest.param(lambda mesh: moe_expert_parallel(init_moe(D, F, 8), _x(0), 2, mesh, "model"),
                 "axis 'model' is not an axis", id="an axis the mesh lacks"),
])
def test_bad_inputs_are_refused(call, says):
    with pytest.raises(ValueError, match=says):
        call(emulated_mesh((8,), ("expert",)))
