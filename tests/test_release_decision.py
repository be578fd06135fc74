"""The release decision (eval_assets.stats.decide): how pieces of evidence combine, through the public API.

block > none (any piece decided nothing: never a release on partial evidence) > investigate > allow.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from eval_assets.release import release_decision_reason_rows
from eval_assets.stats import EXIT_CODES, CheckOutcome, CheckSuiteEvidence, Reason, decide, exit_code


@dataclass(frozen=True)
class Piece:
    """Evidence with fixed reasons; `nothing` is its decided-nothing reason (None: it decided)."""

    source: str
    found: tuple[Reason, ...] = ()
    nothing: str | None = None

    @property
    def decided_nothing(self) -> str | None:
        return self.nothing

    def reasons(self) -> tuple[Reason, ...]:
        return self.found


def investigate(source: str = "helpfulness-v1", finding: str = "mean_drop") -> Reason:
    return Reason("investigate", source, finding, "the mean dropped beyond the noise band", ("s1",), "rerun")


def block(source: str = "helpfulness-v1", finding: str = "policy_failures") -> Reason:
    return Reason("block", source, finding, "2 policy failures", ("s2", "s3"))


PARTIAL = Piece("safety-v1", nothing="the judge version's report was refused")


@pytest.mark.parametrize("order", ["partial-first", "partial-last"])
def test_partial_evidence_with_an_investigate_reason_decides_nothing_with_exit_code_2(order: str) -> None:
    pieces = [Piece("helpfulness-v1", (investigate(),)), PARTIAL]
    if order == "partial-first":
        pieces.reverse()
    decision = decide(pieces)
    assert decision.decision == "none"
    assert decision.exit_code == 2
    # the investigate reason is still shown, and the piece that decided nothing says why
    assert [(r.severity, r.source) for r in decision.reasons] == [
        ("investigate", "helpfulness-v1"),
        ("none", "safety-v1"),
    ]
    assert decision.reasons[1].message == "the judge version's report was refused"
    assert decision.reasons[1].finding == "evidence"


def test_a_block_reason_blocks_even_on_partial_evidence() -> None:
    partial_blocking = Piece("safety-v1", (block("safety-v1"),), nothing="too few repeats")
    decision = decide([Piece("helpfulness-v1", (investigate(),)), partial_blocking])
    assert (decision.decision, decision.exit_code) == ("block", 1)
    assert [r.severity for r in decision.reasons] == ["block", "investigate", "none"]


def test_complete_evidence_with_an_investigate_reason_investigates() -> None:
    decision = decide([Piece("helpfulness-v1", (investigate(),)), Piece("safety-v1")])
    assert (decision.decision, decision.exit_code) == ("investigate", 3)
    assert [(r.severity, r.source, r.finding) for r in decision.reasons] == [
        ("investigate", "helpfulness-v1", "mean_drop"),
        ("info", "safety-v1", "summary"),
    ]
    assert decision.reasons[1].message == "nothing to block or investigate"


def test_complete_clean_evidence_allows() -> None:
    decision = decide([Piece("helpfulness-v1"), CheckSuiteEvidence("suite", (CheckOutcome("g1", True),))])
    assert (decision.decision, decision.exit_code) == ("allow", 0)
    assert [(r.severity, r.source) for r in decision.reasons] == [("info", "helpfulness-v1"), ("info", "suite")]


def test_no_evidence_decides_nothing_and_says_so() -> None:
    decision = decide([])
    assert (decision.decision, decision.exit_code) == ("none", 2)
    assert [(r.severity, r.source, r.finding, r.message) for r in decision.reasons] == [
        ("none", "release", "evidence", "no evidence: nothing to decide on")
    ]


def test_evidence_that_decided_nothing_and_gave_its_own_none_reason_is_not_repeated() -> None:
    own = Reason("none", "safety-v1", "evidence", "its own words")
    decision = decide([Piece("safety-v1", (own,), nothing="generic")])
    assert decision.decision == "none"
    assert decision.reasons == (own,)


def test_an_empty_check_suite_decides_nothing_and_a_failed_check_blocks() -> None:
    assert decide([CheckSuiteEvidence("suite", ())]).decision == "none"
    failed = decide([CheckSuiteEvidence("suite", (CheckOutcome("g1", True), CheckOutcome("g2", False, "x")))])
    assert failed.decision == "block"
    assert [r.message for r in failed.reasons] == ["check g2 failed: x"]


def test_reasons_sort_by_severity_then_signal_keeping_the_given_order_otherwise() -> None:
    reasons = (
        Reason("info", "a", "summary", "i"),
        investigate("a", "p10"),
        investigate("a", "floor_drop"),
        block("a", "mean_drop"),
        investigate("b", "unknown-signal"),
        block("a", "policy_failures"),
        investigate("c", "p10"),
    )
    decision = decide([Piece("x", reasons)])
    assert [(r.severity, r.finding, r.source) for r in decision.reasons] == [
        ("block", "policy_failures", "a"),
        ("block", "mean_drop", "a"),
        ("investigate", "floor_drop", "a"),
        ("investigate", "p10", "a"),
        ("investigate", "p10", "c"),
        ("investigate", "unknown-signal", "b"),
        ("info", "summary", "a"),
    ]


def test_text_and_rows_carry_the_decision_and_every_reason() -> None:
    decision = decide([Piece("helpfulness-v1", (investigate(),)), PARTIAL])
    assert decision.text() == (
        "decision: no decision\n"
        "  helpfulness-v1:\n"
        "    [investigate] the mean dropped beyond the noise band — rerun\n"
        "  safety-v1:\n"
        "    [none] the judge version's report was refused"
    )
    assert release_decision_reason_rows("b9", decision) == [
        {
            "decision": "none",
            "severity": "investigate",
            "source": "helpfulness-v1",
            "finding": "mean_drop",
            "scenario_ids": "s1",
            "message": "the mean dropped beyond the noise band",
            "advice": "rerun",
            "build": "b9",
            "rank": 1,
        },
        {
            "decision": "none",
            "severity": "none",
            "source": "safety-v1",
            "finding": "evidence",
            "scenario_ids": "",
            "message": "the judge version's report was refused",
            "advice": None,
            "build": "b9",
            "rank": 2,
        },
    ]
    blocked = decide([Piece("s", (block(),))])
    assert blocked.text().splitlines()[0] == "decision: block"
    assert release_decision_reason_rows("b9", blocked)[0]["scenario_ids"] == "s2,s3"


def test_exit_codes_are_fixed() -> None:
    assert dict(EXIT_CODES) == {"allow": 0, "block": 1, "none": 2, "investigate": 3}
    assert [exit_code(d) for d in ("allow", "block", "none", "investigate")] == [0, 1, 2, 3]


@dataclass(frozen=True)
class Report(Piece):
    """A capability report's evidence: it carries the number of judge versions its budget was split over."""

    n_judge_versions: int = 1


