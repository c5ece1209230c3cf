"""The one reader of "number plus unit" (units.read_number), its thousands rule, and parse_quantity on top of it.

The exercise checker reads a reader's typed answer with the same `read_number` (then its own, more forgiving unit
reader), so every string below is read, or refused, the same way by both; tests/book/test_exercises.py checks the
checker's verdicts. Expected values are the numbers as written, by hand.
"""

import re

import numpy as np
import pytest

from scaling_lib.book.exercises import grade
from scaling_lib.units import format_quantity, parse_quantity, parse_unit, read_number, unit_spellings


@pytest.mark.parametrize("text, expected", [
    ("4.98 ms", (4.98, "ms")),
    ("240", (240.0, "")),
    ("1,920 tokens", (1920.0, "tokens")),
    ("12,345,678.5 B", (12345678.5, "B")),
    ("-1,234", (-1234.0, "")),
    ("1_000 tokens", (1000.0, "tokens")),
    (".5 s", (0.5, "s")),
    ("6.7e9B", (6.7e9, "B")),
    ("\u22123 us", (-3.0, "us")),  # a typographic minus
    ("4.6\u00a0k   tokens", (4.6, "k tokens")),  # a no-break space, runs of spaces collapsed
])
def test_read_number_splits_the_leading_number_from_its_unit(text, expected):
    assert read_number(text) == expected


@pytest.mark.parametrize("text, example", [
    ("1,5 ms", "1.5 ms"),  # a decimal comma, or a thousands separator missing two digits: never guessed
    ("0,5", "0.5"),
    ("1,53 s", "1.53 s"),
    ("4,6", "4.6"),
    ("1,2345", "1.2345"),
    ("12,34,567", "1234567"),  # groups of two (as in lakh notation): not the book's separator
    ("1.5,3", "1.5"),  # a comma after the decimal point
])
def test_a_comma_is_only_a_thousands_separator_between_groups_of_three_digits(text, example):
    with pytest.raises(ValueError, match="ambiguous") as refused:
        read_number(text)
    assert "thousands separator" in str(refused.value) and f"e.g. '{example}'" in str(refused.value)


@pytest.mark.parametrize("text", ["", "   ", "abc", "--3", "e5", ".", ",", "ms 4"])
def test_text_with_no_leading_number_is_refused_with_what_to_write(text):
    with pytest.raises(ValueError, match="write it like '4.98 ms'"):
        read_number(text)


def test_a_number_past_any_float_and_a_non_string_are_refused():
    with pytest.raises(ValueError, match="finite"):
        read_number("1e400 s")
    with pytest.raises(ValueError, match="string"):
        read_number(4.98)


def test_parse_quantity_reads_the_unit_and_falls_back_to_the_default():
    assert parse_quantity("4.98 ms") == (pytest.approx(4.98e-3), "time")
    assert parse_quantity("6.7 GB") == (pytest.approx(6.7e9), "bytes")
    assert parse_quantity("2 GiB") == (2.0 * 2**30, "bytes")
    assert parse_quantity("1,536", "tokens") == (1536.0, "count")
    assert parse_quantity("2.5", "ms") == (pytest.approx(2.5e-3), "time")
    with pytest.raises(ValueError, match="unknown unit"):
        parse_quantity("3 parsecs")


@pytest.mark.parametrize("text, readable", [("1,920 tokens", True), ("1,920", True), ("4,6", False),
                                            ("1,92 tokens", False), ("1,920,", False), ("1_920", True)])
def test_the_checker_and_parse_quantity_apply_the_same_thousands_rule(text, readable):
    # ch10.moe-bcrit-8e-top1-v6e asks for a count of tokens: an answer the checker cannot read says "Cannot read".
    verdict = grade("ch10.moe-bcrit-8e-top1-v6e", text)
    assert ("Cannot read" not in verdict.message) == readable, verdict.message
    if readable:
        assert parse_quantity(text, "tokens") == (1920.0, "count")
    else:
        with pytest.raises(ValueError, match="ambiguous"):
            parse_quantity(text, "tokens")


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


@pytest.mark.parametrize("unit", ["kchip", "Mchip", "ktoken", "Gsequence", "kways", "Mtokens"])
def test_a_count_of_chips_tokens_or_sequences_takes_no_metric_prefix(unit):
    # "kchip" is not 1,000 chips: counts are written out in full ("1,000 chips"), so a prefix on one is refused
    with pytest.raises(ValueError, match="unknown unit"):
        parse_unit(unit)


