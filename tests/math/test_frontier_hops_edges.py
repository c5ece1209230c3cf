"""Edges of chapter 12's and 14's closed forms that the chapter tests leave open, found by mutation testing
(tools/mutation_score.py --modules frontier hops sequence_sharding prefix_cache): argument checks that must name the
argument, options that must reach the function they are meant for, multi-head KV caches (PaLM's single KV head hides
which sharding splits them), bandwidth-bound combines, and the prefix cache's bookkeeping.

Oracles: values worked by hand in the comments (model shapes and chip specs are the inputs), plain-Python
references (a median over a mask, a replica assignment by hand), and lone-request simulations."""

import dataclasses

import numpy as np
import pytest

from scaling_lib.frontier import choose, choose_for, choose_layout, layer_collectives, layout_cost, longest_context
from scaling_lib.frontier import pareto_frontier
from scaling_lib.hardware import GIB, get_chip
from scaling_lib.hops import cube_torus, decode_collective_latency, latency_bound_time, ring_hops, torus_diameter
from scaling_lib.measurements import pope_rows
from scaling_lib.models import param_count
from scaling_lib.prefix_cache import CacheTiers, ChatWorkload, TieredLru, chat_workload, route, simulate_chat
from scaling_lib.sequence_sharding import sequence_sharded_attention
from scaling_lib.simulator import ServingConfig, simulate, trace_workload

PALM, LLAMA70, V4, SLICE = "palm-540b", "llama3-70b", "tpu-v4", (4, 4, 4)
# PaLM 540B: L = 118, D = 18,432, F = 73,728, N = 48 query heads, K = 1 KV head, H = 256.
# LLaMA 3 70B: L = 80, K = 8 KV heads, H = 128: 2 (K and V) x 80 x 8 x 128 x 2 B = 327,680 B of bf16 KV per token.
LLAMA70_KV_PER_TOKEN, LLAMA70_KV_PER_HEAD = 327_680, 40_960
CONFIG = ServingConfig("llama3-8b", "tpu-v5e", n_chips=8, max_batch=16, max_context_len=16384)
ROOMY = CacheTiers(hbm_bytes=1e12, host_bytes=0.0, host_bandwidth=1e10)


# --- frontier: arguments ------------------------------------------------------------------------------------------

def test_choose_names_weight_dtypes_when_the_list_is_empty_or_holds_a_non_name():
    for bad in ((), []):
        with pytest.raises(ValueError, match=r"\bweight_dtypes\b must be a non-empty list"):
            choose(PALM, V4, "decode", weight_dtypes=bad)
    with pytest.raises(ValueError, match=r"\bweight_dtypes\b must hold dtype names"):
        choose(PALM, V4, "decode", weight_dtypes=("int8", 8))


def test_an_unmet_latency_target_says_how_to_relax_it():
    # One point: 64 chips, batch 1. Reading 540 GB of int8 weights at 64 x 1.2 TB/s alone takes 7 ms >> 0.1 ms.
    with pytest.raises(ValueError, match=r"\blatency_target_s=0\.0001\b.*relax the target or allow more chips"):
        choose(PALM, V4, "decode", latency_target_s=1e-4, weight_dtypes=("int8",), chip_counts=(64,), batches=(1,))


def test_batch_sharding_that_cannot_split_the_batch_names_the_alternative():
    with pytest.raises(ValueError, match=r"batch=48 divisible by n_chips=64.*attention_sharding='heads'"):
        layout_cost(PALM, V4, 64, "decode", 48, "2d-ws", "batch")


def test_a_tie_of_zero_is_allowed_and_keeps_only_the_fastest():
    decision = choose_layout(PALM, V4, 64, "decode", 64, tie=0)
    assert decision.tie == 0
    assert decision.best in decision.equivalent
    assert all(c.total_s == decision.best.total_s for c in decision.equivalent)
    with pytest.raises(ValueError, match=r"\btie\b"):
        choose_layout(PALM, V4, 64, "decode", 64, tie=-0.01)


def test_choose_for_passes_its_options_to_choose_layout():
    row = next(r for r in pope_rows() if r.phase == "decode")
    decision = choose_for(row, tie=0.5, overlap=True)
    assert decision.tie == 0.5
    assert all(c.overlap for c in decision.costs)


# --- frontier: a layer's collectives --------------------------------------------------------------------------------

