"""Reading and writing quantities with units: "4.98 ms", "6.7 GB", "240 tokens".

The library works in SI (seconds, bytes, FLOP/s); these helpers are for the edges: printing for a reader, and
reading a reader's typed answer in `exercises.check`.
"""

import functools
import math
import re

from ._validate import positive_int, real

# Base units a quantity can have, and what kind of quantity each is.
_BASES = {
    "s": "time", "sec": "time", "second": "time", "seconds": "time",
    "B": "bytes", "byte": "bytes", "bytes": "bytes",
    "B/s": "bandwidth",
    "FLOP": "flops", "FLOPs": "flops", "flop": "flops", "flops": "flops",
    "FLOP/s": "flop_rate", "FLOPs/s": "flop_rate", "flop/s": "flop_rate", "FLOPS": "flop_rate", "OP/s": "flop_rate",
    "tokens/s": "token_rate", "tok/s": "token_rate", "token/s": "token_rate",
    "requests/s": "request_rate", "request/s": "request_rate", "req/s": "request_rate",
    "tokens": "count", "token": "count", "tok": "count", "chips": "count", "chip": "count", "x": "count",
    "ways": "count", "sequences": "count", "sequence": "count", "": "count",
    "FLOPs/B": "intensity", "FLOP/B": "intensity", "FLOPs/byte": "intensity", "FLOP/byte": "intensity",
    "%": "percent",
}
_PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
             "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
             "m": 1e-3, "u": 1e-6, "µ": 1e-6, "μ": 1e-6, "n": 1e-9}
# The leading number of a typed quantity: sign, digits (with "," or "_" between them), fraction, exponent; the rest is
# its unit. Only the shape is matched here; `read_number` then applies the thousands rule and requires a digit.
_LEADING_NUMBER = re.compile(r"^([-+]?(?:\d[\d,_]*)?(?:\.\d*)?(?:[eE][-+]?\d+)?)(.*)$", re.DOTALL)
# The thousands rule, the same for every reader of a quantity (`parse_quantity`, `exercises.check`): a comma is a
# thousands separator, the way the book prints numbers ("1,920"; "12,345,678.5"), and nothing else. It may stand only
# between groups of three digits in the whole part; any other comma ("1,5", "0,5", "1,53", "1.5,3") could be a
# decimal comma and is refused with a hint, never guessed. Underscores ("1_000", as in Python) are dropped.
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+$")
# Characters a reader's keyboard or a copied page may put in a number: the minus sign and the no-break spaces.
_TYPOGRAPHY = {"\u2212": "-", "\u00a0": " ", "\u202f": " "}


