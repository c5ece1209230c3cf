"""scaling_lib.simulator: the serving engines (naive, interleaved, chunked, disaggregated), their workloads and their
results. Expected values come from the closed-form step bounds of `inference` (another module than the one under
test) and hand-worked KV reads and timelines; prefix caching: cached prompt tokens skip prefill but not decode."""

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

from tests import for_each

CONFIG = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=32, max_context_len=8192)
FOUR_SLOTS = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=4, max_context_len=4096)
H100_CONFIG = ServingConfig("llama3-8b", "h100", n_chips=1, max_batch=8, max_context_len=4096)
V5E_W = 8.2e11  # B/s of HBM per TPU v5e
LLAMA70_KV_PER_TOKEN = 327_680  # bf16: 2 (K and V) x 80 layers x 8 KV heads x 128 x 2 B
PER_TOKEN = LLAMA70_KV_PER_TOKEN / (16 * V5E_W)  # reading one cached token of LLaMA-3-70B on 16 v5e


def _step(batch, context, chip="tpu-v5e", n=16, model="llama3-70b", **dtypes):
    return decode_step_time(model, chip, n, batch, context, **dtypes).total_s


def _prefill(tokens, batch=1, n=16):
    return prefill_latency("llama3-70b", "tpu-v5e", n, tokens, batch=batch)


def _chunk(tokens):
    return prefill_time("llama3-70b", "tpu-v5e", 16, tokens, 0.4)


# --- workloads: arrivals, lengths and shared prefixes -----------------------------------------------------------------
def test_poisson_workload_defaults_to_1024_prompt_and_256_output_tokens_and_seed_zero():
    assert poisson_workload(1.0, 3).prompt_len.tolist() == [1024] * 3
    assert poisson_workload(1.0, 3).output_len.tolist() == [256] * 3
    np.testing.assert_array_equal(poisson_workload(1.0, 3).arrival_s, poisson_workload(1.0, 3, seed=0).arrival_s)


def test_poisson_arrivals_have_a_mean_gap_of_one_over_the_rate_and_exponential_spread():
    # A Poisson process of rate r: independent exponential gaps of mean 1/r and standard deviation 1/r. Over 4,000 gaps
    # the sample mean is within 3 standard errors (1/r / sqrt(4000) = 1.6%) of 1/r: 5% holds for any seed.
    arrival = poisson_workload(4.0, 4000, prompt_len=16, output_len=2, seed=5).arrival_s
    gaps = np.diff(np.concatenate([[0.0], arrival]))
    assert np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(0.25, rel=0.05)
    assert gaps.std() == pytest.approx(0.25, rel=0.1)


@for_each([
    ((100, 101), {100, 101}),  # a range includes both ends and nothing beyond
    ((7, 7), {7}),
    (lambda rng, n: np.full(n, 77), {77}),  # a function of the generator and the count
    (lambda rng, n: [9] * n, {9}),  # which may return a list
], ids=["range", "range-of-one-value", "function", "function-giving-a-list"])
def test_a_length_is_a_number_a_range_or_a_function_of_the_generator(spec, lengths):
    drawn = poisson_workload(1.0, 200, prompt_len=spec, output_len=16).prompt_len
    assert set(drawn.tolist()) == lengths and len(drawn) == 200


def test_a_shared_prefix_caches_all_of_it_or_all_but_the_last_token_of_a_shorter_prompt():
    workload = poisson_workload(1.0, 20, prompt_len=(50, 300), output_len=4, seed=2, shared_prefix_len=200,
                                shared_prefix_fraction=1.0)
    expected = np.minimum(200, workload.prompt_len - 1)  # the docstring's rule, every request a hit
    np.testing.assert_array_equal(workload.cached_len, expected)
    assert np.any(workload.prompt_len <= 200) and np.any(workload.prompt_len > 201)  # both cases drawn
    one = poisson_workload(1.0, 10, prompt_len=100, seed=1, shared_prefix_len=1, shared_prefix_fraction=1.0)
    assert one.cached_len.tolist() == [1] * 10


@for_each([{}, dict(shared_prefix_len=0, shared_prefix_fraction=0.5),
                                    dict(shared_prefix_fraction=0.5), dict(shared_prefix_len=100)], ids=["default", "no-prefix", "fraction-alone", "length-alone"])
