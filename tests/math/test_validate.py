"""scaling_lib._validate: the argument checks every public function goes through (finite reals, integers that may be
NumPy integers or whole floats, fractions, probabilities, divisibility, mesh axes, choices) and what they say."""

import math

import numpy as np
import pytest

from scaling_lib import _validate


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), np.float64("nan"), np.inf])
def test_reals_must_be_finite(value):
    with pytest.raises(ValueError, match="x must be a finite number"):
        _validate.real("x", value)
    with pytest.raises(ValueError, match="x must be a finite number"):
        _validate.positive("x", value)


def test_a_large_negative_real_is_still_a_real():
    assert math.isfinite(_validate.real("x", -1e300))


@pytest.mark.parametrize("value", [True, False, None, [1], (2,), 1j, b"3", object()])
def test_non_numbers_are_refused_by_name(value):
    for check in (_validate.real, _validate.positive, _validate.positive_int, _validate.non_negative_int,
                  _validate.probability, _validate.fraction):
        with pytest.raises(ValueError, match="x must be"):
            check("x", value)


def test_positive_with_zero_allowed_says_non_negative():
    with pytest.raises(ValueError, match="x must be non-negative, got -1"):
        _validate.positive("x", -1, allow_zero=True)


@pytest.mark.parametrize("value, expected", [(3, 3), (np.int64(3), 3), (np.uint8(3), 3), (3.0, 3), (1e6, 10**6),
                                             (np.float32(4.0), 4)])
def test_integers_accept_numpy_and_whole_floats_and_return_python_ints(value, expected):
    result = _validate.positive_int("n", value)
    assert result == expected and type(result) is int
    assert type(_validate.non_negative_int("n", value)) is int


@pytest.mark.parametrize("value", [2.5, 0.5, np.float64(1.0001), float(2**60), 2**63, -(2**63)])
def test_integers_refuse_fractions_and_counts_beyond_2_to_53(value):
    with pytest.raises(ValueError, match=r"\bn\b"):
        _validate.positive_int("n", value)


def test_divides_returns_a_divisor():
    assert _validate.divides("k", 4, "n", 12) == 4


def test_divides_names_both_numbers_and_the_divisors():
    with pytest.raises(ValueError, match=r"k=5 does not divide n=12; pick one of \[1, 2, 3, 4, 6, 12\]"):
        _validate.divides("k", 5, "n", 12)


def test_divides_refuses_a_divisor_that_is_not_a_positive_integer():
    with pytest.raises(ValueError, match="k must be a positive integer"):
        _validate.divides("k", 0, "n", 12)


def test_divides_of_a_large_number_names_it_without_listing_its_divisors():
    # No list of divisors of a large number (it would take forever).
    with pytest.raises(ValueError, match=r"k=3 does not divide n=1000000000001; pick a divisor of 1000000000001"):
        _validate.divides("k", 3, "n", 10**12 + 1)


def test_a_fraction_may_be_one_and_a_probability_zero():
    assert _validate.fraction("mfu", 1) == 1.0 and _validate.probability("a", 0) == 0.0


def test_a_fraction_of_zero_is_refused_with_the_interval():
    with pytest.raises(ValueError, match=r"x must be in \(0, 1\], got 0"):
        _validate.fraction("x", 0)


def test_a_fraction_of_zero_is_refused_with_what_the_fraction_means():
    with pytest.raises(ValueError, match=r"mfu must be in \(0, 1\], got 0: it is the share of peak"):
        _validate.fraction("mfu", 0, "the share of peak")


def test_a_probability_above_one_is_refused():
    with pytest.raises(ValueError, match=r"a must be a probability in \[0, 1\], got 1.5"):
        _validate.probability("a", 1.5)


def test_axes_accept_numpy_integers_and_return_a_tuple():
    assert _validate.axes("mesh", [2, np.int64(4)]) == (2, 4)


def test_axes_refuse_too_many_axes():
    with pytest.raises(ValueError, match=r"mesh must be 1 to 3 positive integer axis sizes"):
        _validate.axes("mesh", (2, 2, 2, 2), max_axes=3)


def test_axes_refuse_a_bare_number():
    with pytest.raises(ValueError, match=r"mesh must be 1 or more"):
        _validate.axes("mesh", 8)


def test_choice_refuses_an_unhashable_name():
    with pytest.raises(ValueError, match=r"unknown layout \['1d-ws'\]"):
        _validate.choice("layout", ["1d-ws"], {"1d-ws": 1})


# ---------------------------------------------------------------------------------------------------- third pass
@pytest.mark.parametrize("value, listed", [(4096, True), (4097, False), (360, True), (1296, False)])
def test_divides_lists_the_divisors_of_numbers_up_to_4096_with_at_most_24_divisors(value, listed):
    # 4096 = 2**12 has 13 divisors, 4097 = 17 x 241 is past the listing limit; 360 = 2**3 3**2 5 has exactly 24
    # divisors, 1296 = 2**4 3**4 has 25.
    with pytest.raises(ValueError) as error:
        _validate.divides("t", 7, "n", value)
    divisors = [d for d in range(1, value + 1) if value % d == 0]
    if listed:
        assert f"pick one of {divisors}" in str(error.value)
    else:
        assert f"pick a divisor of {value}" in str(error.value) and "pick one of" not in str(error.value)


@pytest.mark.parametrize("n", [0, -3, 2.5, "12"])
def test_divisors_names_its_argument_n(n):
    with pytest.raises(ValueError, match=r"^n must be"):
        _validate.divisors(n)


def test_items_refuses_a_generator_which_has_no_length():
    with pytest.raises(ValueError, match=r"\bxs must be a list\b"):
        _validate.items("xs", (x for x in [1.0]), _validate.real)


def test_items_says_how_many_entries_it_needs():
    with pytest.raises(ValueError, match=r"\bat least 2 entries\b"):
        _validate.items("xs", [1.0], _validate.real, min_len=2)
    with pytest.raises(ValueError, match=r"\bat least 1 entry\b"):
        _validate.items("xs", [], _validate.real)


def test_a_number_in_quotes_with_underscores_is_named_with_the_value_to_pass():
    with pytest.raises(ValueError, match=r"\bpass 1000\.0 without quotes\b"):
        _validate.real("x", "1_000")


def test_a_quantity_with_a_unit_in_quotes_points_to_the_unit_parser():
    with pytest.raises(ValueError, match=r"\buse scaling_lib\.units\.parse_quantity first$"):
        _validate.real("x", "4.98 ms")


def test_a_fraction_without_a_meaning_says_only_the_interval():
    with pytest.raises(ValueError) as error:
        _validate.fraction("share", 1.5)
    assert str(error.value).endswith("got 1.5")


def test_at_most_takes_the_limit_itself_and_refuses_one_more():
    assert _validate.at_most("n", 10, 10, "a list of n entries") == 10
    with pytest.raises(ValueError, match=r"\bn=11 is more than 10\b.*\ba list of n entries$"):
        _validate.at_most("n", 11, 10, "a list of n entries")
