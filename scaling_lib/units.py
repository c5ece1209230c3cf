"""Reading and writing quantities with units: "4.98 ms", "6.7 GB", "240 tokens".

The library works in SI (seconds, bytes, FLOP/s); these helpers are for the edges: printing for a reader, and
reading a reader's typed answer in `exercises.check`.
"""

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
    "tokens": "count", "token": "count", "tok": "count", "chips": "count", "chip": "count", "x": "count",
    "ways": "count", "sequences": "count", "sequence": "count", "": "count",
    "FLOPs/B": "intensity", "FLOP/B": "intensity", "FLOPs/byte": "intensity", "FLOP/byte": "intensity",
    "%": "percent",
}
_PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
             "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
             "m": 1e-3, "u": 1e-6, "µ": 1e-6, "μ": 1e-6, "n": 1e-9}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d[\d,_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")
# A comma is read only as a thousands separator, the way the book prints numbers ("1,920"): groups of three digits.
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][-+]?\d+)?$")


def parse_unit(unit: str):
    """'ms' -> (1e-3, 'time'); 'GiB' -> (2**30, 'bytes'); 'tokens' -> (1, 'count'). Unknown unit: ValueError."""
    if not isinstance(unit, str):
        raise ValueError(f"a unit is a string such as 'ms' or 'GB', got {unit!r}")
    unit = unit.strip()
    if unit in _BASES:
        return (0.01 if unit == "%" else 1.0), _BASES[unit]
    for prefix in sorted(_PREFIXES, key=len, reverse=True):
        if prefix and unit.startswith(prefix) and unit[len(prefix):] in _BASES and unit[len(prefix):] not in (
                "", "x", "%", "tokens", "token", "tok", "chips", "chip", "ways", "sequences", "sequence"):
            return _PREFIXES[prefix], _BASES[unit[len(prefix):]]
    raise ValueError(f"unknown unit {unit!r}; try one like s, ms, us, B, kB, GB, GiB, FLOP/s, TFLOP/s, tokens, tok/s")


def parse_quantity(text, default_unit: str = ""):
    """'4.98 ms' -> (0.00498, 'time'). A bare number is read in `default_unit`. Returns (SI value, kind)."""
    parse_unit(default_unit)  # a bad default unit is an error even when `text` names its own unit
    if isinstance(text, bool):
        raise ValueError(f"expected a number, got {text!r}")
    if isinstance(text, (int, float)) or hasattr(text, "__float__") and not isinstance(text, str):
        factor, kind = parse_unit(default_unit)
        return float(real("the answer", text)) * factor, kind
    if not isinstance(text, str):
        raise ValueError(f"expected a number or a string such as '4.98 ms', got {text!r}")
    match = _NUMBER.match(text)
    if not match:
        raise ValueError(f"could not read a number from {text!r}; write it like '4.98 ms' or '240'")
    digits = match.group(1)
    if "," in digits and not _THOUSANDS.match(digits):
        raise ValueError(f"could not read {text!r}: a comma is read only as a thousands separator in groups of three "
                         f"digits (1,920); for a fraction write the decimal point as '.', e.g. "
                         f"'{digits.replace(',', '.', 1) if digits.count(',') == 1 else digits.replace(',', '')}"
                         f"{' ' + match.group(2) if match.group(2) else ''}'")
    number = float(digits.replace(",", "").replace("_", ""))
    if not math.isfinite(number):
        raise ValueError(f"could not read a finite number from {text!r}")
    unit = match.group(2) or default_unit
    factor, kind = parse_unit(unit)
    return number * factor, kind


def format_quantity(value: float, unit: str, digits: int = 3) -> str:
    """Write an SI value in the given display unit: format_quantity(0.00498, 'ms') -> '4.98 ms'."""
    factor, _ = parse_unit(unit)
    real("value", value)
    digits = positive_int("digits", digits)
    if digits > 17:  # a double holds 17 significant digits; Python refuses a precision past a limit of its own
        raise ValueError(f"digits={digits} is more than the 17 significant digits a float holds")
    scaled = value / factor
    text = f"{scaled:.{digits}g}"
    if "e" not in text and abs(scaled) >= 10 ** digits:
        text = f"{scaled:,.0f}"
    return f"{text} {unit}".strip()