def _shown(text, limit: int = 60) -> str:
    """repr(text) cut to `limit` characters: a message quotes what was typed, not a megabyte of it."""
    text = repr(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


_PREFIX_ORDER = tuple(sorted(_PREFIXES, key=len, reverse=True))  # "Ki" is tried before "K"
# Counts take no metric prefix ("1,000 chips", never "1 kchip"); nor do a bare number, "x" and "%".
_UNPREFIXED = ("", "x", "%", "tokens", "token", "tok", "chips", "chip", "ways", "sequences", "sequence")


def parse_unit(unit: str):
    """'ms' -> (1e-3, 'time'); 'GiB' -> (2**30, 'bytes'); 'tokens' -> (1, 'count'). Unknown unit: ValueError."""
    if not isinstance(unit, str):
        raise ValueError(f"a unit is a string such as 'ms' or 'GB', got {unit!r}")
    unit = unit.strip()
    if unit in _BASES:
        return (0.01 if unit == "%" else 1.0), _BASES[unit]
    for prefix in _PREFIX_ORDER:
        if prefix and unit.startswith(prefix) and unit[len(prefix):] in _BASES and \
                unit[len(prefix):] not in _UNPREFIXED:
            return _PREFIXES[prefix], _BASES[unit[len(prefix):]]
    raise ValueError(f"unknown unit {_shown(unit)}; try one like s, ms, us, B, kB, GB, GiB, FLOP/s, TFLOP/s, "
                     "tokens, tok/s")


@functools.cache
def unit_spellings() -> dict:
    """Every unit `parse_unit` reads, spelled exactly, and its reading: {'ms': (1e-3, 'time'), 'GiB': (2**30,
    'bytes'), ...}. The exercise checker looks a reader's unit up in it in any letter case."""
    spellings = list(_BASES) + [prefix + base for prefix in _PREFIXES if prefix for base in _BASES
                                if base not in _UNPREFIXED]
    return {spelling: parse_unit(spelling) for spelling in spellings}


def read_number(text: str) -> tuple:
    """'4.98 ms' -> (4.98, 'ms'); '1,920 tokens' -> (1920.0, 'tokens'); '240' -> (240.0, ''): the leading number of
    a typed quantity and the text after it (its unit, stripped, not yet read). The one reader of "number plus unit"
    text: `parse_quantity` reads the rest with `parse_unit`, the exercise checker with its more forgiving unit reader.
    Commas follow the thousands rule above; a typographic minus and no-break spaces are read as '-' and ' '.
    ValueError saying what to write when no finite number leads the text."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string such as '4.98 ms', got {type(text).__name__}")
    for char, plain in _TYPOGRAPHY.items():
        text = text.replace(char, plain)
    text = " ".join(text.split())
    number, rest = _LEADING_NUMBER.match(text).groups()
    mantissa = re.split(r"[eE]", number)[0].lstrip("+-")
    if not re.search(r"\d", mantissa):
        raise ValueError(f"could not read a number from {_shown(text)}; write it like '4.98 ms' or '240'")
    whole = mantissa.split(".")[0]
    if "," in whole or rest.startswith(","):
        if rest.startswith(",") or not _THOUSANDS.match(whole):
            # one comma that is not a valid thousands group reads as a decimal comma; otherwise drop the commas
            decimal = number.count(",") == 1 and not _THOUSANDS.match(whole)
            example = (number.replace(",", ".", 1) if decimal else number.replace(",", "")) + \
                ("" if rest.startswith(",") or not rest.strip() else " " + rest.strip())
            raise ValueError(f"could not read {_shown(text)}: its comma is ambiguous (a decimal comma or a thousands "
                             "separator?); a comma is read only as a thousands separator between groups of three "
                             f"digits (1,920); for a fraction write the decimal point as '.', e.g. {_shown(example)}")
        number = number.replace(",", "")
    value = float(number.replace("_", ""))
    if not math.isfinite(value):
        raise ValueError(f"could not read a finite number from {_shown(text)}")
    return value, rest.strip()


def parse_quantity(text, default_unit: str = ""):
    """'4.98 ms' -> (0.00498, 'time'). A bare number is read in `default_unit`. Returns (SI value, kind)."""
    parse_unit(default_unit)  # a bad default unit is an error even when `text` names its own unit
    if isinstance(text, bool):
        raise ValueError(f"expected a number, got {text!r}")
    if isinstance(text, (int, float)) or hasattr(text, "__float__") and not isinstance(text, str):
        factor, kind = parse_unit(default_unit)
        return float(real("the answer", text)) * factor, kind
    if not isinstance(text, str):
        raise ValueError(f"expected a number or a string such as '4.98 ms', got {_shown(text)}")
    number, unit = read_number(text)
    factor, kind = parse_unit(unit or default_unit)
    return number * factor, kind


def format_quantity(value: float, unit: str, digits: int = 3) -> str:
    """Write an SI value in the given display unit: format_quantity(0.00498, 'ms') -> '4.98 ms'."""
    factor, _ = parse_unit(unit)
    real("value", value)
    digits = positive_int("digits", digits)
    if digits > 17:  # a double holds 17 significant digits; Python refuses a precision past a limit of its own
        raise ValueError(f"digits={digits} is more than the 17 significant digits a float holds")
    # `g` writes a value of `digits` or more whole digits in scientific notation ('1.23e+04'), never as a long plain
    # number, so no grouping is needed
    return f"{value / factor:.{digits}g} {unit}".strip()