OVERSPENT = (
    "the error budget was split over 1 judge version(s) but 2 reports are combined: re-run the reports with the "
    "release's judge versions"
)


def test_reports_budgeted_for_fewer_judge_versions_than_combined_decide_nothing_and_say_why() -> None:
    pieces = [Report("helpfulness-v1", n_judge_versions=1), Report("safety-v1", n_judge_versions=2)]
    decision = decide(pieces)
    assert (decision.decision, decision.exit_code) == ("none", 2)
    assert [(r.severity, r.source, r.finding, r.message) for r in decision.reasons if r.severity == "none"] == [
        ("none", "release", "error_budget", OVERSPENT)
    ]
    # an investigate reason does not outrank the overspent budget
    assert decide([Report("helpfulness-v1", (investigate(),)), Report("safety-v1")]).decision == "none"


def test_reports_sharing_one_budget_split_over_every_combined_version_decide() -> None:
    both = [Report("helpfulness-v1", n_judge_versions=2), Report("safety-v1", n_judge_versions=2)]
    assert decide(both).decision == "allow"
    # evidence that is not a capability report (a check suite) does not count as a share of the budget
    suite = CheckSuiteEvidence("gates", (CheckOutcome("g1", True),))
    assert decide([Report("helpfulness-v1", n_judge_versions=1), suite]).decision == "allow"
