"""scaling_lib.simulator: the serving engines (naive, interleaved, chunked, disaggregated), their workloads and their
results. Expected values come from the closed-form step bounds of `inference` (another module than the one under
test) and hand-worked KV reads; prefix caching: cached prompt tokens skip prefill but not decode."""

import math

import numpy as np
import pytest

from scaling_lib.inference import decode_step_time, prefill_time
from scaling_lib.memory import max_batch_size
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
    with pytest.raises(ValueError, match=r"number of requests.*the simulator runs each one in Python"):
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
