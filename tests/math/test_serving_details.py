"""Chapter 14's closed forms: prefix-cache tiers with LRU eviction and affinity routing (scaling_lib.prefix_cache),
host-memory loads in the simulator, the sequence-sharded KV cache (scaling_lib.sequence_sharding), and the batch at
which prefill saturates (serving.prefill_saturating_batch)."""

import numpy as np
import pytest

from scaling_lib.inference import prefill_time
from scaling_lib.memory import kv_bytes_per_token, kv_cache_bytes, param_bytes
from scaling_lib.prefix_cache import CacheTiers, TieredLru, chat_workload, route, simulate_chat
from scaling_lib.sequence_sharding import sequence_sharded_attention
from scaling_lib.serving import (prefill_free_batch, prefill_latency, prefill_saturating_batch,
                               prefill_saturating_tokens)
from scaling_lib.simulator import ServingConfig, Workload, simulate, trace_workload

CONFIG = ServingConfig("llama3-8b", "tpu-v5e", n_chips=8, max_batch=16, max_context_len=16384)
CHAT = chat_workload(n_sessions=60, turns=4, system_len=512, user_len=128, output_len=256, rate_per_s=2.0,
                     think_s=30.0, seed=0)
PER_TOKEN = kv_bytes_per_token("llama3-8b")
BIG = CacheTiers(hbm_bytes=1e12, host_bytes=0.0, host_bandwidth=1e10)


# --- LRU tiers --------------------------------------------------------------------------------------------------

def test_lru_demotes_the_least_recent_prefix_to_host_and_drops_it_from_there():
    cache = TieredLru(CacheTiers(hbm_bytes=2.0, host_bytes=1.0, host_bandwidth=1.0))
    for key in "abc":
        cache.store(key, tokens=10, size=1.0)
    assert list(cache.hbm) == ["b", "c"] and list(cache.host) == ["a"]
    assert cache.lookup("a") == ("host", 10)  # promoted: b is now the least recent in HBM, demoted; a leaves host
    assert list(cache.hbm) == ["c", "a"] and list(cache.host) == ["b"]
    cache.store("d", 10, 1.0)  # c demoted, b dropped
    assert list(cache.hbm) == ["a", "d"] and list(cache.host) == ["c"]
    assert cache.lookup("b") == ("miss", 0)


def test_affinity_with_room_for_everything_hits_every_follow_up_turn():
    routed = route(CHAT, "llama3-8b", 4, BIG, "affinity")
    assert routed.hit_rate() == pytest.approx(3 / 4)  # turns 1-3 of 4 find the conversation so far
    follow = CHAT.turn > 0
    np.testing.assert_array_equal(routed.cached_len[follow], CHAT.prompt_len[follow] - CHAT.user_len)
    assert not routed.cached_len[~follow].any() and not routed.load_s.any()


def test_round_robin_finds_a_prefix_only_when_a_turn_returns_to_its_replica():
    routed = route(CHAT, "llama3-8b", 4, BIG, "round-robin")
    expected = np.mean([t > 0 and any(CHAT.session[j] == CHAT.session[i] and j % 4 == i % 4 for j in range(i))
                        for i, t in enumerate(CHAT.turn)])
    assert routed.hit_rate() == pytest.approx(expected)
    assert routed.hit_rate() < route(CHAT, "llama3-8b", 4, BIG, "affinity").hit_rate()


def test_host_hits_pay_their_bytes_over_the_host_link():
    tiers = CacheTiers(hbm_bytes=0.0, host_bytes=1e12, host_bandwidth=2e10)
    routed = route(CHAT, "llama3-8b", 4, tiers, "affinity")
    host = routed.tier == "host"
    assert routed.hit_rate("host") == pytest.approx(3 / 4) and routed.hit_rate("hbm") == 0
    np.testing.assert_allclose(routed.load_s[host], routed.cached_len[host] * PER_TOKEN / 2e10)


