"""The claims ledger: every claim of the book's sources, the number the source publishes, and ours.

One frozen `Claim` row per claim of book/claims.md (R1-R5, M1-M7, T1-T5, S1-S6, P1-P7, V1-V7), split into sub-rows
where a claim states several numbers ("M4 batch 1 step time"). The framework (`Claim`, `Tolerance`, `evaluate`) is
in `framework`; the rows live in one module per family (`roofline`, `memory`, `step_time`, `sharding`, `layouts`,
`serving`), each with the helpers its rows call beside them.

This is the only place a source's published number is typed: tests read them with `published(key)` (and
`published_range(key)` where the source states a range).
The book's appendix "Claims ledger" is generated from `evaluate_all()`; tests/book/test_claims_ledger.py asserts
that every row holds.
"""

from . import frontier, layouts, memory, roofline, serving, sharding, step_time
from .framework import (POPE, REL, SB1, SB7, SB8, TPUI, Claim, ClaimResult, Finding, Tolerance, between, claims_holding,
                        evaluate, holds_that, show, within)
from .framework import claim_ids as _ids_of
from .framework import evaluate_all as _evaluate_rows

CLAIMS = (roofline.CLAIMS + memory.CLAIMS + step_time.CLAIMS + sharding.CLAIMS + layouts.CLAIMS + serving.CLAIMS
          + frontier.CLAIMS)


def evaluate_all(claims=None) -> tuple:
    """`evaluate` every row of the ledger (or of `claims`), in ledger order."""
    return _evaluate_rows(CLAIMS if claims is None else claims)


def claim_ids(claims=None) -> tuple:
    """The distinct claim ids (R1, ..., V6) covered, in ledger order."""
    return _ids_of(CLAIMS if claims is None else claims)


def claim(key: str) -> Claim:
    """The ledger row with this key, e.g. claim("M4 batch 1 step time") or claim("R1")."""
    for row in CLAIMS:
        if row.key == key:
            return row
    raise ValueError(f"no ledger row {key!r}; keys look like 'M4 batch 1 step time' (see claim_keys())")


def claim_keys() -> tuple:
    """Every row's key, in ledger order."""
    return tuple(row.key for row in CLAIMS)


def published(key: str) -> float:
    """The number the source publishes for this row, in SI units: the one copy tests compare against."""
    value = claim(key).published_value
    if value is None:
        raise ValueError(f"ledger row {key!r} states no number ({claim(key).published!r}); it is a property check")
    return value


def published_range(key: str) -> tuple:
    """(low, high) of a row whose source states a range or a bound ("about 280-300", "an order of magnitude").

    Either end may be None (a bound); tests compare against it as they compare against `published`.
    """
    row = claim(key)
    if row.tolerance.kind != "range":
        raise ValueError(f"ledger row {key!r} states no range ({row.published!r}); use published(key)")
    return row.tolerance.low, row.tolerance.high


__all__ = ["CLAIMS", "POPE", "REL", "SB1", "SB7", "SB8", "TPUI", "Claim", "ClaimResult", "Finding", "Tolerance",
           "between", "claim", "claim_ids", "claim_keys", "claims_holding", "evaluate", "evaluate_all", "holds_that",
           "published", "published_range", "show", "within"]