def test_prefix_sharing_needs_both_a_length_and_a_fraction_and_leaves_the_prompts_alone(kwargs):
    # either one alone keeps its default (no prefix, or no request sharing it): nothing is cached
    plain = poisson_workload(1.0, 50, prompt_len=(200, 400), seed=4)
    workload = poisson_workload(1.0, 50, prompt_len=(200, 400), seed=4, **kwargs)
    np.testing.assert_array_equal(workload.prompt_len, plain.prompt_len)
    assert not workload.cached_len.any()


def test_a_workload_reads_whole_numbers_of_tokens_from_ints_or_floats_and_its_columns_are_read_only():
    workload = Workload([0, 1], [10.0, 20.0], [5.0, 6.0], cached_len=[3.0, 1])  # integer seconds, whole-float counts
    assert workload.arrival_s.tolist() == [0.0, 1.0] and workload.prompt_len.tolist() == [10, 20]
    assert workload.output_len.tolist() == [5, 6] and workload.cached_len.tolist() == [3, 1]
    assert workload.arrival_s.dtype.kind == "f"
    assert all(column.dtype.kind == "i" and not column.flags.writeable
               for column in (workload.prompt_len, workload.output_len, workload.cached_len))
    assert not workload.arrival_s.flags.writeable
    assert Workload([0.0], np.array([10.0], np.float32), [5]).prompt_len.tolist() == [10]
    assert Workload([0.0], [2**31 - 2], [1]).prompt_len.tolist() == [2**31 - 2]  # exactly the longest context
    # a trace: a list or a generator of (arrival_s, prompt_len, output_len) rows
    trace = trace_workload(row for row in [[0.0, 10, 5], (1.5, 20, 6)])
    assert trace.arrival_s.tolist() == [0.0, 1.5] and trace.prompt_len.tolist() == [10, 20]
    assert trace.output_len.tolist() == [5, 6] and trace.cached_len.tolist() == [0, 0]


# --- the serving config: the batch it admits must fit -----------------------------------------------------------------
def test_serving_config_checks_the_batch_against_hbm_in_the_kv_dtype():
    # 16 v5e hold LLaMA-3-70B and 20 caches of 8,192 bf16 tokens, about twice as many in int8.
    fit_bf16 = max_batch_size("llama3-70b", "tpu-v5e", 16, 8192, "bf16", "bf16")
    ServingConfig("llama3-70b", "tpu-v5e", 16, fit_bf16 + 1, 8192, kv_dtype="int8")  # fits in int8
    with pytest.raises(ValueError, match="does not fit in HBM"):
        ServingConfig("llama3-70b", "tpu-v5e", 16, fit_bf16 + 1, 8192)


def test_serving_config_fits_the_batch_to_hbm_with_the_weights_in_their_dtype():
    fit_bf16 = max_batch_size("llama3-8b", "h100", 1, 4096, "bf16", "bf16")
    fit_int8 = max_batch_size("llama3-8b", "h100", 1, 4096, "int8", "bf16")
    assert fit_int8 > fit_bf16
    assert ServingConfig("llama3-8b", "h100", 1, fit_bf16, 4096).max_batch == fit_bf16  # exactly full is accepted
    assert ServingConfig("llama3-8b", "h100", 1, fit_int8, 4096, weight_dtype="int8").max_batch == fit_int8
    with pytest.raises(ValueError, match=rf"\bat most {fit_bf16} KV caches of 4096 tokens in bf16\b"):
        ServingConfig("llama3-8b", "h100", 1, fit_bf16 + 1, 4096)
    assert ServingConfig("llama3-8b", "h100", 1, 8, 4096, mfu=1).mfu == 1


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


# --- one request alone, and the engines' batches ----------------------------------------------------------------------
@for_each(["naive", "interleaved", "chunked"], ids=str)
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
    assert result.output_len.tolist() == [3] and result.generated_tokens.tolist() == [3] and result.total_tokens == 3
    assert result.makespan_s == pytest.approx(_prefill(100) + steps, rel=1e-9)
    assert result.throughput_per_chip == pytest.approx(3 / (16 * (_prefill(100) + steps)), rel=1e-9)
    for column, kind in [("arrival_s", "f"), ("start_s", "f"), ("first_token_s", "f"), ("finish_s", "f"),
                         ("output_len", "i"), ("generated_tokens", "i"), ("ttft_s", "f"), ("tpot_s", "f")]:
        array = getattr(result, column)
        assert array.dtype.kind == kind and not array.flags.writeable, column


