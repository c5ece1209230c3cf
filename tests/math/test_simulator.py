"""scaling_lib.simulator: the serving engines (naive, interleaved, chunked, disaggregated), their workloads and their
results. Expected values come from the closed-form step bounds of `inference` (another module than the one under
test) and hand-worked KV reads; prefix caching: cached prompt tokens skip prefill but not decode."""

import math
import warnings

import numpy as np
import pytest

from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, prefill_time
from scaling_lib.memory import kv_cache_bytes, max_batch_size, param_bytes
from scaling_lib.models import get_model
from scaling_lib.serving import prefill_latency
from scaling_lib.simulator import (
    ENGINES,
    ServingConfig,
    Workload,
    poisson_workload,
    simulate,
    simulate_disaggregated,
    trace_workload,
)

CONFIG = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=32, max_context_len=8192)
FOUR_SLOTS = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=4, max_context_len=4096)
H100_CONFIG = ServingConfig("llama3-8b", "h100", n_chips=1, max_batch=8, max_context_len=4096)
V5E_W = 8.2e11  # B/s of HBM per TPU v5e
LLAMA70_KV_PER_TOKEN = 327_680  # bf16: 2 (K and V) x 80 layers x 8 KV heads x 128 x 2 B


def test_prefix_cache_shortens_prefill_to_the_new_tokens_only():
    plain = trace_workload([(0.0, 4000, 64)])
    cached = Workload(plain.arrival_s, plain.prompt_len, plain.output_len, cached_len=np.array([3000]))
    for engine in ("interleaved", "naive", "disaggregated"):
        a, b = simulate(CONFIG, plain, engine), simulate(CONFIG, cached, engine)
        assert b.ttft_s[0] == pytest.approx(prefill_latency("llama3-70b", "tpu-v5e", 16, 1000), rel=1e-9)
        assert a.ttft_s[0] == pytest.approx(prefill_latency("llama3-70b", "tpu-v5e", 16, 4000), rel=1e-9)
        # Decode still reads the whole 4,000-token prompt's cache: the time per output token is unchanged.
        assert b.tpot_s[0] == pytest.approx(a.tpot_s[0], rel=1e-9)


def test_shared_prefix_lowers_ttft_under_load_for_every_engine():
    kwargs = dict(rate_per_s=1.0, n_requests=200, prompt_len=(2048, 4096), output_len=(32, 256), seed=3)
    plain = poisson_workload(**kwargs)
    shared = poisson_workload(**kwargs, shared_prefix_len=2000, shared_prefix_fraction=0.8)
    np.testing.assert_array_equal(plain.arrival_s, shared.arrival_s)  # same requests, only the cache differs
    np.testing.assert_array_equal(plain.prompt_len, shared.prompt_len)
    assert 0.7 < np.mean(shared.cached_len > 0) < 0.9
    for engine in ENGINES:
        a, b = simulate(CONFIG, plain, engine), simulate(CONFIG, shared, engine)  # disaggregated: 1 + 1 servers
        assert b.p50_ttft_s < a.p50_ttft_s, engine
        assert b.total_tokens == a.total_tokens == int(plain.output_len.sum())


def test_prefix_cache_defaults_leave_workloads_unchanged_and_bad_input_is_named():
    a = poisson_workload(2.0, 50, prompt_len=(10, 100), seed=1)
    b = poisson_workload(2.0, 50, prompt_len=(10, 100), seed=1, shared_prefix_len=0, shared_prefix_fraction=0.5)
    np.testing.assert_array_equal(a.prompt_len, b.prompt_len)
    assert not a.cached_len.any() and not b.cached_len.any()
    with pytest.raises(ValueError, match="cached_len must lie in"):
        Workload([0.0], [10], [5], cached_len=[10])
    with pytest.raises(ValueError, match="shared_prefix_fraction must be a fraction"):
        poisson_workload(1.0, 10, shared_prefix_fraction=1.5)


def test_a_cache_load_adds_to_a_lone_requests_ttft_exactly():
    config = ServingConfig("llama3-8b", "tpu-v5e", n_chips=8, max_batch=16, max_context_len=16384)
    plain = trace_workload([(0.0, 4000, 8)])
    loaded = Workload(plain.arrival_s, plain.prompt_len, plain.output_len, cached_len=[3000], cache_load_s=[0.05])
    for engine in ("interleaved", "naive", "chunked", "disaggregated"):
        a = simulate(config, Workload(plain.arrival_s, plain.prompt_len, plain.output_len, cached_len=[3000]), engine)
        b = simulate(config, loaded, engine)
        assert b.ttft_s[0] - a.ttft_s[0] == pytest.approx(0.05, rel=1e-9), engine


def test_a_negative_cache_load_is_refused_by_name():
    with pytest.raises(ValueError, match="cache_load_s"):
        Workload([0.0], [10], [5], cache_load_s=[-1.0])


# --- the engines against the closed-form step bounds ------------------------------------------------------------------
def _chunk(tokens):
    return prefill_time("llama3-70b", "tpu-v5e", 16, tokens, 0.4)


def test_chunked_engine_fills_every_chunk_to_its_last_token():
    # 511 + 513 prompt tokens, chunks of 512: step 1 takes A's 511 and 1 of B's; step 2 the other 512 of B, reading
    # the 1 token of B already cached (327,680 B of KV, bf16 LLaMA-3-70B) -- B's first token ends step 2.
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 511, 1), (0.0, 513, 1)]), "chunked")
    assert result.first_token_s[1] == pytest.approx(2 * _chunk(512) + LLAMA70_KV_PER_TOKEN / (16 * V5E_W), rel=1e-9)


def test_chunked_engine_reads_at_most_a_window_of_the_prefix():
    # A 256-token sliding window: the second chunk of a 1,024-token prompt reads 256 cached tokens, not 512.
    windowed = ServingConfig(get_model("llama3-70b").with_(sliding_window=256, name="llama3-70b-w256"), "tpu-v5e",
                             n_chips=16, max_batch=4, max_context_len=4096)
    result = simulate(windowed, trace_workload([(0.0, 1024, 1)]), "chunked")
    assert result.ttft_s[0] - 2 * _chunk(512) == pytest.approx(256 * LLAMA70_KV_PER_TOKEN / (16 * V5E_W), rel=1e-6)


