"""scaling_lib.layouts (closed form): Pope et al.'s partitioning layouts, their collectives, the context a layout
leaves room for, and the argument checks. Values are worked by hand from the model shapes (PaLM 540B: L = 118,
D = 18,432, F = 73,728, N = 48 query heads, K = 1 KV head, H = 256) and TPU v4 (32 GiB, 1.2 TB/s of HBM); the claims
of chapter 11 are in test_claims_layouts.py, the JAX side in tests/tiny/test_layouts.py."""

import math

import pytest

from scaling_lib.layouts import (Collective, attention_collectives, best_layout, comm_volume_curves,
                                 context_length_table, ffn_collectives, ffn_layer_time, kv_versus_weights,
                                 layout_switch_points, max_context_length, ring_bytes_sent, wg_optimal_gather_size)

SLICE = (4, 4, 4)


# --- closed forms by hand ---------------------------------------------------------------------------------------------
def test_decode_kv_read_of_one_ffn_layer_by_hand():
    # PaLM 540B, 64 chips, 64 sequences of 2,048 tokens: 2 x 118 x 1 x 256 x 2 B per token over 118 layers = 1,024 B
    # per token and layer; 64 x 2,048 x 1,024 B / 64 chips / 1.2e12 B/s = 1.7476 us.
    layer = ffn_layer_time("2d-ws", "palm-540b", "tpu-v4", SLICE, 64, "decode", context_len=2048)
    assert layer.kv_memory_s == pytest.approx(64 * 2048 * 1024 / 64 / 1.2e12, rel=1e-12)


def test_heads_sharded_context_of_multihead_palm_on_8_chips_by_hand():
    # 48 KV heads of 128 on 8 chips: 6 per chip; 2 x 118 x 6 x 128 x 2 B = 362,496 B per token for each of the 16
    # sequences; 0.3 x 32 GiB / (16 x 362,496 B) = 1,777.2 -> 1,777 tokens.
    assert max_context_length("palm-540b-multihead", "tpu-v4", 8, 16, "heads") == 1777
    assert math.floor(0.3 * 32 * 2**30 / (16 * 362_496)) == 1777


def test_a_ring_all_gather_sends_all_but_the_chips_own_shard():
    assert ring_bytes_sent(Collective("all-gather", "weights", 1.6e6, (4, 4))) == pytest.approx(1.5e6, rel=1e-12)


@pytest.mark.parametrize("layout, ops", [
    ("1d-ws", ["all-gather", "reduce-scatter"]),
    ("2d-ws", ["all-gather", "reduce-scatter", "all-gather", "reduce-scatter"]),
    ("wg-x", ["all-gather", "all-gather", "all-gather", "reduce-scatter"]),
])
def test_each_ffn_layout_runs_its_collectives_in_order(layout, ops):
    tokens = 4096 if layout == "wg-x" else 64
    assert [c.op for c in ffn_collectives(layout, "palm-540b", tokens, SLICE)] == ops


def test_batch_sharded_multiquery_attention_all_to_all_by_hand():
    # 512 x 48 heads x 256 bf16 over 64 chips: 196,608 B per all-to-all.
    assert attention_collectives("batch", 512, 48, 256, SLICE)[0].bytes_per_chip == 2 * 512 * 48 * 256 / 64


def test_batch_sharded_attention_on_two_chips_needs_both_all_to_alls():
    # Multiquery: with the KV head unsplittable, 2 chips split the batch and need both all-to-alls.
    two = attention_collectives("batch", 8, 4, 16, (2,))
    assert [(c.op, c.tensor) for c in two] == [("all-to-all", "activations")] * 2


def test_weight_gathered_optimal_gather_size_by_hand():
    # N = sqrt(T n / F) = sqrt(4,096 x 64 / 73,728) = 1.8856
    assert wg_optimal_gather_size(4096, 64, 73728) == pytest.approx(math.sqrt(4096 * 64 / 73728), rel=1e-12)


def test_a_collective_of_one_second_by_hand_in_either_convention():
    # 270e9 bytes per chip gathered over a 4 x 4 x 4 v4 slice take one second.
    gather = Collective("all-gather", "weights", 270e9, SLICE)
    assert gather.seconds("tpu-v4") == gather.seconds("tpu-v4", "pope") == pytest.approx(1.0, rel=1e-12)


def test_an_unknown_convention_is_refused():
    with pytest.raises(ValueError, match="unknown convention 'x'"):
        Collective("all-gather", "weights", 270e9, SLICE).seconds("tpu-v4", "x")


def test_an_empty_context_holds_no_kv_cache():
    assert kv_versus_weights("palm-540b", 8, 0).kv_bytes == 0.0


def test_context_length_table_lists_the_multihead_model_then_palm_per_sharding():
    rows = context_length_table("tpu-v4", 64, (128,))
    assert [(r.model, r.head_dim) for r in rows] == [("palm-540b-multihead", 128), ("palm-540b", 256),
                                                      ("palm-540b", 256)]


# --- argument checks --------------------------------------------------------------------------------------------------
def test_context_length_table_refuses_a_batch_of_zero():
    with pytest.raises(ValueError, match="batches entry must be a positive integer"):
        context_length_table("tpu-v4", 64, (0,))


def test_comm_volume_curves_refuse_a_negative_token_count():
    with pytest.raises(ValueError, match="tokens must be positive"):
        comm_volume_curves("palm-540b", SLICE, [64, -1])


def test_a_layout_choice_refuses_an_unknown_layout():
    with pytest.raises(ValueError, match="unknown layout '3d-ws'"):
        best_layout("palm-540b", "tpu-v4", SLICE, 64).time("3d-ws")


@pytest.mark.parametrize("tokens_range, message", [((-1, 10), "tokens_range start must be positive"),
                                                   ((10, -5), "tokens_range stop must be positive"),
                                                   ((10, 10), r"tokens_range must be increasing, got \(10, 10\)")])
def test_layout_switch_points_refuse_a_range_that_is_not_increasing_and_positive(tokens_range, message):
    with pytest.raises(ValueError, match=message):
        layout_switch_points("palm-540b", "tpu-v4", SLICE, tokens_range=tokens_range)


def test_max_context_length_refuses_a_kv_fraction_of_zero_and_says_what_it_is():
    with pytest.raises(ValueError, match=r"kv_fraction must be in \(0, 1\], got 0: it is the share of HBM kept"):
        max_context_length("palm-540b", "tpu-v4", 64, 128, "batch", kv_fraction=0)
