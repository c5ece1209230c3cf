"""Hop counts of collectives, and what they do to a model-parallel decode step (chapter 7).

The oracle for hops is a breadth-first search on the ring (or line) graph of n chips: one pass of a bidirectional
collective lasts until the farthest chip is reached, an all-reduce is two passes (a reduce-scatter, then an
all-gather).
"""

import collections
import math

import pytest

from scaling_lib.collectives import collective_time, slice_hops
from scaling_lib.frontier import layer_collectives, layout_cost
from scaling_lib.hardware import get_chip
from scaling_lib.hops import collective_hops
from scaling_lib.models import get_model
from scaling_lib.sharding import (TORUS_SHAPES, beta, decode_hops_per_layer, decode_step_components,
                                  max_decode_model_parallelism)


def farthest_by_bfs(n, wraparound):
    """Most hops from chip 0 to any chip, by breadth-first search on a ring (or a line) of n chips."""
    neighbours = {i: {j for j in (i - 1, i + 1) if 0 <= j < n} for i in range(n)}
    if wraparound and n > 1:
        neighbours[0].add(n - 1)
        neighbours[n - 1].add(0)
    seen, queue = {0: 0}, collections.deque([0])
    while queue:
        i = queue.popleft()
        for j in neighbours[i] - seen.keys():
            seen[j] = seen[i] + 1
            queue.append(j)
    return max(seen.values())


@pytest.mark.parametrize("n", range(1, 18))
@pytest.mark.parametrize("wraparound", [True, False])
def test_a_pass_reaches_the_farthest_chip_found_by_breadth_first_search_and_an_all_reduce_is_two(n, wraparound):
    one_pass = farthest_by_bfs(n, wraparound)
    for op in ("all-gather", "reduce-scatter", "all-to-all"):
        assert collective_hops(op, n, wraparound) == one_pass
    assert collective_hops("all-reduce", n, wraparound) == 2 * one_pass


def test_on_an_odd_ring_the_farthest_chip_is_floor_n_over_2_hops_away():
    assert collective_hops("all-gather", 7) == 3  # chip 3 is 3 hops one way, 4 the other
    assert collective_hops("all-reduce", 9) == 8


def test_the_chapter_7_quiz_all_reduce_on_a_ring_of_8_takes_4_hops_per_pass_and_8_us():
    assert collective_hops("all-gather", 8) == 4
    tiny_payload = 16 * 8192 * 2  # latency-bound: far below 8 x W_ici x t_hop on Ironwood
    assert collective_time("all-reduce", tiny_payload, "ironwood", 8).latency_s == pytest.approx(8e-6)


def test_collective_hops_rejects_an_unknown_op_and_a_zero_ring():
    with pytest.raises(ValueError, match="unknown collective op 'broadcast'"):
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
    # Ironwood 4 x 4 x 4 is a whole cube: every axis wraps, and the ring hops of decode_hops_per_layer are the ones
    # paid; batch 64 keeps the bandwidth part small next to them.
    parts = decode_step_components(llama, "ironwood", 64, 64, 8192, mesh_shape=(4, 4, 4))
    hop_time = llama.n_layers * decode_hops_per_layer(llama, 64, 64, (4, 4, 4)) * get_chip("ironwood").ici_hop_latency
    assert parts.ici_latency_s == pytest.approx(hop_time, rel=1e-12)
    assert hop_time < parts.ici_s < 1.5 * hop_time
    # 4 x 4 x 2 is less than a cube: no wraparound, each axis a line of a - 1 hops a pass.
    small = decode_step_components(llama, "ironwood", 32, 64, 8192, mesh_shape=(4, 4, 2))
    line_hops = 2 * 2 * (3 + 3 + 1) + 2 * collective_hops("all-to-all", 4, wraparound=True)  # batch split 4 ways
    assert small.ici_latency_s == pytest.approx(llama.n_layers * line_hops * 1e-6, rel=1e-12)


@pytest.mark.parametrize("chip", sorted(TORUS_SHAPES))
def test_chapter_7_table_and_its_exercise_count_the_same_hops_on_each_slice_s_own_links(chip):
    # One hop rule: decode_hops_per_layer with the chip (the exercise's h(n)) is exactly the latency that
    # decode_step_components prices (the table's L h(n) t_hop), on every torus of the chapter.
    llama = get_model("llama3-70b")
    for n, torus in TORUS_SHAPES[chip].items():
        parts = decode_step_components(llama, chip, n, 64, 8192, mesh_shape=torus, check_capacity=False)
        h = decode_hops_per_layer(llama, n, 64, torus, chip=chip)
        assert parts.ici_latency_s == pytest.approx(llama.n_layers * h * get_chip(chip).ici_hop_latency, rel=1e-12)