def test_chunks_of_several_prompts_each_read_their_own_prefix():
    # Three 600-token prompts at once, chunks of 512: step 2 carries 88 tokens of A (reading A's 512 cached) and 424
    # of B (nothing cached yet); step 3 carries 176 of B (reading its 424) and 336 of C: every chunk reads the prefix
    # of its own sequence, and the reads add up over the sequences in the step.
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 600, 1)] * 3), "chunked")
    per_token = LLAMA70_KV_PER_TOKEN / (16 * V5E_W)
    assert result.first_token_s[1] == pytest.approx(3 * _chunk(512) + (512 + 424) * per_token, rel=1e-9)


def test_chunked_engine_admits_at_most_max_batch_requests():
    # Five requests on four slots: the fifth starts only when one finishes.
    five = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 3)] * 5), "chunked")
    assert np.sum(five.start_s == 0.0) == 4


def test_chunked_prefill_uses_the_configured_compute_dtype():
    # One 512-token chunk in fp8 on 8 Ironwood chips: max(weight read, 2 P x 512 / (8 x 4.614e15 x 0.4)).
    config = ServingConfig("llama3-70b", "tpu-7x", n_chips=8, max_batch=4, max_context_len=4096, compute_dtype="fp8")
    result = simulate(config, trace_workload([(0.0, 512, 1)]), "chunked")
    weights = decode_step_time("llama3-70b", "tpu-7x", 8, 0, 0).weight_s
    assert result.ttft_s[0] == pytest.approx(max(weights, prefill_time("llama3-70b", "tpu-7x", 8, 512, 0.4,
                                                                      compute_dtype="fp8")), rel=1e-12)


def test_a_full_batch_makes_its_second_tokens_in_one_decode_step():
    # Four requests fill max_batch = 4; each makes its second token in one decode step at batch 4.
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)] * 4), "naive")
    step = decode_step_time("llama3-70b", "tpu-v5e", 16, 4, 101)
    assert np.allclose(result.finish_s - result.first_token_s, step.total_s, rtol=1e-9)
    assert result.generated_tokens.tolist() == [2, 2, 2, 2]


def test_windowed_decode_before_any_sequence_reaches_the_window():
    model = get_model("llama3-8b").with_(sliding_window=512, name="llama3-8b-local")
    config = ServingConfig(model, "h100", n_chips=1, max_batch=4, max_context_len=2048)
    result = simulate(config, trace_workload([(0.0, 100, 600), (0.0, 200, 600)]), "naive")
    expected = sum(decode_step_time(model, "h100", 1, 2, (min(100 + j, 512) + min(200 + j, 512)) / 2).total_s
                   for j in range(1, 600))
    assert result.finish_s[0] - result.first_token_s[0] == pytest.approx(expected, rel=1e-9)


def test_one_token_outputs_have_no_time_per_output_token():
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 1), (0.1, 50, 1)]), "interleaved")
    assert math.isnan(result.p50_tpot_s) and math.isnan(result.p99_tpot_s)


def test_queue_length_over_staggered_arrivals():
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 4000, 2), (0.01, 4000, 2), (0.02, 4000, 2)]), "interleaved")
    times, lengths = result.queue_length()
    assert lengths.tolist() == [0, 1, 2, 1, 0]
    np.testing.assert_allclose(times[:3], [0.0, 0.01, 0.02])


def test_a_result_keeps_its_engine_output_lengths_and_time_per_output_token():
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)]), "chunked")
    assert result.engine == "chunked" and result.output_len.tolist() == [2]
    assert result.tpot_s[0] == pytest.approx(decode_step_time("llama3-70b", "tpu-v5e", 16, 1, 101).total_s, rel=1e-9)


def test_the_queue_length_is_a_count():
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)]), "chunked")
    assert result.queue_length()[1].dtype.kind == "i"


def test_the_disaggregated_engine_defaults_to_one_prefill_and_one_decode_server():
    assert simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 3)]), "disaggregated").n_chips == 2 * 16


# --- the serving config -----------------------------------------------------------------------------------------------
def test_serving_config_checks_the_batch_against_hbm_in_the_kv_dtype():
    # 16 v5e hold LLaMA-3-70B and 20 caches of 8,192 bf16 tokens, about twice as many in int8.
    fit_bf16 = max_batch_size("llama3-70b", "tpu-v5e", 16, 8192, "bf16", "bf16")
    ServingConfig("llama3-70b", "tpu-v5e", 16, fit_bf16 + 1, 8192, kv_dtype="int8")  # fits in int8
    with pytest.raises(ValueError, match="does not fit in HBM"):
        ServingConfig("llama3-70b", "tpu-v5e", 16, fit_bf16 + 1, 8192)


def test_serving_config_refuses_an_mfu_above_one_and_says_what_mfu_is():
    with pytest.raises(ValueError, match=r"mfu must be in \(0, 1\], got 2: it is the fraction of peak FLOP/s achieved"):
        ServingConfig("llama3-70b", "tpu-v5e", 16, 8, 8192, mfu=2)


# --- workloads --------------------------------------------------------------------------------------------------------
def test_poisson_workload_outputs_default_to_256_tokens():
    assert poisson_workload(1.0, 3).output_len.tolist() == [256] * 3


def test_poisson_workload_seed_defaults_to_zero():
    np.testing.assert_array_equal(poisson_workload(1.0, 3).arrival_s, poisson_workload(1.0, 3, seed=0).arrival_s)


def test_poisson_workload_takes_a_function_for_the_prompt_lengths():
    fixed = poisson_workload(1.0, 3, prompt_len=lambda rng, n: np.full(n, 77))
    assert fixed.prompt_len.tolist() == [77] * 3


def test_a_length_function_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"prompt_len: the function gave shape \(2,\)"):
        poisson_workload(1.0, 3, prompt_len=lambda rng, n: np.ones(2, int))


def test_a_workload_reads_whole_floats_as_token_counts_and_is_read_only():
    workload = Workload([0.0], [10.0], [5])  # whole floats are token counts too
    assert workload.prompt_len.dtype == np.int64 and not workload.output_len.flags.writeable


def test_a_workload_keeps_its_cached_lengths():
    assert Workload([0.0], [10], [5], cached_len=[1]).cached_len.tolist() == [1]


def test_a_workload_refuses_a_negative_arrival():
    with pytest.raises(ValueError, match="arrival_s must be finite and non-negative"):
        Workload([-1.0], [10], [5])


def test_a_workload_refuses_columns_of_different_lengths():
    with pytest.raises(ValueError, match="arrival_s, prompt_len and output_len must be 1-D of one length"):
        Workload([0.0, 1.0], [10], [5])


def test_a_workload_refuses_a_cache_that_holds_the_whole_prompt():
    with pytest.raises(ValueError, match=r"cached_len must lie in \[0, prompt_len - 1\]"):
        Workload([0.0], [10], [5], cached_len=[10])