@for_each([("int8", "bf16"), ("bf16", "int8")], ids=str)
def test_decode_steps_are_priced_in_the_configured_dtypes(weight_dtype, kv_dtype):
    config = ServingConfig("llama3-70b", "tpu-v5e", 16, 4, 4096, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    result = simulate(config, trace_workload([(0.0, 100, 3)]), "naive")
    dtypes = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    assert result.finish_s[0] - result.first_token_s[0] == pytest.approx(_step(1, 101, **dtypes) +
                                                                         _step(1, 102, **dtypes), rel=1e-9)


def test_one_token_outputs_have_no_time_per_output_token_and_no_warning():
    for engine in ("interleaved", "naive"):
        result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 1), (0.1, 50, 1)]), engine)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy warns on a percentile of nothing but NaN: the result does not ask it
            assert math.isnan(result.p50_tpot_s) and math.isnan(result.p99_tpot_s)
            assert math.isnan(result.tpot_percentile(50))


def test_the_0th_and_100th_percentiles_are_the_extremes():
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 3), (0.0, 2000, 3), (0.5, 700, 3)]), "interleaved")
    assert result.ttft_percentile(0) == result.ttft_s.min() and result.ttft_percentile(100) == result.ttft_s.max()
    assert result.tpot_percentile(0) == result.tpot_s.min() and result.tpot_percentile(100) == result.tpot_s.max()
    for bad in (-1, 100.5):
        with pytest.raises(ValueError, match=r"\bq\b"):
            result.ttft_percentile(bad)


def test_a_request_of_exactly_max_context_len_runs_and_one_more_token_is_refused():
    assert simulate(FOUR_SLOTS, trace_workload([(0.0, 4000, 96)]), "naive").total_tokens == 96
    with pytest.raises(ValueError, match=r"\bneeds 4097 tokens of context but max_context_len=4096\b.*\braise "
                                         r"max_context_len\b"):
        simulate(FOUR_SLOTS, trace_workload([(0.0, 4000, 97)]), "naive")


@for_each([1, 2, 3], ids=str)
def test_servers_take_requests_in_turn(n_servers):
    # Two requests at once: one server prefills them one after the other; two or more take one each.
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2), (0.0, 100, 2)]), "interleaved", n_servers=n_servers)
    assert result.n_chips == 16 * n_servers
    second = _prefill(100) if n_servers == 1 else 0.0
    assert result.start_s.tolist() == [0.0, pytest.approx(second, rel=1e-12)]
    assert result.first_token_s[1] == pytest.approx(second + _prefill(100), rel=1e-12)


def test_naive_admits_at_most_max_batch_and_makes_their_second_tokens_in_one_decode_step():
    # Five requests on four slots: the four prefill together, make their second tokens in one decode step at batch 4
    # over 101 tokens each; the fifth waits for the batch, then runs alone.
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)] * 5), "naive")
    end_first = _prefill(100, batch=4) + _step(4, 101)
    assert result.start_s[:4].tolist() == [0.0] * 4
    np.testing.assert_allclose(result.finish_s[:4] - result.first_token_s[:4], _step(4, 101), rtol=1e-9)
    assert result.generated_tokens.tolist() == [2] * 5
    assert result.start_s[4] == pytest.approx(end_first, rel=1e-12)
    assert result.finish_s[4] == pytest.approx(end_first + _prefill(100) + _step(1, 101), rel=1e-12)


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


def test_interleaved_fills_every_slot_then_admits_the_fifth_when_the_batch_ends():
    # Four prefills back to back, a decode step at batch 4 over 101 tokens each ends every request (2 tokens).
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)] * 5), "interleaved")
    np.testing.assert_allclose(result.start_s[:4], [k * _prefill(100) for k in range(4)], rtol=1e-12, atol=0)
    end = 4 * _prefill(100) + _step(4, 101)
    np.testing.assert_allclose(result.finish_s[:4], end, rtol=1e-12)
    assert result.start_s[4] == pytest.approx(end, rel=1e-12)
    assert result.finish_s[4] == pytest.approx(end + _prefill(100) + _step(1, 101), rel=1e-12)


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


# --- what a chunk reads: its own sequence's cached prefix, up to a window ---------------------------------------------
WINDOW_256 = ServingConfig(get_model("llama3-70b").with_(sliding_window=256, name="llama3-70b-w256"), "tpu-v5e",
                           n_chips=16, max_batch=4, max_context_len=4096)


