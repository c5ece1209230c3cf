"""scaling_lib.layouts (closed form): Pope et al.'s partitioning layouts, their collectives, the context a layout
leaves room for, and the argument checks. Values are worked by hand from the model shapes (PaLM 540B: L = 118,
D = 18,432, F = 73,728, N = 48 query heads, K = 1 KV head, H = 256) and TPU v4 (32 GiB, 1.2 TB/s of HBM); the claims
of chapter 11 are in test_claims_layouts.py, the JAX side in tests/tiny/test_layouts.py."""

import math

import pytest

from scaling_lib.layouts import (
    best_layout,
    comm_volume_curves,
    ffn_collectives,
    ffn_layer_time,
    layout_switch_points,
    wg_optimal_gather_size,
    ws_2d_optimal_x,
)

SLICE = (4, 4, 4)


# --- closed forms by hand ---------------------------------------------------------------------------------------------
def test_decode_kv_read_of_one_ffn_layer_by_hand():
    # PaLM 540B, 64 chips, 64 sequences of 2,048 tokens: 2 x 118 x 1 x 256 x 2 B per token over 118 layers = 1,024 B
    # per token and layer; 64 x 2,048 x 1,024 B / 64 chips / 1.2e12 B/s = 1.7476 us.
    layer = ffn_layer_time("2d-ws", "palm-540b", "tpu-v4", SLICE, 64, "decode", context_len=2048)
    assert layer.kv_memory_s == pytest.approx(64 * 2048 * 1024 / 64 / 1.2e12, rel=1e-12)


@pytest.mark.parametrize("layout, ops", [
    ("1d-ws", ["all-gather", "reduce-scatter"]),
    ("2d-ws", ["all-gather", "reduce-scatter", "all-gather", "reduce-scatter"]),
    ("wg-x", ["all-gather", "all-gather", "all-gather", "reduce-scatter"]),
])
def test_each_ffn_layout_runs_its_collectives_in_order(layout, ops):
    tokens = 4096 if layout == "wg-x" else 64
    assert [c.op for c in ffn_collectives(layout, "palm-540b", tokens, SLICE)] == ops


def test_weight_gathered_optimal_gather_size_by_hand():
    # N = sqrt(T n / F) = sqrt(4,096 x 64 / 73,728) = 1.8856
    assert wg_optimal_gather_size(4096, 64, 73728) == pytest.approx(math.sqrt(4096 * 64 / 73728), rel=1e-12)


# --- argument checks --------------------------------------------------------------------------------------------------


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


def test_the_scaling_book_convention_puts_x_at_the_root_of_n_over_8_when_f_is_4d():
    # Scaling Book ch. 7 Q7: minimizing D/X + 2 F X / n with F = 4 D gives X = sqrt(n / 8); 64 chips: sqrt(8).
    assert ws_2d_optimal_x(64, 1024, 4096, "scaling-book") == pytest.approx(math.sqrt(8), rel=1e-12)
    assert ws_2d_optimal_x(64, 1024, 4096, "pope") == pytest.approx(math.sqrt(16), rel=1e-12)