def test_a_workload_refuses_a_fractional_cached_length():
    with pytest.raises(ValueError, match="cached_len must hold whole numbers of tokens"):
        Workload([0.0], [10], [5], cached_len=[0.5])


def test_a_workload_refuses_an_output_length_beyond_int64():
    with pytest.raises(ValueError, match="output_len"):
        Workload([0.0], [10], [2**63])


def test_a_workload_refuses_lengths_whose_sum_wraps_around_int64():
    with pytest.raises(ValueError, match="prompt_len"):
        Workload([0.0], [2**62], [2**62])  # each fits int64, their sum does not


# --- simulate's arguments ---------------------------------------------------------------------------------------------
def test_simulate_refuses_a_workload_that_is_not_a_workload():
    with pytest.raises(ValueError, match="workload must be a Workload"):
        simulate(FOUR_SLOTS, [(0.0, 10, 5)], "naive")


def test_simulate_refuses_a_config_that_is_not_a_serving_config():
    with pytest.raises(ValueError, match="config must be a ServingConfig, got dict"):
        simulate({}, trace_workload([(0.0, 10, 2)]))


def test_the_disaggregated_engine_refuses_n_servers_and_names_its_own_arguments():
    with pytest.raises(ValueError, match="n_servers applies to the co-located engines .* the 'disaggregated' engine "
                                         "takes n_prefill_servers and n_decode_servers"):
        simulate(FOUR_SLOTS, trace_workload([(0.0, 10, 2)]), "disaggregated", n_servers=2)


@pytest.mark.parametrize("engine, kwargs, error, message", [
    ("interleaved", dict(n_prefill_servers=2), TypeError, "n_prefill_servers"),  # simulate_disaggregated's arguments
    ("chunked", dict(n_decode_servers=2), TypeError, "n_decode_servers"),
    ("naive", dict(transfer_bandwidth=1e9), TypeError, "transfer_bandwidth"),
    ("interleaved", dict(prefill_config=H100_CONFIG), TypeError, "prefill_config"),
    ("disaggregated", dict(n_servers=3), ValueError, "n_servers applies to the co-located engines.*simulate_disaggregated"),
])
def test_simulate_refuses_arguments_that_do_not_apply_to_the_engine(engine, kwargs, error, message):
    with pytest.raises(error, match=message):
        simulate(H100_CONFIG, trace_workload([(0.0, 100, 10), (0.1, 200, 5)]), engine, **kwargs)


# --- the split: simulate (co-located engines) and simulate_disaggregated (issue 22) -------------------------------

SPLIT_CONFIG = ServingConfig("llama3-8b", "h100", n_chips=1, max_batch=8, max_context_len=4096)
SPLIT_WORKLOAD = poisson_workload(4.0, 40, prompt_len=(100, 1000), output_len=(10, 100), seed=3)


def test_the_disaggregated_engine_named_in_simulate_is_one_prefill_and_one_decode_server():
    named = simulate(SPLIT_CONFIG, SPLIT_WORKLOAD, "disaggregated")
    direct = simulate_disaggregated(SPLIT_CONFIG, SPLIT_WORKLOAD, n_prefill_servers=1, n_decode_servers=1)
    assert named.engine == direct.engine == "disaggregated" and named.n_chips == direct.n_chips == 2
    np.testing.assert_array_equal(named.ttft_s, direct.ttft_s)
    np.testing.assert_array_equal(named.finish_s, direct.finish_s)


def test_each_function_counts_the_chips_of_its_own_servers():
    assert simulate(SPLIT_CONFIG, SPLIT_WORKLOAD, "chunked", n_servers=3).n_chips == 3
    assert simulate_disaggregated(SPLIT_CONFIG, SPLIT_WORKLOAD, n_prefill_servers=2, n_decode_servers=3).n_chips == 5


def test_each_function_refuses_the_other_engines_arguments_and_names_the_right_call():
    with pytest.raises(ValueError, match="simulate_disaggregated"):
        simulate(SPLIT_CONFIG, SPLIT_WORKLOAD, "disaggregated", n_servers=2)
    with pytest.raises(TypeError, match="n_prefill_servers"):
        simulate(SPLIT_CONFIG, SPLIT_WORKLOAD, "interleaved", n_prefill_servers=2)
    with pytest.raises(TypeError, match="n_servers"):
        simulate_disaggregated(SPLIT_CONFIG, SPLIT_WORKLOAD, n_servers=2)
    with pytest.raises(ValueError, match="prefill_config must be a ServingConfig"):
        simulate_disaggregated(SPLIT_CONFIG, SPLIT_WORKLOAD, prefill_config="h100")


def test_too_many_requests_are_refused_saying_why_there_is_a_limit():
    with pytest.raises(ValueError, match="n_requests.*the simulator runs each one in Python"):
        poisson_workload(1.0, 10**9)


def test_a_disaggregated_prefill_config_must_be_a_serving_config():
    config = ServingConfig("llama3-8b", "h100", 1, 8, 4096)
    with pytest.raises(ValueError, match="prefill_config must be a ServingConfig, got str"):
        simulate_disaggregated(config, poisson_workload(1.0, 5, 128, 16), n_prefill_servers=1, n_decode_servers=1,
                               prefill_config="llama3-8b")


def test_a_length_range_includes_both_ends_and_nothing_beyond():
    lengths = poisson_workload(1.0, 200, prompt_len=(100, 101), output_len=16).prompt_len
    assert sorted(set(lengths.tolist())) == [100, 101]


def test_a_disaggregated_run_needs_a_prefill_server_and_says_which_count():
    config = ServingConfig("llama3-8b", "h100", 1, 8, 4096)
    with pytest.raises(ValueError, match="n_prefill_servers must be a positive integer, got 0"):
        simulate_disaggregated(config, poisson_workload(1.0, 5, 128, 16), n_prefill_servers=0, n_decode_servers=1)


# --- issue 21, seed-71 survivors: arrivals, prefixes, a late joiner, percentiles --------------------------------------
def test_poisson_arrivals_have_a_mean_gap_of_one_over_the_rate_and_exponential_spread():
    # A Poisson process of rate r: independent exponential gaps of mean 1/r and standard deviation 1/r. Over 4,000 gaps
    # the sample mean is within 3 standard errors (1/r / sqrt(4000) = 1.6%) of 1/r: 5% holds for any seed.
    arrival = poisson_workload(4.0, 4000, prompt_len=16, output_len=2, seed=5).arrival_s
    gaps = np.diff(np.concatenate([[0.0], arrival]))
    assert np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(0.25, rel=0.05)
    assert gaps.std() == pytest.approx(0.25, rel=0.1)


