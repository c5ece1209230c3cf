"""One exercise of the book: a question, what its answer is (a number in a unit, a choice, or several parts), and the
slips a reader is likely to make, each with the wrong value it produces.

Each chapter's set (`ch01.py` ... `ch10.py`) is a tuple `EXERCISES` of these; importing a set has no side effect.
`checker` collects them into the registry that `check` reads. Every value (the answer, each slip, each other accepted
convention) is a callable that asks scaling_lib when the reader checks: nothing is stored.

    Exercise(
        id="ch4.kv-per-token-llama3-70b",
        question="LLaMA-3-70B has ... How many bytes of bf16 KV cache does one token take, in kB?",
        answer=Number("kB", lambda: kv_bytes_per_token("llama3-70b", "bf16"), slips=(
            Slip("keys only", lambda: kv_bytes_per_token("llama3-70b", "bf16") / 2,
                 "The cache stores a key AND a value for every KV head of every layer."),
        )),
    )
"""

import math
import re
from dataclasses import dataclass, field
from typing import Callable

from ...units import parse_unit

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Slip:
    """A likely mistake: what it is (`name`, a few words), the value it produces in SI units (`value`, computed by
    scaling_lib with the mistaken input), and what to re-check (`hint`: it names the idea, never the answer)."""

    name: str
    value: Callable[[], float]
    hint: str


@dataclass(frozen=True)
class Convention:
    """Another answer that is also right, under a convention the chapter names (`name`), e.g. an exact collective
    count beside the chapter's closed-form approximation. `value` is computed by scaling_lib, in SI units."""

    name: str
    value: Callable[[], float]


@dataclass(frozen=True)
class Number:
    """A numeric answer in `unit` (how the reader is asked for it; `expected()` returns SI units).

    A modelling answer is accepted within the band `rel_tol`; a count (`integer=True`) must be the exact whole number,
    and the question says how to round (down for what fits, up for what is needed). `slips` are checked by value,
    nearest first; `also` lists other accepted conventions.

    Used in the appendix *Exercises index*.
    """

    unit: str
    expected: Callable[[], float]
    rel_tol: float = 0.02
    integer: bool = False
    slips: tuple = ()
    also: tuple = ()
    name: str = ""

    def __post_init__(self):
        parse_unit(self.unit)
        if not 0 <= self.rel_tol < 1:
            raise ValueError(f"rel_tol must be in [0, 1), got {self.rel_tol!r}: it is the accepted relative band")
        if self.name and not _NAME.match(self.name):
            raise ValueError(f"part name {self.name!r} must be lower-case letters, digits and _ (a Python name)")
        for slip in self.slips:
            if not isinstance(slip, Slip):
                raise ValueError(f"slips must be Slip(name, value, hint) entries, got {slip!r}")
        for other in self.also:
            if not isinstance(other, Convention):
                raise ValueError(f"also must hold Convention(name, value) entries, got {other!r}")

    @property
    def band(self) -> str:
        """How an answer is judged, in words: 'a whole number' or 'within ±2%'."""
        if self.integer:
            return "a whole number"
        return "exactly" if self.rel_tol == 0 else f"within ±{100 * self.rel_tol:g}%"


@dataclass(frozen=True)
class Choice:
    """A multiple-choice answer: `options` maps a letter to its text, `correct` is the right letter, and `why` maps
    a wrong letter to a hint that explains what that option gets wrong (without naming the right one).

    Used in the appendix *Exercises index*.
    """

    options: dict
    correct: str
    why: dict = field(default_factory=dict)
    name: str = ""

    def __post_init__(self):
        if len(self.options) < 2 or not all(re.fullmatch(r"[a-z]", key) for key in self.options):
            raise ValueError(f"options must map at least two single letters a, b, ... to texts, got {self.options!r}")
        if self.correct not in self.options:
            raise ValueError(f"correct={self.correct!r} is not one of the options {sorted(self.options)}")
        unknown = set(self.why) - set(self.options)
        if unknown or self.correct in self.why:
            raise ValueError(f"why must explain wrong options only; got keys {sorted(self.why)}")
        if self.name and not _NAME.match(self.name):
            raise ValueError(f"part name {self.name!r} must be lower-case letters, digits and _ (a Python name)")

    def inline(self) -> str:
        """'(a) first; (b) second': the options on one line."""
        return "; ".join(f"({key}) {text}" for key, text in self.options.items())


@dataclass(frozen=True)
class Exercise:
    """A checked exercise: `answer` is a `Number`, a `Choice`, or a tuple of them (a multi-part answer, each part
    named), checked part by part. The question states every convention the answer depends on."""

    id: str
    question: str
    answer: object

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id.strip():
            raise ValueError(f"an exercise needs a non-empty string id, got {self.id!r}")
        parts = self.answer if isinstance(self.answer, tuple) else (self.answer,)
        if not parts or not all(isinstance(part, (Number, Choice)) for part in parts):
            raise ValueError(f"{self.id}: answer must be a Number, a Choice, or a tuple of them, got {self.answer!r}")
        if isinstance(self.answer, tuple):
            names = [part.name for part in parts]
            if not all(names) or len(set(names)) != len(names):
                raise ValueError(f"{self.id}: every part of a multi-part answer needs its own name, got {names}")

    @property
    def parts(self) -> tuple:
        """The answer's parts, in order (one part for a single answer)."""
        return self.answer if isinstance(self.answer, tuple) else (self.answer,)

    @property
    def unit(self) -> str:
        """The unit of a single numeric answer; for other answers, the units of the parts (for the index)."""
        return ", ".join(part.unit if isinstance(part, Number) else "choice" for part in self.parts)

    def markdown(self) -> str:
        """The question as the chapter shows it: the text, then each choice's options."""
        lines = [self.question.strip()]
        for part in self.parts:
            if isinstance(part, Choice):
                label = f"`{part.name}`, one of: " if part.name else ""
                lines.append(f"{label}{part.inline()}.")
        return "\n\n".join(lines)


def is_whole(value: float) -> bool:
    """True when `value` is a whole number up to float rounding (4.6e3 read from '4.6k' is 4600)."""
    return math.isfinite(value) and abs(value - round(value)) <= 1e-9 * max(1.0, abs(value))
