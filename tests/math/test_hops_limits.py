"""hops: odd axes by brute force, and user-given chip counts that must not make a divisor search run for ever."""

import itertools

import pytest

from scaling_lib.hops import MAX_TORUS_CHIPS, cube_torus, ring_hops, torus_diameter


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
