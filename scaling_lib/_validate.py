"""The library's argument checks, in one place, so the same bad input gets the same clear `ValueError` everywhere.

Every public function of `scaling_lib` (closed-form and `tiny`) checks its arguments with these helpers. Each returns
the value it accepted (an `int` for the integer checks), so a caller can write `n = positive_int("n_chips", n)`.
Messages name the argument, the offending value and what would be accepted.

The rules, the same for every argument:
- a number is an `int`, a `float` or a NumPy scalar of either kind; booleans, strings, None and containers are not;
- a real number must be finite: NaN and +-inf are refused (an infinite batch or bandwidth is never meant);
- an integer argument takes Python or NumPy integers, and floats with no fractional part (1e6 tokens); 2.5 chips,
  True and 2**63 (no integer-valued float that large is exact) are refused;
- a string that looks like a number ("0.4") is refused with a hint to drop the quotes, rather than failing later
  with a TypeError deep inside a formula.
"""

import functools
import inspect
import math
import numbers
import sys

# Integers above this are refused: every count in the book (tokens, chips, bytes of one array) is far below it, and
# beyond 2**53 a float no longer holds every integer exactly, so arithmetic on such a count would silently round.
MAX_INT = 2**53
# Bounds on counts that a function loops over (or makes a list of), so that no call runs for minutes: more chips than
# any machine has (the largest TPU pods and GPU clusters hold about 1e4-1e5), more requests than a simulation in
# pure Python finishes in seconds, more steps of a per-token curve than a plot needs.
MAX_CHIPS = 2**20
MAX_REQUESTS = 10**6
MAX_CURVE_POINTS = 2**16
# The largest price per chip-hour taken: far above any chip's hourly price in any currency, and small enough that every
# cost the estimate and the plan derive from it (x chips / tokens per second x 1e6) stays a finite, printable number.
MAX_PRICE_PER_CHIP_HOUR = 1e9


def _string_hint(name: str, value: str) -> str:
    """The message for a string where a number was expected: drop the quotes if it is one, else say what it is."""
    try:
        as_number = float(value.replace("_", ""))
    except ValueError:
        return (f"{name} must be a number, got the string {value!r}; for a quantity with a unit such as '4.98 ms' "
                "use scaling_lib.units.parse_quantity first")
    return f"{name} must be a number, got the string {value!r}; pass {as_number!r} without quotes"


