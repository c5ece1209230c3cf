"""The exercise checker: accepts units and forms, says how far off, and hints at the classic slips."""

import math

import pytest

from scaling_lib.book.exercises import check, exercises, get_exercise, grade
from scaling_lib.units import format_quantity, parse_quantity


@pytest.mark.parametrize("exercise_id", sorted(exercises()))
def test_every_exercise_has_a_positive_computed_answer_that_checks(exercise_id):
    exercise = get_exercise(exercise_id)
    expected = exercise.expected()
    assert math.isfinite(expected) and expected > 0
    assert grade(exercise_id, format_quantity(expected, exercise.unit, 6)).correct
    assert not grade(exercise_id, format_quantity(expected * 1.5, exercise.unit, 6)).correct


def test_answers_with_units_and_forms():
    # 0.5786 ms is the [64, 8192] x [8192, 28672] bf16 matmul on one v5e.
    for answer in (0.5786, "0.5786 ms", "578.6 us", "5.786e-4 s", "578.6 µs"):
        assert grade("ch1.matmul-time-v5e", answer).correct, answer
    assert grade("ch1.bcrit-v6e", "575 tokens").correct
    assert grade("ch1.bcrit-v6e", "5.75e2").correct


def test_hints_for_factor_two_units_and_wrong_kind(capsys):
    verdict = check("ch1.bcrit-v6e", 2 * 575)
    assert not verdict.correct and verdict.ratio == pytest.approx(2.0, rel=0.01)
    assert "factor of 2" in capsys.readouterr().out
    assert "units" in grade("ch1.matmul-time-v5e", "0.5786 s").message
    assert "asks for ms" in grade("ch1.matmul-time-v5e", "3 GB").message
    assert "No answer yet" in grade("ch1.bcrit-v6e", None).message
    assert "0.8x" in grade("ch1.bcrit-v6e", 460).message


def test_unknown_exercise_and_unreadable_answers():
    with pytest.raises(ValueError, match="unknown exercise 'ch99.nope'"):
        grade("ch99.nope", 1)
    with pytest.raises(ValueError, match="could not read a number"):
        grade("ch1.bcrit-v6e", "about two hundred")
    with pytest.raises(ValueError, match="unknown unit"):
        grade("ch1.bcrit-v6e", "575 parsecs")


def test_parse_and_format_quantities():
    assert parse_quantity("6.7 GB") == (pytest.approx(6.7e9), "bytes")
    assert parse_quantity("6.25 GiB") == (pytest.approx(6.25 * 2**30), "bytes")
    assert parse_quantity("1,920 tokens") == (1920.0, "count")
    assert parse_quantity("197 TFLOP/s") == (pytest.approx(1.97e14), "flop_rate")
    assert parse_quantity(4.98, "ms") == (pytest.approx(4.98e-3), "time")
    assert format_quantity(0.00498, "ms") == "4.98 ms"
    assert format_quantity(6.71e9, "GB") == "6.71 GB"
