"""The chat prefix cache (scaling_lib.prefix_cache): tiers, routing and what the replicas' KV format stores."""

import pytest

from scaling_lib.memory import kv_bytes_per_token
from scaling_lib.hardware import get_chip
from scaling_lib.prefix_cache import CacheTiers, TieredLru, cached_prefill_cost, chat_workload, route, simulate_chat
from scaling_lib.simulator import ServingConfig


def test_a_prefix_found_twice_keeps_its_token_count():
    cache = TieredLru(CacheTiers(hbm_bytes=10.0, host_bytes=10.0, host_bandwidth=1e9))
    cache.store("a", 42, 1.0)
    assert cache.lookup("a") == ("hbm", 42)
    assert cache.lookup("a") == ("hbm", 42)  # the hit was put back whole


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


def test_route_names_the_type_it_was_given_instead_of_a_workload():
    with pytest.raises(ValueError, match="workload must be a ChatWorkload.*got str"):
        route("chat", "llama3-8b", 1, CacheTiers(1e9, 1e9, 1e9))


def test_a_cached_prefix_read_under_heads_sharding_by_hand():
    # LLaMA 3 70B on 8 v4 chips, KV heads split 8 ways: each chip reads its 1 of the 8 KV heads of 1,000 cached
    # tokens: 80 layers x 1 head x 128 dims x 2 (K and V) x 2 bytes x 1,000 = 40.96 MB.
    cost = cached_prefill_cost("llama3-70b", "tpu-v4", 8, 64, 1000, "2d-ws", "heads")
    assert cost.kv_s * get_chip("tpu-v4").hbm_bandwidth == pytest.approx(80 * 128 * 2 * 2 * 1000, rel=1e-12)


def test_chat_errors_name_what_they_were_given_and_the_way_out():
    with pytest.raises(ValueError, match="each one in Python; use fewer sessions or turns"):
        chat_workload(2**20, 2**10, 100, 20, 20, 1.0, 5.0)
    chat = chat_workload(n_sessions=1, turns=2, system_len=100, user_len=10, output_len=20, rate_per_s=1.0,
                         think_s=5.0)
    with pytest.raises(ValueError, match="tiers must be a CacheTiers.*got str"):
        route(chat, "llama3-8b", 1, "tiers")


def test_a_cached_prefix_is_held_in_hbm_on_top_of_the_prefill_and_configs_are_checked():
    plain = cached_prefill_cost("llama3-70b", "tpu-v4", 8, 64, 0, "2d-ws", "heads")
    cached = cached_prefill_cost("llama3-70b", "tpu-v4", 8, 64, 1000, "2d-ws", "heads")
    assert cached.bytes_per_chip - plain.bytes_per_chip == pytest.approx(80 * 128 * 2 * 2 * 1000, rel=1e-9)
    with pytest.raises(ValueError, match="config must be a ServingConfig, got str"):
        simulate_chat("llama3-8b", None, 1, None)