def test_a_prompt_shorter_than_the_shared_prefix_reuses_all_but_its_last_token():
    workload = poisson_workload(1.0, 20, prompt_len=(50, 300), output_len=4, seed=2, shared_prefix_len=200,
                                shared_prefix_fraction=1.0)
    expected = np.minimum(200, workload.prompt_len - 1)  # the docstring's rule, every request a hit
    np.testing.assert_array_equal(workload.cached_len, expected)
    assert np.any(workload.prompt_len <= 200) and np.any(workload.prompt_len > 201)  # both cases drawn


def test_a_workload_stores_whole_float_cached_lengths_as_token_counts():
    cached = Workload([0.0], [10], [5], cached_len=[3.0]).cached_len
    assert cached.dtype == np.int64 and cached.tolist() == [3] and not cached.flags.writeable


def test_the_0th_and_100th_percentiles_are_the_extremes():
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 3), (0.0, 2000, 3), (0.5, 700, 3)]), "interleaved")
    assert result.ttft_percentile(0) == result.ttft_s.min() and result.ttft_percentile(100) == result.ttft_s.max()
    assert result.tpot_percentile(0) == result.tpot_s.min() and result.tpot_percentile(100) == result.tpot_s.max()
    for bad in (-1, 100.5):
        with pytest.raises(ValueError, match=r"\bq\b"):
            result.ttft_percentile(bad)


def test_a_request_joining_a_running_batch_decodes_at_its_own_context():
    # A (100-token prompt) decodes alone; B arrives mid-run. Reference timeline by hand from `inference` and
    # `serving`: A's first token after its prefill, then steps j = 1, 2, ... at batch 1 and context 100 + j (the
    # prompt and the tokens made so far); B starts when the first step ending at or after its arrival ends (after k
    # steps), prefills alone, then one step at batch 2 reads A's 101 + k tokens and B's own 101.
    arrival_b = 0.3
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 60), (arrival_b, 100, 2)]), "interleaved")
    t = prefill_latency("llama3-70b", "tpu-v5e", 16, 100)
    k = 0
    while t < arrival_b:
        k += 1
        t += decode_step_time("llama3-70b", "tpu-v5e", 16, 1, 100 + k).total_s
    assert 1 < k < 59  # B joins a batch that has already decoded
    assert result.start_s[1] == pytest.approx(t, rel=1e-9)
    first_b = t + prefill_latency("llama3-70b", "tpu-v5e", 16, 100)
    assert result.first_token_s[1] == pytest.approx(first_b, rel=1e-9)
    step = decode_step_time("llama3-70b", "tpu-v5e", 16, 2, (101 + k + 101) / 2).total_s
    assert result.finish_s[1] == pytest.approx(first_b + step, rel=1e-10)


def test_poisson_workload_prompts_default_to_1024_tokens():
    assert poisson_workload(1.0, 3).prompt_len.tolist() == [1024] * 3


@pytest.mark.parametrize("kwargs", [dict(shared_prefix_fraction=0.5), dict(shared_prefix_len=100)])
def test_prefix_sharing_needs_both_a_length_and_a_fraction(kwargs):
    # either one alone keeps its default (no prefix, or no request sharing it): nothing is cached
    assert not poisson_workload(1.0, 50, prompt_len=(200, 400), seed=4, **kwargs).cached_len.any()


@pytest.mark.parametrize("lengths", [["10"], np.array([10], dtype=object), [True]])
def test_a_workload_refuses_lengths_that_are_not_numbers_naming_the_column(lengths):
    with pytest.raises(ValueError, match=r"\bprompt_len\b.*whole numbers of tokens"):
        Workload([0.0], lengths, [5])


def test_a_workload_reads_whole_float32_lengths_as_token_counts():
    assert Workload([0.0], np.array([10.0], np.float32), [5]).prompt_len.tolist() == [10]


def test_an_empty_workload_is_refused_saying_it_needs_a_request():
    with pytest.raises(ValueError, match="at least one request"):
        Workload([], [], [])


def test_a_workload_of_more_requests_than_the_simulator_runs_says_why():
    n = 10**6 + 1
    with pytest.raises(ValueError, match=r"^the number of requests=1,000,001 is more than\b.*\bthe simulator runs each one "
                                         r"in Python$"):
        Workload(np.zeros(n), np.ones(n, np.int64), np.ones(n, np.int64))


def test_a_workload_stores_its_columns_as_read_only_arrays_of_seconds_and_token_counts():
    workload = Workload([0, 1], [10.0, 20.0], [5.0, 6.0])  # integer seconds, whole-float token counts
    assert workload.arrival_s.dtype == np.float64 and workload.arrival_s.tolist() == [0.0, 1.0]
    assert workload.output_len.dtype == np.int64 and workload.prompt_len.dtype == np.int64
    assert not any(column.flags.writeable for column in (workload.arrival_s, workload.prompt_len,
                                                         workload.output_len))


def test_a_length_past_any_context_window_is_refused_naming_its_column_and_size():
    with pytest.raises(ValueError, match=r"^output_len holds 2147483648 tokens"):
        Workload([0.0], [10], [2**31])


@pytest.mark.parametrize("prompt, output", [(2**30, 2**30), (2**31 - 1, 1)])
def test_a_request_longer_than_any_context_window_in_all_is_refused_naming_the_sum(prompt, output):
    # each length within 2**31 - 1, their sum past it
    with pytest.raises(ValueError, match=r"prompt_len \+ output_len must be at most 2147483647"):
        Workload([0.0], [prompt], [output])


def test_a_request_of_exactly_the_longest_context_is_accepted():
    assert Workload([0.0], [2**31 - 2], [1]).prompt_len.tolist() == [2**31 - 2]


def test_a_shared_prefix_of_one_token_is_cached():
    workload = poisson_workload(1.0, 10, prompt_len=100, seed=1, shared_prefix_len=1, shared_prefix_fraction=1.0)
    assert workload.cached_len.tolist() == [1] * 10


@pytest.mark.parametrize("cached", [["1"], np.array([1], dtype=object)])
def test_a_workload_refuses_cached_lengths_that_are_not_numbers_naming_them(cached):
    with pytest.raises(ValueError, match=r"\bcached_len\b.*whole numbers of tokens"):
        Workload([0.0], [10], [5], cached_len=cached)


