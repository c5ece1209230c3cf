"""The exercise checker: `check("ch1.matmul-time-v5e", {"time": "0.58 ms", "bound": "b"})`.

Each exercise's answer is computed by scaling_lib when you check, never stored. A verdict says right or wrong, the
direction ("too high", "too low") and, when the answer matches a slip the exercise lists (one-way for bidirectional
bandwidth, P for P_mm, T for T/2, stored for read bytes, ...), which slip and what to re-check. It never prints the
expected value or how far off you are: ask for that explicitly with `check(id, answer, reveal=True)` or
`solution(id)`.

Answers: a number (read in the exercise's unit), a string with a unit ("4.98 ms", "6.7 GB", "4.6k tokens", "1,234"),
a letter for a multiple-choice part, and a tuple or dict for an exercise with several parts. Anything else gets a
message saying what to write, never a traceback; a long answer is quoted cut short, with a note that it was cut.

The rendered book's answer boxes show the same verdicts in the page's words (`grade(..., page=True)`): no exercise
id in front (the box sits under its exercise), what to type instead of the notebook's "replace None", and each part
by its name in words.
"""

import difflib
import functools
import math
import re
from dataclasses import dataclass

from ...units import parse_unit, read_number, unit_spellings
from ..text import print_text, wrap_text
from . import ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11, ch12, ch13, ch14, appendix_worked
from .exercise import Choice, Exercise, Number, is_whole, part_heading

CHAPTER_SETS = (ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09, ch10, ch11, ch12, ch13, ch14, appendix_worked)


@dataclass(frozen=True)
class PartVerdict:
    """The verdict on one part: right or wrong, the direction of a wrong number ("high", "low"), the slip it matched
    (its name), and the line shown to the reader."""

    name: str
    correct: bool
    message: str
    direction: str | None = None
    slip: str | None = None
    answered: bool = True


@dataclass(frozen=True)
class Verdict:
    """The result of `check`: whether every part is right, the message shown, and the verdict on each part."""

    exercise_id: str
    correct: bool
    message: str
    parts: tuple = ()

    @property
    def slip(self):
        """The name of the first slip recognised in the answer, or None."""
        return next((part.slip for part in self.parts if part.slip), None)

    @property
    def direction(self):
        """'high' or 'low' for the first wrong numeric part, or None."""
        return next((part.direction for part in self.parts if part.direction), None)

    def __repr__(self):
        return self.message

    def _ipython_display_(self):  # `check` already printed the message; show nothing twice in a notebook
        pass


@dataclass(frozen=True)
class Solution:
    """What `solution` shows: the question and the answer to each part (SI values in `answers`, a letter for a
    choice)."""

    exercise_id: str
    answers: dict
    message: str

    def __repr__(self):
        return self.message

    def _ipython_display_(self):
        pass


_EXERCISES: dict = {}


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


def _registered(exercise_id) -> Exercise | None:
    """The registered exercise with this id, or None (for any id: a list or a dict is no id, not a TypeError)."""
    return _EXERCISES.get(exercise_id) if isinstance(exercise_id, str) else None


def get_exercise(exercise_id: str) -> Exercise:
    """The registered exercise with this id; ValueError naming the closest ids otherwise."""
    exercise = _registered(exercise_id)
    if exercise is None:
        raise ValueError(_unknown(exercise_id))
    return exercise