def test_a_v5e_4_by_2_slice_is_two_lines_16_hops_a_layer_and_12_only_if_both_axes_were_rings():
    # v5e axes wrap only at 16 chips: the 4-axis is a line of 3 hops a pass, the 2-axis 1; two all-reduces of two
    # passes each; K = 8 = n, so no all-to-all.
    assert decode_hops_per_layer("llama3-70b", 8, 64, (4, 2), chip="tpu-v5e") == 2 * 2 * (3 + 1)
    assert decode_hops_per_layer("llama3-70b", 8, 64, (4, 2)) == 2 * 2 * (2 + 1)  # every axis a ring
    assert slice_hops("all-reduce", "tpu-v5e", (16, 16)) == 2 * (8 + 8)  # 16-chip axes wrap
    assert slice_hops("all-gather", "tpu-v4", (2, 2, 4)) == 1 + 1 + 3  # less than a cube: no v4 axis wraps
    assert slice_hops("all-gather", "tpu-v4", (4, 4, 4)) == 2 + 2 + 2  # a whole cube wraps every axis


def test_chapter_12_prices_each_collective_s_latency_by_the_same_hop_rule():
    # PaLM 540B's low-latency decode (2D weight-stationary on a 4 x 4 x 4 v4 slice, attention over the batch, int8
    # weights, batch 64): per layer an all-gather and a reduce-scatter over YZ = (4, 4), 2 + 2 hops each, the same two
    # over X = 4, 2 hops each, and two all-to-alls over the whole slice, 2 + 2 + 2 hops each. Each costs the larger
    # of its hops x 1 us and its bytes over the chip's 6 links; the X pair is the only one whose bytes take longer.
    cost = layout_cost("palm-540b", "tpu-v4", 64, "decode", 64, "2d-ws", "batch", weight_dtype="int8")
    steps = layer_collectives("palm-540b", 64, "decode", 64, "2d-ws", "batch", weight_dtype="int8")
    assert cost.mesh_shape == (4, 4, 4) and [s.group for s in steps] == [(4, 4), (4,), (4,), (4, 4)] + [(4, 4, 4)] * 2
    hops = [4, 2, 2, 4, 6, 6]
    links = 6 * get_chip("tpu-v4").ici_link_bandwidth
    priced = [max(s.bytes_per_chip / links, h * 1e-6) for s, h in zip(steps, hops)]
    assert cost.network_s == pytest.approx(118 * sum(priced), rel=1e-12)
    assert cost.network_latency_s == pytest.approx(118 * (4 + 4 + 6 + 6) * 1e-6, rel=1e-12)


def test_chapter_7_tori_hold_their_chip_counts():
    for tori in TORUS_SHAPES.values():
        assert all(math.prod(shape) == n for n, shape in tori.items())


def _first_ici_bound(chip, batch):
    tori = TORUS_SHAPES[chip]
    return next(n for n in sorted(tori)
                if decode_step_components("llama3-70b", chip, n, batch, 8192, mesh_shape=tori[n],
                                          check_capacity=False).ici_bound)  # chapter 7's figure: every n


def _first_past_hop_latency(chip, batch):
    """The first chip count whose hop latency alone (the latency part of the ICI term) exceeds its weight read."""
    tori = TORUS_SHAPES[chip]
    return next(n for n in sorted(tori)
                if (p := decode_step_components("llama3-70b", chip, n, batch, 8192, mesh_shape=tori[n],
                                                check_capacity=False)).ici_latency_s > p.weights_s)


@pytest.mark.parametrize("chip", ["tpu-v5e", "ironwood"])
def test_chapter_7_crossing_stays_put_with_the_batch_unlike_f_over_b_beta(chip):
    # Where the figure's ICI line overtakes the weight line stays put as the batch goes from 32 to 128, while the
    # bandwidth estimate F / (B beta) moves 4-fold; hop latency alone gets there at most one torus later.
    crossings = {batch: _first_ici_bound(chip, batch) for batch in (32, 64, 128)}
    assert len(set(crossings.values())) == 1
    sizes = sorted(TORUS_SHAPES[chip])
    assert sizes.index(_first_past_hop_latency(chip, 64)) - sizes.index(crossings[64]) in (0, 1)
    f_over_b_beta = {b: max_decode_model_parallelism(get_model("llama3-70b").d_ff, b, beta(chip)) for b in (32, 128)}
    assert f_over_b_beta[32] == pytest.approx(4 * f_over_b_beta[128])
