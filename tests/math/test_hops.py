"""scaling_lib.hops: how many hops a collective takes on a ring, a line and a torus, checked by breadth-first search
and brute force, the most cube-like torus of n chips, and what latency-bound collectives cost; and the one hop rule
that chapter 7's decode step and chapter 12's layouts both price."""

import collections
import itertools
import math

import pytest

from scaling_lib.book.claims import published
from scaling_lib.collectives import collective_time
from scaling_lib.frontier import layer_collectives, layout_cost
from scaling_lib.hardware import get_chip
from scaling_lib.hops import (MAX_TORUS_CHIPS, collective_hops, cube_torus, decode_collective_latency,
                              latency_bound_time, ring_hops, torus_diameter)
from scaling_lib.models import get_model
from scaling_lib.sharding import TORUS_SHAPES, decode_hops_per_layer, decode_step_components

from tests import for_each


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


def diameter_by_brute_force(shape, wraparound):
    """Most hops between two chips: the largest sum over axes of the per-axis distance, trying every pair of
    coordinates (min(|i - j|, a - |i - j|) with wraparound links, |i - j| without)."""
    def distance(i, j, a):
        return min(abs(i - j), a - abs(i - j)) if wraparound else abs(i - j)
    return sum(max(distance(i, j, a) for i, j in itertools.product(range(a), repeat=2)) for a in shape)


# --- One axis: a pass reaches the farthest chip, an all-reduce is two passes ----------------------------------------
@pytest.mark.parametrize("n", range(1, 18))
@pytest.mark.parametrize("wraparound", [True, False])
def test_a_pass_reaches_the_farthest_chip_found_by_breadth_first_search_and_an_all_reduce_is_two(n, wraparound):
    one_pass = farthest_by_bfs(n, wraparound)
    for op in ("all-gather", "reduce-scatter", "all-to-all"):
        assert collective_hops(op, n, wraparound) == one_pass
    assert collective_hops("all-reduce", n, wraparound) == 2 * one_pass


def test_the_chapter_7_quiz_all_reduce_on_a_ring_of_8_takes_4_hops_per_pass_and_8_us():
    assert collective_hops("all-gather", 7) == 3  # on a ring of 7, chip 3 is 3 hops one way, 4 the other
    assert collective_hops("all-reduce", 9) == 8
    assert collective_hops("all-gather", 8) == 4
    tiny_payload = 16 * 8192 * 2  # latency-bound: far below 8 x W_ici x t_hop on Ironwood
    assert collective_time("all-reduce", tiny_payload, "ironwood", 8).latency_s == pytest.approx(8e-6)


# --- A torus: the axes add up ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3,), (5,), (3, 5), (7, 3, 1), (2, 3, 5), (9, 9), (4, 5, 6)])
@pytest.mark.parametrize("wraparound", [True, False])
def test_torus_diameter_with_odd_axes_matches_brute_force(shape, wraparound):
    assert torus_diameter(shape, wraparound) == diameter_by_brute_force(shape, wraparound)


def test_torus_diameter_and_ring_hops_by_hand():
    assert torus_diameter((8, 8, 16)) == 4 + 4 + 8 == published("S7 16-hop torus")
    assert torus_diameter((8, 8, 16), wraparound=False) == 7 + 7 + 15
    assert torus_diameter((4, 4, 4)) == 6 and torus_diameter((4, 4, 4), wraparound=False) == 9
    assert torus_diameter((3,)) == 1 and torus_diameter((5,)) == 2 and torus_diameter((3, 5)) == 3
    assert ring_hops((4, 4, 4)) == 6 and ring_hops((1, 2, 8)) == 1 + 4
    assert ring_hops((5,), "all-gather") == 2 and ring_hops((5,), "all-reduce") == 4
    assert ring_hops((4, 4, 4), "all-reduce") == 2 * (2 + 2 + 2)  # two passes
    assert ring_hops((2, 3), "all-to-all") == 1 + 1  # on a ring of 3 each chip is 1 hop away


