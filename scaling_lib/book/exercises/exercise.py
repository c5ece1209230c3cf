"""One exercise of the book: a question, what its answer is (a number in a unit, a choice, or several parts), and the
slips a reader is likely to make, each with the wrong value it produces.

Each chapter's set (`ch01.py` ... `ch10.py`) is a tuple `EXERCISES` of these; importing a set has no side effect.
`checker` collects them into the registry that `check` reads. Every value (the answer, each slip, each other accepted
convention) is a callable that asks scaling_lib when the reader checks: nothing is stored.

    Exercise(
        id="ch4.kv-per-token-llama3-70b",
        preamble="*Recompute.*",
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

from ...flops import matmul_params
from ...models import active_param_count
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


QUANTITIES = ("", "kv", "flops", "prefill")
ROUNDINGS = ("", "down", "up")  # how a count is rounded: as it comes, down (what fits), up (what is needed)


def _half(value: Callable[[], float]) -> Callable[[], float]:
    return lambda: value() / 2


def _with_matmul_params(value: Callable[[], float], model: str) -> Callable[[], float]:
    return lambda: value() * matmul_params(model) / active_param_count(model)


def standard_slips(quantity: str, value: Callable[[], float], model: str = "") -> tuple:
    """The slips every answer of one kind of quantity gets, whatever the exercise (`Number.quantity`):

    - "kv" (bytes of a KV cache, or a time that reads or moves them): keys only, half of it;
    - "flops" (a FLOP count): the factor 2 of a multiply-add left out, half the FLOPs;
    - "prefill" (a prefill time priced at 2PT, the book's convention, chapter 3): 2 P_mm T (the input embedding
      left out; `model` names the model), and the factor 2 left out."""
    keys_only = Slip("keys only", _half(value), "the cache holds a key AND a value for every KV head of every "
                                                "layer: 2 L K H elements per token, at the cache's bytes each.")
    factor_2 = Slip("the factor 2 left out", _half(value), "a multiply-add is 2 FLOPs: 2 per weight for every token "
                                                           "(2PT), 2 per (query, key) pair and head dimension.")
    if quantity == "kv":
        return (keys_only,)
    if quantity == "flops":
        return (factor_2,)
    if quantity == "prefill":
        return (Slip("P_mm instead of P", _with_matmul_params(value, model),
                     "the book prices prefill with 2PT, P every parameter, the input embedding table included "
                     "(chapter 3); 2 P_mm T leaves the table out."), factor_2)
    return ()


@dataclass(frozen=True)
class Number:
    """A numeric answer in `unit` (how the reader is asked for it; `expected()` returns SI units).

    A modelling answer is accepted within the band `rel_tol`; a count (`integer=True`) must be the exact whole number,
    and the question says how to round (down for what fits, up for what is needed). `slips` are checked by value,
    nearest first; `also` lists other accepted conventions. `quantity` says what kind of number it is ("kv",
    "flops", "prefill"; `model` names the model of a prefill): each kind adds its `standard_slips`, so a slip the
    book names for one KV-cache size is named for all of them."""

    unit: str
    expected: Callable[[], float]
    rel_tol: float = 0.02
    integer: bool = False
    slips: tuple = ()
    also: tuple = ()
    name: str = ""
    quantity: str = ""
    model: str = ""
    rounding: str = ""
    label: str = ""

    def __post_init__(self):
        parse_unit(self.unit)
        if self.rounding not in ROUNDINGS or self.rounding and not self.integer:
            raise ValueError(f"rounding must be one of {ROUNDINGS} and is only for a count (integer=True), got "
                             f"rounding={self.rounding!r} with integer={self.integer!r}")
        if self.quantity not in QUANTITIES:
            raise ValueError(f"quantity must be one of {QUANTITIES}, got {self.quantity!r}")
        if self.quantity == "prefill" and not self.model:
            raise ValueError("a prefill answer needs model=..., the model whose P_mm / P names the P_mm slip")
        named = {slip.name for slip in self.slips if isinstance(slip, Slip)}
        derived = tuple(slip for slip in standard_slips(self.quantity, self.expected, self.model)
                        if slip.name not in named)
        object.__setattr__(self, "slips", tuple(self.slips) + derived)
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

    @property
    def rule(self) -> str:
        """How to give the answer, shown in the answer box before a first try: 'a whole number, rounded down', or
        'within ±2%: 3 significant figures are enough' (the fewest figures whose rounding, half a unit of the last
        one, stays within half the band, leaving the other half to the reader's own arithmetic)."""
        if self.integer:
            return "a whole number" + (f", rounded {self.rounding}" if self.rounding else "")
        if self.rel_tol == 0:
            return self.band
        figures = 1
        while 10.0 ** (1 - figures) > self.rel_tol * (1 + 1e-9):
            figures += 1
        return f"{self.band}: {figures} significant figures are enough"

    @property
    def heading(self) -> str:
        """The part's name in words (`label`, else the name with spaces): 'bound', 'batch split'."""
        return part_heading(self)


@dataclass(frozen=True)
class Choice:
    """A multiple-choice answer: `options` maps a letter to its text, `correct` is the right letter, and `why` maps
    a wrong letter to a hint that explains what that option gets wrong (without naming the right one)."""

    options: dict
    correct: str
    why: dict = field(default_factory=dict)
    name: str = ""
    label: str = ""

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

    @property
    def rule(self) -> str:
        """How to answer: 'one of the letters a, b, c'."""
        return f"one of the letters {', '.join(self.options)}"

    @property
    def heading(self) -> str:
        """The part's name in words (`label`, else the name with spaces)."""
        return part_heading(self)

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
    # An open question the chapter asks first, whose reasoning the checked `question` then tests (*Explain.*
    # exercises); "" for none. The chapter's exercise cell is generated from these fields (`markdown`).
    preamble: str = ""

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id.strip():
            raise ValueError(f"an exercise needs a non-empty string id, got {self.id!r}")
        if not isinstance(self.preamble, str):
            raise ValueError(f"{self.id}: preamble must be a string (\"\" for none), got {self.preamble!r}")
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
        """The question as the chapter shows it (the body of its exercise cell, which `make generate` writes from
        here: `exercises.index.exercise_cells`): the preamble, the checked question, then each choice's options."""
        lines = ([self.preamble.strip()] if self.preamble.strip() else []) + [self.question.strip()]
        for part in self.parts:
            if isinstance(part, Choice):
                label = f"`{part.name}`, one of: " if part.name else ""
                lines.append(f"{label}{part.inline()}.")
        return "\n\n".join(lines)


def part_heading(part) -> str:
    """A part's name as a reader reads it: its `label`, else its name with spaces for underscores ('' for the one
    part of a single answer)."""
    return part.label or part.name.replace("_", " ")


def is_whole(value: float) -> bool:
    """True when `value` is a whole number up to float rounding (4.6e3 read from '4.6k' is 4600)."""
    return math.isfinite(value) and abs(value - round(value)) <= 1e-9 * max(1.0, abs(value))