def test_hits_lower_ttft_and_an_hbm_hit_beats_a_host_hit():
    none = simulate_chat(CONFIG, CHAT, 4, CacheTiers(0.0, 0.0, 1e10))
    host = simulate_chat(CONFIG, CHAT, 4, CacheTiers(0.0, 1e12, 1e10))
    hbm = simulate_chat(CONFIG, CHAT, 4, BIG)
    assert hbm.p50_ttft_s() < host.p50_ttft_s() < none.p50_ttft_s()


def test_a_cache_load_adds_to_a_lone_requests_ttft_exactly():
    plain = trace_workload([(0.0, 4000, 8)])
    loaded = Workload(plain.arrival_s, plain.prompt_len, plain.output_len, cached_len=[3000], cache_load_s=[0.05])
    for engine in ("interleaved", "naive", "chunked", "disaggregated"):
        a = simulate(CONFIG, Workload(plain.arrival_s, plain.prompt_len, plain.output_len, cached_len=[3000]), engine)
        b = simulate(CONFIG, loaded, engine)
        assert b.ttft_s[0] - a.ttft_s[0] == pytest.approx(0.05, rel=1e-9), engine
    with pytest.raises(ValueError, match="cache_load_s"):
        Workload([0.0], [10], [5], cache_load_s=[-1.0])


# --- sequence-sharded KV cache ------------------------------------------------------------------------------------

def test_each_chip_reads_one_nth_of_the_cache_and_pays_latency_bound_all_reduces():
    one = sequence_sharded_attention("palm-540b", "tpu-v4", 1, batch=1, context_len=65536)
    split = sequence_sharded_attention("palm-540b", "tpu-v4", 64, batch=1, context_len=65536)
    assert split.kv_bytes_per_chip == pytest.approx(kv_cache_bytes("palm-540b", 65536) / 64)
    assert split.kv_read_s == pytest.approx(one.kv_read_s / 64)
    assert one.combine_s == 0 and split.combine_latency_bound
    # 2 all-reduces per layer on the 4 x 4 x 4 torus, each 2 rounds of 2 + 2 + 2 hops at 1 us
    assert split.combine_s == pytest.approx(118 * 2 * 2 * 6e-6)
    ring = sequence_sharded_attention("palm-540b", "tpu-v4", 64, batch=1, context_len=65536, mesh_shape=(64,))
    assert ring.combine_s == pytest.approx(118 * 2 * 2 * 32e-6)  # one ring of 64: 32 hops a round
    with pytest.raises(ValueError, match="equal slices"):
        sequence_sharded_attention("palm-540b", "tpu-v4", 64, batch=1, context_len=1000)


# --- prefill at batch 1 -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("prompt_len", [16, 64, 95, 97, 512, 8192])
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


@pytest.mark.parametrize("prompt_len", [16, 40, 48, 95, 96, 97, 512])
def test_prompts_ride_free_up_to_the_free_batch_and_not_one_more(prompt_len):
    # 40-token prompts (chapter 14's pop quiz): T_sat = 96.1, so 2 ride free (80 tokens) and the 3rd (120) does not.
    free = prefill_free_batch("llama3-70b", "tpu-v5e", prompt_len, mfu=0.4)
    one = prefill_latency("llama3-70b", "tpu-v5e", 16, prompt_len, 0.4, batch=1)
    assert prefill_latency("llama3-70b", "tpu-v5e", 16, prompt_len, 0.4, batch=free) == pytest.approx(one, rel=1e-12)
    if prompt_len < 96:
        assert prefill_latency("llama3-70b", "tpu-v5e", 16, prompt_len, 0.4, batch=free + 1) > one
    assert free == max(1, int(96.0975 // prompt_len))
    assert prefill_free_batch("llama3-70b", "tpu-v5e", 40) == 2 and prefill_saturating_batch("llama3-70b",
                                                                                               "tpu-v5e", 40) == 3
