"""The exercise checker: `check("ch1.bcrit-v6e", 575)` or `check("ch1.matmul-time", "0.58 ms")`.

Each exercise's expected answer is computed by scaling_lib when you check, never stored. An answer may be a number
(read in the exercise's unit) or a string with a unit ("4.98 ms", "6.7 GB", "1,920 tokens"). A wrong answer gets how
far off it is and, for the classic slips, a hint: a factor of 2 (bytes per element, or the 2 in 2BDF), a power of
1000 (ms vs s, MB vs GB), 2^30 / 1e9 (GiB vs GB).
"""

import math
from dataclasses import dataclass

from ...units import format_quantity, parse_quantity, parse_unit
from . import ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11
from .exercise import Exercise

CHAPTER_SETS = (ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11)


@dataclass(frozen=True)
class Verdict:
    """The result of `check`: whether the answer is right, the ratio answer / expected, and the message shown."""

    exercise_id: str
    correct: bool
    ratio: float
    message: str

    def __repr__(self):
        return self.message

    def _ipython_display_(self):  # `check` already printed the message; show nothing twice in a notebook
        pass


_EXERCISES: dict = {}

_GENERIC_SLIPS = (
    (2.0, "a factor of 2: bytes per element (bf16 is 2 B, int8 1 B), or the 2 in 2·B·D·F?"),
    (2.0**30 / 1e9, "GiB vs GB: 1 GiB = 2^30 B = 1.074e9 B."),
    (2.0**20 / 1e6, "MiB vs MB: 1 MiB = 2^20 B."),
    (2.0**40 / 1e12, "TiB vs TB: 1 TiB = 2^40 B."),
)


def register(exercise: Exercise) -> Exercise:
    """Add an exercise to the registry (ids are unique): the book's own come from CHAPTER_SETS; a reader may add more."""
    if not isinstance(exercise, Exercise):
        raise ValueError(f"register takes an Exercise, got {type(exercise).__name__}")
    if exercise.id in _EXERCISES and _EXERCISES[exercise.id] is not exercise:
        raise ValueError(f"exercise id {exercise.id!r} is already registered")
    _EXERCISES[exercise.id] = exercise
    return exercise


for _chapter in CHAPTER_SETS:
    for _exercise in _chapter.EXERCISES:
        register(_exercise)


def exercises() -> dict:
    """All registered exercises, by id."""
    return dict(_EXERCISES)


def get_exercise(exercise_id: str) -> Exercise:
    registry = exercises()
    if exercise_id not in registry:
        raise ValueError(f"unknown exercise {exercise_id!r}; known ids: {', '.join(sorted(registry))}")
    return registry[exercise_id]


def _close(ratio: float, factor: float, rel_tol: float) -> bool:
    return abs(ratio / factor - 1.0) <= rel_tol or abs(ratio * factor - 1.0) <= rel_tol


def _hint(ratio: float, exercise: Exercise) -> str:
    if ratio <= 0:
        return "the sign is wrong: every quantity here is positive."
    for factor, text in tuple(exercise.hints) + _GENERIC_SLIPS:
        if _close(ratio, factor, exercise.rel_tol):
            return text
    power = math.log10(ratio) / 3.0
    if abs(power - round(power)) < 0.02 and round(power) != 0:
        return f"off by 10^{3 * round(power)}: check your units (s vs ms vs us, kB vs MB vs GB)."
    return ""


def grade(exercise_id: str, answer) -> Verdict:
    """Compare `answer` with the exercise's computed value, within its relative tolerance. Prints nothing."""
    exercise = get_exercise(exercise_id)
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        return Verdict(exercise_id, False, float("nan"),
                       f"[{exercise_id}] No answer yet: replace None with your answer"
                       + (f" in {exercise.unit}." if exercise.unit else " (a plain number)."))
    value, kind = parse_quantity(answer, exercise.unit)
    expected_kind = parse_unit(exercise.unit)[1]
    if kind != expected_kind:
        return Verdict(exercise_id, False, float("nan"),
                       f"[{exercise_id}] That answer is a {kind} quantity; this exercise asks for {exercise.unit} "
                       f"({expected_kind}).")
    expected = exercise.expected()
    ratio = value / expected
    shown = format_quantity(value, exercise.unit, 4)
    tolerance = f"{exercise.rel_tol:.0%}"
    if abs(ratio - 1.0) <= exercise.rel_tol:
        return Verdict(exercise_id, True, ratio,
                       f"[{exercise_id}] Correct: {shown} (within {tolerance} of "
                       f"{format_quantity(expected, exercise.unit, 4)}).")
    hint = _hint(ratio, exercise)
    off = f"{ratio:.3g}x the expected value" if ratio > 0 else "of the wrong sign"
    message = f"[{exercise_id}] Not yet: {shown} is {off} (tolerance {tolerance})."
    if hint:
        message += f" Hint: {hint}"
    return Verdict(exercise_id, False, ratio, message)


def check(exercise_id: str, answer) -> Verdict:
    """Grade an answer and print the verdict (how far off, and a hint for common slips)."""
    verdict = grade(exercise_id, answer)
    print(verdict.message)
    return verdict
