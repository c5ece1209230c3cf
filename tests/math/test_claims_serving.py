"""Claims V1-V6 of book/claims.md (serving, speculative decoding, MoE, quantization) and the serving simulator.

Every number a source publishes, and every scenario a claim sets up (the ch. 8 server, the drafter, T4's deployment),
is read from the claims ledger; the literals left are hand derivations (marked), each an independent oracle.
"""

import math

import numpy as np
import pytest

from scaling_lib.book.claims import REL, claim, evaluate, published, published_range
from scaling_lib.book.claims.serving import (V2_SOURCE_INPUTS, V2_SOURCE_SERVER, V3_CONFIG, V3_MIX, v3_simulate,
                                             V4_ACCEPTANCE, V4_DRAFT_PARAMS, V4_TARGET_PARAMS)
from scaling_lib.book.claims.step_time import T4_DEPLOYMENT
from scaling_lib.collectives import latency_bound_bytes
from scaling_lib.flops import forward_flops, matmul_params
from scaling_lib.hardware import get_chip
from scaling_lib.inference import decode_step_time, full_hbm_step_time, prefill_time, step_time_bound
from scaling_lib.memory import kv_bytes_per_token, kv_cache_bytes, max_batch_size, param_bytes
from scaling_lib.models import active_param_count, get_model, param_count
from scaling_lib.moe import as_moe, expected_experts_touched, expert_sharded_memory, moe_weights, routing_all_to_all
from scaling_lib.quantization import quantization_table, step_ratio_grid
from scaling_lib.roofline import critical_batch_size
from scaling_lib.roofline import moe_critical_batch_size as moe_critical_batch
from scaling_lib.serving import (kv_transfer_bytes, kv_transfer_time, prefill_latency, prefill_to_decode_ratio,
                                 server_ratio)
from scaling_lib.simulator import (ENGINES, ServingConfig, poisson_workload, simulate, simulate_disaggregated,
                                   trace_workload)
from scaling_lib.speculative import (best_lookahead, best_roofline_lookahead, draft_cost_ratio,
                                     expected_tokens_per_step, roofline_speedup, roofline_step, speedup)

from tests import for_each

# One LLaMA-3-70B server of 16 TPU v5e, as in the Scaling Book's ch. 8 example; 32 decode slots of 8,192 tokens.
CONFIG, MIXED = V3_CONFIG, V3_MIX


def _run(engine, workload, **overrides):
    """Claim V3's scenario: every engine on the same 48 chips (3 servers, or 2 prefill + 1 decode), or `overrides`."""
    return v3_simulate(engine, workload, **overrides)


# --- V1, V2: prefill and the prefill-to-decode server ratio ---------------------------------------------------

def test_v1_prefill_llama3_70b_8k_tokens_v5e_and_ironwood():
    v5e = prefill_latency("llama3-70b", "tpu-v5e", 16, 8192, mfu=0.4)
    ironwood = prefill_latency("llama3-70b", "ironwood", 8, 8192, mfu=0.4)
    assert v5e == pytest.approx(published("V1 16 v5e"), rel=REL)
    assert ironwood == pytest.approx(published("V1 8 Ironwood"), rel=REL)
    # At 8k tokens the weight-read floor is far below the FLOP time: this is inference.prefill_time itself.
    assert v5e == prefill_time("llama3-70b", "tpu-v5e", 16, 8192, 0.4)
    # A one-token "prefill" is a decode step in disguise: never faster than reading the weights once.
    floor = param_bytes("llama3-70b") / (16 * get_chip("tpu-v5e").hbm_bandwidth)
    assert prefill_latency("llama3-70b", "tpu-v5e", 16, 1, mfu=0.4) == pytest.approx(floor)