@for_each([
    # 511 + 513 prompt tokens, chunks of 512: step 1 takes A's 511 and 1 of B's; step 2 the other 512 of B, reading
    # the 1 token of B already cached -- B's first token ends step 2.
    (FOUR_SLOTS, trace_workload([(0.0, 511, 1), (0.0, 513, 1)]), 1, (512, 512), 1),
    # A 256-token sliding window: the second chunk of a 1,024-token prompt reads 256 cached tokens, not 512.
    (WINDOW_256, trace_workload([(0.0, 1024, 1)]), 0, (512, 512), 256),
    # Three 600-token prompts at once: step 2 carries 88 tokens of A (reading A's 512 cached) and 424 of B (nothing
    # cached yet); step 3 carries 176 of B (reading its 424) and 336 of C: the reads add up over the sequences.
    (FOUR_SLOTS, trace_workload([(0.0, 600, 1)] * 3), 1, (512, 512, 512), 512 + 424),
    # 1,000-token prompt, 600 cached: one chunk of the 400 new tokens, reading the 600 cached ones.
    (FOUR_SLOTS, Workload([0.0], [1000], [1], cached_len=[600]), 0, (400,), 600),
    # A (1,000 new tokens) fills step 1's chunk; B (300 of its 600 cached) waits: step 1 reads no cache. Step 2
    # carries A's last 488 (reading A's 512) and 24 of B (reading B's 300): A's first token ends it.
    (FOUR_SLOTS, Workload([0.0, 0.0], [1000, 600], [1, 1], cached_len=[0, 300]), 0, (512, 512), 512 + 300),
], ids=["every-chunk-filled", "a-window-of-the-prefix", "each-prompt-its-own-prefix", "a-cached-prefix-skipped",
        "a-full-chunk-reads-no-later-prefix"])
def test_a_chunk_reads_the_cached_prefix_of_its_own_sequence_up_to_the_window(config, workload, index, chunks, read):
    result = simulate(config, workload, "chunked")
    assert result.first_token_s[index] == pytest.approx(sum(_chunk(c) for c in chunks) + read * PER_TOKEN, rel=1e-9)


@for_each([(FOUR_SLOTS, 100), (WINDOW_256, 300)], ids=["no-window", "window-256"])
def test_a_chunk_joining_a_running_decode_carries_its_step(config, prompt):
    # A (3 out) prefills in one chunk and decodes; B (100 tokens) arrives during A's first decode step, so the next
    # step carries A's decode (batch 1, A's cached tokens up to the window) and B's chunk together: A ends with it.
    model = get_model(config.model)
    window = model.sliding_window or math.inf
    weights = decode_step_time(model, "tpu-v5e", 16, 1, 0)
    t1 = max(weights.weight_s, _chunk(prompt))
    t2 = t1 + _step(1, min(prompt + 1, window), model=model)
    result = simulate(config, trace_workload([(0.0, prompt, 3), (t1 + 1e-6, 100, 2)]), "chunked")
    assert result.start_s[1] == pytest.approx(t2, rel=1e-12)
    mixed = min(prompt + 2, window) * PER_TOKEN + max(weights.weight_s, weights.compute_s + _chunk(100))
    assert result.finish_s[0] == pytest.approx(t2 + mixed, rel=1e-9)
    assert result.first_token_s[1] == result.finish_s[0]


# --- a sliding window caps each sequence's decode read at its own context ---------------------------------------------
@for_each([
    [(100, 600), (200, 600)],  # before any sequence reaches the window
    [(100, 40), (500, 40), (700, 40)],  # one starts past it, one crosses it during the run, one never reaches it
    # the 100-token prompt ends after 19 decode steps; the other two run 20 more at batch 2, their contexts still
    # counted from their own prompts (500 crosses the window at step 12, 700 is past it throughout)
    [(100, 20), (500, 40), (700, 40)],
], ids=["before-the-window", "crossing-the-window", "after-a-sequence-leaves"])
def test_windowed_decode_reads_each_sequence_at_its_own_context_capped_at_the_window(requests):
    model = get_model("llama3-8b").with_(sliding_window=512, name="llama3-8b-local")
    config = ServingConfig(model, "h100", n_chips=1, max_batch=4, max_context_len=2048)
    result = simulate(config, trace_workload([(0.0, p, o) for p, o in requests]), "naive")
    longest = max(o for _, o in requests)
    expected = 0.0
    for j in range(1, longest):
        active = [min(p + j, 512) for p, o in requests if o - 1 >= j]
        expected += _step(len(active), sum(active) / len(active), "h100", 1, model)
    last = [i for i, (_, o) in enumerate(requests) if o == longest]
    np.testing.assert_allclose((result.finish_s - result.first_token_s)[last], expected, rtol=1e-9)