def test_fp32_activations_double_every_activation_collective_and_the_all_to_alls_carry_activations():
    # 1D weight-stationary, decode at batch 64 on 4 x 4 x 4: the layer input all-gather and output reduce-scatter move
    # B x D x 4 B = 64 x 18,432 x 4 = 4,718,592 B; attention's all-to-alls move B N H x 4 B / n = 64 x 48 x 256 x 4
    # / 64 = 49,152 B each.
    steps = layer_collectives(PALM, 64, "decode", 64, "1d-ws", "batch", activation_dtype="fp32", mesh_shape=SLICE)
    assert [(c.op, c.tensor) for c in steps] == [("all-gather", "activations"), ("reduce-scatter", "activations"),
                                                  ("all-to-all", "activations"), ("all-to-all", "activations")]
    assert [c.bytes_per_chip for c in steps] == pytest.approx([4_718_592, 4_718_592, 49_152, 49_152])
    assert all(c.group == SLICE for c in steps)


def test_a_serial_block_repeats_the_d_sized_gather_and_scatter_of_2d_weight_stationary():
    # 2D on 4 x 4 x 4 (X = 4): the D-sized collectives run over Y Z = (4, 4) on B D / X values: 64 x 18,432 / 4 x 2 B
    # = 589,824 B; the F-sized ones over X. A serial block adds attention's own D-sized gather and scatter, not the
    # F-sized ones.
    parallel = layer_collectives(PALM, 64, "decode", 64, "2d-ws", "heads", mesh_shape=SLICE, pad_heads=True)
    serial = layer_collectives(PALM, 64, "decode", 64, "2d-ws", "heads", mesh_shape=SLICE, parallel_block=False,
                                pad_heads=True)
    assert serial[:len(parallel)] == parallel
    extra = serial[len(parallel):]
    assert [(c.op, c.group) for c in extra] == [("all-gather", (4, 4)), ("reduce-scatter", (4, 4))]
    assert [c.bytes_per_chip for c in extra] == pytest.approx([589_824, 589_824])


# --- frontier: KV heads ---------------------------------------------------------------------------------------------

def test_a_multi_head_cache_splits_its_heads_or_its_batch_by_hand():
    # LLaMA 3 70B (K = 8) decoding batch 16 at context 2,048 on 16 v4 chips (1.2 TB/s each).
    # heads: 8 heads over 16 chips, so each chip holds one head (replicated twice) of all 16 sequences:
    #        16 x 2,048 x 40,960 B = 1,342,177,280 B -> 1.1185 ms.
    # batch: one sequence per chip, all 8 heads: 1 x 2,048 x 327,680 B = 671,088,640 B -> 0.5592 ms.
    heads = layout_cost(LLAMA70, V4, 16, "decode", 16, "2d-ws", "heads", context_len=2048)
    batch = layout_cost(LLAMA70, V4, 16, "decode", 16, "2d-ws", "batch", context_len=2048)
    assert heads.kv_s == pytest.approx(16 * 2048 * LLAMA70_KV_PER_HEAD / 1.2e12, rel=1e-12)
    assert batch.kv_s == pytest.approx(1 * 2048 * LLAMA70_KV_PER_TOKEN / 1.2e12, rel=1e-12)
    assert (heads.context_len, heads.n_chips, heads.batch, heads.tokens) == (2048, 16, 16, 16)


