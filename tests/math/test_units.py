"""The one reader of "number plus unit" (units.read_number), its thousands rule, the units it knows (parse_unit), and
parse_quantity and format_quantity on top of them.

The exercise checker reads a reader's typed answer with the same `read_number` (then its own, more forgiving unit
reader), so every string below is read, or refused, the same way by both; tests/book/test_exercises.py checks the
checker's verdicts. Expected values are the numbers as written, by hand; the prefixes are SI's (k = 10^3, M = 10^6,
G = 10^9, T = 10^12) and IEC 80000-13's (Ki = 2^10, Mi = 2^20, Gi = 2^30, Ti = 2^40).
"""

import re

import numpy as np
import pytest

from scaling_lib.book.exercises import grade
from scaling_lib.units import format_quantity, parse_quantity, parse_unit, read_number, unit_spellings

from tests import for_each


# --- read_number: the leading number and what follows it ------------------------------------------------------------
@for_each([
    ("4.98 ms", (4.98, "ms")),
    ("240", (240.0, "")),
    ("1,920 tokens", (1920.0, "tokens")),
    ("12,345,678.5 B", (12345678.5, "B")),
    ("-1,234", (-1234.0, "")),
    ("1_000 tokens", (1000.0, "tokens")),
    ("1__000 tokens", (1000.0, "tokens")),  # underscores are dropped, not read by Python's float
    (".5 s", (0.5, "s")),
    ("6.7e9B", (6.7e9, "B")),
    ("2E3 B", (2000.0, "B")),
    ("+2 s", (2.0, "s")),
    ("\u22123 us", (-3.0, "us")),  # a typographic minus
    ("4.6\u00a0k   tokens", (4.6, "k tokens")),  # a no-break space, runs of spaces collapsed
    ("4.6\u202fms", (4.6, "ms")),  # a narrow no-break space
], ids=str)
def test_read_number_splits_the_leading_number_from_its_unit(text, expected):
    assert read_number(text) == expected


# --- The thousands rule: a comma only between groups of three digits --------------------------------------------------
@for_each([
    ("1,5 ms", "1.5 ms"),  # a decimal comma, or a thousands separator missing two digits: never guessed
    ("0,5", "0.5"),
    ("1,53 s", "1.53 s"),
    ("4,6", "4.6"),
    ("1,2345", "1.2345"),
    ("12,34,567", "1234567"),  # groups of two (as in lakh notation): not the book's separator
    ("1.5,3", "1.5"),  # a comma after the decimal point
    # the whole part is a valid thousands group, so the hint drops the commas rather than writing the one comma as a
    # second decimal point ('1.920.5')
    ("1,920.5,3", "1920.5"),
], ids=str)
def test_a_comma_is_only_a_thousands_separator_between_groups_of_three_digits(text, example):
    with pytest.raises(ValueError, match="ambiguous") as refused:
        read_number(text)
    assert "thousands separator" in str(refused.value) and f"e.g. '{example}'" in str(refused.value)


def test_an_ambiguous_comma_says_which_commas_are_read_and_how_to_write_a_fraction():
    with pytest.raises(ValueError) as refused:
        read_number("1,5 ms")
    message = str(refused.value)
    assert re.search(r"\bor a thousands separator\?\); a comma is read only as a thousands separator between groups "
                     r"of three digits \(1,920\)", message)
    assert re.search(r"\bfor a fraction write the decimal point as '\.', e\.g\. '1\.5 ms'", message)


@for_each([("1,920 tokens", True), ("1,920", True), ("4,6", False),
                                            ("1,92 tokens", False), ("1,920,", False), ("1_920", True)], ids=str)
def test_the_checker_and_parse_quantity_apply_the_same_thousands_rule(text, readable):
    # ch10.moe-bcrit-8e-top1-v6e asks for a count of tokens: an answer the checker cannot read says "Cannot read".
    verdict = grade("ch10.moe-bcrit-8e-top1-v6e", text)
    assert ("Cannot read" not in verdict.message) == readable, verdict.message
    if readable:
        assert parse_quantity(text, "tokens") == (1920.0, "count")
    else:
        with pytest.raises(ValueError, match="ambiguous"):
            parse_quantity(text, "tokens")