# --- issue 21, third pass: every function of the simulator, against hand-worked timelines ----------------------------
def _step(batch, context, chip="tpu-v5e", n=16, model="llama3-70b", **dtypes):
    return decode_step_time(model, chip, n, batch, context, **dtypes).total_s


def _prefill(tokens, batch=1, n=16):
    return prefill_latency("llama3-70b", "tpu-v5e", n, tokens, batch=batch)


@pytest.mark.parametrize("name", ["n_chips", "max_batch", "max_context_len", "prefill_chunk_tokens"])
def test_serving_config_refuses_a_count_of_zero_naming_it(name):
    kwargs = dict(model="llama3-8b", chip="h100", n_chips=1, max_batch=8, max_context_len=4096)
    with pytest.raises(ValueError, match=rf"^{name} must be a positive integer"):
        ServingConfig(**{**kwargs, name: 0})


def test_serving_config_bounds_the_batch_it_tabulates_and_says_why():
    with pytest.raises(ValueError, match=r"\bmax_batch=65,537\b.*\btabulates a decode step for every batch size\b"):
        ServingConfig("llama3-8b", "h100", 1, 2**16 + 1, 256)


def test_serving_config_takes_an_mfu_of_one_and_refuses_zero():
    assert ServingConfig("llama3-8b", "h100", 1, 8, 4096, mfu=1).mfu == 1
    with pytest.raises(ValueError, match=r"\bmfu\b.*\bfraction of peak FLOP/s achieved\b"):
        ServingConfig("llama3-8b", "h100", 1, 8, 4096, mfu=0)


def test_serving_config_refuses_a_compute_dtype_the_chip_has_no_rate_for():
    with pytest.raises(ValueError, match=r"\bfp8\b"):  # TPU v5e has bf16 and int8 matrix units only
        ServingConfig("llama3-8b", "tpu-v5e", 1, 8, 4096, compute_dtype="fp8")


def test_serving_config_says_when_the_weights_alone_do_not_fit():
    # 70.6e9 parameters x 2 B = 141 GB of bf16 weights against one H100's 80 GB
    with pytest.raises(ValueError, match=r"\bbf16 weights of llama3-70b\b.*\b1 x h100\b.*\badd chips or quantize the "
                                         r"weights\b"):
        ServingConfig("llama3-70b", "h100", 1, 1, 1)


def test_serving_config_with_room_for_the_weights_but_not_one_cache_names_the_cache():
    # int8 weights (70.6 GB) fit one H100's 80 GB, a 100,000-token bf16 cache (32.8 GB) does not
    with pytest.raises(ValueError, match=r"\bmax_batch=1 does not fit in HBM\b.*\bint8 weights\b.*\bat most 0 KV caches "
                                         r"of 100000 tokens in bf16\b.*\blower max_batch or max_context_len\b"):
        ServingConfig("llama3-70b", "h100", 1, 1, 100_000, weight_dtype="int8")


def test_serving_config_fits_the_batch_to_hbm_with_the_weights_in_their_dtype():
    fit_bf16 = max_batch_size("llama3-8b", "h100", 1, 4096, "bf16", "bf16")
    fit_int8 = max_batch_size("llama3-8b", "h100", 1, 4096, "int8", "bf16")
    assert fit_int8 > fit_bf16
    assert ServingConfig("llama3-8b", "h100", 1, fit_bf16, 4096).max_batch == fit_bf16  # exactly full is accepted
    assert ServingConfig("llama3-8b", "h100", 1, fit_int8, 4096, weight_dtype="int8").max_batch == fit_int8
    with pytest.raises(ValueError, match=rf"\bat most {fit_bf16} KV caches of 4096 tokens in bf16\b"):
        ServingConfig("llama3-8b", "h100", 1, fit_bf16 + 1, 4096)


@pytest.mark.parametrize("engine", ["naive", "interleaved", "chunked"])
def test_a_lone_request_arriving_late_is_timed_from_its_arrival(engine):
    # Alone on an idle server: prefill at its arrival, then two decode steps at batch 1 over 101 and 102 tokens.
    result = simulate(FOUR_SLOTS, trace_workload([(0.5, 100, 3)]), engine)
    steps = _step(1, 101) + _step(1, 102)
    assert result.engine == engine and result.n_chips == 16
    assert result.arrival_s.tolist() == [0.5] and result.start_s.tolist() == [0.5]
    assert result.first_token_s[0] == pytest.approx(0.5 + _prefill(100), rel=1e-12)
    assert result.ttft_s[0] == pytest.approx(_prefill(100), rel=1e-9)
    assert result.finish_s[0] == pytest.approx(0.5 + _prefill(100) + steps, rel=1e-12)
    assert result.tpot_s[0] == pytest.approx(steps / 2, rel=1e-9)
    assert result.generated_tokens.tolist() == [3] and result.total_tokens == 3
    assert result.makespan_s == pytest.approx(_prefill(100) + steps, rel=1e-9)
    assert result.throughput_per_chip == pytest.approx(3 / (16 * (_prefill(100) + steps)), rel=1e-9)
    for column, kind in [("arrival_s", "f"), ("start_s", "f"), ("first_token_s", "f"), ("finish_s", "f"),
                         ("output_len", "i"), ("generated_tokens", "i"), ("ttft_s", "f"), ("tpot_s", "f")]:
        array = getattr(result, column)
        assert array.dtype.kind == kind and array.dtype.itemsize == 8 and not array.flags.writeable, column


@pytest.mark.parametrize("weight_dtype, kv_dtype", [("int8", "bf16"), ("bf16", "int8")])
def test_decode_steps_are_priced_in_the_configured_dtypes(weight_dtype, kv_dtype):
    config = ServingConfig("llama3-70b", "tpu-v5e", 16, 4, 4096, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    result = simulate(config, trace_workload([(0.0, 100, 3)]), "naive")
    dtypes = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    assert result.finish_s[0] - result.first_token_s[0] == pytest.approx(_step(1, 101, **dtypes) +
                                                                         _step(1, 102, **dtypes), rel=1e-9)


def test_simulate_defaults_to_the_interleaved_engine_and_refuses_an_unknown_one():
    assert simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)])).engine == "interleaved"
    with pytest.raises(ValueError, match=r"\bengine\b.*\bone of naive, interleaved, chunked, disaggregated\b"):
        simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)]), "batched")


def test_simulate_refuses_zero_servers_naming_the_count():
    with pytest.raises(ValueError, match=r"^n_servers must be a positive integer"):
        simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)]), "naive", n_servers=0)