@for_each([
    (1024, (8, 8, 16)), (64, (4, 4, 4)), (8, (2, 2, 2)), (1, (1, 1, 1)),
    (12, (2, 2, 3)),  # 1 x 1 x 12, 1 x 2 x 6, 1 x 3 x 4 and 2 x 2 x 3: the last has the smallest Z - X (1)
    (7, (1, 1, 7)), (1_048_573, (1, 1, 1_048_573)),  # a prime has one torus, 1 x 1 x n
    (256, (4, 8, 8)),  # 4 x 4 x 16 has Z - X = 12; 4 x 8 x 8 has 4
    (MAX_TORUS_CHIPS, (64, 128, 128)),
], ids=str)
def test_cube_torus_is_the_most_cube_like_torus_of_whole_chips(n, torus):
    assert cube_torus(n) == torus
    assert all(type(axis) is int for axis in cube_torus(n))


# --- Latency-bound collectives: rounds x (fixed cost + hops x hop latency) ------------------------------------------
def test_latency_bound_time_adds_a_fixed_cost_to_the_hops_by_hand():
    assert latency_bound_time(7, 1e-6) == pytest.approx(7e-6)
    assert latency_bound_time(16, 1e-6, fixed_s=2e-6, rounds=2) == pytest.approx(36e-6)
    assert latency_bound_time(0, 1e-6, fixed_s=5e-6, rounds=3) == pytest.approx(15e-6, rel=1e-12)
    assert decode_collective_latency(80, 2, 16, 1e-6) == pytest.approx(80 * 2 * 16e-6)
    # 80 layers x 2 collectives x (3 us + 16 hops x 1 us) = 3,040 us
    assert decode_collective_latency(80, 2, 16, 1e-6, fixed_s=3e-6) == pytest.approx(3040e-6, rel=1e-12)


# --- One hop rule: chapter 7's decode step and chapter 12's layouts price the same hops -----------------------------
@for_each(sorted(TORUS_SHAPES), ids=str)
def test_chapter_7_table_and_its_exercise_count_the_same_hops_on_each_slice_s_own_links(chip):
    # decode_hops_per_layer with the chip (the exercise's h(n)) is exactly the latency that decode_step_components
    # prices (the table's L h(n) t_hop), on every torus of the chapter.
    llama = get_model("llama3-70b")
    for n, torus in TORUS_SHAPES[chip].items():
        assert math.prod(torus) == n
        parts = decode_step_components(llama, chip, n, 64, 8192, mesh_shape=torus, check_capacity=False)
        h = decode_hops_per_layer(llama, n, 64, torus, chip=chip)
        assert parts.ici_latency_s == pytest.approx(llama.n_layers * h * get_chip(chip).ici_hop_latency, rel=1e-12)


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


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
@for_each([
    (lambda: collective_hops("broadcast", 8), "unknown collective op 'broadcast'"),
    (lambda: collective_hops("all-gather", 0), "n_shards"),
    (lambda: torus_diameter((4, 0, 4)), "mesh_shape"),
    (lambda: torus_diameter((4, 4, 4), wraparound="no"), r"\bwraparound\b"),
    (lambda: cube_torus(0), r"\bn_chips\b"),
    (lambda: cube_torus(2**53), r"n_chips=9007199254740992 .*at most 1,048,576"),
    (lambda: latency_bound_time(hops=-1, hop_latency_s=1e-6), r"\bhops\b"),
    (lambda: latency_bound_time(hops=2.5, hop_latency_s=1e-6), r"\bhops\b"),
    (lambda: latency_bound_time(hops=4, hop_latency_s=0.0), r"\bhop_latency_s\b"),
    (lambda: latency_bound_time(hops=4, hop_latency_s=1e-6, fixed_s=-1e-6), r"\bfixed_s\b"),
    (lambda: latency_bound_time(hops=4, hop_latency_s=1e-6, rounds=0), r"\brounds\b"),
    (lambda: decode_collective_latency(0, 2, 4, 1e-6), r"\bn_layers\b"),
    (lambda: decode_collective_latency(80, 0, 4, 1e-6), r"\bcollectives_per_layer\b"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