def _unknown(exercise_id) -> str:
    if not isinstance(exercise_id, str):
        return (f"an exercise id is a string such as 'ch4.kv-per-token-llama3-70b', got {type(exercise_id).__name__} "
                f"{_short(exercise_id)}")
    close = difflib.get_close_matches(exercise_id[:200], list(_EXERCISES), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else "the ids are listed in the Exercises index"
    return f"unknown exercise {_short(exercise_id)}; {hint} (ids look like 'ch4.kv-per-token-llama3-70b')"


# --- Reading an answer ---------------------------------------------------------------------------------------------

class _Unreadable(Exception):
    """An answer that cannot be read; its message says what to write instead."""


def _short(value, limit: int = 60) -> str:
    """repr(value), cut to `limit` characters (a reader's answer may be a 10**400 or a megabyte of text)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a reader's object whose repr fails still gets a message
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


_ECHO = 60  # characters of a reader's text a verdict quotes


def _echo(text: str) -> str:
    """A reader's text as a verdict quotes it: its repr, or for a long text its first characters and a note that it
    was cut (a 10,000-character answer gets a verdict of a few lines, not 10,000 characters)."""
    if len(text) <= _ECHO:
        return repr(text)
    return f"{text[:_ECHO]!r}... (cut: {len(text):,} characters in all)"


def _label(exercise_id) -> str:
    """An id as a verdict's [label]: a string as it is (cut to 60 characters), anything else as its short repr."""
    return exercise_id if isinstance(exercise_id, str) and len(exercise_id) <= 60 else _short(exercise_id)


def _finite(value: float, answer, unit: str) -> float:
    """`value` (an answer in SI units) if it is finite, else _Unreadable: 1e300 GB is 1e309 B, past any float."""
    if not math.isfinite(value):
        raise _Unreadable(f"{_short(answer)} is not a finite number in {unit or 'the unit asked'}; check the "
                          "arithmetic that produced it")
    return value


_SYNONYMS = {"times": "x", "×": "x", "percent": "%", "pct": "%", "tok": "tokens"}
_COUNT_KINDS = ("count", "token_rate")
_MULTIPLIERS = {"k": 1e3, "K": 1e3, "M": 1e6}


_BIT_RATE = re.compile(r"^([kKMGTP]?)(?:b/s|bit/s|bits/s|bps|bit/sec)$")
# Bits for a byte quantity: "kbit", "Mbit", "bits", and a lower-case b after an upper-case prefix ("Mb", "Gb", "Kb"),
# as memory and link sizes are quoted in bits; "kb", "mb", "gb" in lower case stay bytes (read in any letter case).
_BITS = re.compile(r"^([kKMGTP]?)(?:bits?|(?<=[KMGTP])b)$")
_COUNT_WORDS = {"B": 1e9, "bn": 1e9, "billion": 1e9, "billions": 1e9, "million": 1e6, "millions": 1e6,
                "thousand": 1e3, "thousands": 1e3, "T": 1e12, "trillion": 1e12}
# Units spelled out: "milliseconds", "2 gigabytes", "terabytes per second", "megabits".
_WORD_PREFIXES = {"": "", "kilo": "k", "mega": "M", "giga": "G", "tera": "T", "peta": "P", "milli": "m",
                  "micro": "u", "nano": "n", "kibi": "Ki", "mebi": "Mi", "gibi": "Gi", "tebi": "Ti"}
_WORD_BASES = {"second": "s", "seconds": "s", "sec": "s", "secs": "s", "byte": "B", "bytes": "B", "bit": "bit",
               "bits": "bit", "byte/s": "B/s", "bytes/s": "B/s", "bytes per second": "B/s", "byte per second": "B/s",
               "bits per second": "bit/s", "bit per second": "bit/s", "flop": "FLOP", "flops": "FLOPs"}
_SPELLED = re.compile(r"^(" + "|".join(sorted(filter(None, _WORD_PREFIXES), key=len, reverse=True)) + r")?\s*("
                      + "|".join(re.escape(b) for b in sorted(_WORD_BASES, key=len, reverse=True)) + r")$")


def _read_bit_rate(text: str):
    """(bytes-per-second factor, 'bandwidth') for a rate in bits ('32.9 Tb/s', '25 Gbps', '400 Gbit/s'), else None.
    A lower-case b after an upper-case prefix is a bit, as link speeds are quoted; 8 bits make a byte."""
    match = _BIT_RATE.match(text)
    if not match:
        return None
    prefix = match.group(1)
    return parse_unit(f"{prefix}B/s")[0] / 8.0, "bandwidth"


def _read_bits(text: str):
    """(bytes factor, 'bytes') for a size in bits ('2,621 kbit', '2.6 Mb', '21 Gbit'), else None: 8 bits a byte, so
    a byte quantity typed in bits is read as what it is (and a byte count labelled bits is 8 times too small)."""
    match = _BITS.match(text)
    if not match:
        return None
    return parse_unit(f"{match.group(1)}B")[0] / 8.0, "bytes"


def _spelled_out(text: str) -> str:
    """A unit spelled out in words, written as a symbol: 'milliseconds' -> 'ms', 'gigabytes' -> 'GB', 'megabits' ->
    'Mbit', 'terabytes per second' -> 'TB/s'; any other text as it is."""
    match = _SPELLED.match(" ".join(text.lower().split()))
    if not match:
        return text
    return _WORD_PREFIXES[match.group(1) or ""] + _WORD_BASES[match.group(2)]


def _read_count_word(text: str, default_unit: str):
    """(factor, 'count') for a count written with a scale word: '18.4B' (billions, the book's own notation for
    parameters), '3 million', '2 thousand'; None when the answer is not a count or the word is no scale."""
    if parse_unit(default_unit)[1] != "count" or text not in _COUNT_WORDS:
        return None
    return _COUNT_WORDS[text], "count"


@functools.cache
def _units_in_any_case() -> dict:
    """{a unit spelling in lower case: the spellings `parse_unit` reads that lower to it}, for the meanings a reader
    may have (milli-bytes and micro-tokens are nobody's: only factors of at least 1, or any time)."""
    index = {}
    for spelling, (factor, kind) in unit_spellings().items():
        if any(char.isalpha() for char in spelling) and (factor >= 1 or kind == "time"):
            index.setdefault(spelling.lower(), []).append(spelling)
    return index


def _capitals(spelling: str) -> tuple:
    """Sort key: the capital letters of a spelling, fewest and latest first ('kB' before 'KB', 'ms' before 'Ms')."""
    return tuple(i for i, char in reversed(list(enumerate(spelling))) if char.isupper())


def _read_unit(text: str, default_unit: str, scaled: bool = False):
    """(factor, kind) of a unit a reader typed: exact spelling first, then one 'k'/'M' on counts ('4.6k tokens';
    never two: 'kk' is no unit), then any letter case when that leaves one meaning ('gb' is GB, 'Tokens' is tokens;
    'MS' could be ms or Ms and is refused). Rates in bits ('Tb/s') and counts in billions ('18.4B' where a count is
    asked) are read first, and units spelled out ('milliseconds', 'gigabytes'). `scaled`: the text follows a 'k' or 'M'
    already read."""
    text = _spelled_out(_SYNONYMS.get(text.strip(), text.strip()))
    if not text:
        return parse_unit(default_unit)
    for special in (_read_bit_rate(text), _read_bits(text), _read_count_word(text, default_unit)):
        if special is not None:
            return special
    try:
        return parse_unit(text)
    except ValueError:
        pass
    if text[0] in _MULTIPLIERS and not scaled:
        rest = _SYNONYMS.get(text[1:].strip(), text[1:].strip())
        try:
            factor, kind = _read_unit(rest, default_unit, scaled=True) if rest else parse_unit(default_unit)
        except _Unreadable:
            factor, kind = None, None
        if kind in _COUNT_KINDS:
            return _MULTIPLIERS[text[0]] * factor, kind
    meanings = {}
    if any(char.isalpha() for char in text):
        # every spelling of a unit that differs from the text only in letter case, the least capitalised first
        for spelling in sorted(_units_in_any_case().get(text.lower(), ()), key=_capitals):
            factor, kind = unit_spellings()[spelling]
            meanings.setdefault((factor, kind), spelling)
    if len(meanings) == 1:
        return next(iter(meanings))
    if len(meanings) > 1:
        raise _Unreadable(f"the unit {_echo(text)} is ambiguous ({' or '.join(sorted(meanings.values()))}); "
                          "write it in its usual case, e.g. ms for milliseconds, MB for megabytes")
    raise _Unreadable(f"could not read the unit {_echo(text)}; write one like {default_unit or 'x'}, ms, GB, GiB, "
                      "tokens, tok/s, FLOPs/B or %")


def _read_number(answer, unit: str) -> tuple:
    """(SI value, kind) of one numeric answer, or _Unreadable with a message saying what to write."""
    if isinstance(answer, bool):
        raise _Unreadable(f"{answer} is a yes/no value, not a number; write the number, e.g. 240 or '240 {unit}'")
    if isinstance(answer, (list, tuple, set, dict)):
        raise _Unreadable(f"this asks for one number, got a {type(answer).__name__} of {len(answer)} values")
    if hasattr(answer, "shape") and hasattr(answer, "size"):  # NumPy / JAX arrays
        try:
            size = int(answer.size)
            if size == 1:
                answer = answer.item() if hasattr(answer, "item") else float(answer)
        except Exception:  # noqa: BLE001 - an array-like that cannot give its one value
            raise _Unreadable(f"expected a number or a string such as '4.98 {unit}', got {type(answer).__name__}")\
                from None
        if size != 1:
            raise _Unreadable(f"this asks for one number, got an array of {size} values")
    if isinstance(answer, complex):
        raise _Unreadable(f"{answer!r} is a complex number; every answer here is a real number")
    if not isinstance(answer, str):
        try:
            value = float(answer)
        except OverflowError:  # an int such as 10**400 has no float
            raise _Unreadable(f"{_short(answer)} is too large to be an answer here; check the arithmetic that "
                              "produced it") from None
        except Exception:  # noqa: BLE001 - whatever a reader's object raises, the verdict says what to write
            raise _Unreadable(f"expected a number or a string such as '4.98 {unit}', got {type(answer).__name__}")\
                from None
        if not math.isfinite(value):
            raise _Unreadable(f"{value} is not a finite number; check the arithmetic that produced it")
        factor, kind = parse_unit(unit)
        return _finite(value * factor, answer, unit), kind
    try:
        value, rest = read_number(answer)
    except ValueError as problem:
        if len(answer) > _ECHO:  # read_number quotes the whole text
            raise _Unreadable(f"could not read a number from {_echo(answer)}; write it like '4.98 ms' or '240'") \
                from None
        raise _Unreadable(str(problem)) from None
    factor, kind = _read_unit(rest, unit)
    return _finite(value * factor, answer, unit), kind


def _read_choice(answer, part: Choice) -> str:
    letters = ", ".join(part.options)
    if not isinstance(answer, str):
        raise _Unreadable(f"answer this part with one of the letters {letters}, as a string such as 'b'")
    text = " ".join(answer.lower().split())
    for key, option in part.options.items():
        if text == " ".join(option.lower().split()):
            return key
    text = text.strip("().:[] ")
    if text in part.options:
        return text
    raise _Unreadable(f"{_echo(answer)} is not one of the options; answer with one of the letters {letters}")


# --- Judging -------------------------------------------------------------------------------------------------------

_BINARY = {"bytes": ((2.0**10 / 1e3, "KiB vs kB: 1 KiB = 1,024 B, 1 kB = 1,000 B."),
                     (2.0**20 / 1e6, "MiB vs MB: 1 MiB = 2^20 B, 1 MB = 10^6 B."),
                     (2.0**30 / 1e9, "GiB vs GB: 1 GiB = 2^30 B = 1.074 x 10^9 B; the book's GB are 10^9 B."),
                     (2.0**40 / 1e12, "TiB vs TB: 1 TiB = 2^40 B, 1 TB = 10^12 B."),
                     (8.0, "bits vs bytes: 1 byte is 8 bits.")),
           "bandwidth": ((2.0**30 / 1e9, "GiB/s vs GB/s: the book's GB are 10^9 B."),
                         (2.0**40 / 1e12, "TiB/s vs TB/s: 1 TiB = 2^40 B, 1 TB = 10^12 B."),
                         (8.0, "bits vs bytes: link speeds are often quoted in bits per second."))}
_PREFIXES = {"time": "s, ms = 10^-3 s, us = 10^-6 s", "bytes": "kB, MB, GB, TB",
             "bandwidth": "GB/s vs TB/s", "flops": "GFLOP, TFLOP, PFLOP", "flop_rate": "TFLOP/s vs PFLOP/s",
             "token_rate": "tokens/s vs thousands of tokens/s", "count": "units vs thousands",
             "intensity": "FLOPs per byte", "percent": "%"}


def _close(a: float, b: float, tol: float) -> bool:
    return b != 0 and abs(a / b - 1.0) <= tol


def _log_ratio(a: float, b: float) -> float:
    """ln(a / b) for positive finite a and b, without the overflow (1e300 / 1e-9) or underflow of a / b itself."""
    return math.log(a) - math.log(b)


def _generic_hint(ratio: float, kind: str) -> tuple:
    """(slip name, hint) for a slip no exercise lists, from the answer's ratio to the expected value: binary prefixes
    and bits only for byte quantities and bandwidths, fraction vs percent only for percentages, a power of 1,000 by
    the unit's kind (each a named unit slip: the name is what precedes the colon), else a stray factor of 2 (a hint,
    no name: it says where to look, not what the slip was); ("", "") when nothing explains the ratio."""
    for factor, text in _BINARY.get(kind, ()):
        if _close(ratio, factor, 0.006) or _close(ratio, 1.0 / factor, 0.006):
            return text.split(":")[0], text
    if kind == "percent" and (_close(ratio, 0.01, 0.03) or _close(ratio, 100.0, 0.03)):
        return "fraction vs percent", "fraction vs percent: the question asks for a percentage (0.25 is 25%)."
    if not 0 < ratio < math.inf:  # an answer so far off that its ratio overflows: no unit slip explains it
        return "", ""
    power = math.log10(ratio) / 3.0
    if round(power) != 0 and abs(power - round(power)) < 0.01:
        return "a power of 1,000", f"off by a power of 1,000: check the unit prefix ({_PREFIXES.get(kind, 'k, M, G')})."
    if _close(ratio, 2.0, 0.02) or _close(ratio, 0.5, 0.02):
        return "", "off by a factor of 2 somewhere: recount each factor of 2 in your formula."
    return "", ""


def _answer_in(part: Number, value: float) -> str:
    """A value in the part's unit, readably: '7,024 tokens', '0.5786 ms', '524,288 tokens'."""
    scaled = value / parse_unit(part.unit)[0]
    if abs(scaled) >= 1e15:  # a reader's 1e300 is not written out in 300 digits
        text = f"{scaled:.4g}"
    elif abs(scaled) >= 1e4 or part.integer and is_whole(scaled):
        text = f"{scaled:,.0f}"
    else:
        text = f"{scaled:.4g}"
    return f"{text} {part.unit}".strip()


def _asked(unit: str) -> str:
    """How a verdict names the unit asked for: the unit, or 'a plain number' when there is none."""
    return unit if unit else "a plain number"


def _slip_window(part: Number) -> float:
    """How close an answer must come to a slip's value to be named as that slip: the part's own band (at least
    0.1%). A part whose band is under 1% has a slip close to its answer (P_mm is 1.5% below P for LLaMA-3-70B,
    amax / 127 is 0.4% above amax / 127.5), and the two windows must not overlap."""
    return max(part.rel_tol, 0.001)


def _judge_number(part: Number, answer) -> PartVerdict:
    name = part.name
    try:
        value, kind = _read_number(answer, part.unit)
    except _Unreadable as problem:
        return PartVerdict(name, False, f"Cannot read that: {problem}.")
    expected_kind = parse_unit(part.unit)[1]
    if kind != expected_kind:
        return PartVerdict(name, False, f"That answer is a {kind} quantity; this asks for {_asked(part.unit)} "
                                        f"({expected_kind}).")
    scale = parse_unit(part.unit)[0]
    shown = _answer_in(part, value)
    if part.integer and not is_whole(value / scale):
        return PartVerdict(name, False, f"Not yet: {shown} is not a whole number; the answer is a count, rounded as "
                                        "the question says.")
    expected = part.expected()
    accepted = [("", expected)] + [(other.name, other.value()) for other in part.also]
    for label, target in accepted:
        if part.integer and round(value / scale) == round(target / scale) or \
                not part.integer and abs(value - target) <= part.rel_tol * abs(target):
            under = f" (under {label})" if label else ""
            return PartVerdict(name, True, f"Correct{under}: {shown}" + ("." if part.integer else
                                                                          f" (accepted {part.band})."))
    direction = "high" if value > expected else "low"
    if value <= 0:
        return PartVerdict(name, False, f"Not yet: {shown} is too low: every answer here is positive.", "low")
    slips = sorted(((abs(_log_ratio(value, slip.value())), slip) for slip in part.slips if slip.value() > 0),
                   key=lambda pair: pair[0])
    for distance, slip in slips:
        target = slip.value()
        matched = round(value / scale) == round(target / scale) if part.integer and is_whole(target / scale) \
            else abs(value / target - 1.0) <= _slip_window(part)
        if matched:
            return PartVerdict(name, False, f"Not yet: {shown} is too {direction}. It looks like {slip.name}: "
                                            f"{slip.hint}", direction, slip.name)
    unit_slip, hint = _generic_hint(value / expected, kind)
    far = " by more than a factor of 10" if abs(_log_ratio(value, expected)) > math.log(10) else ""
    message = f"Not yet: {shown} is too {direction}{far}."
    return PartVerdict(name, False, message + (f" Hint: {hint}" if hint else ""), direction, unit_slip or None)


def _judge_choice(part: Choice, answer) -> PartVerdict:
    try:
        key = _read_choice(answer, part)
    except _Unreadable as problem:
        return PartVerdict(part.name, False, f"Cannot read that: {problem}.")
    if key == part.correct:
        return PartVerdict(part.name, True, f"Correct: ({key}).")
    why = part.why.get(key, "")
    return PartVerdict(part.name, False, f"Not yet: ({key}) is not it." + (f" Hint: {why}" if why else ""),
                       slip=f"option ({key})" if why else None)


def _judge(part, answer) -> PartVerdict:
    if answer is None or isinstance(answer, str) and not answer.strip():
        return PartVerdict(part.name, False, "No answer yet.", answered=False)
    return _judge_number(part, answer) if isinstance(part, Number) else _judge_choice(part, answer)


def _format(part) -> str:
    """How to answer one part: its unit and band, or its letters."""
    if isinstance(part, Choice):
        return f"one of the letters {', '.join(part.options)}"
    return f"in {part.unit}, {part.band}" if part.unit else f"a plain number, {part.band}"


def _how_to_answer(exercise: Exercise) -> str:
    parts = exercise.parts
    if len(parts) == 1:
        return f"replace None with your answer ({_format(parts[0])})"
    names = ", ".join(f"{part.name} ({_format(part)})" for part in parts)
    example = "{" + ", ".join(f"'{part.name}': ..." for part in parts) + "}"
    return f"this exercise has {len(parts)} parts: {names}; answer with a dict {example} or a tuple in that order"


def _how_to_answer_in_page(exercise: Exercise) -> str:
    """What the answer box asks for, in the page's words: the box shows each part's unit and rule beside its
    input, and a reader types or picks, never edits a `None`."""
    def one(part) -> str:
        if isinstance(part, Choice):
            return "pick one of the options"
        unit = f" in {part.unit}" if part.unit else ""
        if part.integer:
            return f"type a whole number{unit}" + (f", rounded {part.rounding}" if part.rounding else "")
        return f"type a number{unit} ({part.rule})"
    parts = exercise.parts
    if len(parts) == 1:
        return one(parts[0])
    return "answer each part (" + "; ".join(f"{part_heading(part)}: {one(part)}" for part in parts) + ")"


def _split(exercise: Exercise, answer):
    """The answer to each part, in order (None where missing), or _Unreadable."""
    parts = exercise.parts
    if len(parts) == 1:
        return [answer]
    names = [part.name for part in parts]
    if isinstance(answer, dict):
        lowered = {str(key).strip().lower(): value for key, value in answer.items()}
        unknown = sorted(set(lowered) - set(names))
        if unknown:
            raise _Unreadable(f"unknown part {', '.join(map(repr, unknown))}; the parts are {', '.join(names)}")
        return [lowered.get(name) for name in names]
    if isinstance(answer, (list, tuple)):
        if len(answer) > len(parts):
            raise _Unreadable(f"got {len(answer)} answers for {len(parts)} parts ({', '.join(names)})")
        return list(answer) + [None] * (len(parts) - len(answer))
    return [answer] + [None] * (len(parts) - 1)


def _reveal(exercise: Exercise) -> tuple:
    """(answers by part name, the lines that state them)."""
    answers, lines = {}, []
    for part in exercise.parts:
        label = f"{part.name}: " if part.name else ""
        if isinstance(part, Choice):
            answers[part.name] = part.correct
            lines.append(f"{label}({part.correct}) {part.options[part.correct]}")
            continue
        value = part.expected()
        answers[part.name] = value
        text = _answer_in(part, value) + ("" if part.integer else f" (accepted {part.band})")
        for other in part.also:
            text += f"; also accepted: {_answer_in(part, other.value())} ({other.name})"
        lines.append(label + text)
    return answers, lines


def grade(exercise_id: str, answer=None, reveal: bool = False, *, page: bool = False) -> Verdict:
    """Judge `answer` part by part. Prints nothing; never raises for a reader's input. Only `reveal=True` (the bool)
    adds the expected answer; any other value of `reveal` gets a line saying so.

    `page=True` words the message for the rendered book's answer box (the same judgement): no "[id]" in front, what
    to type or pick when nothing is answered yet, each part by its name in words (`part_heading`)."""
    exercise = _registered(exercise_id)
    if exercise is None:
        return Verdict(_label(exercise_id), False, ("" if page else f"[{_label(exercise_id)}] ")
                       + f"{_unknown(exercise_id)}.")
    prefix = "" if page else f"[{exercise_id}] "
    try:
        answers = _split(exercise, answer)
    except _Unreadable as problem:
        return Verdict(exercise_id, False, f"{prefix}Cannot read that: {problem}.")
    verdicts = tuple(_judge(part, given) for part, given in zip(exercise.parts, answers))
    correct = all(v.correct for v in verdicts)
    if not any(v.answered for v in verdicts):
        how = _how_to_answer_in_page(exercise) if page else _how_to_answer(exercise)
        message = f"{prefix}No answer yet: {how}."
    elif len(verdicts) == 1:
        message = f"{prefix}{verdicts[0].message}"
    else:
        right = sum(v.correct for v in verdicts)
        names = [part_heading(part) if page else part.name for part in exercise.parts]
        message = "\n".join([f"{prefix}{right} of {len(verdicts)} parts right."]
                            + [f"  {name}: {v.message}" for name, v in zip(names, verdicts)])
    if reveal is not True and reveal is not False:  # "no" is a true value: only the bool True reveals
        message += (f"\n  reveal={_short(reveal)} is not True or False, so the answer stays hidden; pass "
                    "reveal=True to see it.")
    elif reveal:
        message += "\n" + "\n".join(["  The answer, as you asked:"] + [f"    {line}" for line in _reveal(exercise)[1]])
    return Verdict(exercise_id, correct, message, verdicts)


def check(exercise_id: str, answer=None, reveal: bool = False) -> Verdict:
    """Judge an answer and print the verdict: right or wrong, too high or too low, and the slip it looks like.

    `reveal=True` also prints the expected answer; `solution(exercise_id)` prints it without an answer."""
    verdict = grade(exercise_id, answer, reveal)
    print_text(wrap_text(verdict.message))
    return verdict


def solution(exercise_id: str) -> Solution:
    """Print an exercise's question and answer (every part, its accepted band, other accepted conventions), and the
    slips it watches for. The worked derivation is the folded solution under the exercise in its chapter."""
    exercise = _registered(exercise_id)
    if exercise is None:
        message = f"[{_label(exercise_id)}] {_unknown(exercise_id)}."
        print_text(wrap_text(message))
        return Solution(_label(exercise_id), {}, message)
    answers, lines = _reveal(exercise)
    slips = list(dict.fromkeys(slip.name for part in exercise.parts if isinstance(part, Number)
                               for slip in part.slips))
    text = [f"[{exercise_id}] {' '.join(exercise.markdown().split())}", "Answer:"] + [f"  {line}" for line in lines]
    if slips:
        text.append("Slips the checker recognises: " + "; ".join(slips) + ".")
    message = "\n".join(text)
    print_text(wrap_text(message))
    return Solution(exercise_id, answers, message)