def test_v1_holds_whether_prefill_counts_all_parameters_by_default_or_p_mm_on_request():
    # The book's count (chapter 2) is P_mm: the input embedding is a lookup. The oracle is flops.forward_flops.
    chip = get_chip("h100")
    for model in ("llama3-8b", "llama3-70b"):
        matmul = forward_flops(model, 2048).matmul / (0.4 * chip.peak_flops("bf16"))
        assert prefill_time(model, chip, 1, 2048, 0.4, params="matmul") == pytest.approx(matmul, rel=1e-12)
    # P / P_mm = 1 + V D / P_mm: 7% for LLaMA-3-8B (hand derivation from its shapes), 1.5% for LLaMA-3-70B.
    llama = get_model("llama3-8b")
    ratio = prefill_time(llama, chip, 1, 2048, 0.4) / prefill_time(llama, chip, 1, 2048, 0.4, params="matmul")
    assert ratio == pytest.approx(1 + llama.vocab_size * llama.d_model / matmul_params(llama), rel=1e-12)
    assert 1.06 < ratio < 1.08
    # Claim V1 holds under either count; the sources' 2 P T is the default because it is what they compute.
    for chip_name, n_chips, key in (("tpu-v5e", 16, "V1 16 v5e"), ("ironwood", 8, "V1 8 Ironwood")):
        for params in ("all", "matmul"):
            assert prefill_time("llama3-70b", chip_name, n_chips, 8192, 0.4, params=params) == pytest.approx(
                published(key), rel=REL)


def test_v2_disaggregation_three_prefill_servers_per_decode_server():
    # The source's inputs: 0.91 s prefill, 19 ms steps at batch 32, 512 generated tokens.
    assert prefill_to_decode_ratio(**V2_SOURCE_INPUTS) == pytest.approx(published("V2 source inputs"), rel=REL)
    # From the model instead of the source's rounded inputs, by hand: the step at the mean context 8,192 + 256 reads
    # 2 x 70,552,387,584 B of weights and 32 x 8,448 x 327,680 B of KV over 16 x 8.2e11 B/s = 10.7552 + 6.7518 =
    # 17.5070 ms (the FLOPs, 2 x 32 x 70.55e9 / (16 x 1.97e14) = 1.43 ms, stay below the weight read); prefill is
    # 2 x 70.55e9 x 8,192 / (16 x 1.97e14 x 0.4) = 0.91682 s. Ratio 0.91682 x 32 / (0.0175070 x 512) = 3.2731:
    # a little above the source's 3, whose 19 ms step is slower than this bound.
    ratio = server_ratio("llama3-70b", "tpu-v5e", prompt_len=8192, output_len=512, decode_batch=32,
                         n_prefill_chips=16, n_decode_chips=16)
    assert ratio.prefill_s == pytest.approx(published("V1 16 v5e"), rel=REL)
    assert ratio.prefill_s == pytest.approx(0.91682, rel=1e-4)
    assert ratio.decode_step_s == pytest.approx(17.5070e-3, rel=1e-4)
    assert ratio.prefill_per_decode == pytest.approx(3.2731, rel=1e-4)
    # Longer generations need fewer prefill servers per decode server.
    longer = server_ratio("llama3-70b", "tpu-v5e", 8192, 1024, 32, 16, 16)
    assert longer.prefill_per_decode < ratio.prefill_per_decode


def test_v2_source_19_ms_step_is_the_full_hbm_step_not_the_batch_32_step():
    # The source pairs "19 ms" with batch 32. On its own batch-32 server (int8 weights and KV, 4x2 v5e, 8k tokens)
    # 19 ms is the step at the largest batch that fits, where each chip streams (nearly) all of its HBM.
    source_step = V2_SOURCE_INPUTS["decode_step_s"]
    full = max_batch_size(**V2_SOURCE_SERVER)
    at_full = decode_step_time(**V2_SOURCE_SERVER, batch=full).total_s
    # Two independent routes to the same step: the model's bytes at that batch, and the chip's HBM size / bandwidth
    # (Scaling Book ch. 8: "fill HBM and the step is HBM / bandwidth"). The batch is a floor, so less than one
    # sequence's cache is left unread.
    one_cache = decode_step_time(**V2_SOURCE_SERVER, batch=1).kv_s
    assert full_hbm_step_time("tpu-v5e") - one_cache < at_full <= full_hbm_step_time("tpu-v5e")
    assert at_full == pytest.approx(source_step, rel=REL)
    assert evaluate(claim("V2 19 ms is a full-HBM step")).holds
    # At batch 32 the same server is about 17 ms. Hand derivation: (70.55e9 int8 weights + 32 x 8,192 tokens x
    # 2 x 80 layers x 8 KV heads x 128 x 1 B) / (8 chips x 8.2e11 B/s) = 17.3 ms.
    at_32 = decode_step_time(**V2_SOURCE_SERVER, batch=32).total_s
    assert at_32 == pytest.approx((70.55e9 + 32 * 8192 * 2 * 80 * 8 * 128) / (8 * 8.2e11), rel=1e-3)
    assert at_32 < 0.92 * source_step
    # With the consistent step the ratio is a little above the source's 3, still "about 3".
    consistent = prefill_to_decode_ratio(**{**V2_SOURCE_INPUTS, "decode_step_s": at_32})
    low, high = published_range("V2 from the model")
    assert published("V2 source inputs") < consistent < high and low < consistent