def test_a_request_of_exactly_max_context_len_runs_and_one_more_token_is_refused():
    assert simulate(FOUR_SLOTS, trace_workload([(0.0, 4000, 96)]), "naive").total_tokens == 96
    with pytest.raises(ValueError, match=r"\bneeds 4097 tokens of context but max_context_len=4096\b.*\braise "
                                         r"max_context_len\b"):
        simulate(FOUR_SLOTS, trace_workload([(0.0, 4000, 97)]), "naive")


@pytest.mark.parametrize("n_servers", [1, 2, 3])
def test_servers_take_requests_in_turn(n_servers):
    # Two requests at once: one server prefills them one after the other; two or more take one each.
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2), (0.0, 100, 2)]), "interleaved", n_servers=n_servers)
    assert result.n_chips == 16 * n_servers
    second = _prefill(100) if n_servers == 1 else 0.0
    assert result.start_s.tolist() == [0.0, pytest.approx(second, rel=1e-12)]
    assert result.first_token_s[1] == pytest.approx(second + _prefill(100), rel=1e-12)


def test_naive_batches_prefill_padded_to_the_longest_prompt_then_decode_together():
    # 100 and 1,000 tokens at once: one prefill of batch 2 x 1,000 tokens, then one step at batch 2 over 101 + 1,001.
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2), (0.0, 1000, 2)]), "naive")
    first = _prefill(1000, batch=2)
    np.testing.assert_allclose(result.first_token_s, [first, first], rtol=1e-12)
    np.testing.assert_allclose(result.finish_s, first + _step(2, (101 + 1001) / 2), rtol=1e-12)
    assert result.total_tokens == 4 and result.generated_tokens.tolist() == [2, 2]


def test_naive_makes_a_later_request_wait_for_the_whole_running_batch():
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 3), (0.001, 100, 2)]), "naive")
    end_first = _prefill(100) + _step(1, 101) + _step(1, 102)
    assert result.start_s[1] == pytest.approx(end_first, rel=1e-12)
    assert result.first_token_s[1] == pytest.approx(end_first + _prefill(100), rel=1e-12)


def test_naive_admits_at_most_max_batch_and_the_rest_wait_for_the_batch():
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)] * 5), "naive")
    end_first = _prefill(100, batch=4) + _step(4, 101)
    assert result.start_s[:4].tolist() == [0.0] * 4
    assert result.start_s[4] == pytest.approx(end_first, rel=1e-12)
    assert result.finish_s[4] == pytest.approx(end_first + _prefill(100) + _step(1, 101), rel=1e-12)


def test_naive_prefills_only_the_new_tokens_after_the_slowest_cache_load():
    workload = Workload([0.0, 0.0], [1000, 600], [1, 1], cached_len=[600, 100], cache_load_s=[0.01, 0.03])
    result = simulate(FOUR_SLOTS, workload, "naive")
    # new tokens 400 and 500: padded to 500, after the longer load
    np.testing.assert_allclose(result.first_token_s, 0.03 + _prefill(500, batch=2), rtol=1e-12)
    np.testing.assert_allclose(result.finish_s, result.first_token_s)  # one-token outputs end at prefill


def test_interleaved_fills_every_slot_then_admits_the_fifth_when_the_batch_ends():
    # Four prefills back to back, a decode step at batch 4 over 101 tokens each ends every request (2 tokens).
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)] * 5), "interleaved")
    np.testing.assert_allclose(result.start_s[:4], [k * _prefill(100) for k in range(4)], rtol=1e-12, atol=0)
    end = 4 * _prefill(100) + _step(4, 101)
    np.testing.assert_allclose(result.finish_s[:4], end, rtol=1e-12)
    assert result.start_s[4] == pytest.approx(end, rel=1e-12)
    assert result.finish_s[4] == pytest.approx(end + _prefill(100) + _step(1, 101), rel=1e-12)


def test_chunked_prefill_skips_a_cached_prefix_but_reads_it():
    # 1,000-token prompt, 600 cached: one chunk of the 400 new tokens, reading the 600 cached ones.
    result = simulate(FOUR_SLOTS, Workload([0.0], [1000], [1], cached_len=[600]), "chunked")
    assert result.ttft_s[0] == pytest.approx(600 * LLAMA70_KV_PER_TOKEN / (16 * V5E_W) + _chunk(400), rel=1e-9)


def test_a_full_chunk_stops_before_the_next_prompt_and_reads_none_of_its_prefix():
    # A (1,000 new tokens) fills step 1's 512-token chunk; B (300 of its 600 cached) waits: step 1 reads no cache.
    # Step 2 carries A's last 488 (reading A's 512) and 24 of B (reading B's 300): A's first token ends it.
    result = simulate(FOUR_SLOTS, Workload([0.0, 0.0], [1000, 600], [1, 1], cached_len=[0, 300]), "chunked")
    per_token = LLAMA70_KV_PER_TOKEN / (16 * V5E_W)
    assert result.first_token_s[0] == pytest.approx(2 * _chunk(512) + (512 + 300) * per_token, rel=1e-9)


def test_a_chunk_joining_a_running_decode_carries_its_step():
    # A (100 tokens, 3 out) prefills in one chunk and decodes; B arrives during A's first decode step, so the next
    # step carries A's decode (batch 1, 102 cached tokens) and B's 100 prompt tokens together: A ends with it.
    weights = decode_step_time("llama3-70b", "tpu-v5e", 16, 1, 0)
    t1 = max(weights.weight_s, _chunk(100))
    t2 = t1 + _step(1, 101)
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 3), (t1 + 1e-6, 100, 2)]), "chunked")
    assert result.start_s[1] == pytest.approx(t2, rel=1e-12)
    mixed = 102 * LLAMA70_KV_PER_TOKEN / (16 * V5E_W) + max(weights.weight_s, weights.compute_s + _chunk(100))
    assert result.finish_s[0] == pytest.approx(t2 + mixed, rel=1e-9)
    assert result.first_token_s[1] == result.finish_s[0]


def test_windowed_decode_caps_each_sequence_at_the_window_as_it_crosses_it():
    # Window 512: one sequence starts past it (700), one crosses it during the run (500), one never reaches it.
    model = get_model("llama3-8b").with_(sliding_window=512, name="llama3-8b-local")
    config = ServingConfig(model, "h100", n_chips=1, max_batch=4, max_context_len=2048)
    result = simulate(config, trace_workload([(0.0, 100, 40), (0.0, 500, 40), (0.0, 700, 40)]), "naive")
    expected = sum(_step(3, sum(min(p + j, 512) for p in (100, 500, 700)) / 3, "h100", 1, model)
                   for j in range(1, 40))
    np.testing.assert_allclose(result.finish_s - result.first_token_s, expected, rtol=1e-9)


