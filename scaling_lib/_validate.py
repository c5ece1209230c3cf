"""The library's argument checks, in one place, so the same bad input gets the same clear `ValueError` everywhere.

Every public function of `scaling_lib` (closed-form and `tiny`) checks its arguments with these helpers. Each returns
the value it accepted (an `int` for the integer checks), so a caller can write `n = positive_int("n_chips", n)`.
Messages name the argument, the offending value and what would be accepted.
"""

import numbers


def positive(name: str, value, allow_zero: bool = False):
    """A real number > 0 (>= 0 with allow_zero). Booleans and NaN are refused; the value is returned unchanged."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{name} must be a number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return value


def positive_int(name: str, value) -> int:
    """An integer >= 1 (Python or NumPy integer; booleans refused), returned as a Python `int`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def non_negative_int(name: str, value) -> int:
    """An integer >= 0 (Python or NumPy integer; booleans refused), returned as a Python `int`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def probability(name: str, value) -> float:
    """A real number in [0, 1], returned as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def choice(kind: str, value, allowed):
    """`value` if it is one of `allowed`, else a ValueError listing them."""
    if value not in allowed:
        raise ValueError(f"unknown {kind} {value!r}; use one of {', '.join(map(str, allowed))}")
    return value