def test_v2_ratio_sized_pools_keep_up_where_a_lopsided_split_does_not():
    # 8k prompts, 512 tokens out, arriving at 80% of what 3 prefill servers can take: P = 3, G = 1 keeps the
    # decode queue short; P = 1, G = 3 (same chips) lets the prefill queue grow without bound.
    t_prefill = prefill_latency("llama3-70b", "tpu-v5e", 16, 8000)
    workload = poisson_workload(0.8 * 3 / t_prefill, 150, prompt_len=8000, output_len=192, seed=3)
    balanced = _run("disaggregated", workload, n_prefill_servers=3, n_decode_servers=1)
    lopsided = _run("disaggregated", workload, n_prefill_servers=1, n_decode_servers=3)
    assert balanced.p99_ttft_s < 0.2 * lopsided.p99_ttft_s
    assert balanced.max_queue_length < lopsided.max_queue_length


def test_kv_transfer_is_the_prompt_cache_over_the_link():
    assert kv_transfer_bytes("llama3-70b", 8192) == kv_cache_bytes("llama3-70b", 8192)
    fast = kv_transfer_time("llama3-70b", 8192, "tpu-v5e", 16)
    # Separate slices talk over the DCN: a v5e host has 2 x 100 Gb/s of NIC for 8 chips, 25 Gb/s = 3.125e9 B/s each.
    assert fast == pytest.approx(kv_cache_bytes("llama3-70b", 8192) / (16 * 3.125e9))
    # Within one slice the cache could move over ICI (one 45 GB/s link per chip), 14.4x faster.
    same_slice = kv_transfer_time("llama3-70b", 8192, "tpu-v5e", 16, network="ici")
    assert same_slice == pytest.approx(kv_cache_bytes("llama3-70b", 8192) / (16 * 4.5e10))
    assert fast / same_slice == pytest.approx(14.4)
    assert kv_transfer_time("llama3-70b", 8192, "tpu-v5e", 16, bandwidth=1e9) > 40 * fast
    # In the simulator a slow link delays decoding, not the first token (prefill makes it).
    workload = poisson_workload(0.5, 40, **MIXED, seed=4)
    quick = _run("disaggregated", workload)
    slow = _run("disaggregated", workload, transfer_bandwidth=1e9)
    np.testing.assert_allclose(slow.ttft_s, quick.ttft_s)
    assert np.all(slow.finish_s >= quick.finish_s) and slow.p50_tpot_s > quick.p50_tpot_s


# --- V3: the simulator and the engine designs -----------------------------------------------------------------

