"""The verdict of a restore's verification: verified only when at least one check ran and every one passed.

`restore --json` once said "verified": true over an empty check list (an all() over nothing), both for
`--no-verify` and for a verify that had nothing to check (a dry run, a backup holding nothing to compare).
"""

from __future__ import annotations

import pytest

from drtool.plugin.contract import FAILED, NO_CHECKS, PASSED, SKIPPED, VERDICT_TEXT, Check, RestoreResult, verification
from drtool.restore import RestoreOutcome

OK, BAD = Check("a", True), Check("b", False, "differs")


@pytest.mark.parametrize(
    ("checks", "ran", "verdict"),
    [
        ([], False, SKIPPED),
        ([], True, NO_CHECKS),
        ([OK], True, PASSED),
        ([OK, BAD], True, FAILED),
        ([BAD], True, FAILED),
    ],
)
def test_the_verdict(checks: list[Check], ran: bool, verdict: str) -> None:
    assert verification(checks, ran) == verdict
    outcome = RestoreOutcome("b1", "files", RestoreResult(True, "restored"), checks, verification_ran=ran)
    assert (outcome.verification, outcome.verified, outcome.failed) == (verdict, verdict == PASSED, verdict == FAILED)


def test_every_verdict_has_a_sentence_and_only_a_pass_says_verified() -> None:
    assert set(VERDICT_TEXT) == {SKIPPED, NO_CHECKS, PASSED, FAILED}
    assert [v for v, text in VERDICT_TEXT.items() if text.startswith("verified")] == [PASSED]
