"""The chat prefix cache (scaling_lib.prefix_cache): tiers, routing and what the replicas' KV format stores."""

import pytest

from scaling_lib.memory import kv_bytes_per_token
from scaling_lib.prefix_cache import CacheTiers, TieredLru, chat_workload, route, simulate_chat
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
    assert simulate_chat(fp8, chat, 1, tiers).routed.tier.tolist() == ["miss", "hbm"]
    bf16 = ServingConfig("llama3-8b", "h100", 1, 8, 4096, kv_dtype="bf16")
    assert simulate_chat(bf16, chat, 1, tiers).routed.tier.tolist() == ["miss", "host"]


def test_route_names_the_type_it_was_given_instead_of_a_workload():
    with pytest.raises(ValueError, match="workload must be a ChatWorkload.*got str"):
        route("chat", "llama3-8b", 1, CacheTiers(1e9, 1e9, 1e9))
