"""Independent oracles for the closed forms that planted bugs used to slip past (issue 14).

Each expected value is either a brute-force reference written without the library's formula, or a hand-worked case
whose arithmetic is spelled out from the hardware table's inputs (TPU v5e: one ICI link 45 GB/s each way, so
9e10 B/s both ways; 1 us per hop; 8.2e11 B/s of HBM) and the model's shape (LLaMA-3-70B: L = 80, D = 8,192, N = 64,
K = 8, H = 128). The planted bugs these kill: one all-to-all instead of two in `decode_step_components`; the
chunked engine skipping the prefix KV read; KV head shards min(K, n) instead of gcd(K, n).
"""

import itertools

import pytest

from scaling_lib.inference import prefill_time
from scaling_lib.sharding import decode_step_components, kv_cache_sharding
from scaling_lib.simulator import ServingConfig, simulate, trace_workload


# --- the KV sharding rule against brute force, non-power-of-two head and mesh counts included ----------------------
def reference_kv_split(n_kv_heads, n_shards):
    """Try every way to split n shards as (heads h) x (batch n / h): the KV heads must split evenly over h, and the
    rule takes the largest such h (head sharding is free; batch sharding costs two all-to-alls per layer)."""
    best = max(h for h in range(1, n_shards + 1) if n_shards % h == 0 and n_kv_heads % h == 0)
    return best, n_shards // best


@pytest.mark.parametrize("n_kv_heads, n_shards", list(itertools.product((1, 2, 3, 5, 6, 8, 12, 40), range(1, 25))))
def test_kv_cache_sharding_matches_brute_force(n_kv_heads, n_shards):
    head, batch = reference_kv_split(n_kv_heads, n_shards)
    rule = kv_cache_sharding(n_kv_heads, batch=n_shards * 2, n_shards=n_shards)
    assert (rule.head_shards, rule.batch_shards) == (head, batch)
    assert rule.all_to_alls_per_attention_layer == (2 if batch > 1 else 0)


@pytest.mark.parametrize("n_kv_heads, n_shards, expected", [
    (8, 12, (4, 3)),  # 12 chips, 8 KV heads: 4 heads-ways (8 / 4 = 2 heads each), the other 3 ways by batch
    (6, 9, (3, 3)),
    (5, 10, (5, 2)),
    (3, 8, (1, 8)),  # nothing in common: all batch
    (40, 16, (8, 2)),  # LLaMA-2-13B's 40 heads on 16 chips
])
def test_kv_cache_sharding_hand_cases(n_kv_heads, n_shards, expected):
    rule = kv_cache_sharding(n_kv_heads, 2 * n_shards, n_shards)
    assert (rule.head_shards, rule.batch_shards) == expected


# --- the all-to-all term of decode_step_components, worked by hand -------------------------------------------------
def test_decode_step_components_ici_term_llama3_70b_16_v5e_batch_32_by_hand():
    # 16 chips in a ring (a v5e axis of 16 wraps), K = 8: the KV cache splits 8 ways by heads and 2 ways by batch.
    # Per layer, 2 all-reduces of B D bf16 = 32 x 8,192 x 2 = 524,288 B over 16 chips, each latency + bandwidth:
    #   2 rounds x 8 hops x 1 us = 16 us, plus 2 x 524,288 / 9e10 = 11.65 us.
    # and 2 all-to-alls of B N H bf16 = 32 x 64 x 128 x 2 = 524,288 B over the 2 batch shards, an axis of 2 that does
    # not wrap: one link between them, each sends a quarter of the array one way at 4.5e10: 524,288 / 4 / 4.5e10,
    # plus 1 hop.
    all_reduce = 16e-6 + 2 * 524_288 / 9e10
    all_to_all = 1e-6 + 524_288 / 4 / 4.5e10
    parts = decode_step_components("llama3-70b", "tpu-v5e", 16, 32, 8192)
    assert parts.ici_s == pytest.approx(80 * (2 * all_reduce + 2 * all_to_all), rel=1e-12)  # 5.05 ms
    assert parts.ici_latency_s == pytest.approx(80 * 2 * (16e-6 + 1e-6), rel=1e-12)
    # With 8 chips the KV heads absorb the whole split: no all-to-all, only the two all-reduces. An axis of 8 v5e
    # chips is a line: 2 passes of 7 hops, and each end chip takes in 7/8 of the array over its one link, per pass.
    eight = decode_step_components("llama3-70b", "tpu-v5e", 8, 32, 8192, check_capacity=False)  # 227 GB > 128 GB
    assert eight.ici_s == pytest.approx(80 * 2 * (14e-6 + 2 * 7 / 8 * 524_288 / 4.5e10), rel=1e-12)
    assert eight.ici_latency_s == pytest.approx(80 * 2 * 14e-6, rel=1e-12)


def test_decode_step_components_on_a_4x4_torus_by_hand():
    # Same step on a 4 x 4 v5e slice, which has no wraparound (no axis spans 16 chips). Per axis (a line of 4) the
    # all-reduce's bandwidth term is 2 x 3/4 x 524,288 / 4.5e10 = 17.48 us; the two axes' links run at once, so
    # half of it, 8.74 us; its latency is 2 rounds x 3 hops per axis, over 2 axes one after the other = 12 us.
    # The all-to-all is over the 2 batch shards as before.
    parts = decode_step_components("llama3-70b", "tpu-v5e", 16, 32, 8192, mesh_shape=(4, 4))
    all_reduce = 12e-6 + 2 * 3 / 4 * 524_288 / 4.5e10 / 2
    all_to_all = 1e-6 + 524_288 / 4 / 4.5e10
    assert parts.ici_s == pytest.approx(80 * (2 * all_reduce + 2 * all_to_all), rel=1e-12)


# --- the chunked engine reads the cached prefix of a prompt for every later chunk ---------------------------------
def test_chunked_engine_second_chunk_reads_the_first_chunks_kv_by_hand():
    # One 1,024-token prompt, one output token, chunks of 512 on 16 v5e (LLaMA-3-70B, bf16, MFU 0.4). Each chunk
    # costs max(weight read, its FLOPs) -- the FLOPs win at 512 tokens -- and the second chunk also attends to the
    # first chunk's 512 cached tokens: 512 x 327,680 B (2 L K H x 2 B = 2 x 80 x 8 x 128 x 2) / (16 x 8.2e11 B/s)
    # = 12.7875 us.
    config = ServingConfig("llama3-70b", "tpu-v5e", n_chips=16, max_batch=8, max_context_len=4096,
                           prefill_chunk_tokens=512)
    result = simulate(config, trace_workload([(0.0, 1024, 1)]), "chunked")
    chunk = prefill_time("llama3-70b", "tpu-v5e", 16, 512, 0.4)
    prefix_read = 512 * 327_680 / (16 * 8.2e11)
    assert prefix_read == pytest.approx(12.7875e-6, rel=1e-5)
    assert result.ttft_s[0] - 2 * chunk == pytest.approx(prefix_read, rel=1e-6)
    # Three chunks: the third reads 1,024 cached tokens, so the reads add up to (512 + 1,024) tokens' worth.
    longer = simulate(config, trace_workload([(0.0, 1536, 1)]), "chunked")
    assert longer.ttft_s[0] - 3 * chunk == pytest.approx(3 * prefix_read, rel=1e-6)