@for_each(ENGINES, ids=str)
def test_simulator_conserves_requests_and_tokens_and_repeats_itself_for_a_seed(engine):
    a = _run(engine, poisson_workload(2.0, 200, **MIXED, seed=7))
    b = _run(engine, poisson_workload(2.0, 200, **MIXED, seed=7))
    for name in ("arrival_s", "start_s", "first_token_s", "finish_s", "ttft_s", "tpot_s"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    other = poisson_workload(2.0, 200, **MIXED, seed=8)
    assert not np.array_equal(other.arrival_s, poisson_workload(2.0, 200, **MIXED, seed=7).arrival_s)
    workload = poisson_workload(3.0, 300, prompt_len=(1, 3000), output_len=(1, 400), seed=11)
    result = _run(engine, workload)
    assert np.all(np.isfinite(result.finish_s)) and np.all(np.isfinite(result.first_token_s))
    np.testing.assert_array_equal(result.generated_tokens, workload.output_len)  # per request
    assert result.total_tokens == int(workload.output_len.sum())  # counted step by step
    assert np.all(result.start_s >= result.arrival_s)
    assert np.all(result.first_token_s > result.start_s)
    assert np.all(result.finish_s >= result.first_token_s)
    assert np.all(np.isnan(result.tpot_s) == (workload.output_len == 1))
    assert result.throughput_per_chip == pytest.approx(
        result.total_tokens / (result.makespan_s * result.n_chips))


def test_simulated_steps_cost_what_inference_says_sliding_window_included():
    # One request alone: TTFT is its prefill, then one decode step per further token at a growing context.
    prompt, out = 1000, 50
    result = simulate(CONFIG, trace_workload([(0.5, prompt, out)]), "interleaved")
    assert result.ttft_s[0] == pytest.approx(prefill_latency("llama3-70b", "tpu-v5e", 16, prompt), rel=1e-9)
    expected = sum(decode_step_time("llama3-70b", "tpu-v5e", 16, 1, prompt + j).total_s for j in range(1, out))
    assert result.finish_s[0] - result.first_token_s[0] == pytest.approx(expected, rel=1e-9)
    # Two sequences in one naive batch, one of them crossing a 512-token window mid-generation.
    model = get_model("llama3-8b").with_(sliding_window=512, name="llama3-8b-local")
    config = ServingConfig(model, "h100", n_chips=1, max_batch=4, max_context_len=2048)
    result = simulate(config, trace_workload([(0.0, 100, 600), (0.0, 700, 600)]), "naive")
    weights, params = param_bytes(model), active_param_count(model)
    expected = sum(step_time_bound(batch=2, kv_bytes_per_sequence=(kv_cache_bytes(model, 100 + j)
                                                                   + kv_cache_bytes(model, 700 + j)) / 2,
                                   param_bytes=weights, param_count=params, chip="h100").total_s
                   for j in range(1, 600))
    assert result.finish_s[0] - result.first_token_s[0] == pytest.approx(expected, rel=1e-9)
    # The naive engine pads the batch's prefill to the longest prompt.
    assert result.ttft_s[0] == pytest.approx(prefill_latency(model, "h100", 1, 700, batch=2), rel=1e-9)


def test_queue_length_counts_requests_waiting_to_start():
    # Three requests at once on one interleaved server: one starts, two wait; then one, then none.
    result = simulate(CONFIG, trace_workload([(0.0, 4000, 8)] * 3), "interleaved")
    times, lengths = result.queue_length()
    assert lengths.tolist() == [2, 1, 0]
    assert result.max_queue_length == 2
    assert 0 < result.mean_queue_length < 2


def test_v3_interleaved_beats_naive_ttft_at_low_load():
    workload = poisson_workload(0.5, 300, **MIXED, seed=5)
    naive, interleaved = _run("naive", workload), _run("interleaved", workload)
    assert interleaved.p99_ttft_s < 0.5 * naive.p99_ttft_s
    assert interleaved.ttft_s.mean() < naive.ttft_s.mean()


def test_v3_under_load_prefill_stalls_hurt_interleaved_tpot_and_disaggregation_removes_them():
    # Same 48 chips: 3 interleaved servers vs 2 prefill + 1 decode server.
    workload = poisson_workload(3.0, 300, **MIXED, seed=5)
    naive = _run("naive", workload)
    interleaved, chunked = _run("interleaved", workload), _run("chunked", workload)
    disaggregated = _run("disaggregated", workload)
    assert disaggregated.p99_tpot_s <= interleaved.p99_tpot_s
    assert chunked.p99_tpot_s <= interleaved.p99_tpot_s  # chunks stall decode for less than a whole prompt
    # The naive engine never stalls decode either, but it pays in time to first token.
    assert naive.p99_tpot_s <= interleaved.p99_tpot_s
    assert naive.p50_ttft_s > 5 * interleaved.p50_ttft_s
    # Continuous batching keeps up with the load; the naive engine falls behind.
    assert interleaved.throughput_per_chip > naive.throughput_per_chip


# --- V4: speculative decoding ---------------------------------------------------------------------------------

def test_speculative_expected_tokens_limits():
    for k in (0, 1, 4, 9):
        assert expected_tokens_per_step(k, 0.0) == 1.0  # nothing accepted: the target's own token
        assert expected_tokens_per_step(k, 1.0) == k + 1  # everything accepted plus the bonus token
        assert expected_tokens_per_step(k, 1 - 1e-9) == pytest.approx(k + 1, rel=1e-6)
        assert expected_tokens_per_step(k, 1e-9) == pytest.approx(1.0, rel=1e-6)
    values = [expected_tokens_per_step(k, 0.7) for k in range(10)]
    assert values == sorted(values) and values[-1] < 1 / (1 - 0.7)  # bounded by the geometric series
    assert math.isfinite(speedup(0, 0.5, 0.1)) and speedup(0, 0.5, 0.1) == 1.0  # no lookahead: no speedup


def test_v4_best_lookahead_3_to_4_for_70b_target_4b_drafter():
    # The ledger's assumptions (the source gives none): per-token acceptance 0.6 (natural-language text, the
    # source's XSum case), and a 4e9-parameter drafter for a 70e9 target (Chinchilla-70B).
    a, c = V4_ACCEPTANCE, draft_cost_ratio(V4_DRAFT_PARAMS, V4_TARGET_PARAMS)
    # Independent oracle: at batch 1 both steps are bandwidth-bound, so c is the ratio of their step-time bounds.
    draft, target = (step_time_bound(batch=1, kv_bytes_per_sequence=0, param_bytes=2 * params, param_count=params,
                                     chip="tpu-v5e", check_capacity=False)  # a ratio: one chip need not hold them
                      for params in (V4_DRAFT_PARAMS, V4_TARGET_PARAMS))
    assert c == pytest.approx(draft.total_s / target.total_s, rel=1e-12)
    low, high = published_range("V4 best lookahead")
    assert low <= best_lookahead(a, c) <= high
    assert speedup(best_lookahead(a, c), a, c) > 1.5
    # More predictable text (higher acceptance) wants a longer lookahead; a costlier drafter a shorter one.
    assert best_lookahead(0.8, c) > best_lookahead(a, c) > best_lookahead(a, 0.3)


def test_v4_past_b_crit_verification_costs_less_than_gamma_plus_1_steps_while_the_cache_read_matters():
    # Chapter 10's correction: past B_crit verification costs more than one step, but each sequence's cache is read
    # once for all gamma + 1 positions, so it stays below gamma + 1 steps and a good drafter still pays.
    args = ("llama3-70b", "tpu-v5e", 16)
    gamma, c = 4, draft_cost_ratio(V4_DRAFT_PARAMS, V4_TARGET_PARAMS)
    bcrit = critical_batch_size("tpu-v5e")
    quiz = roofline_step(*args, 64, 2048, gamma, V4_ACCEPTANCE, c)  # chapter 10's pop quiz: batch 64
    assert 64 * (gamma + 1) > bcrit and 1 < quiz.verify_s / quiz.plain_step_s < gamma + 1 and quiz.speedup > 1.5
    # the plain step itself is compute-bound; batch 256 does not fit (171 do): chapter 10 prices it as if it did
    big = roofline_step(*args, 256, 2048, gamma, V4_ACCEPTANCE, c, check_capacity=False)
    assert 256 > bcrit and big.verify_s / big.plain_step_s < 0.6 * (gamma + 1)
    assert big.speedup < 1 < roofline_speedup(*args, 256, 2048, gamma, 0.9, c, check_capacity=False)
    with pytest.raises(ValueError, match="the largest batch that fits is 171"):
        roofline_step(*args, 256, 2048, gamma, V4_ACCEPTANCE, c)
    # Only when the cache read vanishes does verification cost gamma + 1 steps (B (gamma + 1) P FLOPs against B P),
    # and then no acceptance below 1 pays for it: a step yields at most gamma + 1 tokens.
    no_cache = roofline_step(*args, 512, 0, gamma, 0.99, c)
    assert no_cache.verify_s / no_cache.plain_step_s == pytest.approx(gamma + 1, rel=1e-12)
    assert no_cache.speedup < 1


def test_v4_scoring_k_tokens_costs_one_step_when_bandwidth_bound_and_gains_shrink_with_batch():
    args = ("llama3-70b", "tpu-v5e", 16)
    k, a, c = 4, V4_ACCEPTANCE, draft_cost_ratio(V4_DRAFT_PARAMS, V4_TARGET_PARAMS)
    # Batch 1: B (k + 1) = 5 tokens is far below B_crit, verification costs one step, the gain is Leviathan's.
    assert roofline_speedup(*args, 1, 2048, k, a, c) == pytest.approx(speedup(k, a, c), rel=1e-6)
    gains = [roofline_speedup(*args, b, 2048, k, a, c, check_capacity=False) for b in (1, 16, 32, 64, 128, 256)]
    assert all(x >= y - 1e-12 for x, y in zip(gains, gains[1:]))
    bcrit = critical_batch_size("tpu-v5e")
    assert 128 * (k + 1) > bcrit and gains[-1] < 1.0  # far past B_crit speculation costs more than it yields
    assert best_roofline_lookahead(*args, 128, 2048, a, c) < best_roofline_lookahead(*args, 1, 2048, a, c)


# --- V5: mixture of experts -----------------------------------------------------------------------------------

def test_v5_moe_16_experts_top2_has_about_12x_the_weight_bytes():
    # The Scaling Book's ch. 7 worked-problem model ("based on LLaMA-2 13B"): 18.4e9 params dense; as a
    # 16-expert top-2 MoE 212e9 total and 31.2e9 active; 11.5x, the source's "about 12x".
    weights = moe_weights("sb7-worked", 16, 2)
    assert weights.dense_params == pytest.approx(published("V5 dense params"), rel=REL)
    assert weights.total_params == pytest.approx(published("V5 MoE params"), rel=REL)
    assert weights.active_params == pytest.approx(published("V5 MoE active params"), rel=REL)
    assert weights.weight_ratio == pytest.approx(published("V5 MoE params") / published("V5 dense params"), rel=REL)
    low, high = published_range("V5 12x weights")
    assert low <= weights.weight_ratio <= high
    assert low <= weights.weight_bytes / weights.dense_weight_bytes <= high
    assert weights.weight_bytes / weights.dense_weight_bytes == pytest.approx(weights.weight_ratio, rel=1e-12)
    # The KV cache per token does not change: experts replace the feed-forward blocks, not attention.
    assert weights.kv_bytes_per_token == kv_bytes_per_token("sb7-worked")
    # LLaMA-2-13B itself, by hand: 13,015,449,600 dense parameters of which 40 x 3 x 5,120 x 13,824 = 8,493,465,600
    # are feed-forward; 16 experts add 15 more copies of those and a 5,120 x 16 router per layer: 10.79x.
    ffn, dense = 40 * 3 * 5120 * 13824, 13_015_449_600
    expected = (dense + 15 * ffn + 40 * 5120 * 16) / dense
    assert expected == pytest.approx(10.7887, rel=1e-4)
    assert moe_weights("llama2-13b", 16, 2).weight_ratio == pytest.approx(expected, rel=1e-12)


def test_v5_moe_decode_is_weight_bound_critical_batch_and_all_to_alls():
    assert moe_critical_batch("tpu-v5e", 16, 2) == pytest.approx(published("R5"), rel=REL)
    moe = as_moe("sb7-worked", 16, 2)
    # At batch 32, uniform routing already touches almost all experts: the whole MoE is read every step, and
    # the step is the weight read, far below the 1,920 tokens that would amortise it.
    assert expected_experts_touched(16, 2, 32) > 15
    bcrit = critical_batch_size("tpu-v5e")
    assert decode_step_time(moe, "tpu-v5e", 128, 32, 0).bound == "memory"
    # Where a dense model turns compute-bound, the MoE is still reading weights. The whole step turns over a bit
    # before E / k x B_crit (attention weights serve every token), but the expert matmuls need all 1,920.
    assert decode_step_time(moe, "tpu-v5e", 128, int(1.5 * bcrit), 0).bound == "memory"
    assert decode_step_time(moe, "tpu-v5e", 128, 1920, 0).bound == "compute"
    # Routing: two all-to-alls per layer of B x k x D activations; at decode sizes they are latency-bound.
    routing = routing_all_to_all(moe, "tpu-v5e", batch=16, expert_shards=8, activation_dtype="int8")
    assert routing.per_layer == published("V5 weight-bound, two all-to-alls")
    assert routing.bytes_each == 16 * 2 * 4096  # hand derivation: B x k x D int8 activations
    assert routing.bytes_each < latency_bound_bytes("tpu-v5e", 8) and routing.latency_bound
    assert routing.per_step_s == pytest.approx(2 * 64 * routing.time_each_s)
    # Expert sharding: 16 experts over 16 chips, model-parallel 8 ways (the source's 8 x 16 v5e slice).
    memory = expert_sharded_memory(moe, "tpu-v5e", expert_shards=16, model_shards=8, dtype="int8")
    assert memory.fits
    assert memory.total_bytes_per_chip * 128 >= param_count(moe)  # non-expert weights are replicated 16 times


# --- V6: quantization -----------------------------------------------------------------------------------------

def test_v6_quantization_table_llama3_70b_ironwood_fp8_halves_the_step():
    # T4's configuration: 8 Ironwood chips, 32,768-token context, batch 64.
    rows = {(r.weight_dtype, r.kv_dtype): r for r in quantization_table(**T4_DEPLOYMENT)}
    bf16, fp8 = rows[("bf16", "bf16")], rows[("fp8", "fp8")]
    assert bf16.step_s == pytest.approx(published("T4 bf16"), rel=REL)
    assert fp8.step_s == pytest.approx(published("T4 fp8"), rel=REL)
    assert fp8.step_s / bf16.step_s == pytest.approx(published("V6 fp8 halves the step"), rel=REL)
    assert fp8.weight_bytes == bf16.weight_bytes / 2 and fp8.kv_bytes_per_token == bf16.kv_bytes_per_token / 2
    assert fp8.max_batch > 2 * bf16.max_batch - 2
    # At long context the KV term dominates: quantizing only the weights buys far less than quantizing both.
    weight_only = rows[("int8", "bf16")]
    assert bf16.step_s - weight_only.step_s < 0.2 * (bf16.step_s - fp8.step_s)
    # Fewer bytes never hurt: memory down, batch up, step down.
    ordered = [rows[key] for key in (("bf16", "bf16"), ("int8", "int8"), ("int4", "int8"))]
    assert [r.weight_bytes for r in ordered] == sorted((r.weight_bytes for r in ordered), reverse=True)
    assert [r.max_batch for r in ordered] == sorted(r.max_batch for r in ordered)
    assert [r.step_s for r in ordered] == sorted((r.step_s for r in ordered), reverse=True)


def test_t4_the_published_pair_fixes_the_cached_tokens_and_the_halving_holds_wherever_bandwidth_bound():
    # The source's 14.0 -> 7.0 ms comes without a configuration; T4_DEPLOYMENT (batch 64, 32,768 tokens, 8 Ironwood)
    # was chosen to reproduce it. It is not the only point that does: at long context the step is mostly the KV read,
    # B S x KV bytes per token, so batch 16 at 131,072 tokens (the same cached tokens) gives the same 14.0 ms.
    deployment = dict(T4_DEPLOYMENT)
    model, chip, n_chips = deployment["model"], deployment["chip"], deployment["n_chips"]
    batch, context = deployment["batch"], deployment["context_len"]
    same_tokens = decode_step_time(model, chip, n_chips, batch // 4, 4 * context).total_s
    assert same_tokens == pytest.approx(published("T4 bf16"), rel=REL)
    grid = step_ratio_grid(model, chip, n_chips, (1, 16, batch, 256, 1024), (2048, 8192, context, 4 * context))
    # fp8 weights and cache, bf16 math: every byte halves, the FLOPs do not. Hand derivation: while the step is
    # memory-bound it is bytes / bandwidth, so it halves exactly; compute-bound, (B KV / 2 + 2 B P / C) /
    # (B KV + 2 B P / C) lies strictly between 1/2 and 1.
    for point in grid:
        if point.scheme_bound == "memory":
            assert point.ratio == pytest.approx(0.5, rel=1e-12)
        else:
            assert 0.5 < point.ratio < 1 and point.batch > critical_batch_size(chip, "fp8", "bf16")
    assert any(p.scheme_bound == "compute" for p in grid) and any(p.scheme_bound == "memory" for p in grid)
    # With fp8 math too (claim T4's scheme), every term halves: 1/2 at every point.
    fp8_math = step_ratio_grid(model, chip, n_chips, (1, batch, 1024), (2048, context), scheme=("fp8",) * 3)
    assert all(p.ratio == pytest.approx(published("V6 fp8 halves the step"), rel=1e-12) for p in fp8_math)
    # Capacity is reported: at batch 1,024 and 131,072 tokens neither scheme fits 8 chips.
    corner = next(p for p in grid if (p.batch, p.context_len) == (1024, 4 * context))
    assert not corner.baseline_fits and not corner.scheme_fits


def test_v6_quantization_moves_the_critical_batch():
    rows = quantization_table("llama2-13b", "tpu-v5e", 8, 8192, 16,
                              schemes=[("bf16", "bf16", "bf16"), ("int8", "bf16", "bf16"), ("int8", "int8", "int8")])
    assert [r.critical_batch for r in rows] == pytest.approx(
        [published(key) for key in ("R1", "R3 int8 weights, bf16 math", "R3 int8 weights, int8 math")], rel=REL)
    assert not rows[0].fits and rows[2].fits  # batch 16 of 8k tokens fits 8 v5e only with int8 KV
    assert rows[2].tokens_per_s > 1.9 * rows[0].tokens_per_s


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
WORKLOAD = poisson_workload(1.0, 10, seed=0)
FIT = max_batch_size("llama3-70b", "tpu-v5e", 16, 8192)


@for_each([
    (lambda: prefill_time("llama3-8b", "h100", 1, 2048, 0.4, params="embedding"), "params"),
    (lambda: poisson_workload(-1.0, 10), "rate_per_s must be a positive"),
    (lambda: simulate(CONFIG, WORKLOAD, "interleaved", n_servers=0), "n_servers must be a positive integer"),
    (lambda: simulate_disaggregated(CONFIG, WORKLOAD, n_decode_servers=0),
     "n_decode_servers must be a positive integer"),
    (lambda: ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=FIT + 1, max_context_len=8192),
     rf"max_batch={FIT + 1} does not fit in HBM.*at most {FIT} KV caches"),
    (lambda: ServingConfig("llama3-70b", "tpu-v5e", n_chips=4, max_batch=1, max_context_len=8192),
     "weights of llama3-70b do not fit"),
    (lambda: simulate(CONFIG, WORKLOAD, "vllm"), "unknown engine 'vllm'"),
    (lambda: simulate(CONFIG, trace_workload([(0.0, 8000, 500)]), "naive"), "max_context_len=8192"),
    (lambda: trace_workload([(0.0, 0, 5)]), "prompt_len must be at least 1"),
    (lambda: ServingConfig("llama3-70b", "tpu-v5e", 16, 8, 8192, mfu=1.5), "mfu must be in"),
    (lambda: simulate_disaggregated(CONFIG, WORKLOAD, transfer_bandwidth=0.0), "transfer_bandwidth must be positive"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
