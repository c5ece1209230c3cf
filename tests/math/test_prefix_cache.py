"""scaling_lib.prefix_cache (chapters 12 and 14): prefix-cache tiers with LRU eviction, affinity and round-robin
routing, the chat workload, the chat simulation on several replicas, and a prefill against a cached history.

Oracles: values worked by hand in the comments, plain-Python references (a median over a mask, a replica assignment
by hand), and lone-request simulations."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling_lib.frontier import layout_cost
from scaling_lib.hardware import get_chip
from scaling_lib.memory import kv_bytes_per_token
from scaling_lib.prefix_cache import (
    CacheTiers,
    ChatWorkload,
    TieredLru,
    cached_prefill_cost,
    chat_workload,
    route,
    simulate_chat,
)
from scaling_lib.simulator import ServingConfig, simulate, trace_workload
from tests import examples, for_each

CONFIG = ServingConfig("llama3-8b", "tpu-v5e", n_chips=8, max_batch=16, max_context_len=16384)
CHAT = chat_workload(n_sessions=60, turns=4, system_len=512, user_len=128, output_len=256, rate_per_s=2.0,
                     think_s=30.0, seed=0)
PER_TOKEN = kv_bytes_per_token("llama3-8b")
BIG = CacheTiers(hbm_bytes=1e12, host_bytes=0.0, host_bandwidth=1e10)


# --- LRU tiers: HBM, then host DRAM, then gone --------------------------------------------------------------
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


def test_an_hbm_hit_is_reported_as_such_put_back_whole_and_becomes_most_recent():
    cache = TieredLru(CacheTiers(hbm_bytes=2.0, host_bytes=1.0, host_bandwidth=1.0))
    cache.store("a", 10, 1.0)
    cache.store("b", 20, 1.0)
    assert cache.lookup("a") == ("hbm", 10)
    assert cache.lookup("a") == ("hbm", 10)  # the hit was put back whole
    cache.store("c", 30, 1.0)  # b is now the least recent: demoted
    assert list(cache.hbm) == ["a", "c"] and list(cache.host) == ["b"]
    cache.store("a", 11, 1.0)  # replaces the older entry, no duplicate
    assert list(cache.hbm) == ["c", "a"] and cache.lookup("a") == ("hbm", 11)


def test_the_cache_holds_contexts_in_the_replicas_kv_format():
    # One conversation, two turns: turn 0's context is 100 + 10 + 20 = 130 tokens. HBM set aside for 1.5 times that
    # context in fp8 (1 byte per element) holds it in fp8 but not in bf16 (twice the bytes), so with an fp8 replica
    # turn 1 finds it in HBM, and with a bf16 one it was demoted to host DRAM.
    chat = chat_workload(n_sessions=1, turns=2, system_len=100, user_len=10, output_len=20, rate_per_s=1.0,
                         think_s=5.0)
    fp8_context = 130 * kv_bytes_per_token("llama3-8b", "fp8")
    tiers = CacheTiers(hbm_bytes=1.5 * fp8_context, host_bytes=1e12, host_bandwidth=1e10)
    fp8 = ServingConfig("llama3-8b", "h100", 1, 8, 4096, kv_dtype="fp8")
    routed = simulate_chat(fp8, chat, 1, tiers).routed
    assert routed.tier.tolist() == ["miss", "hbm"] and routed.replica.dtype.kind == "i"
    bf16 = ServingConfig("llama3-8b", "h100", 1, 8, 4096, kv_dtype="bf16")
    assert simulate_chat(bf16, chat, 1, tiers).routed.tier.tolist() == ["miss", "host"]
    assert CacheTiers(0.0, 0.0, 1.0).hbm_bytes == 0.0  # no cache at all is allowed


# --- Routing: affinity keeps a conversation on its replica, round-robin does not ------------------------------
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


def _requests(sessions, prompts, outputs):
    n = len(sessions)
    return ChatWorkload(np.arange(n, dtype=float), np.array(sessions), np.zeros(n, int), np.array(prompts),
                        np.array(outputs), user_len=1)


def test_replicas_and_cached_lengths_by_hand():
    # affinity: session % 2 -> 5, 3, 5 all go to replica 1; round-robin: request index % 2 -> 0, 1, 0
    work = _requests([5, 3, 5], [10, 10, 40], [5, 5, 5])
    assert route(work, "llama3-8b", 2, BIG, "affinity").replica.tolist() == [1, 1, 1]
    rr = route(work, "llama3-8b", 2, BIG, "round-robin")
    assert rr.replica.tolist() == [0, 1, 0] and rr.tier.tolist() == ["miss", "miss", "hbm"]
    assert rr.cached_len.tolist() == [0, 0, 15]  # session 5's first turn stored 10 + 5 tokens on replica 0
    # The same 100-token prompt sent twice: the cache holds 105 tokens (prompt + output) but prefill must still make
    # the first token, so at most 99 are reused.
    routed = route(_requests([0, 0], [100, 100], [5, 5]), "llama3-8b", 1, BIG)
    assert routed.cached_len.tolist() == [0, 99]
    assert routed.tier.tolist() == ["miss", "hbm"]


# --- The chat workload ---------------------------------------------------------------------------------------
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


# --- The chat simulation on several replicas ----------------------------------------------------------------
def test_hits_lower_ttft_and_an_hbm_hit_beats_a_host_hit():
    none = simulate_chat(CONFIG, CHAT, 4, CacheTiers(0.0, 0.0, 1e10))
    host = simulate_chat(CONFIG, CHAT, 4, CacheTiers(0.0, 1e12, 1e10))
    hbm = simulate_chat(CONFIG, CHAT, 4, BIG)
    assert hbm.p50_ttft_s() < host.p50_ttft_s() < none.p50_ttft_s()


def test_a_lone_request_on_the_second_replica_has_the_ttft_of_a_lone_request():
    # Session 1 on 2 replicas goes to replica 1: replica 0 has nothing to do, and must not stop the simulation.
    work = _requests([1], [4000], [8])
    chat = simulate_chat(CONFIG, work, 2, BIG)
    alone = simulate(CONFIG, trace_workload([(0.0, 4000, 8)])).ttft_s[0]
    assert chat.ttft_s.tolist() == pytest.approx([alone], rel=1e-12)
    assert chat.routed.replica.tolist() == [1] and chat.routed.tier.tolist() == ["miss"]
    assert chat.p50_ttft_s("miss") == pytest.approx(alone, rel=1e-12)


def test_the_median_ttft_of_a_tier_is_the_median_over_its_requests():
    work = chat_workload(n_sessions=20, turns=3, system_len=512, user_len=128, output_len=64, rate_per_s=2.0,
                         think_s=30.0, seed=1)
    chat = simulate_chat(CONFIG, work, 2, BIG)
    np.testing.assert_array_equal(chat.routed.tier, route(work, "llama3-8b", 2, BIG).tier)
    hbm = [t for t, tier in zip(chat.ttft_s.tolist(), chat.routed.tier.tolist()) if tier == "hbm"]
    assert len(hbm) == 40  # turns 1 and 2 of 20 conversations
    assert chat.p50_ttft_s("hbm") == pytest.approx(float(np.median(hbm)), rel=1e-12)


# --- A prefill against an existing cache (Pope et al.'s chatbot turn, chapter 12) -----------------------------------

CHAT_TURN = dict(model="palm-540b", chip="tpu-v4", n_chips=64, ffn_layout="2d-ws", attention_sharding="heads",
                 weight_dtype="int8", pad_heads=True)  # 48 heads on 64 chips: padded to 64, as Pope et al. did


def test_cached_prefill_reads_the_history_once_per_chip_by_hand():
    # PaLM 540B: 118 layers, one (multiquery) KV head of 256; bf16 keys and values: 2 x 118 x 256 x 2 B = 120,832 B
    # per token. Heads-sharded attention replicates that head, so each of the 64 chips reads all 1,920 cached tokens
    # at TPU v4's 1.2 TB/s: 1,920 x 120,832 / 1.2e12 = 193.3 us.
    turn = cached_prefill_cost(new_tokens=64, cached_tokens=1920, **CHAT_TURN)
    assert turn.kv_s == pytest.approx(1920 * 120_832 / 1.2e12, rel=1e-9)
    # The FLOPs, the weight read and the collectives are those of a 64-token prefill: 2 x 540e9-ish x 64 FLOPs.
    plain = layout_cost(CHAT_TURN["model"], "tpu-v4", 64, "prefill", 1, "2d-ws", "heads", context_len=64,
                        weight_dtype="int8", pad_heads=True)
    assert (turn.compute_s, turn.weight_s, turn.network_s, turn.tokens) == \
        (plain.compute_s, plain.weight_s, plain.network_s, 64)
    assert turn.total_s == pytest.approx(max(turn.compute_s, turn.weight_s + turn.kv_s) + turn.network_s, rel=1e-12)
    assert turn.n_chips == 64  # PaLM 540B's 48 query heads over 64 chips, padded as asked


def test_a_cached_prefix_is_read_and_held_as_the_sharding_splits_it_by_hand():
    # PaLM 540B, 64 sequences over 64 chips, batch-sharded: each chip holds one sequence's 1,000 cached tokens.
    turn = cached_prefill_cost("palm-540b", "tpu-v4", 64, 16, 1000, "2d-ws", "batch", batch=64)
    assert turn.kv_s == pytest.approx(1000 * 120_832 / 1.2e12, rel=1e-9)
    # LLaMA 3 70B on 8 v4 chips, KV heads split 8 ways: each chip reads its 1 of the 8 KV heads of 1,000 cached
    # tokens: 80 layers x 1 head x 128 dims x 2 (K and V) x 2 bytes x 1,000 = 40.96 MB, held on top of the prefill.
    cost = cached_prefill_cost("llama3-70b", "tpu-v4", 8, 64, 1000, "2d-ws", "heads")
    assert cost.kv_s * get_chip("tpu-v4").hbm_bandwidth == pytest.approx(80 * 128 * 2 * 2 * 1000, rel=1e-12)
    plain = cached_prefill_cost("llama3-70b", "tpu-v4", 8, 64, 0, "2d-ws", "heads")
    assert cost.bytes_per_chip - plain.bytes_per_chip == pytest.approx(80 * 128 * 2 * 2 * 1000, rel=1e-9)
    # 8 sequences on 8 v4 chips, batch-sharded: each chip holds its one sequence with all 8 KV heads:
    # 1 x 1,000 tokens x 80 layers x 8 heads x 128 dims x 2 (K and V) x 2 bytes = 327.68 MB.
    cost = cached_prefill_cost("llama3-70b", "tpu-v4", 8, 64, 1000, "2d-ws", "batch", batch=8)
    assert cost.kv_s * get_chip("tpu-v4").hbm_bandwidth == pytest.approx(1000 * 80 * 8 * 128 * 2 * 2, rel=1e-12)


@settings(max_examples=examples(40), deadline=None)
@given(new=st.integers(1, 4096), cached=st.integers(0, 32768), more=st.integers(1, 32768))
def test_cached_prefill_grows_with_the_history_and_is_a_plain_prefill_without_one(new, cached, more):
    base = cached_prefill_cost(new_tokens=new, cached_tokens=0, **CHAT_TURN)
    plain = layout_cost(CHAT_TURN["model"], "tpu-v4", 64, "prefill", 1, "2d-ws", "heads", context_len=new,
                        weight_dtype="int8", pad_heads=True)
    assert base.total_s == plain.total_s and base.kv_s == 0.0
    shorter = cached_prefill_cost(new_tokens=new, cached_tokens=cached, **CHAT_TURN)
    longer = cached_prefill_cost(new_tokens=new, cached_tokens=cached + more, **CHAT_TURN)
    assert longer.total_s >= shorter.total_s and longer.kv_s > shorter.kv_s
    assert longer.compute_s == shorter.compute_s == plain.compute_s


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
LONE = _requests([1], [4000], [8])


@for_each([
    *[(lambda kwargs=kwargs: CacheTiers(**{"hbm_bytes": 1.0, "host_bytes": 1.0, "host_bandwidth": 1.0, **kwargs}),
       rf"\b{name}\b") for kwargs, name in ((dict(hbm_bytes=-1.0), "hbm_bytes"), (dict(host_bytes=-1.0), "host_bytes"),
                                             (dict(host_bandwidth=0.0), "host_bandwidth"))],
    (lambda: simulate_chat(CONFIG, LONE, 2, BIG).p50_ttft_s("hbm"), r"\btier 'hbm'"),  # a tier without requests
    (lambda: simulate_chat(CONFIG, LONE, 2, BIG).p50_ttft_s("disk"), r"unknown tier 'disk'"),
    (lambda: route(LONE, "llama3-8b", 2, BIG).hit_rate("disk"), r"unknown tier 'disk'"),
    (lambda: route("chat", "llama3-8b", 1, CacheTiers(1e9, 1e9, 1e9)), "workload must be a ChatWorkload.*got str"),
    (lambda: route(LONE, "llama3-8b", 1, "tiers"), "tiers must be a CacheTiers.*got str"),
    (lambda: chat_workload(2**20, 2**10, 100, 20, 20, 1.0, 5.0), "each one in Python; use fewer sessions or turns"),
    (lambda: simulate_chat("llama3-8b", None, 1, None), "config must be a ServingConfig, got str"),
    # PaLM 540B's 48 query heads over 64 chips: refused unless pad_heads=True (as layout_cost does)
    (lambda: cached_prefill_cost("palm-540b", "tpu-v4", 64, 64, 1920, "2d-ws", "heads", weight_dtype="int8"),
     r"\bpad_heads\b"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