def test_longest_context_of_a_multi_head_cache_by_hand():
    # 16 v4 chips of 32 GiB, int8 weights: each chip has 32 GiB - P / 16 bytes free for the cache of batch 16.
    # batch: one sequence of all 8 heads per chip: 327,680 B per token; heads: 16 sequences x 1 head: 655,360 B.
    free = 32 * GIB - param_count(LLAMA70) / 16
    batch = longest_context(LLAMA70, V4, 16, 16, "batch", weight_dtype="int8")
    heads = longest_context(LLAMA70, V4, 16, 16, "heads", weight_dtype="int8")
    assert batch == int(free // LLAMA70_KV_PER_TOKEN)
    assert heads == int(free // (16 * LLAMA70_KV_PER_HEAD))
    assert get_chip(V4).hbm_capacity == 32 * GIB


# --- frontier: the Pareto frontier ----------------------------------------------------------------------------------

def test_a_point_no_better_in_mfu_and_slower_is_off_the_frontier_and_duplicates_count_once():
    base = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch")

    def point(step_s, flops):  # total = compute = step_s; MFU = flops / (step_s x 2)
        return dataclasses.replace(base, compute_s=step_s, weight_s=0.0, kv_s=0.0, network_s=0.0,
                                   model_flops=flops, peak_flops=2.0)

    fast, slow_same_mfu, slow_better = point(1.0, 1.0), point(2.0, 2.0), point(3.0, 4.5)  # MFU 0.5, 0.5, 0.75
    assert (fast.mfu, slow_same_mfu.mfu, slow_better.mfu) == (0.5, 0.5, 0.75)
    assert pareto_frontier([slow_better, slow_same_mfu, fast]) == (fast, slow_better)
    assert pareto_frontier([fast, fast]) == (fast,)


# --- hops -----------------------------------------------------------------------------------------------------------

def test_cube_torus_by_hand():
    # 12 chips: 1 x 1 x 12, 1 x 2 x 6, 1 x 3 x 4 and 2 x 2 x 3; the last has the smallest Z - X (1).
    assert cube_torus(12) == (2, 2, 3)
    assert cube_torus(7) == (1, 1, 7)  # a prime has one torus
    assert cube_torus(1) == (1, 1, 1)
    assert cube_torus(256) == (4, 8, 8)  # 4 x 4 x 16 has Z - X = 12; 4 x 8 x 8 has 4
    with pytest.raises(ValueError, match=r"\bn_chips\b"):
        cube_torus(0)


def test_hops_of_an_all_reduce_and_of_a_torus_without_wraparound():
    assert ring_hops((4, 4, 4), "all-reduce") == 2 * (2 + 2 + 2)
    assert ring_hops((2, 3), "all-to-all") == 1 + 1  # floor(2 / 2) + floor(3 / 2): on a ring of 3 each chip is 1 hop away
    assert torus_diameter((4, 4, 4)) == 6 and torus_diameter((4, 4, 4), wraparound=False) == 9
    with pytest.raises(ValueError, match=r"\bwraparound\b"):
        torus_diameter((4, 4, 4), wraparound="no")


def test_latency_bound_times_with_a_fixed_cost_by_hand():
    # 80 layers x 2 collectives x (3 us + 16 hops x 1 us) = 3,040 us
    assert decode_collective_latency(80, 2, 16, 1e-6, fixed_s=3e-6) == pytest.approx(3040e-6, rel=1e-12)
    assert latency_bound_time(0, 1e-6, fixed_s=5e-6, rounds=3) == pytest.approx(15e-6, rel=1e-12)
    for kwargs, name in ((dict(fixed_s=-1e-6), "fixed_s"), (dict(rounds=0), "rounds"), (dict(hops=-1), "hops"),
                         (dict(hop_latency_s=0.0), "hop_latency_s")):
        with pytest.raises(ValueError, match=rf"\b{name}\b"):
            latency_bound_time(**{"hops": 4, "hop_latency_s": 1e-6, **kwargs})
    for kwargs, name in ((dict(n_layers=0), "n_layers"), (dict(collectives_per_layer=0), "collectives_per_layer")):
        with pytest.raises(ValueError, match=rf"\b{name}\b"):
            decode_collective_latency(**{"n_layers": 80, "collectives_per_layer": 2, "hops": 4,
                                         "hop_latency_s": 1e-6, **kwargs})


# --- sequence sharding -------------------------------------------------------------------------------------------

def test_the_combined_array_is_b_n_h_plus_one_values():
    # batch 1, fp32: 1 x 48 heads x (256 + 1) x 4 B = 49,344 B; in bf16 half of it.
    split = sequence_sharded_attention(PALM, V4, 64, batch=1, context_len=65536)
    assert split.n_chips == 64 and split.combine_bytes == 49_344
    half = sequence_sharded_attention(PALM, V4, 64, batch=1, context_len=65536, activation_dtype="bf16")
    assert half.combine_bytes == 24_672
    # an int8 cache is half the bf16 one: 65,536 x 118 x 2 x 256 x 1 B / 64 = 61,865,984 B per chip
    assert sequence_sharded_attention(PALM, V4, 64, 1, 65536, kv_dtype="int8").kv_bytes_per_chip == 61_865_984


def test_a_large_batch_makes_both_all_reduces_bandwidth_bound_by_hand():
    # A ring of 2 v4 chips (one axis, 2 links x 45 GB/s = 90 GB/s): an all-reduce of V bytes takes 2 V / 90e9 s of
    # bandwidth against 2 passes x 1 hop x 1 us = 2 us. Batch 4,096 in fp32:
    #   maxima   4,096 x 48 x 4 B         =     786,432 B -> 17.5 us  (bandwidth-bound)
    #   combined 4,096 x 48 x 257 x 4 B   = 202,113,024 B -> 4.49 ms  (bandwidth-bound)
    #   per step 118 layers x (786,432 + 202,113,024) B / 45e9 B/s = 0.53205 s
    ring = sequence_sharded_attention(PALM, V4, 2, batch=4096, context_len=4096, mesh_shape=(2,))
    assert ring.combine_bytes == 202_113_024
    assert ring.combine_s == pytest.approx(118 * (786_432 + 202_113_024) / 45e9, rel=1e-12)
    assert not ring.combine_latency_bound
    assert ring.total_s == pytest.approx(ring.kv_read_s + ring.combine_s, rel=1e-12)


def test_a_mesh_that_does_not_hold_n_chips_is_named():
    with pytest.raises(ValueError, match=r"\bmesh_shape\b \(4, 4\) holds 16 chips, not n_chips=64"):
        sequence_sharded_attention(PALM, V4, 64, batch=1, context_len=65536, mesh_shape=(4, 4))
    with pytest.raises(ValueError, match=r"context_len=1000 does not split into 64 equal slices"):
        sequence_sharded_attention(PALM, V4, 64, batch=1, context_len=1000)


# --- prefix cache ---------------------------------------------------------------------------------------------------

def test_cache_tiers_name_the_bad_field():
    for kwargs, name in ((dict(hbm_bytes=-1.0), "hbm_bytes"), (dict(host_bytes=-1.0), "host_bytes"),
                         (dict(host_bandwidth=0.0), "host_bandwidth")):
        with pytest.raises(ValueError, match=rf"\b{name}\b"):
            CacheTiers(**{"hbm_bytes": 1.0, "host_bytes": 1.0, "host_bandwidth": 1.0, **kwargs})
    CacheTiers(0.0, 0.0, 1.0)  # no cache at all is allowed


def test_an_hbm_hit_is_reported_as_such_and_becomes_most_recent():
    cache = TieredLru(CacheTiers(hbm_bytes=2.0, host_bytes=1.0, host_bandwidth=1.0))
    cache.store("a", 10, 1.0)
    cache.store("b", 20, 1.0)
    assert cache.lookup("a") == ("hbm", 10)
    cache.store("c", 30, 1.0)  # b is now the least recent: demoted
    assert list(cache.hbm) == ["a", "c"] and list(cache.host) == ["b"]
    cache.store("a", 11, 1.0)  # replaces the older entry, no duplicate
    assert list(cache.hbm) == ["c", "a"] and cache.lookup("a") == ("hbm", 11)


def test_chat_workload_by_hand():
    # turn t's prompt = system + t (user + output) + user = 100 + 30 t + 10: 110, 140, 170
    w = chat_workload(n_sessions=3, turns=3, system_len=100, user_len=10, output_len=20, rate_per_s=1.0,
                      think_s=5.0, seed=3)
    assert w.n_requests == 9 and w.user_len == 10
    assert np.all(np.diff(w.arrival_s) >= 0)
    assert sorted(zip(w.session.tolist(), w.turn.tolist())) == [(s, t) for s in range(3) for t in range(3)]
    np.testing.assert_array_equal(w.prompt_len, 110 + 30 * w.turn)
    np.testing.assert_array_equal(w.output_len, np.full(9, 20))
    for s in range(3):  # each conversation's turns arrive in order, the first turn of session s before s + 1's
        mine = w.session == s
        assert w.turn[mine].tolist() == [0, 1, 2]
    firsts = [w.arrival_s[(w.session == s) & (w.turn == 0)][0] for s in range(3)]
    assert firsts == sorted(firsts) and w.session[0] == 0 and w.turn[0] == 0


def test_chat_workload_rates_match_their_means():
    # 4,000 conversations: mean gap between starts 1 / rate = 0.5 s and between turns think_s = 30 s, each within
    # 5% (the standard error of a mean of 4,000 exponential gaps is 1.6%).
    w = chat_workload(n_sessions=4000, turns=2, system_len=1, user_len=1, output_len=1, rate_per_s=2.0, think_s=30.0,
                      seed=0)
    starts = np.sort(w.arrival_s[w.turn == 0])
    assert np.mean(np.diff(starts)) == pytest.approx(0.5, rel=0.05)
    order = np.argsort(w.session, kind="stable")  # per session: turn 0, then turn 1
    pairs = w.arrival_s[order].reshape(-1, 2)
    assert np.mean(pairs[:, 1] - pairs[:, 0]) == pytest.approx(30.0, rel=0.05)
    same = chat_workload(n_sessions=4000, turns=2, system_len=1, user_len=1, output_len=1, rate_per_s=2.0,
                         think_s=30.0, seed=0)
    np.testing.assert_array_equal(same.arrival_s, w.arrival_s)  # seeded


def _requests(sessions, prompts, outputs):
    n = len(sessions)
    return ChatWorkload(np.arange(n, dtype=float), np.array(sessions), np.zeros(n, int), np.array(prompts),
                        np.array(outputs), user_len=1)


def test_a_retried_turn_reuses_all_but_the_last_prompt_token():
    # The same 100-token prompt sent twice: the cache holds 105 tokens (prompt + output) but prefill must still make
    # the first token, so at most 99 are reused.
    routed = route(_requests([0, 0], [100, 100], [5, 5]), "llama3-8b", 1, ROOMY)
    assert routed.cached_len.tolist() == [0, 99]
    assert routed.tier.tolist() == ["miss", "hbm"]


def test_replicas_by_hand():
    # affinity: session % 2 -> 5, 3, 5 all go to replica 1; round-robin: request index % 2 -> 0, 1, 0
    work = _requests([5, 3, 5], [10, 10, 40], [5, 5, 5])
    assert route(work, "llama3-8b", 2, ROOMY, "affinity").replica.tolist() == [1, 1, 1]
    rr = route(work, "llama3-8b", 2, ROOMY, "round-robin")
    assert rr.replica.tolist() == [0, 1, 0] and rr.tier.tolist() == ["miss", "miss", "hbm"]
    assert rr.cached_len.tolist() == [0, 0, 15]  # session 5's first turn stored 10 + 5 tokens on replica 0


def test_a_lone_request_on_the_second_replica_has_the_ttft_of_a_lone_request():
    # Session 1 on 2 replicas goes to replica 1: replica 0 has nothing to do, and must not stop the simulation.
    work = _requests([1], [4000], [8])
    chat = simulate_chat(CONFIG, work, 2, ROOMY)
    alone = simulate(CONFIG, trace_workload([(0.0, 4000, 8)])).ttft_s[0]
    assert chat.ttft_s.tolist() == pytest.approx([alone], rel=1e-12)
    assert chat.routed.replica.tolist() == [1] and chat.routed.tier.tolist() == ["miss"]
    assert chat.p50_ttft_s("miss") == pytest.approx(alone, rel=1e-12)
    with pytest.raises(ValueError, match=r"\btier 'hbm'"):
        chat.p50_ttft_s("hbm")
    with pytest.raises(ValueError, match=r"unknown tier 'disk'"):
        chat.p50_ttft_s("disk")


def test_the_median_ttft_of_a_tier_is_the_median_over_its_requests():
    work = chat_workload(n_sessions=20, turns=3, system_len=512, user_len=128, output_len=64, rate_per_s=2.0,
                         think_s=30.0, seed=1)
    chat = simulate_chat(CONFIG, work, 2, ROOMY)
    np.testing.assert_array_equal(chat.routed.tier, route(work, "llama3-8b", 2, ROOMY).tier)
    hbm = [t for t, tier in zip(chat.ttft_s.tolist(), chat.routed.tier.tolist()) if tier == "hbm"]
    assert len(hbm) == 40  # turns 1 and 2 of 20 conversations
    assert chat.p50_ttft_s("hbm") == pytest.approx(float(np.median(hbm)), rel=1e-12)


# -------------------------------------------------------------- survivors of the independent sample (seed 1), killed
def test_weight_dtypes_that_are_not_a_list_get_a_value_error():
    with pytest.raises(ValueError, match=r"\bweight_dtypes\b"):
        choose(PALM, V4, "decode", weight_dtypes=5)


def test_choose_for_keeps_the_rows_weight_dtype_and_the_best_choice_has_no_margin():
    for row in pope_rows():
        decision = choose_for(row)
        assert decision.best.weight_dtype == row.weight_dtype  # int8 rows are priced in int8
        assert decision.margin(decision.best.ffn_layout, decision.best.attention_sharding) == 0.0


def test_a_torus_is_whole_chips_per_axis():
    assert all(type(axis) is int for n in (12, 64, 1024) for axis in cube_torus(n))


def test_the_mesh_a_step_is_laid_on_changes_its_collectives():
    # 64 chips as 2 x 4 x 8 instead of 4 x 4 x 4: a longer axis, more hops per collective, a longer network term.
    cube = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch")
    flat = layout_cost(PALM, V4, 64, "decode", 64, "2d-ws", "batch", mesh_shape=(2, 4, 8))
    assert flat.network_s > cube.network_s


def test_a_hit_rate_of_an_unknown_tier_names_the_argument():
    work = _requests([1], [4000], [8])
    with pytest.raises(ValueError, match=r"unknown tier 'disk'"):
        route(work, "llama3-8b", 2, ROOMY).hit_rate("disk")
