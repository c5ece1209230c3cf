"""scaling_lib.sequence_sharding: a KV cache split along the sequence (chapter 14). Values are worked by hand from
PaLM 540B's shape (L = 118, N = 48 query heads, K = 1 KV head, H = 256) and TPU v4 (1 us per hop, 45 GB/s links)."""

import pytest

from scaling_lib.memory import kv_cache_bytes
from scaling_lib.sequence_sharding import sequence_sharded_attention

from tests import for_each

PALM, V4 = "palm-540b", "tpu-v4"


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


def test_the_combined_array_is_b_n_h_plus_one_values_and_the_cache_is_read_in_its_own_format():
    # batch 1, fp32: 1 x 48 heads x (256 + 1) x 4 B = 49,344 B; in bf16 half of it.
    split = sequence_sharded_attention(PALM, V4, 64, batch=1, context_len=65536)
    assert split.n_chips == 64 and split.combine_bytes == 49_344
    half = sequence_sharded_attention(PALM, V4, 64, batch=1, context_len=65536, activation_dtype="bf16")
    assert half.combine_bytes == 24_672
    # 65,536 x 118 x 2 x 256 x 1 B / 64 = 61,865,984 B per chip
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


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: sequence_sharded_attention(PALM, V4, 64, batch=1, context_len=65536, mesh_shape=(4, 4)),
     r"\bmesh_shape\b \(4, 4\) holds 16 chips, not n_chips=64"),
    (lambda: sequence_sharded_attention(PALM, V4, 64, batch=1, context_len=1000),
     r"context_len=1000 does not split into 64 equal slices"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