# --- the queue --------------------------------------------------------------------------------------------------------
@for_each([
    ([(0.0, 4000, 2), (0.01, 4000, 2), (0.02, 4000, 2)], "interleaved", lambda: [0.0, 0.01, 0.02], [0, 1, 2, 1, 0]),
    ([(0.0, 100, 2)] * 3, "interleaved", lambda: [0.0], [2, 1, 0]),  # simultaneous arrivals count at once
    # A at 0; B and C together at 0.5, when the server is idle again: B starts at once, C after B's prefill
    ([(0.0, 100, 2), (0.5, 100, 2), (0.5, 100, 2)], "interleaved", lambda: [0.0, 0.5, 0.5 + _prefill(100)], [0, 1, 0]),
    ([(0.2, 100, 2)], "naive", lambda: [0.2], [0]),  # a lone request has no queue
], ids=["staggered", "simultaneous", "simultaneous-after-the-first-moment", "alone"])
def test_the_queue_length_counts_the_requests_waiting_to_start(trace, engine, times, lengths):
    result = simulate(FOUR_SLOTS, trace_workload(trace), engine)
    at, waiting = result.queue_length()
    assert waiting.tolist() == lengths and waiting.dtype.kind == "i"
    np.testing.assert_allclose(at[:len(times())], times(), rtol=1e-12)
    assert result.max_queue_length == max(lengths)


def test_the_mean_queue_length_is_its_time_average():
    result = simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)] * 3), "interleaved")
    # two requests wait for one prefill, one for a second: (2 + 1) x one prefill over a span of two
    assert result.mean_queue_length == pytest.approx(1.5, rel=1e-12)
    assert simulate(FOUR_SLOTS, trace_workload([(0.2, 100, 2)]), "naive").mean_queue_length == 0.0


# --- prefix caching under every engine --------------------------------------------------------------------------------
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


def test_a_cache_load_adds_to_a_lone_requests_ttft_exactly():
    config = ServingConfig("llama3-8b", "tpu-v5e", n_chips=8, max_batch=16, max_context_len=16384)
    plain = trace_workload([(0.0, 4000, 8)])
    loaded = Workload(plain.arrival_s, plain.prompt_len, plain.output_len, cached_len=[3000], cache_load_s=[0.05])
    for engine in ("interleaved", "naive", "chunked", "disaggregated"):
        a = simulate(config, Workload(plain.arrival_s, plain.prompt_len, plain.output_len, cached_len=[3000]), engine)
        b = simulate(config, loaded, engine)
        assert b.ttft_s[0] - a.ttft_s[0] == pytest.approx(0.05, rel=1e-9), engine


def test_naive_prefills_only_the_new_tokens_after_the_slowest_cache_load():
    workload = Workload([0.0, 0.0], [1000, 600], [1, 1], cached_len=[600, 100], cache_load_s=[0.01, 0.03])
    result = simulate(FOUR_SLOTS, workload, "naive")
    # new tokens 400 and 500: padded to 500, after the longer load
    np.testing.assert_allclose(result.first_token_s, 0.03 + _prefill(500, batch=2), rtol=1e-12)
    np.testing.assert_allclose(result.finish_s, result.first_token_s)  # one-token outputs end at prefill


# --- disaggregated serving: prefill servers, a cache transfer, decode servers -----------------------------------------
SPLIT_CONFIG = ServingConfig("llama3-8b", "h100", n_chips=1, max_batch=8, max_context_len=4096)
SPLIT_WORKLOAD = poisson_workload(4.0, 40, prompt_len=(100, 1000), output_len=(10, 100), seed=3)


def test_the_disaggregated_engine_named_in_simulate_is_one_prefill_and_one_decode_server():
    named = simulate(SPLIT_CONFIG, SPLIT_WORKLOAD, "disaggregated")
    direct = simulate_disaggregated(SPLIT_CONFIG, SPLIT_WORKLOAD, n_prefill_servers=1, n_decode_servers=1)
    assert named.engine == direct.engine == "disaggregated" and named.n_chips == direct.n_chips == 2
    np.testing.assert_array_equal(named.ttft_s, direct.ttft_s)
    np.testing.assert_array_equal(named.finish_s, direct.finish_s)
    assert simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)])).engine == "interleaved"  # the default engine
    # each function counts the chips of its own servers
    assert simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 3)]), "disaggregated").n_chips == 2 * 16
    assert simulate(SPLIT_CONFIG, SPLIT_WORKLOAD, "chunked", n_servers=3).n_chips == 3
    assert simulate_disaggregated(SPLIT_CONFIG, SPLIT_WORKLOAD, n_prefill_servers=2, n_decode_servers=3).n_chips == 5


