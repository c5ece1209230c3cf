"""Claim V4 on the tiny JAX decoder: greedy speculative decoding reproduces the target's greedy output exactly."""

import numpy as np
import pytest

from scaling_lib.speculative import expected_tokens_per_step
from scaling_lib.tiny.model import generate, init_params, tiny_config
from scaling_lib.tiny.speculative import acceptance_rate, speculative_generate, truncated_draft

N_TOKENS = 16
SEEDS = (0, 1)


def _prompts(seed, n=2, length=6):
    rng = np.random.default_rng(100 + seed)
    return [rng.integers(0, 256, length) for _ in range(n)]


@pytest.fixture(scope="module")
def targets():
    return {seed: init_params(tiny_config(), seed=seed) for seed in SEEDS}


@pytest.mark.parametrize("seed", SEEDS)
def test_v4_greedy_speculative_output_equals_target_greedy_generate(targets, seed):
    target = targets[seed]
    drafts = {"first layer": truncated_draft(target, 1),
              "separate 1-layer MQA model": init_params(tiny_config(n_layers=1, n_kv_heads=1), seed=seed + 50)}
    for i, prompt in enumerate(_prompts(seed)):
        reference = np.asarray(generate(target, prompt[None], N_TOKENS))[0]
        for name, draft in list(drafts.items())[:2 if i == 0 else 1]:
            for k in (1, 2, 4):
                result = speculative_generate(target, draft, prompt, N_TOKENS, k)
                np.testing.assert_array_equal(result.tokens, reference, err_msg=f"{name}, k={k}")
                # Every step keeps 1 to k + 1 tokens, so the target runs between n / (k + 1) and n times.
                assert N_TOKENS / (k + 1) <= result.target_calls <= N_TOKENS
                assert 0 <= result.accepted <= result.drafted == k * result.target_calls


def test_v4_acceptance_rate_is_measured_and_a_better_draft_accepts_more(targets):
    target = targets[0]
    prompts = _prompts(0)
    truncated = acceptance_rate(target, truncated_draft(target, 1), prompts, N_TOKENS, 2)
    unrelated = acceptance_rate(target, init_params(tiny_config(n_layers=1), seed=77), prompts, N_TOKENS, 2)
    itself = acceptance_rate(target, target, prompts, N_TOKENS, 2)
    assert itself == 1.0  # a draft identical to the target is always right
    assert 0.0 < truncated < 1.0
    assert unrelated < truncated  # the target's own first layer predicts it better than a random model
    # A perfect draft makes k + 1 tokens per target pass, as expected_tokens_per_step(k, 1) says (but the last
    # step may overshoot the requested length).
    perfect = speculative_generate(target, target, prompts[0], 15, 2)
    assert perfect.tokens_per_target_call == pytest.approx(expected_tokens_per_step(2, 1.0))


def test_speculative_jax_bad_input(targets):
    target = targets[0]
    with pytest.raises(ValueError, match="vocab_size=128 differs"):
        speculative_generate(target, init_params(tiny_config(vocab_size=128)), np.arange(4), 4, 2)
    with pytest.raises(ValueError, match="lookahead must be a positive integer"):
        speculative_generate(target, target, np.arange(4), 4, 0)
    with pytest.raises(ValueError, match="n_layers=3 must be an integer in"):
        truncated_draft(target, 3)
    with pytest.raises(ValueError, match="prompt must be a non-empty 1-D"):
        speculative_generate(target, target, np.zeros((2, 3), int), 4, 2)
