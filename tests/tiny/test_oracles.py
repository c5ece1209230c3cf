"""Independent plain-NumPy oracles for the JAX MoE layer and for speculative acceptance counting (issue 14).

The old tests compared the expert-parallel MoE only with the dense path, which shares its routing code, and checked
speculative decoding's tokens but not its counts: a router that forgot to renormalise its top-k weights, or a loop
that counted the target's correction token as accepted, passed every test. The references here are written from
the definitions (module docstrings of scaling_lib.tiny.moe and .speculative), in float64 NumPy or plain Python.
"""

import numpy as np
import pytest

from scaling_lib.tiny import model
from scaling_lib.tiny.moe import init_moe, moe_dense, moe_expert_parallel, route
from scaling_lib.tiny.speculative import BUFFER_QUANTUM, speculative_generate, truncated_draft
from scaling_lib.tiny.xla import emulated_mesh

D, F, T = 32, 64, 64


# --- MoE: routing and the expert FFN in float64 NumPy -----------------------------------------------------------
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


def _x(seed):
    return np.random.default_rng(seed).standard_normal((T, D)).astype(np.float32)


@pytest.mark.parametrize("n_experts, k", [(8, 2), (16, 4), (8, 1)])
def test_moe_dense_equals_the_numpy_reference(n_experts, k):
    params, x = init_moe(D, F, n_experts, seed=n_experts + k), _x(k)
    expected, chosen = reference_moe(params, x, k)
    weights, experts = route(params.router, x, k)
    np.testing.assert_array_equal(np.sort(np.asarray(experts), -1), np.sort(chosen, -1))
    np.testing.assert_allclose(np.asarray(weights).sum(-1), 1.0, rtol=1e-6)  # renormalised over the k kept
    np.testing.assert_allclose(np.asarray(moe_dense(params, x, k)), expected, atol=2e-5, rtol=0)


@pytest.mark.parametrize("n_experts, k, shape, names", [(8, 2, (8,), ("expert",)),
                                                        (12, 3, (6,), ("expert",)),
                                                        (16, 4, (4, 2), ("expert", "replica"))])
def test_expert_parallel_moe_equals_the_numpy_reference(n_experts, k, shape, names):
    params = init_moe(D, F, n_experts, seed=n_experts + k)
    x = _x(k)[: 60 if shape == (6,) else T]  # 60 tokens split 6 ways
    expected, _ = reference_moe(params, x, k)
    got = moe_expert_parallel(params, x, k, emulated_mesh(shape, names), "expert")
    np.testing.assert_allclose(np.asarray(got), expected, atol=2e-5, rtol=0)


# --- speculative decoding: the counts, from a reference written as plain Python ------------------------------------
def _greedy_after(params, sequence):
    """The model's greedy next token after `sequence` (causal attention: padding after it changes nothing)."""
    buffer = np.zeros((1, BUFFER_QUANTUM), np.int32)
    buffer[0, :len(sequence)] = sequence
    return int(np.argmax(np.asarray(model.forward(params, buffer))[0, len(sequence) - 1]))


def reference_speculation(target, draft, prompt, n_tokens, k):
    """Each step: the draft proposes k tokens greedily; the target checks them one prefix at a time; the longest
    agreeing prefix of j drafted tokens is accepted and the target's own next token appended (not an accepted
    draft token). Returns (tokens, target steps, drafted, accepted)."""
    sequence, steps, drafted, accepted = list(prompt), 0, 0, 0
    while len(sequence) < len(prompt) + n_tokens:
        proposal = []
        for _ in range(k):
            proposal.append(_greedy_after(draft, sequence + proposal))
        steps, drafted = steps + 1, drafted + k
        kept = 0
        while kept < k and proposal[kept] == _greedy_after(target, sequence + proposal[:kept]):
            kept += 1
        accepted += kept
        sequence += proposal[:kept] + [_greedy_after(target, sequence + proposal[:kept])]
    return sequence[len(prompt):len(prompt) + n_tokens], steps, drafted, accepted


@pytest.mark.parametrize("k", [1, 3])
def test_speculative_counts_equal_the_reference(k):
    target = model.init_params(model.tiny_config(), seed=0)
    draft = truncated_draft(target, 1)
    prompt = np.random.default_rng(100).integers(0, 256, 6)
    tokens, steps, drafted, accepted = reference_speculation(target, draft, prompt.tolist(), 12, k)
    result = speculative_generate(target, draft, prompt, 12, k)
    assert result.tokens.tolist() == tokens
    assert (result.target_calls, result.drafted, result.accepted) == (steps, drafted, accepted)
    assert 0 < accepted < drafted  # a draft that is sometimes right, sometimes wrong: both branches counted
    # Each step makes its accepted tokens plus exactly one of the target's: at least n_tokens in all, and the last
    # step overshoots by at most k.
    assert 12 <= result.accepted + result.target_calls <= 12 + k
