"""Printing a number that depends on the CPU's floating-point kernels as something that does not.

The same JAX program rounds its float32 sums in another order on another CPU (vector width, threads, oneDNN), so
its last digits differ from machine to machine; after a quantization step one value rounded the other way changes
everything after it, and a quantized model's error moves by about a tenth of itself. A notebook that stored
"2.14%" then fails on the next machine. The notebooks print instead what holds on any machine:

- agreement with a reference within float32 rounding, `FLOAT32_ROUNDING` of the largest value (asserted by the
  cell before it prints);
- a value between two rungs of a fixed ladder (`between`, e.g. "1% to 3%") or at least a rung (`at_least`), which
  holds as long as the value stays clear of the rungs; tests/tiny hold the exact values with their tolerances.

`make test-portable` re-runs the JAX notebooks under a second XLA CPU configuration to catch any output that still
depends on the CPU.
"""

import numpy as np

from .._validate import real

# 100 float32 roundings (eps = 2^-23 relative): the agreement of two float32 programs that compute the same sums in
# different orders, relative to the largest value compared (about 1.2e-5).
FLOAT32_ROUNDING = 100 * 2.0**-23



def relative_difference(actual, expected) -> float:
    """max |actual - expected| / max |expected|: what is compared with FLOAT32_ROUNDING (0 when both are all zeros)."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    scale = float(np.max(np.abs(expected)))
    difference = float(np.max(np.abs(actual - expected)))
    return difference / scale if scale else difference


ERROR_RUNGS = (0.01, 0.03, 0.1, 0.3)  # a half-decade ladder of relative errors
AGREEMENT_RUNGS = (0.5, 0.75, 0.95)  # fractions of positions that agree


def _rungs(rungs) -> tuple:
    rungs = tuple(real("rung", r) for r in rungs)
    if not rungs or list(rungs) != sorted(set(rungs)):
        raise ValueError(f"rungs must be increasing and distinct, got {rungs!r}")
    return rungs


def between(value: float, rungs=ERROR_RUNGS, fmt: str = "{:.0%}") -> str:
    """The two rungs around `value`: "1% to 3%" for 0.0214 on the default ladder; "below 1%" under the lowest rung,
    "above 30%" from the highest on. A value equal to a rung counts as above it."""
    value, rungs = real("value", value), _rungs(rungs)
    below = [r for r in rungs if r <= value]
    above = [r for r in rungs if r > value]
    if not below:
        return f"below {fmt.format(above[0])}"
    if not above:
        return f"above {fmt.format(below[-1])}"
    return f"{fmt.format(below[-1])} to {fmt.format(above[0])}"


def at_least(value: float, rungs=AGREEMENT_RUNGS, fmt: str = "{:.0%}") -> str:
    """The highest rung `value` reaches: "at least 95%" for 0.98 on the default ladder; "below 50%" under the lowest."""
    value, rungs = real("value", value), _rungs(rungs)
    reached = [r for r in rungs if r <= value]
    return f"at least {fmt.format(reached[-1])}" if reached else f"below {fmt.format(rungs[0])}"


GLUE_DIGITS = 6  # significant digits a glued float keeps: more than any sentence prints, far fewer than a CPU varies


def significant(value: float, digits: int = GLUE_DIGITS) -> float:
    """`value` rounded to `digits` significant digits: 2188.8888888888887 -> 2188.89 at 6. What a notebook stores is
    then the same on every CPU, because kernels that sum in another order differ only in the last few digits."""
    if isinstance(digits, bool) or not isinstance(digits, int) or not 1 <= digits <= 10:
        raise ValueError(f"digits must be an integer from 1 to 10, got {digits!r}")
    value = real("value", value)
    return float(f"{value:.{digits}g}")


def glue(name: str, value, *, digits: int = GLUE_DIGITS, display: bool = False) -> None:
    """myst-nb's `glue`, for a number a sentence quotes: a float (or NumPy scalar) is stored with `digits` significant
    digits (`significant`), never as a raw float whose last digits depend on the CPU; an int, a bool or a string is
    stored as it is. The prose formats it as before (`{glue:text}`name:.1f``). Anything else is a ValueError: glue
    the number or the text the page shows."""
    from myst_nb import glue as myst_glue  # noqa: PLC0415 - the build's package, needed when gluing only

    if isinstance(value, (bool, int, str)):
        stored = value
    elif isinstance(value, np.integer):
        stored = int(value)
    elif isinstance(value, (float, np.floating)) or (isinstance(value, np.ndarray) and value.ndim == 0):
        stored = significant(float(value), digits)
    else:
        raise ValueError(f"glue {name!r}: a number or a string, got {type(value).__name__}; glue what the page shows")
    myst_glue(name, stored, display=display)
