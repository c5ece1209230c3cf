"""scaling_lib.units: reading a number with its unit (parse_quantity, parse_unit) and writing one (format_quantity)."""

import numpy as np
import pytest

from scaling_lib.units import format_quantity, parse_quantity, parse_unit


def test_format_quantity_keeps_scientific_notation_and_groups_large_plain_numbers():
    assert format_quantity(1.5e12, "B") == "1.5e+12 B"
    assert format_quantity(12345.0, "B", 3) == "1.23e+04 B"
    assert format_quantity(4.98e-3, "ms") == "4.98 ms"


@pytest.mark.parametrize("unit", ["k", "ktok", "ksequences", "Mchips", "G%", "kx"])
def test_parse_unit_refuses_a_prefix_on_a_count_or_an_unknown_unit(unit):
    with pytest.raises(ValueError, match="unknown unit"):
        parse_unit(unit)


def test_parse_quantity_takes_numpy_floats():
    assert parse_quantity(np.float32(2.5), "ms") == (pytest.approx(2.5e-3), "time")


def test_parse_quantity_refuses_a_nan_answer():
    with pytest.raises(ValueError, match="the answer must be a finite number"):
        parse_quantity(float("nan"))


def test_parse_quantity_reads_underscores_in_a_count():
    assert parse_quantity("1_000 tokens") == (1000.0, "count")


def test_parse_quantity_reads_a_percentage_as_a_fraction():
    assert parse_quantity("50 %") == (0.5, "percent")


def test_parse_quantity_refuses_a_decimal_comma_with_a_hint():
    with pytest.raises(ValueError, match=r"'1,5 ms'.*thousands separator.*decimal point as '\.', e\.g\. '1\.5 ms'"):
        parse_quantity("1,5 ms")


def test_parse_quantity_reads_thousands_separators_in_groups_of_three():
    assert parse_quantity("1,536 tokens") == (1536.0, "count")
    assert parse_quantity("12,345,678 B") == (12345678.0, "bytes")


@pytest.mark.parametrize("text", ["1,53 s", "0,5"])
def test_parse_quantity_refuses_a_comma_that_is_not_a_thousands_separator(text):
    with pytest.raises(ValueError, match="decimal point"):
        parse_quantity(text)
