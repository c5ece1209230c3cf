"""Hop counts of collectives, and what they do to a model-parallel decode step (chapter 7).

The oracle is a hand count on a bidirectional ring: chunks travel both ways, so one pass reaches the farthest chip
after ceil(n / 2) hops, and an all-reduce is two passes (a reduce-scatter, then an all-gather).
"""

import math

import pytest

from scaling_lib.hardware import get_chip
from scaling_lib.memory import param_bytes
from scaling_lib.models import get_model
from scaling_lib.sharding import (TORUS_SHAPES, beta, collective_hops, collective_time, decode_hops_per_layer,
                                  decode_step_components, max_decode_model_parallelism)


@pytest.mark.parametrize("n, one_pass", [(1, 0), (2, 1), (4, 2), (7, 4), (8, 4), (16, 8)])
def test_a_pass_round_a_bidirectional_ring_is_ceil_n_over_2_hops_and_an_all_reduce_two_passes(n, one_pass):
    for op in ("all-gather", "reduce-scatter", "all-to-all"):
        assert collective_hops(op, n) == one_pass
    assert collective_hops("all-reduce", n) == 2 * one_pass


def test_the_chapter_7_quiz_all_reduce_on_a_ring_of_8_takes_4_hops_per_pass_and_8_us():
    assert collective_hops("all-gather", 8) == 4
    tiny_payload = 16 * 8192 * 2  # latency-bound: far below 8 x W_ici x t_hop on Ironwood
    assert collective_time("all-reduce", tiny_payload, "ironwood", 8).latency_s == pytest.approx(8e-6)


def test_collective_hops_rejects_an_unknown_op_and_a_zero_ring():
    with pytest.raises(ValueError, match="unknown collective 'broadcast'"):
        collective_hops("broadcast", 8)
    with pytest.raises(ValueError, match="n_shards"):
        collective_hops("all-gather", 0)


@pytest.mark.parametrize("mesh, hops", [
    ((8,), 2 * 2 * 4),                    # ring of 8: 2 all-reduces of 8 hops; K = 8 = n, so no batch split
    ((2, 2, 2), 2 * 2 * (1 + 1 + 1)),     # K = 8 = n: no all-to-all
    ((4, 4), 2 * 2 * (2 + 2) + 2 * 1),    # 16 chips: batch split 2 ways, two all-to-alls of 1 hop
    ((8, 8), 2 * 2 * (4 + 4) + 2 * 4),    # 64 chips: batch split 8 ways, two all-to-alls of 4 hops
])
def test_decode_hops_per_layer_counted_by_hand_for_llama3_70b(mesh, hops):
    assert decode_hops_per_layer("llama3-70b", math.prod(mesh), 64, mesh) == hops


def test_a_latency_bound_decode_step_spends_l_times_h_hops_on_ici():
    llama = get_model("llama3-70b")
    for n, mesh in ((32, (4, 4, 2)), (64, (4, 4, 4))):  # Ironwood, batch 64: every collective latency-bound
        parts = decode_step_components(llama, "ironwood", n, 64, 8192, mesh_shape=mesh)
        assert parts.ici_latency_s == pytest.approx(parts.ici_s)
        hop_time = llama.n_layers * decode_hops_per_layer(llama, n, 64, mesh) * get_chip("ironwood").ici_hop_latency
        assert parts.ici_s == pytest.approx(hop_time, rel=1e-12)


def test_chapter_7_tori_hold_their_chip_counts():
    for tori in TORUS_SHAPES.values():
        assert all(math.prod(shape) == n for n, shape in tori.items())


def _first_ici_bound(chip, batch):
    tori = TORUS_SHAPES[chip]
    return next(n for n in sorted(tori)
                if decode_step_components("llama3-70b", chip, n, batch, 8192, mesh_shape=tori[n],
                                          check_capacity=False).ici_bound)  # chapter 7's figure: every n


def _first_past_hop_latency(chip, batch):
    """The first chip count whose L h(n) t_hop exceeds its weight read P_bytes / (n W_hbm)."""
    c, llama, tori = get_chip(chip), get_model("llama3-70b"), TORUS_SHAPES[chip]
    return next(n for n in sorted(tori)
                if llama.n_layers * decode_hops_per_layer(llama, n, batch, tori[n]) * c.ici_hop_latency
                > param_bytes(llama, "bf16") / (n * c.hbm_bandwidth))


@pytest.mark.parametrize("chip", ["tpu-v5e", "ironwood"])
def test_chapter_7_crossing_is_set_by_hop_latency_not_by_f_over_b_beta(chip):
    # Where the figure's ICI line overtakes the weight line is where hop latency meets the weight read, and it stays
    # put as the batch goes from 32 to 128, while the bandwidth estimate F / (B beta) moves 4-fold.
    crossings = {batch: _first_ici_bound(chip, batch) for batch in (32, 64, 128)}
    assert set(crossings.values()) == {_first_past_hop_latency(chip, 64)}
    f_over_b_beta = {b: max_decode_model_parallelism(get_model("llama3-70b").d_ff, b, beta(chip)) for b in (32, 128)}
    assert f_over_b_beta[32] == pytest.approx(4 * f_over_b_beta[128])
