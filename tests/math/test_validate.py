"""scaling_lib._validate: the argument checks every public function goes through (finite reals, integers that may be
NumPy integers or whole floats, fractions, probabilities, divisibility, mesh axes, choices, lists) and what they say."""

import numpy as np
import pytest

from scaling_lib import _validate

from tests import for_each


# --- What passes, and what it becomes ---------------------------------------------------------------------------------
@for_each([
    (lambda: _validate.real("x", -1e300), -1e300),  # a large negative real is still a real
    (lambda: _validate.fraction("mfu", 1), 1.0),  # a fraction may be one
    (lambda: _validate.probability("a", 0), 0.0),  # a probability may be zero
    (lambda: _validate.divides("k", 4, "n", 12), 4),
    (lambda: _validate.axes("mesh", [2, np.int64(4)]), (2, 4)),
    (lambda: _validate.at_most("n", 10, 10, "a list of n entries"), 10),  # the limit itself
], ids=str)
def test_a_value_that_passes_its_check_comes_back_as_the_plain_python_value(call, expected):
    result = call()
    assert result == expected and type(result) is type(expected)


@for_each([(3, 3), (np.int64(3), 3), (np.uint8(3), 3), (3.0, 3), (1e6, 10**6),
                                             (np.float32(4.0), 4)], ids=str)
def test_integers_accept_numpy_and_whole_floats_and_return_python_ints(value, expected):
    result = _validate.positive_int("n", value)
    assert result == expected and type(result) is int
    assert type(_validate.non_negative_int("n", value)) is int


@for_each([(4096, True), (4097, False), (360, True), (1296, False)], ids=str)
def test_divides_lists_the_divisors_of_numbers_up_to_4096_with_at_most_24_divisors(value, listed):
    # 4096 = 2**12 has 13 divisors, 4097 = 17 x 241 is past the listing limit; 360 = 2**3 3**2 5 has exactly 24
    # divisors, 1296 = 2**4 3**4 has 25. The divisors are listed by brute force here.
    with pytest.raises(ValueError) as error:
        _validate.divides("t", 7, "n", value)
    divisors = [d for d in range(1, value + 1) if value % d == 0]
    if listed:
        assert f"pick one of {divisors}" in str(error.value)
    else:
        assert f"pick a divisor of {value}" in str(error.value) and "pick one of" not in str(error.value)


def test_a_fraction_without_a_meaning_says_only_the_interval():
    with pytest.raises(ValueError) as error:
        _validate.fraction("share", 1.5)
    assert str(error.value).endswith("got 1.5")


# --- Bad input: a ValueError naming the argument and the fix ---------------------------------------------------------
CHECKS = (_validate.real, _validate.positive, _validate.positive_int, _validate.non_negative_int,
          _validate.probability, _validate.fraction)


@for_each([
    *[(lambda check=check, value=value: check("x", value), "x must be a finite number")
      for check in (_validate.real, _validate.positive)
      for value in [float("nan"), float("inf"), -float("inf"), np.float64("nan"), np.inf]],
    *[(lambda check=check, value=value: check("x", value), "x must be")
      for check in CHECKS for value in [True, False, None, [1], (2,), 1j, b"3", object()]],
    *[(lambda value=value: _validate.positive_int("n", value), r"\bn\b")  # fractions, and counts past 2**53
      for value in [2.5, 0.5, np.float64(1.0001), float(2**60), 2**63, -(2**63)]],
    (lambda: _validate.positive("x", -1, allow_zero=True), "x must be non-negative, got -1"),
    (lambda: _validate.real("x", "1_000"), r"\bpass 1000\.0 without quotes\b"),
    (lambda: _validate.real("x", "4.98 ms"), r"\buse scaling_lib\.units\.parse_quantity first$"),
    (lambda: _validate.fraction("x", 0), r"x must be in \(0, 1\], got 0"),
    (lambda: _validate.fraction("mfu", 0, "the share of peak"), r"mfu must be in \(0, 1\], got 0: it is the share of "
                                                                r"peak"),
    (lambda: _validate.probability("a", 1.5), r"a must be a probability in \[0, 1\], got 1.5"),
    (lambda: _validate.divides("k", 5, "n", 12), r"k=5 does not divide n=12; pick one of \[1, 2, 3, 4, 6, 12\]"),
    (lambda: _validate.divides("k", 0, "n", 12), "k must be a positive integer"),
    # no list of divisors of a large number (it would take forever)
    (lambda: _validate.divides("k", 3, "n", 10**12 + 1),
     r"k=3 does not divide n=1000000000001; pick a divisor of 1000000000001"),
    *[(lambda n=n: _validate.divisors(n), r"^n must be") for n in [0, -3, 2.5, "12"]],
    (lambda: _validate.axes("mesh", (2, 2, 2, 2), max_axes=3), r"mesh must be 1 to 3 positive integer axis sizes"),
    (lambda: _validate.axes("mesh", 8), r"mesh must be 1 or more"),
    (lambda: _validate.choice("layout", ["1d-ws"], {"1d-ws": 1}), r"unknown layout \['1d-ws'\]"),
    (lambda: _validate.items("xs", (x for x in [1.0]), _validate.real), r"\bxs must be a list\b"),  # no length
    (lambda: _validate.items("xs", [1.0], _validate.real, min_len=2), r"\bat least 2 entries\b"),
    (lambda: _validate.items("xs", [], _validate.real), r"\bat least 1 entry\b"),
    (lambda: _validate.at_most("n", 11, 10, "a list of n entries"),
     r"\bn=11 is more than 10\b.*\ba list of n entries$"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_argument_and_the_fix(call, words):
    with pytest.raises(ValueError, match=words):
        call()
