"""scaling_lib.hops: torus shapes, hop counts and latency-bound collective times, by hand and (odd axes) by brute
force, and user-given chip counts that must not make a divisor search run for ever."""

import itertools

import pytest

from scaling_lib.book.claims import published
from scaling_lib.hops import (MAX_TORUS_CHIPS, cube_torus, decode_collective_latency, latency_bound_time, ring_hops,
                              torus_diameter)


def diameter_by_brute_force(shape, wraparound):
    """Most hops between two chips: the largest sum over axes of the per-axis distance, trying every pair of
    coordinates (min(|i - j|, a - |i - j|) with wraparound links, |i - j| without)."""
    def distance(i, j, a):
        return min(abs(i - j), a - abs(i - j)) if wraparound else abs(i - j)
    return sum(max(distance(i, j, a) for i, j in itertools.product(range(a), repeat=2)) for a in shape)


@pytest.mark.parametrize("shape", [(3,), (5,), (3, 5), (7, 3, 1), (2, 3, 5), (9, 9), (4, 5, 6)])
@pytest.mark.parametrize("wraparound", [True, False])
def test_torus_diameter_with_odd_axes_matches_brute_force(shape, wraparound):
    assert torus_diameter(shape, wraparound) == diameter_by_brute_force(shape, wraparound)


def test_on_a_ring_of_3_or_5_the_farthest_chip_is_floor_a_over_2_hops_away():
    assert torus_diameter((3,)) == 1 and torus_diameter((5,)) == 2 and torus_diameter((3, 5)) == 3
    assert ring_hops((5,), "all-gather") == 2 and ring_hops((5,), "all-reduce") == 4


def test_cube_torus_refuses_a_chip_count_beyond_any_slice_at_once():
    with pytest.raises(ValueError, match=r"n_chips=9007199254740992 .*at most 1,048,576"):
        cube_torus(2**53)
    assert cube_torus(MAX_TORUS_CHIPS) == (64, 128, 128)
    assert cube_torus(1_048_573) == (1, 1, 1_048_573)  # a prime: only 1 x 1 x n


# --- by hand ----------------------------------------------------------------------------------------------------------
def test_torus_diameter_and_ring_hops_by_hand():
    assert cube_torus(1024) == (8, 8, 16) and cube_torus(64) == (4, 4, 4) and cube_torus(8) == (2, 2, 2)
    assert torus_diameter((8, 8, 16)) == 4 + 4 + 8 == published("S7 16-hop torus")
    assert torus_diameter((8, 8, 16), wraparound=False) == 7 + 7 + 15
    assert ring_hops((4, 4, 4)) == 6 and ring_hops((1, 2, 8)) == 1 + 4


def test_latency_bound_time_adds_a_fixed_cost_to_the_hops():
    assert latency_bound_time(7, 1e-6) == pytest.approx(7e-6)
    assert latency_bound_time(16, 1e-6, fixed_s=2e-6, rounds=2) == pytest.approx(36e-6)
    assert decode_collective_latency(80, 2, 16, 1e-6) == pytest.approx(80 * 2 * 16e-6)


def test_latency_bound_time_refuses_negative_or_fractional_hops_and_a_zero_hop_latency():
    for bad in (dict(hops=-1, hop_latency_s=1e-6), dict(hops=2.5, hop_latency_s=1e-6), dict(hops=2, hop_latency_s=0)):
        with pytest.raises(ValueError):
            latency_bound_time(**bad)


def test_torus_diameter_refuses_an_axis_of_zero():
    with pytest.raises(ValueError, match="mesh_shape"):
        torus_diameter((4, 0, 4))


def test_cube_torus_by_hand():
    # 12 chips: 1 x 1 x 12, 1 x 2 x 6, 1 x 3 x 4 and 2 x 2 x 3; the last has the smallest Z - X (1).
    assert cube_torus(12) == (2, 2, 3)
    assert cube_torus(7) == (1, 1, 7)  # a prime has one torus
    assert cube_torus(1) == (1, 1, 1)
    assert cube_torus(256) == (4, 8, 8)  # 4 x 4 x 16 has Z - X = 12; 4 x 8 x 8 has 4


def test_cube_torus_of_no_chips_is_refused_by_name():
    with pytest.raises(ValueError, match=r"\bn_chips\b"):
        cube_torus(0)


def test_an_all_reduce_takes_two_passes_of_hops():
    assert ring_hops((4, 4, 4), "all-reduce") == 2 * (2 + 2 + 2)


def test_an_all_to_all_on_odd_rings_by_hand():
    assert ring_hops((2, 3), "all-to-all") == 1 + 1  # floor(2 / 2) + floor(3 / 2): on a ring of 3 each chip is 1 hop away


def test_a_torus_without_wraparound_has_a_longer_diameter():
    assert torus_diameter((4, 4, 4)) == 6 and torus_diameter((4, 4, 4), wraparound=False) == 9


def test_wraparound_must_be_a_bool():
    with pytest.raises(ValueError, match=r"\bwraparound\b"):
        torus_diameter((4, 4, 4), wraparound="no")


def test_latency_bound_times_with_a_fixed_cost_by_hand():
    # 80 layers x 2 collectives x (3 us + 16 hops x 1 us) = 3,040 us
    assert decode_collective_latency(80, 2, 16, 1e-6, fixed_s=3e-6) == pytest.approx(3040e-6, rel=1e-12)
    assert latency_bound_time(0, 1e-6, fixed_s=5e-6, rounds=3) == pytest.approx(15e-6, rel=1e-12)


@pytest.mark.parametrize("kwargs, name", [(dict(fixed_s=-1e-6), "fixed_s"), (dict(rounds=0), "rounds"),
                                          (dict(hops=-1), "hops"), (dict(hop_latency_s=0.0), "hop_latency_s")])
def test_latency_bound_time_names_a_bad_argument(kwargs, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        latency_bound_time(**{"hops": 4, "hop_latency_s": 1e-6, **kwargs})


@pytest.mark.parametrize("kwargs, name", [(dict(n_layers=0), "n_layers"),
                                          (dict(collectives_per_layer=0), "collectives_per_layer")])
def test_decode_collective_latency_names_a_bad_argument(kwargs, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        decode_collective_latency(**{"n_layers": 80, "collectives_per_layer": 2, "hops": 4, "hop_latency_s": 1e-6,
                                     **kwargs})


def test_a_torus_is_whole_chips_per_axis():
    assert all(type(axis) is int for n in (12, 64, 1024) for axis in cube_torus(n))