def _disaggregated(workload, **kwargs):
    return simulate_disaggregated(FOUR_SLOTS, workload, **kwargs)


@for_each([("bf16", 2), ("int8", 1)], ids=str)
def test_a_disaggregated_request_decodes_once_its_cache_has_crossed(kv_dtype, bytes_per_element):
    config = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=4, max_context_len=4096, kv_dtype=kv_dtype)
    result = simulate_disaggregated(config, trace_workload([(0.5, 100, 3)]), transfer_bandwidth=1e9)
    transfer = 100 * LLAMA70_KV_PER_TOKEN / 2 * bytes_per_element / 1e9  # an int8 cache crosses in half the time
    steps = sum(decode_step_time("llama3-70b", "tpu-v5e", 16, 1, c, kv_dtype=kv_dtype).total_s for c in (101, 102))
    assert result.start_s[0] == 0.5
    assert result.ttft_s[0] == pytest.approx(_prefill(100), rel=1e-9)
    assert result.finish_s[0] == pytest.approx(0.5 + _prefill(100) + transfer + steps, rel=1e-12)
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


@for_each([1, 2, 3], ids=str)
def test_prefill_servers_take_requests_first_come_first_served(n_prefill):
    result = _disaggregated(trace_workload([(0.0, 100, 1), (0.0, 200, 1)]), n_prefill_servers=n_prefill)
    second = _prefill(100) if n_prefill == 1 else 0.0
    assert result.start_s.tolist() == [0.0, pytest.approx(second, rel=1e-12)]
    assert result.first_token_s[1] == pytest.approx(second + _prefill(200), rel=1e-12)
    assert result.first_token_s[0] == pytest.approx(_prefill(100), rel=1e-12)  # each request's own first token
    assert result.generated_tokens.tolist() == [1, 1] and result.total_tokens == 2


@for_each([(1, 2), (2, 1), (3, 1)], ids=str)
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


# --- bad input: a ValueError naming the argument and the fix ----------------------------------------------------------
OTHER_ENGINES_ARGUMENTS = [
    (lambda: simulate(H100_CONFIG, SPLIT_WORKLOAD, "interleaved", n_prefill_servers=2), TypeError,
     "n_prefill_servers"),  # simulate_disaggregated's arguments
    (lambda: simulate(H100_CONFIG, SPLIT_WORKLOAD, "chunked", n_decode_servers=2), TypeError, "n_decode_servers"),
    (lambda: simulate(H100_CONFIG, SPLIT_WORKLOAD, "naive", transfer_bandwidth=1e9), TypeError, "transfer_bandwidth"),
    (lambda: simulate(H100_CONFIG, SPLIT_WORKLOAD, "interleaved", prefill_config=H100_CONFIG), TypeError,
     "prefill_config"),
    (lambda: simulate_disaggregated(SPLIT_CONFIG, SPLIT_WORKLOAD, n_servers=2), TypeError, "n_servers"),
    (lambda: simulate(H100_CONFIG, SPLIT_WORKLOAD, "disaggregated", n_servers=3), ValueError,
     "n_servers applies to the co-located engines .* the 'disaggregated' engine takes n_prefill_servers and "
     "n_decode_servers.*simulate_disaggregated"),
]


@for_each(OTHER_ENGINES_ARGUMENTS, ids=["n_prefill_servers", "n_decode_servers", "transfer_bandwidth", "prefill_config",
                              "n_servers-to-disaggregated", "n_servers-of-disaggregated"])
def test_each_function_refuses_the_other_engines_arguments_and_names_the_right_call(call, error, words):
    with pytest.raises(error, match=words):
        call()


def _poisson(**kwargs):
    return poisson_workload(**{"rate_per_s": 1.0, "n_requests": 3, **kwargs})