def test_queue_length_of_simultaneous_arrivals_counts_them_all_at_once():
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)] * 3), "interleaved")
    times, lengths = result.queue_length()
    assert lengths.tolist() == [2, 1, 0] and times[0] == 0.0
    assert result.max_queue_length == 2
    # two requests wait for one prefill, one for a second: (2 + 1) x one prefill over a span of two
    assert result.mean_queue_length == pytest.approx(1.5, rel=1e-12)


def test_a_lone_request_has_no_queue():
    result = simulate(FOUR_SLOTS, trace_workload([(0.2, 100, 2)]), "naive")
    assert result.max_queue_length == 0 and result.mean_queue_length == 0.0


def _disaggregated(workload, **kwargs):
    return simulate_disaggregated(FOUR_SLOTS, workload, **kwargs)


def test_a_disaggregated_request_decodes_once_its_cache_has_crossed():
    result = _disaggregated(trace_workload([(0.5, 100, 3)]), transfer_bandwidth=1e9)
    transfer = 100 * LLAMA70_KV_PER_TOKEN / 1e9
    assert result.start_s[0] == 0.5
    assert result.ttft_s[0] == pytest.approx(_prefill(100), rel=1e-9)
    assert result.finish_s[0] == pytest.approx(0.5 + _prefill(100) + transfer + _step(1, 101) + _step(1, 102),
                                               rel=1e-12)
    assert result.generated_tokens.tolist() == [3] and result.total_tokens == 3


def test_the_default_transfer_is_the_prefill_servers_data_centre_network():
    # 16 TPU v5e x 25 Gb/s of DCN each = 50 GB/s; a prefill server of 32 chips doubles it (and halves prefill).
    workload = trace_workload([(0.0, 100, 2)])
    wide = ServingConfig("llama3-70b", "tpu-v5e", n_chips=32, max_batch=4, max_context_len=4096)
    for prefill_config, n in [(None, 16), (wide, 32)]:
        result = _disaggregated(workload, prefill_config=prefill_config)
        assert result.first_token_s[0] == pytest.approx(_prefill(100, n=n), rel=1e-12)
        transfer = 100 * LLAMA70_KV_PER_TOKEN / (n * 25e9 / 8)
        assert result.finish_s[0] == pytest.approx(_prefill(100, n=n) + transfer + _step(1, 101), rel=1e-12)
    assert _disaggregated(workload, n_prefill_servers=2, n_decode_servers=3, prefill_config=wide).n_chips == \
        2 * 32 + 3 * 16


@pytest.mark.parametrize("n_prefill", [1, 2, 3])
def test_prefill_servers_take_requests_first_come_first_served(n_prefill):
    result = _disaggregated(trace_workload([(0.0, 100, 1), (0.0, 200, 1)]), n_prefill_servers=n_prefill)
    second = _prefill(100) if n_prefill == 1 else 0.0
    assert result.start_s.tolist() == [0.0, pytest.approx(second, rel=1e-12)]
    assert result.first_token_s[1] == pytest.approx(second + _prefill(200), rel=1e-12)
    assert result.first_token_s[0] == pytest.approx(_prefill(100), rel=1e-12)  # each request's own first token
    assert result.generated_tokens.tolist() == [1, 1] and result.total_tokens == 2


@pytest.mark.parametrize("n_decode, batch", [(1, 2), (2, 1), (3, 1)])
def test_decode_servers_batch_what_is_ready_together(n_decode, batch):
    # Two prefill servers finish both prompts at once; one decode server runs them as a batch of 2.
    result = _disaggregated(trace_workload([(0.0, 100, 2)] * 2), n_prefill_servers=2, n_decode_servers=n_decode,
                            transfer_bandwidth=1e9)
    ready = _prefill(100) + 100 * LLAMA70_KV_PER_TOKEN / 1e9
    np.testing.assert_allclose(result.finish_s, ready + _step(batch, 101), rtol=1e-12)


def test_decode_takes_requests_in_the_order_their_caches_arrive():
    # B arrives after A but its short prompt is ready first: it decodes alone before A's cache lands.
    result = _disaggregated(trace_workload([(0.0, 4000, 2), (0.001, 100, 2)]), n_prefill_servers=2,
                            transfer_bandwidth=1e9)
    ready_b = 0.001 + _prefill(100) + 100 * LLAMA70_KV_PER_TOKEN / 1e9
    assert result.finish_s[1] == pytest.approx(ready_b + _step(1, 101), rel=1e-12)


@pytest.mark.parametrize("kwargs, name", [(dict(n_decode_servers=0), "n_decode_servers"),
                                          (dict(transfer_bandwidth=0.0), "transfer_bandwidth")])
