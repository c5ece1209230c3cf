"""The claims ledger (scaling_lib.book.claims): every claim of book/claims.md has a row, and every row holds.

Each row recomputes its value with the same scaling_lib calls as the claim tests (tests/math/test_claims_*.py,
tests/math/test_kv_levers.py) and compares it with the source's published number within the row's tolerance.
"""

import re
from dataclasses import replace

import pytest

from scaling_lib.book import claims as ledger
from tests import REPO, for_each

CLAIMS_MD = REPO / "book" / "claims.md"  # the claims list lives in the repository; nothing is read from outside it
# The ids book/claims.md must at least hold (a guard against the parse below silently finding nothing).
KNOWN_IDS = ([f"R{i}" for i in range(1, 6)] + [f"M{i}" for i in range(1, 7)] + [f"T{i}" for i in range(1, 5)]
             + [f"S{i}" for i in range(1, 7)] + [f"P{i}" for i in range(1, 6)] + [f"V{i}" for i in range(1, 7)])


def _claims_md_ids():
    return re.findall(r"^\|\s*([RMTSPV]\d+)\s*\|", CLAIMS_MD.read_text(), flags=re.MULTILINE)


def test_claims_md_and_the_ledger_list_the_same_claims_each_row_sourced_and_published():
    ids = _claims_md_ids()
    assert len(ids) == len(set(ids)) >= len(KNOWN_IDS) and set(KNOWN_IDS) <= set(ids)
    missing = sorted(set(ids) - set(ledger.claim_ids()))
    assert not missing, f"claims without a ledger row: {missing}"
    assert set(ledger.claim_ids()) <= set(ids), "ledger rows for ids claims.md does not have"
    keys = [claim.key for claim in ledger.CLAIMS]
    assert len(keys) == len(set(keys))
    for claim in ledger.CLAIMS:
        assert claim.source and claim.published and claim.statement, claim.key
        if claim.tolerance.kind == "rel":
            assert claim.published_value is not None, f"{claim.key}: a relative tolerance needs a published value"


@for_each(ledger.CLAIMS, ids=lambda claim: claim.key)
def test_ledger_row_holds(claim):
    result = ledger.evaluate(claim)
    assert result.holds, f"{claim.key}: {result.detail}"
    assert result.claim is claim and result.detail


def test_evaluate_all_covers_every_row_in_order_and_one_failing_row_fails_its_claim():
    results = ledger.evaluate_all()
    assert [r.claim for r in results] == list(ledger.CLAIMS)
    status = ledger.claims_holding(results)
    assert tuple(status) == ledger.claim_ids() and all(status.values())
    broken = list(results)
    broken[0] = replace(broken[0], holds=False)
    assert ledger.claims_holding(broken)[broken[0].claim.id] is False


def _raises():
    raise ValueError("unknown chip 'tpu-v9'")


# (row, a computation that replaces its own, whether the row still holds, what its detail says)
DRIFTS = [
    pytest.param("R1", lambda row: 1.05 * row.compute(), False, "outside", id="5% above the published value"),
    pytest.param("R1", lambda row: 0.95 * row.compute(), False, "outside", id="5% below"),
    pytest.param("R1", lambda row: row.published_value * 1.019, True, "", id="1.9% above: inside the 2% tolerance"),
    pytest.param("V4 best lookahead", lambda row: 6, False, "", id="outside a published range (3-4)"),
    pytest.param("S4", lambda row: 3.0, False, "", id="a 3x slowdown is no order of magnitude"),
    pytest.param("S5", lambda row: ledger.Finding(1, False, "one all-to-all"), False, "", id="a failed property"),
    pytest.param("S5", lambda row: 2, False, "", id="a property row must return a Finding"),
    pytest.param("R1", lambda row: _raises(), False, "unknown chip", id="a computation that raises is reported"),
]


@for_each(DRIFTS, ids=str)
def test_a_row_whose_value_drifts_fails(key, compute, holds, detail):
    row = ledger.claim(key)
    result = ledger.evaluate(replace(row, compute=lambda: compute(row)))
    assert result.holds is holds and detail in result.detail


def test_published_numbers_are_read_by_key():
    row = ledger.claim("M4 batch 1 step time")
    assert ledger.published(row.key) == row.published_value and row.unit == "ms"
    low, high = ledger.published_range("R2 range")
    assert low < ledger.published("R2 ch. 1 value") <= high
    assert set(ledger.claim_keys()) == {claim.key for claim in ledger.CLAIMS}


@for_each([
    (lambda: ledger.published("M3 four caches"), "states no number"),
    (lambda: ledger.published_range("R1"), "states no range"),
    (lambda: ledger.published("R9"), "no ledger row 'R9'"),
    (lambda: ledger.Tolerance("abs"), "unknown tolerance kind"),
    (lambda: ledger.Tolerance("range"), "needs low, high or both"),
], ids=str)
def test_bad_keys_and_tolerances_are_refused(call, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        call()