# --- parse_unit: what a unit is worth and what it measures ---------------------------------------------------------
@for_each([
    *[(unit, (factor, "bytes")) for unit, factor in [
        ("kB", 1000), ("MB", 1000**2), ("GB", 1000**3), ("TB", 1000**4),
        ("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3), ("TiB", 1024**4)]],
    *[(unit + "/s", (factor, "bandwidth")) for unit, factor in [
        ("kB", 1000), ("MB", 1000**2), ("GB", 1000**3), ("TB", 1000**4),
        ("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3), ("TiB", 1024**4)]],
    (" ms ", (1e-3, "time")), ("us", (1e-6, "time")), ("%", (0.01, "percent")), ("", (1.0, "count")),
    ("TFLOP/s", (1e12, "flop_rate")), ("chip", (1, "count")), ("chips", (1, "count")),
], ids=str)
def test_decimal_prefixes_step_by_1000_binary_ones_by_1024_and_a_count_takes_none(unit, expected):
    assert parse_unit(unit) == expected


def test_unit_spellings_list_every_unit_read_and_no_prefixed_count():
    spellings = unit_spellings()  # as the checker looks them up in any letter case
    assert spellings["KiB"] == (1024, "bytes") and spellings["ms"] == (1e-3, "time") and spellings["%"][1] == "percent"
    assert spellings["TFLOP/s"] == (1e12, "flop_rate") and spellings["tokens"] == (1, "count")
    assert not {"ktokens", "kchips", "Mx", "k%", "k"} & set(spellings)


# --- parse_quantity: a typed answer in SI units, and format_quantity back --------------------------------------------
@for_each([
    (("4.98 ms",), (4.98e-3, "time")), (("6.7 GB",), (6.7e9, "bytes")), (("2 GiB",), (2.0 * 2**30, "bytes")),
    (("1,536", "tokens"), (1536.0, "count")), (("1,536 tokens",), (1536.0, "count")),
    (("12,345,678 B",), (12345678.0, "bytes")), (("1_000 tokens",), (1000.0, "count")),
    (("50 %",), (0.5, "percent")),  # a percentage is a fraction
    (("2.5", "ms"), (2.5e-3, "time")), ((np.float32(2.5), "ms"), (2.5e-3, "time")),  # a plain number: the default
    ((4, "ms"), (4e-3, "time")), ((2.5, "GB"), (2.5e9, "bytes")),
    (("3 us", "ms"), (3e-6, "time")),  # a typed unit over the default
], ids=str)
def test_parse_quantity_reads_the_unit_or_falls_back_to_the_default(args, expected):
    value, kind = parse_quantity(*args)
    assert (value, kind) == (pytest.approx(expected[0], rel=1e-7), expected[1])


def test_format_quantity_keeps_scientific_notation_and_never_writes_more_whole_digits_than_asked():
    assert format_quantity(1.5e12, "B") == "1.5e+12 B"
    assert format_quantity(12345.0, "B", 3) == "1.23e+04 B"
    assert format_quantity(4.98e-3, "ms") == "4.98 ms"
    # 123,456 tokens to 3 digits: '1.23e+05', not a 6-digit plain number
    assert format_quantity(123456.0, "tokens") == "1.23e+05 tokens"
    assert format_quantity(999.6, "ms", 3) == "1e+06 ms"
    assert format_quantity(999.4e-3, "ms", 3) == "999 ms"


# --- Bad input: a ValueError naming the problem and what to write ----------------------------------------------------
@for_each([
    *[(lambda text=text: read_number(text), "write it like '4.98 ms'")
      for text in ["", "   ", "abc", "--3", "e5", ".", ",", "ms 4"]],
    *[(lambda text=text: read_number(text), r"\bwrite it like '4\.98 ms' or '240'") for text in ("E5", "e5 s", "+E3")],
    (lambda: read_number("1e400 s"), "finite"),
    (lambda: read_number(4.98), r"\btext must be a string such as '4\.98 ms', got float\b"),
    # "kchip" is not 1,000 chips: counts are written out in full ("1,000 chips"), so a prefix on one is refused
    *[(lambda unit=unit: parse_unit(unit), "unknown unit") for unit in ["k", "ktok", "ksequences", "Mchips", "G%",
                                                                        "kx", "kchip", "Mchip", "ktoken",
                                                                        "Gsequence", "kways", "Mtokens"]],
    (lambda: parse_unit("furlong"), r"\bunknown unit 'furlong'; try one like s, ms\b"),
    *[(lambda bad=bad: parse_unit(bad), r"\ba unit is a string such as 'ms' or 'GB', got\b")
      for bad in (3, None, b"ms")],
    (lambda: parse_quantity("3 parsecs"), "unknown unit"),
    (lambda: parse_quantity("3 s", "parsecs"), r"\bunknown unit 'parsecs'"),  # a bad default, even with a unit typed
    (lambda: parse_quantity(float("nan")), "the answer must be a finite number"),
    (lambda: parse_quantity("1,5 ms"), r"'1,5 ms'.*thousands separator.*decimal point as '\.', e\.g\. '1\.5 ms'"),
    *[(lambda text=text: parse_quantity(text), "decimal point") for text in ["1,53 s", "0,5"]],
    (lambda: parse_quantity(True, "ms"), r"\bexpected a number, got True\b"),
    (lambda: parse_quantity(None, "ms"), r"\bexpected a number or a string such as '4\.98 ms', got None\b"),
    (lambda: parse_quantity([1.0], "ms"), r"\bexpected a number or a string\b"),
], ids=str)
def test_bad_input_gets_a_value_error_naming_the_problem_and_what_to_write(call, words):
    with pytest.raises(ValueError, match=words):
        call()