@pytest.mark.parametrize("unit, bytes_", [("kB", 1000), ("MB", 1000**2), ("GB", 1000**3), ("TB", 1000**4),
                                          ("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3), ("TiB", 1024**4)])
def test_decimal_prefixes_step_by_1000_and_binary_ones_by_1024(unit, bytes_):
    # IEC 80000-13: Ki = 2^10, Mi = 2^20, Gi = 2^30, Ti = 2^40; SI: k = 10^3, M = 10^6, G = 10^9, T = 10^12
    assert parse_unit(unit) == (bytes_, "bytes") and parse_unit(unit + "/s") == (bytes_, "bandwidth")


@pytest.mark.parametrize("unit, kind", [("chip", "count"), ("chips", "count"), ("ms", "time"), ("kB", "bytes")])
def test_a_count_unit_without_a_prefix_is_read(unit, kind):
    assert parse_unit(unit)[1] == kind


def test_format_quantity_never_writes_more_whole_digits_than_asked():
    # 123,456 tokens to 3 digits: '1.23e+05', not a 6-digit plain number
    assert format_quantity(123456.0, "tokens") == "1.23e+05 tokens"
    assert format_quantity(999.6, "ms", 3) == "1e+06 ms"
    assert format_quantity(999.4e-3, "ms", 3) == "999 ms"


# --- every branch of the readers, by hand ----------------------------------------------------------------------------
def test_parse_unit_strips_spaces_and_refuses_a_non_string_saying_what_a_unit_is():
    assert parse_unit(" ms ") == (1e-3, "time") and parse_unit("GiB") == (2.0**30, "bytes")
    assert parse_unit("%") == (0.01, "percent") and parse_unit("") == (1.0, "count")
    assert parse_unit("TFLOP/s") == (1e12, "flop_rate") and parse_unit("us") == (1e-6, "time")
    for bad in (3, None, b"ms"):
        with pytest.raises(ValueError, match=r"\ba unit is a string such as 'ms' or 'GB', got\b"):
            parse_unit(bad)
    spellings = unit_spellings()  # every unit it reads, as the checker looks them up in any letter case
    assert spellings["KiB"] == (1024, "bytes") and spellings["ms"] == (1e-3, "time") and spellings["%"][1] == "percent"
    assert spellings["TFLOP/s"] == (1e12, "flop_rate") and spellings["tokens"] == (1, "count")
    assert not {"ktokens", "kchips", "Mx", "k%", "k"} & set(spellings)


def test_an_unknown_unit_is_named_with_units_to_try():
    with pytest.raises(ValueError, match=r"\bunknown unit 'furlong'; try one like s, ms\b"):
        parse_unit("furlong")


def test_read_number_reads_a_narrow_no_break_space_and_a_plus_sign():
    assert read_number("4.6\u202fms") == (4.6, "ms") and read_number("+2 s") == (2.0, "s")
    with pytest.raises(ValueError, match=r"\btext must be a string such as '4\.98 ms', got float\b"):
        read_number(4.98)


def test_read_number_drops_every_underscore_and_refuses_an_exponent_without_a_mantissa():
    # underscores are dropped, not read by Python's float (which refuses two in a row)
    assert read_number("1__000 tokens") == (1000.0, "tokens") and read_number("2E3 B") == (2000.0, "B")
    for text in ("E5", "e5 s", "+E3"):
        with pytest.raises(ValueError, match=r"\bwrite it like '4\.98 ms' or '240'"):
            read_number(text)


def test_an_ambiguous_comma_says_which_commas_are_read_and_how_to_write_a_fraction():
    with pytest.raises(ValueError) as refused:
        read_number("1,5 ms")
    message = str(refused.value)
    assert re.search(r"\bor a thousands separator\?\); a comma is read only as a thousands separator between groups "
                     r"of three digits \(1,920\)", message)
    assert re.search(r"\bfor a fraction write the decimal point as '\.', e\.g\. '1\.5 ms'", message)


@pytest.mark.parametrize("answer, words", [(True, r"\bexpected a number, got True\b"),
                                           (None, r"\bexpected a number or a string such as '4\.98 ms', got None\b"),
                                           ([1.0], r"\bexpected a number or a string\b")])
def test_parse_quantity_refuses_a_bool_or_a_non_number_saying_what_it_expects(answer, words):
    with pytest.raises(ValueError, match=words):
        parse_quantity(answer, "ms")


def test_parse_quantity_reads_a_plain_number_in_the_default_unit_and_a_typed_unit_over_it():
    assert parse_quantity(4, "ms") == (pytest.approx(4e-3, rel=1e-12), "time")
    assert parse_quantity(2.5, "GB") == (pytest.approx(2.5e9, rel=1e-12), "bytes")
    assert parse_quantity("3 us", "ms") == (pytest.approx(3e-6, rel=1e-12), "time")
    with pytest.raises(ValueError, match=r"\bunknown unit 'parsecs'"):
        parse_quantity("3 s", "parsecs")  # a bad default is an error even when the text names its unit


def test_a_comma_after_the_fraction_of_a_grouped_number_is_refused_with_a_readable_example():
    # "1,920.5,3": the whole part is a valid thousands group, so the hint drops the commas rather than writing
    # the one comma as a second decimal point ('1.920.5')
    with pytest.raises(ValueError, match=r"\bambiguous\b.*e\.g\. '1920\.5'"):
        read_number("1,920.5,3")
