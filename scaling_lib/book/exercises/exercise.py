"""One exercise of the book: a question, the unit its answer is asked in, and how scaling_lib computes the answer.

Each chapter's set (`ch01.py` ... `ch10.py`) is a tuple `EXERCISES` of these; importing a set has no side effect.
`checker` collects them into the registry that `check` reads.
"""

from dataclasses import dataclass, field
from typing import Callable

from ...units import parse_unit


@dataclass(frozen=True)
class Exercise:
    """A numeric exercise. `expected()` returns the answer in SI units; `unit` is how the reader is asked for it."""

    id: str
    question: str
    unit: str
    expected: Callable[[], float]
    rel_tol: float = 0.02
    hints: tuple = field(default_factory=tuple)  # ((factor, hint), ...): exercise-specific slips

    def __post_init__(self):
        parse_unit(self.unit)
        if not 0 < self.rel_tol < 1:
            raise ValueError(f"rel_tol must be in (0, 1), got {self.rel_tol!r}")
