"""The claims ledger (scaling_lib.book.claims): every claim of book/claims.md has a row, and every row holds.

Each row recomputes its value with the same scaling_lib calls as the claim tests (tests/math/test_claims_*.py,
tests/math/test_kv_levers.py) and compares it with the source's published number within the row's tolerance.
"""

import re
from dataclasses import replace

import pytest

from scaling_lib.book import claims as ledger
from tests import REPO

CLAIMS_MD = REPO / "book" / "claims.md"  # the claims list lives in the repository; nothing is read from outside it
# The ids book/claims.md must at least hold (a guard against the parse below silently finding nothing).
KNOWN_IDS = ([f"R{i}" for i in range(1, 6)] + [f"M{i}" for i in range(1, 7)] + [f"T{i}" for i in range(1, 5)]
             + [f"S{i}" for i in range(1, 7)] + [f"P{i}" for i in range(1, 6)] + [f"V{i}" for i in range(1, 7)])


def _claims_md_ids():
    return re.findall(r"^\|\s*([RMTSPV]\d+)\s*\|", CLAIMS_MD.read_text(), flags=re.MULTILINE)


def test_every_claim_of_claims_md_has_a_ledger_row():
    ids = _claims_md_ids()
    assert len(ids) == len(set(ids)) >= len(KNOWN_IDS) and set(KNOWN_IDS) <= set(ids)
    missing = sorted(set(ids) - set(ledger.claim_ids()))
    assert not missing, f"claims without a ledger row: {missing}"
    assert set(ledger.claim_ids()) <= set(ids), "ledger rows for ids claims.md does not have"


def test_ledger_rows_are_unique_sourced_and_published():
    keys = [claim.key for claim in ledger.CLAIMS]
    assert len(keys) == len(set(keys))
    for claim in ledger.CLAIMS:
        assert claim.source and claim.published and claim.statement, claim.key
        if claim.tolerance.kind == "rel":
            assert claim.published_value is not None, f"{claim.key}: a relative tolerance needs a published value"


@pytest.mark.parametrize("claim", ledger.CLAIMS, ids=lambda claim: claim.key)
def test_ledger_row_holds(claim):
    result = ledger.evaluate(claim)
    assert result.holds, f"{claim.key}: {result.detail}"
    assert result.claim is claim and result.detail


def test_evaluate_all_covers_every_row_in_order():
    results = ledger.evaluate_all()
    assert [r.claim for r in results] == list(ledger.CLAIMS)
    status = ledger.claims_holding(results)
    assert tuple(status) == ledger.claim_ids() and all(status.values())
    # One failing sub-row makes its whole claim fail.
    broken = list(results)
    broken[0] = replace(broken[0], holds=False)
    assert ledger.claims_holding(broken)[broken[0].claim.id] is False


@pytest.mark.parametrize("factor", [1.05, 0.95])
def test_a_value_off_by_five_percent_does_not_hold(factor):
    r1 = ledger.CLAIMS[0]
    assert r1.key == "R1" and ledger.evaluate(r1).holds
    perturbed = replace(r1, compute=lambda: factor * r1.compute())
    result = ledger.evaluate(perturbed)
    assert not result.holds
    assert "outside" in result.detail
    # Just inside the tolerance still holds.
    inside = replace(r1, compute=lambda: r1.published_value * 1.019)
    assert ledger.evaluate(inside).holds


def test_range_and_property_checks_can_fail():
    v4 = next(c for c in ledger.CLAIMS if c.key == "V4 best lookahead")
    assert not ledger.evaluate(replace(v4, compute=lambda: 6)).holds  # "3-4" excludes 6
    s4 = next(c for c in ledger.CLAIMS if c.key == "S4")
    assert not ledger.evaluate(replace(s4, compute=lambda: 3.0)).holds  # a 3x slowdown is no order of magnitude
    s5 = next(c for c in ledger.CLAIMS if c.key == "S5")
    assert not ledger.evaluate(replace(s5, compute=lambda: ledger.Finding(1, False, "one all-to-all"))).holds
    assert not ledger.evaluate(replace(s5, compute=lambda: 2)).holds  # a property row must return a Finding


def test_a_failing_computation_is_reported_not_raised():
    def broken():
        raise ValueError("unknown chip 'tpu-v9'")

    result = ledger.evaluate(replace(ledger.CLAIMS[0], compute=broken))
    assert not result.holds and "unknown chip" in result.detail


def test_tolerance_bad_input():
    with pytest.raises(ValueError, match="unknown tolerance kind"):
        ledger.Tolerance("abs")
    with pytest.raises(ValueError, match="needs low, high or both"):
        ledger.Tolerance("range")


def test_published_numbers_are_read_by_key_and_missing_ones_say_why():
    row = ledger.claim("M4 batch 1 step time")
    assert ledger.published(row.key) == row.published_value and row.unit == "ms"
    low, high = ledger.published_range("R2 range")
    assert low < ledger.published("R2 ch. 1 value") <= high
    assert set(ledger.claim_keys()) == {claim.key for claim in ledger.CLAIMS}
    with pytest.raises(ValueError, match="states no number"):
        ledger.published("M3 four caches")
    with pytest.raises(ValueError, match="states no range"):
        ledger.published_range("R1")
    with pytest.raises(ValueError, match="no ledger row 'R9'"):
        ledger.published("R9")
