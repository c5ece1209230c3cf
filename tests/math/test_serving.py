"""scaling_lib.serving: the batch at which prefill saturates, the prompts that ride free, and the server ratio (the
chapter 9 claims are in test_claims_serving.py)."""

import pytest

from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, prefill_time
from scaling_lib.memory import param_bytes
from scaling_lib.serving import (
    prefill_free_batch,
    prefill_latency,
    prefill_saturating_batch,
    prefill_saturating_tokens,
    server_ratio,
)

from tests import for_each


@for_each([16, 64, 95, 97, 512, 8192], ids=str)
def test_the_saturating_batch_is_where_prefill_flops_reach_the_weight_read(prompt_len):
    b = prefill_saturating_batch("llama3-70b", "tpu-v5e", prompt_len, mfu=0.4)
    weights = param_bytes("llama3-70b") / (16 * 8.2e11)
    assert prefill_time("llama3-70b", "tpu-v5e", 16, prompt_len, 0.4, batch=b) >= weights * (1 - 1e-12)
    if b > 1:
        assert prefill_time("llama3-70b", "tpu-v5e", 16, prompt_len, 0.4, batch=b - 1) < weights
    # Above it a bigger batch only adds latency: tokens per second stay put.
    rate = [k * prompt_len / prefill_latency("llama3-70b", "tpu-v5e", 16, prompt_len, 0.4, batch=k)
            for k in (b, 2 * b)]
    assert rate[1] == pytest.approx(rate[0], rel=1e-9)
    assert (b == 1) == (prompt_len >= 97)


def test_saturating_tokens_by_hand_and_the_scaling_books_240_at_peak_rate():
    # v5e: 197 TFLOP/s bf16, 820 GB/s; bf16 weights are 2 bytes per parameter, so P_bytes / (2P) = 1.
    assert prefill_saturating_tokens("llama3-70b", "tpu-v5e", mfu=1.0) == pytest.approx(197e12 / 820e9, rel=1e-12)
    assert prefill_saturating_tokens("llama3-70b", "tpu-v5e", mfu=1.0) == pytest.approx(240, rel=0.01)  # SB ch. 7
    assert prefill_saturating_tokens("llama3-70b", "tpu-v5e") == pytest.approx(0.4 * 197e12 / 820e9, rel=1e-12)


@for_each([16, 40, 48, 95, 96, 97, 512], ids=str)
def test_prompts_ride_free_up_to_the_free_batch_and_not_one_more(prompt_len):
    # 40-token prompts (chapter 14's pop quiz): T_sat = 96.1, so 2 ride free (80 tokens) and the 3rd (120) does not.
    # A prompt longer than T_sat is compute-bound on its own: none rides free (chapter 14's table at T = 128).
    free = prefill_free_batch("llama3-70b", "tpu-v5e", prompt_len, mfu=0.4)
    weights = param_bytes("llama3-70b") / (16 * get_chip("tpu-v5e").hbm_bandwidth)  # the weight read, 16 chips
    for batch in range(1, free + 1):  # every prompt up to the free batch rides on the weight read
        assert prefill_latency("llama3-70b", "tpu-v5e", 16, prompt_len, 0.4, batch=batch) == pytest.approx(weights)
    assert prefill_latency("llama3-70b", "tpu-v5e", 16, prompt_len, 0.4, batch=free + 1) > weights
    assert free == int(96.0975 // prompt_len)
    assert prefill_free_batch("llama3-70b", "tpu-v5e", 40) == 2 and prefill_saturating_batch("llama3-70b",
                                                                                               "tpu-v5e", 40) == 3


def test_server_ratio_by_hand_from_the_step_bounds():
    # LLaMA-3-70B, 8,192-token prompts on 32 v5e (compute-bound prefill at 50% MFU, int8 weights), 513-token outputs
    # decoded at batch 16 on 8 v5e with an int8 cache: the decode step is taken at 8,192 + 256.5 tokens of context.
    ratio = server_ratio("llama3-70b", "tpu-v5e", 8192, 513, 16, 32, 8, mfu=0.5, weight_dtype="int8", kv_dtype="int8")
    prefill = prefill_time("llama3-70b", "tpu-v5e", 32, 8192, 0.5)
    assert prefill > param_bytes("llama3-70b", "int8") / (32 * 8.2e11)  # compute-bound: no weight floor
    step = decode_step_time("llama3-70b", "tpu-v5e", 8, 16, 8192 + 256.5, weight_dtype="int8", kv_dtype="int8")
    assert ratio.prefill_s == pytest.approx(prefill, rel=1e-12)
    assert ratio.decode_step_s == pytest.approx(step.total_s, rel=1e-12)
    assert ratio.prefill_requests_per_s == pytest.approx(1 / prefill, rel=1e-12)
    assert ratio.decode_requests_per_s == pytest.approx(16 / (step.total_s * 513), rel=1e-12)
    assert ratio.prefill_per_decode == pytest.approx(prefill * 16 / (step.total_s * 513), rel=1e-12)


def test_server_ratio_floors_a_short_prefill_at_the_weight_read_in_the_weight_dtype():
    ratio = server_ratio("llama3-70b", "tpu-v5e", 16, 64, 8, 16, 16, weight_dtype="int8")
    assert ratio.prefill_s == pytest.approx(param_bytes("llama3-70b", "int8") / (16 * 8.2e11), rel=1e-12)


def test_server_ratio_prices_a_batch_that_does_not_fit_when_asked_and_in_the_compute_dtype():
    # batch 1,024: the matmul FLOPs (not the weight read) set the step, so the compute dtype shows
    # (1,024 caches of 8k tokens do not fit in 8 x 192 GB: priced as if they did, to see the compute dtype)
    ratio = server_ratio("llama3-70b", "tpu-7x", 8192, 512, 1024, 8, 8, compute_dtype="fp8", check_capacity=False)
    step = decode_step_time("llama3-70b", "tpu-7x", 8, 1024, 8192 + 256, compute_dtype="fp8", check_capacity=False)
    assert step.bound == "compute" and ratio.decode_step_s == step.total_s
    assert server_ratio("llama3-70b", "tpu-v5e", 8192, 512, 1024, 16, 16, check_capacity=False).decode_step_s > 0


# --- bad input: a ValueError naming the argument and the fix -----------------------------------------------------------
def _server_ratio_with(index, value):
    args = ["llama3-8b", "h100", 512, 64, 8, 1, 1]
    args[index] = value
    return server_ratio(*args)


BAD_INPUT = {
    "mfu-above-one": (lambda: prefill_saturating_tokens("llama3-8b", "h100", mfu=1.5),
                      "mfu.*the fraction of peak FLOP/s achieved"),
    "a-batch-that-does-not-fit": (lambda: server_ratio("llama3-70b", "tpu-v5e", 8192, 512, 1024, 16, 16),
                                  r"\bdoes not fit\b"),
    **{f"{name}-zero": (lambda index=index: _server_ratio_with(index, 0), rf"^{name} must be a positive integer")
       for index, name in ((3, "output_len"), (4, "decode_batch"), (5, "n_prefill_chips"), (6, "n_decode_chips"))},
}


@for_each(BAD_INPUT.values(), ids=list(BAD_INPUT))
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
