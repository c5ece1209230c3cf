"""Claim V4 on the tiny JAX decoder (scaling_lib.tiny.speculative): greedy speculative decoding reproduces the target's
greedy output exactly, and counts its target calls, drafted and accepted tokens as a plain-Python reference written
from the definition does (a loop that counted the target's correction token as accepted would pass the first)."""

import numpy as np
import pytest

from scaling_lib.speculative import expected_tokens_per_step
from scaling_lib.tiny import model
from scaling_lib.tiny.model import generate, init_params, tiny_config
from scaling_lib.tiny.speculative import BUFFER_QUANTUM, acceptance_rate, speculative_generate, truncated_draft

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
def test_speculative_counts_equal_the_plain_python_reference(targets, k):
    target = targets[0]
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


@pytest.mark.parametrize("call, says", [
    pytest.param(lambda t: speculative_generate(t, init_params(tiny_config(vocab_size=128)), np.arange(4), 4, 2),
                 "vocab_size=128 differs", id="a draft of another vocabulary"),
    pytest.param(lambda t: speculative_generate(t, t, np.arange(4), 4, 0), "lookahead must be a positive integer",
                 id="a lookahead of 0"),
    pytest.param(lambda t: truncated_draft(t, 3), "n_layers=3 must be an integer in",
                 id="a draft deeper than the target"),
    pytest.param(lambda t: speculative_generate(t, t, np.zeros((2, 3), int), 4, 2), "prompt must be a non-empty 1-D",
                 id="a batch of prompts"),
])
def test_bad_inputs_are_refused(targets, call, says):
    with pytest.raises(ValueError, match=says):
        call(targets[0])
