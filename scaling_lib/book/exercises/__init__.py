"""The book's exercises: one declarative set per chapter, the checker, and the index of every exercise in the book.

    from scaling_lib import check          # the same function
    check("ch1.bcrit-v6e", 575)
"""

from .checker import Verdict, check, exercises, get_exercise, grade, register
from .exercise import Exercise

__all__ = ["Exercise", "Verdict", "check", "exercises", "get_exercise", "grade", "register"]
