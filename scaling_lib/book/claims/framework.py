"""The claims ledger: every claim of the book's sources, the number the source publishes, and ours.

One frozen `Claim` row per claim of book/claims.md (R1-R5, M1-M7, T1-T5, S1-S6, P1-P7, V1-V7), split into
sub-rows where a claim states several numbers ("M4 batch 1 step time"). Each row holds

- what the source publishes, as it states it (`published`, a string) and, where it is a number, the same number
  in SI units (`published_value`): these are the *sources'* numbers, kept here only to be compared against;
- a zero-argument callable `compute` that asks scaling_lib for OUR value (the same library calls the claim tests
  make; nothing is re-derived here);
- a `Tolerance`: relative (default 2%), a range ("about 280-300", "3-4"), or a property check for qualitative
  claims, where `compute` returns a `Finding` (our value, whether the property holds, and what was checked);
- a `note` where the sources disagree (GiB vs 1e9 B, the GQA 1:5 table keeping MHA weights, beta 9.1 rounded to 8,
  H100 280 vs 295, Pope et al. vs the Scaling Book 2D crossover) or where the source gives no configuration.

`evaluate(claim)` returns a `ClaimResult(ours, holds, detail)`; `evaluate_all()` evaluates every row. The book's
appendix "Claims ledger" is generated from `evaluate_all()`, and tests/book/test_claims_ledger.py asserts every row holds.
"""

import math
from dataclasses import dataclass
from typing import Callable

from ...units import format_quantity, parse_unit

REL = 0.02

# Source labels (bibliography keys in book/references.bib: scalingbook, pope2022, tpuinference).
SB1 = "Scaling Book ch. 1"
SB7 = "Scaling Book ch. 7"
SB8 = "Scaling Book ch. 8"
POPE = "Pope et al. 2022"
TPUI = "TPU inference chapter"


@dataclass(frozen=True)
class Tolerance:
    """How our value is compared with the published one.

    kind "rel": |ours / published - 1| <= rel; "range": low <= ours <= high (either bound may be None);
    "property": `compute` returns a `Finding` that says itself whether the property holds.
    """

    kind: str = "rel"
    rel: float = REL
    low: float | None = None
    high: float | None = None
    unit: str = ""  # display unit of low / high
    text: str = ""  # the property checked, in words (kind "property")

    def __post_init__(self):
        if self.kind not in ("rel", "range", "property"):
            raise ValueError(f"unknown tolerance kind {self.kind!r}; use 'rel', 'range' or 'property'")
        if self.kind == "rel" and not 0 <= self.rel < 1:
            raise ValueError(f"rel must be in [0, 1), got {self.rel!r}")
        if self.kind == "range" and self.low is None and self.high is None:
            raise ValueError("a range tolerance needs low, high or both")

    def describe(self) -> str:
        if self.kind == "rel":
            return f"±{self.rel:.0%}" if self.rel >= 0.01 else f"±{self.rel:.0e}"
        if self.kind == "property":
            return self.text or "property"

        def show(value):
            return format_quantity(value, self.unit, 4) if self.unit else f"{value:g}"

        if self.low is None:
            return f"≤ {show(self.high)}"
        if self.high is None:
            return f"≥ {show(self.low)}"
        return f"{show(self.low)} to {show(self.high)}"


def within(rel: float = REL) -> Tolerance:
    return Tolerance("rel", rel=rel)


def between(low: float | None, high: float | None, unit: str = "") -> Tolerance:
    return Tolerance("range", low=low, high=high, unit=unit)


def holds_that(text: str) -> Tolerance:
    return Tolerance("property", text=text)


@dataclass(frozen=True)
class Finding:
    """What a property check found: our value (a number in the claim's unit, or a short text), and whether it holds."""

    value: object
    holds: bool
    detail: str = ""


@dataclass(frozen=True)
class Claim:
    """One row of the ledger. `key` = id plus the sub-row's part, e.g. "M4 batch 1 step time"."""

    id: str
    part: str
    statement: str
    source: str
    published: str
    published_value: float | None
    unit: str
    compute: Callable[[], object]
    tolerance: Tolerance = Tolerance()
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.id} {self.part}".strip()


@dataclass(frozen=True)
class ClaimResult:
    """Our value (SI number or text), whether the claim holds within its tolerance, and how it was judged."""

    ours: object
    holds: bool
    detail: str
    claim: Claim | None = None

    @property
    def ours_text(self) -> str:
        if isinstance(self.ours, (int, float)) and not isinstance(self.ours, bool) and self.claim is not None:
            return show(float(self.ours), self.claim.unit)
        return str(self.ours)


def show(value: float, unit: str) -> str:
    """`units.format_quantity` to 4 digits, but 12,345 rather than 1.234e+04 (and 1.302e10 for huge counts)."""
    text = format_quantity(value, unit, 4)
    if "e+" in text:
        scaled = value / parse_unit(unit)[0]
        text = f"{scaled:,.0f} {unit}".strip() if abs(scaled) < 1e9 else text.replace("e+", "e")
    return text


def evaluate(claim: Claim) -> ClaimResult:
    """Compute our value for `claim` and judge it against the published value with the claim's tolerance."""
    tol = claim.tolerance
    try:
        value = claim.compute()
    except Exception as error:  # a broken computation is a claim that does not hold, with the reason shown
        return ClaimResult(f"error: {error}", False, f"{type(error).__name__}: {error}", claim)
    if tol.kind == "property":
        if not isinstance(value, Finding):
            return ClaimResult(value, False, "a property check must return a Finding", claim)
        return ClaimResult(value.value, bool(value.holds), value.detail, claim)
    if isinstance(value, Finding) or isinstance(value, bool) or not isinstance(value, (int, float)):
        return ClaimResult(value, False, f"expected a number for a {tol.kind} tolerance, got {value!r}", claim)
    value = float(value)
    shown = show(value, claim.unit)
    if tol.kind == "rel":
        if claim.published_value is None:
            return ClaimResult(value, False, "a relative tolerance needs a published value", claim)
        off = value / claim.published_value - 1.0
        ok = math.isfinite(off) and abs(off) <= tol.rel * (1 + 1e-12)
        detail = (f"{shown} vs published {show(claim.published_value, claim.unit)}: "
                  f"{off:+.2%} ({'within' if ok else 'outside'} {tol.describe()})")
        return ClaimResult(value, ok, detail, claim)
    ok = (tol.low is None or value >= tol.low) and (tol.high is None or value <= tol.high)
    return ClaimResult(value, ok, f"{shown} {'in' if ok else 'outside'} {tol.describe()}", claim)


def evaluate_all(claims) -> tuple:
    """`evaluate` every row of `claims`, in order."""
    return tuple(evaluate(claim) for claim in claims)


def claims_holding(results) -> dict:
    """{claim id: whether every row of that claim holds}, in ledger order, from `evaluate_all()`'s results."""
    status = {}
    for result in results:
        key = result.claim.id if result.claim is not None else "?"
        status[key] = status.get(key, True) and bool(result.holds)
    return status


def claim_ids(claims) -> tuple:
    """The distinct claim ids (R1, ..., V6) of `claims`, in order."""
    return tuple(dict.fromkeys(claim.id for claim in claims))