TRIPLES = r"^trace must be a non-empty list of \(arrival_s, prompt_len, output_len\) tuples\b"
BAD_INPUT = {
    # workloads
    "cached-the-whole-prompt": (lambda: Workload([0.0], [10], [5], cached_len=[10]),
                                r"cached_len must lie in \[0, prompt_len - 1\]"),
    "cached-a-fraction": (lambda: Workload([0.0], [10], [5], cached_len=[0.5]),
                          "cached_len must hold whole numbers of tokens"),
    **{f"cached-{name}": (lambda value=value: Workload([0.0], [10], [5], cached_len=value),
                          r"\bcached_len\b.*whole numbers of tokens")
       for name, value in (("a-string", ["1"]), ("objects", np.array([1], dtype=object)))},
    "cache-load-negative": (lambda: Workload([0.0], [10], [5], cache_load_s=[-1.0]), "cache_load_s"),
    "arrival-negative": (lambda: Workload([-1.0], [10], [5]), "arrival_s must be finite and non-negative"),
    "columns-of-different-lengths": (lambda: Workload([0.0, 1.0], [10], [5]),
                                     "arrival_s, prompt_len and output_len must be 1-D of one length"),
    "no-request": (lambda: Workload([], [], []), "at least one request"),
    **{f"prompt-{name}": (lambda value=value: Workload([0.0], value, [5]), r"\bprompt_len\b.*whole numbers of tokens")
       for name, value in (("a-string", ["10"]), ("objects", np.array([10], dtype=object)), ("a-bool", [True]))},
    "output-beyond-int64": (lambda: Workload([0.0], [10], [2**63]), "output_len"),
    "lengths-wrapping-int64": (lambda: Workload([0.0], [2**62], [2**62]), "prompt_len"),  # each fits, their sum not
    "output-past-any-context": (lambda: Workload([0.0], [10], [2**31]), r"^output_len holds 2147483648 tokens"),
    # each length within 2**31 - 1, their sum past it
    **{f"request-past-any-context-{prompt}": (lambda prompt=prompt, output=output: Workload([0.0], [prompt], [output]),
                                              r"prompt_len \+ output_len must be at most 2147483647")
       for prompt, output in ((2**30, 2**30), (2**31 - 1, 1))},
    "more-requests-than-the-simulator-runs": (lambda: Workload(np.zeros(10**6 + 1), np.ones(10**6 + 1, np.int64),
                                                               np.ones(10**6 + 1, np.int64)),
                                              r"^the number of requests=1,000,001 is more than\b.*\bthe simulator runs "
                                              r"each one in Python$"),
    "too-many-poisson-requests": (lambda: poisson_workload(1.0, 10**9),
                                  "n_requests.*the simulator runs each one in Python"),
    "shared-prefix-fraction-above-one": (lambda: poisson_workload(1.0, 10, shared_prefix_fraction=1.5),
                                         "shared_prefix_fraction must be a fraction"),
    # the outer sentence says what the argument is; the bracket, from the check, names it again and says why
    "shared-prefix-fraction-a-word": (lambda: _poisson(shared_prefix_fraction="half"),
                                      r"\(shared_prefix_fraction must be a number, got the string 'half'"),
    "shared-prefix-fraction-nan": (lambda: _poisson(shared_prefix_fraction=float("nan")),
                                   r"\(shared_prefix_fraction must be a finite number\b"),
    "rate-a-word": (lambda: _poisson(rate_per_s="fast"), r"\(rate_per_s must be a number, got the string 'fast'"),
    "length-function-of-the-wrong-shape": (lambda: _poisson(prompt_len=lambda rng, n: np.ones(2, int)),
                                           r"prompt_len: the function gave shape \(2,\)"),
    "length-function-one-too-many": (lambda: _poisson(output_len=lambda rng, n: [4] * (n + 1)),
                                     r"^output_len: the function gave shape \(4,\), not one length per request \(3,\)"),
    "length-bound-zero": (lambda: _poisson(output_len=(0, 5)), r"^output_len bound must be a positive integer"),
    "length-bounds-reversed": (lambda: _poisson(output_len=(10, 5)),
                               r"^output_len=\(10, 5\): the low bound exceeds the high bound"),
    "length-zero": (lambda: _poisson(output_len=0), r"^output_len must be a positive integer"),
    **{f"trace-{name}": (lambda trace=trace: trace_workload(trace), TRIPLES)
       for name, trace in (("a-number", 5), ("a-string", "abc"), ("empty", []), ("pairs", [(0.0, 10)]),
                           ("quadruples", [(0.0, 10, 5, 1)]), ("a-flat-list", [0.0, 10, 5]), ("none", None))},
    "trace-no-output": (lambda: trace_workload([(0.0, 10, 0)]), r"^trace: output_len must be at least 1 token"),
    "trace-arrival-a-word": (lambda: trace_workload([("soon", 10, 5)]),
                             r"^trace: arrival_s must hold numbers of seconds"),
    # the serving config
    "mfu-above-one": (lambda: ServingConfig("llama3-70b", "tpu-v5e", 16, 8, 8192, mfu=2),
                      r"mfu must be in \(0, 1\], got 2: it is the fraction of peak FLOP/s achieved"),
    "mfu-zero": (lambda: ServingConfig("llama3-8b", "h100", 1, 8, 4096, mfu=0),
                 r"\bmfu\b.*\bfraction of peak FLOP/s achieved\b"),
    **{f"{name}-zero": (lambda name=name: ServingConfig(**{**dict(model="llama3-8b", chip="h100", n_chips=1,
                                                                  max_batch=8, max_context_len=4096), name: 0}),
                        rf"^{name} must be a positive integer")
       for name in ("n_chips", "max_batch", "max_context_len", "prefill_chunk_tokens")},
    "batch-too-large-to-tabulate": (lambda: ServingConfig("llama3-8b", "h100", 1, 2**16 + 1, 256),
                                    r"\bmax_batch=65,537\b.*\btabulates a decode step for every batch size\b"),
    # TPU v5e has bf16 and int8 matrix units only
    "no-rate-for-the-compute-dtype": (lambda: ServingConfig("llama3-8b", "tpu-v5e", 1, 8, 4096, compute_dtype="fp8"),
                                      r"\bfp8\b"),
    # 70.6e9 parameters x 2 B = 141 GB of bf16 weights against one H100's 80 GB
    "weights-alone-do-not-fit": (lambda: ServingConfig("llama3-70b", "h100", 1, 1, 1),
                                 r"\bbf16 weights of llama3-70b\b.*\b1 x h100\b.*\badd chips or quantize the "
                                 r"weights\b"),
    # int8 weights (70.6 GB) fit one H100's 80 GB, a 100,000-token bf16 cache (32.8 GB) does not
    "room-for-the-weights-not-one-cache": (lambda: ServingConfig("llama3-70b", "h100", 1, 1, 100_000,
                                                                 weight_dtype="int8"),
                                           r"\bmax_batch=1 does not fit in HBM\b.*\bint8 weights\b.*\bat most 0 KV "
                                           r"caches of 100000 tokens in bf16\b.*\blower max_batch or max_context_len\b"),
    # simulate and simulate_disaggregated
    "workload-not-a-workload": (lambda: simulate(FOUR_SLOTS, [(0.0, 10, 5)], "naive"), "workload must be a Workload"),
    "config-not-a-serving-config": (lambda: simulate({}, trace_workload([(0.0, 10, 2)])),
                                    "config must be a ServingConfig, got dict"),
    "engine-unknown": (lambda: simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)]), "batched"),
                       r"\bengine\b.*\bone of naive, interleaved, chunked, disaggregated\b"),
    "no-servers": (lambda: simulate(FOUR_SLOTS, trace_workload([(0.0, 100, 2)]), "naive", n_servers=0),
                   r"^n_servers must be a positive integer"),
    "no-prefill-servers": (lambda: _disaggregated(trace_workload([(0.0, 100, 2)]), n_prefill_servers=0),
                           "n_prefill_servers must be a positive integer, got 0"),
    "no-decode-servers": (lambda: _disaggregated(trace_workload([(0.0, 100, 2)]), n_decode_servers=0),
                          "^n_decode_servers must be"),
    "no-transfer-bandwidth": (lambda: _disaggregated(trace_workload([(0.0, 100, 2)]), transfer_bandwidth=0.0),
                              "^transfer_bandwidth must be"),
    "prefill-config-a-name": (lambda: _disaggregated(trace_workload([(0.0, 100, 2)]), prefill_config="llama3-8b"),
                              "prefill_config must be a ServingConfig, got str"),
    "prefill-server-of-another-model": (lambda: _disaggregated(trace_workload([(0.0, 100, 2)]),
                                                               prefill_config=ServingConfig("llama3-8b", "tpu-v5e", 16, 4,
                                                                                            4096)),
                                        r"\bprefill_config and config must serve the same model\b"),
    "disaggregated-config-a-name": (lambda: simulate_disaggregated("llama3-70b", trace_workload([(0.0, 100, 2)])),
                                    r"\bconfig must be a ServingConfig\b"),
    "disaggregated-request-too-long": (lambda: _disaggregated(trace_workload([(0.0, 4096, 1)])),
                                       r"\bmax_context_len=4096\b"),
}


@for_each(BAD_INPUT.values(), ids=list(BAD_INPUT))
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