def real(name: str, value) -> float:
    """A finite real number (int, float or NumPy scalar), returned unchanged. Booleans, strings, NaN, inf refused."""
    kind = type(value)
    if kind is int or (kind is float and math.isfinite(value)):  # the common case, without the ABC checks below
        return value
    if isinstance(value, str):
        raise ValueError(_string_hint(name, value))
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def positive(name: str, value, allow_zero: bool = False):
    """A finite real number > 0 (>= 0 with allow_zero), returned unchanged (see `real` for what is a number)."""
    real(name, value)
    if value < 0 or (value == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return value


def _integer(name: str, value, what: str) -> int:
    if type(value) is int and -MAX_INT <= value <= MAX_INT:  # the common case, without the ABC checks below
        return value
    if isinstance(value, str):
        raise ValueError(_string_hint(name, value))
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    if not isinstance(value, numbers.Integral):
        if not math.isfinite(value) or value != math.floor(value):
            raise ValueError(f"{name} must be {what}, got {value!r}: a fractional count would be silently floored")
        value = int(value)
    value = int(value)
    if abs(value) > MAX_INT:
        raise ValueError(f"{name}={value} is too large to be a real count (the limit is 2**53)")
    return value


def positive_int(name: str, value) -> int:
    """An integer >= 1 (Python or NumPy integer, or a whole float; booleans refused), returned as a Python `int`."""
    value = _integer(name, value, "a positive integer")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def non_negative_int(name: str, value) -> int:
    """An integer >= 0 (Python or NumPy integer, or a whole float; booleans refused), returned as a Python `int`."""
    value = _integer(name, value, "a non-negative integer")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def probability(name: str, value) -> float:
    """A real number in [0, 1], returned as a float."""
    real(name, value)
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def fraction(name: str, value, meaning: str = "") -> float:
    """A real number in (0, 1] (a share that cannot be zero, such as an MFU), returned as a float."""
    real(name, value)
    if not 0 < value <= 1:
        raise ValueError(f"{name} must be in (0, 1], got {value!r}" + (f": it is {meaning}" if meaning else ""))
    return float(value)


def choice(kind: str, value, allowed):
    """`value` if it is one of `allowed`, else a ValueError listing them."""
    try:
        known = value in allowed
    except TypeError:  # an unhashable value looked up in a dict or set
        known = False
    if not known:
        raise ValueError(f"unknown {kind} {value!r}; use one of {', '.join(map(str, allowed))}")
    return value


def divides(divisor_name: str, divisor: int, name: str, value: int) -> int:
    """`divisor` if it divides `value` exactly, else a ValueError naming both and the divisors that would."""
    divisor = positive_int(divisor_name, divisor)
    value = positive_int(name, value)
    if value % divisor:
        options = [d for d in range(1, value + 1) if value % d == 0] if value <= 4096 else None
        hint = f"pick one of {options}" if options is not None and len(options) <= 24 else f"pick a divisor of {value}"
        raise ValueError(f"{divisor_name}={divisor} does not divide {name}={value}; {hint}")
    return divisor


def axes(name: str, value, max_axes: int | None = None) -> tuple:
    """A mesh shape: a non-empty tuple or list of positive integers (at most `max_axes`), returned as a tuple."""
    if not isinstance(value, (tuple, list)) or not value or (max_axes is not None and len(value) > max_axes):
        count = "1 or more" if max_axes is None else f"1 to {max_axes}"
        raise ValueError(f"{name} must be {count} positive integer axis sizes, e.g. (4, 4), got {value!r}")
    return tuple(positive_int(f"{name} axis {i}", size) for i, size in enumerate(value))


def axis_flags(name: str, shape: tuple, value) -> tuple:
    """One bool per axis of a mesh `shape`: `value` is one bool for every axis, or a tuple or list of one bool per
    axis (a torus's wraparound flags); anything else is a ValueError naming `name`."""
    if isinstance(value, (tuple, list)):
        flags = tuple(flag(name, v) for v in value)
        if len(flags) != len(shape):
            raise ValueError(f"{name} has {len(flags)} flags for the {len(shape)} axes of mesh_shape {shape}; "
                             "give one per axis, or one bool for all")
        return flags
    return (flag(name, value),) * len(shape)


def _is_numpy_bool(value) -> bool:
    """Whether `value` is a NumPy bool, without importing NumPy: one can only exist once NumPy is imported, and the
    library must import where NumPy is absent (the rendered book runs the checker in the page, in Pyodide)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.bool_)


def flag(name: str, value) -> bool:
    """True or False (a NumPy bool too), returned as a Python bool; 0, 1, "yes" and None are refused."""
    if not (isinstance(value, bool) or _is_numpy_bool(value)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def instances(name: str, values, kind: type, what: str) -> tuple:
    """A tuple of the `kind` objects in the iterable `values`; a ValueError naming `name` and `what` (where such
    objects come from) for anything else, a string or a single object included."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ValueError(f"{name} must be a list of {what}, got {values!r}")
    values = tuple(values)
    for value in values:
        if not isinstance(value, kind):
            raise ValueError(f"{name} must hold {what}, got {value!r}")
    return values


def hourly_price(name: str, value) -> float:
    """A price per chip-hour (dollars, or any currency): positive, finite and at most MAX_PRICE_PER_CHIP_HOUR."""
    positive(name, value)
    if value > MAX_PRICE_PER_CHIP_HOUR:
        raise ValueError(f"{name}={value!r} is more than {MAX_PRICE_PER_CHIP_HOUR:g} per chip-hour, far above any "
                         "chip's price, and the costs derived from it would overflow; give the price of one chip for "
                         "one hour, e.g. 2.5")
    return value


def at_most(name: str, value: int, limit: int, reason: str) -> int:
    """`value` (already checked to be a count) if it is at most `limit`, else a ValueError naming the argument, the
    limit and why there is one (a loop or a list of that length would run for minutes, or exhaust memory)."""
    if value > limit:
        raise ValueError(f"{name}={value:,} is more than {limit:,}, the most this function takes: {reason}")
    return value


def divisors(n: int) -> list:
    """The divisors of a positive integer n, in increasing order, found by trial division up to sqrt(n)."""
    n = positive_int("n", n)
    small, large, d = [], [], 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def items(name: str, values, check, min_len: int = 1) -> tuple:
    """A list or tuple (not a string, not a single number) of at least `min_len` entries, each passed through
    `check(f"{name} entry", entry)`, returned as a tuple; errors name the argument."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (tuple, list, range)) and not (
            hasattr(values, "__iter__") and hasattr(values, "__len__")):
        raise ValueError(f"{name} must be a list, got {values!r}")
    values = tuple(values)
    if len(values) < min_len:
        raise ValueError(f"{name} must list at least {min_len} entr{'y' if min_len == 1 else 'ies'}, got {values!r}")
    return tuple(check(f"{name} entry", value) for value in values)


def torus_mesh(mesh_shape, n_chips: int | None = None) -> tuple:
    """A torus mesh of 1 to 3 positive axis sizes padded to (X, Y, Z); with n_chips, their product must equal it."""
    shape = axes("mesh_shape", mesh_shape, max_axes=3)
    shape = shape + (1,) * (3 - len(shape))
    if n_chips is not None and math.prod(shape) != n_chips:
        raise ValueError(f"mesh_shape {shape} holds {math.prod(shape)} chips, not n_chips={n_chips}; "
                         f"pick axes whose product is {n_chips}")
    return shape


def checked_by(check):
    """A decorator that runs a formula's argument checks before the formula, so that its body is the derivation alone
    (what a chapter shows with `show_source`). `check` takes the formula's keyword arguments (defaults filled in),
    raises a ValueError naming a bad one, and returns them as the formula is to receive them (a chip's name resolved
    to its Chip, say). The decorated function keeps the formula's name, docstring and signature (`functools.wraps`:
    `inspect.signature` and `inspect.getsource` read the formula). The formula's arguments are keyword-only."""
    def decorate(formula):
        parameters = inspect.signature(formula).parameters.values()
        if any(parameter.kind is not inspect.Parameter.KEYWORD_ONLY for parameter in parameters):
            raise TypeError(f"checked_by: {formula.__qualname__} must take keyword-only arguments (def f(*, ...))")
        names = {parameter.name for parameter in parameters}
        defaults = {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}

        @functools.wraps(formula)
        def checked(**arguments):
            if not names - defaults.keys() <= arguments.keys() <= names:  # a missing or unknown argument
                try:
                    inspect.signature(formula).bind(**arguments)
                except TypeError as error:
                    raise TypeError(f"{formula.__qualname__}(): {error}") from None
            return formula(**check(**{**defaults, **arguments}))

        return checked

    return decorate
