"""The book's exercises: one declarative set per chapter, the checker, and the index of every exercise in the book.

    from scaling_lib.book import check, solution   # the same functions
    check("ch4.kv-per-token-llama3-70b", "328 kB")
    solution("ch4.kv-per-token-llama3-70b")    # the answer, when you want it
"""

from .checker import PartVerdict, Solution, Verdict, check, exercises, get_exercise, grade, register, solution
from .exercise import Choice, Convention, Exercise, Number, Slip

__all__ = ["Choice", "Convention", "Exercise", "Number", "PartVerdict", "Slip", "Solution", "Verdict", "check",
           "exercises", "get_exercise", "grade", "register", "solution"]