def test_simulate_disaggregated_refuses_a_zero_count_or_bandwidth_naming_it(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        _disaggregated(trace_workload([(0.0, 100, 2)]), **kwargs)


def test_a_prefill_server_of_another_model_is_refused():
    other = ServingConfig("llama3-8b", "tpu-v5e", n_chips=16, max_batch=4, max_context_len=4096)
    with pytest.raises(ValueError, match=r"\bprefill_config and config must serve the same model\b"):
        _disaggregated(trace_workload([(0.0, 100, 2)]), prefill_config=other)


def test_simulate_disaggregated_checks_its_config_and_workload():
    with pytest.raises(ValueError, match=r"\bconfig must be a ServingConfig\b"):
        simulate_disaggregated("llama3-70b", trace_workload([(0.0, 100, 2)]))
    with pytest.raises(ValueError, match=r"\bmax_context_len=4096\b"):
        _disaggregated(trace_workload([(0.0, 4096, 1)]))


@pytest.mark.parametrize("trace", [5, "abc", [], [(0.0, 10)], [(0.0, 10, 5, 1)], [0.0, 10, 5], None])
def test_trace_workload_refuses_what_is_not_a_list_of_triples(trace):
    with pytest.raises(ValueError, match=r"^trace must be a non-empty list of \(arrival_s, prompt_len, output_len\) "
                                         r"tuples\b"):
        trace_workload(trace)


def test_trace_workload_takes_lists_and_generators_and_names_a_bad_column():
    workload = trace_workload(row for row in [[0.0, 10, 5], (1.5, 20, 6)])
    assert workload.arrival_s.tolist() == [0.0, 1.5] and workload.prompt_len.tolist() == [10, 20]
    assert workload.output_len.tolist() == [5, 6] and workload.cached_len.tolist() == [0, 0]
    with pytest.raises(ValueError, match=r"^trace: output_len must be at least 1 token"):
        trace_workload([(0.0, 10, 0)])
    with pytest.raises(ValueError, match=r"^trace: arrival_s must hold numbers of seconds"):
        trace_workload([("soon", 10, 5)])


def test_a_length_range_of_one_value_gives_that_value():
    assert poisson_workload(1.0, 4, prompt_len=(7, 7)).prompt_len.tolist() == [7] * 4


@pytest.mark.parametrize("spec, message", [
    ((0, 5), r"^output_len bound must be a positive integer"),
    ((10, 5), r"^output_len=\(10, 5\): the low bound exceeds the high bound"),
    (0, r"^output_len must be a positive integer"),
    (lambda rng, n: [4] * (n + 1), r"^output_len: the function gave shape \(4,\), not one length per request \(3,\)"),
])
def test_a_bad_length_spec_is_refused_naming_the_column(spec, message):
    with pytest.raises(ValueError, match=message):
        poisson_workload(1.0, 3, output_len=spec)


def test_a_length_function_may_return_a_list():
    assert poisson_workload(1.0, 3, output_len=lambda rng, n: [9] * n).output_len.tolist() == [9] * 3


@pytest.mark.parametrize("kwargs, inner", [
    (dict(shared_prefix_fraction="half"), r"\(shared_prefix_fraction must be a number, got the string 'half'"),
    (dict(shared_prefix_fraction=float("nan")), r"\(shared_prefix_fraction must be a finite number\b"),
    (dict(rate_per_s="fast"), r"\(rate_per_s must be a number, got the string 'fast'"),
])
def test_poisson_workload_says_in_brackets_what_is_wrong_with_the_argument_it_names(kwargs, inner):
    # the outer sentence says what the argument is; the bracket, from the check, names it again and says why
    with pytest.raises(ValueError, match=inner):
        poisson_workload(**{"rate_per_s": 1.0, "n_requests": 4, **kwargs})


def test_one_token_outputs_give_a_nan_time_per_output_token_without_a_warning():
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 1), (0.1, 50, 1)]), "naive")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns on a percentile of nothing but NaN: the result does not ask it
        assert math.isnan(result.tpot_percentile(50))


def test_queue_length_counts_simultaneous_arrivals_after_the_first_moment_at_once():
    # A at 0; B and C together at 0.5, when the server is idle again: B starts at once, C after B's prefill.
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2), (0.5, 100, 2), (0.5, 100, 2)]), "interleaved")
    times, lengths = result.queue_length()
    assert times.tolist() == [0.0, 0.5, pytest.approx(0.5 + _prefill(100), rel=1e-12)]
    assert lengths.tolist() == [0, 1, 0]


def test_windowed_decode_after_a_sequence_leaves_reads_the_others_at_their_own_contexts():
    # Window 512; the 100-token prompt ends after 19 decode steps, the other two run 20 more at batch 2, their
    # contexts still counted from their own prompts (500 crosses the window at step 12, 700 is past it throughout).
    model = get_model("llama3-8b").with_(sliding_window=512, name="llama3-8b-local")
    config = ServingConfig(model, "h100", n_chips=1, max_batch=4, max_context_len=2048)
    requests = [(100, 20), (500, 40), (700, 40)]
    result = simulate(config, trace_workload([(0.0, p, o) for p, o in requests]), "naive")
    expected = 0.0
    for j in range(1, 40):
        active = [min(p + j, 512) for p, o in requests if o - 1 >= j]
        expected += _step(len(active), sum(active) / len(active), "h100", 1, model)
    assert result.finish_s[1] - result.first_token_s[1] == pytest.approx(expected, rel=1e-9)


def test_a_windowed_chunk_step_reads_the_running_sequences_capped_at_the_window():
    # Window 256: A (300 tokens, 3 out) decodes past the window; B (100 tokens) arrives during A's first decode step,
    # so the next step carries A's decode (reading 256, not 302) and B's chunk together.
    model = get_model("llama3-70b").with_(sliding_window=256, name="llama3-70b-w256")
    config = ServingConfig(model, "tpu-v5e", n_chips=16, max_batch=4, max_context_len=4096)
    weights = decode_step_time(model, "tpu-v5e", 16, 1, 0)
    t1 = max(weights.weight_s, _chunk(300))
    t2 = t1 + _step(1, 256, model=model)
    result = simulate(config, trace_workload([(0.0, 300, 3), (t1 + 1e-6, 100, 2)]), "chunked")
    mixed = 256 * LLAMA70_KV_PER_TOKEN / (16 * V5E_W) + max(weights.weight_s, weights.compute_s + _chunk(100))
    assert result.finish_s[0] == pytest.approx(t2 + mixed, rel=1e-9)


def test_room_for_a_one_token_cache_but_not_a_longer_one_is_a_cache_problem_not_a_weights_one():
    # A LLaMA-3-70B whose vocabulary is grown until one H100 has room, after its int8 weights, for between one and
    # two tokens of int8 cache: weights fit, a 2-token context does not, so the message is about the cache.
    base, hbm = get_model("llama3-70b"), get_chip("h100").hbm_capacity
    per_entry = param_bytes(base.with_(vocab_size=base.vocab_size + 1), "int8") - param_bytes(base, "int8")
    one_token = kv_cache_bytes(base, 1, 1, "int8")
    extra = int((hbm - param_bytes(base, "int8") - 1.5 * one_token) // per_entry)
    model = base.with_(vocab_size=base.vocab_size + extra, name="llama3-70b-wide-vocab")
    assert one_token <= hbm - param_bytes(model, "int8") < 2 * one_token  # the band this test needs
    with pytest.raises(ValueError, match=r"\bat most 0 KV caches of 2 tokens in int8\b"):
        ServingConfig(model, "h100", 1, 1, 2, weight_dtype="int8", kv_dtype="int8")


def test_a_disaggregated_int8_cache_crosses_in_half_the_time():
    config = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=4, max_context_len=4096, kv_dtype="int8")
    result = simulate_disaggregated(config, trace_workload([(0.0, 100, 2)]), transfer_bandwidth=1e9)
    transfer = 100 * LLAMA70_KV_PER_TOKEN / 2 / 1e9  # one byte per element instead of two
    step = decode_step_time("llama3-70b", "tpu-v5e", 16, 1, 101, kv_dtype="int8").total_s
    assert result.finish_s[0] == pytest.approx(_prefill(100) + transfer + step, rel=1e-12)
