"""Claims S1-S6 of book/claims.md, the pure-math half (the emulated-mesh half lives with the sharded model).

Every number a source publishes is read from the claims ledger (`published(key)`).
"""

import pytest

from scaling_lib.book.claims import REL, published, published_range
from scaling_lib.book.claims.sharding import S1_ROUNDED_BETA
from scaling_lib.collectives import collective_time, latency_bound_bytes
from scaling_lib.dtypes import bytes_per_element
from scaling_lib.hardware import get_chip
from scaling_lib.models import get_model
from scaling_lib.sharding import (beta, fsdp_decode_cost, kv_cache_sharding, max_decode_model_parallelism,
                                  max_prefill_model_parallelism)


def test_s1_decode_model_parallelism_64_ways_on_v5e():
    assert beta("tpu-v5e") == pytest.approx(published("S1 beta v5e"), rel=REL)  # the Scaling Book rounds this to 8
    assert max_decode_model_parallelism(16384, 32, S1_ROUNDED_BETA) == pytest.approx(published("S1 64 ways"), rel=REL)
    # With the unrounded beta the bound is a little tighter.
    assert max_decode_model_parallelism(16384, 32, beta("tpu-v5e")) < published("S1 64 ways")


def test_s2_ironwood_beta_37_and_llama3_70b_24_ways_at_batch_32():
    assert beta("ironwood") == pytest.approx(published("S2 beta Ironwood"), rel=REL)
    ways = max_decode_model_parallelism(get_model("llama3-70b").d_ff, 32, beta("ironwood"))
    assert ways == pytest.approx(published("S2 24 ways"), rel=REL)


def test_s3_decode_collectives_are_latency_bound_below_the_threshold_where_the_two_terms_meet():
    payload = 16 * 8192 * bytes_per_element("int8")  # B = 16 tokens of D = 8192 activations in int8
    assert payload == pytest.approx(published("S3 131 kB latency-bound"), rel=REL)
    assert latency_bound_bytes("tpu-v5e", 8) == pytest.approx(published("S3 v5e threshold"), rel=REL)
    assert latency_bound_bytes("ironwood", 8) == pytest.approx(published("S3 Ironwood threshold"), rel=REL)
    assert collective_time("all-gather", payload, "tpu-v5e", 8).bound == "latency"
    assert collective_time("all-gather", 10 * latency_bound_bytes("tpu-v5e", 8), "tpu-v5e", 8).bound == "bandwidth"
    # The threshold is where the bandwidth and latency terms meet.
    for chip in ("tpu-v5e", "ironwood"):
        threshold = latency_bound_bytes(chip, 8)
        at = collective_time("all-gather", threshold, chip, 8)
        assert at.bandwidth_s == pytest.approx(at.latency_s, rel=1e-9)


def test_s4_fsdp_in_decode_is_an_order_of_magnitude_regression():
    order_of_magnitude, _ = published_range("S4")
    for chip, n_chips in (("tpu-v5e", 8), ("tpu-v5e", 16), ("ironwood", 8)):
        cost = fsdp_decode_cost("llama3-70b", chip, n_chips)
        assert cost.slowdown >= order_of_magnitude
        assert cost.slowdown == pytest.approx((n_chips - 1) * beta(chip), rel=1e-9)


def test_s5_kv_cache_sharded_by_heads_up_to_k_then_by_batch():
    llama3 = get_model("llama3-70b")
    assert kv_cache_sharding(llama3.n_kv_heads, 32, 8).batch_shards == 1
    assert kv_cache_sharding(llama3.n_kv_heads, 32, 8).all_to_alls_per_attention_layer == 0
    sixteen = kv_cache_sharding(llama3.n_kv_heads, 32, 16)
    assert (sixteen.head_shards, sixteen.batch_shards) == (8, 2)  # K = 8 ways by heads, 16 / 8 by batch
    assert sixteen.all_to_alls_per_attention_layer == published("S5")
    mqa = kv_cache_sharding(1, 64, 8)  # multiquery: nothing to split by heads
    assert (mqa.head_shards, mqa.batch_shards) == (1, 8)


def test_s6_prefill_model_parallelism_about_f_over_2200_on_v5e():
    chip = get_chip("tpu-v5e")
    assert chip.peak_flops("bf16") / chip.ici_bidirectional == pytest.approx(published("S6 C / W_ici,bidi"), rel=REL)
    assert max_prefill_model_parallelism(chip, 28672) == pytest.approx(published("S6"), rel=REL)
